//! Executor behaviour on real threads with a yielding futex (spurious wake-ups are legal, so a
//! `wait` that yields once and returns is a correct, portable implementation for tests).

use std::sync::atomic::{AtomicBool as StdBool, AtomicU32 as StdU32, AtomicUsize as StdUsize};
use std::sync::{Mutex, OnceLock as OnceLockStd};
use std::thread;
use std::time::Duration;
use std::vec::Vec;

use super::*;

struct YieldingFutex;

impl Futex for YieldingFutex {
    fn wait(&self, word: &FutexWord, expected: u32, _timeout: Option<Duration>) {
        if word.load(Ordering::Acquire) == expected {
            thread::yield_now();
        }
    }

    fn wake_one(&self, _word: &FutexWord) {}

    fn wake_all(&self, _word: &FutexWord) {}
}

type TestExecutor<'p, const SLOTS: usize = 8> = Executor<'p, YieldingFutex, SLOTS, 4>;

const RELAXED: std::sync::atomic::Ordering = std::sync::atomic::Ordering::Relaxed;
const SEQ: std::sync::atomic::Ordering = std::sync::atomic::Ordering::SeqCst;

/// Records drains and the final outcome; returns a scripted sequence of results.
struct Scripted {
    name: u32,
    script: Mutex<Vec<Drained>>,
    drains: StdU32,
    finished: Mutex<Vec<Result<(), Failure>>>,
    log: Option<&'static Mutex<Vec<u32>>>,
}

impl Scripted {
    fn new(name: u32, script: &[Drained]) -> Scripted {
        let mut reversed = script.to_vec();
        reversed.reverse();
        Scripted {
            name,
            script: Mutex::new(reversed),
            drains: StdU32::new(0),
            finished: Mutex::new(Vec::new()),
            log: None,
        }
    }

    fn done() -> Scripted {
        Scripted::new(0, &[Drained::Done(Ok(()))])
    }

    fn logging(name: u32, log: &'static Mutex<Vec<u32>>) -> Scripted {
        Scripted { log: Some(log), ..Scripted::new(name, &[Drained::Done(Ok(()))]) }
    }

    fn outcomes(&self) -> Vec<Result<(), Failure>> {
        self.finished.lock().unwrap().clone()
    }
}

impl Drain for Scripted {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.drains.fetch_add(1, SEQ);
        if let Some(log) = self.log {
            log.lock().unwrap().push(self.name);
        }
        self.script.lock().unwrap().pop().unwrap_or(Drained::Done(Ok(())))
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        self.finished.lock().unwrap().push(outcome);
    }
}

/// Runs `workers` workers until `until` holds, then shuts down and joins them.
fn with_workers<'p, const SLOTS: usize>(
    executor: &TestExecutor<'p, SLOTS>,
    workers: usize,
    body: impl FnOnce(),
    until: impl Fn() -> bool,
) {
    thread::scope(|scope| {
        for index in 0..workers {
            let mut worker =
                executor.worker::<RoundRobin>(index, SpinPolicy::Fixed(32)).expect("free index");
            scope.spawn(move || worker.run());
        }
        // Shut down even when `body` or `until` panics, so the scope can join the workers
        // and the failure is reported instead of hanging.
        struct ShutdownOnExit<'a, 'p, const SLOTS: usize>(&'a TestExecutor<'p, SLOTS>);
        impl<const SLOTS: usize> Drop for ShutdownOnExit<'_, '_, SLOTS> {
            fn drop(&mut self) {
                self.0.shutdown();
            }
        }
        let _shutdown = ShutdownOnExit(executor);
        body();
        while !until() {
            thread::yield_now();
        }
    });
}

#[test]
fn an_immediate_process_drains_once_and_finishes_ok() {
    let drain = Scripted::done();
    let process = Process::new(&drain, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    with_workers(&executor, 2, || executor.submit(&process).unwrap(), || process.is_completed());
    assert_eq!(drain.drains.load(SEQ), 1);
    assert_eq!(drain.outcomes(), [Ok(())]);
    assert_eq!(executor.live(), 0);
}

#[test]
fn dependents_run_after_their_upstream_in_chain_order() {
    static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let drains: Vec<Scripted> = (0..4).map(|name| Scripted::logging(name, &LOG)).collect();
    let processes: Vec<Process> =
        drains.iter().map(|drain| Process::new(drain, Class::Immediate)).collect();
    let edges: Vec<[&Process; 1]> = processes[1..].iter().map(|process| [process]).collect();
    for (process, edge) in processes.iter().zip(&edges) {
        process.set_dependents(edge).unwrap();
    }
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    with_workers(
        &executor,
        2,
        || {
            // Submitted last-first: order comes from the dependencies alone.
            for process in processes.iter().rev() {
                executor.submit(process).unwrap();
            }
        },
        || processes.iter().all(Process::is_completed),
    );
    assert_eq!(*LOG.lock().unwrap(), [0, 1, 2, 3]);
}

/// A compute process with `tiles` units claimed by whichever worker drains it.
struct Tiles {
    next: StdU32,
    total: u32,
    done: StdU32,
    claimed_twice: StdBool,
    seen: Vec<StdBool>,
    finished: StdU32,
}

impl Tiles {
    fn new(total: u32) -> Tiles {
        Tiles {
            next: StdU32::new(0),
            total,
            done: StdU32::new(0),
            claimed_twice: StdBool::new(false),
            seen: (0..total).map(|_| StdBool::new(false)).collect(),
            finished: StdU32::new(0),
        }
    }
}

impl Drain for Tiles {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        cx.set_wake_budget(2);
        let tile = self.next.fetch_add(1, SEQ);
        if tile >= self.total {
            return Drained::Sleep;
        }
        if self.seen[tile as usize].swap(true, SEQ) {
            self.claimed_twice.store(true, SEQ);
        }
        *cx.local() += 1;
        if self.done.fetch_add(1, SEQ) + 1 == self.total {
            Drained::Done(Ok(()))
        } else {
            Drained::Progress
        }
    }

    fn finish(&self, _outcome: Result<(), Failure>) {
        self.finished.fetch_add(1, SEQ);
    }
}

#[test]
fn compute_processes_are_drained_by_several_workers_and_finish_once() {
    let tiles = Tiles::new(if cfg!(miri) { 40 } else { 2_000 });
    let process = Process::new(&tiles, Class::Compute);
    let executor = TestExecutor::<8>::new(YieldingFutex, 3).unwrap();
    with_workers(&executor, 3, || executor.submit(&process).unwrap(), || process.is_completed());
    assert!(!tiles.claimed_twice.load(SEQ));
    assert!(tiles.seen.iter().all(|seen| seen.load(SEQ)));
    assert_eq!(tiles.finished.load(SEQ), 1);
    assert_eq!(executor.aggregate_budget().load(Ordering::Relaxed), 0, "budget returned");
}

#[test]
fn more_compute_processes_than_slots_go_through_the_overflow_list() {
    let tiles: Vec<Tiles> = (0..6).map(|_| Tiles::new(5)).collect();
    let processes: Vec<Process> =
        tiles.iter().map(|tiles| Process::new(tiles, Class::Compute)).collect();
    let executor = TestExecutor::<2>::new(YieldingFutex, 2).unwrap();
    with_workers(
        &executor,
        2,
        || {
            for process in &processes {
                executor.submit(process).unwrap();
            }
        },
        || processes.iter().all(Process::is_completed),
    );
    assert!(tiles.iter().all(|tiles| tiles.finished.load(SEQ) == 1));
}

/// Sleeps until its flag is set, then finishes; the flag is Relaxed, so only the executor's
/// wake orders the setter's store before the drain that reads it.
struct Flagged {
    flag: StdBool,
    finished: StdUsize,
}

impl Drain for Flagged {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        if self.flag.load(RELAXED) {
            Drained::Done(Ok(()))
        } else {
            Drained::Sleep
        }
    }

    fn finish(&self, _outcome: Result<(), Failure>) {
        self.finished.fetch_add(1, RELAXED);
    }
}

#[test]
fn compute_processes_woken_while_they_wait_for_a_slot_all_finish() {
    // Two slots and a submitter that wakes each process right after submitting it: most
    // wakes find their process on the overflow list, or being claimed (state module,
    // invariant 6). A wake that is lost leaves its process asleep for good. (Fewer under Miri,
    // which interprets every step.)
    let processes_count = if cfg!(miri) { 64 } else { 100_000 };
    let flagged: Vec<Flagged> = (0..processes_count)
        .map(|_| Flagged { flag: StdBool::new(false), finished: StdUsize::new(0) })
        .collect();
    let processes: Vec<Process> =
        flagged.iter().map(|flagged| Process::new(flagged, Class::Compute)).collect();
    let executor = TestExecutor::<2>::new(YieldingFutex, 2).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    with_workers(
        &executor,
        2,
        || {
            for (process, flagged) in processes.iter().zip(&flagged) {
                executor.submit(process).unwrap();
                flagged.flag.store(true, RELAXED);
                executor.wake(process);
            }
        },
        || {
            let done = processes.iter().all(Process::is_completed);
            assert!(
                done || std::time::Instant::now() < deadline,
                "{} of {processes_count} processes still asleep after their wake",
                processes.iter().filter(|process| !process.is_completed()).count()
            );
            done
        },
    );
    assert!(flagged.iter().all(|flagged| flagged.finished.load(RELAXED) == 1));
}

#[test]
fn a_sleeping_process_runs_again_only_when_woken() {
    let drain = Scripted::new(0, &[Drained::Sleep, Drained::Done(Ok(()))]);
    let process = Process::new(&drain, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    with_workers(
        &executor,
        1,
        || {
            executor.submit(&process).unwrap();
            while drain.drains.load(SEQ) == 0 {
                thread::yield_now();
            }
            while !process.state().load().is_sleeping() {
                thread::yield_now();
            }
            thread::sleep(Duration::from_millis(5));
            assert_eq!(drain.drains.load(SEQ), 1, "asleep: not drained again");
            executor.wake(&process);
        },
        || process.is_completed(),
    );
    assert_eq!(drain.drains.load(SEQ), 2);
}

#[test]
fn a_compute_process_sleeps_until_woken() {
    // One worker: with two, a second drainer may legitimately drain while the first one's
    // `Sleep` is on its way back.
    let drain = Scripted::new(0, &[Drained::Sleep, Drained::Done(Ok(()))]);
    let process = Process::new(&drain, Class::Compute);
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    with_workers(
        &executor,
        1,
        || {
            executor.submit(&process).unwrap();
            while drain.drains.load(SEQ) == 0 {
                thread::yield_now();
            }
            thread::sleep(Duration::from_millis(5));
            assert_eq!(drain.drains.load(SEQ), 1, "asleep: skipped by scans");
            executor.wake(&process);
        },
        || process.is_completed(),
    );
    assert_eq!(drain.outcomes(), [Ok(())]);
}

#[test]
fn cancelling_a_sleeper_runs_its_bail_path_and_cascades_to_dependents() {
    let sleeper = Scripted::new(0, &[Drained::Sleep]);
    let downstream = Scripted::done();
    let process = Process::new(&sleeper, Class::Immediate);
    let dependent = Process::new(&downstream, Class::Compute);
    let edge = [&dependent];
    process.set_dependents(&edge).unwrap();
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    with_workers(
        &executor,
        2,
        || {
            executor.submit(&dependent).unwrap();
            executor.submit(&process).unwrap();
            while !process.state().load().is_sleeping() {
                thread::yield_now();
            }
            executor.cancel(&process);
        },
        || dependent.is_completed(),
    );
    assert_eq!(sleeper.outcomes(), [Err(Failure::Cancelled)]);
    assert_eq!(downstream.drains.load(SEQ), 0, "a failed upstream means no drain");
    assert_eq!(downstream.outcomes(), [Err(Failure::Cancelled)]);
    executor.cancel(&process);
    assert_eq!(sleeper.outcomes().len(), 1, "cancelling a completed process is a no-op");
}

#[test]
fn a_failure_reaches_every_dependent_and_the_first_failure_wins() {
    let failing = Scripted::new(0, &[Drained::Done(Err(Failure::Application(7)))]);
    let also_failing = Scripted::new(1, &[Drained::Done(Err(Failure::Aborted))]);
    let joined = Scripted::done();
    let first = Process::new(&failing, Class::Immediate);
    let second = Process::new(&also_failing, Class::Immediate);
    let join = Process::new(&joined, Class::Immediate);
    let edge = [&join];
    first.set_dependents(&edge).unwrap();
    second.set_dependents(&edge).unwrap();
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    with_workers(
        &executor,
        2,
        || {
            executor.submit(&join).unwrap();
            executor.submit(&first).unwrap();
            executor.submit(&second).unwrap();
        },
        || join.is_completed(),
    );
    let outcome = joined.outcomes();
    assert_eq!(outcome.len(), 1);
    assert!(
        outcome[0] == Err(Failure::Application(7)) || outcome[0] == Err(Failure::Aborted),
        "one of the upstream failures, whichever completed first: {outcome:?}"
    );
    assert_eq!(joined.drains.load(SEQ), 0);
}

#[test]
fn shutdown_cancels_work_in_flight_and_returns() {
    // Two workers may both drain it before it is asleep: it sleeps every time.
    let sleeper = Scripted::new(0, &[Drained::Sleep; 64]);
    let process = Process::new(&sleeper, Class::Compute);
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    with_workers(
        &executor,
        2,
        || {
            executor.submit(&process).unwrap();
            while sleeper.drains.load(SEQ) == 0 {
                thread::yield_now();
            }
        },
        || true,
    );
    assert_eq!(sleeper.outcomes(), [Err(Failure::Cancelled)]);
    let late = Scripted::done();
    let refused = Process::new(&late, Class::Immediate);
    assert_eq!(executor.submit(&refused), Err(ProcessError::ShutDown));
}

#[test]
fn completed_storage_is_rearmed_and_reused() {
    let drain = Scripted::new(0, &[Drained::Done(Ok(())), Drained::Done(Ok(()))]);
    let process = Process::new(&drain, Class::Immediate);
    assert_eq!(process.rearm(), Err(ProcessError::NotCompleted));
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    with_workers(
        &executor,
        1,
        || {
            executor.submit(&process).unwrap();
            while !process.is_completed() {
                thread::yield_now();
            }
            process.rearm().unwrap();
            executor.submit(&process).unwrap();
        },
        || process.is_completed() && drain.outcomes().len() == 2,
    );
    assert_eq!(drain.drains.load(SEQ), 2);
}

#[test]
fn holds_delay_activation_until_released() {
    let drain = Scripted::done();
    let process = Process::new(&drain, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    executor.hold(&process).unwrap();
    executor.hold(&process).unwrap();
    // Before submission a release never drops the creation hold.
    executor.release(&process).unwrap();
    executor.submit(&process).unwrap();
    assert!(!process.is_completed());
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    assert!(!worker.step(), "still held");
    executor.release(&process).unwrap();
    assert!(worker.step());
    assert!(process.is_completed());
    assert_eq!(executor.release(&process), Err(ProcessError::NotSuspended));
    assert_eq!(executor.hold(&process), Err(ProcessError::AlreadySubmitted));
}

/// A release with no hold to match takes one of the suspensions a dependency holds: the
/// dependency's completion must then neither activate the process before its submission nor
/// wrap its count after it (each completion drops its suspension with one decrement).
#[test]
fn an_unmatched_release_leaves_submission_to_activate_and_no_count_wrapped() {
    let drains: [Scripted; 4] = core::array::from_fn(|_| Scripted::done());
    let [early_dependency, early_dependent, late_dependency, late_dependent] =
        drains.each_ref().map(|drain| Process::new(drain, Class::Immediate));
    let (early_dependents, late_dependents) = ([&early_dependent], [&late_dependent]);
    early_dependency.set_dependents(&early_dependents).unwrap();
    late_dependency.set_dependents(&late_dependents).unwrap();
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();

    // Taken before the dependent's submission: the dependency's completion finds only the
    // creation hold left, and submission activates the dependent.
    executor.release(&early_dependent).unwrap();
    executor.submit(&early_dependency).unwrap();
    assert!(worker.step());
    assert!(early_dependency.is_completed());
    assert!(!worker.step(), "the dependent is not submitted: nothing may run it");
    assert!(!early_dependent.is_completed());
    executor.submit(&early_dependent).unwrap();
    assert!(worker.step());
    assert!(early_dependent.is_completed());
    assert_eq!(drains[1].drains.load(SEQ), 1);

    // Taken, then the dependent submitted (and so activated) before the dependency ran: the
    // dependency's completion finds the count at zero and leaves it there.
    executor.release(&late_dependent).unwrap();
    executor.submit(&late_dependent).unwrap();
    executor.submit(&late_dependency).unwrap();
    assert!(worker.step() && worker.step());
    assert!(late_dependency.is_completed() && late_dependent.is_completed());
    assert_eq!(drains[3].drains.load(SEQ), 1);
    assert_eq!(
        executor.release(&late_dependent),
        Err(ProcessError::NotSuspended),
        "the count did not wrap below zero"
    );
}

#[test]
fn configuration_mistakes_are_typed_errors() {
    let drain = Scripted::done();
    let process = Process::new(&drain, Class::Immediate);
    let other = Process::new(&drain, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    executor.submit(&other).unwrap();
    let edge = [&other];
    assert_eq!(process.set_dependents(&edge), Err(ProcessError::DependentSubmitted));
    executor.submit(&process).unwrap();
    assert_eq!(executor.submit(&process), Err(ProcessError::AlreadySubmitted));
    assert_eq!(process.set_dependents(&[]), Err(ProcessError::AlreadySubmitted));
    assert!(matches!(
        TestExecutor::<8>::new(YieldingFutex, 5),
        Err(ExecutorError::WorkerCount { requested: 5, capacity: 4 })
    ));
    assert!(matches!(
        TestExecutor::<8>::new(YieldingFutex, 0),
        Err(ExecutorError::WorkerCount { .. })
    ));
    assert!(matches!(
        TestExecutor::<8>::with_fanout(YieldingFutex, 1, 0),
        Err(ExecutorError::Fanout)
    ));
    let first = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
    assert!(matches!(
        executor.worker::<RoundRobin>(1, SpinPolicy::Park),
        Err(ExecutorError::WorkerTaken(1))
    ));
    assert!(matches!(
        executor.worker::<RoundRobin>(2, SpinPolicy::Park),
        Err(ExecutorError::WorkerTaken(2))
    ));
    drop(first);
    assert!(executor.worker::<RoundRobin>(1, SpinPolicy::Park).is_ok(), "index given back");
}

#[test]
fn a_single_worker_main_loop_steps_without_blocking() {
    let counter = StdUsize::new(0);
    struct Count<'a>(&'a StdUsize);
    impl Drain for Count<'_> {
        fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
            if self.0.fetch_add(1, RELAXED) < 2 {
                Drained::Progress
            } else {
                Drained::Done(Ok(()))
            }
        }
    }
    let drain = Count(&counter);
    let process = Process::with_priority(&drain, Class::Compute, 200);
    let executor = Executor::<YieldingFutex, 4, 1>::new(YieldingFutex, 1).unwrap();
    let mut worker = executor.worker::<Priority<4>>(0, SpinPolicy::Park).unwrap();
    assert!(!worker.step());
    executor.submit(&process).unwrap();
    while worker.step() {}
    assert!(process.is_completed());
    assert_eq!(counter.load(RELAXED), 3);
}

/// Counts parks and yields; a wait ends at once as if a waker had answered it.
#[derive(Default)]
struct CountingYields {
    waits: StdUsize,
    yields: StdUsize,
}

impl Futex for CountingYields {
    fn wait(&self, word: &FutexWord, expected: u32, _timeout: Option<Duration>) {
        // Relaxed: only the parking worker's own thread calls this, on its own word, and
        // nobody else wakes it in this test.
        if word.load(Ordering::Relaxed) == expected {
            self.waits.fetch_add(1, SEQ);
            word.store(AWAKE, Ordering::Relaxed);
        }
    }

    fn wake_one(&self, _word: &FutexWord) {}

    fn wake_all(&self, _word: &FutexWord) {}

    fn yield_now(&self) {
        self.yields.fetch_add(1, SEQ);
    }
}

#[test]
fn a_spinning_worker_offers_its_cpu_every_idle_scans_per_yield_scans() {
    // Two offers per spin, then a park that returns at once: the count of each follows the
    // other exactly, whatever the threads' timing.
    let spin = SpinPolicy::Fixed(2 * IDLE_SCANS_PER_YIELD + IDLE_SCANS_PER_YIELD / 2);
    let executor = Executor::<CountingYields, 4, 1>::new(CountingYields::default(), 1).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, spin).unwrap();
    thread::scope(|scope| {
        let running = scope.spawn(move || worker.run());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while executor.futex().waits.load(SEQ) < 3 && std::time::Instant::now() < deadline {
            thread::yield_now();
        }
        executor.shutdown();
        running.join().expect("the worker returns after shutdown");
    });
    let (waits, yields) = (executor.futex().waits.load(SEQ), executor.futex().yields.load(SEQ));
    assert!(waits >= 3, "the worker parked {waits} times");
    // The spin cut short by shutdown may have offered its CPU fewer than twice.
    assert!((2 * waits..=2 * waits + 2).contains(&yields), "{yields} offers over {waits} parks");
}

#[test]
fn a_handed_off_dependent_keeps_fifo_order_behind_queued_work() {
    static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let drains: Vec<Scripted> = (0..4).map(|name| Scripted::logging(name, &LOG)).collect();
    let [upstream, queued, first, second] =
        [0, 1, 2, 3].map(|i| Process::new(&drains[i], Class::Immediate));
    let edges = [&first, &second];
    upstream.set_dependents(&edges).unwrap();
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    executor.submit(&first).unwrap();
    executor.submit(&second).unwrap();
    executor.submit(&upstream).unwrap();
    executor.submit(&queued).unwrap();
    while worker.step() {}
    // `queued` was in the list when `upstream` completed, so both dependents went behind it.
    assert_eq!(*LOG.lock().unwrap(), [0, 1, 2, 3]);
    LOG.lock().unwrap().clear();
    for process in [&upstream, &queued, &first, &second] {
        process.rearm().unwrap();
    }
    upstream.set_dependents(&edges).unwrap();
    executor.submit(&first).unwrap();
    executor.submit(&second).unwrap();
    executor.submit(&upstream).unwrap();
    assert!(worker.step(), "runs `upstream`, whose completion hands `first` to this worker");
    assert!(!first.is_completed() && !second.is_completed());
    executor.submit(&queued).unwrap();
    while worker.step() {}
    // The hand-off runs first, then the list in push order.
    assert_eq!(*LOG.lock().unwrap(), [0, 2, 3, 1]);
}

#[test]
fn a_worker_dropped_with_a_hand_off_gives_it_back_to_the_list() {
    let drains = [Scripted::done(), Scripted::done()];
    let upstream = Process::new(&drains[0], Class::Immediate);
    let dependent = Process::new(&drains[1], Class::Immediate);
    let edge = [&dependent];
    upstream.set_dependents(&edge).unwrap();
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    executor.submit(&dependent).unwrap();
    executor.submit(&upstream).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    assert!(worker.step());
    assert!(upstream.is_completed());
    drop(worker);
    let mut other = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
    assert!(other.step(), "the dependent is back on the list");
    assert!(dependent.is_completed());
    assert_eq!(drains[1].outcomes(), [Ok(())]);
    assert_eq!(executor.live(), 0);
}

#[test]
#[cfg(target_pointer_width = "64")]
fn a_process_is_two_cache_lines_on_hosts() {
    // The core line packs the fixed and activation fields into 64 bytes; the wake budget has
    // its own line.
    use crate::CachePadded;
    let lines = size_of::<CachePadded<[u8; 64]>>() + size_of::<CachePadded<u32>>();
    assert_eq!(size_of::<Process>(), lines);
    assert_eq!(align_of::<Process>(), align_of::<CachePadded<u32>>());
}

/// On its first drain, wakes `target` with [`Executor::wake_deferred`] and hands the token to
/// its worker (or publishes it); then follows its script.
struct Waker<'e, 'p> {
    executor: &'e TestExecutor<'p>,
    target: &'p Process<'p>,
    hand_off: bool,
    inner: Scripted,
}

impl<'e, 'p> Waker<'e, 'p> {
    /// A waker that hands its wake to its own worker, then follows `inner`'s script.
    fn handing_off(
        executor: &'e TestExecutor<'p>,
        target: &'p Process<'p>,
        inner: Scripted,
    ) -> Self {
        Waker { executor, target, hand_off: true, inner }
    }
}

impl Drain for Waker<'_, '_> {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        if self.inner.drains.load(SEQ) == 0 {
            let woken = self.executor.wake_deferred(self.target).expect("the target was asleep");
            if self.hand_off {
                cx.hand_off(woken);
            } else {
                woken.publish();
            }
        }
        self.inner.drain(cx)
    }
}

fn logging(name: u32, script: &[Drained], log: &'static Mutex<Vec<u32>>) -> Scripted {
    Scripted { log: Some(log), ..Scripted::new(name, script) }
}

/// A log for processes whose order no test reads.
static EMPTY_LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());

const SLEEP_THEN_DONE: [Drained; 2] = [Drained::Sleep, Drained::Done(Ok(()))];
const DONE: [Drained; 1] = [Drained::Done(Ok(()))];

#[test]
fn a_wake_handed_off_by_a_drain_runs_next_on_the_same_worker() {
    static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let (sleepy, late) = (logging(1, &SLEEP_THEN_DONE, &LOG), logging(2, &DONE, &LOG));
    let (sleeper, later) =
        (Process::new(&sleepy, Class::Immediate), Process::new(&late, Class::Immediate));
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    let waking = Waker::handing_off(&executor, &sleeper, logging(0, &DONE, &LOG));
    let waker = Process::new(&waking, Class::Immediate);
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    executor.submit(&sleeper).unwrap();
    assert!(worker.step());
    assert!(sleeper.state().load().is_sleeping());
    executor.submit(&waker).unwrap();
    assert!(worker.step(), "runs the waker, which hands the sleeper to this worker");
    assert!(sleeper.state().load().is_running(), "woken and claimed by the worker");
    assert!(executor.immediate().looks_empty(), "the hand-off never touched the list");
    executor.submit(&later).unwrap();
    while worker.step() {}
    // The hand-off runs before `later`, which was pushed after the wake.
    assert_eq!(*LOG.lock().unwrap(), [1, 0, 1, 2]);
    assert!(sleeper.is_completed() && later.is_completed());
}

#[test]
fn a_drain_that_keeps_working_hands_its_wake_to_its_worker_and_queues_itself_behind() {
    static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let sleepy = logging(1, &SLEEP_THEN_DONE, &LOG);
    let sleeper = Process::new(&sleepy, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    let script = [Drained::Progress, Drained::Done(Ok(()))];
    let waking = Waker::handing_off(&executor, &sleeper, logging(0, &script, &LOG));
    let waker = Process::new(&waking, Class::Immediate);
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    executor.submit(&sleeper).unwrap();
    assert!(worker.step());
    executor.submit(&waker).unwrap();
    assert!(worker.step());
    assert!(sleeper.state().load().is_running(), "claimed by this worker, not published");
    assert!(waker.state().load().is_queued(), "the drained process is back on the list");
    assert!(!executor.immediate().looks_empty(), "for any worker to take");
    while worker.step() {}
    assert_eq!(*LOG.lock().unwrap(), [1, 0, 1, 0]);
    assert!(sleeper.is_completed() && waker.is_completed());
}

#[test]
fn a_drain_that_keeps_working_behind_taken_work_publishes_its_wake_ahead_of_itself() {
    static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let (sleepy, late) = (logging(1, &SLEEP_THEN_DONE, &LOG), logging(2, &DONE, &LOG));
    let (sleeper, later) =
        (Process::new(&sleepy, Class::Immediate), Process::new(&late, Class::Immediate));
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    let script = [Drained::Progress, Drained::Done(Ok(()))];
    let waking = Waker::handing_off(&executor, &sleeper, logging(0, &script, &LOG));
    let waker = Process::new(&waking, Class::Immediate);
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    executor.submit(&sleeper).unwrap();
    assert!(worker.step());
    // The worker takes both from the list in one run: `later` must not be overtaken.
    executor.submit(&waker).unwrap();
    executor.submit(&later).unwrap();
    assert!(worker.step());
    assert!(sleeper.state().load().is_queued(), "published, not kept");
    while worker.step() {}
    assert_eq!(*LOG.lock().unwrap(), [1, 0, 2, 1, 0]);
    assert!(sleeper.is_completed() && waker.is_completed() && later.is_completed());
}

#[test]
fn a_drain_sees_other_work_waiting_for_its_worker() {
    /// Records what `others_waiting` said on each drain.
    struct Looks {
        seen: Mutex<Vec<bool>>,
    }
    impl Drain for Looks {
        fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
            let mut seen = self.seen.lock().unwrap();
            seen.push(cx.others_waiting());
            if seen.len() < 3 {
                Drained::Progress
            } else {
                Drained::Done(Ok(()))
            }
        }
    }
    let looks = Looks { seen: Mutex::new(Vec::new()) };
    let looker = Process::new(&looks, Class::Immediate);
    let other = logging(1, &DONE, &EMPTY_LOG);
    let queued = Process::new(&other, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    executor.submit(&looker).unwrap();
    assert!(worker.step(), "alone: nothing else waits");
    executor.submit(&queued).unwrap();
    assert!(worker.step(), "taken in one run with the other process, which waits behind it");
    while worker.step() {}
    // Then the other process ran, and the looker is alone again.
    assert_eq!(*looks.seen.lock().unwrap(), [false, true, false]);
    assert!(looker.is_completed() && queued.is_completed());
}

#[test]
fn a_deferred_wake_that_is_not_handed_off_is_published_to_every_worker() {
    static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let sleepy = logging(1, &SLEEP_THEN_DONE, &LOG);
    let sleeper = Process::new(&sleepy, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    let waking = Waker {
        executor: &executor,
        target: &sleeper,
        hand_off: false,
        inner: logging(0, &DONE, &LOG),
    };
    let waker = Process::new(&waking, Class::Immediate);
    let mut first = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    let mut second = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
    executor.submit(&sleeper).unwrap();
    assert!(first.step());
    executor.submit(&waker).unwrap();
    assert!(first.step());
    assert!(second.step(), "the other worker finds the published wake on the list");
    assert!(sleeper.is_completed());
    assert!(!first.step());
    assert_eq!(*LOG.lock().unwrap(), [1, 0, 1]);
}

#[test]
fn a_hand_off_to_a_worker_of_another_executor_is_published_to_its_own() {
    static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let sleepy = logging(1, &SLEEP_THEN_DONE, &LOG);
    let sleeper = Process::new(&sleepy, Class::Immediate);
    let home = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    let foreign = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    // The waker runs on `foreign` but wakes a process of `home`.
    let waking = Waker::handing_off(&home, &sleeper, logging(0, &DONE, &LOG));
    let waker = Process::new(&waking, Class::Immediate);
    let mut home_worker = home.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    let mut foreign_worker = foreign.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    home.submit(&sleeper).unwrap();
    assert!(home_worker.step());
    foreign.submit(&waker).unwrap();
    assert!(foreign_worker.step());
    assert!(!foreign_worker.step(), "a foreign worker never runs the hand-off");
    assert!(home_worker.step(), "its own executor's list has it");
    assert!(sleeper.is_completed());
    assert_eq!(*LOG.lock().unwrap(), [1, 0, 1]);
}

#[test]
fn a_deferred_wake_of_a_running_process_only_notifies_it() {
    static LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    struct WakesItself<'e, 'p> {
        executor: &'e TestExecutor<'p>,
        me: OnceLockStd<&'p Process<'p>>,
        inner: Scripted,
    }
    impl Drain for WakesItself<'_, '_> {
        fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
            if self.inner.drains.load(SEQ) == 0 {
                assert!(self.executor.wake_deferred(self.me.get().unwrap()).is_none());
            }
            self.inner.drain(cx)
        }
    }
    let executor = TestExecutor::<8>::new(YieldingFutex, 1).unwrap();
    let drain = WakesItself {
        executor: &executor,
        me: OnceLockStd::new(),
        inner: logging(0, &SLEEP_THEN_DONE, &LOG),
    };
    let process = Process::new(&drain, Class::Immediate);
    drain.me.set(&process).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    executor.submit(&process).unwrap();
    while worker.step() {}
    // The `Sleep` met the NOTIFIED flag and requeued the process.
    assert_eq!(*LOG.lock().unwrap(), [0, 0]);
    assert!(process.is_completed());
}

/// Sets its wake budget to the next entry of `budgets` on each drain, then finishes.
struct Budgeted {
    budgets: &'static [u32],
    drains: StdUsize,
}

impl Drain for Budgeted {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        match self.budgets.get(self.drains.fetch_add(1, SEQ)) {
            Some(&budget) => {
                cx.set_wake_budget(budget);
                Drained::Progress
            }
            None => Drained::Done(Ok(())),
        }
    }
}

#[test]
fn raising_a_compute_budget_wakes_parked_workers_for_the_increase_only() {
    let drain = Budgeted { budgets: &[3, 2, 4], drains: StdUsize::new(0) };
    let process = Process::new(&drain, Class::Compute);
    let executor = TestExecutor::<8>::new(YieldingFutex, 4).unwrap();
    // Submitted with a budget of one while nobody is parked: no wake is owed yet.
    executor.submit(&process).unwrap();
    // Workers 1, 2 and 3 have parked.
    executor.idle_mask().store(0b1110, SEQ);
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    let woken = || 3 - executor.idle_mask().load(SEQ).count_ones();

    assert!(worker.step(), "1 → 3");
    assert_eq!(woken(), 1, "one parked worker is woken at once");
    assert_eq!(executor.pending_wakes.load(SEQ), 1, "the other through the wake tree");
    executor.pending_wakes.store(0, SEQ);

    assert!(worker.step(), "3 → 2");
    assert_eq!((woken(), executor.pending_wakes.load(SEQ)), (1, 0), "lowering wakes nobody");

    assert!(worker.step(), "2 → 4");
    assert_eq!(woken(), 2);
    assert_eq!(executor.pending_wakes.load(SEQ), 1);
    assert_eq!(executor.aggregate_budget().load(SEQ), 4);
}

#[test]
fn an_immediate_process_s_budget_wakes_nobody() {
    let drain = Budgeted { budgets: &[4], drains: StdUsize::new(0) };
    let process = Process::new(&drain, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 4).unwrap();
    executor.submit(&process).unwrap();
    executor.idle_mask().store(0b1110, SEQ);
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    assert!(worker.step());
    assert_eq!(executor.idle_mask().load(SEQ), 0b1110);
    assert_eq!(executor.aggregate_budget().load(SEQ), 0, "not part of the aggregate");
}

mod homes;

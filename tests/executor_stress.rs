//! Executor stress on real worker threads: many activations with workers parking between
//! bursts, cancellation cascading through a long chain, and failures racing each other.
//!
//! Every outcome asserted here is deterministic (counts, which processes finished how); only the
//! interleavings vary. Nothing is timed. A test that stops making progress fails instead of
//! hanging: waits panic at a deadline; while a failing test unwinds its executor is shut down
//! (by `Runtime::scope` itself, or by a guard where a test runs its own workers), so joining the
//! workers cannot block; and a watchdog aborts the whole binary if a test outlives a hard
//! deadline anyway.
//!
//! CI runs this file in release (`cargo test --release --test executor_stress`); it also runs in
//! a few seconds in debug, as part of `cargo test --workspace`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use causeway::core::unpoisoned::Mutex;
use causeway::executor::{
    Class, Drain, DrainContext, Drained, Executor, Futex, FutexWord, Process, RoundRobin,
    SpinPolicy,
};
use causeway::{Failure, HostFutex, Runtime};

/// Waits that take longer than this fail the test.
const DEADLINE: Duration = Duration::from_secs(60);

/// A test still running this long is aborted with the whole binary: something did not unwind.
const HARD_DEADLINE: Duration = Duration::from_secs(90);

/// Aborts the test binary if the test that armed it is still running after [`HARD_DEADLINE`],
/// e.g. because a worker thread can no longer be joined. Disarmed when dropped.
struct Watchdog {
    disarm: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    fn arm(test: &'static str) -> Watchdog {
        let (disarm, disarmed) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            if disarmed.recv_timeout(HARD_DEADLINE) == Err(RecvTimeoutError::Timeout) {
                eprintln!("{test}: still running after {HARD_DEADLINE:?}; aborting, not hanging");
                std::process::abort();
            }
        });
        Watchdog { disarm: Some(disarm), thread: Some(thread) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Dropping the sender ends the watchdog's wait with `Disconnected`.
        drop(self.disarm.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Panics when a wait outlives the test's deadline.
struct Deadline(Instant);

impl Deadline {
    fn start() -> Deadline {
        Deadline(Instant::now() + DEADLINE)
    }

    fn wait_until(&self, what: &str, condition: impl Fn() -> bool) {
        while !condition() {
            assert!(Instant::now() < self.0, "not reached within {DEADLINE:?}: {what}");
            thread::yield_now();
        }
    }
}

/// Shuts the executor down when dropped, including while a failing test unwinds: workers then
/// return from `run`, so the `thread::scope` that joins them does not block.
struct ShutdownOnDrop<'e, 'p, F: Futex, const SLOTS: usize, const WORKERS: usize>(
    &'e Executor<'p, F, SLOTS, WORKERS>,
);

impl<F: Futex, const SLOTS: usize, const WORKERS: usize> Drop
    for ShutdownOnDrop<'_, '_, F, SLOTS, WORKERS>
{
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// Counts drains and finishes, keeps the last outcome, and completes with `result` when drained.
struct Recorder {
    result: Result<(), Failure>,
    drains: AtomicU32,
    finishes: AtomicU32,
    outcome: Mutex<Option<Result<(), Failure>>>,
}

impl Recorder {
    fn new(result: Result<(), Failure>) -> Recorder {
        Recorder {
            result,
            drains: AtomicU32::new(0),
            finishes: AtomicU32::new(0),
            outcome: Mutex::new(None),
        }
    }

    fn outcome(&self) -> Option<Result<(), Failure>> {
        *self.outcome.lock()
    }

    fn reset(&self) {
        self.drains.store(0, Ordering::Relaxed);
        self.finishes.store(0, Ordering::Relaxed);
        *self.outcome.lock() = None;
    }
}

impl Drain for Recorder {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.drains.fetch_add(1, Ordering::Relaxed);
        Drained::Done(self.result)
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        self.finishes.fetch_add(1, Ordering::Relaxed);
        *self.outcome.lock() = Some(outcome);
    }
}

/// The host's native futex (the kernel's on Linux, `WaitOnAddress` on Windows), counting how
/// often workers park and are woken.
struct CountingFutex {
    futex: HostFutex,
    waits: AtomicU64,
    wakes: AtomicU64,
}

impl Futex for CountingFutex {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.futex.wait(word, expected, timeout);
    }

    fn wake_one(&self, word: &FutexWord) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        self.futex.wake_one(word);
    }

    fn wake_all(&self, word: &FutexWord) {
        self.futex.wake_all(word);
    }
}

/// Activations in the million-activation test.
const ACTIVATIONS: usize = 1_000_000;

/// Diamonds (root → left, right → join) per burst: 1000 activations a burst.
const DIAMONDS_PER_BURST: usize = 250;

/// Quiet time after each burst: far longer than the workers' few idle scans, so they park.
const BETWEEN_BURSTS: Duration = Duration::from_micros(200);

/// One unit of work per activation. Several workers may drain a compute process at once (and
/// all may return `Done`), so the unit is claimed: exactly one drain per activation does it.
struct Unit {
    claimed: AtomicBool,
    done: AtomicU32,
    drains: AtomicU32,
    finishes: AtomicU32,
}

impl Drain for Unit {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.drains.fetch_add(1, Ordering::Relaxed);
        if !self.claimed.swap(true, Ordering::Relaxed) {
            self.done.fetch_add(1, Ordering::Relaxed);
        }
        Drained::Done(Ok(()))
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        assert_eq!(outcome, Ok(()), "a unit never fails");
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_million_activations_on_parking_workers_are_all_drained_once() {
    let _watchdog = Watchdog::arm("a_million_activations_on_parking_workers_are_all_drained_once");
    let deadline = Deadline::start();
    let per_burst = 4 * DIAMONDS_PER_BURST;
    let bursts = ACTIVATIONS / per_burst;
    let units: Vec<Unit> = (0..per_burst)
        .map(|_| Unit {
            claimed: AtomicBool::new(false),
            done: AtomicU32::new(0),
            drains: AtomicU32::new(0),
            finishes: AtomicU32::new(0),
        })
        .collect();
    // Each diamond: an immediate root, two compute sides (more sides than slots: the overflow
    // list is used too), an immediate join. Roots are activated by submission, sides and joins by
    // completions on the workers, the join by whichever side completes last.
    let class_of = |index: usize| match index % 4 {
        1 | 2 => Class::Compute,
        _ => Class::Immediate,
    };
    let processes: Vec<Process> =
        units.iter().enumerate().map(|(index, unit)| Process::new(unit, class_of(index))).collect();
    let diamonds: Vec<&[Process]> = processes.chunks(4).collect();
    let root_edges: Vec<[&Process; 2]> =
        diamonds.iter().map(|diamond| [&diamond[1], &diamond[2]]).collect();
    let join_edges: Vec<[&Process; 1]> = diamonds.iter().map(|diamond| [&diamond[3]]).collect();

    let futex = CountingFutex {
        futex: HostFutex::new(),
        waits: AtomicU64::new(0),
        wakes: AtomicU64::new(0),
    };
    let executor =
        Executor::<&CountingFutex, 64, 2>::new(&futex, 2).expect("a two-worker executor");
    thread::scope(|scope| {
        let _shutdown = ShutdownOnDrop(&executor);
        for index in 0..2 {
            let mut worker =
                executor.worker::<RoundRobin>(index, SpinPolicy::Fixed(16)).expect("a free index");
            scope.spawn(move || worker.run());
        }
        for burst in 1..=bursts {
            for (process, unit) in processes.iter().zip(&units) {
                if process.is_completed() {
                    process.rearm().expect("a completed process rearms");
                }
                unit.claimed.store(false, Ordering::Relaxed);
            }
            for ((diamond, root_edge), join_edge) in
                diamonds.iter().zip(&root_edges).zip(&join_edges)
            {
                diamond[0].set_dependents(root_edge).expect("a fresh root takes dependents");
                diamond[1].set_dependents(join_edge).expect("a fresh side takes dependents");
                diamond[2].set_dependents(join_edge).expect("a fresh side takes dependents");
            }
            // Dependents first, so every side and join is activated by a worker.
            for process in processes.iter().rev() {
                executor.submit(process).expect("a fresh process submits");
            }
            deadline.wait_until("a burst completes", || executor.live() == 0);
            let expected = burst as u32;
            for (index, unit) in units.iter().enumerate() {
                assert_eq!(unit.done.load(Ordering::Relaxed), expected, "unit {index}: work once");
                let finishes = unit.finishes.load(Ordering::Relaxed);
                assert_eq!(finishes, expected, "unit {index}: one finish per activation");
                let drains = unit.drains.load(Ordering::Relaxed);
                match class_of(index) {
                    Class::Immediate => assert_eq!(drains, expected, "unit {index}: one drain"),
                    _ => assert!(drains >= expected, "unit {index}: drained every activation"),
                }
            }
            thread::sleep(BETWEEN_BURSTS);
        }
    });
    let done: u64 = units.iter().map(|unit| u64::from(unit.done.load(Ordering::Relaxed))).sum();
    assert_eq!(bursts * per_burst, ACTIVATIONS, "the whole count ran");
    assert_eq!(done, ACTIVATIONS as u64, "no activation lost or repeated");
    assert_eq!(executor.live(), 0, "nothing left live");
    assert!(futex.waits.load(Ordering::Relaxed) > 0, "workers parked between bursts");
    assert!(futex.wakes.load(Ordering::Relaxed) > 0, "activations woke parked workers");
}

/// Processes in the cancellation chain after its head.
const CHAIN_DEPENDENTS: usize = 10_000;

#[test]
fn cancelling_the_head_of_a_10k_chain_finishes_every_process_cancelled_undrained() {
    let _watchdog = Watchdog::arm("cancelling_the_head_of_a_10k_chain");
    let deadline = Deadline::start();
    let recorders: Vec<Recorder> = (0..=CHAIN_DEPENDENTS).map(|_| Recorder::new(Ok(()))).collect();
    // Alternating classes: the failure travels through the immediate list and the slots.
    let processes: Vec<Process> = recorders
        .iter()
        .enumerate()
        .map(|(index, recorder)| {
            let class = if index % 2 == 0 { Class::Immediate } else { Class::Compute };
            Process::new(recorder, class)
        })
        .collect();
    let edges: Vec<[&Process; 1]> = processes[1..].iter().map(|next| [next]).collect();
    for (process, edge) in processes.iter().zip(&edges) {
        process.set_dependents(edge).expect("a fresh process takes dependents");
    }
    Runtime::builder()
        .workers(2)
        .scope(|executor| {
            let head = &processes[0];
            executor.hold(head).expect("a fresh head can be held");
            for process in &processes {
                executor.submit(process).expect("a fresh process submits");
            }
            // Cancelled while suspended: the failure is recorded, and the release activates a
            // process that completes without being drained.
            executor.cancel(head);
            executor.release(head).expect("the head is held");
            let tail = processes.last().expect("the chain is not empty");
            deadline.wait_until("the cancellation reaches the tail", || tail.is_completed());
            deadline.wait_until("every process is accounted for", || executor.live() == 0);
        })
        .expect("start the runtime");
    for (index, (process, recorder)) in processes.iter().zip(&recorders).enumerate() {
        assert!(process.is_completed(), "process {index} completed");
        assert_eq!(process.failure(), Some(Failure::Cancelled), "process {index} failure");
        assert_eq!(recorder.drains.load(Ordering::Relaxed), 0, "process {index} never drained");
        assert_eq!(recorder.finishes.load(Ordering::Relaxed), 1, "process {index} finished once");
        assert_eq!(recorder.outcome(), Some(Err(Failure::Cancelled)), "process {index} outcome");
    }
}

/// Failing processes joined into one dependent.
const FAILING_UPSTREAMS: u32 = 32;

/// Rounds of the racing-failure tests (storage rearmed between them).
const RACE_ROUNDS: usize = 200;

#[test]
fn concurrent_upstream_failures_reach_their_join_exactly_once() {
    let _watchdog = Watchdog::arm("concurrent_upstream_failures_reach_their_join_exactly_once");
    let deadline = Deadline::start();
    let upstream_errors: Vec<Failure> = (0..FAILING_UPSTREAMS).map(Failure::Application).collect();
    let failing: Vec<Recorder> =
        upstream_errors.iter().map(|&failure| Recorder::new(Err(failure))).collect();
    // Half compute (drained from slots by either worker), half immediate.
    let upstreams: Vec<Process> = failing
        .iter()
        .enumerate()
        .map(|(index, recorder)| {
            let class = if index % 2 == 0 { Class::Compute } else { Class::Immediate };
            Process::new(recorder, class)
        })
        .collect();
    let joined = Recorder::new(Ok(()));
    let join = Process::new(&joined, Class::Immediate);
    let edge = [&join];
    Runtime::builder()
        .workers(2)
        .scope(|executor| {
            for round in 0..RACE_ROUNDS {
                for process in upstreams.iter().chain([&join]) {
                    if process.is_completed() {
                        process.rearm().expect("a completed process rearms");
                    }
                }
                for recorder in failing.iter().chain([&joined]) {
                    recorder.reset();
                }
                for upstream in &upstreams {
                    upstream.set_dependents(&edge).expect("a fresh upstream takes the join");
                }
                executor.submit(&join).expect("a fresh join submits");
                for upstream in &upstreams {
                    executor.submit(upstream).expect("a fresh upstream submits");
                }
                deadline.wait_until("the round completes", || executor.live() == 0);
                let outcome = joined.outcome();
                assert_eq!(joined.finishes.load(Ordering::Relaxed), 1, "round {round}: one finish");
                assert_eq!(
                    joined.drains.load(Ordering::Relaxed),
                    0,
                    "round {round}: join undrained"
                );
                let Some(Err(failure)) = outcome else {
                    panic!("round {round}: the join finished with {outcome:?}");
                };
                assert!(upstream_errors.contains(&failure), "round {round}: {failure:?} is ours");
                assert_eq!(join.failure(), Some(failure), "round {round}: the recorded failure");
                for (recorder, &error) in failing.iter().zip(&upstream_errors) {
                    assert_eq!(recorder.outcome(), Some(Err(error)), "round {round}: own error");
                    assert_eq!(recorder.finishes.load(Ordering::Relaxed), 1, "round {round}");
                }
            }
        })
        .expect("start the runtime");
}

/// A compute process that waits inside its drain until both workers are draining it, then fails
/// with an error naming the worker: both `Done(Err(..))` results are returned concurrently.
struct FailTogether {
    inside: AtomicU32,
    met: AtomicBool,
    finishes: AtomicU32,
    outcome: Mutex<Option<Result<(), Failure>>>,
}

/// How long the first drainer waits for the second before failing alone (the test then fails).
const MEETING_DEADLINE: Duration = Duration::from_secs(10);

fn worker_error(worker: usize) -> Failure {
    Failure::Application(100 + worker as u32)
}

impl Drain for FailTogether {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        cx.set_wake_budget(2);
        self.inside.fetch_add(1, Ordering::AcqRel);
        let give_up = Instant::now() + MEETING_DEADLINE;
        while self.inside.load(Ordering::Acquire) < 2 && Instant::now() < give_up {
            std::hint::spin_loop();
        }
        if self.inside.load(Ordering::Acquire) >= 2 {
            self.met.store(true, Ordering::Relaxed);
        }
        Drained::Done(Err(worker_error(cx.worker())))
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        self.finishes.fetch_add(1, Ordering::Relaxed);
        *self.outcome.lock() = Some(outcome);
    }
}

#[test]
fn a_compute_process_failing_on_two_workers_at_once_finishes_once() {
    let _watchdog = Watchdog::arm("a_compute_process_failing_on_two_workers_at_once");
    let deadline = Deadline::start();
    let drain = FailTogether {
        inside: AtomicU32::new(0),
        met: AtomicBool::new(false),
        finishes: AtomicU32::new(0),
        outcome: Mutex::new(None),
    };
    let process = Process::new(&drain, Class::Compute);
    // Spinning workers: the second one finds the slot while the first waits inside the drain.
    Runtime::builder()
        .workers(2)
        .spin(SpinPolicy::Fixed(1 << 20))
        .scope(|executor| {
            for round in 0..RACE_ROUNDS {
                if process.is_completed() {
                    process.rearm().expect("a completed process rearms");
                }
                drain.inside.store(0, Ordering::Relaxed);
                drain.met.store(false, Ordering::Relaxed);
                drain.finishes.store(0, Ordering::Relaxed);
                executor.submit(&process).expect("a fresh process submits");
                deadline.wait_until("the round completes", || executor.live() == 0);
                assert!(drain.met.load(Ordering::Relaxed), "round {round}: both workers drained");
                assert_eq!(drain.inside.load(Ordering::Relaxed), 2, "round {round}: two drains");
                assert_eq!(drain.finishes.load(Ordering::Relaxed), 1, "round {round}: one finish");
                let outcome = *drain.outcome.lock();
                let Some(Err(failure)) = outcome else {
                    panic!("round {round}: finished with {outcome:?}");
                };
                assert!(
                    failure == worker_error(0) || failure == worker_error(1),
                    "round {round}: {failure:?} is one of the drains' errors"
                );
                assert_eq!(process.failure(), Some(failure), "round {round}: the recorded failure");
            }
        })
        .expect("start the runtime");
}

/// `CpuPool::scope` (behind `Runtime::scope`) must shut the executor down when its body
/// panics: `std::thread::scope` joins the workers before re-raising the panic, so a pool that
/// only shut down on a normal return would block forever.
#[test]
fn a_panic_in_a_scope_body_propagates_instead_of_hanging() {
    let (report, reported) = mpsc::channel();
    // Detached: if the scope hangs, this thread stays blocked and the wait below fails the test.
    thread::spawn(move || {
        let outcome = std::panic::catch_unwind(|| {
            Runtime::builder().workers(1).scope(|_executor| panic!("the scope body fails"))
        });
        let _ = report.send(outcome.is_err());
    });
    let propagated = reported.recv_timeout(Duration::from_secs(10));
    assert_eq!(propagated, Ok(true), "the body's panic reached the caller within 10 s");
}

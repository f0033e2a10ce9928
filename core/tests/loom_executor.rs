//! Loom models of the executor's lock-free protocols (run with `RUSTFLAGS="--cfg loom"`).
//!
//! Every model drives the public API with tiny capacities (2 slots, 2 workers):
//! - immediate-list push/pop: processes pushed from two threads are each drained exactly once;
//! - immediate-list runs: two workers taking fair-share runs from a backlog (one dropped with
//!   part of its run in hand, which goes back) drain every process exactly once;
//! - slot claim/release against scanners: a compute process drained by two workers at once is
//!   finalized exactly once, after its last drain call, and its storage is then reusable;
//! - exactly-once activation under concurrent suspend-count releases;
//! - park/wake: a submission always reaches a parked worker (a lost wake-up deadlocks);
//! - cancellation racing activation: the process finishes exactly once, drained at most once;
//! - cancellation racing a hand-off (a dependent kept by the worker that completed its
//!   upstream): the dependent finishes exactly once and is drained at most once;
//! - a deferred wake handed off by a drain racing a plain wake of the same sleeper: it runs
//!   exactly once more, whichever wake queued it;
//! - the runnable summary: a wake racing a compute process going to sleep leaves its summary
//!   bit set (scanners would skip the slot forever otherwise), and a compute wake reaches a
//!   parked worker;
//! - the process state word: a wake landing while an immediate process's drain is about to
//!   sleep runs it once more, and that drain sees what the waker wrote before waking; a
//!   configuration racing a submission from another thread is either refused or seen by the
//!   process's completion, which reads its dependents; a dependency's completion racing the
//!   submission of its dependent on another thread activates the dependent once, and its
//!   drain sees what the submitter wrote first, whichever dropped its suspension last; a
//!   wake, or a cancellation, that finds the process QUEUED before its drain call starts is
//!   seen by that call even through a Relaxed flag, and so is one racing a drain's deferred
//!   wake that claims the process for its own worker; a wake of a compute process waiting
//!   on the overflow list, racing the worker that frees a slot and claims it there, is seen
//!   by its first drain (or runs it again);
//! - homes: a submission queued on the home list of a worker that never runs still reaches a
//!   parked worker, which takes it; two workers taking from their own home lists, the shared
//!   list and each other's home lists (one dropped with part of a run in hand) drain every
//!   process exactly once;
//! - the per-worker completion count, written with a plain load and store by the worker's
//!   thread only: a worker index dropped on one thread and taken again on another keeps
//!   counting from where it was, so `live` reaches zero.
//!
//! Each model has been shown to fail on an injected bug in the protocol it covers (for the
//! summary: a retract without its re-check, a retract whose `fetch_and` is Relaxed, and a wake
//! that announces before it makes the slot word runnable; for the hand-off: a dependent both
//! handed off and queued, and likewise a deferred wake both kept by its worker and published;
//! for homes: a parking re-check that does not read the home lists, which sleeps through the
//! submission; for runs: a dropped worker that keeps its run, and a turn that leaves the shared ready run
//! pointing inside the run it cut; for the state word: a `Sleep` whose failed compare-exchange
//! is Relaxed, a configuration that ends with a Relaxed store, and a submission whose state
//! load in `release` is Relaxed, each a data race on what the other thread wrote, a
//! dependency's release (`release_dependency`) whose decrement is Relaxed, which loses the
//! activation (its state check misses the submission; without that check, a data race on
//! the submitter's write), and a drain call that starts with a store instead of a swap, or a
//! wake that only loads a QUEUED state, each of which sleeps through the wake or the
//! cancellation, and a claiming wake that leaves the process QUEUED while its worker drains
//! it without the swap; for the compute claim: a claim that does not meet wakes on the state
//! word, a wake that finds no slot and does not meet the claim there, and a wake that finds a
//! claimed slot not yet published and leaves it alone, each of which sleeps through the
//! wake; for the completion count: a worker index handed on through Relaxed `taken` RMWs,
//! which loses a count).
#![cfg(loom)]

mod loom_support;

use causeway_core::executor::{
    Class, Drain, DrainContext, Drained, Executor, Process, RoundRobin, SpinPolicy, Woken,
};
use causeway_core::Failure;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use loom_support::LoomFutex;

type ModelExecutor = Executor<'static, LoomFutex, 2, 2>;

/// Counts drains and finishes; `Done` after `drains_to_finish` drains.
struct Counted {
    drains: AtomicUsize,
    finishes: AtomicUsize,
    cancelled: AtomicUsize,
    /// Drain calls in progress: `finish` must only ever see zero.
    inside: AtomicUsize,
    drains_to_finish: usize,
}

impl Counted {
    fn leaked(drains_to_finish: usize) -> &'static Counted {
        Box::leak(Box::new(Counted {
            drains: AtomicUsize::new(0),
            finishes: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
            inside: AtomicUsize::new(0),
            drains_to_finish,
        }))
    }
}

impl Drain for Counted {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.inside.fetch_add(1, Ordering::SeqCst);
        let drained = if self.drains.fetch_add(1, Ordering::Relaxed) + 1 >= self.drains_to_finish {
            Drained::Done(Ok(()))
        } else {
            Drained::Progress
        };
        self.inside.fetch_sub(1, Ordering::SeqCst);
        drained
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        assert_eq!(self.inside.load(Ordering::SeqCst), 0, "finished during a drain call");
        if outcome == Err(Failure::Cancelled) {
            self.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

/// A compute process that sleeps on its first drain and finishes on the next.
struct SleepsOnce {
    drains: AtomicUsize,
    finishes: AtomicUsize,
}

impl SleepsOnce {
    fn leaked() -> &'static SleepsOnce {
        Box::leak(Box::new(SleepsOnce {
            drains: AtomicUsize::new(0),
            finishes: AtomicUsize::new(0),
        }))
    }
}

impl Drain for SleepsOnce {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        if self.drains.fetch_add(1, Ordering::Relaxed) == 0 {
            Drained::Sleep
        } else {
            Drained::Done(Ok(()))
        }
    }

    fn finish(&self, _outcome: Result<(), Failure>) {
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

fn executor(workers: usize) -> &'static ModelExecutor {
    Box::leak(Box::new(ModelExecutor::new(LoomFutex::new(), workers).unwrap()))
}

fn process(drain: &'static dyn Drain, class: Class) -> &'static Process<'static> {
    Box::leak(Box::new(Process::new(drain, class)))
}

fn homed(drain: &'static dyn Drain, home: usize) -> &'static Process<'static> {
    Box::leak(Box::new(Process::new(drain, Class::Immediate).with_home(home)))
}

fn bounded(body: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    // A worker step touches a dozen atomics (list, overflow, slot scan), so executions are
    // longer than loom's default branch budget allows.
    builder.max_branches = 20_000;
    builder.check(body);
}

type ModelWorker<'e> = causeway_core::executor::Worker<'e, 'static, LoomFutex, RoundRobin, 2, 2>;

/// Steps `worker` until `done` holds, yielding between steps so loom schedules the others.
fn step_until(worker: &mut ModelWorker<'_>, done: impl Fn() -> bool) {
    while !done() {
        if !worker.step() {
            thread::yield_now();
        }
    }
}

#[test]
fn immediate_processes_pushed_from_two_threads_are_each_drained_once() {
    bounded(|| {
        let executor = executor(1);
        let (first, second) = (Counted::leaked(1), Counted::leaked(1));
        let (a, b) = (process(first, Class::Immediate), process(second, Class::Immediate));
        let pusher = thread::spawn(move || executor.submit(a).unwrap());
        executor.submit(b).unwrap();
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || a.is_completed() && b.is_completed());
        pusher.join().unwrap();
        for counted in [first, second] {
            assert_eq!(counted.drains.load(Ordering::Relaxed), 1);
            assert_eq!(counted.finishes.load(Ordering::Relaxed), 1);
        }
    });
}

#[test]
fn a_compute_process_drained_by_two_workers_is_finalized_once_after_its_last_drain() {
    bounded(|| {
        let executor = executor(2);
        let counted = Counted::leaked(2);
        let compute = process(counted, Class::Compute);
        executor.submit(compute).unwrap();
        let helper = thread::spawn(move || {
            let mut worker = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
            // Not `is_completed`: the main thread rearms the storage as soon as it completes.
            step_until(&mut worker, || executor.live() == 0);
        });
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || compute.is_completed());
        // Completed means every drain call has returned: the storage is the owner's again.
        compute.rearm().unwrap();
        helper.join().unwrap();
        assert_eq!(counted.finishes.load(Ordering::Relaxed), 1);
        assert!(counted.drains.load(Ordering::Relaxed) >= 2);
        assert_eq!(executor.live(), 0);
    });
}

#[test]
fn concurrent_releases_activate_exactly_once() {
    bounded(|| {
        let executor = executor(1);
        let counted = Counted::leaked(1);
        let held = process(counted, Class::Immediate);
        executor.hold(held).unwrap();
        executor.hold(held).unwrap();
        executor.submit(held).unwrap();
        let releasers: Vec<_> =
            (0..2).map(|_| thread::spawn(move || executor.release(held).unwrap())).collect();
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || held.is_completed());
        for releaser in releasers {
            releaser.join().unwrap();
        }
        assert_eq!(counted.drains.load(Ordering::Relaxed), 1);
        assert_eq!(counted.finishes.load(Ordering::Relaxed), 1);
    });
}

/// Submits `work` (drained by `counted`) while worker 0 runs on another thread, parking when
/// it finds nothing: a lost wake-up leaves the work queued and the worker asleep for good.
fn reaches_a_parked_worker(
    executor: &'static ModelExecutor,
    work: &'static Process<'static>,
    counted: &'static Counted,
) {
    let runner = thread::spawn(move || {
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        worker.run();
    });
    executor.submit(work).unwrap();
    while !work.is_completed() {
        thread::yield_now();
    }
    executor.shutdown();
    runner.join().unwrap();
    assert_eq!(counted.finishes.load(Ordering::Relaxed), 1);
}

#[test]
fn a_submission_always_reaches_a_parked_worker() {
    bounded(|| {
        let counted = Counted::leaked(1);
        reaches_a_parked_worker(executor(1), process(counted, Class::Immediate), counted);
    });
}

#[test]
fn cancellation_racing_activation_finishes_exactly_once() {
    bounded(|| {
        let executor = executor(1);
        let counted = Counted::leaked(1);
        let raced = process(counted, Class::Immediate);
        executor.hold(raced).unwrap();
        executor.submit(raced).unwrap();
        let canceller = thread::spawn(move || executor.cancel(raced));
        executor.release(raced).unwrap();
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || raced.is_completed());
        canceller.join().unwrap();
        let drains = counted.drains.load(Ordering::Relaxed);
        assert_eq!(counted.finishes.load(Ordering::Relaxed), 1);
        assert!(drains <= 1);
        if counted.cancelled.load(Ordering::Relaxed) == 0 {
            assert_eq!(drains, 1, "finished Ok, so it was drained");
        }
    });
}

#[test]
fn a_wake_racing_a_compute_sleep_leaves_the_slot_visible_to_scans() {
    bounded(|| {
        let executor = executor(1);
        let sleepy = SleepsOnce::leaked();
        let compute: &'static Process<'static> =
            Box::leak(Box::new(Process::new(sleepy, Class::Compute)));
        executor.submit(compute).unwrap();
        let waker = thread::spawn(move || executor.wake(compute));
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        assert!(!worker.step(), "the first drain sleeps");
        waker.join().unwrap();
        // The wake came after submission, so the process is runnable again (or its sleep was
        // turned into another drain): the next step must find it through the summary and
        // finish it. A lost summary bit leaves it runnable but never scanned.
        assert!(worker.step(), "the woken process is found");
        assert!(compute.is_completed());
        assert_eq!(sleepy.drains.load(Ordering::Relaxed), 2);
        assert_eq!(sleepy.finishes.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn a_compute_wake_always_reaches_a_parked_worker() {
    bounded(|| {
        let executor = executor(1);
        let sleepy = SleepsOnce::leaked();
        let compute: &'static Process<'static> =
            Box::leak(Box::new(Process::new(sleepy, Class::Compute)));
        let runner = thread::spawn(move || {
            let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
            worker.run();
        });
        executor.submit(compute).unwrap();
        while sleepy.drains.load(Ordering::Relaxed) == 0 {
            thread::yield_now();
        }
        executor.wake(compute);
        while !compute.is_completed() {
            thread::yield_now();
        }
        executor.shutdown();
        runner.join().unwrap();
        assert_eq!(sleepy.finishes.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn cancellation_racing_a_hand_off_finishes_exactly_once() {
    bounded(|| {
        let executor = executor(1);
        let (first, second) = (Counted::leaked(1), Counted::leaked(1));
        let upstream = process(first, Class::Immediate);
        let dependent = process(second, Class::Immediate);
        upstream.set_dependents(Box::leak(Box::new([dependent]))).unwrap();
        executor.submit(dependent).unwrap();
        executor.submit(upstream).unwrap();
        let canceller = thread::spawn(move || executor.cancel(dependent));
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || dependent.is_completed());
        canceller.join().unwrap();
        // Nothing may be left over: a hand-off that was also queued would run again here.
        while worker.step() {}
        assert_eq!(executor.live(), 0);
        assert_eq!(first.finishes.load(Ordering::Relaxed), 1);
        assert_eq!(second.finishes.load(Ordering::Relaxed), 1);
        let drains = second.drains.load(Ordering::Relaxed);
        assert!(drains <= 1);
        if second.cancelled.load(Ordering::Relaxed) == 0 {
            assert_eq!(drains, 1, "finished Ok, so it was drained");
        }
    });
}

/// Submits four processes, made by `make` from their drain and index, to a two-worker
/// executor; worker 1 takes one step on another thread and is dropped (whatever it took and
/// has not run goes back), worker 0 steps until nothing is left. Each is drained once.
fn two_workers_drain_each_once(
    make: impl Fn(&'static Counted, usize) -> &'static Process<'static>,
) {
    let executor = executor(2);
    let drains: Vec<&'static Counted> = (0..4).map(|_| Counted::leaked(1)).collect();
    for (index, &drain) in drains.iter().enumerate() {
        executor.submit(make(drain, index)).unwrap();
    }
    let helper = thread::spawn(move || {
        let mut worker = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
        worker.step();
    });
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    worker.step();
    worker.step();
    helper.join().unwrap();
    while worker.step() {}
    assert_eq!(executor.live(), 0);
    for drain in drains {
        assert_eq!(drain.drains.load(Ordering::Relaxed), 1);
        assert_eq!(drain.finishes.load(Ordering::Relaxed), 1);
    }
}

#[test]
fn two_workers_taking_runs_drain_every_process_once() {
    // A backlog of four: the first turn cuts a run of two (its share), later turns one each.
    bounded(|| two_workers_drain_each_once(|drain, _| process(drain, Class::Immediate)));
}

#[test]
fn a_submission_homed_on_a_worker_that_never_runs_reaches_a_parked_one() {
    bounded(|| {
        let counted = Counted::leaked(1);
        reaches_a_parked_worker(executor(2), homed(counted, 1), counted);
    });
}

#[test]
fn two_workers_taking_from_their_own_and_each_others_home_lists_drain_every_process_once() {
    // Two at home on worker 1 (a run of one each turn), one on worker 0, one without.
    bounded(|| two_workers_drain_each_once(|drain, index| homed(drain, [1, 1, 0, 2][index])));
}

/// On its first drain wakes `target` with a deferred wake and hands it to its own worker; then
/// finishes, or, when it `goes_on`, keeps working once more (`Progress`, as a progress process
/// that delivered a message does) and finishes on its second drain.
struct HandsOff {
    executor: &'static ModelExecutor,
    target: &'static Process<'static>,
    goes_on: bool,
    drains: AtomicUsize,
    finishes: AtomicUsize,
}

impl HandsOff {
    fn leaked(
        executor: &'static ModelExecutor,
        target: &'static Process<'static>,
        goes_on: bool,
    ) -> &'static HandsOff {
        Box::leak(Box::new(HandsOff {
            executor,
            target,
            goes_on,
            drains: AtomicUsize::new(0),
            finishes: AtomicUsize::new(0),
        }))
    }
}

impl Drain for HandsOff {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        if self.drains.fetch_add(1, Ordering::Relaxed) > 0 {
            return Drained::Done(Ok(()));
        }
        let woken: Option<Woken<'_, '_>> = self.executor.wake_deferred(self.target);
        if let Some(woken) = woken {
            cx.hand_off(woken);
        }
        if self.goes_on {
            Drained::Progress
        } else {
            Drained::Done(Ok(()))
        }
    }

    fn finish(&self, _outcome: Result<(), Failure>) {
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_deferred_wake_racing_a_plain_wake_runs_the_sleeper_once_more() {
    bounded(|| {
        let executor = executor(1);
        let sleepy = SleepsOnce::leaked();
        let sleeper: &'static Process<'static> =
            Box::leak(Box::new(Process::new(sleepy, Class::Immediate)));
        let waker = process(HandsOff::leaked(executor, sleeper, false), Class::Immediate);
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        executor.submit(sleeper).unwrap();
        assert!(worker.step());
        executor.submit(waker).unwrap();
        let other = thread::spawn(move || executor.wake(sleeper));
        step_until(&mut worker, || sleeper.is_completed());
        other.join().unwrap();
        // Nothing may be left over: a sleeper both handed off and queued would run again.
        while worker.step() {}
        assert_eq!(executor.live(), 0);
        assert_eq!(sleepy.drains.load(Ordering::Relaxed), 2);
        assert_eq!(sleepy.finishes.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn a_hand_off_kept_by_a_drain_that_goes_on_races_another_worker_taking_the_drainer() {
    bounded(|| {
        let executor = executor(2);
        let sleepy = SleepsOnce::leaked();
        let sleeper = process(sleepy, Class::Immediate);
        let waking = HandsOff::leaked(executor, sleeper, true);
        let waker = process(waking, Class::Immediate);
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        executor.submit(sleeper).unwrap();
        assert!(worker.step());
        executor.submit(waker).unwrap();
        // This worker keeps the sleeper and queues the waker again, which the other worker
        // may take and finish while the sleeper runs here.
        assert!(worker.step());
        let helper = thread::spawn(move || {
            let mut other = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
            other.step();
        });
        step_until(&mut worker, || sleeper.is_completed());
        helper.join().unwrap();
        while worker.step() {}
        assert_eq!(executor.live(), 0);
        assert_eq!(sleepy.drains.load(Ordering::Relaxed), 2);
        assert_eq!(sleepy.finishes.load(Ordering::Relaxed), 1);
        assert_eq!(waking.drains.load(Ordering::Relaxed), 2);
        assert_eq!(waking.finishes.load(Ordering::Relaxed), 1);
    });
}

/// An immediate process that sleeps on its first drain, once it has told its waker it is
/// running, and on its second reads the message the waker wrote before waking it.
struct WokenWithMessage {
    running: AtomicBool,
    message: UnsafeCell<u32>,
    drains: AtomicUsize,
    finishes: AtomicUsize,
}

// SAFETY: `message` is written once, by the waker before its wake, and read only by the drain
// that wake caused; loom checks that the executor orders the two.
unsafe impl Sync for WokenWithMessage {}

impl WokenWithMessage {
    fn leaked() -> &'static WokenWithMessage {
        Box::leak(Box::new(WokenWithMessage {
            running: AtomicBool::new(false),
            message: UnsafeCell::new(0),
            drains: AtomicUsize::new(0),
            finishes: AtomicUsize::new(0),
        }))
    }
}

impl Drain for WokenWithMessage {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        if self.drains.fetch_add(1, Ordering::Relaxed) == 0 {
            // Release pairs with the waker's Acquire: its wake comes after this drain started.
            self.running.store(true, Ordering::Release);
            return Drained::Sleep;
        }
        // SAFETY: the waker wrote the message before the wake that caused this drain, and
        // wrote nothing since; loom reports a race if the executor does not order the two.
        let message = self.message.with(|message| unsafe { *message });
        assert_eq!(message, 7, "the drain a wake caused sees what the waker wrote");
        Drained::Done(Ok(()))
    }

    fn finish(&self, _outcome: Result<(), Failure>) {
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_wake_during_a_drain_runs_it_again_and_orders_the_waker_before_it() {
    bounded(|| {
        let executor = executor(1);
        let woken = WokenWithMessage::leaked();
        let process: &'static Process<'static> =
            Box::leak(Box::new(Process::new(woken, Class::Immediate)));
        executor.submit(process).unwrap();
        let waker = thread::spawn(move || {
            while !woken.running.load(Ordering::Acquire) {
                thread::yield_now();
            }
            // SAFETY: written before the wake; the drain that reads it runs after the wake.
            woken.message.with_mut(|message| unsafe { *message = 7 });
            // Lands on RUNNING (NOTIFIED: the drain's `Sleep` requeues) or on SLEEPING
            // (queued here): either way exactly one more drain.
            executor.wake(process);
        });
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || process.is_completed());
        waker.join().unwrap();
        while worker.step() {}
        assert_eq!(woken.drains.load(Ordering::Relaxed), 2);
        assert_eq!(woken.finishes.load(Ordering::Relaxed), 1);
        assert_eq!(executor.live(), 0);
    });
}

#[test]
fn a_configuration_racing_a_submission_is_refused_or_seen_by_the_completion() {
    bounded(|| {
        let executor = executor(1);
        let (first, second) = (Counted::leaked(1), Counted::leaked(1));
        let upstream = process(first, Class::Immediate);
        let dependent = process(second, Class::Immediate);
        let edge: &'static [&'static Process<'static>] = Box::leak(Box::new([dependent]));
        let configurer = thread::spawn(move || upstream.set_dependents(edge).is_ok());
        // Refused while the configurer holds the process; accepted before or after.
        while executor.submit(upstream).is_err() {
            thread::yield_now();
        }
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        // The completion reads the dependents, written on the configurer's thread.
        step_until(&mut worker, || upstream.is_completed());
        let configured = configurer.join().unwrap();
        assert_eq!(first.finishes.load(Ordering::Relaxed), 1);
        if configured {
            // The completion released the edge: only the creation hold is left.
            executor.submit(dependent).unwrap();
            step_until(&mut worker, || dependent.is_completed());
            assert_eq!(second.drains.load(Ordering::Relaxed), 1);
        }
        assert_eq!(executor.live(), 0);
    });
}

/// Reads, in its drain, what the thread that submitted it wrote before submitting.
struct ReadsSubmittersNote {
    note: UnsafeCell<usize>,
    seen: AtomicUsize,
    drains: AtomicUsize,
}

// SAFETY: `note` is written once, by the submitting thread before its submission, and read
// only by the drain that submission's activation runs; loom checks that the executor orders
// the two.
unsafe impl Sync for ReadsSubmittersNote {}

impl ReadsSubmittersNote {
    fn leaked() -> &'static ReadsSubmittersNote {
        Box::leak(Box::new(ReadsSubmittersNote {
            note: UnsafeCell::new(0),
            seen: AtomicUsize::new(0),
            drains: AtomicUsize::new(0),
        }))
    }
}

impl Drain for ReadsSubmittersNote {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        // SAFETY: written once, by the submitting thread before its submission; this read
        // is ordered after that write by the activation (what the model checks: loom reports
        // the read as a data race otherwise).
        let note = self.note.with(|note| unsafe { *note });
        self.seen.store(note, Ordering::Relaxed);
        self.drains.fetch_add(1, Ordering::Relaxed);
        Drained::Done(Ok(()))
    }

    fn finish(&self, _outcome: Result<(), Failure>) {}
}

#[test]
fn a_completion_racing_its_dependents_submission_activates_it_once_after_the_submitter() {
    bounded(|| {
        let executor = executor(1);
        let (upstream_drain, reader) = (Counted::leaked(1), ReadsSubmittersNote::leaked());
        let upstream = process(upstream_drain, Class::Immediate);
        let dependent = process(reader, Class::Immediate);
        upstream.set_dependents(Box::leak(Box::new([dependent]))).unwrap();
        executor.submit(upstream).unwrap();
        // Whichever drops its suspension last — the submission its creation hold, the
        // upstream's completion its edge — activates the dependent, and its drain must see
        // what the submitter wrote first.
        let submitter = thread::spawn(move || {
            // SAFETY: the only write, before the submission that publishes it.
            reader.note.with_mut(|note| unsafe { *note = 7 });
            executor.submit(dependent).unwrap();
        });
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || dependent.is_completed());
        submitter.join().unwrap();
        assert_eq!(upstream_drain.finishes.load(Ordering::Relaxed), 1);
        assert_eq!(reader.drains.load(Ordering::Relaxed), 1);
        assert_eq!(reader.seen.load(Ordering::Relaxed), 7);
        assert_eq!(executor.live(), 0);
    });
}

#[test]
fn a_worker_index_taken_again_on_another_thread_keeps_its_completion_count() {
    bounded(|| {
        let executor = executor(1);
        let (first, second) = (Counted::leaked(1), Counted::leaked(1));
        let (a, b) = (process(first, Class::Immediate), process(second, Class::Immediate));
        // Whichever thread takes index 0 first runs until its process completes and drops
        // the worker; the other waits for the index and does the same.
        let take_and_run_until = move |done: &'static Process<'static>| loop {
            if let Ok(mut worker) = executor.worker::<RoundRobin>(0, SpinPolicy::Park) {
                step_until(&mut worker, || done.is_completed());
                return;
            }
            thread::yield_now();
        };
        executor.submit(a).unwrap();
        let other = thread::spawn(move || take_and_run_until(a));
        executor.submit(b).unwrap();
        take_and_run_until(b);
        other.join().unwrap();
        // Two submissions, two completions counted on index 0 by two threads in turn.
        assert_eq!(executor.live(), 0);
    });
}

/// An immediate process that runs once a waker has set its reason, and sleeps until then.
/// The reason is a Relaxed flag: only the executor orders the waker's store before the drain
/// that looks at it.
struct WaitsForReason {
    reason: AtomicBool,
    finishes: AtomicUsize,
}

impl WaitsForReason {
    fn leaked() -> &'static WaitsForReason {
        Box::leak(Box::new(WaitsForReason {
            reason: AtomicBool::new(false),
            finishes: AtomicUsize::new(0),
        }))
    }
}

impl Drain for WaitsForReason {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        if self.reason.load(Ordering::Relaxed) {
            Drained::Done(Ok(()))
        } else {
            Drained::Sleep
        }
    }

    fn finish(&self, _outcome: Result<(), Failure>) {
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a racer does to a [`WaitsForReason`] process.
type Race = fn(&'static ModelExecutor, &'static WaitsForReason, &'static Process<'static>);

/// Runs `race` on another thread while `worker` steps until `process` completes. Once the
/// racing thread is done, a step that finds nothing to run means the process sleeps with
/// nobody left to wake it. Then steps until nothing is left, and checks that the process
/// finished once and that nothing is live.
fn step_against(
    worker: &mut ModelWorker<'_>,
    executor: &'static ModelExecutor,
    waits: &'static WaitsForReason,
    process: &'static Process<'static>,
    race: Race,
) {
    let settled: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let racer = thread::spawn(move || {
        race(executor, waits, process);
        // Release pairs with the Acquire load below.
        settled.store(true, Ordering::Release);
    });
    loop {
        // Acquire pairs with the racer's Release store: whatever its wake queued is visible
        // to the step below.
        let settled = settled.load(Ordering::Acquire);
        let stepped = worker.step();
        if process.is_completed() {
            break;
        }
        if !stepped {
            assert!(!settled, "the process sleeps through a wake");
            thread::yield_now();
        }
    }
    racer.join().unwrap();
    while worker.step() {}
    assert_eq!(waits.finishes.load(Ordering::Relaxed), 1);
    assert_eq!(executor.live(), 0);
}

/// Gives the process its reason, through a Relaxed store, then wakes it.
fn wake_with_reason(
    executor: &'static ModelExecutor,
    waits: &'static WaitsForReason,
    process: &'static Process<'static>,
) {
    waits.reason.store(true, Ordering::Relaxed);
    executor.wake(process);
}

/// Submits a [`WaitsForReason`] process, QUEUED from then on, and races `race` against its
/// first drain call (see [`step_against`]): a wake or a cancellation may find it still queued.
fn race_the_first_drain(race: Race) {
    let executor = executor(1);
    let waits = WaitsForReason::leaked();
    let process = process(waits, Class::Immediate);
    executor.submit(process).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    step_against(&mut worker, executor, waits, process, race);
}

#[test]
fn a_wake_that_finds_the_process_queued_orders_the_waker_before_its_next_drain() {
    bounded(|| race_the_first_drain(wake_with_reason));
}

#[test]
fn a_cancellation_racing_the_first_drain_of_a_queued_process_is_never_lost() {
    // The reason is never set: the process sleeps after every drain, so only the cancellation
    // ends it.
    bounded(|| race_the_first_drain(|executor, _, process| executor.cancel(process)));
}

#[test]
fn a_wake_racing_a_claiming_hand_off_orders_the_waker_before_the_next_drain() {
    // A sleeper whose reason a racer sets while a drain on the worker wakes the sleeper with a
    // deferred wake and hands the claim to its own worker: the racer's wake may find it
    // sleeping (and queue it), claimed but not yet drained, or draining. Every way, a drain
    // after the racer's wake must read the reason.
    bounded(|| {
        let executor = executor(1);
        let waits = WaitsForReason::leaked();
        let sleeper = process(waits, Class::Immediate);
        let waker = process(HandsOff::leaked(executor, sleeper, false), Class::Immediate);
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        executor.submit(sleeper).unwrap();
        assert!(worker.step(), "the sleeper's first drain finds no reason and sleeps");
        executor.submit(waker).unwrap();
        step_against(&mut worker, executor, waits, sleeper, wake_with_reason);
    });
}

#[test]
fn a_wake_of_a_compute_process_waiting_for_a_slot_orders_the_waker_before_its_first_drain() {
    // Both slots are taken, so the woken process waits on the overflow list; a racer sets its
    // reason and wakes it while the worker frees a slot and claims it. The wake may find it
    // not yet in a slot: the drain after the claim must still read the reason, or the wake
    // must make it run again.
    bounded(|| {
        let executor = executor(1);
        for _ in 0..2 {
            executor.submit(process(Counted::leaked(1), Class::Compute)).unwrap();
        }
        let waits = WaitsForReason::leaked();
        let waiting = process(waits, Class::Compute);
        executor.submit(waiting).unwrap();
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_against(&mut worker, executor, waits, waiting, wake_with_reason);
    });
}

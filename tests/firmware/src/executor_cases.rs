//! The executor on the target, driven by one worker stepping (the shape of a bare-metal main
//! loop that polls): dependents, failure cascades, cancellation, compute slots, overflow,
//! rearming and shutdown. Parking is the subject of [`crate::activation`].

use core::cell::Cell;

use causeway_core::executor::{
    Class, Drain, DrainContext, Drained, Executor, Process, RoundRobin, SpinPolicy, Worker,
};
use causeway_core::Failure;
use causeway_platform_baremetal::BareMetalFutex;
use critical_section::Mutex;
use portable_atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::cases;
use crate::harness::Case;

/// Every executor case, in order.
pub const CASES: &[Case] = cases![
    dependents_run_after_their_upstream_in_activation_order,
    a_failure_cascades_to_dependents_without_draining_them,
    a_cancelled_suspended_process_completes_cancelled_undrained,
    a_compute_process_progresses_sleeps_and_is_woken,
    compute_processes_beyond_the_slots_overflow_and_run_later,
    a_completed_process_is_rearmed_and_runs_again,
    shutdown_cancels_a_sleeping_process_and_ends_run,
];

type SmallExecutor<'p> = Executor<'p, BareMetalFutex, 2, 1>;
type SmallWorker<'e, 'p> = Worker<'e, 'p, BareMetalFutex, RoundRobin, 2, 1>;

/// The order in which drains ran, by name.
struct Log {
    names: Mutex<Cell<[u8; 16]>>,
    len: AtomicUsize,
}

impl Log {
    const fn new() -> Log {
        Log { names: Mutex::new(Cell::new([0; 16])), len: AtomicUsize::new(0) }
    }

    fn push(&self, name: u8) {
        let at = self.len.fetch_add(1, Ordering::Relaxed);
        critical_section::with(|cs| {
            let cell = self.names.borrow(cs);
            let mut names = cell.get();
            names[at] = name;
            cell.set(names);
        });
    }

    fn assert_eq(&self, expected: &[u8]) {
        let len = self.len.load(Ordering::Relaxed);
        let names = critical_section::with(|cs| self.names.borrow(cs).get());
        assert_eq!(&names[..len], expected);
    }
}

/// Returns a scripted sequence of results, then `Done(Ok)`; records drains and the outcome.
struct Scripted<'l> {
    name: u8,
    script: &'static [Drained],
    drains: AtomicU32,
    finished: Mutex<Cell<Option<Result<(), Failure>>>>,
    finishes: AtomicU32,
    log: &'l Log,
}

impl<'l> Scripted<'l> {
    const fn new(name: u8, script: &'static [Drained], log: &'l Log) -> Scripted<'l> {
        Scripted {
            name,
            script,
            drains: AtomicU32::new(0),
            finished: Mutex::new(Cell::new(None)),
            finishes: AtomicU32::new(0),
            log,
        }
    }

    fn drains(&self) -> u32 {
        self.drains.load(Ordering::Relaxed)
    }

    fn outcome(&self) -> Option<Result<(), Failure>> {
        assert!(self.finishes.load(Ordering::Relaxed) <= 1, "finish runs at most once");
        critical_section::with(|cs| self.finished.borrow(cs).get())
    }
}

impl Drain for Scripted<'_> {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        let call = self.drains.fetch_add(1, Ordering::Relaxed) as usize;
        self.log.push(self.name);
        self.script.get(call).copied().unwrap_or(Drained::Done(Ok(())))
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        self.finishes.fetch_add(1, Ordering::Relaxed);
        critical_section::with(|cs| self.finished.borrow(cs).set(Some(outcome)));
    }
}

fn new_executor<'p>() -> SmallExecutor<'p> {
    Executor::new(BareMetalFutex::new(), 1).unwrap()
}

fn worker<'e, 'p>(executor: &'e SmallExecutor<'p>) -> SmallWorker<'e, 'p> {
    executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap()
}

/// Steps until nothing is live; a step that finds nothing to do while work is live is a stall.
fn step_until_idle(worker: &mut SmallWorker<'_, '_>, executor: &SmallExecutor<'_>) {
    let mut steps = 0;
    while executor.live() > 0 {
        assert!(worker.step(), "stalled with {} processes live", executor.live());
        steps += 1;
        assert!(steps < 1_000, "no progress after {steps} steps");
    }
}

const DONE: &[Drained] = &[Drained::Done(Ok(()))];

fn dependents_run_after_their_upstream_in_activation_order() {
    let log = Log::new();
    let (a, b, c, d) = (
        Scripted::new(b'a', DONE, &log),
        Scripted::new(b'b', DONE, &log),
        Scripted::new(b'c', DONE, &log),
        Scripted::new(b'd', DONE, &log),
    );
    let executor = new_executor();
    let pd = Process::new(&d, Class::Immediate);
    let (pb, pc) = (Process::new(&b, Class::Immediate), Process::new(&c, Class::Immediate));
    let pa = Process::new(&a, Class::Immediate);
    let (after_a, after_bc) = ([&pb, &pc], [&pd]);
    pa.set_dependents(&after_a).unwrap();
    pb.set_dependents(&after_bc).unwrap();
    pc.set_dependents(&after_bc).unwrap();
    let mut worker = worker(&executor);
    // Submitted downstream first: nothing may run before its upstream completes.
    for process in [&pd, &pc, &pb] {
        executor.submit(process).unwrap();
    }
    assert!(!worker.step(), "every submitted process is still suspended");
    executor.submit(&pa).unwrap();
    step_until_idle(&mut worker, &executor);
    log.assert_eq(b"abcd");
    for drain in [&a, &b, &c, &d] {
        assert_eq!((drain.drains(), drain.outcome()), (1, Some(Ok(()))));
    }
}

fn a_failure_cascades_to_dependents_without_draining_them() {
    let log = Log::new();
    const FAIL: &[Drained] = &[Drained::Done(Err(Failure::Application(7)))];
    let (a, b, c) = (
        Scripted::new(b'a', FAIL, &log),
        Scripted::new(b'b', DONE, &log),
        Scripted::new(b'c', DONE, &log),
    );
    let executor = new_executor();
    let pc = Process::new(&c, Class::Immediate);
    let pb = Process::new(&b, Class::Immediate);
    let pa = Process::new(&a, Class::Immediate);
    let (after_a, after_b) = ([&pb], [&pc]);
    pa.set_dependents(&after_a).unwrap();
    pb.set_dependents(&after_b).unwrap();
    let mut worker = worker(&executor);
    for process in [&pc, &pb, &pa] {
        executor.submit(process).unwrap();
    }
    step_until_idle(&mut worker, &executor);
    log.assert_eq(b"a");
    for drain in [&a, &b, &c] {
        assert_eq!(drain.outcome(), Some(Err(Failure::Application(7))));
    }
    assert_eq!((b.drains(), c.drains()), (0, 0));
}

fn a_cancelled_suspended_process_completes_cancelled_undrained() {
    let log = Log::new();
    let a = Scripted::new(b'a', DONE, &log);
    let executor = new_executor();
    let pa = Process::new(&a, Class::Immediate);
    let mut worker = worker(&executor);
    executor.hold(&pa).unwrap();
    executor.submit(&pa).unwrap();
    executor.cancel(&pa);
    assert!(!worker.step(), "still held");
    executor.release(&pa).unwrap();
    step_until_idle(&mut worker, &executor);
    assert_eq!((a.drains(), a.outcome()), (0, Some(Err(Failure::Cancelled))));
    assert!(pa.is_completed());
}

fn a_compute_process_progresses_sleeps_and_is_woken() {
    let log = Log::new();
    const SCRIPT: &[Drained] = &[Drained::Progress, Drained::Progress, Drained::Sleep];
    let c = Scripted::new(b'c', SCRIPT, &log);
    let executor = new_executor();
    let pc = Process::new(&c, Class::Compute);
    let mut worker = worker(&executor);
    executor.submit(&pc).unwrap();
    while worker.step() {}
    assert_eq!(c.drains(), 3, "two progress drains, then asleep");
    assert!(!pc.is_completed());
    executor.wake(&pc);
    step_until_idle(&mut worker, &executor);
    assert_eq!((c.drains(), c.outcome()), (4, Some(Ok(()))));
    log.assert_eq(b"cccc");
}

fn compute_processes_beyond_the_slots_overflow_and_run_later() {
    let log = Log::new();
    const TWICE: &[Drained] = &[Drained::Progress, Drained::Done(Ok(()))];
    let drains = [
        Scripted::new(b'1', TWICE, &log),
        Scripted::new(b'2', TWICE, &log),
        Scripted::new(b'3', TWICE, &log),
    ];
    let executor = new_executor();
    let processes = [
        Process::new(&drains[0], Class::Compute),
        Process::new(&drains[1], Class::Compute),
        Process::new(&drains[2], Class::Compute),
    ];
    let mut worker = worker(&executor);
    for process in &processes {
        executor.submit(process).unwrap();
    }
    assert_eq!(executor.live(), 3, "two slots taken, one process overflowed");
    step_until_idle(&mut worker, &executor);
    for drain in &drains {
        assert_eq!((drain.drains(), drain.outcome()), (2, Some(Ok(()))));
    }
    assert_eq!(log.len.load(Ordering::Relaxed), 6);
}

fn a_completed_process_is_rearmed_and_runs_again() {
    let log = Log::new();
    let a = Scripted::new(b'a', &[], &log);
    let executor = new_executor();
    let pa = Process::new(&a, Class::Immediate);
    let mut worker = worker(&executor);
    for _ in 0..3 {
        executor.submit(&pa).unwrap();
        step_until_idle(&mut worker, &executor);
        assert!(pa.is_completed());
        pa.rearm().unwrap();
    }
    assert_eq!(a.drains(), 3);
    assert_eq!(a.finishes.load(Ordering::Relaxed), 3);
}

fn shutdown_cancels_a_sleeping_process_and_ends_run() {
    let log = Log::new();
    const SLEEP: &[Drained] = &[Drained::Sleep];
    let c = Scripted::new(b'c', SLEEP, &log);
    let executor = new_executor();
    let pc = Process::new(&c, Class::Compute);
    let mut worker = worker(&executor);
    executor.submit(&pc).unwrap();
    while worker.step() {}
    executor.shutdown();
    // Returns at once: the sleeping occupant is cancelled and nothing else is queued.
    worker.run();
    assert_eq!((c.drains(), c.outcome()), (1, Some(Err(Failure::Cancelled))));
    assert_eq!(executor.live(), 0);
    assert_eq!(executor.submit(&pc), Err(causeway_core::executor::ProcessError::ShutDown));
}

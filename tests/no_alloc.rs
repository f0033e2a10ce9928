//! The executor's steady state allocates nothing: submitting, activating (by submission, by an
//! upstream completion, after a cancellation), waking parked workers, draining and completing,
//! counted across every thread of the process by a wrapping global allocator.
//!
//! One test only, on purpose: the count covers every thread, so a second test running beside
//! this one would allocate inside the measured window. Everything that may allocate (starting the
//! runtime and its threads, formatting, the harness) happens before the first snapshot.

use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use causeway::executor::{Class, Drain, DrainContext, Drained, Process, SpinPolicy};
use causeway::{Failure, Runtime};

mod support;

use support::ALLOCATIONS;

/// Records which workers drained it, so warm-up can wait until both threads have run work.
struct Head {
    workers_seen: AtomicU32,
}

impl Drain for Head {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        self.workers_seen.fetch_or(1 << cx.worker(), Ordering::Relaxed);
        Drained::Done(Ok(()))
    }
}

/// A compute dependent that makes progress twice before finishing, so it is drained from its
/// slot several times (possibly by both workers).
struct Tail {
    drains: AtomicU32,
}

impl Drain for Tail {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        if self.drains.fetch_add(1, Ordering::Relaxed) % 3 == 2 {
            Drained::Done(Ok(()))
        } else {
            Drained::Progress
        }
    }
}

static HEAD_DRAIN: Head = Head { workers_seen: AtomicU32::new(0) };
static TAIL_DRAIN: Tail = Tail { drains: AtomicU32::new(0) };
static HEAD: Process<'static> = Process::new(&HEAD_DRAIN, Class::Immediate);
static TAIL: Process<'static> = Process::new(&TAIL_DRAIN, Class::Compute);
static HEAD_DEPENDENTS: [&Process<'static>; 1] = [&TAIL];

/// Both workers.
const WORKERS: usize = 2;

/// Measured cycles; every third one cancels its head instead of running it.
const CYCLES: usize = 10_000;

/// Warm-up runs at least this many cycles, and until both workers have drained something.
const WARM_UP_CYCLES: usize = 1_000;

/// Any single cycle taking this long fails the test.
const CYCLE_DEADLINE: Duration = Duration::from_secs(30);

/// One submit → complete cycle of the head → tail pair, from rearming to the tail completed.
/// When `cancel` is set the head is cancelled while held, so both complete without a drain.
fn cycle(runtime: &Runtime, cancel: bool) {
    for process in [&HEAD, &TAIL] {
        if process.is_completed() {
            process.rearm().expect("a completed process rearms");
        }
    }
    HEAD.set_dependents(&HEAD_DEPENDENTS).expect("a fresh head takes its dependent");
    runtime.submit(&TAIL).expect("a fresh tail submits");
    if cancel {
        let executor = runtime.executor();
        executor.hold(&HEAD).expect("a fresh head can be held");
        runtime.submit(&HEAD).expect("a fresh head submits");
        executor.cancel(&HEAD);
        executor.release(&HEAD).expect("the head is held");
    } else {
        runtime.submit(&HEAD).expect("a fresh head submits");
    }
    let deadline = Instant::now() + CYCLE_DEADLINE;
    while !TAIL.is_completed() {
        assert!(Instant::now() < deadline, "a cycle did not complete within {CYCLE_DEADLINE:?}");
        // Yielding, not sleeping, so the workers sometimes find work and sometimes park.
        thread::yield_now();
    }
    let expected = if cancel { Some(Failure::Cancelled) } else { None };
    assert_eq!(TAIL.failure(), expected, "the tail's outcome");
}

#[test]
fn submit_activate_drain_and_complete_allocate_nothing_after_warm_up() {
    // Short spins: workers park and are woken by futex throughout the measured window.
    let runtime = Runtime::builder()
        .workers(WORKERS)
        .spin(SpinPolicy::Fixed(8))
        .build()
        .expect("start the runtime");
    let mut warm_up = 0;
    while warm_up < WARM_UP_CYCLES || HEAD_DRAIN.workers_seen.load(Ordering::Relaxed) != 0b11 {
        cycle(&runtime, warm_up % 3 == 0);
        warm_up += 1;
    }
    let executor = runtime.executor();
    while executor.live() != 0 {
        thread::yield_now();
    }

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    assert!(before > 0, "the counting allocator saw the runtime start: it is installed");
    for index in 0..CYCLES {
        cycle(&runtime, index % 3 == 0);
    }
    while executor.live() != 0 {
        thread::yield_now();
    }
    // Let the workers go idle and park, so allocations on that path are counted too.
    thread::sleep(Duration::from_millis(10));
    let after = ALLOCATIONS.load(Ordering::SeqCst);

    assert_eq!(after - before, 0, "allocations during {CYCLES} steady-state cycles");
    assert_eq!(runtime.shutdown(), 0, "no worker panicked");
}

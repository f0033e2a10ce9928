//! Loom models of the semaphore's timepoint protocol (run with `RUSTFLAGS="--cfg loom"`).
//!
//! Every interleaving of signal, failure, arm and cancel is explored for:
//! - no lost wake-up: an armed timepoint whose value is reached is notified;
//! - exactly once: a timepoint is notified at most once, never after `cancel` unlinked it;
//! - `cancel` returning means the callback has finished (its effects are visible).
#![cfg(loom)]

use std::pin::pin;

use causeway_core::axis::{Axis, Domain};
use causeway_core::frontier::{Frontier, Point};
use causeway_core::semaphore::{Arm, Cancelled, Failure, Notify, Outcome, Timepoint};
use causeway_core::{Endpoint, Scope, Semaphore};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

type Sem = Semaphore<2, 2>;

fn semaphore() -> Arc<Sem> {
    let home = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };
    Arc::new(Semaphore::new(0, Scope::DeviceLocal, home))
}

fn origin() -> Point {
    Point::new(Axis::new(0, Domain::Queue, 1), 1)
}

#[derive(Default)]
struct Count {
    calls: AtomicUsize,
    failures: AtomicUsize,
}

impl Notify for Count {
    fn notify(&self, outcome: Outcome) {
        if outcome.is_err() {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        // Relaxed is enough: the model checks visibility through the protocol's own
        // Release (DONE) / Acquire (cancel, is_done) pair.
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn signal_racing_arm_and_cancel_notifies_exactly_when_it_should() {
    loom::model(|| {
        let sem = semaphore();
        let signaller = {
            let sem = sem.clone();
            thread::spawn(move || sem.signal(1, origin(), &Frontier::<2>::new()).unwrap())
        };
        let count = Count::default();
        let timepoint = pin!(Timepoint::new(&count));
        // SAFETY: the timepoint is pinned in this frame and is cancelled (which waits out a
        // running callback) before the frame ends; `sem` outlives it.
        let armed = unsafe { sem.arm(timepoint.as_ref(), 1) }.unwrap();
        match armed {
            Arm::Ready(outcome) => {
                assert_eq!(outcome, Ok(1));
                assert_eq!(count.calls.load(Ordering::Relaxed), 0);
            }
            Arm::Armed => match sem.cancel(&timepoint) {
                Cancelled::Unlinked => assert_eq!(count.calls.load(Ordering::Relaxed), 0),
                Cancelled::AlreadyFired => assert_eq!(count.calls.load(Ordering::Relaxed), 1),
                other => panic!("armed timepoint vanished: {other:?}"),
            },
        }
        signaller.join().unwrap();
        assert!(count.calls.load(Ordering::Relaxed) <= 1);
        assert!(!sem.has_waiters());
    });
}

#[test]
fn armed_timepoint_is_never_lost() {
    loom::model(|| {
        let sem = semaphore();
        let count = Count::default();
        let timepoint = pin!(Timepoint::new(&count));
        // SAFETY: pinned here; the loop below waits until it is DONE before the frame ends.
        let armed = unsafe { sem.arm(timepoint.as_ref(), 1) }.unwrap();
        assert_eq!(armed, Arm::Armed);
        let signaller = {
            let sem = sem.clone();
            thread::spawn(move || sem.signal(1, origin(), &Frontier::<2>::new()).unwrap())
        };
        while !timepoint.is_done() {
            thread::yield_now();
        }
        assert_eq!(count.calls.load(Ordering::Relaxed), 1);
        assert_eq!(sem.value(), 1);
        signaller.join().unwrap();
    });
}

#[test]
fn failure_racing_signal_notifies_once_and_failure_sticks() {
    loom::model(|| {
        let sem = semaphore();
        let count = Count::default();
        let timepoint = pin!(Timepoint::new(&count));
        // SAFETY: pinned here; waited to DONE below.
        let armed = unsafe { sem.arm(timepoint.as_ref(), 2) }.unwrap();
        assert_eq!(armed, Arm::Armed);
        let failer = {
            let sem = sem.clone();
            thread::spawn(move || sem.fail(Failure::Aborted))
        };
        let _ = sem.signal(1, origin(), &Frontier::<2>::new());
        while !timepoint.is_done() {
            thread::yield_now();
        }
        assert!(failer.join().unwrap());
        assert_eq!(count.calls.load(Ordering::Relaxed), 1);
        assert_eq!(count.failures.load(Ordering::Relaxed), 1);
        assert_eq!(sem.failure(), Some(Failure::Aborted));
    });
}

/// A cancelled signal racing the completion of the signal below it and the arming of waiters
/// on both values: the waiter on the cancelled value is told `Cancelled` exactly once (at arm
/// or by callback, never lost, never success); the waiter below succeeds; the timeline then
/// goes on past the cancelled value.
#[cfg(feature = "signal-cancellation")]
#[test]
fn cancel_signal_racing_completion_and_arm_fails_exactly_its_waiters() {
    loom::model(|| {
        let sem = semaphore();
        let (below, cancelled) = (origin(), Point::new(Axis::new(0, Domain::Queue, 2), 1));
        sem.submit_signal(1, below, &Frontier::<2>::new()).unwrap();
        sem.submit_signal(2, cancelled, &Frontier::<2>::new()).unwrap();
        let canceller = {
            let sem = sem.clone();
            thread::spawn(move || sem.cancel_signal(2).unwrap())
        };
        let signaller = {
            let sem = sem.clone();
            thread::spawn(move || sem.complete_signal(1).unwrap())
        };
        let (on_cancelled, on_below) = (Count::default(), Count::default());
        let t2 = pin!(Timepoint::new(&on_cancelled));
        let t1 = pin!(Timepoint::new(&on_below));
        // SAFETY: both pinned in this frame; both are decided once the threads are joined
        // (checked below) and cancelled before the frame ends; `sem` outlives them.
        let (armed2, armed1) =
            unsafe { (sem.arm(t2.as_ref(), 2).unwrap(), sem.arm(t1.as_ref(), 1).unwrap()) };
        canceller.join().unwrap();
        signaller.join().unwrap();
        match armed2 {
            Arm::Ready(outcome) => assert_eq!(outcome, Err(Failure::Cancelled)),
            Arm::Armed => {
                assert!(t2.is_done());
                assert_eq!(on_cancelled.failures.load(Ordering::Relaxed), 1);
            }
        }
        match armed1 {
            Arm::Ready(outcome) => assert_eq!(outcome, Ok(1)),
            Arm::Armed => {
                assert!(t1.is_done());
                assert_eq!(on_below.failures.load(Ordering::Relaxed), 0);
            }
        }
        assert!(on_cancelled.calls.load(Ordering::Relaxed) <= 1);
        assert!(on_below.calls.load(Ordering::Relaxed) <= 1);
        sem.signal(3, origin(), &Frontier::<2>::new()).unwrap();
        assert_eq!((sem.value(), sem.failure()), (3, None));
        assert_eq!(sem.failure_for(2), Some(Failure::Cancelled));
        let _ = (sem.cancel(&t1), sem.cancel(&t2));
        assert!(!sem.has_waiters());
    });
}

/// Tells whether the signalling operation had ended when the waiter was told.
struct SeesTheEnd<'a> {
    ended: &'a loom::sync::atomic::AtomicBool,
    outcomes: AtomicUsize,
}

impl Notify for SeesTheEnd<'_> {
    fn notify(&self, _outcome: Outcome) {
        // Acquire pairs with the signaller's Release store of `ended`: a waiter told by the
        // retirement runs after that store (in the signaller's thread, or in one that took the
        // semaphore's lock after it); one told early, by the failure alone, may not see it.
        assert!(self.ended.load(Ordering::Acquire), "told of the failure before its signal ended");
        self.outcomes.fetch_add(1, Ordering::Relaxed);
    }
}

/// A timeline failed from outside (a host's `fail`) while the operation whose signal a waiter
/// imported is still running, racing that operation's retirement — completed (the value is
/// reached if the completion comes first) or failed: the waiter is told exactly once, and only
/// after the operation ended. Told at the failure, it would end — and the operations after it would
/// start — before work its frontier says has ended.
#[test]
fn an_outside_failure_racing_the_signallers_end_tells_the_waiter_only_after_it() {
    for completes in [true, false] {
        loom::model(move || {
            let sem = semaphore();
            sem.submit_signal(1, origin(), &Frontier::<2>::new()).unwrap();
            let ended = loom::sync::atomic::AtomicBool::new(false);
            let waiter = SeesTheEnd { ended: &ended, outcomes: AtomicUsize::new(0) };
            let timepoint = pin!(Timepoint::new(&waiter));
            // SAFETY: pinned here; both threads are joined and the timepoint has fired (checked
            // below) before the frame ends; `sem` outlives it.
            assert_eq!(unsafe { sem.arm(timepoint.as_ref(), 1) }, Ok(Arm::Armed));
            let failer = {
                let sem = sem.clone();
                thread::spawn(move || sem.fail(Failure::Application(1)))
            };
            // The signalling operation ends (its work done), then retires.
            ended.store(true, Ordering::Release);
            if completes {
                let _ = sem.complete_signal(1);
            } else {
                causeway_core::queue::retire([(&*sem, 1)], Err(Failure::Aborted));
            }
            failer.join().unwrap();
            while !timepoint.is_done() {
                thread::yield_now();
            }
            assert_eq!(waiter.outcomes.load(Ordering::Relaxed), 1);
            assert!(sem.failure().is_some());
            assert!(!sem.has_waiters());
        });
    }
}

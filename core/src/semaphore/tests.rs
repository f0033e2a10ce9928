//! The semaphore's unit tests. Their helpers [`semaphore`], [`origin`] and [`Recorder`] also
//! serve the queue's tests of [`retire`](crate::queue::retire): what the waiters of an
//! operation's signals learn when it retires is tested there, beside `retire`.

use core::pin::pin;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
use std::sync::Mutex;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::axis::{Axis, Domain};

const HERE: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 1 };

pub(crate) fn semaphore() -> Semaphore<4, 4> {
    Semaphore::new(0, Scope::DeviceLocal, HERE)
}

pub(crate) fn origin(queue: u64, epoch: u64) -> Point {
    Point::new(Axis::new(0, Domain::Queue, queue), epoch)
}

fn signal(s: &Semaphore<4, 4>, value: u64, queue: u64, epoch: u64) -> Result<(), SignalError> {
    let o = origin(queue, epoch);
    s.signal(value, o, &Frontier::<4>::from_points([o]))
}

/// Records every outcome it is notified with.
#[derive(Default)]
pub(crate) struct Recorder(Mutex<Vec<Outcome>>);

impl Notify for Recorder {
    fn notify(&self, outcome: Outcome) {
        self.0.lock().unwrap().push(outcome);
    }
}

impl Recorder {
    pub(crate) fn seen(&self) -> Vec<Outcome> {
        self.0.lock().unwrap().clone()
    }
}

#[test]
fn value_advances_and_refuses_stale_signals() {
    let s = semaphore();
    signal(&s, 2, 1, 1).unwrap();
    assert_eq!(s.value(), 2);
    assert_eq!(signal(&s, 2, 1, 2), Err(SignalError::NotAdvancing { value: 2, current: 2 }));
    assert_eq!(s.complete_signal(7), Err(SignalError::NotSubmitted { value: 7 }));
    assert_eq!(s.value(), 2);
}

#[test]
fn pending_signal_is_visible_to_lookups_before_it_completes() {
    let s = semaphore();
    let o = origin(3, 9);
    s.submit_signal(1, o, &Frontier::<8>::from_points([o])).unwrap();
    assert_eq!(s.value(), 0);
    assert!(matches!(s.lookup(1), Lookup::Tracked { reached: false, origin, .. } if origin == o));
    s.complete_signal(1).unwrap();
    assert!(matches!(s.lookup(1), Lookup::Tracked { reached: true, .. }));
}

#[test]
fn timepoints_fire_in_value_order_only_when_reached() {
    let s = semaphore();
    let (r1, r3) = (Recorder::default(), Recorder::default());
    let t3 = pin!(Timepoint::new(&r3));
    let t1 = pin!(Timepoint::new(&r1));
    // SAFETY: both timepoints are pinned in this frame, outlive the semaphore's use of them
    // (they fire below, checked with `is_done`) and `s` outlives them.
    unsafe {
        assert_eq!(s.arm(t3.as_ref(), 3), Ok(Arm::Armed));
        assert_eq!(s.arm(t1.as_ref(), 1), Ok(Arm::Armed));
        assert_eq!(s.arm(t1.as_ref(), 1), Err(ArmError::Busy));
    }
    signal(&s, 2, 1, 1).unwrap();
    assert_eq!(r1.seen(), [Ok(2)]);
    assert!(t1.is_done() && !t3.is_done());
    assert!(r3.seen().is_empty());
    signal(&s, 5, 1, 2).unwrap();
    assert_eq!(r3.seen(), [Ok(5)]);
    assert!(!s.has_waiters());
}

#[test]
fn arming_a_reached_value_is_ready_without_a_callback() {
    let s = semaphore();
    signal(&s, 4, 1, 1).unwrap();
    let r = Recorder::default();
    let t = pin!(Timepoint::new(&r));
    // SAFETY: `Ready` links nothing.
    assert_eq!(unsafe { s.arm(t.as_ref(), 4) }, Ok(Arm::Ready(Ok(4))));
    assert!(r.seen().is_empty());
    assert!(!t.is_busy());
}

#[test]
fn cancelled_timepoints_never_fire_and_can_be_rearmed() {
    let s = semaphore();
    let r = Recorder::default();
    let t = pin!(Timepoint::new(&r));
    // SAFETY: pinned here; cancelled or fired before the frame ends.
    unsafe { assert_eq!(s.arm(t.as_ref(), 2), Ok(Arm::Armed)) };
    assert_eq!(s.cancel(&t), Cancelled::Unlinked);
    assert_eq!(s.cancel(&t), Cancelled::NotArmed);
    signal(&s, 3, 1, 1).unwrap();
    assert!(r.seen().is_empty());
    // SAFETY: as above.
    unsafe { assert_eq!(s.arm(t.as_ref(), 4), Ok(Arm::Armed)) };
    signal(&s, 4, 1, 2).unwrap();
    assert_eq!(r.seen(), [Ok(4)]);
    assert_eq!(s.cancel(&t), Cancelled::AlreadyFired);
}

/// A callback that takes the semaphore's lock again would spin forever if callbacks ran under it.
struct Reentrant<'s> {
    semaphore: &'s Semaphore<4, 4>,
    observed: StdAtomicU64,
}

impl Notify for Reentrant<'_> {
    fn notify(&self, _: Outcome) {
        let value = self.semaphore.value();
        let imported = matches!(self.semaphore.lookup(value), Lookup::Tracked { .. });
        self.observed.store(if imported { value } else { u64::MAX }, StdOrdering::SeqCst);
    }
}

#[test]
fn callbacks_run_outside_the_lock() {
    let s = semaphore();
    let probe = Reentrant { semaphore: &s, observed: StdAtomicU64::new(0) };
    let t = pin!(Timepoint::new(&probe));
    // SAFETY: pinned here; fires below.
    unsafe { assert_eq!(s.arm(t.as_ref(), 1), Ok(Arm::Armed)) };
    signal(&s, 1, 1, 1).unwrap();
    assert_eq!(probe.observed.load(StdOrdering::SeqCst), 1);
}

#[test]
fn failure_is_sticky_and_reaches_current_and_later_waiters() {
    let s = semaphore();
    let r = Recorder::default();
    let t = pin!(Timepoint::new(&r));
    // SAFETY: pinned here; fires below.
    unsafe { assert_eq!(s.arm(t.as_ref(), 10), Ok(Arm::Armed)) };
    assert!(s.fail(Failure::DeviceLost));
    assert!(!s.fail(Failure::Aborted));
    assert_eq!(r.seen(), [Err(Failure::DeviceLost)]);
    assert_eq!(s.failure(), Some(Failure::DeviceLost));
    let late = pin!(Timepoint::new(&r));
    // SAFETY: `Ready` links nothing.
    assert_eq!(unsafe { s.arm(late.as_ref(), 1) }, Ok(Arm::Ready(Err(Failure::DeviceLost))));
    assert_eq!(s.lookup(1), Lookup::Failed(Failure::DeviceLost));
    assert_eq!(signal(&s, 11, 1, 1), Err(SignalError::Failed(Failure::DeviceLost)));
}

#[test]
fn a_failure_spares_waits_on_values_reached_before_it() {
    let s = semaphore();
    let r = Recorder::default();
    assert_eq!(signal(&s, 2, 1, 1), Ok(()));
    let t = pin!(Timepoint::new(&r));
    // SAFETY: pinned here; fires below.
    unsafe { assert_eq!(s.arm(t.as_ref(), 3), Ok(Arm::Armed)) };
    assert!(s.fail(Failure::Cancelled));
    assert_eq!(r.seen(), [Err(Failure::Cancelled)]);
    let reached = pin!(Timepoint::new(&r));
    // SAFETY: `Ready` links nothing.
    assert_eq!(unsafe { s.arm(reached.as_ref(), 2) }, Ok(Arm::Ready(Ok(2))));
    assert!(matches!(s.lookup(2), Lookup::Tracked { reached: true, .. }));
    assert_eq!(s.lookup(3), Lookup::Failed(Failure::Cancelled));
    assert_eq!(s.failure_for(2), None);
    assert_eq!(s.failure_for(3), Some(Failure::Cancelled));
}

#[test]
fn a_cancelled_signal_fails_its_waiters_and_spares_the_signals_above_it() {
    let s = semaphore();
    let (below, cancelled, accepted) = (origin(1, 1), origin(2, 1), origin(1, 2));
    s.submit_signal(1, below, &Frontier::<4>::from_points([below])).unwrap();
    s.submit_signal(3, cancelled, &Frontier::<4>::from_points([cancelled])).unwrap();
    s.submit_signal(5, accepted, &Frontier::<4>::from_points([accepted])).unwrap();
    let [r1, r2, r3, r4, r6] = [(); 5].map(|()| Recorder::default());
    let t1 = pin!(Timepoint::new(&r1));
    let t2 = pin!(Timepoint::new(&r2));
    let t3 = pin!(Timepoint::new(&r3));
    let t4 = pin!(Timepoint::new(&r4));
    let t6 = pin!(Timepoint::new(&r6));
    // SAFETY: all pinned in this frame, and `s` outlives them; each fires below, or (`t6`) is
    // cancelled before the frame ends.
    unsafe {
        for (t, minimum) in [(&t1, 1), (&t2, 2), (&t3, 3), (&t4, 4), (&t6, 6)] {
            assert_eq!(s.arm(t.as_ref(), minimum), Ok(Arm::Armed));
        }
    }
    assert_eq!(s.cancel_signal(3), Ok(()));
    // Only the waiters of the values the cancelled signal would have reached (2..=3) fire.
    assert_eq!(r2.seen(), [Err(Failure::Cancelled)]);
    assert_eq!(r3.seen(), [Err(Failure::Cancelled)]);
    assert!(r1.seen().is_empty() && r4.seen().is_empty() && r6.seen().is_empty());
    assert_eq!(s.failure(), None, "the timeline itself has not failed");
    assert_eq!(
        (s.failure_for(1), s.failure_for(3), s.failure_for(4)),
        (None, Some(Failure::Cancelled), None)
    );
    s.complete_signal(1).unwrap();
    // The accepted signal above the cancelled one completes; its waiters import its frontier.
    s.complete_signal(5).unwrap();
    assert_eq!(r1.seen(), [Ok(1)]);
    assert_eq!(r4.seen(), [Ok(5)]);
    assert!(
        matches!(s.lookup(4), Lookup::Tracked { origin, reached: true, .. } if origin == accepted)
    );
    // Passing the cancelled range does not revive it.
    assert_eq!(s.value(), 5);
    assert_eq!(s.failure_for(2), Some(Failure::Cancelled));
    let late = pin!(Timepoint::new(&r1));
    // SAFETY: `Ready` links nothing.
    assert_eq!(unsafe { s.arm(late.as_ref(), 2) }, Ok(Arm::Ready(Err(Failure::Cancelled))));
    assert_eq!(s.lookup(2), Lookup::Failed(Failure::Cancelled));
    assert_eq!(s.cancel(&t6), Cancelled::Unlinked);
    assert_eq!(s.cancel_signal(5), Err(SignalError::NotAdvancing { value: 5, current: 5 }));
}

#[test]
fn withdrawing_a_reservation_below_a_cancelled_signal_fails_the_waiters_it_covered() {
    let s = semaphore();
    let (r, above) = (Recorder::default(), Recorder::default());
    s.reserve_signal(2).unwrap();
    let o = origin(2, 1);
    s.submit_signal(4, o, &Frontier::<4>::from_points([o])).unwrap();
    let t = pin!(Timepoint::new(&r));
    let t5 = pin!(Timepoint::new(&above));
    // SAFETY: pinned here; `t` fires below, `t5` is cancelled before the frame ends.
    unsafe {
        assert_eq!(s.arm(t.as_ref(), 1), Ok(Arm::Armed));
        assert_eq!(s.arm(t5.as_ref(), 5), Ok(Arm::Armed));
    }
    s.cancel_signal(4).unwrap();
    assert!(r.seen().is_empty(), "1 lies below the cancelled range while 2 is reserved");
    assert!(s.withdraw_signal(2));
    assert_eq!(r.seen(), [Err(Failure::Cancelled)]);
    assert_eq!(s.failure_for(1), Some(Failure::Cancelled));
    assert!(above.seen().is_empty());
    assert_eq!(s.cancel(&t5), Cancelled::Unlinked);
}

#[test]
fn out_of_order_completion_fails_waiters_instead_of_lying() {
    let s = semaphore();
    let r = Recorder::default();
    let t = pin!(Timepoint::new(&r));
    s.submit_signal(1, origin(1, 1), &Frontier::<4>::new()).unwrap();
    s.submit_signal(2, origin(2, 1), &Frontier::<4>::new()).unwrap();
    // SAFETY: pinned here; fires below.
    unsafe { assert_eq!(s.arm(t.as_ref(), 1), Ok(Arm::Armed)) };
    assert_eq!(s.complete_signal(2), Err(SignalError::OutOfOrder { value: 2, pending: 1 }));
    // The signal the waiter imported is still running: it is told when that operation ends.
    assert_eq!(r.seen(), []);
    assert_eq!(s.failure_for(1), Some(Failure::OutOfOrderSignal));
    assert_eq!(s.complete_signal(1), Err(SignalError::Failed(Failure::OutOfOrderSignal)));
    assert_eq!(r.seen(), [Err(Failure::OutOfOrderSignal)]);
    assert_eq!(s.value(), 0);
}

#[test]
fn a_failed_timeline_tells_a_waiter_only_once_the_signal_it_waits_on_has_ended() {
    let s = semaphore();
    let (on_first, on_second, unsignalled) =
        (Recorder::default(), Recorder::default(), Recorder::default());
    let (t1, t2, t3) = (
        pin!(Timepoint::new(&on_first)),
        pin!(Timepoint::new(&on_second)),
        pin!(Timepoint::new(&unsignalled)),
    );
    s.submit_signal(1, origin(1, 1), &Frontier::<4>::new()).unwrap();
    s.submit_signal(2, origin(2, 1), &Frontier::<4>::new()).unwrap();
    // SAFETY: pinned here; each fires below before the frame ends.
    unsafe {
        assert_eq!(s.arm(t1.as_ref(), 1), Ok(Arm::Armed));
        assert_eq!(s.arm(t3.as_ref(), 3), Ok(Arm::Armed));
    }
    // Failed from outside its signallers: only the wait no running signal covers is told.
    assert!(s.fail(Failure::Application(7)));
    assert_eq!((on_first.seen(), unsignalled.seen()), (vec![], vec![Err(Failure::Application(7))]));
    // Lookups fail at once (a waiter submitted now imports nothing and ends at once), but a
    // timepoint armed on a value a live signal covers waits for it like the first one.
    assert_eq!(s.lookup(2), Lookup::Failed(Failure::Application(7)));
    // SAFETY: as above.
    unsafe { assert_eq!(s.arm(t2.as_ref(), 2), Ok(Arm::Armed)) };
    assert!(!s.fail(Failure::Aborted), "the first failure won");
    // The second signal's operation fails: its waiter is told, the first one's still waits.
    assert!(!s.fail_signal(2, Failure::Aborted));
    assert_eq!(on_second.seen(), [Err(Failure::Application(7))]);
    assert_eq!(on_first.seen(), []);
    // The first signal's operation completes after the failure: the value is not reached, but
    // the operation has ended.
    assert_eq!(s.complete_signal(1), Err(SignalError::Failed(Failure::Application(7))));
    assert_eq!(on_first.seen(), [Err(Failure::Application(7))]);
    assert_eq!(s.value(), 0);
    assert!(!s.has_waiters());
}

#[test]
fn abandoning_a_timeline_ends_every_signal_and_tells_every_waiter() {
    let s = semaphore();
    let r = Recorder::default();
    let t = pin!(Timepoint::new(&r));
    s.submit_signal(1, origin(1, 1), &Frontier::<4>::new()).unwrap();
    // SAFETY: pinned here; fires below.
    unsafe { assert_eq!(s.arm(t.as_ref(), 1), Ok(Arm::Armed)) };
    assert!(s.abandon(Failure::DeviceLost));
    assert_eq!(r.seen(), [Err(Failure::DeviceLost)]);
    let late = pin!(Timepoint::new(&r));
    // SAFETY: `Ready` links nothing.
    assert_eq!(unsafe { s.arm(late.as_ref(), 1) }, Ok(Arm::Ready(Err(Failure::DeviceLost))));
}

#[test]
fn external_signals_open_a_taint_window() {
    let s = semaphore();
    signal(&s, 1, 1, 1).unwrap();
    s.signal_external(3).unwrap();
    assert_eq!(s.value(), 3);
    assert_eq!(s.lookup(2), Lookup::External { reached: true });
    signal(&s, 4, 1, 2).unwrap();
    assert!(matches!(s.lookup(4), Lookup::Tracked { .. }));
}

/// Unparks a waiting thread.
struct Unpark(std::thread::Thread, std::sync::atomic::AtomicBool);

impl Notify for Unpark {
    fn notify(&self, _: Outcome) {
        self.1.store(true, StdOrdering::Release);
        self.0.unpark();
    }
}

#[test]
fn scoped_wait_blocks_until_another_thread_signals() {
    let s = semaphore();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let wake = Unpark(std::thread::current(), Default::default());
            s.wait_scoped(3, &wake, |arm| match arm {
                Arm::Ready(outcome) => outcome,
                Arm::Armed => {
                    while !wake.1.load(StdOrdering::Acquire) {
                        std::thread::park();
                    }
                    Ok(s.value())
                }
            })
        });
        for v in 1..=3 {
            signal(&s, v, 1, v).unwrap();
        }
        assert_eq!(waiter.join().unwrap(), Ok(3));
    });
    assert!(!s.has_waiters());
}

#[test]
fn scoped_wait_that_gives_up_unlinks_its_timepoint() {
    let s = semaphore();
    let r = Recorder::default();
    let outcome = s.wait_scoped(5, &r, |arm| arm);
    assert_eq!(outcome, Arm::Armed);
    assert!(!s.has_waiters());
    signal(&s, 5, 1, 1).unwrap();
    assert!(r.seen().is_empty());
}

#[test]
fn failure_words_round_trip_and_are_never_zero() {
    let failures = [
        Failure::Cancelled,
        Failure::Aborted,
        Failure::DeviceLost,
        Failure::OutOfOrderSignal,
        Failure::OutOfMemory,
        Failure::Application(0),
        Failure::Application(u32::MAX),
        Failure::Faulted(0x104),
    ];
    for failure in failures {
        assert_ne!(failure.to_word(), 0);
        assert_eq!(Failure::from_word(failure.to_word()), Some(failure));
    }
    assert_eq!(Failure::from_word(0), None);
    assert_eq!(Failure::from_word(9 << 32), None);
}

#[test]
fn reset_starts_the_timeline_again_unless_someone_waits() {
    struct Nothing;
    impl Notify for Nothing {
        fn notify(&self, _: Outcome) {}
    }
    let s = semaphore();
    signal(&s, 1, 1, 1).unwrap();
    s.fail(Failure::Aborted);
    assert_eq!(s.reset(5), Ok(()));
    assert_eq!((s.value(), s.failure()), (5, None));
    assert_eq!(s.lookup(5), Lookup::Initial);
    assert_eq!(s.lookup(6), Lookup::Unsignalled);
    signal(&s, 6, 1, 2).unwrap();
    assert_eq!(s.value(), 6);
    s.wait_scoped(9, &Nothing, |arm| {
        assert_eq!(arm, Arm::Armed);
        assert_eq!(s.reset(0), Err(ResetError::Waited));
    });
    assert_eq!(s.reset(0), Ok(()));
}

/// Between settling one signal of a retiring operation and publishing it, the semaphore reads
/// as not reached — its value, a lookup, a new wait — so nobody learns the operation ended
/// while its other signals may still be pending; once published, a wait is ready.
#[test]
fn a_settled_signal_is_unseen_until_published_and_its_late_waiter_is_told() {
    let s = semaphore();
    let o = origin(2, 1);
    s.submit_signal(1, o, &Frontier::<4>::from_points([o])).unwrap();
    s.settle_untold(1, Ok(()));
    assert_eq!(s.value(), 0);
    assert!(matches!(s.lookup(1), Lookup::Tracked { reached: false, .. }));
    let late = Recorder::default();
    let t = pin!(Timepoint::new(&late));
    // SAFETY: pinned in this frame; told by `tell_settled` below, before the frame ends.
    unsafe { assert_eq!(s.arm(t.as_ref(), 1), Ok(Arm::Armed)) };
    s.publish_settled();
    assert_eq!(s.value(), 1);
    assert!(matches!(s.lookup(1), Lookup::Tracked { reached: true, .. }));
    let ready = Recorder::default();
    let r = pin!(Timepoint::new(&ready));
    // SAFETY: `Ready` links nothing.
    assert_eq!(unsafe { s.arm(r.as_ref(), 1) }, Ok(Arm::Ready(Ok(1))));
    assert!(late.seen().is_empty());
    s.tell_settled(1);
    assert_eq!(late.seen(), [Ok(1)]);
}

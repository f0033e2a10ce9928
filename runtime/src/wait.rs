//! Awaitable timelines: futures that complete when a semaphore reaches a value
//! ([`SemaphoreWait`]) or every point of a fence is reached ([`FenceWait`]), plus [`block_on`]
//! for host threads.
//!
//! The futures depend only on [`Waker`], so they run under any executor: a coroutine process
//! ([`Spawner`](crate::Spawner)), [`block_on`], or another runtime.
//!
//! # Waking
//!
//! A wait arms one core [`Timepoint`] per point. The timepoints live *inside the future*, which
//! is pinned once polled, so waiting allocates nothing and a semaphore may have any number of
//! waiters. Their callback is the future's own `Waiter`: under a short lock it counts the
//! point reached (or records the failure) and, once the wait is decided, takes the [`Waker`]
//! the latest poll stored and wakes it after unlocking. A poll stores its waker under the same
//! lock before looking at the count, so a callback either sees the waker or the poll sees the
//! callback's result: no wake-up is lost.
//!
//! A wait that is already decided when it is first polled (the value reached, the timeline
//! failed with no signal still running for it) completes without arming anything.
//!
//! # Failure
//!
//! A wait ends only once every point has ended: reached, or failed *and* the operation that
//! was to signal it has ended ([`Semaphore::fail`] explains the second). A fence wait whose
//! first point fails still waits for its other points, since whoever waits may have imported
//! what they carry, and the work they name must have ended when the wait does. It then
//! returns the first failure.
//!
//! # Cancellation
//!
//! Dropping a wait — or deciding it — cancels every timepoint it still has armed with
//! [`Semaphore::cancel`], which unlinks it or, if its callback
//! is running on another thread, waits for the callback to return. Only then is the timepoint
//! (and the `Waiter` it points at) released, which is the arm contract of [`Semaphore::arm`].
//! The borrow of each semaphore outlives the future, so the semaphores outlive the timepoints.

use std::fmt;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use causeway_core::fence::Fence;
use causeway_core::semaphore::{
    Arm, Failure, HistoryEntry, HistorySlots, Notify, Outcome, Semaphore, Timepoint,
};
use causeway_core::unpoisoned::{Mutex, MutexGuard};

/// What a wait's timepoints report to, and what its polls read.
struct Waiter {
    state: Mutex<WaiterState>,
}

struct WaiterState {
    /// The waker of the latest poll.
    waker: Option<Waker>,
    /// Points armed and not yet reached.
    pending: usize,
    /// The largest value reported by a reached point.
    value: u64,
    /// The first failure reported.
    failure: Option<Failure>,
}

impl WaiterState {
    /// Decided once every point has ended, reached or failed — not at the first failure: a
    /// point still pending may have been imported by the waiter's operation, which must not end
    /// before the signal it waits for has (see "Failure" in `causeway_core::queue`).
    fn decided(&self) -> Option<Outcome> {
        match self.failure {
            _ if self.pending != 0 => None,
            Some(failure) => Some(Err(failure)),
            None => Some(Ok(self.value)),
        }
    }

    fn record(&mut self, outcome: Outcome) {
        // A point reports once; saturating keeps a broken report from wrapping.
        self.pending = self.pending.saturating_sub(1);
        match outcome {
            Ok(value) => self.value = self.value.max(value),
            Err(failure) => {
                self.failure.get_or_insert(failure);
            }
        }
    }
}

impl Waiter {
    fn new() -> Waiter {
        Waiter {
            state: Mutex::new(WaiterState { waker: None, pending: 0, value: 0, failure: None }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, WaiterState> {
        // Every update under this lock leaves the state consistent (a waker is cloned before
        // it is stored, and woken after the guard is dropped), so a panicking waker does not
        // invalidate it; and `Drop` disarms through here while such a panic unwinds.
        self.state.lock()
    }

    /// Stores `waker` for the callbacks unless the wait is already decided.
    fn poll(&self, waker: &Waker) -> Option<Outcome> {
        let mut state = self.lock();
        let decided = state.decided();
        if decided.is_none() && !state.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            state.waker = Some(waker.clone());
        }
        decided
    }
}

impl Notify for Waiter {
    fn notify(&self, outcome: Outcome) {
        let waker = {
            let mut state = self.lock();
            state.record(outcome);
            if state.decided().is_some() {
                state.waker.take()
            } else {
                None
            }
        };
        // Outside the lock: waking may run arbitrary executor code.
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The signalling thread may have been preempted inside `notify` by the worker it woke.
    fn while_firing(&self) {
        std::thread::yield_now();
    }
}

/// The machinery shared by both waits: up to `K` points, their timepoints and the waiter.
struct Points<'s, const K: usize, const H: usize, const N: usize, S: HistorySlots<N>> {
    points: [Option<(&'s Semaphore<H, N, S>, u64)>; K],
    /// `Some` exactly while the point's timepoint may be linked or firing.
    timepoints: [Option<Timepoint<'static>>; K],
    waiter: Waiter,
    armed: bool,
    outcome: Option<Outcome>,
}

impl<'s, const K: usize, const H: usize, const N: usize, S: HistorySlots<N>>
    Points<'s, K, H, N, S>
{
    fn new(points: impl IntoIterator<Item = (&'s Semaphore<H, N, S>, u64)>) -> Self {
        let mut array = [None; K];
        for (slot, point) in array.iter_mut().zip(points) {
            *slot = Some(point);
        }
        Points {
            points: array,
            timepoints: [const { None }; K],
            waiter: Waiter::new(),
            armed: false,
            outcome: None,
        }
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        // SAFETY: nothing is moved out of `this`; the timepoints are written only while they
        // are not linked (see `arm` and `disarm`), and stay in place while linked.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(outcome) = this.outcome {
            return Poll::Ready(outcome);
        }
        if !this.armed {
            this.armed = true;
            this.arm(cx.waker());
        }
        match this.waiter.poll(cx.waker()) {
            Some(outcome) => {
                this.disarm();
                this.outcome = Some(outcome);
                Poll::Ready(outcome)
            }
            None => Poll::Pending,
        }
    }

    /// Arms every point not already decided.
    fn arm(&mut self, waker: &Waker) {
        {
            let mut state = self.waiter.lock();
            state.pending = self.points.iter().flatten().count();
            state.waker = Some(waker.clone());
        }
        // The callbacks' target, with its lifetime erased: it lives beside the timepoints in
        // this pinned value, and `disarm` (also run by `Drop`) unlinks every timepoint first.
        let notify: *const dyn Notify = &self.waiter;
        for (point, slot) in self.points.iter().zip(self.timepoints.iter_mut()) {
            let Some((semaphore, minimum)) = *point else { continue };
            // A value whose signal was cancelled fails although the timeline may have passed
            // it (`failure_for`), and a failed value ends only with its signal's operation:
            // anything but a plain reached value is left to `arm`, which decides both.
            let decided = match semaphore.failure_for(minimum) {
                None if semaphore.value() >= minimum => Some(Ok(semaphore.value())),
                _ => {
                    // SAFETY: `notify` points at `self.waiter`, which outlives the timepoint:
                    // both are fields of this pinned value and every armed timepoint is
                    // cancelled before either is dropped (`disarm`, called by `Drop`).
                    let timepoint = slot.insert(Timepoint::new(unsafe { &*notify }));
                    // SAFETY: the arm contract. The timepoint stays in place until `disarm`
                    // cancels it (it lives in a pinned value that is never moved, and `Drop`
                    // disarms); `semaphore` is borrowed for longer than this value lives.
                    let arm = unsafe { semaphore.arm(Pin::new_unchecked(timepoint), minimum) };
                    match arm.expect("a fresh timepoint is idle") {
                        Arm::Armed => None,
                        Arm::Ready(outcome) => {
                            // Never linked: nothing can touch it, so it may go now.
                            *slot = None;
                            Some(outcome)
                        }
                    }
                }
            };
            if let Some(outcome) = decided {
                self.waiter.lock().record(outcome);
            }
        }
    }

    /// Cancels every timepoint that may still be linked or firing; afterwards none is.
    fn disarm(&mut self) {
        for (point, slot) in self.points.iter().zip(self.timepoints.iter_mut()) {
            if let (Some((semaphore, _)), Some(timepoint)) = (point, slot.as_ref()) {
                // A done timepoint has had its callback's last access (Acquire in `is_done`);
                // otherwise `cancel` unlinks it or waits until its callback has returned.
                if !timepoint.is_done() {
                    let _ = semaphore.cancel(timepoint);
                }
            }
            *slot = None;
        }
    }
}

impl<const K: usize, const H: usize, const N: usize, S: HistorySlots<N>> Drop
    for Points<'_, K, H, N, S>
{
    fn drop(&mut self) {
        self.disarm();
    }
}

/// A future that completes when a semaphore reaches a value: `Ok(value seen)`, or the
/// timeline's failure. Made by [`SemaphoreExt::wait`] or [`wait`].
#[must_use = "futures do nothing unless polled"]
pub struct SemaphoreWait<
    's,
    const H: usize = 8,
    const N: usize = 8,
    S: HistorySlots<N> = [HistoryEntry<N>; H],
> {
    points: Points<'s, 1, H, N, S>,
}

impl<const H: usize, const N: usize, S: HistorySlots<N>> Future for SemaphoreWait<'_, H, N, S> {
    type Output = Result<u64, Failure>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of the only field; it is never moved out.
        unsafe { self.map_unchecked_mut(|wait| &mut wait.points) }.poll(cx)
    }
}

impl<const H: usize, const N: usize, S: HistorySlots<N>> fmt::Debug for SemaphoreWait<'_, H, N, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let minimum = self.points.points[0].map(|(_, minimum)| minimum);
        f.debug_struct("SemaphoreWait")
            .field("minimum", &minimum)
            .field("outcome", &self.points.outcome)
            .finish_non_exhaustive()
    }
}

/// A future that completes when every point of a fence is reached (`Ok(())`), or with the
/// first failure any of its timelines reports once every point has ended (see "Failure" in
/// the module docs). Made by [`FenceExt::wait`] or [`wait_fence`].
#[must_use = "futures do nothing unless polled"]
pub struct FenceWait<
    's,
    const K: usize = 4,
    const H: usize = 8,
    const N: usize = 8,
    S: HistorySlots<N> = [HistoryEntry<N>; H],
> {
    points: Points<'s, K, H, N, S>,
}

impl<'s, const K: usize, const H: usize, const N: usize, S: HistorySlots<N>>
    FenceWait<'s, K, H, N, S>
{
    /// A wait on the given points (at most `K`; further points are ignored, which callers
    /// rule out by taking them from a `K`-point fence).
    pub(crate) fn from_points(
        points: impl IntoIterator<Item = (&'s Semaphore<H, N, S>, u64)>,
    ) -> Self {
        FenceWait { points: Points::new(points) }
    }
}

impl<const K: usize, const H: usize, const N: usize, S: HistorySlots<N>> Future
    for FenceWait<'_, K, H, N, S>
{
    type Output = Result<(), Failure>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of the only field; it is never moved out.
        let points = unsafe { self.map_unchecked_mut(|wait| &mut wait.points) };
        points.poll(cx).map(|outcome| outcome.map(|_| ()))
    }
}

impl<const K: usize, const H: usize, const N: usize, S: HistorySlots<N>> fmt::Debug
    for FenceWait<'_, K, H, N, S>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let minimums: Vec<u64> =
            self.points.points.iter().flatten().map(|(_, minimum)| *minimum).collect();
        f.debug_struct("FenceWait")
            .field("minimums", &minimums)
            .field("outcome", &self.points.outcome)
            .finish_non_exhaustive()
    }
}

/// Waits on `semaphore ≥ minimum`.
pub fn wait<const H: usize, const N: usize, S: HistorySlots<N>>(
    semaphore: &Semaphore<H, N, S>,
    minimum: u64,
) -> SemaphoreWait<'_, H, N, S> {
    SemaphoreWait { points: Points::new([(semaphore, minimum)]) }
}

/// Waits until every point of `fence` is reached (an empty fence is reached at once).
pub fn wait_fence<'f, const K: usize, const H: usize, const N: usize, S: HistorySlots<N>>(
    fence: &'f Fence<'_, K, H, N, S>,
) -> FenceWait<'f, K, H, N, S> {
    FenceWait::from_points(fence.iter())
}

/// `semaphore.wait(value).await`.
pub trait SemaphoreExt<const H: usize, const N: usize, S: HistorySlots<N>> {
    /// Waits on this semaphore reaching `minimum`; see [`SemaphoreWait`].
    fn wait(&self, minimum: u64) -> SemaphoreWait<'_, H, N, S>;
}

impl<const H: usize, const N: usize, S: HistorySlots<N>> SemaphoreExt<H, N, S>
    for Semaphore<H, N, S>
{
    fn wait(&self, minimum: u64) -> SemaphoreWait<'_, H, N, S> {
        wait(self, minimum)
    }
}

/// `fence.wait().await`.
pub trait FenceExt<const K: usize, const H: usize, const N: usize, S: HistorySlots<N>> {
    /// Waits on every point of this fence; see [`FenceWait`].
    fn wait(&self) -> FenceWait<'_, K, H, N, S>;
}

impl<const K: usize, const H: usize, const N: usize, S: HistorySlots<N>> FenceExt<K, H, N, S>
    for Fence<'_, K, H, N, S>
{
    fn wait(&self) -> FenceWait<'_, K, H, N, S> {
        wait_fence(self)
    }
}

/// Wakes a thread blocked in [`block_on`].
struct Unpark {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Release pairs with the Acquire swap in `block_on`: what the waker did before waking
        // is visible to the next poll.
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Runs `future` to completion on the calling thread, parking between polls.
///
/// Allocates one small waker per call (a fresh one each time, so nested calls on one thread
/// never consume each other's wake-ups). Do not call it on a pool worker for a future that
/// needs that pool to make progress: the worker is blocked meanwhile.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let unpark = Arc::new(Unpark { thread: thread::current(), woken: AtomicBool::new(false) });
    let waker = Waker::from(Arc::clone(&unpark));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // Acquire pairs with the Release store in `wake_by_ref`. `park` may return
        // spuriously, hence the flag.
        while !unpark.woken.swap(false, Ordering::Acquire) {
            thread::park();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use causeway_core::axis::{Axis, Domain};
    use causeway_core::frontier::{Frontier, Point};
    use causeway_core::scope::{Endpoint, Scope};

    use super::*;
    use crate::FRONTIER_CAPACITY;

    const HERE: Endpoint =
        Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

    fn semaphore() -> Semaphore {
        Semaphore::new(0, Scope::DeviceLocal, HERE)
    }

    fn signal(semaphore: &Semaphore, value: u64) {
        let origin = Point::new(Axis::new(0, Domain::Host, 1), value);
        semaphore.signal(value, origin, &Frontier::<FRONTIER_CAPACITY>::new()).unwrap();
    }

    /// Polls once with a waker that counts its wakes.
    fn poll_counting<F: Future>(future: Pin<&mut F>, wakes: &Arc<Counter>) -> Poll<F::Output> {
        let waker = Waker::from(Arc::clone(wakes));
        future.poll(&mut Context::from_waker(&waker))
    }

    #[derive(Default)]
    struct Counter(std::sync::atomic::AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_reached_value_is_ready_without_arming() {
        let s = semaphore();
        signal(&s, 3);
        assert_eq!(block_on(s.wait(2)), Ok(3));
        assert!(!s.has_waiters());
    }

    #[test]
    fn a_signal_from_another_thread_wakes_the_waiter_once() {
        let s = semaphore();
        let wakes = Arc::new(Counter::default());
        let mut wait = pin!(s.wait(2));
        assert!(poll_counting(wait.as_mut(), &wakes).is_pending());
        assert!(s.has_waiters());
        thread::scope(|scope| {
            scope.spawn(|| signal(&s, 1));
        });
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0, "1 < 2 does not wake");
        thread::scope(|scope| {
            scope.spawn(|| signal(&s, 2));
        });
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll_counting(wait.as_mut(), &wakes), Poll::Ready(Ok(2)));
        // Polling a finished wait repeats its outcome rather than panicking.
        assert_eq!(poll_counting(wait.as_mut(), &wakes), Poll::Ready(Ok(2)));
    }

    #[test]
    fn block_on_parks_until_a_late_signal() {
        let s = semaphore();
        thread::scope(|scope| {
            scope.spawn(|| {
                thread::sleep(Duration::from_millis(20));
                signal(&s, 5);
            });
            assert_eq!(block_on(s.wait(5)), Ok(5));
        });
    }

    #[test]
    fn failure_reaches_armed_and_later_waits() {
        let s = semaphore();
        let wakes = Arc::new(Counter::default());
        let mut wait = pin!(s.wait(1));
        assert!(poll_counting(wait.as_mut(), &wakes).is_pending());
        s.fail(Failure::Application(4));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll_counting(wait.as_mut(), &wakes), Poll::Ready(Err(Failure::Application(4))));
        assert_eq!(block_on(s.wait(1)), Err(Failure::Application(4)));
        assert_eq!(block_on(s.wait(0)), Ok(0), "a value reached before the failure stays reached");
    }

    #[test]
    fn dropping_a_pending_wait_unlinks_its_timepoint() {
        let s = semaphore();
        {
            let wakes = Arc::new(Counter::default());
            let mut wait = pin!(s.wait(1));
            assert!(poll_counting(wait.as_mut(), &wakes).is_pending());
            assert!(s.has_waiters());
        }
        assert!(!s.has_waiters(), "drop cancelled the timepoint");
        // Signalling now must not touch the dropped future's memory.
        signal(&s, 1);
    }

    #[test]
    fn a_fence_waits_for_all_points() {
        let (a, b) = (semaphore(), semaphore());
        let mut fence: Fence<'_, 2> = Fence::new();
        fence.insert(&a, 1).unwrap();
        fence.insert(&b, 2).unwrap();
        let wakes = Arc::new(Counter::default());
        let mut wait = pin!(fence.wait());
        assert!(poll_counting(wait.as_mut(), &wakes).is_pending());
        signal(&b, 2);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0, "one of two points");
        signal(&a, 1);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll_counting(wait.as_mut(), &wakes), Poll::Ready(Ok(())));
        assert!(!a.has_waiters() && !b.has_waiters());
        assert_eq!(block_on(Fence::<'_, 2>::new().wait()), Ok(()), "empty fence");
    }

    #[test]
    fn a_fence_with_a_failed_point_ends_with_its_last_point_and_reports_the_failure() {
        let (a, b) = (semaphore(), semaphore());
        let mut fence: Fence<'_, 2> = Fence::new();
        fence.insert(&a, 1).unwrap();
        fence.insert(&b, 1).unwrap();
        let wakes = Arc::new(Counter::default());
        let mut wait = pin!(fence.wait());
        assert!(poll_counting(wait.as_mut(), &wakes).is_pending());
        b.fail(Failure::DeviceLost);
        // Whoever waits may have imported what `a` carries: the wait ends once `a` has too.
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
        assert!(poll_counting(wait.as_mut(), &wakes).is_pending());
        signal(&a, 1);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll_counting(wait.as_mut(), &wakes), Poll::Ready(Err(Failure::DeviceLost)));
        assert!(!a.has_waiters() && !b.has_waiters());
    }

    #[test]
    fn a_wait_on_a_failed_timeline_ends_when_the_signal_it_waits_for_does() {
        let s = semaphore();
        let origin = Point::new(Axis::new(0, Domain::Queue, 1), 1);
        s.submit_signal(1, origin, &Frontier::<8>::from_points([origin])).unwrap();
        let wakes = Arc::new(Counter::default());
        let mut wait = pin!(s.wait(1));
        assert!(poll_counting(wait.as_mut(), &wakes).is_pending());
        s.fail(Failure::Application(9));
        // The signalling operation is still running.
        assert!(poll_counting(wait.as_mut(), &wakes).is_pending());
        let late = pin!(s.wait(1));
        let late_wakes = Arc::new(Counter::default());
        let mut late = late;
        assert!(poll_counting(late.as_mut(), &late_wakes).is_pending(), "armed after the failure");
        causeway_core::queue::retire([(&s, 1)], Ok(()));
        assert_eq!(poll_counting(wait.as_mut(), &wakes), Poll::Ready(Err(Failure::Application(9))));
        assert_eq!(
            poll_counting(late.as_mut(), &late_wakes),
            Poll::Ready(Err(Failure::Application(9)))
        );
    }

    #[test]
    fn many_threads_waiting_on_one_semaphore_all_wake() {
        let s = &semaphore();
        thread::scope(|scope| {
            let waiters: Vec<_> =
                (1..=8).map(|value| scope.spawn(move || block_on(wait(s, value)))).collect();
            for value in 1..=8 {
                signal(s, value);
            }
            for (value, waiter) in (1..=8).zip(waiters) {
                assert!(waiter.join().unwrap().is_ok_and(|seen| seen >= value));
            }
        });
    }
}

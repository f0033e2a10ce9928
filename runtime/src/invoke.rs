//! Invocations ordered by fences: run a host function once a *wait fence* is reached, then
//! advance a *signal fence*, on the CPU pool (the model is written up in
//! `docs/src/architecture.md`, section "Invocations").
//!
//! ```text
//!   user timeline T:   ──0────────1────────2────────3──►
//!   invoke(f0, T@0, T@1) ─► f0 runs, then T := 1
//!   invoke(f1, T@1, T@2) ─► f1 runs after T ≥ 1, then T := 2     (issued before f0 ran)
//!   block_on(T@2 wait)   ─► the only time the user waits
//! ```
//!
//! An [`Invoker`] is one invocation context: a queue with its own causal axis, whose
//! [`QueueClock`] tracks what the context knows. [`Invoker::invoke_async`] *issues* on the
//! calling thread and returns at once; the work runs later, on the pool, as a coroutine process
//! ([`Spawner`]). [`Invoker::invoke`] is the same followed by a blocking wait.
//!
//! # Issue (caller's thread, no blocking)
//!
//! 1. Each wait point is resolved by [`Submission::wait`], which imports the frontier of the
//!    signal that first reached the value and counts the resolution: **elided** (the context
//!    already knows the signalling operation — an earlier invocation on this context, or one
//!    it learned of transitively), **satisfied** (the value is already reached) or **device
//!    wait** (it must be waited for at run time). Only device waits arm anything at run time;
//!    elided and satisfied points are merely checked for failure.
//! 2. The invocation gets the context's next epoch; its frontier is what it knows.
//! 3. Every signal point is recorded as a *pending* signal carrying that frontier, so
//!    invocations issued later (on any context) resolve their waits on it right away, before it
//!    has run ("submit before wait").
//!
//! [`Submission::wait`]: causeway_core::queue::Submission::wait
//!
//! # Run (a worker)
//!
//! Invocations on one context **retire in issue order**, like a queue: invocation `k` starts
//! after `k − 1` has signalled. That order is what makes elision sound (an elided wait's
//! signaller has run by the time the waiter starts) and what lets one causal axis stand for the
//! whole context (knowing epoch `k` implies knowing every earlier one). The order is kept by an
//! internal timeline of the context (value = last retired epoch): the context's own state is
//! itself a timeline, ordered like any other. Parallelism comes from using several contexts; fences order work
//! across them.
//!
//! 1. Wait for the context's turn, then for the device-wait points (a [`FenceWait`]), every
//!    one of them to its end even when one has failed: the invocation imported what they
//!    carry, and the invocations after it rely on that work having ended.
//! 2. Run `f` — unless a waited timeline failed (the elided and satisfied points are checked
//!    too: their signals have ended by now, and may have failed).
//! 3. Complete every signal point; or, if a wait failed or `f` returned an error, **fail**
//!    every signal semaphore with that failure, so everything downstream fails too.
//! 4. Advance the internal timeline (the next invocation's turn).
//!
//! If `f` panics, the signals fail with [`Failure::PANICKED`] and the context still advances. If
//! an invocation is cancelled before its turn (its spawner dropped, the pool shut down), its
//! signals fail with [`Failure::Cancelled`] and so does the context's internal timeline: the
//! context can no longer keep its order, so every later invocation on it fails the same way.
//!
//! # Limits
//!
//! The semaphores of both fences must be `'static` (statics, or leaked once for a long-lived
//! timeline): the invocation runs as a `'static` coroutine that holds them. Each signal point
//! occupies a history slot of its semaphore until it completes, so a timeline's history
//! capacity `H` bounds the invocations in flight on it (beyond it, issue reports
//! [`SignalError::HistoryFull`]). Two
//! contexts signalling one timeline must be ordered by their own fences: timeline values
//! complete in order.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use causeway_core::axis::Axis;
use causeway_core::executor::ProcessError;
use causeway_core::fence::Fence;
use causeway_core::frontier::{Frontier, Point};
use causeway_core::queue::{
    self, Capabilities, QueueClock, Resolution, ResolutionCounts, SignalRefused, WaitError,
};
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::{Failure, HistorySlots, Semaphore, SignalError};
use causeway_core::unpoisoned::Mutex;

use crate::coroutine::{JoinError, JoinHandle, Spawner};
use crate::wait::{block_on, wait, FenceWait};
use crate::FRONTIER_CAPACITY;

/// The context's internal timeline: its value is the epoch of the last retired invocation.
type Retired = Semaphore;

/// Points of one fence, copied so the invocation can own them.
type Points<const K: usize, const H: usize, const N: usize, S> =
    [Option<(&'static Semaphore<H, N, S>, u64)>; K];

/// Why an invocation was not issued, or did not produce a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvokeError {
    /// Issue: wait point `index` could not be resolved (its semaphore does not reach this
    /// context). Nothing was issued.
    Wait {
        /// Position of the point in the wait fence.
        index: usize,
        /// Why it could not be resolved.
        error: WaitError,
    },
    /// Issue: signal point `index` could not be recorded (a value that does not advance its
    /// timeline, a full history, a scope that does not reach this context). Nothing was
    /// issued. (A signal on a timeline that has failed is not refused: the invocation is
    /// issued doomed and its handle yields [`InvokeError::Failed`].)
    Signal {
        /// Position of the point in the signal fence.
        index: usize,
        /// Why it was refused.
        error: SignalError,
    },
    /// Issue: the executor is shutting down. Signal points already recorded were failed with
    /// [`Failure::Cancelled`], and so was the context.
    Spawn(ProcessError),
    /// Run: a waited timeline failed, `f` returned this failure, or the invocation was
    /// cancelled. Its signal semaphores were failed with it.
    Failed(Failure),
    /// Run: `f` panicked. Its signal semaphores were failed with [`Failure::PANICKED`].
    Panicked,
    /// The outcome was already returned (the handle was polled after completing).
    Consumed,
}

impl fmt::Display for InvokeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvokeError::Wait { index, error } => write!(f, "wait point {index}: {error}"),
            InvokeError::Signal { index, error } => write!(f, "signal point {index}: {error}"),
            InvokeError::Spawn(error) => write!(f, "cannot run the invocation: {error}"),
            InvokeError::Failed(failure) => write!(f, "invocation failed: {failure}"),
            InvokeError::Panicked => f.write_str("invocation panicked"),
            InvokeError::Consumed => f.write_str("invocation outcome already taken"),
        }
    }
}

impl std::error::Error for InvokeError {}

impl From<JoinError> for InvokeError {
    fn from(error: JoinError) -> InvokeError {
        match error {
            JoinError::Failed(failure) => InvokeError::Failed(failure),
            JoinError::Panicked => InvokeError::Panicked,
            // `JoinError` may grow; anything else means no outcome is left to give.
            _ => InvokeError::Consumed,
        }
    }
}

/// One invocation context: a causal axis, its clock, and the coroutines that run its
/// invocations in issue order. See the [module docs](self).
pub struct Invoker<'s, 'e> {
    spawner: &'s Spawner<'e>,
    /// Updated only through `Submission`, which leaves it consistent at every step, so a panic
    /// while it is held does not invalidate it.
    clock: Mutex<QueueClock<FRONTIER_CAPACITY>>,
    retired: Arc<Retired>,
}

impl<'s, 'e> Invoker<'s, 'e> {
    /// A context on axis `axis` (fresh from an
    /// [`AxisAllocator`](causeway_core::axis::AxisAllocator), e.g. in the `Host` domain) at
    /// `endpoint`, running invocations through `spawner`.
    pub fn new(spawner: &'s Spawner<'e>, axis: Axis, endpoint: Endpoint) -> Invoker<'s, 'e> {
        // The host can always wait for a value whose signal is not submitted yet.
        let capabilities = Capabilities { wait_before_signal: true };
        Invoker {
            spawner,
            clock: Mutex::new(QueueClock::new(axis, endpoint, capabilities)),
            retired: Arc::new(Semaphore::new(0, Scope::QueueLocal, endpoint)),
        }
    }

    /// The context's axis.
    pub fn axis(&self) -> Axis {
        self.clock.lock().axis()
    }

    /// What the context knows: every invocation issued on it and what their waits imported.
    pub fn frontier(&self) -> Frontier<FRONTIER_CAPACITY> {
        *self.clock.lock().frontier()
    }

    /// How the context's waits were resolved so far.
    pub fn counts(&self) -> ResolutionCounts {
        self.clock.lock().counts()
    }

    /// The epoch of the last invocation that finished (signalled or failed its fence).
    pub fn retired(&self) -> u64 {
        self.retired.value()
    }

    /// Issues `f` to run once every point of `wait` is reached, then to advance every point of
    /// `signal` (or fail them with `f`'s failure). Returns as soon as it is issued; the
    /// returned [`Invocation`] yields `f`'s value.
    pub fn invoke_async<
        T,
        F,
        const K: usize,
        const H: usize,
        const N: usize,
        S: HistorySlots<N> + Send + 'static,
    >(
        &self,
        f: F,
        wait: &Fence<'static, K, H, N, S>,
        signal: &Fence<'static, K, H, N, S>,
    ) -> Result<Invocation<T>, InvokeError>
    where
        F: FnOnce() -> Result<T, Failure> + Send + 'static,
        T: Send + 'static,
    {
        let mut clock = self.clock.lock();
        let mut submission = clock.begin();
        let mut waits: Points<K, H, N, S> = [None; K];
        let mut checks: Points<K, H, N, S> = [None; K];
        for (index, (semaphore, value)) in wait.iter().enumerate() {
            let runtime_wait = match submission.wait(semaphore, value) {
                Ok(resolved) => {
                    !matches!(resolved.resolution, Resolution::Elided | Resolution::Satisfied)
                }
                // Failed already: the run-time wait reports it, and the signals fail with it.
                Err(WaitError::Failed(_)) => true,
                Err(error) => return Err(InvokeError::Wait { index, error }),
            };
            let slot = if runtime_wait { &mut waits[index] } else { &mut checks[index] };
            *slot = Some((semaphore, value));
        }
        // A refused signal commits nothing: there is no epoch to retire.
        let submitted = submission
            .commit_signalling(signal.iter())
            .map_err(|SignalRefused { index, error }| InvokeError::Signal { index, error })?;
        let mut signals: Points<K, H, N, S> = [None; K];
        for (point, (semaphore, value)) in signals.iter_mut().zip(signal.iter()) {
            *point = Some((semaphore, value));
        }
        // A signal on a failed timeline dooms the invocation: it is issued all the same, and
        // takes its turn without running `f`, failing its other signals (its handle yields
        // the failure): an upstream failure is a run-time outcome, not a refusal.
        let doomed = submitted.failed_signal.is_some();
        // Spawned under the clock's lock, so coroutines exist in epoch order (a later
        // invocation cannot be refused while an earlier one was accepted, which would leave
        // the context waiting on an epoch nobody retires).
        let run = Run {
            waits,
            checks,
            retire: Retire {
                signals,
                retired: Arc::clone(&self.retired),
                point: submitted.point,
                frontier: submitted.frontier,
                turn: false,
                in_host: false,
                done: false,
            },
        };
        let body = if doomed { None } else { Some(f) };
        let handle = match self.spawner.spawn(run.execute(body)) {
            Ok(handle) => handle,
            Err(refusal) => {
                let error = refusal.error();
                // Dropping the unpolled invocation runs `Retire::drop` before its turn: the
                // recorded signals and the context fail with `Cancelled`, since nothing will
                // ever retire this epoch.
                drop(refusal.into_future());
                return Err(InvokeError::Spawn(error));
            }
        };
        drop(clock);
        Ok(Invocation { handle, point: submitted.point, frontier: submitted.frontier })
    }

    /// [`invoke_async`](Self::invoke_async), then blocks until the invocation has finished.
    /// Do not call it on a worker of the pool it runs on.
    pub fn invoke<
        T,
        F,
        const K: usize,
        const H: usize,
        const N: usize,
        S: HistorySlots<N> + Send + 'static,
    >(
        &self,
        f: F,
        wait: &Fence<'static, K, H, N, S>,
        signal: &Fence<'static, K, H, N, S>,
    ) -> Result<T, InvokeError>
    where
        F: FnOnce() -> Result<T, Failure> + Send + 'static,
        T: Send + 'static,
    {
        self.invoke_async(f, wait, signal)?.wait()
    }
}

impl fmt::Debug for Invoker<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clock = self.clock.lock();
        f.debug_struct("Invoker")
            .field("axis", &clock.axis())
            .field("issued", &clock.epoch())
            .field("retired", &self.retired.value())
            .finish_non_exhaustive()
    }
}

/// An issued invocation: await it, or [`wait`](Self::wait) for it from a host thread.
/// Dropping it does not stop the invocation.
pub struct Invocation<T> {
    handle: JoinHandle<T>,
    point: Point,
    frontier: Frontier<FRONTIER_CAPACITY>,
}

impl<T> Invocation<T> {
    /// The invocation's position on its context's axis (its epoch).
    pub fn point(&self) -> Point {
        self.point
    }

    /// What the invocation knows, itself included: the frontier its signals carry.
    pub fn frontier(&self) -> &Frontier<FRONTIER_CAPACITY> {
        &self.frontier
    }

    /// Whether it has finished.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Blocks until it has finished; `f`'s value, or why there is none.
    pub fn wait(self) -> Result<T, InvokeError> {
        block_on(self)
    }
}

impl<T> Future for Invocation<T> {
    type Output = Result<T, InvokeError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.handle).poll(cx).map(|result| result.map_err(InvokeError::from))
    }
}

impl<T> fmt::Debug for Invocation<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invocation")
            .field("point", &self.point)
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

/// Everything an invocation needs at run time.
struct Run<const K: usize, const H: usize, const N: usize, S: HistorySlots<N> + Send + 'static> {
    /// Points resolved as device waits: waited for.
    waits: Points<K, H, N, S>,
    /// Points elided or satisfied at issue: only checked for failure.
    checks: Points<K, H, N, S>,
    retire: Retire<K, H, N, S>,
}

impl<const K: usize, const H: usize, const N: usize, S: HistorySlots<N> + Send + 'static>
    Run<K, H, N, S>
{
    /// The coroutine: the context's turn, the waits, `body` (`None`: issue refused a signal
    /// point), then retirement.
    async fn execute<T, F>(mut self, body: Option<F>) -> Result<T, Failure>
    where
        F: FnOnce() -> Result<T, Failure>,
    {
        let epoch = self.retire.point.epoch;
        let turn = Arc::clone(&self.retire.retired);
        if let Err(failure) = wait(&*turn, epoch - 1).await {
            // The context was poisoned by a cancelled predecessor.
            self.retire.abandon(failure);
            return Err(failure);
        }
        self.retire.turn = true;
        // Every run-time wait ends first, failed or not: the invocation imported what they
        // carry, and what follows it on this context relies on that work having ended.
        let waited = FenceWait::<K, H, N, S>::from_points(self.waits.into_iter().flatten()).await;
        // The elided and satisfied points' signals have ended by now (the context's order, or
        // reached at issue), so whether they failed is final: a value reached stays reached.
        let checked = self.checks.iter().flatten().find_map(|(s, value)| s.failure_for(*value));
        let waited = waited.and(checked.map_or(Ok(()), Err));
        let result = match (waited, body) {
            (Err(failure), _) => Err(failure),
            (Ok(()), None) => Err(Failure::Aborted),
            (Ok(()), Some(body)) => {
                // If `body` panics, `Retire::drop` runs with this still set (see there).
                self.retire.in_host = true;
                let result = body();
                self.retire.in_host = false;
                result
            }
        };
        self.retire.finish(result.as_ref().map(|_| ()).map_err(|failure| *failure));
        result
    }
}

/// Finishes an invocation exactly once, in its context's order — also when its coroutine is
/// dropped early (cancelled, or `f` panicked).
struct Retire<const K: usize, const H: usize, const N: usize, S: HistorySlots<N> + Send + 'static> {
    /// The signal points recorded as pending at issue.
    signals: Points<K, H, N, S>,
    retired: Arc<Retired>,
    point: Point,
    frontier: Frontier<FRONTIER_CAPACITY>,
    /// The previous invocation has retired: retiring this one keeps the order.
    turn: bool,
    /// `f` is running: a drop now is its panic unwinding.
    in_host: bool,
    done: bool,
}

impl<const K: usize, const H: usize, const N: usize, S: HistorySlots<N> + Send + 'static>
    Retire<K, H, N, S>
{
    /// Completes (or fails) the signal points, then hands the context's turn on.
    fn finish(&mut self, result: Result<(), Failure>) {
        queue::retire(self.signals.iter().flatten().copied(), result);
        // Refused only if the context is already poisoned, which later invocations see.
        let _ = self.retired.signal(self.point.epoch, self.point, &self.frontier);
        self.done = true;
    }

    /// Fails the signal points without taking a turn (the context is poisoned already).
    fn abandon(&mut self, failure: Failure) {
        queue::retire(self.signals.iter().flatten().copied(), Err(failure));
        self.done = true;
    }
}

impl<const K: usize, const H: usize, const N: usize, S: HistorySlots<N> + Send + 'static> Drop
    for Retire<K, H, N, S>
{
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self.in_host {
            self.finish(Err(Failure::PANICKED));
        } else if self.turn {
            self.finish(Err(Failure::Cancelled));
        } else {
            // Cancelled before its turn: retiring now would overtake the predecessors, so the
            // context's order is lost for good.
            self.abandon(Failure::Cancelled);
            self.retired.fail(Failure::Cancelled);
        }
    }
}

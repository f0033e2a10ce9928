//! Coroutine processes: any Rust [`Future`] run as a process of a pool's executor.
//!
//! [`Spawner::spawn`] boxes the future together with its [`Process`] in one reference-counted
//! allocation (the only allocation a coroutine makes; polling, waking and completing allocate
//! nothing) and submits it as a [`Class::Immediate`] process: one drainer at a time, which is
//! what a future needs. Each [`Drain::drain`] polls the future once:
//!
//! - `Poll::Pending` → [`Drained::Sleep`]; the [`Waker`] handed to the poll calls
//!   [`Executor::wake`](causeway_core::executor::Executor::wake) for the process, so whatever
//!   the future waits on (a [`SemaphoreWait`](crate::SemaphoreWait), a channel, a timer
//!   thread) reschedules it directly. A wake during the poll turns the `Sleep` into another
//!   drain (the executor's protocol), so no wake-up is lost.
//! - `Poll::Ready(Ok(value))` → the value goes to the [`JoinHandle`], the process completes.
//! - `Poll::Ready(Err(failure))` → the process fails with `failure`.
//! - a panic → the future is dropped and the process fails with [`Failure::PANICKED`]; the
//!   handle reports [`JoinError::Panicked`]. The worker thread survives.
//!
//! [`JoinHandle::cancel`] cancels the process: it is never polled again, and its
//! [`Drain::finish`] drops the future (running its destructors — a pending
//! [`SemaphoreWait`](crate::SemaphoreWait) cancels its timepoint there) on the worker that
//! completes it. A cancel that loses the race with completion changes nothing.
//!
//! # Lifetimes
//!
//! The executor holds plain references to a process while it is active, but a [`Waker`] may be
//! cloned and kept anywhere, for any time, by the future — even after the coroutine completed.
//! Three rules keep every path sound:
//!
//! 1. A coroutine's allocation is shared by its [`JoinHandle`], every waker, and the spawner's
//!    registry. The registry's reference stands for the executor's: it is dropped only once
//!    the process [is completed](Process::is_completed) (the executor's last access), in
//!    amortised sweeps at spawn time or when the spawner is dropped. So the process and the
//!    future never go away while the executor may touch them, and a stale waker always points
//!    at live memory (waking a completed process is a no-op).
//! 2. Wakers and handles reach the executor through a *gate* shared with the spawner. Each use
//!    enters the gate (one RMW), and dropping the [`Spawner`] — which ends its borrow of the
//!    executor — first cancels every coroutine it spawned, waits for them to complete, then
//!    closes the gate and waits for uses in flight to leave. A waker used afterwards does
//!    nothing. So no waker can outlive the executor it points to.
//! 3. The future is polled in place and dropped in place (it never moves once polled), and
//!    only by the one drainer the immediate class allows, or by `finish`, which runs after the
//!    last drain.
//!
//! A spawner dropped while its executor is already shutting down cannot wait for its
//! coroutines (the workers may be gone); it leaks the ones not yet completed rather than free
//! memory the executor may still reference.

use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::mem::{self, ManuallyDrop};
use std::pin::Pin;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use causeway_core::executor::{Class, Drain, DrainContext, Drained, Process, ProcessError};
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::Mutex;

use crate::contain::{contain, Panicked};
use crate::wait::block_on;
use crate::HostExecutor;

/// The gate's closed bit; the rest of the word counts executor uses in flight.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// What a spawner shares with its coroutines and their wakers.
struct Shared {
    /// The spawner's executor; dereferenced only inside the gate (see `with_executor`).
    executor: *const HostExecutor<'static>,
    /// `CLOSED` | executor uses in flight.
    gate: AtomicUsize,
    /// The executor's reference to every coroutine not yet seen completed (rule 1). Changed
    /// only by `Vec` methods that leave it whole if a dropped coroutine's destructor panics.
    live: Mutex<Vec<Arc<dyn Live>>>,
    /// Coroutines finished since the last sweep of `live`: when sweeping pays off.
    finished: AtomicUsize,
}

// SAFETY: `executor` points at a `HostExecutor`, which is `Sync`, and is only dereferenced as
// a shared reference inside the gate, while the spawner's borrow of it is alive; every other
// field is `Send + Sync`.
unsafe impl Send for Shared {}
// SAFETY: as for `Send`.
unsafe impl Sync for Shared {}

impl Shared {
    /// Runs `use_executor` unless the spawner has closed the gate.
    fn with_executor(&self, use_executor: impl FnOnce(&HostExecutor<'static>)) {
        // Relaxed: the entry only has to be ordered against `close`'s RMW on the same word,
        // which the word's modification order does; the executor's own state is synchronised
        // by the executor.
        if self.gate.fetch_add(1, Ordering::Relaxed) & CLOSED == 0 {
            // SAFETY: the gate was open when this use was counted, and `close` (which runs
            // before the spawner's borrow of the executor ends) waits until the count has
            // dropped back to zero, so the executor is alive for this call.
            use_executor(unsafe { &*self.executor });
        }
        // Release pairs with the Acquire load in `close`: this use happens before the
        // spawner's borrow of the executor ends.
        self.gate.fetch_sub(1, Ordering::Release);
    }

    /// Closes the gate and waits for every use in flight to leave.
    fn close(&self) {
        self.gate.fetch_or(CLOSED, Ordering::Relaxed);
        // Acquire pairs with the Release decrement in `with_executor`.
        while self.gate.load(Ordering::Acquire) != CLOSED {
            thread::yield_now();
        }
    }
}

/// A spawned coroutine as the registry sees it.
trait Live: Send + Sync {
    fn process(&self) -> &'static Process<'static>;
}

/// Where a coroutine's outcome waits for its handle.
struct Join<T> {
    result: Option<Result<T, JoinError>>,
    /// The waker of the handle's latest poll.
    waker: Option<Waker>,
    /// The handle has taken the result.
    taken: bool,
}

/// The drain half of a coroutine: its future and everything the drains touch.
struct Task<F, T> {
    /// The cell this task lives in, with the provenance of the whole reference-counted
    /// allocation, so that wakers can be made from it.
    cell: *const Cell<F, T>,
    shared: Arc<Shared>,
    /// Initialised while `live` is true; pinned there from its first poll.
    future: UnsafeCell<ManuallyDrop<F>>,
    live: AtomicBool,
    panicked: AtomicBool,
    /// A handle's waker is cloned before anything here changes and woken after the guard is
    /// dropped, so a panicking waker leaves the outcome whole.
    join: Mutex<Join<T>>,
}

/// One coroutine: its task and its process, whose drain is the task.
struct Cell<F, T> {
    task: Task<F, T>,
    process: Process<'static>,
}

// SAFETY: the future (`F: Send`) is only touched by one thread at a time — the spawner before
// submission, then the executor's single drainer or finisher (rule 3) — so sharing the cell
// never shares the future; `cell` is an address used only to make wakers; the rest is
// `Send + Sync` given `T: Send`.
unsafe impl<F: Send, T: Send> Sync for Task<F, T> {}
// SAFETY: as for `Sync`.
unsafe impl<F: Send, T: Send> Send for Task<F, T> {}

impl<F, T> Task<F, T>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: Send + 'static,
{
    /// Drops the future in place, once; a panicking destructor is contained.
    fn drop_future(&self) {
        // Relaxed: `live` is only accessed by the one thread the protocol gives the future to.
        if self.live.swap(false, Ordering::Relaxed) {
            let future = self.future.get();
            // SAFETY: the future was initialised (`live` was true) and is accessed only by
            // this thread (rule 3); `live` is now false, so it is never touched again. It is
            // dropped where it was pinned.
            let dropped = contain(|| unsafe {
                ManuallyDrop::drop(&mut *future);
            });
            if dropped.is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Moves the future out of a cell that was never submitted (so never polled or pinned).
    fn take_unpolled(&self) -> Option<F> {
        if !self.live.swap(false, Ordering::Relaxed) {
            return None;
        }
        // SAFETY: the caller owns the only reference to a cell the executor never saw, the
        // future is initialised (`live` was true) and never polled, so moving it is allowed;
        // `live` is now false, so it is not dropped again.
        Some(unsafe { ManuallyDrop::take(&mut *self.future.get()) })
    }

    /// The waker for this coroutine, made without touching the reference count.
    fn waker(&self) -> ManuallyDrop<Waker> {
        // SAFETY: `cell` came from `Arc::as_ptr` of the allocation this task lives in, and
        // that allocation is alive (the registry holds it while the process may be drained).
        // The reference count is not incremented here, and the waker is never dropped, so the
        // count stays balanced; clones made by the future increment it properly.
        let cell = unsafe { Arc::from_raw(self.cell) };
        ManuallyDrop::new(Waker::from(cell))
    }

    /// Hands `result` to the handle (unless it was already given one) and wakes it.
    fn deliver(&self, result: Result<T, JoinError>) {
        let waker = {
            let mut join = self.join.lock();
            if join.result.is_some() || join.taken {
                return;
            }
            join.result = Some(result);
            join.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<F, T> Drain for Task<F, T>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: Send + 'static,
{
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        // Relaxed: see `drop_future`.
        if !self.live.load(Ordering::Relaxed) {
            // Not reachable: the drain that drops the future also completes the process.
            return Drained::Done(Err(Failure::Aborted));
        }
        let waker = self.waker();
        let mut cx = Context::from_waker(&waker);
        let future = self.future.get();
        // SAFETY: rule 3 — one drainer at a time (immediate class), each ordered after the
        // previous by the executor's queue hand-off; the future is initialised (`live`) and
        // stays in this allocation until dropped in place, so pinning it is sound.
        let polled = contain(|| unsafe { Pin::new_unchecked(&mut **future).poll(&mut cx) });
        match polled {
            Ok(Poll::Pending) => Drained::Sleep,
            Ok(Poll::Ready(Ok(value))) => {
                self.drop_future();
                self.deliver(Ok(value));
                Drained::Done(Ok(()))
            }
            Ok(Poll::Ready(Err(failure))) => {
                self.drop_future();
                Drained::Done(Err(failure))
            }
            Err(Panicked) => {
                self.panicked.store(true, Ordering::Relaxed);
                self.drop_future();
                Drained::Done(Err(Failure::PANICKED))
            }
        }
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        // Cancelled or failed before the future finished: its destructors run here.
        self.drop_future();
        let error = if self.panicked.load(Ordering::Relaxed) {
            JoinError::Panicked
        } else {
            JoinError::Failed(outcome.err().unwrap_or(Failure::Aborted))
        };
        // A no-op when the drain already delivered the value.
        self.deliver(Err(error));
        self.shared.finished.fetch_add(1, Ordering::Relaxed);
    }
}

impl<F, T> Drop for Task<F, T> {
    fn drop(&mut self) {
        // Only a cell whose process never ran to completion still holds its future; nothing
        // else can reach it now.
        if *self.live.get_mut() {
            // SAFETY: initialised (`live`), exclusively ours (`&mut self`), dropped in place.
            unsafe { ManuallyDrop::drop(self.future.get_mut()) };
        }
    }
}

impl<F, T> Cell<F, T>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: Send + 'static,
{
    /// Allocates a coroutine whose process drains its own task.
    fn new(future: F, shared: Arc<Shared>) -> Arc<Cell<F, T>> {
        let uninit = Arc::<Cell<F, T>>::new_uninit();
        // The allocation's address with its full provenance (also covering the counts, which
        // `Arc::from_raw` in `Task::waker` needs).
        let cell = Arc::as_ptr(&uninit).cast::<Cell<F, T>>().cast_mut();
        // SAFETY: `cell` points at this fresh allocation, which nothing else references yet;
        // each field is written exactly once. The process's drain is a reference to the task
        // field written just before it, and lives in the same allocation, which outlives every
        // use of the process (rule 1).
        unsafe {
            ptr::addr_of_mut!((*cell).task).write(Task {
                cell,
                shared,
                future: UnsafeCell::new(ManuallyDrop::new(future)),
                live: AtomicBool::new(true),
                panicked: AtomicBool::new(false),
                join: Mutex::new(Join { result: None, waker: None, taken: false }),
            });
            let drain: &'static dyn Drain = &*ptr::addr_of!((*cell).task);
            ptr::addr_of_mut!((*cell).process).write(Process::new(drain, Class::Immediate));
            uninit.assume_init()
        }
    }
}

impl<F: Send + 'static, T: Send + 'static> Live for Cell<F, T> {
    fn process(&self) -> &'static Process<'static> {
        // SAFETY: the executor keeps this reference only while the process is active, and the
        // registry keeps the cell alive until the process has completed (rule 1); every other
        // use (wake, cancel, is_completed) is made through a reference to the cell itself.
        unsafe { &*ptr::from_ref(&self.process) }
    }
}

impl<F, T> Wake for Cell<F, T>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: Send + 'static,
{
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let process = self.process();
        self.task.shared.with_executor(|executor| executor.wake(process));
    }
}

/// The handle's view of a coroutine, without its future's type.
trait Joinable<T>: Send + Sync {
    fn poll_join(&self, waker: &Waker) -> Poll<Result<T, JoinError>>;
    fn cancel(&self);
    fn is_finished(&self) -> bool;
}

impl<F, T> Joinable<T> for Cell<F, T>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: Send + 'static,
{
    fn poll_join(&self, waker: &Waker) -> Poll<Result<T, JoinError>> {
        let mut join = self.task.join.lock();
        if let Some(result) = join.result.take() {
            join.taken = true;
            return Poll::Ready(result);
        }
        if join.taken {
            return Poll::Ready(Err(JoinError::Consumed));
        }
        if !join.waker.as_ref().is_some_and(|stored| stored.will_wake(waker)) {
            join.waker = Some(waker.clone());
        }
        Poll::Pending
    }

    fn cancel(&self) {
        let process = self.process();
        self.task.shared.with_executor(|executor| executor.cancel(process));
    }

    fn is_finished(&self) -> bool {
        let join = self.task.join.lock();
        join.result.is_some() || join.taken || self.process.is_completed()
    }
}

/// Why a coroutine produced no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinError {
    /// The future returned this failure, or the process was cancelled
    /// ([`Failure::Cancelled`]) before the future finished.
    Failed(Failure),
    /// The future panicked while being polled or dropped.
    Panicked,
    /// The handle already returned the outcome (it was polled after completing).
    Consumed,
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Failed(failure) => write!(f, "coroutine failed: {failure}"),
            JoinError::Panicked => f.write_str("coroutine panicked"),
            JoinError::Consumed => f.write_str("coroutine outcome already taken"),
        }
    }
}

impl std::error::Error for JoinError {}

/// A coroutine that could not be spawned; its future is handed back.
pub struct SpawnError<F> {
    error: ProcessError,
    future: F,
}

impl<F> SpawnError<F> {
    /// Why the executor refused the process (it is shutting down).
    pub fn error(&self) -> ProcessError {
        self.error
    }

    /// The future, never polled.
    pub fn into_future(self) -> F {
        self.future
    }
}

impl<F> fmt::Debug for SpawnError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpawnError").field("error", &self.error).finish_non_exhaustive()
    }
}

impl<F> fmt::Display for SpawnError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot spawn coroutine: {}", self.error)
    }
}

impl<F> std::error::Error for SpawnError<F> {}

/// The outcome of a spawned coroutine: await it, [`join`](Self::join) it from a host thread,
/// or [`cancel`](Self::cancel) the coroutine. Dropping the handle detaches the coroutine; it
/// keeps running.
pub struct JoinHandle<T> {
    cell: Arc<dyn Joinable<T>>,
}

impl<T> JoinHandle<T> {
    /// Blocks the calling thread until the coroutine completes. Do not call it on a worker of
    /// the same pool: the worker is blocked meanwhile (see [`block_on`]).
    pub fn join(self) -> Result<T, JoinError> {
        block_on(self)
    }

    /// Cancels the coroutine: it is not polled again, its future is dropped on a worker, and
    /// the handle reports [`JoinError::Failed`]`(`[`Failure::Cancelled`]`)` — unless it had
    /// already finished.
    pub fn cancel(&self) {
        self.cell.cancel();
    }

    /// Whether the outcome is available (awaiting or joining would not wait).
    pub fn is_finished(&self) -> bool {
        self.cell.is_finished()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.cell.poll_join(cx.waker())
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("finished", &self.is_finished()).finish()
    }
}

/// Spawns futures as coroutine processes on an executor it borrows. See the
/// [module docs](self).
///
/// Dropping the spawner cancels every coroutine it spawned that has not completed and waits
/// until they have (their futures are dropped on the workers), so drop it on a host thread, not
/// inside one of its own coroutines.
///
/// ```
/// use causeway_core::scope::{Endpoint, Scope};
/// use causeway_core::{Axis, Domain, Frontier, Point, Semaphore};
/// use causeway_runtime::{CpuPool, PoolConfig, SemaphoreExt, Spawner, FRONTIER_CAPACITY};
///
/// static READY: Semaphore = Semaphore::new(0, Scope::ProcessLocal, Endpoint {
///     machine: 0, process: 0, device_group: 0, device: 0, queue: 0,
/// });
///
/// let pool = CpuPool::start(PoolConfig::with_workers(2))?;
/// let spawner = Spawner::new(pool.executor());
/// let doubled = spawner
///     .spawn(async {
///         let value = READY.wait(1).await?;
///         Ok(value * 2)
///     })
///     .map_err(|refused| refused.error())?;
/// let host = Point::new(Axis::new(0, Domain::Host, 1), 1);
/// READY.signal(21, host, &Frontier::<FRONTIER_CAPACITY>::new())?;
/// assert_eq!(doubled.join(), Ok(42));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Spawner<'e> {
    executor: &'e HostExecutor<'static>,
    shared: Arc<Shared>,
}

impl<'e> Spawner<'e> {
    /// A spawner for `executor` (a [`CpuPool`](crate::CpuPool)'s, or a scoped pool's built for
    /// `'static` processes).
    pub fn new(executor: &'e HostExecutor<'static>) -> Spawner<'e> {
        let shared = Arc::new(Shared {
            executor: ptr::from_ref(executor),
            gate: AtomicUsize::new(0),
            live: Mutex::new(Vec::new()),
            finished: AtomicUsize::new(0),
        });
        Spawner { executor, shared }
    }

    /// Runs `future` as a coroutine process. Allocates the coroutine (one allocation holding
    /// the future, its process and its outcome slot); hands the future back, unpolled, when
    /// the executor is shutting down.
    pub fn spawn<F, T>(&self, future: F) -> Result<JoinHandle<T>, SpawnError<F>>
    where
        F: Future<Output = Result<T, Failure>> + Send + 'static,
        T: Send + 'static,
    {
        let cell = Cell::new(future, Arc::clone(&self.shared));
        if let Err(error) = self.executor.submit(cell.process()) {
            // Never handed to the executor: this is the only reference, the future unpolled.
            return match cell.task.take_unpolled() {
                Some(future) => Err(SpawnError { error, future }),
                None => unreachable!("a fresh coroutine holds its future"),
            };
        }
        self.register(Arc::clone(&cell) as Arc<dyn Live>);
        Ok(JoinHandle { cell })
    }

    /// The executor coroutines run on.
    pub fn executor(&self) -> &'e HostExecutor<'static> {
        self.executor
    }

    /// Coroutines spawned whose completion has not been observed yet (they hold the
    /// executor's reference to their storage).
    pub fn unreclaimed(&self) -> usize {
        self.shared.live.lock().len()
    }

    /// Records the executor's reference to a new coroutine, first dropping the references of
    /// completed ones when at least half of those held may have finished (amortised O(1)).
    fn register(&self, cell: Arc<dyn Live>) {
        let mut live = self.shared.live.lock();
        let finished = self.shared.finished.load(Ordering::Relaxed);
        if finished > 0 && finished.saturating_mul(2) >= live.len() {
            self.shared.finished.store(0, Ordering::Relaxed);
            live.retain(|cell| !cell.process().is_completed());
        }
        live.push(cell);
    }
}

impl Drop for Spawner<'_> {
    fn drop(&mut self) {
        let mut waiting = mem::take(&mut *self.shared.live.lock());
        for cell in &waiting {
            self.executor.cancel(cell.process());
        }
        loop {
            waiting.retain(|cell| !cell.process().is_completed());
            if waiting.is_empty() || self.executor.is_stopping() {
                break;
            }
            thread::yield_now();
        }
        self.shared.close();
        // Not completed, with the executor shutting down: it may still reference them, so
        // their storage must never be freed (see the module docs).
        for cell in waiting {
            mem::forget(cell);
        }
    }
}

impl fmt::Debug for Spawner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawner").field("unreclaimed", &self.unreclaimed()).finish_non_exhaustive()
    }
}

//! Wake hand-off between queues: while a worker drains a queue process, the first other queue
//! process that the drain's signals wake is held back instead of published, and offered to the
//! draining worker if this queue then has nothing left to run (see "Wake hand-off" in the core
//! executor docs). The dependent operation then starts on the worker that just finished the
//! signalling one — its data still in that core's cache — with no cross-worker hand-over.
//!
//! The wake reaches the queue through core callbacks (semaphore timepoint → wait gate →
//! [`QueueShared::wake`](super::queue::QueueShared::wake)) that carry no drain context, so the
//! collecting drain is found through the thread: a thread-local pointer to the drain's
//! [`Collector`], which lives in [`collect`]'s frame. The pointer is a plain word without a
//! destructor, so each look is one thread-local load; a thread-local holding the token itself
//! (it has a destructor) cost a registration check on every access, four times per hand-off.
//! The held token is a core `Woken`: if nobody takes it — the drain goes on with ready work,
//! or unwinds — dropping it publishes the wake exactly as a plain wake would have, so holding
//! one can delay a wake but never lose it.

use std::cell::Cell;
use std::ptr;

use causeway_core::executor::{Process, Woken};
use causeway_runtime::HostExecutor;

thread_local! {
    /// The collector of the drain this thread is in, set by [`collect`] for the length of its
    /// body (null outside one).
    static COLLECTOR: Cell<*const Collector> = const { Cell::new(ptr::null()) };
}

/// What one drain collects: the wake held back for its worker.
pub(crate) struct Collector {
    /// The executor of the device whose queue is being drained (each device has a pool of its
    /// own): only wakes of its queues, onto it, are held back.
    executor: *const HostExecutor<'static>,
    held: Cell<Option<Woken<'static, 'static>>>,
}

impl Collector {
    /// The wake held back since the last call, if any.
    pub(crate) fn take(&self) -> Option<Woken<'static, 'static>> {
        self.held.take()
    }
}

/// Restores the thread's previous collector when [`collect`]'s body ends, unwinding included.
struct Restore(*const Collector);

impl Drop for Restore {
    fn drop(&mut self) {
        COLLECTOR.set(self.0);
    }
}

/// Runs `body` — one drain of a queue of the device whose pool runs `executor` — collecting
/// wakes on this thread; a held wake nobody took is published when it ends. Inlined into the
/// drain that calls it: a frame of its own between the queue's process and the drain loop cost the
/// signal → dependent start path about twenty instructions (a prologue, an epilogue and the
/// collector's address passed through).
#[inline(always)]
pub(crate) fn collect<R>(
    executor: &'static HostExecutor<'static>,
    body: impl FnOnce(&Collector) -> R,
) -> R {
    let collector = Collector { executor: ptr::from_ref(executor), held: Cell::new(None) };
    let _restore = Restore(COLLECTOR.replace(ptr::from_ref(&collector)));
    body(&collector)
    // `_restore` drops first, so the thread no longer points at `collector`; then `collector`,
    // whose held wake, if any, publishes itself (see `Woken`), outside any drain decision.
}

/// Publishes the wake this thread's drain holds back, if any. Called before user work runs on
/// this worker: the work may block (a host function waiting for what the woken queue does), and
/// a held wake is the drain's until it ends, so the woken queue would wait for this worker
/// (a native waiter woken by its origin's start, held while that origin's host function
/// blocks, was never issued).
#[inline]
pub(crate) fn publish_held() {
    // SAFETY: as in `wake`: non-null only while a `collect` body runs on this thread, and then
    // the address of that call's collector, reached through shared references only.
    if let Some(collector) = unsafe { COLLECTOR.get().as_ref() } {
        if let Some(woken) = collector.held.take() {
            woken.publish();
        }
    }
}

/// Wakes the queue process `process` of the device whose pool runs `executor`: held back when
/// this thread is draining a queue of the same device and holds no other wake, published at
/// once otherwise.
pub(crate) fn wake(executor: &'static HostExecutor<'static>, process: &'static Process<'static>) {
    // SAFETY: the pointer is non-null only while a `collect` call on this thread runs its body
    // (set before, restored by `Restore` after, on unwind too), and then points at that call's
    // `collector`, which stays in place in its frame until after the restore. Only shared
    // references to it exist (its state is a `Cell`), and this thread is the only one that can
    // read the pointer.
    let collector = unsafe { COLLECTOR.get().as_ref() };
    match collector {
        Some(collector) if ptr::eq(collector.executor, executor) => match collector.held.take() {
            None => collector.held.set(executor.wake_deferred(process)),
            held => {
                collector.held.set(held);
                executor.wake(process);
            }
        },
        _ => executor.wake(process),
    }
}

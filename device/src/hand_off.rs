//! Wake hand-off between queues: while a worker drains a queue process, the first other queue
//! process that the drain's signals wake is held back instead of published, and offered to the
//! draining worker if this queue then has nothing left to run (see "Wake hand-off" in the core
//! executor docs). The dependent operation then starts on the worker that just finished the
//! signalling one — its data still in that core's cache — with no cross-worker hand-over.
//!
//! The wake reaches the queue through core callbacks (semaphore timepoint → wait gate →
//! [`QueueShared::wake`](super::queue::QueueShared::wake)) that carry no drain context, so the
//! collecting drain is recorded per thread. The held token is a core `Woken`: if nobody takes
//! it — the drain goes on with ready work, or unwinds — dropping it publishes the wake exactly
//! as a plain wake would have, so holding one can delay a wake but never lose it.

use std::cell::Cell;
use std::ptr;

use causeway_core::executor::{Process, Woken};

use super::DeviceShared;

thread_local! {
    /// The device whose queue this thread is draining (null when none).
    static COLLECTING: Cell<*const DeviceShared> = const { Cell::new(ptr::null()) };
    /// The wake held back for the draining worker.
    static HELD: Cell<Option<Woken<'static, 'static>>> = const { Cell::new(None) };
}

/// Collects wakes for one drain of a queue of `device` on this thread; ends when dropped,
/// publishing a held wake nobody took.
pub(crate) struct Collecting {
    previous: *const DeviceShared,
}

impl Collecting {
    pub(crate) fn start(device: &'static DeviceShared) -> Collecting {
        Collecting { previous: COLLECTING.replace(ptr::from_ref(device)) }
    }

    /// The wake held back since the last call, if any.
    pub(crate) fn take(&self) -> Option<Woken<'static, 'static>> {
        HELD.take()
    }
}

impl Drop for Collecting {
    fn drop(&mut self) {
        COLLECTING.set(self.previous);
        // Publishes it (see `Woken`), outside any drain decision.
        drop(HELD.take());
    }
}

/// Wakes the queue process `process` of `device`: held back when this thread is draining a
/// queue of the same device and holds no other wake, published at once otherwise.
pub(crate) fn wake(device: &'static DeviceShared, process: &'static Process<'static>) {
    let collecting = COLLECTING.get() == ptr::from_ref(device);
    let held = HELD.take();
    match held {
        None if collecting => HELD.set(device.executor.wake_deferred(process)),
        held => {
            HELD.set(held);
            device.executor.wake(process);
        }
    }
}

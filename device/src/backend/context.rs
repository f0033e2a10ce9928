//! What a started backend may reach of its device, and the wait list for its resources.

use std::fmt;

use causeway_core::executor::Process;

#[cfg(doc)]
use super::Backend;
use crate::ids::QueueId;

/// What a started backend may reach of its device: its queues' wake-ups, the executor (to run
/// its own processes) and the device clock. Handed to [`Backend::start`] once the device has its final address.
#[derive(Clone, Copy)]
pub struct DeviceContext {
    pub(crate) device: &'static dyn ContextDevice,
}

/// The device behind a [`DeviceContext`]: the device layer implements it for its shared state
/// (`device::shared`), so that the seam names nothing of the layer's internals.
pub(crate) trait ContextDevice: Sync {
    /// Wakes queue `queue`'s process; an unknown queue (another device's) is ignored.
    fn wake(&'static self, queue: QueueId);
    /// Wakes the process of the queue at `index`; an index past the last queue is ignored.
    fn wake_at(&'static self, index: usize);
    /// The id of the queue at `index`.
    fn queue_id(&self, index: usize) -> Option<QueueId>;
    /// Queues of the device, every driver's.
    fn queues(&self) -> usize;
    /// Worker threads of the device's pool.
    fn workers(&self) -> usize;
    /// Submits `process` to the executor; `false` when it refuses.
    fn submit(&self, process: &'static Process<'static>) -> bool;
    /// Nanoseconds since the device started.
    fn now_ns(&self) -> u64;
}

impl DeviceContext {
    /// Wakes queue `queue`'s process: its head operation is looked at again (pending work
    /// polled, busy work issued again). Cheap, never blocks, never calls back into the backend;
    /// an unknown queue is ignored.
    pub fn wake(&self, queue: QueueId) {
        self.device.wake(queue);
    }

    /// The id of the device's queue at `index` ([`QueueId::index`]), for a driver that keeps
    /// queues by index (a word holding the owner of a resource).
    pub fn queue(&self, index: usize) -> Option<QueueId> {
        self.device.queue_id(index)
    }

    /// Queues of the device, every driver's.
    pub fn queues(&self) -> usize {
        self.device.queues()
    }

    /// Worker threads of the device's pool.
    pub fn workers(&self) -> usize {
        self.device.workers()
    }

    /// Submits `process` to the executor; `false` when it refuses (the pool is shutting down).
    pub fn submit(&self, process: &'static Process<'static>) -> bool {
        self.device.submit(process)
    }

    /// Nanoseconds since the device started (the clock of observer events).
    pub fn now_ns(&self) -> u64 {
        self.device.now_ns()
    }
}

impl fmt::Debug for DeviceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceContext").field("queues", &self.queues()).finish_non_exhaustive()
    }
}

/// Queues waiting for a backend resource (a command buffer another queue runs), one flag per
/// queue of the device. Keep it under the resource's own lock: a queue that finds the resource
/// taken registers before anyone can release it, and the release wakes it — no lost wake-up.
#[derive(Debug)]
pub struct QueueWaiters {
    waiting: Box<[bool]>,
}

impl QueueWaiters {
    /// Room for `queues` queues (every queue of the device: [`DeviceContext::queues`]);
    /// allocates nothing afterwards.
    pub fn new(queues: usize) -> QueueWaiters {
        QueueWaiters { waiting: vec![false; queues].into_boxed_slice() }
    }

    /// Queue `queue` waits for the resource.
    pub fn register(&mut self, queue: QueueId) {
        if let Some(waiting) = self.waiting.get_mut(queue.index()) {
            *waiting = true;
        }
    }

    /// Wakes every registered queue and forgets them. Safe under the resource's lock: a wake
    /// only queues the queue's process, it never calls back into the backend.
    pub fn wake_all(&mut self, device: DeviceContext) {
        for (queue, waiting) in self.waiting.iter_mut().enumerate() {
            if std::mem::take(waiting) {
                device.device.wake_at(queue);
            }
        }
    }
}

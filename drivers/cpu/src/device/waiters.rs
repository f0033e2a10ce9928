//! Queues waiting for a shared resource (stream-ordered quota, a command buffer another queue
//! is executing). Kept under the resource's own lock, so a queue that finds the resource taken
//! registers before anyone can release it, and the release wakes it: no lost wake-up.

use super::queue::QueueShared;

/// One flag per queue of the device; sized once, never allocates afterwards.
#[derive(Debug)]
pub(crate) struct Waiters {
    waiting: Box<[bool]>,
}

impl Waiters {
    pub(crate) fn new(queues: usize) -> Waiters {
        Waiters { waiting: vec![false; queues].into_boxed_slice() }
    }

    /// Queue `queue` waits for the resource.
    pub(crate) fn register(&mut self, queue: usize) {
        self.waiting[queue] = true;
    }

    /// Wakes every registered queue and forgets them. Safe under the resource's lock: a wake
    /// only queues the queue's process, it never calls back into the device.
    pub(crate) fn wake_all(&mut self, queues: &[QueueShared]) {
        for (queue, waiting) in self.waiting.iter_mut().enumerate() {
            if std::mem::take(waiting) {
                queues[queue].wake();
            }
        }
    }
}

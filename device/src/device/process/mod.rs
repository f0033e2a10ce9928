//! The queue process: what runs a queue's operations, with the whole device in reach. The
//! queue's own state and protocols — its ring, slots, run claims, wait counts, ring ownership —
//! are the `queue` module's, which knows nothing of the device; a queue's process drains
//! a [`QueueProcess`], made here for each queue when the device is built.
//!
//! - `drain`: a drain, a step of the head operation, the layer's own work.
//! - `issue`: kernels to the driver, and issuing ahead on queues with native waits;
//!   `mirror`: the host's writes of other drivers' mirrors of the queue's progress, for their
//!   native waits on its operations, and the starts those waits are issued after;
//!   `driver`: every call into the driver, contained (a driver that breaks the contract fails
//!   its queue, not the device).
//! - `cancel`: speculation's walks over the ring (`run_claim`: who got to an operation first).
//! - `finish`: the one ending, and retiring the slot after it.
//! - `teardown`: the device taking the ring over at shutdown (`ownership`).

mod cancel;
mod drain;
mod driver;
mod finish;
mod issue;
mod mirror;
mod teardown;

pub(crate) use teardown::Teardown;

use causeway_core::executor::{Drain, DrainContext, Drained};

use super::DeviceShared;
use crate::queue::QueueShared;

/// What a queue's executor process drains: the queue, with its device in reach. One per
/// queue (`DeviceShared::processes`), so the executor's one dynamic call lands in the device's
/// drain, with no runner to look up on the way.
pub(crate) struct QueueProcess {
    device: &'static DeviceShared,
    queue: &'static QueueShared,
}

impl QueueProcess {
    pub(crate) fn new(device: &'static DeviceShared, queue: &'static QueueShared) -> QueueProcess {
        QueueProcess { device, queue }
    }
}

impl Drain for QueueProcess {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        let queue = self.queue;
        if !queue.ownership.enter() {
            // Taken over at shutdown: the ring is the device's now.
            return Drained::Sleep;
        }
        let drained = queue.drain_entered(self.device, cx);
        if drained.is_some() {
            queue.ownership.leave();
        }
        drained.unwrap_or(Drained::Sleep)
    }
}

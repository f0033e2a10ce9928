//! The queue process: what runs a queue's operations, with the whole device in reach. The
//! queue's own state and protocols — its ring, slots, run claims, wait counts, ring ownership —
//! are the `queue` module's, which knows nothing of the device; a queue's process drains
//! through [`QueueRunner`], which the device implements here.
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

use causeway_core::executor::{DrainContext, Drained};

use super::DeviceShared;
use crate::queue::{QueueRunner, QueueShared};

impl QueueRunner for DeviceShared {
    fn drain(&'static self, queue: &QueueShared, cx: &mut DrainContext<'_, '_>) -> Drained {
        if !queue.ownership.enter() {
            // Taken over at shutdown: the ring is the device's now.
            return Drained::Sleep;
        }
        let drained = queue.drain_entered(self, cx);
        if drained.is_some() {
            queue.ownership.leave();
        }
        drained.unwrap_or(Drained::Sleep)
    }
}

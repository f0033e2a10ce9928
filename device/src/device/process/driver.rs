//! Every call from a queue into its driver, each contained: a driver that panics out of a call
//! (or runs an operation's work twice) is caught here, recorded as a [`DriverFault`] and its
//! queue *failed*: from then on the queue's operations fail as [`Failure::DeviceLost`]
//! without reaching the driver, so every waiter ends and the device goes on. An operation the
//! driver had pending fails the same way when next polled.
//!
//! A failed queue is conservative at shutdown: whatever it had issued counts as possibly still
//! running ([`DynQueue::is_running`] is not asked), so the device keeps its state alive rather
//! than free memory a broken driver's device might still reach.

use causeway_core::semaphore::Failure;
use causeway_runtime::contain::{contain, Panicked};

#[cfg(doc)]
use crate::backend::DynQueue;
use crate::backend::{Issue, Issued, IssuingQueue};
use crate::device::DeviceShared;
use crate::error::{DriverCall, DriverFault, Violation};
use crate::op::{Kernel, OpEvent, OpStatus};
use crate::queue::QueueShared;
use crate::sync::atomic::Ordering;

/// The status of an operation on a failed queue.
const LOST: OpStatus = OpStatus::Failed(Failure::DeviceLost);

impl QueueShared {
    /// Whether the queue's driver broke the contract (see the [module documentation](self)).
    pub(crate) fn failed_by_driver(&self) -> bool {
        // Relaxed: a flag only; what the fault did is recorded under the device's lock.
        self.driver_faulted.load(Ordering::Relaxed)
    }

    /// Records that the driver broke the contract in `call`, about operation `tag`, and fails
    /// the queue.
    pub(crate) fn driver_fault(
        &self,
        device: &'static DeviceShared,
        call: DriverCall,
        tag: Option<u64>,
        violation: Violation,
    ) {
        self.driver_faulted.store(true, Ordering::Relaxed);
        device.record_fault(DriverFault {
            driver: device.backends[self.driver].name(),
            queue: Some(self.id),
            tag,
            call,
            violation,
        });
    }

    /// [`Backend::check`](crate::Backend::check), at submission: a failed queue accepts every
    /// kernel (the operation then fails at the head, failing what it signals).
    pub(crate) fn driver_check(
        &self,
        device: &'static DeviceShared,
        kernel: Kernel,
    ) -> Result<(), crate::SubmitError> {
        if self.failed_by_driver() {
            return Ok(());
        }
        contain(|| device.queues[self.index].driver_queue().check(kernel)).unwrap_or_else(
            |Panicked| {
                self.driver_fault(device, DriverCall::Check, None, Violation::Panicked);
                Ok(())
            },
        )
    }

    /// [`Backend::issue`](crate::Backend::issue).
    pub(super) fn driver_issue(
        &self,
        device: &'static DeviceShared,
        issue: &mut Issue<'_>,
    ) -> Issued {
        if self.failed_by_driver() {
            return Issued::Finished(LOST);
        }
        let tag = issue.tag();
        contain(|| device.queues[self.index].driver_queue().issue(issue)).unwrap_or_else(
            |Panicked| {
                self.driver_fault(device, DriverCall::Issue, Some(tag), Violation::Panicked);
                Issued::Finished(LOST)
            },
        )
    }

    /// [`Backend::poll`](crate::Backend::poll) for operation `tag` (epoch `epoch`).
    pub(super) fn driver_poll(
        &self,
        device: &'static DeviceShared,
        epoch: u64,
        kernel: Kernel,
        tag: u64,
    ) -> Option<OpStatus> {
        if self.failed_by_driver() {
            return Some(LOST);
        }
        contain(|| device.queues[self.index].driver_queue().poll(epoch, kernel)).unwrap_or_else(
            |Panicked| {
                self.driver_fault(device, DriverCall::Poll, Some(tag), Violation::Panicked);
                Some(LOST)
            },
        )
    }

    /// [`Backend::completed_on_host`](crate::Backend::completed_on_host) for operation `tag`.
    pub(super) fn driver_completed_on_host(
        &self,
        device: &'static DeviceShared,
        epoch: u64,
        tag: u64,
    ) {
        if self.failed_by_driver() {
            return;
        }
        if contain(|| device.queues[self.index].driver_queue().completed_on_host(epoch)).is_err() {
            self.driver_fault(device, DriverCall::CompletedOnHost, Some(tag), Violation::Panicked);
        }
    }

    /// [`Backend::is_running`](crate::Backend::is_running) for operation `tag`, at shutdown; a
    /// failed queue's answer is yes (module docs).
    pub(super) fn driver_is_running(
        &self,
        device: &'static DeviceShared,
        kernel: Kernel,
        abandoned: bool,
        tag: u64,
    ) -> bool {
        if self.failed_by_driver() {
            return true;
        }
        contain(|| device.queues[self.index].driver_queue().is_running(kernel, abandoned))
            .unwrap_or_else(|Panicked| {
                self.driver_fault(device, DriverCall::IsRunning, Some(tag), Violation::Panicked);
                true
            })
    }
}

/// The queue issuing an operation, with its device: the layer's side of an [`Issue`].
pub(super) struct IssuingFrom<'a> {
    pub(super) device: &'static DeviceShared,
    pub(super) queue: &'a QueueShared,
}

impl IssuingQueue for IssuingFrom<'_> {
    fn run_work(&self, tag: u64, worker: usize, work: &mut dyn FnMut()) -> bool {
        self.queue.run_user_work(tag, worker, work).is_some()
    }

    fn started(&self, tag: u64, worker: usize) {
        let queue = self.queue.index;
        self.device.observe(queue, tag, |at_ns| OpEvent::Started { worker, at_ns });
    }

    fn driver_fault(&self, call: DriverCall, tag: Option<u64>, violation: Violation) {
        self.queue.driver_fault(self.device, call, tag, violation);
    }
}

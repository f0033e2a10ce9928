//! The one ending of an operation (see "An operation's life" in the `queue` module): whatever
//! ended it — its work, a failed wait, a cancellation, the device shutting down — its
//! signals, its observer events and its speculation report go through [`QueueShared::finish`],
//! in one order; then retiring its slot ([`QueueShared::retire`]).

use causeway_core::queue::retire;
use causeway_core::speculation::Dependence;

use crate::device::DeviceShared;
use crate::op::{OpEvent, OpStatus};
use crate::queue::slot::OpBody;
use crate::queue::QueueShared;
use crate::sync::atomic::Ordering;

impl QueueShared {
    /// Ends the operation at ring index `index` with `status`. In order:
    ///
    /// 1. reports a cancellation that found it dependent on rejected speculation (cancelled
    ///    before it started, or marked while it ran), so an observer sees why before it sees
    ///    the end;
    /// 2. completes its signals, or fails them with `status`'s failure;
    /// 3. tells the observer it finished on `worker` (`usize::MAX` when no worker ran it) —
    ///    at the time read *before* the signals: a dependent they release may start at once
    ///    on another worker, and this end must not be recorded after that start.
    ///
    /// The body is only read: at shutdown the device ends an operation whose work may still
    /// be running (ownership invariant 3). Retiring the slot is the caller's (the queue
    /// process's; at shutdown the ring is the device's and is never reused). Inlined: it is
    /// most of the step that retires every operation (a call cost the signal → dependent
    /// start path about ten instructions).
    #[inline(always)]
    pub(super) fn finish(
        &self,
        device: &DeviceShared,
        index: u64,
        body: &OpBody,
        status: OpStatus,
        worker: usize,
    ) {
        if let Some((dependence, started)) = self.claim(index).speculation() {
            report_speculation(device, self.index, body.tag, dependence, started);
        }
        // The clock is read only when someone observes.
        let ended_ns = device.observer.as_ref().map(|_| device.now_ns());
        let signals = body.signals.iter().map(|&(id, value)| (&device.semaphores[id], value));
        retire(signals, status.result());
        if let (Some(observer), Some(at_ns)) = (&device.observer, ended_ns) {
            let finished = OpEvent::Finished { worker, at_ns, status };
            observer.op_event(device.observed_queue(self.index), body.tag, finished);
        }
    }

    /// Retires the head operation, which has ended (`finish`): advances the driver's native
    /// progress past an operation it never saw, publishes `completed`, wakes native waiters,
    /// frees the slot (`free_head`) and moves the mirrors of the queue's progress.
    pub(super) fn retire(&self, device: &'static DeviceShared, head: u64, body: &mut OpBody) {
        let epoch = body.point.epoch;
        if self.native && body.issued.is_none() {
            // Nothing issued after it (the cursor stops at what is not issued), so its epoch is
            // the next on the queue's native progress.
            self.driver_completed_on_host(device, epoch, body.tag);
        }
        // Release pairs with the Acquire load in `completed_epoch` (and `has_retired_or_waits`).
        self.completed.store(epoch, Ordering::Release);
        if self.native {
            self.advance_issued(device, epoch);
        }
        self.free_head(head, body);
        // After `free_head`'s light barrier: the frequent side of the store (`completed`) →
        // load pair with a mirror's registration (`mirror`, "Registration").
        self.mirror_retired(device, epoch);
    }
}

/// Tells the observer that a cancellation found an operation dependent on rejected
/// speculation; rare, so kept out of the ending's common path.
#[cold]
fn report_speculation(
    device: &DeviceShared,
    queue: usize,
    tag: u64,
    dependence: Dependence,
    started: bool,
) {
    device.observe(queue, tag, |at_ns| OpEvent::Speculative { at_ns, dependence, started });
}

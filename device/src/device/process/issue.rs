//! Kernels to the driver, and issuing them ahead of the head on queues whose driver orders
//! device waits natively.
//!
//! # Issuing ahead
//!
//!
//! On a queue whose driver orders device waits natively (`BackendCapabilities::native_waits`),
//! a third index, the `cursor`, runs ahead of `head`: operations in `[head, cursor)` are with
//! the driver, and `head` retires them in order as `Backend::poll` reports them done. While the
//! head is with the driver, the queue process issues the operation at the cursor when
//!
//! - it is a kernel (a layer kind — barrier, host function, memory — stops the cursor until it
//!   is the head, so it runs after everything before it, on the host);
//! - its gate is open (its *held* waits are reached; native device waits are not armed) and no
//!   semaphore it waits on has failed (a failed one stops the cursor; the head fails it, once
//!   the origins of its device waits have retired: it imported them, and the operations after
//!   it rely on their having ended);
//! - every device wait's origin — the operation that signals the value — on a queue of the
//!   same driver has been issued to the driver or retired (`issued_through`). A wait issued
//!   before its origin could block an in-order hardware queue on work queued behind it; the
//!   queue registers with the origin's queue instead, which wakes it when it issues or retires
//!   more. An origin on another driver's queue (a wait on the driver's mirror of that queue,
//!   see `mirror`) must have started or ended instead (`has_started_or_waits`): its end
//!   moves the mirror, and once started no cancellation can take it back, so its dependent
//!   stays cancellable with it until then.
//!
//! `issued_through` has one writer (the queue's process) and is read by other queues'
//! processes: the writer stores it (Release), then locks `issue_waiters` to wake; a reader that
//! finds it too low locks `issue_waiters`, registers and reads again, so it either sees the
//! store or is registered before the writer's wake-up. An operation that retires without
//! reaching the driver is reported to it (`Backend::completed_on_host`) before
//! `issued_through` passes it, so the driver's native progress covers every epoch another
//! queue may wait on. The driver keeps one queue's operations in order on the device (each
//! waits for its predecessor natively), which the queue clock's elision relies on.
//!

use super::driver::IssuingFrom;
use crate::backend::{Issue, Issued};
use crate::clock;
use crate::device::DeviceShared;
use crate::op::{Kernel, OpStatus};
use crate::queue::run_claim::RunClaim;
use crate::queue::slot::OpSlot;
use crate::queue::QueueShared;
use crate::sync::atomic::Ordering;

/// What issuing a kernel to the driver came to.
pub(super) enum Issuing {
    /// It ran to its end at the head: retire it now.
    Finished(OpStatus),
    /// The driver has it (running, or finished ahead of operations still running).
    Pending,
    /// Not issued: an origin is not issued yet, or the driver's resource is taken, or a
    /// cancellation came first and an origin has not ended; the queue is woken when that
    /// changes.
    NotYet,
    /// Taken over while the work ran.
    Abandoned,
    /// A cancellation came first (`speculation`): not issued, and never will be.
    Cancelled,
}

/// Where issuing ahead stopped.
pub(super) enum Ahead {
    /// At an operation that is not ready, or at the tail.
    Stopped,
    /// The queue was taken over while the work ran.
    Abandoned,
}

impl QueueShared {
    /// Issues `kernel`, the work of the operation in `slot` (the head, or the cursor on a
    /// native queue), to the driver.
    pub(super) fn issue(
        &self,
        device: &'static DeviceShared,
        slot: &OpSlot,
        claim: &RunClaim,
        worker: usize,
        kernel: Kernel,
    ) -> Issuing {
        let (tag, args, epoch, waits, elided_waits) = {
            // SAFETY: the slot is in [head, tail), owned by the queue process (see `step`); the
            // shared reference ends with this block, before any user work runs.
            let body = unsafe { &*slot.body.get() };
            if self.native && !body.origins_issued(&device.queues, self.id) {
                // Registered with the origin's queue, which wakes this one when it moves on.
                return Issuing::NotYet;
            }
            (body.tag, body.args, body.point.epoch, body.native_waits(), body.elided_waits())
        };
        // Checked again now that the origins are issued: an origin that failed without being
        // issued failed its signals before its queue moved on (`finish` before
        // `retire`, whose Release store `origins_issued` acquired), so a failure the caller's
        // earlier check missed is visible here, and the operation is never handed over.
        let failed = if self.native { self.failed_wait(device, slot) } else { None };
        if let Some(failure) = failed {
            // It imported its origins: it fails once they have ended, as if it had run.
            // SAFETY: as above.
            if !unsafe { &*slot.body.get() }.origins_retired(&device.queues, self.id) {
                return Issuing::NotYet;
            }
            // Failing counts as starting, as in `step`.
            return match claim.start(&self.cancellers) {
                Ok(()) => Issuing::Finished(OpStatus::Failed(failure)),
                Err(_) => Issuing::Cancelled,
            };
        }
        if self.claim_run(device, claim, epoch).is_err() {
            // A cancellation came between the head's check and this claim. The operation
            // imported its origins, which may have only started: like any cancelled operation
            // that was not issued (`step`), it ends only once they have ended, and until then
            // the queue is registered with the first that has not.
            // SAFETY: as above; shared and short-lived.
            let body = unsafe { &*slot.body.get() };
            if self.native && !body.origins_retired(&device.queues, self.id) {
                return Issuing::NotYet;
            }
            return Issuing::Cancelled;
        }
        let issuing = IssuingFrom { device, queue: self };
        let mut issue = Issue {
            issuing: &issuing,
            queue: self.id,
            tag,
            args,
            kernel,
            waits,
            elided_waits,
            epoch,
            worker,
            started: false,
            ran: false,
        };
        let issued = self.driver_issue(device, &mut issue);
        let status = match issued {
            Issued::Finished(status) => Some(status),
            Issued::Pending => None,
            Issued::Busy => return Issuing::NotYet,
            Issued::Abandoned(_) => return Issuing::Abandoned,
        };
        issue.start();
        let head = self.head.load(Ordering::Relaxed);
        // Finished at the head: retired at once, like work run on the worker.
        if let (Some(status), true) = (status, self.cursor.load(Ordering::Relaxed) == head) {
            return Issuing::Finished(status);
        }
        // SAFETY: the queue process owns the slot (see `step`) and holds no other reference
        // to it here.
        let body = unsafe { &mut *slot.body.get() };
        body.issued = Some(kernel);
        body.issued_status = status;
        body.issued_ns = clock::start_ns();
        self.cursor.fetch_add(1, Ordering::Relaxed);
        if self.native {
            self.advance_issued(device, epoch);
        }
        Issuing::Pending
    }

    /// On a native queue whose head is with the driver: issues the following kernels whose
    /// held waits are reached and whose device waits' origins are issued, in order, up to the
    /// first that is not ready. Anything else — a layer kind, an operation with a failed wait
    /// — stops the cursor until it is the head, so it runs after everything before it.
    pub(super) fn issue_ahead(&self, device: &'static DeviceShared, worker: usize) -> Ahead {
        if !self.native {
            return Ahead::Stopped;
        }
        loop {
            let cursor = self.cursor.load(Ordering::Relaxed);
            // Acquire pairs with the Release store in `publish`.
            if cursor == self.tail.load(Ordering::Acquire) {
                return Ahead::Stopped;
            }
            let slot = self.slot(cursor);
            if !slot.gate.is_open() || slot.gate.failure().is_some() {
                return Ahead::Stopped;
            }
            // SAFETY: `cursor` is in [head, tail): the queue process owns the body; shared and
            // short-lived.
            let Some(kernel) = unsafe { &*slot.body.get() }.work.kernel() else {
                return Ahead::Stopped;
            };
            if self.failed_wait(device, slot).is_some() {
                return Ahead::Stopped;
            }
            match self.issue(device, slot, self.claim(cursor), worker, kernel) {
                Issuing::Pending => {}
                // Not at the head (the head is pending), so never finished in place; a
                // cancelled operation retires on the host once it is the head.
                Issuing::Finished(_) | Issuing::NotYet | Issuing::Cancelled => {
                    return Ahead::Stopped
                }
                Issuing::Abandoned => return Ahead::Abandoned,
            }
        }
    }

    /// Publishes that the operations through `epoch` were issued or retired, and wakes the
    /// native queues waiting for either (`has_issued_or_waits`, `has_retired_or_waits`).
    pub(super) fn advance_issued(&self, device: &'static DeviceShared, epoch: u64) {
        if self.issued_through.load(Ordering::Relaxed) < epoch {
            // Release pairs with the Acquire loads in `has_issued_or_waits`: an operation
            // issued from what it reads waits natively on work already handed to the driver.
            self.issued_through.store(epoch, Ordering::Release);
        }
        // Taken after the stores (here and of `completed`): a waiter registers and re-reads
        // under this lock, so either it sees them or it is registered before this wakes it.
        let mut waiters = self.issue_waiters.lock();
        waiters.wake_all(device.context());
    }
}

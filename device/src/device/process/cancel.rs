//! Speculation's walks over a queue's ring ([`Device::cancel_speculative`](crate::Device::cancel_speculative),
//! see `speculation`): claiming what depends on rejected work, marking the signals of what it
//! cancelled, and releasing a cancelled head's waits (`run_claim`: who got to an operation
//! first).

use causeway_core::semaphore::Cancelled;
use causeway_core::speculation::{Dependence, Rejection};

use crate::device::DeviceShared;
use crate::op::Work;
use crate::queue::run_claim::Claimed;
use crate::queue::slot::OpSlot;
use crate::queue::QueueShared;
use crate::speculation::CancelReport;
use crate::sync::atomic::Ordering;

impl QueueShared {
    /// For a cancelled head whose gate is shut: unlinks the armed timepoints (held waits and
    /// waits armed on the host) that no live signal covers, releasing the gate for each one
    /// unlinked. A wait a live signal covers may have imported it, and the operations after
    /// this one rely on that signal's operation having ended before they start: the cancelled
    /// operation still waits for it (it fires when that operation ends, reached or not). True
    /// when the gate is open afterwards (the submitter may still hold it for a moment; its
    /// release wakes the queue).
    ///
    /// A dealloca releases none: whatever first signals a value it waits for may use the
    /// buffer, signal submitted yet or not, and its end gives the buffer's memory back (see
    /// "A dealloca that does not run" in `memory`). It ends cancelled when its waits have.
    pub(super) fn release_waits(&self, device: &'static DeviceShared, slot: &OpSlot) -> bool {
        // SAFETY: the slot is the head, in [head, tail): only this queue process touches its
        // body (invariant 1), and no other reference to it is live here.
        let body = unsafe { &mut *slot.body.get() };
        if matches!(body.work, Work::Dealloca(_)) {
            return slot.gate.is_open();
        }
        for (wait, &(semaphore, value)) in body.waits.iter().enumerate() {
            if !body.armed[wait] || device.semaphores[semaphore].is_live_at(value) {
                continue;
            }
            body.armed[wait] = false;
            // A timepoint that fired (or is firing) released the gate itself.
            if device.semaphores[semaphore].cancel(&Self::timepoint(slot, wait))
                == Cancelled::Unlinked
            {
                slot.gate.release();
            }
        }
        slot.gate.is_open()
    }

    /// The first walk of [`Device::cancel_speculative`](crate::Device::cancel_speculative)
    /// (see `speculation`): claims the operations that depend on `rejection` and have not
    /// started as cancelled, and marks those that started, and their signals' history entries
    /// (`Semaphore::mark_ran_on_rejected`).
    pub(crate) fn claim_speculative(
        &self,
        device: &'static DeviceShared,
        rejection: Rejection,
        report: &mut CancelReport,
    ) {
        // Held for the walk: no slot from the head on is refilled meanwhile, so each lineage
        // stays the one published, even for operations the queue process retires meanwhile.
        let _side = self.lock_submit();
        let walk = self.cancellers.begin();
        // Acquire pairs with the Release store of `head` in `free_head` (as in `free_slot`).
        let head = self.head.load(Ordering::Acquire);
        // Written only under the submit lock, which this thread holds.
        let tail = self.tail.load(Ordering::Relaxed);
        for index in head..tail {
            // SAFETY: the submit lock is held and `index` is below `tail` (published).
            let frontier = unsafe { self.lineage(index).0.read() };
            let dependence = rejection.classify(frontier);
            if !dependence.is_dependent() {
                continue;
            }
            match walk.cancel(self.claim(index), dependence) {
                Claimed::Cancelled => {
                    report.cancelled += 1;
                    report.conservative += usize::from(dependence == Dependence::Conservative);
                }
                Claimed::Running => {
                    report.running += 1;
                    // It runs to its end; its signals carry the mark, so a later waiter (and
                    // the history in a report) sees it consumes rejected work.
                    // SAFETY: as above.
                    let signals = unsafe { self.lineage(index).1.read() };
                    for &(semaphore, value) in signals {
                        device.semaphores[semaphore].mark_ran_on_rejected(value);
                    }
                }
                Claimed::AlreadyDecided => {}
            }
        }
    }

    /// The second walk of a cancellation: marks the signals of every cancelled operation still
    /// in the ring cancelled now, rather than when the queue reaches it
    /// (`Semaphore::mark_cancelled`): a submission that waits on one fails at once, and
    /// accepted work may complete signals above them on the same timelines. Waits already
    /// armed on them end only when the queue retires the operation (which cancels its signals
    /// for good): such a waiter imported the operation's frontier — this queue's earlier work,
    /// and what the operation's own waits imported — and the operations after the waiter rely
    /// on all of it having ended before they start. True when the ring holds a cancelled
    /// operation: the queue must be woken to retire it.
    pub(crate) fn mark_cancelled(&self, device: &DeviceShared) -> bool {
        // As in `claim_speculative`: the lineages from the head on stay as published.
        let _side = self.lock_submit();
        // Acquire pairs with the Release store of `head` in `free_head` (as in `free_slot`).
        let head = self.head.load(Ordering::Acquire);
        // Written only under the submit lock, which this thread holds.
        let tail = self.tail.load(Ordering::Relaxed);
        let mut cancelled = false;
        for index in head..tail {
            if self.claim(index).cancelled().is_none() {
                continue;
            }
            // SAFETY: the submit lock is held and `index` is below `tail` (published).
            let signals = unsafe { self.lineage(index).1.read() };
            for &(semaphore, value) in signals {
                // Refused only where the retirement decides instead: a failed timeline, or a
                // signal reached already (the operation retired meanwhile).
                let _ = device.semaphores[semaphore].mark_cancelled(value);
            }
            cancelled = true;
        }
        cancelled
    }
}

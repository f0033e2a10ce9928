//! A drain of a queue's process: the loop over ready operations, a step of the head operation
//! (to the driver, or the layer's own work — barriers, host functions, stream-ordered memory)
//! and the wake hand-off to the worker that ran the signalling operation (`hand_off`).

use causeway_core::executor::{DrainContext, Drained};
use causeway_core::semaphore::Failure;
use causeway_runtime::contain::{contain, Panicked};

use super::issue::{Ahead, Issuing};
use crate::backend::MemoryOp;
use crate::clock;
use crate::device::DeviceShared;
use crate::hand_off::{self, Collector};
use crate::memory::{AllocationId, Backing, Commit};
use crate::op::{Invocation, LayerWork, OpEvent, OpStatus, Work};
use crate::prefetch;
use crate::queue::ownership::Running;
use crate::queue::run_claim::RunClaim;
use crate::queue::slot::{OpBody, OpSlot};
use crate::queue::QueueShared;
use crate::sync::atomic::Ordering;

/// Operations one drain call runs before yielding the worker to other processes.
const OPS_PER_DRAIN: usize = 32;

/// The outcome of trying to run the head operation.
enum Step {
    Retired,
    /// The head was issued to the driver: poll it once (the backend wakes the queue when it
    /// ends only after a poll found it running).
    Issued,
    Blocked,
    /// The device took the queue over while the operation's work ran: stop, touch nothing.
    Abandoned,
}

/// What starting an operation's work came to.
enum Ran {
    Finished(OpStatus),
    /// It cannot start yet (no quota for an alloca, the driver's resource is taken), or the
    /// driver runs it; the queue is woken when that changes.
    Waiting,
    /// A kernel went to the driver, which runs it.
    Issued,
    /// Taken over while the work ran.
    Abandoned,
}

impl QueueShared {
    /// The drain proper, in the Stepping phase; `None` when the queue was taken over (the
    /// phase is Abandoned and must stay so).
    pub(super) fn drain_entered(
        &self,
        device: &'static DeviceShared,
        cx: &mut DrainContext<'_, '_>,
    ) -> Option<Drained> {
        hand_off::collect(&device.executor, |collector| {
            self.drain_collecting(device, cx, collector)
        })
    }

    /// The drain loop, with wakes of other queues held back in `collector`.
    fn drain_collecting(
        &self,
        device: &'static DeviceShared,
        cx: &mut DrainContext<'_, '_>,
        collector: &Collector,
    ) -> Option<Drained> {
        for _ in 0..OPS_PER_DRAIN {
            let head = self.head.load(Ordering::Relaxed);
            // Acquire pairs with the Release store in `publish`. With a head: its slot, and
            // whether its gate was open (the Acquire read that `step` relies on when it was).
            let ready = (head != self.tail.load(Ordering::Acquire)).then(|| {
                let slot = self.slot(head);
                (slot, slot.gate.is_open())
            });
            let idle = match ready {
                None => true,
                // A cancelled head runs nothing: its shut gate is released in `step`.
                Some((_, open)) => !open && self.claim(head).cancelled().is_none(),
            };
            if let Some(woken) = collector.take() {
                if idle {
                    // This worker is about to be free: the woken queue runs here next.
                    cx.hand_off(woken);
                } else {
                    // Ready work keeps this worker: another one takes the woken queue now.
                    woken.publish();
                }
            }
            let (slot, open) = match ready {
                Some(ready) if !idle => ready,
                _ => return Some(Drained::Sleep),
            };
            match self.step(device, head, slot, open, cx.worker()) {
                Step::Retired | Step::Issued => {}
                Step::Blocked => return Some(Drained::Sleep),
                Step::Abandoned => return None,
            }
        }
        Some(Drained::Progress)
    }

    /// Runs the head operation, in `slot`, if it may run; `open`: the caller read its gate
    /// open. An open gate stays open while its operation is in the ring (`wait_count`: once the
    /// count is zero no holder is left to change it, and the next `hold` is for the slot's next
    /// operation), so it is not read again; a shut one is, as it may have opened since.
    fn step(
        &self,
        device: &'static DeviceShared,
        head: u64,
        slot: &OpSlot,
        open: bool,
        worker: usize,
    ) -> Step {
        let claim = self.claim(head);
        if !open
            && !slot.gate.is_open()
            && (claim.cancelled().is_none() || !self.release_waits(device, slot))
        {
            return Step::Blocked;
        }
        // Copied out, so no reference into the slot is held while user work runs (ownership
        // invariant 3: the device may read the slot then).
        let (issued, issued_status, work, tag, allocation, epoch) = {
            // SAFETY: the slot is in [head, tail) (checked by the caller with an Acquire load
            // of `tail`), so by invariant 1 only this queue process touches its body until
            // `retire`; the shared reference ends with this block.
            let body = unsafe { &*slot.body.get() };
            // What it signals is reached right after its work (see `prefetch`). Hinted once,
            // when the work is about to start: an issued operation's later steps only poll.
            if body.issued.is_none() {
                for &(semaphore, _) in &body.signals {
                    prefetch::object(&device.semaphores[semaphore]);
                }
            }
            (
                body.issued,
                body.issued_status,
                body.work,
                body.tag,
                body.allocation,
                body.point.epoch,
            )
        };
        // Failing or cancelling an operation that was not issued ends it without its native
        // device waits reached: it ends only once their origins have (it imported them, and
        // the operations after it rely on that), as it would have had it run.
        let origins_ended =
            |body: &OpBody| !self.native || body.origins_retired(&device.queues, self.id);
        let status = if let Some(kernel) = issued {
            // Retired only after the operations it waited on natively, so that a failure of
            // theirs is seen (below) before it completes what it signals.
            // SAFETY: as above; shared and short-lived.
            let origins_retired = !self.native
                || unsafe { &*slot.body.get() }.origins_retired(&device.queues, self.id);
            // The driver runs it: done only when it says so.
            let polled = if origins_retired {
                issued_status.or_else(|| self.driver_poll(device, epoch, kernel, tag))
            } else {
                None
            };
            match polled {
                // Native device waits let it run without the host seeing its waits reached:
                // a wait whose semaphore failed fails it all the same.
                Some(OpStatus::Ok) => {
                    self.failed_wait(device, slot).map_or(OpStatus::Ok, OpStatus::Failed)
                }
                Some(status) => status,
                None => {
                    return match self.issue_ahead(device, worker) {
                        Ahead::Stopped => Step::Blocked,
                        Ahead::Abandoned => Step::Abandoned,
                    }
                }
            }
        } else if claim.cancelled().is_some() {
            // SAFETY: as above; shared and short-lived.
            if !origins_ended(unsafe { &*slot.body.get() }) {
                return Step::Blocked;
            }
            self.end_unrun_memory(device, work, allocation);
            OpStatus::Cancelled
        } else {
            // A semaphore that failed after this operation's wait was decided (an elided wait
            // on a signal whose operation then failed) still fails every current waiter. An
            // armed wait's outcome is already on the gate: its timepoint recorded the failure
            // it met before releasing the gate, and a value it reached stays reached.
            if let Some(failure) = self.failed_unarmed_wait(device, slot) {
                slot.gate.record_failure(failure);
            }
            let failure = slot.gate.failure();
            // SAFETY: as above; shared and short-lived.
            if failure.is_some() && !origins_ended(unsafe { &*slot.body.get() }) {
                return Step::Blocked;
            }
            match failure {
                Some(failure) => {
                    self.end_unrun_memory(device, work, allocation);
                    // Failing counts as starting: a cancellation either came first or reports
                    // it as having run.
                    match claim.start(&self.cancellers) {
                        Ok(()) => OpStatus::Failed(failure),
                        Err(_) => OpStatus::Cancelled,
                    }
                }
                None => {
                    match self.start(device, slot, claim, (work, allocation), (tag, epoch), worker)
                    {
                        Ran::Finished(status) => status,
                        Ran::Waiting => return Step::Blocked,
                        Ran::Issued => return Step::Issued,
                        Ran::Abandoned => return Step::Abandoned,
                    }
                }
            }
        };
        // SAFETY: as above; the queue process owns the slot again (the work is over and the
        // queue was not taken over), and this is the only reference until `retire` returns.
        let body = unsafe { &mut *slot.body.get() };
        self.finish(device, head, body, status, worker);
        self.retire(device, head, body);
        Step::Retired
    }

    /// The failure of a semaphore the operation in `slot` waits on, if one failed before
    /// reaching the waited value (a value reached before the failure stays reached).
    pub(super) fn failed_wait(
        &self,
        device: &'static DeviceShared,
        slot: &OpSlot,
    ) -> Option<Failure> {
        // SAFETY: the slot is in [head, tail), owned by the queue process (see `step`); shared
        // and short-lived.
        let body = unsafe { &*slot.body.get() };
        body.waits
            .iter()
            .find_map(|&(semaphore, minimum)| device.semaphores[semaphore].failure_for(minimum))
    }

    /// [`failed_wait`](Self::failed_wait) over the waits decided when the operation was
    /// submitted (not armed on the host), for a caller that reads the gate's failure after it.
    fn failed_unarmed_wait(&self, device: &'static DeviceShared, slot: &OpSlot) -> Option<Failure> {
        // SAFETY: the slot is in [head, tail), owned by the queue process (see `step`); shared
        // and short-lived.
        let body = unsafe { &*slot.body.get() };
        body.waits.iter().zip(&body.armed).find_map(|(&(semaphore, minimum), &armed)| {
            if armed {
                return None;
            }
            device.semaphores[semaphore].failure_for(minimum)
        })
    }

    /// Starts the operation's work: the layer's own kinds here, kernels through the driver.
    fn start(
        &self,
        device: &'static DeviceShared,
        slot: &OpSlot,
        claim: &RunClaim,
        (work, allocation): (Work, Option<AllocationId>),
        (tag, epoch): (u64, u64),
        worker: usize,
    ) -> Ran {
        let started =
            || device.observe(self.index, tag, |at_ns| OpEvent::Started { worker, at_ns });
        let layer_work = match work.split() {
            // Claimed in `issue`, once nothing but the driver stands between it and running.
            Ok(kernel) => {
                return match self.issue(device, slot, claim, worker, kernel) {
                    Issuing::Finished(status) => Ran::Finished(status),
                    // The head is with the driver: the next step polls it and issues what
                    // follows.
                    Issuing::Pending => Ran::Issued,
                    Issuing::NotYet => Ran::Waiting,
                    Issuing::Abandoned => Ran::Abandoned,
                    Issuing::Cancelled => Ran::Finished(OpStatus::Cancelled),
                };
            }
            Err(layer_work) => layer_work,
        };
        if self.claim_run(device, claim, epoch).is_err() {
            return Ran::Finished(OpStatus::Cancelled);
        }
        match layer_work {
            LayerWork::Barrier => {
                started();
                Ran::Finished(OpStatus::Ok)
            }
            LayerWork::Alloca => {
                let Some(backed) = self.commit(device, allocation) else { return Ran::Waiting };
                started();
                Ran::Finished(backed)
            }
            LayerWork::Dealloca => {
                started();
                Ran::Finished(match allocation {
                    Some(allocation) => device.give_back(allocation),
                    None => OpStatus::Failed(Failure::Aborted),
                })
            }
            LayerWork::Host(call) => {
                started();
                // A panicking host function fails its operation (and what it signals) instead
                // of taking the worker and the queue process down with it.
                // SAFETY: the slot is in [head, tail), owned by this queue process (see
                // `step`); the arguments are copied out.
                let args = unsafe { &*slot.body.get() }.args;
                let invocation = Invocation { queue: self.id, tag, args };
                // Submission checked that the function is registered, and a slot once set
                // stays set; `Aborted` stands for the impossible rather than a panic.
                let Some(call) = device.host_calls.get(call) else {
                    return Ran::Finished(OpStatus::Failed(Failure::Aborted));
                };
                let status =
                    self.run_user_work(tag, worker, || match contain(|| call(&invocation)) {
                        Ok(Ok(())) => OpStatus::Ok,
                        Ok(Err(failure)) => OpStatus::Failed(failure),
                        Err(Panicked) => OpStatus::Failed(Failure::PANICKED),
                    });
                status.map_or(Ran::Abandoned, Ran::Finished)
            }
        }
    }

    /// Commits an alloca's memory and has its owner back it natively: the alloca's status, or
    /// `None` when the pool is over quota (the queue is registered to be woken by the next
    /// decommit).
    fn commit(
        &self,
        device: &'static DeviceShared,
        allocation: Option<AllocationId>,
    ) -> Option<OpStatus> {
        let Some(allocation) = allocation else { return Some(OpStatus::Ok) };
        let mut memory = device.lock_memory();
        let backing = match memory.pool.commit(allocation) {
            Commit::Committed(backing) => backing,
            Commit::OverQuota => {
                // Registered under the same lock a decommit takes before waking, so the wake
                // cannot slip between this check and the registration.
                memory.waiting.register(self.id);
                return None;
            }
            Commit::Released => {
                drop(memory);
                device.end_alloca(allocation);
                return Some(OpStatus::Failed(Failure::Aborted));
            }
        };
        drop(memory);
        let Some(Backing { block, bytes, driver, release_from }) = backing else {
            return Some(OpStatus::Ok);
        };
        // Outside the memory lock: native allocation may take a while. The block is this
        // alloca's alone until its dealloca runs, which the alloca's retirement precedes.
        if let Some(previous) = release_from {
            let _ = device.driver_memory(previous, MemoryOp::Release { block });
        }
        match device.driver_memory(driver, MemoryOp::Commit { block, bytes }) {
            Ok(()) => Some(OpStatus::Ok),
            Err(failure) => {
                let mut memory = device.lock_memory();
                memory.pool.fail_commit(allocation);
                // The bytes are back in the quota: queues waiting for it may commit now.
                memory.waiting.wake_all(device.context());
                Some(OpStatus::Failed(failure))
            }
        }
    }

    /// The memory side of an operation that ends without running its work (failed or
    /// cancelled). A dealloca gives its bytes back as if it had run: it ends only after
    /// every wait it has has ended, and so after everything it was ordered after (see "A
    /// dealloca that does not run" in `memory`). An alloca leaves its dealloca nothing to give
    /// back.
    #[cold]
    fn end_unrun_memory(
        &self,
        device: &'static DeviceShared,
        work: Work,
        allocation: Option<AllocationId>,
    ) {
        let Some(allocation) = allocation else { return };
        match work {
            Work::Alloca { .. } => device.end_alloca(allocation),
            // Its status is the failure or cancellation that ended it; that the alloca had
            // not run (nothing ordered the two) changes nothing there.
            Work::Dealloca(_) => {
                let _ = device.give_back(allocation);
            }
            _ => {}
        }
    }

    /// Runs user work (a kernel on this worker, a host function) in the Working phase, so a
    /// shutdown can abandon it if it never returns; `None` when it was.
    pub(crate) fn run_user_work<R>(
        &self,
        tag: u64,
        worker: usize,
        work: impl FnOnce() -> R,
    ) -> Option<R> {
        self.ownership.start_work(Running { tag, worker, since_ns: clock::start_ns() });
        // The work may block this worker: a wake the drain holds goes to the others now.
        hand_off::publish_held();
        let status = work();
        self.ownership.finish_work().then_some(status)
    }
}

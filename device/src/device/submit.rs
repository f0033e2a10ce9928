//! Submitting an operation: the path the [crate documentation](crate) walks through.

use std::time::{Duration, Instant};

use causeway_core::frontier::Point;
use causeway_core::queue::{Resolution, SignalRefused, Submitted, WaitError};
use causeway_core::semaphore::{Arm, Failure, SignalError};
use causeway_runtime::FRONTIER_CAPACITY;
use heapless::Vec as FixedVec;

use super::Device;
use crate::backend::Origin;
use crate::error::{Rejected, Resource, Stall, SubmitError};
use crate::ids::QueueId;
use crate::ids::SemaphoreId;
use crate::limits::{MAX_SIGNALS, MAX_WAITS};
use crate::memory::AllocationId;
use crate::op::{Kernel, LayerWork, Op, Work};
use crate::queue::slot::{OpBody, OpSlot};
use crate::queue::QueueShared;
use crate::receipt::{Receipt, WaitOutcome};
#[cfg(doc)]
use crate::{config::QueueConfig, config::SemaphoreConfig, DeviceBuilder};

/// How long [`Device::submit`] waits for room before it looks whether the room could ever
/// come ([`Stall`]).
const STALL_LOOK_AFTER: Duration = Duration::from_millis(1);

/// How long a waiting submission waits for room.
#[derive(Clone, Copy)]
enum Patience {
    /// As long as the work already submitted will free it ([`Device::submit`]).
    UnlessStalled,
    /// For this long from when it first finds the resource full, whoever frees it
    /// ([`Device::submit_timeout`]). The clock is read then, not at every submission: a
    /// precise reading costs about a fiftieth of a submission, and a submission that finds
    /// room waits for nothing.
    Within(Duration),
    /// Not at all: a full resource refuses the operation ([`Device::try_submit`]).
    Never,
}

impl Device {
    /// Submits `op` to queue `queue`, waiting for room when a bounded resource it needs is
    /// full (the queue's ring, a signalled semaphore's history, allocation records): room frees
    /// as earlier work completes, so a long pipeline submitted ahead of execution simply runs
    /// at the device's pace. See [`try_submit`] for the form that never waits, and
    /// [`submit_timeout`] for one that gives up.
    ///
    /// It waits only for room that the work already submitted frees by itself. When the room's
    /// operation waits — directly or through others — for a signal no operation submitted so
    /// far gives, waiting would last until someone else signals it, and for a single
    /// submitting thread that is for ever: `submit` returns [`SubmitError::Stalled`] instead,
    /// naming that wait ([`Stall`]; nothing changed), once a millisecond's wait found no room
    /// (the walk over the work in flight that decides it is paid only when room is slow). Submit signals before a history
    /// or ring fills with their waiters, size the resources from the workload
    /// ([`QueueConfig::capacity`], [`SemaphoreConfig::history`],
    /// [`DeviceBuilder::allocation_records`]; the scenario runner computes them), or, where
    /// another thread will give the signal (an external signal, say), use [`submit_timeout`],
    /// which waits for it.
    ///
    /// [`try_submit`]: Self::try_submit
    /// [`submit_timeout`]: Self::submit_timeout
    pub fn submit(&self, queue: QueueId, op: &Op<'_>) -> Result<Receipt, SubmitError> {
        self.submit_waiting(queue, op, Patience::UnlessStalled)
    }

    /// Submits `op` as [`submit`](Self::submit) does, waiting for room for up to `timeout`
    /// from when it first finds a resource full, whoever frees it — the work already
    /// submitted, or a signal another thread has yet to submit or give (no
    /// [`SubmitError::Stalled`] here) — and giving up with [`SubmitError::TimedOut`] when the
    /// resource is still full then (nothing is changed).
    pub fn submit_timeout(
        &self,
        queue: QueueId,
        op: &Op<'_>,
        timeout: Duration,
    ) -> Result<Receipt, SubmitError> {
        self.submit_waiting(queue, op, Patience::Within(timeout))
    }

    /// Submits `op` without waiting: a full resource refuses it with [`SubmitError::Full`].
    /// Every refusal hands the operation back, unchanged, beside the reason.
    #[allow(
        clippy::result_large_err,
        reason = "the refusal carries the operation back by value; boxing it would allocate on \
                  the backpressure path"
    )]
    pub fn try_submit<'a>(&self, queue: QueueId, op: Op<'a>) -> Result<Receipt, Rejected<'a>> {
        self.submit_waiting(queue, &op, Patience::Never).map_err(|error| Rejected { op, error })
    }

    /// Whether waiting for `resource`, found full by a submission of `op` to `queue`, would
    /// wait for a signal no operation submitted so far gives (see [`Stall`]): what
    /// [`submit`](Self::submit) checks before it waits, for a caller of
    /// [`try_submit`](Self::try_submit) deciding whether to wait itself. `None` when the work
    /// already submitted frees the room, or may as far as this device can tell.
    pub fn stalled(&self, queue: QueueId, op: &Op<'_>, resource: Resource) -> Option<Stall> {
        self.stall(queue, op, resource)
    }

    fn submit_waiting(
        &self,
        queue: QueueId,
        op: &Op<'_>,
        patience: Patience,
    ) -> Result<Receipt, SubmitError> {
        // Fixed when a resource is first found full (`Patience::Within`).
        let mut fixed_deadline = None;
        loop {
            // Returned as it came, not moved out of a match arm: a receipt holds a frontier, and
            // a move of it is a bulk copy.
            let attempt = self.submit_now(queue, op);
            match attempt {
                Err(SubmitError::Full(resource)) => {
                    let deadline = match patience {
                        Patience::Never => return attempt,
                        Patience::UnlessStalled => {
                            // Room usually frees within microseconds: the walk over the work in
                            // flight (`stall`) is made only once a short wait found none, so a
                            // backpressured stream pays for it at most once per such wait.
                            let look = Instant::now().checked_add(STALL_LOOK_AFTER);
                            if self.wait_for_room(queue, op, resource, look) {
                                continue;
                            }
                            if let Some(stall) = self.stall(queue, op, resource) {
                                return Err(SubmitError::Stalled(stall));
                            }
                            // Nothing submitted waits for a signal nobody gives, so the room
                            // comes (see `stall`): no need to look again while waiting.
                            None
                        }
                        // A timeout too large to represent as an instant means no deadline.
                        Patience::Within(timeout) => *fixed_deadline
                            .get_or_insert_with(|| Instant::now().checked_add(timeout)),
                    };
                    if !self.wait_for_room(queue, op, resource, deadline) {
                        return Err(SubmitError::TimedOut(resource));
                    }
                }
                _ => return attempt,
            }
        }
    }

    /// Blocks until `resource` may have room for `op` (then the caller tries again) or
    /// `deadline` passes (`false`).
    fn wait_for_room(
        &self,
        queue: QueueId,
        op: &Op<'_>,
        resource: Resource,
        deadline: Option<Instant>,
    ) -> bool {
        let shared = self.shared();
        match resource {
            Resource::QueueSlots { .. } => match shared.queue(queue) {
                Some(queue) => queue.wait_for_slot(deadline),
                None => true,
            },
            Resource::History { signal, .. } => {
                let Some(semaphore) = op.signals.get(signal).map(|&(id, _)| &shared.semaphores[id])
                else {
                    return true;
                };
                // The history frees a slot exactly when this value is reached; a failure ends
                // the wait too (the retry then reports it).
                match semaphore.room_at() {
                    Some(value) => !matches!(
                        causeway_runtime::blocking::wait_until(semaphore, value, deadline),
                        Err(causeway_runtime::blocking::HostWaitError::TimedOut { .. })
                    ),
                    None => true,
                }
            }
            Resource::AllocationRecords { .. } => shared.wait_for_record(deadline),
            // Not a submission's resource: only semaphore creation reports it.
            Resource::Semaphores { .. } => true,
        }
    }

    /// One submission attempt; see the [module documentation](self). Inlined into its one
    /// caller, `submit_waiting`, so the receipt is built where it is returned: returned from a
    /// call, it was copied once more, its frontier with it (about 70 instructions a
    /// submission in all).
    #[inline(always)]
    fn submit_now(&self, queue: QueueId, op: &Op<'_>) -> Result<Receipt, SubmitError> {
        let shared = self.shared();
        let queue = shared.queue(queue).ok_or(SubmitError::UnknownQueue(queue))?;
        self.check(queue, op)?;
        let mut side = queue.lock_submit();
        // Under the submit lock: a semaphore destroyed concurrently is either seen dead here, or
        // its destruction counts this submission before the slot may be reclaimed (see
        // `semaphores`).
        if let Some(&(id, _)) =
            op.waits.iter().chain(op.signals).find(|&&(id, _)| !shared.semaphores.is_live(id))
        {
            return Err(SubmitError::UnknownSemaphore(id));
        }
        let index = queue
            .free_slot()
            .ok_or(SubmitError::Full(Resource::QueueSlots { capacity: queue.capacity() }))?;
        let allocation = self.reserve_memory(op.work, queue.driver)?;
        let slot = queue.slot(index);
        // SAFETY: `free_slot` returned `index` with the submit lock held, so the slot is
        // outside [head, tail) and, by the ring protocol (`queue`, invariant 1), only this
        // thread touches its body until `publish`. A submission refused below leaves it
        // half-written and unpublished; the next one writes every field again.
        let body = unsafe { &mut *slot.body.get() };
        // The waits' origins are written where the queue process reads them.
        body.origins = [None; MAX_WAITS];
        let mut submission = side.clock.begin();
        let mut waits = FixedVec::new();
        for (wait, &(id, value)) in op.waits.iter().enumerate() {
            let semaphore = &shared.semaphores[id];
            let resolved = if queue.native {
                // A device wait stays one only on an operation the driver can wait on natively
                // (see `BackendCapabilities`) — of a queue of the same driver, or of another
                // driver's queue whose progress it mirrors (`process::mirror`; registered here on
                // first use) — and only for a kernel: the layer's own kinds never reach the
                // driver, so the host holds them until their values are reached.
                let native = |origin: Point| {
                    if !op.work.is_kernel() {
                        return false;
                    }
                    let origin_queue = shared.submitter_of(origin).filter(|other| {
                        other.driver == queue.driver
                            || (queue.host_written && other.mirrored_for(shared, queue.driver))
                    });
                    body.origins[wait] =
                        origin_queue.map(|other| Origin { queue: other.id, epoch: origin.epoch });
                    body.origins[wait].is_some()
                };
                submission
                    .wait_on_origin(semaphore, value, native)
                    .map(|(resolution, _)| resolution)
            } else {
                submission.wait(semaphore, value)
            };
            let outcome = match resolved {
                Ok(resolution) => WaitOutcome::Resolved(resolution),
                Err(WaitError::Failed(failure)) => WaitOutcome::Failed(failure),
                Err(_) => {
                    self.unreserve_memory(op.work, allocation);
                    return Err(SubmitError::WaitOutOfScope { wait });
                }
            };
            // Capacity was checked against MAX_WAITS above.
            let _ = waits.push(outcome);
        }
        let signals = op.signals.iter().map(|&(id, value)| (&shared.semaphores[id], value));
        // Borrowed where it lies: each move of the result is a copy of its frontier.
        let committed = submission.commit_signalling(signals);
        let submitted = match &committed {
            Ok(submitted) => submitted,
            &Err(SignalRefused { index: signal, error }) => {
                self.unreserve_memory(op.work, allocation);
                return Err(match error {
                    SignalError::HistoryFull { capacity } => {
                        SubmitError::Full(Resource::History { signal, capacity })
                    }
                    error => SubmitError::Signal { signal, error },
                });
            }
        };
        self.place_memory(op.work, allocation, submitted);
        // The invariant `QueueShared::tail` documents: epochs count the queue's submissions.
        debug_assert_eq!(submitted.point.epoch, index + 1);
        let failure = submitted.failure;
        if failure.is_some() {
            // A doomed operation imported nothing: it waits for no origin.
            body.origins = [None; MAX_WAITS];
        }
        // Field by field, in place: a body built apart and then assigned is a second copy of
        // its half-kilobyte, its wait and signal lists each built and copied once more. The
        // pattern names every field, so none is left from the slot's previous operation (the
        // origins were written above).
        let OpBody {
            tag,
            args,
            point,
            work,
            allocation: body_allocation,
            waits: body_waits,
            resolutions,
            origins: _,
            armed,
            signals: body_signals,
            issued,
            issued_status,
            issued_ns,
        } = body;
        *tag = op.tag;
        *args = op.args;
        *point = submitted.point;
        *work = op.work;
        *body_allocation = allocation;
        fill(body_waits, op.waits);
        *resolutions = [None; MAX_WAITS];
        *armed = [false; MAX_WAITS];
        fill(body_signals, op.signals);
        *issued = None;
        *issued_status = None;
        *issued_ns = 0;
        let (frontier, signals) = queue.lineage(index);
        // What it waits for before it ends (see `stall`): nothing when it is doomed, except a
        // dealloca, which waits for every wait to end (below).
        let waits_before_end = failure.is_none() || matches!(op.work, Work::Dealloca(_));
        // SAFETY: as for the body: the submit lock is held and the slot is unpublished; the
        // references end before `publish`.
        unsafe {
            frontier.write(submitted.frontier);
            fill(signals.get_mut(), op.signals);
            let lineage_waits = queue.lineage_waits(index).get_mut();
            lineage_waits.tag = op.tag;
            fill(&mut lineage_waits.waits, if waits_before_end { op.waits } else { &[] });
        }
        queue.claim(index).reset();
        // The submission hold keeps the gate shut while timepoints are armed.
        slot.gate.count.hold(failure);
        // A doomed operation fails without waiting, except a dealloca: its end gives the
        // buffer's memory back, so it waits for every wait to end, a failed one included (a
        // live signal on the failed timeline may still use the buffer: the timepoint fires
        // when its operation ends). See "A dealloca that does not run" in `memory`.
        if waits_before_end {
            for (wait, outcome) in waits.iter().enumerate() {
                let on_host = match outcome {
                    WaitOutcome::Resolved(resolution) => {
                        body.resolutions[wait] = Some(resolution.resolution);
                        // A native device wait is ordered by the driver, not by the host.
                        match resolution.resolution {
                            Resolution::DeviceWait => body.origins[wait].is_none(),
                            Resolution::Held => true,
                            _ => false,
                        }
                    }
                    WaitOutcome::Failed(_) => true,
                };
                if on_host {
                    body.armed[wait] = self.arm(slot, wait, body.waits[wait]);
                }
            }
        }
        for outcome in &waits {
            if let WaitOutcome::Resolved(resolution) = outcome {
                side.counts.count(resolution);
            }
        }
        queue.publish(index);
        drop(side);
        // Dropping the submission's hold: if that opens the gate, `release` wakes the queue;
        // if an armed wait still holds it, the wait's timepoint wakes the queue when it opens
        // it (`wait_count`, invariant 2). Until then the operation can neither run nor be
        // issued ahead (both read its gate open first), so a wake here would only be a second
        // one, or one for a drain that finds nothing new.
        slot.gate.release();
        Ok(Receipt {
            point: submitted.point,
            frontier: submitted.frontier,
            waits,
            failure,
            failed_signal: submitted.failed_signal,
        })
    }

    fn check(&self, queue: &QueueShared, op: &Op<'_>) -> Result<(), SubmitError> {
        if op.waits.len() > MAX_WAITS {
            return Err(SubmitError::TooManyWaits(op.waits.len()));
        }
        if op.signals.len() > MAX_SIGNALS {
            return Err(SubmitError::TooManySignals(op.signals.len()));
        }
        match op.work.split() {
            Err(LayerWork::Host(call)) if self.shared().host_calls.get(call).is_none() => {
                Err(SubmitError::UnknownHostCall(call))
            }
            Err(_) => Ok(()),
            // What no driver should validate on its own: whether it runs the kind at all, and
            // whether the command buffer exists.
            Ok(kernel) => match kernel {
                Kernel::Spin(_) | Kernel::Sleep(_) if !queue.kernels.timed => {
                    let driver = self.shared().backends[queue.driver].name();
                    Err(SubmitError::Unsupported { driver })
                }
                // Asked each time: a driver may record command buffers while the device runs.
                Kernel::Execute(buffer)
                    if buffer.0 >= self.shared().backends[queue.driver].command_buffers() =>
                {
                    Err(SubmitError::UnknownCommandBuffer(buffer))
                }
                _ => queue.driver_check(self.shared(), kernel),
            },
        }
    }

    /// Reserves an alloca's record for a queue of `driver`, or releases a dealloca's buffer.
    fn reserve_memory(
        &self,
        work: Work,
        driver: usize,
    ) -> Result<Option<AllocationId>, SubmitError> {
        // The memory lock only for work that allocates or frees.
        match work {
            Work::Alloca { buffer, bytes } => {
                let mut memory = self.shared().lock_memory();
                match memory.pool.reserve(buffer.0, bytes, driver) {
                    Ok(Some(id)) => Ok(Some(id)),
                    Ok(None) => Err(SubmitError::Full(Resource::AllocationRecords {
                        capacity: memory.pool.records(),
                    })),
                    Err(error) => Err(SubmitError::Memory(error)),
                }
            }
            Work::Dealloca(buffer) => {
                let mut memory = self.shared().lock_memory();
                memory.pool.release(buffer.0).map(Some).map_err(SubmitError::Memory)
            }
            _ => Ok(None),
        }
    }

    /// Decides which memory a submitted alloca gets, or hands a submitted dealloca's block to
    /// the reuse table. The freeing operation's frontier is the death frontier: every use of
    /// the buffer is in its causal past by program structure.
    fn place_memory(
        &self,
        work: Work,
        allocation: Option<AllocationId>,
        submitted: &Submitted<FRONTIER_CAPACITY>,
    ) {
        let Some(allocation) = allocation else { return };
        let completed = self.shared().completed_frontier();
        let mut memory = self.shared().lock_memory();
        match work {
            Work::Alloca { .. } => {
                memory.pool.assign(allocation, &submitted.frontier, &completed);
            }
            Work::Dealloca(_) => {
                memory.pool.retire(allocation, submitted.point, &submitted.frontier)
            }
            _ => {}
        }
    }

    fn unreserve_memory(&self, work: Work, allocation: Option<AllocationId>) {
        let Some(allocation) = allocation else { return };
        let mut memory = self.shared().lock_memory();
        match work {
            Work::Alloca { buffer, .. } => {
                memory.pool.unreserve(buffer.0, allocation);
                self.shared().record_freed(&memory);
            }
            Work::Dealloca(buffer) => memory.pool.unrelease(buffer.0, allocation),
            _ => {}
        }
    }

    /// Arms the slot's timepoint `wait`; true when it was linked (the gate counts it).
    fn arm(&self, slot: &OpSlot, wait: usize, (id, value): (SemaphoreId, u64)) -> bool {
        let semaphore = &self.shared().semaphores[id];
        let timepoint = QueueShared::timepoint(slot, wait);
        // Invariant 3 of the ring protocol: a previous firing may still be finishing.
        while timepoint.is_busy() {
            std::hint::spin_loop();
        }
        slot.gate.count.add_wait();
        // SAFETY: the timepoint lives in the device's leaked storage (pinned, see
        // `QueueShared::timepoint`) and so does the semaphore; both stay until `drop`, which
        // cancels every armed timepoint before freeing them.
        match unsafe { semaphore.arm(timepoint, value) } {
            Ok(Arm::Armed) => true,
            Ok(Arm::Ready(outcome)) => {
                if let Err(failure) = outcome {
                    slot.gate.record_failure(failure);
                }
                slot.gate.count.withdraw_wait();
                false
            }
            Err(_) => {
                // Unreachable after the busy wait; fail safe rather than hang.
                slot.gate.record_failure(Failure::Aborted);
                slot.gate.count.withdraw_wait();
                false
            }
        }
    }
}

/// Makes `list` hold `items`, in place; `check` bounded their number by the list's capacity.
fn fill<T: Copy, const N: usize>(list: &mut FixedVec<T, N>, items: &[T]) {
    list.clear();
    // Pushed one by one, inlined: `extend_from_slice` is a call of its own, about as dear as
    // the copy of an operation's one or two waits or signals. `check` kept `items` within
    // the capacity; a push past it would be refused, not written.
    for &item in items {
        let _ = list.push(item);
    }
}

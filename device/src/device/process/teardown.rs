//! Shutdown of one queue: the device takes the ring over from the queue process (`ownership`),
//! cancels what has not run and fails what is still running as aborted.

use std::time::Instant;

use causeway_core::semaphore::Failure;

use crate::device::DeviceShared;
use crate::op::{OpStatus, Work};
use crate::queue::ownership::{Running, TakeOver};
use crate::queue::QueueShared;
use crate::sync::atomic::Ordering;
use crate::sync::thread;

/// What taking a queue over at shutdown found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Teardown {
    /// Operations that had not run were cancelled; `stuck` are those whose work (or command
    /// buffer) was still running, failed as aborted instead.
    Done {
        /// Operations cancelled.
        cancelled: usize,
        /// The operations abandoned while running (the head's, or those its driver had).
        stuck: Vec<Running>,
    },
    /// A drain stayed in its bookkeeping past the deadline (an observer or a waker that
    /// blocks); the queue was left alone, except that it is asked to stop: when the drain
    /// goes on, it starts at most one more operation's work and touches nothing after it.
    Busy,
}

impl QueueShared {
    /// Shutdown, after the pool stopped: takes the ring over from the queue process (see
    /// `ownership`), cancels every operation that has not run (its armed timepoints unlinked, its
    /// signals failed as cancelled, its memory released) and fails the one whose work is still
    /// running as aborted. `workers_abandoned` says whether some pool worker was left inside
    /// work (else work that runs on the workers has stopped); the driver decides from it
    /// whether its pending operation may still run.
    pub(crate) fn tear_down(
        &self,
        device: &'static DeviceShared,
        workers_abandoned: bool,
        deadline: Instant,
    ) -> Teardown {
        let (mut index, stuck) = loop {
            match self.ownership.take_over() {
                TakeOver::Idle => break (self.head.load(Ordering::Acquire), None),
                TakeOver::Stuck(running) => {
                    let head = self.head.load(Ordering::Acquire);
                    self.abandon_running(device, head, running);
                    break (head + 1, Some(running));
                }
                TakeOver::Stepping if Instant::now() < deadline => thread::yield_now(),
                TakeOver::Stepping => return Teardown::Busy,
                TakeOver::Abandoned => return Teardown::Done { cancelled: 0, stuck: Vec::new() },
            }
        };
        let tail = self.tail.load(Ordering::Acquire);
        let mut stuck: Vec<Running> = stuck.into_iter().collect();
        // Operations the driver has (from the head to the cursor): finished ones retire with
        // their status, running ones are abandoned as aborted, the rest are cancelled below.
        let issued_end = self.cursor.load(Ordering::Relaxed).clamp(index, tail);
        while index < issued_end {
            // SAFETY: the queue is taken over: the device owns the ring from `index` on (ownership
            // invariant 2), and nothing else reads this slot.
            let body = unsafe { &*self.slot(index).body.get() };
            let Some(kernel) = body.issued else { break };
            let polled = body
                .issued_status
                .or_else(|| self.driver_poll(device, body.point.epoch, kernel, body.tag));
            match polled {
                Some(status) => {
                    // As in `step`: a native wait lets the device run it without the host
                    // seeing its waits reached — past an origin that failed, or one another
                    // queue's teardown cancelled and moved a mirror past — so a wait whose
                    // semaphore failed fails it all the same.
                    let status = match status {
                        OpStatus::Ok => self
                            .failed_wait(device, self.slot(index))
                            .map_or(OpStatus::Ok, OpStatus::Failed),
                        status => status,
                    };
                    self.finish(device, index, body, status, usize::MAX)
                }
                None if self.driver_is_running(device, kernel, workers_abandoned, body.tag) => {
                    let running =
                        Running { tag: body.tag, worker: usize::MAX, since_ns: body.issued_ns };
                    self.abandon_running(device, index, running);
                    stuck.push(running);
                }
                None => break,
            }
            index += 1;
        }
        let cancelled = (tail - index) as usize;
        for index in index..tail {
            let slot = self.slot(index);
            // SAFETY: the device owns the ring from `index` on (the queue was taken over; a
            // stuck head, if any, is below `index`), so nothing else touches the body.
            let body = unsafe { &mut *slot.body.get() };
            for (wait, &(semaphore, _)) in body.waits.iter().enumerate() {
                if body.armed[wait] {
                    device.semaphores[semaphore].cancel(&Self::timepoint(slot, wait));
                }
            }
            self.finish(device, index, body, OpStatus::Cancelled, usize::MAX);
            if let Some(allocation) = body.allocation.take() {
                match body.work {
                    Work::Alloca { .. } => device.end_alloca(allocation),
                    _ => device.abandon(allocation),
                }
            }
        }
        // Every operation from the head on has ended (a running one as aborted): mirrors of
        // the queue's progress pass them, so no native wait on them stalls.
        // `tail` is the last operation's epoch (see `QueueShared::tail`).
        if tail > self.head.load(Ordering::Relaxed) {
            self.mirror_torn_down(device, tail);
        }
        Teardown::Done { cancelled, stuck }
    }

    /// Fails the operation at `index`, whose work is running and will be abandoned: its
    /// signals fail as aborted, so nobody waits for it forever. Only reads the slot (the
    /// worker running the work may still hold a view of it; ownership invariant 3).
    fn abandon_running(&self, device: &'static DeviceShared, index: u64, running: Running) {
        // SAFETY: shared access only; the worker running the work reads nothing of the slot
        // it did not copy before starting, and writes nothing once taken over.
        let body = unsafe { &*self.slot(index).body.get() };
        let status = OpStatus::Failed(Failure::Aborted);
        self.finish(device, index, body, status, running.worker);
    }
}

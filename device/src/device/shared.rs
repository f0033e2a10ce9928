//! The state a running device shares with its queue processes and drivers, leaked while the
//! device lives (see [`Device`](crate::Device)).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use causeway_core::frontier::{Frontier, Point};
use causeway_core::scope::Endpoint;
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::{Condvar, Mutex, MutexGuard};
use causeway_runtime::contain::{contain, Panicked};
use causeway_runtime::{HostExecutor, FRONTIER_CAPACITY};

use causeway_core::executor::Process;

use super::process::QueueProcess;
use crate::backend::{ContextDevice, DeviceContext, DynBackend, MemoryOp, QueueWaiters};
use crate::error::{DriverCall, DriverFault, Violation};
use crate::host_calls::HostCallTable;
use crate::ids::{DeviceTag, QueueId};
use crate::memory::{AllocationId, MemoryPool, Unbacking};
use crate::op::{ObservedQueue, Observer, OpEvent, OpStatus};
use crate::queue::QueueShared;
use crate::semaphores::SemaphoreTable;

pub(crate) struct MemoryState {
    pub(crate) pool: MemoryPool<FRONTIER_CAPACITY>,
    /// Queues whose head alloca waits for quota.
    pub(crate) waiting: QueueWaiters,
    /// Submitters blocked until an allocation record is freed (see `records_freed`).
    pub(crate) record_waiters: usize,
}

/// Everything the queue processes reach; leaked while the device lives (see
/// [`Device`](super::Device)).
pub(crate) struct DeviceShared {
    /// What every id this device hands out carries (see `ids`).
    pub(crate) tag: DeviceTag,
    pub(crate) queues: Box<[QueueShared]>,
    pub(crate) endpoints: Box<[Endpoint]>,
    pub(crate) semaphores: SemaphoreTable,
    pub(crate) host_calls: HostCallTable,
    pub(crate) backends: Box<[Box<dyn DynBackend>]>,
    pub(crate) memory: Mutex<MemoryState>,
    /// Signalled (under `memory`) when an allocation record is freed while a submitter waits
    /// for one.
    pub(crate) records_freed: Condvar,
    pub(crate) observer: Option<Arc<dyn Observer>>,
    /// Each queue's name, for observer events and reports.
    pub(crate) queue_names: Box<[Box<str>]>,
    /// Contract violations of drivers, caught (see `process::driver`); rare, so a plain list.
    pub(crate) faults: Mutex<Vec<DriverFault>>,
    pub(crate) executor: Arc<HostExecutor<'static>>,
    pub(crate) workers: usize,
    pub(crate) start: Instant,
    /// A waiting submitter's stall check (`device::stall`): per queue, how far the walk has
    /// visited and how far it must. Made once, so a check allocates nothing; the lock
    /// serialises checks (taken before any submit lock, and never by a holder of one).
    pub(crate) stall_walk: Mutex<Box<[StallCursor]>>,
    /// What each queue's executor process drains, in queue order; set once the state has its
    /// final address (the processes point back at it).
    pub(crate) processes: OnceLock<Box<[QueueProcess]>>,
}

/// How far a stall check has visited one queue's operations, and how far it must (epochs).
#[derive(Clone, Copy, Default)]
pub(crate) struct StallCursor {
    pub(crate) visited: u64,
    pub(crate) wanted: u64,
}

impl DeviceShared {
    /// What a backend may reach of this device ([`DeviceContext`]).
    pub(crate) fn context(&'static self) -> DeviceContext {
        DeviceContext { device: self }
    }

    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Reports `event(now)` to the observer; the clock is read only when someone watches.
    pub(crate) fn observe(&self, queue: usize, tag: u64, event: impl FnOnce(u64) -> OpEvent) {
        if let Some(observer) = &self.observer {
            observer.op_event(self.observed_queue(queue), tag, event(self.now_ns()));
        }
    }

    /// Queue `id`, when this device made it.
    pub(crate) fn queue(&self, id: QueueId) -> Option<&QueueShared> {
        if id.is_of(self.tag) {
            self.queues.get(id.index())
        } else {
            None
        }
    }

    /// Queue `queue` as an observer sees it.
    pub(crate) fn observed_queue(&self, queue: usize) -> ObservedQueue<'_> {
        let name = self.queue_names.get(queue).map_or("", |name| &**name);
        ObservedQueue { id: self.queues[queue].id, name }
    }

    /// [`Backend::memory`](crate::Backend::memory) of driver `driver`, contained: a panic is
    /// recorded as a fault and fails a commit as device lost (see `process::driver`).
    pub(crate) fn driver_memory(&self, driver: usize, op: MemoryOp) -> Result<(), Failure> {
        let backend = &self.backends[driver];
        contain(|| backend.memory(op)).unwrap_or_else(|Panicked| {
            self.record_fault(DriverFault {
                driver: backend.name(),
                queue: None,
                tag: None,
                call: DriverCall::Memory,
                violation: Violation::Panicked,
            });
            Err(Failure::DeviceLost)
        })
    }

    /// Records that a driver broke the contract.
    pub(crate) fn record_fault(&self, fault: DriverFault) {
        self.faults.lock().push(fault);
    }

    pub(crate) fn lock_memory(&self) -> MutexGuard<'_, MemoryState> {
        // No caller's code (observer, host function, kernel) runs under this lock, and the
        // pool's own updates cannot stop half-way, so it stays whole.
        self.memory.lock()
    }

    /// What the device knows has completed: every queue's last retired epoch.
    pub(crate) fn completed_frontier(&self) -> Frontier<FRONTIER_CAPACITY> {
        let mut completed = Frontier::new();
        for queue in self.queues.iter() {
            let epoch = queue.completed_epoch();
            if epoch > 0 {
                let axis = queue.submit_axis();
                completed.insert_or_raise(axis, epoch);
            }
        }
        completed
    }

    /// The queue of this device that submitted the operation at `point`, if one did. A queue
    /// carrying `point`'s axis that never had its epoch did not: every rank holds the other
    /// ranks' queues' axes so that names map, and a signal imported from one of those names an
    /// operation submitted there.
    pub(crate) fn submitter_of(&self, point: Point) -> Option<&QueueShared> {
        self.queues
            .iter()
            .find(|queue| queue.submit_axis() == point.axis)
            .filter(|queue| queue.has_submitted(point.epoch))
    }

    /// Ends a dealloca — run, failed or cancelled, once everything it was ordered after has
    /// ended (see `memory`): the owner lets the block's memory go (before the quota counts it
    /// free, so native memory never runs ahead of the quota), the bytes return to the quota,
    /// the record is freed, and queues waiting for quota and submitters waiting for a record
    /// are woken. `Failed` when the alloca has not run (nothing ordered the two).
    pub(crate) fn give_back(&'static self, allocation: AllocationId) -> OpStatus {
        let unbacking = self.lock_memory().pool.unbacking(allocation);
        if let Some(Unbacking { block, driver, kept }) = unbacking {
            // The owner accounts for its own memory: an error here changes nothing above it.
            let _ = self.driver_memory(driver, MemoryOp::Decommit { block, keep: kept });
        }
        let mut memory = self.lock_memory();
        let status = match memory.pool.give_back(allocation) {
            Ok(()) => OpStatus::Ok,
            // Not committed: nothing was backed, and the alloca frees the record when it ends.
            Err(_) => OpStatus::Failed(Failure::Aborted),
        };
        memory.waiting.wake_all(self.context());
        self.record_freed(&memory);
        status
    }

    /// Ends an alloca that did not commit (it failed or was cancelled before it ran): its
    /// dealloca will have nothing to give back, and the memory kept for the block it took from
    /// the reuse table is released.
    pub(crate) fn end_alloca(&self, allocation: AllocationId) {
        let mut memory = self.lock_memory();
        let kept = memory.pool.end_alloca(allocation);
        self.record_freed(&memory);
        drop(memory);
        if let Some((block, driver)) = kept {
            let _ = self.driver_memory(driver, MemoryOp::Release { block });
        }
    }

    /// Gives up the memory of a dealloca the device cancels at shutdown; its owner frees what
    /// it backed.
    pub(crate) fn abandon(&self, allocation: AllocationId) {
        let mut memory = self.lock_memory();
        let unbacking = memory.pool.abandon(allocation);
        self.record_freed(&memory);
        drop(memory);
        if let Some(Unbacking { block, driver, .. }) = unbacking {
            let _ = self.driver_memory(driver, MemoryOp::Release { block });
        }
    }

    /// Tells submitters waiting for an allocation record that one may be free. Called with the
    /// memory lock held, which the waiters check under: no wake-up is lost.
    pub(crate) fn record_freed(&self, memory: &MemoryState) {
        if memory.record_waiters > 0 {
            self.records_freed.notify_all();
        }
    }

    /// Blocks until an allocation record is free or `deadline` passes (`false`).
    pub(crate) fn wait_for_record(&self, deadline: Option<Instant>) -> bool {
        let mut memory = self.lock_memory();
        memory.record_waiters += 1;
        let free = loop {
            if memory.pool.has_free_record() {
                break true;
            }
            memory = match deadline {
                None => self.records_freed.wait(memory),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    self.records_freed.wait_timeout(memory, deadline - now).0
                }
            };
        };
        memory.record_waiters -= 1;
        free
    }
}

impl ContextDevice for DeviceShared {
    fn wake(&'static self, queue: QueueId) {
        if queue.is_of(self.tag) {
            self.wake_at(queue.index());
        }
    }

    fn queue_id(&self, index: usize) -> Option<QueueId> {
        self.queues.get(index).map(|queue| queue.id)
    }

    fn wake_at(&'static self, index: usize) {
        if let Some(queue) = self.queues.get(index) {
            queue.wake();
        }
    }

    fn queues(&self) -> usize {
        self.queues.len()
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn submit(&self, process: &'static Process<'static>) -> bool {
        self.executor.submit(process).is_ok()
    }

    fn now_ns(&self) -> u64 {
        DeviceShared::now_ns(self)
    }
}

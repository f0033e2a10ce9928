//! The running device: its public face. Building it is in `builder`, submission in `submit`
//! (and in `stall`, whether a waiting submission would wait forever), shutdown in `shutdown`; the state its queue processes share is in `shared`, and what those
//! processes run — with that state, every queue and every semaphore in reach — in `process`.

mod builder;
mod process;
mod shared;
mod shutdown;
mod stall;
mod stats;
mod submit;

use std::fmt;
use std::time::{Duration, Instant};

use causeway_core::axis::Axis;
use causeway_core::executor::Woken;
use causeway_core::queue::ResolutionCounts;
use causeway_core::scope::Endpoint;
use causeway_core::speculation::Rejection;
use causeway_runtime::{CpuPool, HostExecutor, PoolConfig};

pub use builder::DeviceBuilder;
pub(crate) use shared::DeviceShared;
pub use shutdown::{ShutdownReport, StuckOp, BOOKKEEPING_GRACE, DROP_GRACE};
pub use stats::{DeviceStats, DriverStats, QueueStats};

use crate::backend::Backend;
use crate::error::{DriverFault, HostCallsFull, SemaphoreWaitError};
use crate::hand_off;
use crate::ids::QueueId;
use crate::ids::{DriverId, HostCallId, SemaphoreId};
use crate::limits::DeviceSemaphore;
use crate::memory::MemoryStats;
use crate::op::Invocation;
use crate::queue::QueueShared;
use crate::semaphores::{Blocker, SemaphoreError};
use crate::speculation::CancelReport;
#[cfg(doc)]
use crate::{OpEvent, Work};
use causeway_core::semaphore::Failure;

/// A running device. See the [crate documentation](crate).
///
/// Its state is allocated once, leaked while the device lives so the queue processes can be
/// `'static`, and reclaimed in `Drop` after the workers are joined.
pub struct Device {
    pool: Option<CpuPool>,
    /// The state, from `Box::into_raw`. Kept as a pointer, not a `&'static`: `shutdown` takes
    /// the device by value and frees the state inside the call, which a reference field (valid
    /// for the whole call, as a by-value argument's references are) would forbid.
    owned: *mut DeviceShared,
}

// SAFETY: `owned` is the state's allocation, freed once, in `stop` (which has exclusive
// access); everything reachable through it is `Sync`.
unsafe impl Send for Device {}
// SAFETY: as above; shared access goes through `&DeviceShared`, which is `Sync`.
unsafe impl Sync for Device {}

impl Device {
    /// The device's state, for as long as it lives.
    fn shared(&self) -> &'static DeviceShared {
        // SAFETY: `owned` came from `Box::into_raw` in `build` and is freed only in `stop`,
        // after which no method of this device runs (`shutdown` consumed it; `Drop` calls
        // `stop` again, which returns before touching the state).
        unsafe { &*self.owned }
    }

    /// Starts describing a device run by a pool built from `pool`.
    pub fn builder(pool: PoolConfig) -> DeviceBuilder {
        DeviceBuilder::new(pool)
    }

    /// Registers a host function for [`Work::Host`] while the device runs, as
    /// [`DeviceBuilder::host_call`] does before it starts; refused when the table the builder
    /// sized ([`DeviceBuilder::spare_host_calls`]) is full. The id is usable at once, from any
    /// thread that is handed it.
    pub fn host_call(
        &self,
        call: impl Fn(&Invocation) -> Result<(), Failure> + Send + Sync + 'static,
    ) -> Result<HostCallId, HostCallsFull> {
        let table = &self.shared().host_calls;
        table
            .register(Box::new(call))
            .map_err(|_refused| HostCallsFull { capacity: table.capacity() })
    }

    /// The backend registered as `driver`, if it is a `B`: how an application reaches its
    /// driver while the device runs — to record a command buffer, say, where the driver
    /// allows it (the CPU and NPU drivers do; see their `command_buffer`).
    pub fn backend<B: Backend>(&self, driver: DriverId) -> Option<&B> {
        self.shared().backends.get(driver.0 as usize)?.as_any().downcast_ref::<B>()
    }

    /// Blocks the calling thread until semaphore `id` reaches `value` (returning the value
    /// seen), the semaphore fails, or `timeout` passes (`None`: no timeout). The one wait a
    /// host thread needs on a device's semaphores; for a semaphore outside any device, or an
    /// absolute deadline, see `causeway_runtime::blocking`.
    pub fn wait(
        &self,
        id: SemaphoreId,
        value: u64,
        timeout: Option<Duration>,
    ) -> Result<u64, SemaphoreWaitError> {
        let semaphore = self.semaphore(id).ok_or(SemaphoreWaitError::UnknownSemaphore(id))?;
        causeway_runtime::blocking::wait(semaphore, value, timeout)
            .map_err(SemaphoreWaitError::Wait)
    }

    /// The device's semaphore `id`.
    pub fn semaphore(&self, id: SemaphoreId) -> Option<&DeviceSemaphore> {
        self.shared().semaphores.get(id)
    }

    /// The id of the device's queue at `index` (creation order, from 0), for code that keeps
    /// queues by index.
    pub fn queue(&self, index: usize) -> Option<QueueId> {
        self.shared().queues.get(index).map(|queue| queue.id)
    }

    /// Where queue `id` sits (for scope decisions and its axis).
    pub fn endpoint(&self, id: QueueId) -> Option<Endpoint> {
        let shared = self.shared();
        shared.queue(id)?;
        shared.endpoints.get(id.index()).copied()
    }

    /// Queue `id`'s axis.
    pub fn axis(&self, id: QueueId) -> Option<Axis> {
        self.shared().queue(id).map(QueueShared::submit_axis)
    }

    /// Queue `id`'s wait-resolution totals over the operations submitted to it.
    pub fn resolution_counts(&self, id: QueueId) -> Option<ResolutionCounts> {
        self.shared().queue(id).map(|queue| queue.lock_submit().counts)
    }

    /// Operations submitted to queue `id` that have not finished.
    pub fn in_flight(&self, id: QueueId) -> Option<u64> {
        self.shared().queue(id).map(QueueShared::in_flight)
    }

    /// Stream-ordered memory totals.
    pub fn memory_stats(&self) -> MemoryStats {
        self.shared().lock_memory().pool.stats()
    }

    /// Bytes committed right now.
    pub fn committed_bytes(&self) -> u64 {
        self.shared().lock_memory().pool.committed()
    }

    /// Every contract violation a driver committed so far, in order, each caught by the
    /// layer: the driver's queue was failed (its operations fail as device lost from then
    /// on) and the device went on. Empty for drivers that keep the contract.
    pub fn driver_faults(&self) -> Vec<DriverFault> {
        self.shared().faults.lock().clone()
    }

    /// Nanoseconds since the device started (the clock of [`OpEvent`]s).
    pub fn now_ns(&self) -> u64 {
        self.shared().now_ns()
    }

    /// The pool's executor, for running other processes beside the queues.
    pub fn executor(&self) -> &HostExecutor<'static> {
        &self.shared().executor
    }

    /// Runs `body` — part of a drain of another process on this device's executor that
    /// signals this device's semaphores — holding back the first queue process it wakes
    /// instead of publishing it, as a queue's own drain does (see "Wake hand-off" in the core
    /// executor docs). Returns that wake, to pass to
    /// [`DrainContext::hand_off`](causeway_core::executor::DrainContext::hand_off) so the
    /// woken queue runs on this worker as soon as the drain returns; dropping it publishes it
    /// as a plain wake would have.
    pub fn holding_wake<R>(
        &self,
        body: impl FnOnce() -> R,
    ) -> (R, Option<Woken<'static, 'static>>) {
        hand_off::collect(&self.shared().executor, |collector| {
            let result = body();
            (result, collector.take())
        })
    }

    /// Cancels what depended on rejected speculation: every operation submitted so far whose
    /// frontier holds `rejection.axis` beyond `rejection.accepted` — or is tainted and so might
    /// ([`Dependence::Conservative`](causeway_core::speculation::Dependence::Conservative)) —
    /// and has not started is cancelled: it will not run. Its signals are marked cancelled at
    /// once — only the values they would have reached, so accepted work may still signal the
    /// same semaphores — so later submissions waiting on those values fail at submission. Its
    /// queue retires it in order, once the operations its waits imported have ended (held
    /// waits that imported nothing are released, except a dealloca's: it gives its memory
    /// back when it ends, so it waits for every wait; on a native queue its epoch is moved
    /// past on the device, so nothing waits natively on work that will never be issued), and
    /// that retirement ends its signals as [`Failure::Cancelled`]: waiters already armed on them,
    /// on every driver and on host threads, end with the failure then, not sooner — such a
    /// waiter imported the cancelled operation's frontier, and what follows it relies on that
    /// work having ended (see "Failure" in `causeway_core::queue`). Operations that already
    /// started run to their end and are reported as having run on rejected work
    /// ([`OpEvent::Speculative`]); their signals' history entries are marked
    /// ([`Semaphore::ran_on_rejected`](causeway_core::semaphore::Semaphore::ran_on_rejected)
    /// answers a later waiter). Everything else runs as submitted.
    ///
    /// One frontier lookup per operation in flight, so the cost is linear in them; each queue
    /// is held against submissions only while its own ring is walked. An operation submitted
    /// during the call may escape the walk; if it waits on a cancelled value it fails through
    /// the cascade instead.
    pub fn cancel_speculative(&self, rejection: Rejection) -> CancelReport {
        let mut report = CancelReport::default();
        // Every queue decides and claims before any signal is marked: a failure spreading
        // ahead of the walk would fail a dependent operation on a later queue (as a failed wait
        // at submission) before the walk could cancel it.
        for queue in self.shared().queues.iter() {
            queue.claim_speculative(self.shared(), rejection, &mut report);
        }
        for queue in self.shared().queues.iter() {
            if queue.mark_cancelled(self.shared()) {
                queue.wake();
            }
        }
        report
    }

    /// Creates a semaphore at `initial` from the device's pool
    /// ([`DeviceBuilder::semaphore_pool`]), without waiting: [`SemaphoreError::Full`] when every
    /// pooled slot is live or still used by operations in flight.
    pub fn create_semaphore(&self, initial: u64) -> Result<SemaphoreId, SemaphoreError> {
        self.shared().semaphores.create(initial, &self.shared().queues)
    }

    /// [`create_semaphore`](Self::create_semaphore), waiting up to `timeout` for a destroyed
    /// semaphore's slot to become free (its earlier operations to retire).
    pub fn create_semaphore_timeout(
        &self,
        initial: u64,
        timeout: Duration,
    ) -> Result<SemaphoreId, SemaphoreError> {
        let shared = self.shared();
        // A timeout too large to represent as an instant means no deadline.
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let resource = match shared.semaphores.create(initial, &shared.queues) {
                Err(SemaphoreError::Full(resource)) => resource,
                done => return done,
            };
            let reached = match shared.semaphores.oldest_blocker(&shared.queues) {
                Blocker::Queue { queue, submitted } => {
                    shared.queues[queue].wait_for_retired(submitted, deadline)
                }
                // A host thread's wait ends by itself (value, failure or its own timeout);
                // look again shortly.
                Blocker::HostWaiter => {
                    std::thread::sleep(HOST_WAITER_POLL);
                    deadline.is_none_or(|deadline| Instant::now() < deadline)
                }
                // The slot's last operation retired (or its host waiter left) between the
                // creation's look and this one: create again.
                Blocker::Reclaimable => true,
                Blocker::NothingRetiring => return Err(SemaphoreError::Full(resource)),
            };
            if !reached {
                return Err(SemaphoreError::TimedOut(resource));
            }
        }
    }

    /// Destroys pooled semaphore `id`: submissions naming it are refused from now on, while
    /// operations already submitted keep using it; its slot is reused once they have all
    /// retired and no host thread waits on it. Declared semaphores live as long as the device.
    pub fn destroy_semaphore(&self, id: SemaphoreId) -> Result<(), SemaphoreError> {
        self.shared().semaphores.destroy(id, &self.shared().queues)
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("queues", &self.shared().queues)
            .field("semaphores", &self.shared().semaphores.len())
            .finish_non_exhaustive()
    }
}

/// How often a semaphore creation blocked only by a host thread's wait on the oldest destroyed
/// semaphore looks again.
const HOST_WAITER_POLL: Duration = Duration::from_millis(1);

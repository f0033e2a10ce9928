//! # causeway-device
//!
//! The device layer every driver shares: queues whose operations wait on and signal timeline
//! semaphores, whatever hardware runs them. A driver implements a small [`Backend`] (see
//! [`backend`]); everything else about an operation lives here, once.
//!
//! A [`Device`] owns a [`CpuPool`] (its queue processes run there, whatever the driver), its
//! drivers' backends, a fixed set of queues, a fixed table of semaphores, registered host
//! functions and a stream-ordered memory pool, all sized when it is built ([`DeviceBuilder`]).
//! After that, submitting, running and signalling allocate nothing.
//!
//! Submitting an [`Op`] to a queue ([`Device::submit`]) happens on the calling thread and
//! never blocks on other work:
//!
//! 1. each wait is resolved against the queue's clock (`docs/ARCHITECTURE.md`, "Causal
//!    model"): **elided** (the queue already knows the signalling operation), **satisfied**
//!    (already reached), or — when the value is still to come — **device** (a semaphore
//!    timepoint armed now on the operation's wait gate; submit-before-signal is fine) or
//!    **held** (for queues without wait-before-signal, by their driver's capabilities or
//!    their configuration: the operation is held on the host until the value is reached, as
//!    binary-event APIs need);
//! 2. the operation gets the next epoch, its frontier becomes the queue's, and its signals
//!    are recorded as pending with that frontier;
//! 3. it enters the queue's ring and the queue process is woken.
//!
//! Each queue's process (see `queue`) takes its operations in order as their waits resolve,
//! woken directly by the timepoint callbacks — no polling — and issues each to its driver's
//! backend (or runs the layer's own work: barriers, host functions, stream-ordered memory).
//! Finishing an operation completes its signals, which wakes the next waiters the same way. A
//! failed wait, or failing work — a host function's error, a host function or kernel that
//! panics (contained on its worker, as [`Failure::Aborted`]) — fails the operation and every
//! semaphore it signals; shutting the device down cancels what has not run and fails its
//! signals as cancelled, so no host waiter is left hanging.

// Not a loom model: its lock-free parts are core's (modelled there), and core's axis allocator
// is not `const` under loom. Under `--cfg loom` the crate is empty.
#![cfg(not(loom))]

pub mod backend;

mod clock;
mod gate_count;
mod hand_off;
mod handshake_barrier;
mod memory;
pub mod native_blocks;
mod op;
mod phase;
mod prefetch;
mod queue;
mod run_claim;
mod semaphores;
mod speculation;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway_core::axis::{Axis, AxisAllocator, AxisError, Domain};
use causeway_core::executor::Woken;
use causeway_core::frontier::{Frontier, Point};
use causeway_core::queue::{
    Capabilities, QueueClock, Resolution, ResolutionCounts, SignalRefused, Submitted, WaitError,
    WaitResolution,
};
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::{
    Arm, Failure, HistoryEntry, Semaphore, SignalError, SlotCountError,
};
use causeway_core::speculation::Rejection;
use causeway_core::unpoisoned::{Condvar, Mutex, MutexGuard};
use heapless::Vec as FixedVec;

pub use backend::{
    Backend, BackendCapabilities, DeviceContext, DriverError, DriverId, Issue, Issued, MemoryOp,
    NativeWait, Origin, QueueWaiters,
};
pub use causeway_core::reuse::BlockId;
pub use causeway_runtime::{HostExecutor, PoolConfig, FRONTIER_CAPACITY};
pub use memory::{MemoryError, MemoryStats};
pub use native_blocks::{NativeBlocks, NativeMemory};
pub use op::{Observer, Op, OpEvent, OpStatus, Work};
pub use semaphores::{SemaphoreError, SemaphoreId};
pub use speculation::CancelReport;

use causeway_runtime::{CpuPool, PoolError};
use memory::{AllocationId, MemoryPool, Unbacking};
use op::OpBody;
use queue::{QueueShared, Teardown};
use semaphores::{Blocker, SemaphoreTable};

/// Most waits one operation may carry.
pub const MAX_WAITS: usize = 8;
/// Most signals one operation may carry.
pub const MAX_SIGNALS: usize = 8;
/// History slots a semaphore gets unless configured otherwise ([`SemaphoreConfig::history`]):
/// how many signals may be pending at once, plus recent reached ones for late waiters.
pub const DEFAULT_SEMAPHORE_HISTORY: usize = 64;

/// A device semaphore's history slots, sized when the device is built.
pub type HistorySlots = Box<[HistoryEntry<FRONTIER_CAPACITY>]>;
/// The semaphores a device owns (their history lives in run-time sized slots, so the inline
/// count is 0).
pub type DeviceSemaphore = Semaphore<0, FRONTIER_CAPACITY, HistorySlots>;

/// Axes are never reused within a process, across devices included.
static AXES: AxisAllocator = AxisAllocator::new(0);

/// Allocates a fresh axis on `machine` in `domain` (for host participants and channels that
/// live beside a device's queues).
pub fn allocate_axis(machine: u16, domain: Domain) -> Result<Axis, AxisError> {
    let ordinal = AXES.allocate(domain)?.ordinal();
    Axis::try_new(machine, domain, ordinal).ok_or(AxisError::Exhausted { domain })
}

/// A queue of a device (its index in creation order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueId(pub usize);

/// A registered host function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostCallId(pub u32);

/// A command buffer recorded with a driver (its numbering is the driver's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommandBufferId(pub u32);

/// A stream-ordered buffer name (index below the device's buffer count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferId(pub u32);

/// A host function a [`Work::Host`] operation calls.
pub type HostCall = Box<dyn Fn() -> Result<(), Failure> + Send + Sync>;

/// How to build one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueConfig {
    /// Machine index (for scopes and the queue's axis).
    pub machine: u16,
    /// Device index within the process (queues of one device share device-local semaphores).
    pub device: u32,
    /// Peer-to-peer group of that device.
    pub device_group: u32,
    /// Operations in flight at most (submitted, not retired).
    pub capacity: usize,
    /// Whether waits may be queued before their signal is submitted; without it such waits
    /// are held on the host (as binary-event APIs need). Applies only where the driver can
    /// ([`BackendCapabilities::wait_before_signal`]).
    pub wait_before_signal: bool,
    /// The driver that runs its kernels ([`DeviceBuilder::driver`]).
    pub driver: DriverId,
}

impl Default for QueueConfig {
    fn default() -> QueueConfig {
        QueueConfig {
            machine: 0,
            device: 0,
            device_group: 0,
            capacity: 256,
            wait_before_signal: true,
            driver: DriverId(0),
        }
    }
}

/// How to build one semaphore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreConfig {
    /// Its initial value.
    pub initial: u64,
    /// How far its signals are visible.
    pub scope: Scope,
    /// Where it was created (the reference point of `scope`).
    pub home: Endpoint,
    /// History slots (2..=65535): signals that may be pending at once, plus one for the newest
    /// reached signal. A submission that finds them all taken waits ([`Device::submit`]) or
    /// is refused as [`Resource::History`] ([`Device::try_submit`]). More slots also keep
    /// late waiters exact for longer (an aged-out value imports a looser, still true, entry).
    pub history: usize,
}

impl SemaphoreConfig {
    /// A semaphore at `initial`, visible within `scope` around `home`, with
    /// [`DEFAULT_SEMAPHORE_HISTORY`] history slots.
    pub fn new(initial: u64, scope: Scope, home: Endpoint) -> SemaphoreConfig {
        SemaphoreConfig { initial, scope, home, history: DEFAULT_SEMAPHORE_HISTORY }
    }
}

/// Why a device could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum DeviceError {
    /// The worker pool could not start.
    Pool(PoolError),
    /// No axis left for a queue.
    Axis(AxisError),
    /// A queue was configured with no room for operations.
    ZeroCapacity(QueueId),
    /// A semaphore was configured with an unusable history size.
    History(SemaphoreId, SlotCountError),
    /// A queue names a driver that was not registered.
    UnknownDriver(QueueId, DriverId),
    /// A driver could not open a queue.
    Driver(QueueId, DriverError),
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::Pool(error) => write!(f, "worker pool: {error}"),
            DeviceError::Axis(error) => write!(f, "queue axis: {error}"),
            DeviceError::ZeroCapacity(queue) => write!(f, "queue {} has capacity 0", queue.0),
            DeviceError::History(id, error) => write!(f, "{id}: {error}"),
            DeviceError::UnknownDriver(queue, driver) => {
                write!(f, "queue {} names driver {}, which is not registered", queue.0, driver.0)
            }
            DeviceError::Driver(queue, error) => write!(f, "queue {}: {error}", queue.0),
        }
    }
}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeviceError::Pool(error) => Some(error),
            DeviceError::Axis(error) => Some(error),
            DeviceError::History(_, error) => Some(error),
            DeviceError::Driver(_, error) => Some(error),
            DeviceError::ZeroCapacity(_) | DeviceError::UnknownDriver(..) => None,
        }
    }
}

/// A bounded resource a submission needs and found full. Nothing was changed: the same
/// operation can be submitted again once the resource has room, which happens as earlier
/// work completes (the waiting forms of submit wait for exactly that).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resource {
    /// The queue's ring holds `capacity` operations that have not retired.
    QueueSlots {
        /// The ring size ([`QueueConfig::capacity`]).
        capacity: usize,
    },
    /// Signal number `signal`'s semaphore has every history slot taken by pending signals
    /// (plus the newest reached one, which is kept for late waiters).
    History {
        /// Index into [`Op::signals`].
        signal: usize,
        /// The semaphore's history slots ([`SemaphoreConfig::history`]).
        capacity: usize,
    },
    /// Every pooled semaphore slot is live or still used by operations in flight
    /// ([`Device::create_semaphore`]).
    Semaphores {
        /// Pooled slots ([`DeviceBuilder::semaphore_pool`]).
        capacity: usize,
    },
    /// Every stream-ordered allocation record is held by a reservation whose dealloca has not
    /// run yet.
    AllocationRecords {
        /// Records the device has ([`DeviceBuilder::allocation_records`]).
        capacity: usize,
    },
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Resource::QueueSlots { capacity } => {
                write!(f, "queue full: {capacity} operations in flight")
            }
            Resource::History { signal, capacity } => write!(
                f,
                "signal {signal}: all {capacity} history slots hold pending signals (or the newest reached one)"
            ),
            Resource::Semaphores { capacity } => {
                write!(f, "all {capacity} pooled semaphores are live or still in use")
            }
            Resource::AllocationRecords { capacity } => {
                write!(f, "all {capacity} allocation records are held by pending deallocas")
            }
        }
    }
}

/// Why a submission was refused. A refused submission changes nothing, except where noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// No such queue.
    UnknownQueue(QueueId),
    /// No such semaphore.
    UnknownSemaphore(SemaphoreId),
    /// No such host function.
    UnknownHostCall(HostCallId),
    /// No such command buffer.
    UnknownCommandBuffer(CommandBufferId),
    /// The queue's driver has no kernel for this kind of work.
    Unsupported {
        /// The driver ([`Backend::name`]).
        driver: &'static str,
    },
    /// More than [`MAX_WAITS`] waits.
    TooManyWaits(usize),
    /// More than [`MAX_SIGNALS`] signals.
    TooManySignals(usize),
    /// A bounded resource is full (backpressure): nothing changed; submit again once earlier
    /// work has completed, or use a waiting form of submit.
    Full(Resource),
    /// A waiting submission gave up at its deadline; the resource was still full.
    TimedOut(Resource),
    /// Wait number `wait` names a semaphore whose scope does not reach the queue.
    WaitOutOfScope {
        /// Index into [`Op::waits`].
        wait: usize,
    },
    /// Signal number `signal` was refused (it does not advance its timeline, say); nothing was
    /// submitted. A signal on a timeline that has failed is not refused: the operation is
    /// accepted doomed ([`Receipt::failure`]).
    Signal {
        /// Index into [`Op::signals`].
        signal: usize,
        /// Why.
        error: SignalError,
    },
    /// The stream-ordered pool refused the alloca or dealloca.
    Memory(MemoryError),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SubmitError::UnknownQueue(queue) => write!(f, "no queue {}", queue.0),
            SubmitError::UnknownSemaphore(semaphore) => write!(f, "no live {semaphore}"),
            SubmitError::UnknownHostCall(call) => write!(f, "no host function {}", call.0),
            SubmitError::UnknownCommandBuffer(id) => write!(f, "no command buffer {}", id.0),
            SubmitError::Unsupported { driver } => {
                write!(f, "the {driver} driver cannot run this kind of work")
            }
            SubmitError::TooManyWaits(n) => write!(f, "{n} waits (at most {MAX_WAITS})"),
            SubmitError::TooManySignals(n) => write!(f, "{n} signals (at most {MAX_SIGNALS})"),
            SubmitError::Full(resource) => write!(f, "{resource}"),
            SubmitError::TimedOut(resource) => write!(f, "gave up waiting for room: {resource}"),
            SubmitError::WaitOutOfScope { wait } => {
                write!(f, "wait {wait}: semaphore scope does not reach this queue")
            }
            SubmitError::Signal { signal, error } => write!(f, "signal {signal}: {error}"),
            SubmitError::Memory(error) => write!(f, "stream-ordered memory: {error}"),
        }
    }
}

impl std::error::Error for SubmitError {}

/// How one wait of a submitted operation was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitOutcome {
    /// Resolved as `causeway_core::queue` describes: elided, satisfied, device wait or held.
    Resolved(WaitResolution),
    /// The semaphore had already failed: the operation will fail.
    Failed(Failure),
}

/// What a successful submission tells the host. An accepted operation is in its queue, even a
/// doomed one ([`failure`](Self::failure)): an upstream failure is a run-time outcome that
/// reaches its waiters through the semaphores, never a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The operation's `(queue axis, epoch)`.
    pub point: Point,
    /// Everything the operation knows, itself included; its signals carry this.
    pub frontier: Frontier<FRONTIER_CAPACITY>,
    /// One outcome per wait, in order.
    pub waits: FixedVec<WaitOutcome, MAX_WAITS>,
    /// `Some` when the operation was accepted doomed: a semaphore it waits on had already
    /// failed (the first such wait's failure), or only a timeline it signals had
    /// ([`Failure::Aborted`]: its result would have nowhere to go). It will not run; when its
    /// turn comes it fails with this, failing what it signals. Its waits imported nothing, so
    /// its frontier is its queue's knowledge and its own point.
    pub failure: Option<Failure>,
    /// The first signal whose timeline had already failed: its index in [`Op::signals`] and
    /// that timeline's failure.
    pub failed_signal: Option<(usize, Failure)>,
}

/// An operation [`Device::try_submit`] refused, handed back with the reason.
#[derive(Clone, Copy, Debug)]
pub struct Rejected<'a> {
    /// The operation, unchanged.
    pub op: Op<'a>,
    /// Why it was refused ([`SubmitError::Full`] when only room was missing).
    pub error: SubmitError,
}

impl fmt::Display for Rejected<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "operation tagged {} refused: {}", self.op.tag, self.error)
    }
}

impl std::error::Error for Rejected<'_> {}

struct MemoryState {
    pool: MemoryPool<FRONTIER_CAPACITY>,
    /// Queues whose head alloca waits for quota.
    waiting: QueueWaiters,
    /// Submitters blocked until an allocation record is freed (see `records_freed`).
    record_waiters: usize,
}

/// Everything the queue processes reach; leaked while the device lives (see [`Device`]).
pub(crate) struct DeviceShared {
    queues: Box<[QueueShared]>,
    endpoints: Box<[Endpoint]>,
    semaphores: SemaphoreTable,
    host_calls: Box<[HostCall]>,
    backends: Box<[Box<dyn Backend>]>,
    memory: Mutex<MemoryState>,
    /// Signalled (under `memory`) when a decommit or an abandon frees an allocation record
    /// while a submitter waits for one.
    records_freed: Condvar,
    observer: Option<Arc<dyn Observer>>,
    executor: Arc<HostExecutor<'static>>,
    workers: usize,
    start: Instant,
}

impl DeviceShared {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Reports `event(now)` to the observer; the clock is read only when someone watches.
    fn observe(&self, queue: usize, tag: u64, event: impl FnOnce(u64) -> OpEvent) {
        if let Some(observer) = &self.observer {
            observer.op_event(queue, tag, event(self.now_ns()));
        }
    }

    /// Completes (or fails) `body`'s signals with `status`, then tells the observer the
    /// operation finished — at the time read *before* the signals: a dependent the signals
    /// release may start at once on another worker, and the operation's recorded end must
    /// not come after that start. The clock is read only when someone observes.
    #[inline]
    fn finish_and_observe(&self, queue: usize, body: &OpBody, status: OpStatus, worker: usize) {
        let ended_ns = self.observer.as_ref().map(|_| self.now_ns());
        self.finish_signals(body, status);
        if let (Some(observer), Some(at_ns)) = (&self.observer, ended_ns) {
            observer.op_event(queue, body.tag, OpEvent::Finished { worker, at_ns, status });
        }
    }

    fn lock_memory(&self) -> MutexGuard<'_, MemoryState> {
        // No caller's code (observer, host function, kernel) runs under this lock, and the
        // pool's own updates cannot stop half-way, so it stays whole.
        self.memory.lock()
    }

    /// What the device knows has completed: every queue's last retired epoch.
    fn completed_frontier(&self) -> Frontier<FRONTIER_CAPACITY> {
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

    /// The backend of queue `queue`'s driver (checked when the device was built).
    fn backend(&'static self, queue: &QueueShared) -> &'static dyn Backend {
        &*self.backends[queue.driver]
    }

    /// The queue whose operations carry `point`'s axis, if it is one of this device's.
    fn queue_of(&self, point: Point) -> Option<&QueueShared> {
        self.queues.iter().find(|queue| queue.submit_axis() == point.axis)
    }

    /// Runs a dealloca: the owner lets the block's memory go (before the quota counts it
    /// free, so native memory never runs ahead of the quota), then decommit, then wake queues
    /// waiting for quota and submitters waiting for a record.
    fn decommit(&'static self, allocation: AllocationId) -> OpStatus {
        let unbacking = self.lock_memory().pool.unbacking(allocation);
        if let Some(Unbacking { block, driver, kept }) = unbacking {
            // The owner accounts for its own memory: an error here changes nothing above it.
            let _ = self.backends[driver].memory(MemoryOp::Decommit { block, keep: kept });
        }
        let mut memory = self.lock_memory();
        let status = match memory.pool.decommit(allocation) {
            Ok(()) => OpStatus::Ok,
            Err(_) => {
                // Not committed: nothing was backed, so the owner has nothing to free.
                let _ = memory.pool.abandon(allocation);
                OpStatus::Failed(Failure::Aborted)
            }
        };
        memory.waiting.wake_all(DeviceContext { shared: self });
        self.record_freed(&memory);
        status
    }

    /// Gives up an allocation record whose operation will never run its dealloca; its owner
    /// frees what it backed.
    fn abandon(&self, allocation: AllocationId) {
        let mut memory = self.lock_memory();
        let unbacking = memory.pool.abandon(allocation);
        self.record_freed(&memory);
        drop(memory);
        if let Some(Unbacking { block, driver, .. }) = unbacking {
            let _ = self.backends[driver].memory(MemoryOp::Release { block });
        }
    }

    /// Tells submitters waiting for an allocation record that one may be free. Called with the
    /// memory lock held, which the waiters check under: no wake-up is lost.
    fn record_freed(&self, memory: &MemoryState) {
        if memory.record_waiters > 0 {
            self.records_freed.notify_all();
        }
    }

    /// Blocks until an allocation record is free or `deadline` passes (`false`).
    fn wait_for_record(&self, deadline: Option<Instant>) -> bool {
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

    /// Completes (or, on failure, fails) every signal of a finished operation.
    fn finish_signals(&self, body: &OpBody, status: OpStatus) {
        let signals = body.signals.iter().map(|&(id, value)| (&self.semaphores[id], value));
        causeway_core::queue::retire(signals, status.result());
    }
}

/// Collects a device's drivers, queues, semaphores, host functions and memory pool; [`build`]
/// starts it.
///
/// [`build`]: DeviceBuilder::build
pub struct DeviceBuilder {
    pool: PoolConfig,
    queues: Vec<(QueueConfig, Result<Endpoint, AxisError>)>,
    semaphores: Vec<SemaphoreConfig>,
    semaphore_pool: Option<(usize, SemaphoreConfig)>,
    host_calls: Vec<HostCall>,
    backends: Vec<Box<dyn Backend>>,
    buffers: usize,
    quota: u64,
    allocation_records: Option<usize>,
    observer: Option<Arc<dyn Observer>>,
}

impl DeviceBuilder {
    /// A device run by a pool built from `pool`, with nothing in it yet.
    pub fn new(pool: PoolConfig) -> DeviceBuilder {
        DeviceBuilder {
            pool,
            queues: Vec::new(),
            semaphores: Vec::new(),
            semaphore_pool: None,
            host_calls: Vec::new(),
            backends: Vec::new(),
            buffers: 0,
            quota: 0,
            allocation_records: None,
            observer: None,
        }
    }

    /// Adds a queue (its axis is allocated now, so its endpoint is known before `build`).
    pub fn queue(&mut self, config: QueueConfig) -> QueueId {
        let endpoint = allocate_axis(config.machine, Domain::Queue).map(|axis| Endpoint {
            machine: config.machine,
            process: 0,
            device_group: config.device_group,
            device: config.device,
            queue: axis.to_bits(),
        });
        self.queues.push((config, endpoint));
        QueueId(self.queues.len() - 1)
    }

    /// Where queue `id` will sit (for semaphore homes); `None` for an unknown queue or one
    /// that got no axis.
    pub fn endpoint(&self, id: QueueId) -> Option<Endpoint> {
        self.queues.get(id.0).and_then(|(_, endpoint)| endpoint.as_ref().ok().copied())
    }

    /// Adds a semaphore at `initial`, visible within `scope` of `home`, with
    /// [`DEFAULT_SEMAPHORE_HISTORY`] history slots.
    pub fn semaphore(&mut self, initial: u64, scope: Scope, home: Endpoint) -> SemaphoreId {
        self.semaphore_config(SemaphoreConfig::new(initial, scope, home))
    }

    /// Adds a semaphore as `config` describes (its history size included).
    pub fn semaphore_config(&mut self, config: SemaphoreConfig) -> SemaphoreId {
        self.semaphores.push(config);
        SemaphoreTable::declared(self.semaphores.len() - 1)
    }

    /// Gives the device `count` more semaphore slots, configured as `config` (scope, home,
    /// history; the initial value is given at creation), for
    /// [`Device::create_semaphore`] and [`Device::destroy_semaphore`] while it runs.
    pub fn semaphore_pool(&mut self, count: usize, config: SemaphoreConfig) {
        self.semaphore_pool = Some((count, config));
    }

    /// Registers a host function for [`Work::Host`].
    pub fn host_call(
        &mut self,
        call: impl Fn() -> Result<(), Failure> + Send + Sync + 'static,
    ) -> HostCallId {
        self.host_calls.push(Box::new(call));
        HostCallId(self.host_calls.len() as u32 - 1)
    }

    /// Registers a driver; queues name it in [`QueueConfig::driver`]. The first one
    /// registered is [`DriverId(0)`](DriverId), the default.
    pub fn driver(&mut self, backend: impl Backend) -> DriverId {
        self.backends.push(Box::new(backend));
        DriverId(self.backends.len() as u32 - 1)
    }

    /// Gives the device `buffers` stream-ordered buffer names sharing a pool of `quota`
    /// bytes.
    pub fn memory(&mut self, buffers: usize, quota: u64) {
        self.buffers = buffers;
        self.quota = quota;
    }

    /// How many allocas may be reserved and not yet decommitted at once (default: two per
    /// buffer name, enough for a buffer re-allocated while its previous dealloca is queued).
    /// When they are all held a submission waits for a dealloca to run
    /// ([`Resource::AllocationRecords`]).
    pub fn allocation_records(&mut self, records: usize) {
        self.allocation_records = Some(records);
    }

    /// Reports every operation's start and finish to `observer`.
    pub fn observer(&mut self, observer: Arc<dyn Observer>) {
        self.observer = Some(observer);
    }

    /// Starts the pool and the queue processes.
    pub fn build(mut self) -> Result<Device, DeviceError> {
        let mut queues = Vec::with_capacity(self.queues.len());
        let mut endpoints = Vec::with_capacity(self.queues.len());
        for (index, (config, endpoint)) in self.queues.iter().enumerate() {
            if config.capacity == 0 {
                return Err(DeviceError::ZeroCapacity(QueueId(index)));
            }
            let endpoint = (*endpoint).map_err(DeviceError::Axis)?;
            let axis = Axis::from_bits(endpoint.queue)
                .ok_or(DeviceError::Axis(AxisError::Exhausted { domain: Domain::Queue }))?;
            let driver = config.driver.0 as usize;
            let backend = self
                .backends
                .get_mut(driver)
                .ok_or(DeviceError::UnknownDriver(QueueId(index), config.driver))?;
            backend
                .open_queue(QueueId(index), config)
                .map_err(|error| DeviceError::Driver(QueueId(index), error))?;
            let capabilities = Capabilities {
                wait_before_signal: config.wait_before_signal
                    && backend.capabilities().wait_before_signal,
            };
            queues.push(QueueShared::new(
                index,
                driver,
                backend.capabilities().native_waits,
                QueueClock::new(axis, endpoint, capabilities),
                config.capacity,
                self.queues.len(),
            ));
            endpoints.push(endpoint);
        }
        let workers = self.pool.workers;
        // Before any queue process runs: the rings' free-slot handshake uses the asymmetric
        // barrier (see `queue`), which is a fence on both sides until this has registered it.
        causeway_runtime::barrier::prepare();
        let pool = CpuPool::start(self.pool).map_err(DeviceError::Pool)?;
        let semaphores =
            SemaphoreTable::new(&self.semaphores, self.semaphore_pool, self.queues.len()).map_err(
                |(index, error)| DeviceError::History(SemaphoreTable::declared(index), error),
            )?;
        let shared = Box::new(DeviceShared {
            queues: queues.into_boxed_slice(),
            endpoints: endpoints.into_boxed_slice(),
            semaphores,
            host_calls: self.host_calls.into_boxed_slice(),
            backends: self.backends.into_boxed_slice(),
            memory: Mutex::new(MemoryState {
                pool: MemoryPool::new(
                    self.quota,
                    self.buffers,
                    self.allocation_records.unwrap_or(self.buffers.saturating_mul(2)),
                ),
                waiting: QueueWaiters::new(self.queues.len()),
                record_waiters: 0,
            }),
            records_freed: Condvar::new(),
            observer: self.observer,
            executor: pool.shared_executor(),
            workers,
            start: Instant::now(),
        });
        let owned = Box::into_raw(shared);
        // SAFETY: `owned` came from `Box::into_raw` just above and is freed only in
        // `Device::drop`, after the pool's workers (the only other holders of references
        // derived from it) have been joined; nothing moves it in between.
        let shared: &'static DeviceShared = unsafe { &*owned };
        let device = Device { pool: Some(pool), shared, owned };
        for backend in shared.backends.iter() {
            backend.start(DeviceContext { shared });
        }
        for queue in shared.queues.iter() {
            let process = queue.link(shared);
            // The queue process is fresh and the pool has just started: submission cannot be
            // refused.
            shared.executor.submit(process).expect("a fresh queue process is accepted");
        }
        Ok(device)
    }
}

impl fmt::Debug for DeviceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuilder")
            .field("queues", &self.queues)
            .field("semaphores", &self.semaphores.len())
            .field("host_calls", &self.host_calls.len())
            .field("drivers", &self.backends.iter().map(|b| b.name()).collect::<Vec<_>>())
            .field("buffers", &self.buffers)
            .field("quota", &self.quota)
            .finish_non_exhaustive()
    }
}

/// A running device. See the [crate documentation](self).
///
/// Its state is allocated once, leaked while the device lives so the queue processes can be
/// `'static`, and reclaimed in `Drop` after the workers are joined.
pub struct Device {
    pool: Option<CpuPool>,
    shared: &'static DeviceShared,
    owned: *mut DeviceShared,
}

// SAFETY: `owned` is only the deallocation handle of `shared`, used once in `drop` (which has
// exclusive access); everything reachable through `shared` is `Sync`.
unsafe impl Send for Device {}
// SAFETY: as above; shared access goes through `&DeviceShared`, which is `Sync`.
unsafe impl Sync for Device {}

impl Device {
    /// Starts describing a device run by a pool built from `pool`.
    pub fn builder(pool: PoolConfig) -> DeviceBuilder {
        DeviceBuilder::new(pool)
    }

    /// The device's semaphore `id`.
    pub fn semaphore(&self, id: SemaphoreId) -> Option<&DeviceSemaphore> {
        self.shared.semaphores.get(id)
    }

    /// Where queue `id` sits (for scope decisions and its axis).
    pub fn endpoint(&self, id: QueueId) -> Option<Endpoint> {
        self.shared.endpoints.get(id.0).copied()
    }

    /// Queue `id`'s axis.
    pub fn axis(&self, id: QueueId) -> Option<Axis> {
        self.shared.queues.get(id.0).map(QueueShared::submit_axis)
    }

    /// Queue `id`'s wait-resolution totals over the operations submitted to it.
    pub fn resolution_counts(&self, id: QueueId) -> Option<ResolutionCounts> {
        self.shared.queues.get(id.0).map(|queue| queue.lock_submit().counts)
    }

    /// Operations submitted to queue `id` that have not finished.
    pub fn in_flight(&self, id: QueueId) -> Option<u64> {
        self.shared.queues.get(id.0).map(QueueShared::in_flight)
    }

    /// Stream-ordered memory totals.
    pub fn memory_stats(&self) -> MemoryStats {
        self.shared.lock_memory().pool.stats()
    }

    /// Bytes committed right now.
    pub fn committed_bytes(&self) -> u64 {
        self.shared.lock_memory().pool.committed()
    }

    /// Nanoseconds since the device started (the clock of [`OpEvent`]s).
    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }

    /// The pool's executor, for running other processes beside the queues.
    pub fn executor(&self) -> &HostExecutor<'static> {
        &self.shared.executor
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
        hand_off::collect(self.shared, |collector| {
            let result = body();
            (result, collector.take())
        })
    }

    /// Submits `op` to queue `queue`, waiting for room when a bounded resource it needs is
    /// full (the queue's ring, a signalled semaphore's history, allocation records): room frees
    /// as earlier work completes, so a long pipeline submitted ahead of execution simply runs
    /// at the device's pace. Never refuses work for lack of room; see [`try_submit`] for the
    /// form that does, and [`submit_timeout`] for one that gives up.
    ///
    /// Waiting for room can only end if the work holding the room can finish: a submitter must
    /// not wait for room that only its own later submissions would free. Size the resources
    /// from the workload ([`QueueConfig::capacity`], [`SemaphoreConfig::history`],
    /// [`DeviceBuilder::allocation_records`]) — the scenario runner computes them.
    ///
    /// [`try_submit`]: Self::try_submit
    /// [`submit_timeout`]: Self::submit_timeout
    pub fn submit(&self, queue: QueueId, op: &Op<'_>) -> Result<Receipt, SubmitError> {
        self.submit_until(queue, op, None)
    }

    /// [`submit`](Self::submit), giving up with [`SubmitError::TimedOut`] when a resource is
    /// still full after `timeout` (nothing is changed then).
    pub fn submit_timeout(
        &self,
        queue: QueueId,
        op: &Op<'_>,
        timeout: Duration,
    ) -> Result<Receipt, SubmitError> {
        // A timeout too large to represent as an instant means no deadline.
        self.submit_until(queue, op, Instant::now().checked_add(timeout))
    }

    /// Submits `op` without waiting: a full resource refuses it with [`SubmitError::Full`].
    /// Every refusal hands the operation back, unchanged, beside the reason.
    pub fn try_submit<'a>(&self, queue: QueueId, op: Op<'a>) -> Result<Receipt, Rejected<'a>> {
        self.submit_now(queue, &op).map_err(|error| Rejected { op, error })
    }

    fn submit_until(
        &self,
        queue: QueueId,
        op: &Op<'_>,
        deadline: Option<Instant>,
    ) -> Result<Receipt, SubmitError> {
        loop {
            match self.submit_now(queue, op) {
                Err(SubmitError::Full(resource)) => {
                    if !self.wait_for_room(queue, op, resource, deadline) {
                        return Err(SubmitError::TimedOut(resource));
                    }
                }
                done => return done,
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
        let shared = self.shared;
        match resource {
            Resource::QueueSlots { .. } => match shared.queues.get(queue.0) {
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

    /// Cancels what depended on rejected speculation: every operation submitted so far whose
    /// frontier holds `rejection.axis` beyond `rejection.accepted` — or is tainted and so might
    /// ([`Dependence::Conservative`](causeway_core::speculation::Dependence::Conservative)) —
    /// and has not started is cancelled: it will not run. Its signals are marked cancelled at
    /// once — only the values they would have reached, so accepted work may still signal the
    /// same semaphores — so later submissions waiting on those values fail at submission. Its
    /// queue retires it in order, once the operations its waits imported have ended (held
    /// waits that imported nothing are released; on a native queue its epoch is moved past on
    /// the device, so nothing waits natively on work that will never be issued), and that
    /// retirement ends its signals as [`Failure::Cancelled`]: waiters already armed on them,
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
        for queue in self.shared.queues.iter() {
            queue.claim_speculative(rejection, &mut report);
        }
        for queue in self.shared.queues.iter() {
            if queue.mark_cancelled(self.shared) {
                queue.wake();
            }
        }
        report
    }

    /// Creates a semaphore at `initial` from the device's pool
    /// ([`DeviceBuilder::semaphore_pool`]), without waiting: [`SemaphoreError::Full`] when every
    /// pooled slot is live or still used by operations in flight.
    pub fn create_semaphore(&self, initial: u64) -> Result<SemaphoreId, SemaphoreError> {
        self.shared.semaphores.create(initial, &self.shared.queues)
    }

    /// [`create_semaphore`](Self::create_semaphore), waiting up to `timeout` for a destroyed
    /// semaphore's slot to become free (its earlier operations to retire).
    pub fn create_semaphore_timeout(
        &self,
        initial: u64,
        timeout: Duration,
    ) -> Result<SemaphoreId, SemaphoreError> {
        let shared = self.shared;
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
        self.shared.semaphores.destroy(id, &self.shared.queues)
    }

    /// One submission attempt; see the [module documentation](self).
    fn submit_now(&self, queue: QueueId, op: &Op<'_>) -> Result<Receipt, SubmitError> {
        let shared = self.shared;
        let queue = shared.queues.get(queue.0).ok_or(SubmitError::UnknownQueue(queue))?;
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
        let mut submission = side.clock.begin();
        let mut waits = FixedVec::new();
        let mut origins = [None; MAX_WAITS];
        for (wait, &(id, value)) in op.waits.iter().enumerate() {
            let semaphore = &shared.semaphores[id];
            let resolved = if queue.native {
                // A device wait stays one only on an operation of a queue of the same driver,
                // which the driver can wait on natively (see `BackendCapabilities`), and only
                // for a kernel: the layer's own kinds never reach the driver, so the host holds
                // them until their values are reached.
                let native = |origin: Point| {
                    if !op.work.is_kernel() {
                        return false;
                    }
                    let origin_queue = shared.queue_of(origin);
                    origins[wait] = origin_queue
                        .filter(|other| other.driver == queue.driver)
                        .map(|other| Origin { queue: QueueId(other.index), epoch: origin.epoch });
                    origins[wait].is_some()
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
        let submitted = match submission.commit_signalling(signals) {
            Ok(submitted) => submitted,
            Err(SignalRefused { index: signal, error }) => {
                self.unreserve_memory(op.work, allocation);
                return Err(match error {
                    SignalError::HistoryFull { capacity } => {
                        SubmitError::Full(Resource::History { signal, capacity })
                    }
                    error => SubmitError::Signal { signal, error },
                });
            }
        };
        self.place_memory(op.work, allocation, &submitted);
        let failure = submitted.failure;
        if failure.is_some() {
            // A doomed operation imported nothing: it waits for no origin.
            origins = [None; MAX_WAITS];
        }
        let slot = queue.slot(index);
        // SAFETY: `free_slot` returned `index` with the submit lock held, so the slot is
        // outside [head, tail) and, by the ring protocol (queue.rs, invariant 1), only this
        // thread touches its body until `publish`.
        let body = unsafe { &mut *slot.body.get() };
        *body = OpBody {
            tag: op.tag,
            point: submitted.point,
            work: op.work,
            allocation,
            waits: op.waits.iter().copied().collect(),
            resolutions: [None; MAX_WAITS],
            origins,
            armed: [false; MAX_WAITS],
            signals: op.signals.iter().copied().collect(),
            issued: false,
            issued_status: None,
            issued_ns: 0,
        };
        let (frontier, signals) = queue.lineage(index);
        // SAFETY: as for the body: the submit lock is held and the slot is unpublished.
        unsafe {
            frontier.write(submitted.frontier);
            signals.write(op.signals.iter().copied().collect());
        }
        queue.claim(index).reset();
        // The submission hold keeps the gate shut while timepoints are armed.
        slot.gate.count.hold(failure);
        if failure.is_none() {
            for (wait, outcome) in waits.iter().enumerate() {
                let WaitOutcome::Resolved(resolution) = outcome else { continue };
                body.resolutions[wait] = Some(resolution.resolution);
                // A native device wait is ordered by the driver, not by the host.
                let on_host = match resolution.resolution {
                    Resolution::DeviceWait => body.origins[wait].is_none(),
                    Resolution::Held => true,
                    _ => false,
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
        slot.gate.release();
        queue.wake();
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
        match op.work {
            Work::Host(call) if call.0 as usize >= self.shared.host_calls.len() => {
                Err(SubmitError::UnknownHostCall(call))
            }
            Work::Barrier | Work::Host(_) | Work::Alloca { .. } | Work::Dealloca(_) => Ok(()),
            kernel => self.shared.backend(queue).check(QueueId(queue.index), kernel),
        }
    }

    /// Reserves an alloca's record for a queue of `driver`, or releases a dealloca's buffer.
    fn reserve_memory(
        &self,
        work: Work,
        driver: usize,
    ) -> Result<Option<AllocationId>, SubmitError> {
        let mut memory = self.shared.lock_memory();
        match work {
            Work::Alloca { buffer, bytes } => match memory.pool.reserve(buffer.0, bytes, driver) {
                Ok(Some(id)) => Ok(Some(id)),
                Ok(None) => Err(SubmitError::Full(Resource::AllocationRecords {
                    capacity: memory.pool.records(),
                })),
                Err(error) => Err(SubmitError::Memory(error)),
            },
            Work::Dealloca(buffer) => {
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
        let completed = self.shared.completed_frontier();
        let mut memory = self.shared.lock_memory();
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
        let mut memory = self.shared.lock_memory();
        match work {
            Work::Alloca { buffer, .. } => {
                memory.pool.unreserve(buffer.0, allocation);
                self.shared.record_freed(&memory);
            }
            Work::Dealloca(buffer) => memory.pool.unrelease(buffer.0, allocation),
            _ => {}
        }
    }

    /// Arms the slot's timepoint `wait`; true when it was linked (the gate counts it).
    fn arm(&self, slot: &op::OpSlot, wait: usize, (id, value): (SemaphoreId, u64)) -> bool {
        let semaphore = &self.shared.semaphores[id];
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

impl Device {
    /// Shuts the device down within a bound: stops the pool, waits up to `grace` for workers to
    /// finish what they are running, then cancels every operation that has not run (failing
    /// its signals as cancelled, so host waiters on other threads wake) and fails every
    /// operation still running — a kernel or host function that never returns — as aborted.
    /// Workers stuck in such work are abandoned, not joined: their threads are detached, and
    /// the device's state, which they can still reach, is kept alive (leaked) for them.
    /// Each driver then stops its own work ([`Backend::stop`]) within the same bound.
    /// Returns at most about `grace` plus [`BOOKKEEPING_GRACE`] after it is called.
    pub fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        self.stop(grace)
    }

    fn stop(&mut self, grace: Duration) -> ShutdownReport {
        let Some(pool) = self.pool.take() else { return ShutdownReport::default() };
        let pool = pool.shutdown_within(grace);
        let shared = self.shared;
        let abandoned = !pool.abandoned.is_empty();
        let deadline = Instant::now() + BOOKKEEPING_GRACE;
        let mut report = ShutdownReport {
            abandoned_workers: pool.abandoned,
            panicked_workers: pool.panicked,
            ..ShutdownReport::default()
        };
        for (index, queue) in shared.queues.iter().enumerate() {
            match queue.tear_down(shared, abandoned, deadline) {
                Teardown::Done { cancelled, stuck } => {
                    report.cancelled += cancelled;
                    report.stuck.extend(stuck.into_iter().map(|running| StuckOp {
                        queue: QueueId(index),
                        tag: running.tag,
                        worker: (running.worker != usize::MAX).then_some(running.worker),
                        running: Duration::from_nanos(
                            clock::now_ns().saturating_sub(running.since_ns),
                        ),
                    }));
                }
                Teardown::Busy => report.busy_queues.push(QueueId(index)),
            }
        }
        // Every backend, even when the state will be kept anyway: each ends what it runs.
        let backends_idle = shared.backends.iter().fold(true, |idle, backend| {
            let stopped = backend.stop(deadline);
            if !stopped {
                report.busy_drivers.push(backend.name());
            }
            idle && stopped
        });
        report.leaked = abandoned || !report.busy_queues.is_empty() || !backends_idle;
        if !report.leaked {
            // SAFETY: `owned` came from `Box::into_raw` in `build` and is freed only here, once
            // (the pool was taken above, so a later `stop` returns early): every worker that
            // held references into it is joined, every backend has stopped everything of its
            // own that could reach it, every timepoint armed on its semaphores has been
            // cancelled by `tear_down`, and `&mut self` rules out host threads still borrowing
            // it. With an abandoned worker or a backend still busy it is never freed.
            drop(unsafe { Box::from_raw(self.owned) });
        }
        report
    }
}

/// How often a semaphore creation blocked only by a host thread's wait on the oldest destroyed
/// semaphore looks again.
const HOST_WAITER_POLL: Duration = Duration::from_millis(1);

/// How long [`Device::shutdown`] waits, after the grace period, for a queue's bookkeeping
/// between two operations (not user work) to finish before leaving that queue as it is.
pub const BOOKKEEPING_GRACE: Duration = Duration::from_secs(1);
/// The grace period of dropping a device ([`Device::shutdown`] with this bound).
pub const DROP_GRACE: Duration = Duration::from_secs(10);

/// What [`Device::shutdown`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Operations that had not run, cancelled (their signals failed as cancelled).
    pub cancelled: usize,
    /// Operations still running at the end of the grace period, failed as aborted and
    /// abandoned on their workers.
    pub stuck: Vec<StuckOp>,
    /// Workers still inside work when the grace period ended: detached, never joined.
    pub abandoned_workers: Vec<usize>,
    /// Workers that exited by panicking.
    pub panicked_workers: usize,
    /// Queues whose bookkeeping did not finish within [`BOOKKEEPING_GRACE`] (an observer or a
    /// waker that blocks): left as they were, their operations not cancelled; when the
    /// bookkeeping goes on, it starts at most one more operation's work and then stops.
    pub busy_queues: Vec<QueueId>,
    /// Drivers ([`Backend::name`]) whose own work had not stopped within
    /// [`BOOKKEEPING_GRACE`] ([`Backend::stop`]).
    pub busy_drivers: Vec<&'static str>,
    /// Whether the device's state was kept alive for abandoned workers instead of freed.
    pub leaked: bool,
}

/// An operation abandoned while it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StuckOp {
    /// Its queue.
    pub queue: QueueId,
    /// Its tag ([`Op::tag`]).
    pub tag: u64,
    /// The worker running its work; `None` for a command buffer (its kernels run on every
    /// worker).
    pub worker: Option<usize>,
    /// How long it had been running when the device gave up on it.
    pub running: Duration,
}

impl Drop for Device {
    /// Shuts down within [`DROP_GRACE`] (see [`Device::shutdown`]); call `shutdown` for the
    /// report or another bound.
    fn drop(&mut self) {
        self.stop(DROP_GRACE);
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("queues", &self.shared.queues)
            .field("semaphores", &self.shared.semaphores.len())
            .finish_non_exhaustive()
    }
}

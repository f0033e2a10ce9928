//! The driver seam: what a driver implements, and what the device layer does for it.
//!
//! Everything about an operation that is not native to a device API lives in this crate:
//! resolving its waits against the queue clock, committing its epoch and frontier, recording its
//! signals as pending, holding it in the queue's in-order ring until its wait gate opens,
//! stream-ordered memory, host functions, failure and cancellation, observer events and
//! teardown. A driver supplies a [`Backend`], which only
//!
//! - says what its queues can do ([`Backend::capabilities`]) and opens them
//!   ([`Backend::open_queue`]);
//! - refuses work it cannot run, at submission ([`Backend::check`]);
//! - **issues** an operation whose waits the layer has resolved ([`Backend::issue`]), handed its
//!   device and held waits only ([`Issue::waits`]): runs it on the calling worker
//!   ([`Issue::run_here`]), or hands it to the device and reports it [`Issued::Pending`];
//! - with [native waits](BackendCapabilities::native_waits), takes operations *ahead* of
//!   completion — several of a queue at once — and waits natively on the operation each device
//!   wait names ([`NativeWait::origin`]);
//! - reports when pending work is **complete** ([`Backend::poll`], after waking the queue with
//!   [`DeviceContext::wake`]); the layer then retires it through the one retire path
//!   (`causeway_core::queue::retire`), completing or failing its signals;
//! - backs stream-ordered memory natively where its hardware needs it ([`Backend::memory`]:
//!   the layer says which block to back, let go or free; the CPU driver's default does
//!   nothing);
//! - says whether issued work may still be running when the device shuts down
//!   ([`Backend::is_running`]), so the layer fails it as aborted instead of waiting for it,
//!   and ends its own work within the shutdown's bound ([`Backend::stop`]).
//!
//! ```text
//!          gate open                 issue                       poll: Some(status)
//!  queued ───────────► head of ring ───────► Finished(status) ──────────────────────► retired
//!                           │  ▲             Pending ──(device runs; wake)──► poll ──┘
//!                           │  └──── Busy (device resource taken; wake when free)
//!                           └──────► Abandoned (the device took the queue over at shutdown)
//! ```
//!
//! The layer's own work kinds never reach a backend: [`Work::Barrier`], [`Work::Host`] (host
//! functions run on the worker, in queue order, on any driver's queue) and the stream-ordered
//! [`Work::Alloca`] / [`Work::Dealloca`]. Kernels — [`Work::Spin`], [`Work::Sleep`],
//! [`Work::Execute`] — are the backend's. Of memory operations a backend sees only the native
//! half ([`MemoryOp`]): the quota, the death frontiers and the choice of block stay here.

use std::fmt;
use std::time::Instant;

use causeway_core::executor::Process;
use causeway_core::queue::Resolution;
use causeway_core::reuse::BlockId;
use causeway_core::semaphore::Failure;
use heapless::Vec as FixedVec;

use crate::config::QueueConfig;
use crate::device::DeviceShared;
use crate::error::DriverError;
use crate::error::SubmitError;
use crate::ids::{QueueId, SemaphoreId};
use crate::limits::MAX_WAITS;
use crate::op::{OpEvent, OpStatus, Work};
use crate::queue::QueueShared;

/// What a backend's queues can do natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackendCapabilities {
    /// Whether a queue may wait for a value whose signal has not been submitted yet
    /// (timeline semaphores). Without it, such waits are **held** by the layer until the
    /// value is reached, as for binary-event APIs. A queue waits before signal only when both
    /// its driver and its [`QueueConfig::wait_before_signal`] allow it.
    pub wait_before_signal: bool,
    /// Whether the driver orders device waits itself, natively, as a wait on the signalling
    /// operation's progress on its own queue (a timeline per queue). The layer then issues
    /// operations *ahead*: an operation goes to the driver as soon as its held waits are
    /// reached and the operation each device wait names ([`NativeWait::origin`]) has been
    /// issued to the driver or retired, without waiting for it to complete; it retires them
    /// in order as [`Backend::poll`] reports them done. Only waits on operations of queues of
    /// the same driver can be native: any other wait is held (see
    /// `causeway_core::queue::Submission::wait_on_origin`). Such a driver runs one queue's
    /// operations in order on the device (each waits for its predecessor natively), and
    /// advances a queue's native progress for operations the layer retired on the host
    /// ([`Backend::completed_on_host`]).
    pub native_waits: bool,
}

impl BackendCapabilities {
    /// Capabilities with wait-before-signal as given, device waits ordered by the layer.
    pub const fn new(wait_before_signal: bool) -> BackendCapabilities {
        BackendCapabilities { wait_before_signal, native_waits: false }
    }

    /// These capabilities, with device waits ordered natively by the driver.
    pub const fn with_native_waits(self) -> BackendCapabilities {
        BackendCapabilities { native_waits: true, ..self }
    }
}

/// An operation of a queue: the queue and the operation's epoch on it (1 for its first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The queue.
    pub queue: QueueId,
    /// The operation's epoch on it.
    pub epoch: u64,
}

/// A wait of an issued operation that needs ordering on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeWait {
    /// The semaphore waited on.
    pub semaphore: SemaphoreId,
    /// The value waited for.
    pub value: u64,
    /// [`Resolution::DeviceWait`] or [`Resolution::Held`].
    pub resolution: Resolution,
    /// For a device wait on a queue with [native waits](BackendCapabilities::native_waits):
    /// the operation that signals the value, on a queue of the same driver, already issued to
    /// the driver or retired. The driver waits for that operation natively.
    pub origin: Option<Origin>,
}

/// The native half of a stream-ordered memory operation, asked of the driver that owns the
/// block ([`Backend::memory`]). A block belongs to the driver of the queue its alloca was
/// submitted to; the layer decides which block an alloca gets (fresh, or a dead one whose death
/// frontier the alloca's knowledge dominates, see `causeway_core::reuse`) and tells the owner
/// only what to do with native memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryOp {
    /// An alloca runs: back `block` with at least `bytes` bytes. When the driver still keeps
    /// `block`'s memory from a [`Decommit`](MemoryOp::Decommit), that memory is the block's
    /// again (the layer has proven every earlier use over, so it is reused with no fence);
    /// otherwise the block is fresh to this driver and needs new memory.
    Commit {
        /// The block.
        block: BlockId,
        /// Bytes the alloca asked for.
        bytes: u64,
    },
    /// A dealloca runs: every use of `block` is over. With `keep`, the layer may hand the
    /// block to a later alloca (it is in the reuse table): keep the memory for that
    /// [`Commit`](MemoryOp::Commit) or a [`Release`](MemoryOp::Release). Without, free it.
    Decommit {
        /// The block.
        block: BlockId,
        /// Whether to keep its memory for reuse.
        keep: bool,
    },
    /// Free whatever is kept of `block`: the reuse table gave it to an alloca of another
    /// driver, or its record was abandoned at shutdown.
    Release {
        /// The block.
        block: BlockId,
    },
}

/// What issuing an operation came to.
#[derive(Debug)]
#[must_use]
pub enum Issued {
    /// The work ran to its end (on the calling worker, or synchronously on the device).
    Finished(OpStatus),
    /// The device runs it; the backend wakes the queue ([`DeviceContext::wake`]) when it ends
    /// and answers [`Backend::poll`] with its status then. The layer polls it once right away,
    /// and again at every wake-up: a driver may arm its completion notice from a poll that
    /// finds the work running.
    Pending,
    /// A device resource it needs is taken (another queue runs the same command buffer); the
    /// backend wakes the queue when it frees, and the layer issues the operation again.
    Busy,
    /// The device took the queue over at shutdown while the work ran ([`Issue::run_here`]
    /// returns it): the layer touches nothing more.
    Abandoned(TakenOver),
}

/// Proof that a queue was taken over while [`Issue::run_here`] ran its work; only the layer
/// makes one.
#[derive(Debug)]
pub struct TakenOver(());

/// The operation a backend is asked to issue, and what it may do with the calling worker.
pub struct Issue<'a> {
    pub(crate) queue: &'a QueueShared,
    pub(crate) device: &'static DeviceShared,
    pub(crate) tag: u64,
    pub(crate) work: Work,
    pub(crate) waits: FixedVec<NativeWait, MAX_WAITS>,
    pub(crate) elided_waits: usize,
    pub(crate) epoch: u64,
    pub(crate) worker: usize,
    pub(crate) started: bool,
}

impl Issue<'_> {
    /// The queue it was submitted to.
    pub fn queue(&self) -> QueueId {
        QueueId(self.queue.index)
    }

    /// Its work (a kernel kind: [`Work::Spin`], [`Work::Sleep`] or [`Work::Execute`]).
    pub fn work(&self) -> Work {
        self.work
    }

    /// Its waits that need ordering on the device: those resolved as
    /// [`Resolution::DeviceWait`] or [`Resolution::Held`], in submission order. Elided and
    /// satisfied waits never reach a driver. Without [native
    /// waits](BackendCapabilities::native_waits) the layer has seen every one of them reached
    /// before issuing the operation (the CPU driver needs nothing more). With them, held waits
    /// are reached, and each device wait names its [origin](NativeWait::origin), which the
    /// driver turns into a native wait (a timeline wait in the submission).
    pub fn waits(&self) -> &[NativeWait] {
        &self.waits
    }

    /// How many of its waits the layer resolved elided or satisfied: they never reach a driver
    /// ([`waits`](Self::waits) leaves them out), and a driver that counts what it did not emit
    /// natively counts them from here.
    pub fn elided_waits(&self) -> usize {
        self.elided_waits
    }

    /// Its epoch on its queue (1 for the queue's first operation): what a driver with native
    /// waits signals on the queue's own timeline when it completes.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Its tag ([`Op::tag`](crate::Op::tag)).
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// The worker issuing it.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Runs `work` on this worker as the operation's body: reports it started, and lets a
    /// shutdown abandon it if it never returns (the worker is then detached, the operation
    /// failed as aborted). `work` must not panic out: contain user code
    /// ([`causeway_runtime::contain`]).
    pub fn run_here(&mut self, work: impl FnOnce() -> OpStatus) -> Issued {
        self.start();
        match self.queue.run_user_work(self.tag, self.worker, work) {
            Some(status) => Issued::Finished(status),
            None => Issued::Abandoned(TakenOver(())),
        }
    }

    /// Reports the operation started (once; [`run_here`](Self::run_here) does it itself).
    pub(crate) fn start(&mut self) {
        if !std::mem::replace(&mut self.started, true) {
            let worker = self.worker;
            self.device
                .observe(self.queue.index, self.tag, |at_ns| OpEvent::Started { worker, at_ns });
        }
    }
}

impl fmt::Debug for Issue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Issue")
            .field("queue", &self.queue.index)
            .field("tag", &self.tag)
            .field("work", &self.work)
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

/// What a started backend may reach of its device: its queues' wake-ups, the executor (to run
/// its own processes) and the device clock. Handed to [`Backend::start`] once the device has its final address.
#[derive(Clone, Copy)]
pub struct DeviceContext {
    pub(crate) shared: &'static DeviceShared,
}

impl DeviceContext {
    /// Wakes queue `queue`'s process: its head operation is looked at again (pending work
    /// polled, busy work issued again). Cheap, never blocks, never calls back into the backend;
    /// an unknown queue is ignored.
    pub fn wake(&self, queue: QueueId) {
        if let Some(queue) = self.shared.queues.get(queue.0) {
            queue.wake();
        }
    }

    /// Queues of the device, every driver's.
    pub fn queues(&self) -> usize {
        self.shared.queues.len()
    }

    /// Worker threads of the device's pool.
    pub fn workers(&self) -> usize {
        self.shared.workers
    }

    /// Submits `process` to the executor; `false` when it refuses (the pool is shutting down).
    pub fn submit(&self, process: &'static Process<'static>) -> bool {
        self.shared.executor.submit(process).is_ok()
    }

    /// Nanoseconds since the device started (the clock of observer events).
    pub fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }
}

impl fmt::Debug for DeviceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceContext").field("queues", &self.queues()).finish_non_exhaustive()
    }
}

/// Queues waiting for a backend resource (a command buffer another queue runs), one flag per
/// queue of the device. Keep it under the resource's own lock: a queue that finds the resource
/// taken registers before anyone can release it, and the release wakes it — no lost wake-up.
#[derive(Debug)]
pub struct QueueWaiters {
    waiting: Box<[bool]>,
}

impl QueueWaiters {
    /// Room for `queues` queues (every queue of the device: [`DeviceContext::queues`]);
    /// allocates nothing afterwards.
    pub fn new(queues: usize) -> QueueWaiters {
        QueueWaiters { waiting: vec![false; queues].into_boxed_slice() }
    }

    /// Queue `queue` waits for the resource.
    pub fn register(&mut self, queue: QueueId) {
        if let Some(waiting) = self.waiting.get_mut(queue.0) {
            *waiting = true;
        }
    }

    /// Wakes every registered queue and forgets them. Safe under the resource's lock: a wake
    /// only queues the queue's process, it never calls back into the backend.
    pub fn wake_all(&mut self, device: DeviceContext) {
        for (queue, waiting) in self.waiting.iter_mut().enumerate() {
            if std::mem::take(waiting) {
                device.wake(QueueId(queue));
            }
        }
    }
}

/// A driver: the native half of a device's queues. See the [module documentation](self).
///
/// The layer calls a backend from the submitting thread ([`check`](Self::check)) and from the
/// queue's process on a pool worker (the rest); one queue's calls never overlap, different
/// queues' may. Nothing a backend does may block on other queues' progress.
pub trait Backend: Send + Sync + 'static {
    /// The driver's name, for reports and errors (`"cpu"`, `"vulkan"`).
    fn name(&self) -> &'static str;

    /// What its queues can do.
    fn capabilities(&self) -> BackendCapabilities;

    /// Creates whatever queue `queue` needs natively, while the device is built (before
    /// [`start`](Self::start)).
    fn open_queue(&mut self, queue: QueueId, config: &QueueConfig) -> Result<(), DriverError>;

    /// Refuses, at submission, work this driver cannot run (an unknown command buffer, a kind
    /// it has no kernel for) on queue `queue`. Called only with kernel kinds.
    fn check(&self, queue: QueueId, work: Work) -> Result<(), SubmitError>;

    /// The device is built and has its final address; its processes may be created now.
    fn start(&'static self, device: DeviceContext);

    /// Issues the operation at the head of a queue, whose waits have all resolved.
    fn issue(&'static self, issue: &mut Issue<'_>) -> Issued;

    /// The status of the queue's oldest pending operation (epoch `epoch`, `work`, answered
    /// [`Issued::Pending`]) once it ended, releasing whatever it held; `None` while it runs.
    /// With [native waits](BackendCapabilities::native_waits) several operations of a queue
    /// may be pending; they are polled in issue order.
    fn poll(&'static self, queue: QueueId, epoch: u64, work: Work) -> Option<OpStatus>;

    /// For a driver with [native waits](BackendCapabilities::native_waits): operation `epoch`
    /// of `queue` retired without reaching the driver (a layer kind — barrier, host function,
    /// memory — or an operation failed by its waits), so whatever stands for the queue's
    /// progress natively (its timeline) must reach `epoch` now. Every earlier operation of the
    /// queue has retired and no later one has been issued. Never called for other drivers.
    fn completed_on_host(&'static self, queue: QueueId, epoch: u64) {
        let _ = (queue, epoch);
    }

    /// The native half of stream-ordered memory, for a block this driver owns (see
    /// [`MemoryOp`]). Called on a pool worker while an alloca or dealloca runs — on a queue
    /// of any driver: the dealloca's queue may belong to another — or at shutdown for an
    /// abandoned record; never under a lock of the layer, never for two operations on one
    /// block at once. An `Err` from a [`Commit`](MemoryOp::Commit) fails the alloca (and what
    /// it signals) with that failure and gives its bytes back to the quota; its dealloca then
    /// has nothing to give back. Errors of the other operations are ignored (the memory is
    /// the driver's to account for). The default backs nothing: memory the layer only
    /// accounts for, as on the CPU driver, whose kernels own their buffers.
    fn memory(&self, op: MemoryOp) -> Result<(), Failure> {
        let _ = op;
        Ok(())
    }

    /// Whether the queue's pending operation may still be running, at shutdown (the device
    /// then fails it as aborted instead of waiting for it). `workers_abandoned` says whether
    /// the pool left some worker inside work; when it is false every worker was joined, so
    /// work that runs on the workers has stopped (work on a device may not have).
    fn is_running(&self, queue: QueueId, work: Work, workers_abandoned: bool) -> bool;

    /// The device is shutting down: its pool has stopped and every queue was torn down. End
    /// whatever the backend runs of its own (threads, processes, native work) by `deadline`
    /// and say whether nothing of it can reach the device any more (`true`); with `false` the
    /// device keeps its state alive for it instead of freeing it, and reports the driver busy.
    fn stop(&self, deadline: Instant) -> bool;
}

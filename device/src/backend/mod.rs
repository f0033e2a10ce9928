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
//! - keeps each queue's native state in a queue object of its own type ([`Backend::Queue`]),
//!   which the layer stores beside the queue and hands back to every call about it;
//! - refuses, at submission, kernels it cannot run for reasons of its own ([`Backend::check`];
//!   the kinds it has no kernel for and unknown command buffers the layer refuses itself);
//! - **issues** an operation whose waits the layer has resolved ([`Backend::issue`]), handed its
//!   device and held waits only ([`Issue::waits`]): runs it on the calling worker
//!   ([`Issue::run_here`]), or hands it to the device and reports it [`Issued::Pending`];
//! - with [native waits](BackendCapabilities::native_waits), takes operations *ahead* of
//!   completion — several of a queue at once — and waits natively on the operation each device
//!   wait names ([`NativeWait::origin`]);
//! - with [host-written waits](BackendCapabilities::host_written_waits), also waits natively
//!   on the operations of other drivers' queues, on a word of its own that mirrors such a
//!   queue's progress and that the layer has it write ([`Backend::mirror_progress`]) as the
//!   queue's operations end;
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
//! [`Work::Alloca`] / [`Work::Dealloca`]. Kernels — [`Kernel::Spin`], [`Kernel::Sleep`],
//! [`Kernel::Execute`] — are the backend's, and a backend is handed them as a [`Kernel`]. Of memory operations a backend sees only the native
//! half ([`MemoryOp`]): the quota, the death frontiers and the choice of block stay here.

use std::time::Instant;

use causeway_core::queue::Resolution;
use causeway_core::reuse::BlockId;
use causeway_core::semaphore::Failure;

use crate::config::QueueConfig;
use crate::error::{DriverError, SubmitError};
use crate::ids::{QueueId, SemaphoreId};
#[cfg(doc)]
use crate::op::Work;
use crate::op::{Kernel, OpStatus};

mod context;
mod erased;
mod issue;

pub(crate) use context::ContextDevice;
pub use context::{DeviceContext, QueueWaiters};
pub(crate) use erased::{Driver, DynBackend, DynQueue};
pub(crate) use issue::IssuingQueue;
pub use issue::{Issue, Issued, TakenOver};

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
    /// the same driver can be native — and, with
    /// [`host_written_waits`](Self::host_written_waits), of other drivers' queues: any other
    /// wait is held (see `causeway_core::queue::Submission::wait_on_origin`). Such a driver runs one queue's
    /// operations in order on the device (each waits for its predecessor natively), and
    /// advances a queue's native progress for operations the layer retired on the host
    /// ([`Backend::completed_on_host`]).
    pub native_waits: bool,
    /// Whether the driver can also wait natively on a word the host writes (an NPU semaphore
    /// slot, a device-visible timeline word), and so on the progress of **another driver's**
    /// queue (a CPU queue, a queue of a driver without native waits): a device wait on a value
    /// signalled by an operation of such a queue then stays a device wait whose
    /// [`NativeWait::origin`] names it, instead of being held. The driver waits on a *mirror* of
    /// the origin queue's progress, a word of its own that the layer has it write
    /// ([`Backend::mirror_progress`]) as each operation of the origin queue ends — completed,
    /// failed, cancelled or aborted, at shutdown too — so the mirror passes every operation
    /// and no native wait on it stalls. Only queues some operation of the driver waits on pay
    /// the writes: the layer registers a queue on the first such wait. Implies
    /// [`native_waits`](Self::native_waits).
    pub host_written_waits: bool,
    /// Whether it runs the timed stand-in kernels, [`Kernel::Spin`] and [`Kernel::Sleep`]
    /// (the layer refuses them at submission otherwise).
    pub timed_kernels: bool,
}

impl BackendCapabilities {
    /// Capabilities with wait-before-signal as given, device waits ordered by the layer, and
    /// command buffers as the only kernels.
    pub const fn new(wait_before_signal: bool) -> BackendCapabilities {
        BackendCapabilities {
            wait_before_signal,
            native_waits: false,
            host_written_waits: false,
            timed_kernels: false,
        }
    }

    /// These capabilities, with [`Kernel::Spin`] and [`Kernel::Sleep`] run too.
    pub const fn with_timed_kernels(self) -> BackendCapabilities {
        BackendCapabilities { timed_kernels: true, ..self }
    }

    /// These capabilities, with device waits ordered natively by the driver.
    pub const fn with_native_waits(self) -> BackendCapabilities {
        BackendCapabilities { native_waits: true, ..self }
    }

    /// These capabilities, with native waits on mirrors of other drivers' queues too (see
    /// [`host_written_waits`](Self::host_written_waits)); native waits included.
    pub const fn with_host_written_waits(self) -> BackendCapabilities {
        BackendCapabilities { native_waits: true, host_written_waits: true, ..self }
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
    /// the operation that signals the value. On a queue of the same driver it has already
    /// been issued to the driver or retired, and the driver waits on that queue's progress.
    /// On a queue of another driver (only with
    /// [host-written waits](BackendCapabilities::host_written_waits)) it has started running
    /// or ended (so no cancellation can take it back), and the driver waits on its mirror of that queue's progress, which
    /// [`Backend::mirror_progress`] moves past the operation once it has ended.
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
    /// driver, or to an alloca that then ended without running, or its record was abandoned
    /// at shutdown.
    Release {
        /// The block.
        block: BlockId,
    },
}

/// A driver: the native half of a device's queues. See the [module documentation](self).
///
/// A driver keeps what each of its queues needs natively in a queue object of its own type,
/// [`Queue`](Self::Queue): [`open_queue`](Self::open_queue) makes it, the layer stores it
/// beside its queue and hands it back to every call about that queue. The layer calls a
/// backend from the submitting thread ([`check`](Self::check)) and from the queue's process on
/// a pool worker (the rest); one queue's calls never overlap, different queues' may. Nothing a
/// backend does may block on other queues' progress.
///
/// The layer validates, once for every driver, what no driver should have to: a backend is
/// handed only kernels ([`Kernel`]; the layer's own kinds never reach it), only the kinds its
/// [capabilities](BackendCapabilities::timed_kernels) name, and only command buffers below
/// [`command_buffers`](Self::command_buffers).
pub trait Backend: Send + Sync + 'static {
    /// What one of its queues keeps natively (a hardware queue, a stream, a ring); `()` when
    /// a queue needs nothing of its own.
    type Queue: Send + Sync + 'static;

    /// The driver's name, for reports and errors (`"cpu"`, `"vulkan"`).
    fn name(&self) -> &'static str;

    /// What its queues can do.
    fn capabilities(&self) -> BackendCapabilities;

    /// How many command buffers it has recorded: [`Kernel::Execute`] names one below this
    /// (the layer refuses any other at submission). Asked at every submission of an
    /// `Execute`, so a driver may record while the device runs, provided every buffer below
    /// the count it returns is complete and ready to issue ([`Recorded`](crate::Recorded)
    /// keeps that promise). The default is none.
    fn command_buffers(&self) -> u32 {
        0
    }

    /// What the driver counts of its own, by name (native waits emitted, a full ring met), for
    /// [`Device::stats`](crate::Device::stats); read while the device runs, so each counter is
    /// a snapshot. The default is none.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Creates what queue `queue` needs natively, while the device is built (before
    /// [`start`](Self::start)); the layer keeps the returned object for the queue's life.
    fn open_queue(
        &mut self,
        queue: QueueId,
        config: &QueueConfig,
    ) -> Result<Self::Queue, DriverError>;

    /// Refuses, at submission, a kernel this driver cannot run on `queue` for reasons of its
    /// own; the kinds and command buffers the layer validates never get here refused. The
    /// default accepts.
    fn check(&self, queue: &Self::Queue, kernel: Kernel) -> Result<(), SubmitError> {
        let _ = (queue, kernel);
        Ok(())
    }

    /// The device is built and has its final address; its processes may be created now.
    fn start(&'static self, device: DeviceContext);

    /// Issues the operation at the head of `queue` (or, with native waits, ahead of it),
    /// whose waits have all resolved.
    fn issue(&'static self, queue: &'static Self::Queue, issue: &mut Issue<'_>) -> Issued;

    /// The status of `queue`'s oldest pending operation (epoch `epoch`, running `kernel`,
    /// answered [`Issued::Pending`]) once it ended, releasing whatever it held; `None` while
    /// it runs. With [native waits](BackendCapabilities::native_waits) several operations of a
    /// queue may be pending; they are polled in issue order.
    fn poll(
        &'static self,
        queue: &'static Self::Queue,
        epoch: u64,
        kernel: Kernel,
    ) -> Option<OpStatus>;

    /// For a driver with [native waits](BackendCapabilities::native_waits): operation `epoch`
    /// of `queue` retired without reaching the driver (a layer kind — barrier, host function,
    /// memory — or an operation failed by its waits), so whatever stands for the queue's
    /// progress natively (its timeline) must reach `epoch` now. Every earlier operation of the
    /// queue has retired and no later one has been issued. Never called for other drivers.
    fn completed_on_host(&'static self, queue: &'static Self::Queue, epoch: u64) {
        let _ = (queue, epoch);
    }

    /// For a driver with [host-written waits](BackendCapabilities::host_written_waits): write
    /// the driver's mirror of queue `origin`'s progress — `origin` is a queue of another driver
    /// that an operation of this driver waits on natively — so that it reaches `epoch`: every
    /// operation of `origin` through `epoch` has ended (completed, failed, cancelled or
    /// aborted) and what it signals is completed or failed. A native wait on the mirror `≥ e`
    /// is then released exactly when operation `e` of `origin` has ended; whether it succeeded
    /// reaches the waiter through the layer, which retires a native waiter only after its
    /// origins and fails it when one failed.
    ///
    /// Called from the first submission that waits natively on `origin` (bringing the mirror
    /// up to what has ended so far) and then as `origin`'s operations end, on whichever thread
    /// ends them; for one `origin`, never concurrently and with `epoch` increasing, so the
    /// driver's write may be a plain store. Must not block or call back into the layer. Never
    /// called for drivers without host-written waits.
    fn mirror_progress(&'static self, origin: QueueId, epoch: u64) {
        let _ = (origin, epoch);
    }

    /// The native half of stream-ordered memory, for a block this driver owns (see
    /// [`MemoryOp`]). Called on a pool worker while an alloca or dealloca runs, or ends
    /// failed or cancelled without running (a dealloca lets its block go all the same, once
    /// everything it was ordered after has ended; an alloca that took a kept block has it
    /// released) — on a queue of any driver: the dealloca's queue may belong to another — or
    /// at shutdown for an abandoned record; never under a lock of the layer, never for two
    /// operations on one block at once. An `Err` from a [`Commit`](MemoryOp::Commit) fails the alloca (and what
    /// it signals) with that failure and gives its bytes back to the quota; its dealloca then
    /// has nothing to give back. Errors of the other operations are ignored (the memory is
    /// the driver's to account for). The default backs nothing: memory the layer only
    /// accounts for, as on the CPU driver, whose kernels own their buffers.
    fn memory(&self, op: MemoryOp) -> Result<(), Failure> {
        let _ = op;
        Ok(())
    }

    /// Whether `queue`'s pending operation (running `kernel`) may still be running, at
    /// shutdown (the device then fails it as aborted instead of waiting for it).
    /// `workers_abandoned` says whether the pool left some worker inside work; when it is
    /// false every worker was joined, so work that runs on the workers has stopped (work on a
    /// device may not have).
    fn is_running(&self, queue: &Self::Queue, kernel: Kernel, workers_abandoned: bool) -> bool;

    /// The device is shutting down: its pool has stopped and every queue was torn down. End
    /// whatever the backend runs of its own (threads, processes, native work) by `deadline`
    /// and say whether nothing of it can reach the device any more (`true`); with `false` the
    /// device keeps its state alive for it instead of freeing it, and reports the driver busy.
    fn stop(&self, deadline: Instant) -> bool;
}

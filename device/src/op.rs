//! What a queue operation is, and the per-slot storage that carries one from submission to
//! retirement.

use std::cell::UnsafeCell;
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use causeway_core::frontier::Point;
use causeway_core::queue::Resolution;
use causeway_core::semaphore::{Failure, Notify, Outcome, Timepoint};
use causeway_core::speculation::Dependence;
use heapless::Vec as FixedVec;

use super::backend::{NativeWait, Origin};
use super::gate_count::GateCount;
use super::memory::AllocationId;
use super::queue::QueueShared;
use super::{
    BufferId, CommandBufferId, DeviceShared, HostCallId, QueueId, SemaphoreId, MAX_SIGNALS,
    MAX_WAITS,
};

/// The work an operation does once its waits are satisfied. Barriers, host functions and
/// stream-ordered memory are the device layer's own; the kernel kinds (`Spin`, `Sleep`,
/// `Execute`) are issued to the queue's driver ([`Backend`](crate::Backend)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Work {
    /// Nothing: the operation only orders (waits, then signals). On an in-order queue this is
    /// a full barrier.
    Barrier,
    /// A kernel that busy-runs for this long (a stand-in for a short kernel; on the CPU driver
    /// it holds the worker).
    Spin(Duration),
    /// A kernel that blocks for this long (a stand-in for a blocking call; on the CPU driver
    /// it holds a worker, as a real one would).
    Sleep(Duration),
    /// Calls a host function registered with the device, on a pool worker, in queue order.
    Host(HostCallId),
    /// Executes a command buffer recorded with the queue's driver (the queue waits for it).
    Execute(CommandBufferId),
    /// Commits a stream-ordered allocation of `bytes` for `buffer`.
    Alloca {
        /// The buffer name.
        buffer: BufferId,
        /// Its size.
        bytes: u64,
    },
    /// Decommits the buffer's allocation.
    Dealloca(BufferId),
}

impl Work {
    /// Whether it is a kernel kind, issued to the queue's driver (the others are the layer's
    /// own and run on the host).
    pub fn is_kernel(self) -> bool {
        matches!(self, Work::Spin(_) | Work::Sleep(_) | Work::Execute(_))
    }
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpStatus {
    /// It ran and its signals completed.
    Ok,
    /// A waited semaphore failed or the work failed; its signals were failed with this.
    Failed(Failure),
    /// The device shut down before it ran; its signals were failed as cancelled.
    Cancelled,
}

impl OpStatus {
    /// The outcome its signals retire with: `Ok` completes them, a failure fails them.
    pub fn result(self) -> Result<(), Failure> {
        match self {
            OpStatus::Ok => Ok(()),
            OpStatus::Failed(failure) => Err(failure),
            OpStatus::Cancelled => Err(Failure::Cancelled),
        }
    }
}

/// A queue operation as the host describes it.
#[derive(Clone, Copy, Debug)]
pub struct Op<'a> {
    /// `semaphore ≥ value` conditions, at most [`MAX_WAITS`].
    pub waits: &'a [(SemaphoreId, u64)],
    /// `semaphore := value` on completion, at most [`MAX_SIGNALS`].
    pub signals: &'a [(SemaphoreId, u64)],
    /// What runs.
    pub work: Work,
    /// The caller's label, handed back in [`OpEvent`]s.
    pub tag: u64,
}

/// A point in an operation's execution, as an [`Observer`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpEvent {
    /// The operation's waits were satisfied and a worker started it.
    Started {
        /// Worker index.
        worker: usize,
        /// Nanoseconds since the device started.
        at_ns: u64,
    },
    /// A cancellation ([`Device::cancel_speculative`](crate::Device::cancel_speculative))
    /// found that the operation depended on rejected speculation. Reported by its queue just
    /// before `Finished`: with `started` false it never ran and finishes
    /// [`OpStatus::Cancelled`]; with `started` true it was already running, ran to its end,
    /// and what it signalled depends on rejected work.
    Speculative {
        /// Nanoseconds since the device started.
        at_ns: u64,
        /// Why: its frontier holds a rejected epoch, or it is tainted and might.
        dependence: Dependence,
        /// Whether it had already started when the rejection came.
        started: bool,
    },
    /// The operation finished and its signals were completed or failed.
    Finished {
        /// Worker index.
        worker: usize,
        /// When it ended, in nanoseconds since the device started: read before its signals
        /// were completed or failed, so no operation they release started before it.
        at_ns: u64,
        /// How it ended.
        status: OpStatus,
    },
}

/// Watches operations run (a report, a trace). Called on worker threads in the middle of the
/// queue's drain: keep it short and never block.
pub trait Observer: Send + Sync {
    /// `queue`'s operation tagged `tag` reached `event`.
    fn op_event(&self, queue: usize, tag: u64, event: OpEvent);
}

/// The part of a slot written at submission and read by the queue process.
#[derive(Debug)]
pub(crate) struct OpBody {
    pub(crate) tag: u64,
    pub(crate) point: Point,
    pub(crate) work: Work,
    pub(crate) allocation: Option<AllocationId>,
    pub(crate) waits: FixedVec<(SemaphoreId, u64), MAX_WAITS>,
    /// How each wait was resolved at submission (`None`: on a semaphore that had failed).
    pub(crate) resolutions: [Option<Resolution>; MAX_WAITS],
    /// For each native device wait, the operation it waits on (see `BackendCapabilities`).
    pub(crate) origins: [Option<Origin>; MAX_WAITS],
    pub(crate) armed: [bool; MAX_WAITS],
    pub(crate) signals: FixedVec<(SemaphoreId, u64), MAX_SIGNALS>,
    /// Issued to the driver, which reported it pending (or finished it ahead of the head).
    pub(crate) issued: bool,
    /// The status of an operation the driver finished at issue while operations before it
    /// were still pending: retired with it when it reaches the head.
    pub(crate) issued_status: Option<OpStatus>,
    /// When it was issued (`clock::start_ns`), for shutdown reports.
    pub(crate) issued_ns: u64,
}

impl OpBody {
    pub(crate) const fn empty(point: Point) -> OpBody {
        OpBody {
            tag: 0,
            point,
            work: Work::Barrier,
            allocation: None,
            waits: FixedVec::new(),
            resolutions: [None; MAX_WAITS],
            origins: [None; MAX_WAITS],
            armed: [false; MAX_WAITS],
            signals: FixedVec::new(),
            issued: false,
            issued_status: None,
            issued_ns: 0,
        }
    }
}

impl OpBody {
    /// The waits a native queue would order: those resolved as device or held waits (elided
    /// and satisfied ones need nothing), copied so no reference to the slot outlives the issue.
    pub(crate) fn native_waits(&self) -> FixedVec<NativeWait, MAX_WAITS> {
        self.waits
            .iter()
            .zip(self.resolutions)
            .zip(self.origins)
            .filter_map(|((&(semaphore, value), resolution), origin)| match resolution {
                Some(resolution @ (Resolution::DeviceWait | Resolution::Held)) => {
                    Some(NativeWait { semaphore, value, resolution, origin })
                }
                _ => None,
            })
            .collect()
    }

    /// How many of its waits resolved elided or satisfied: they reach no driver.
    pub(crate) fn elided_waits(&self) -> usize {
        let elided = |resolution: &Option<Resolution>| {
            matches!(resolution, Some(Resolution::Elided | Resolution::Satisfied))
        };
        self.resolutions.iter().filter(|resolution| elided(resolution)).count()
    }

    /// Whether every native device wait's origin has been issued to the driver or retired;
    /// otherwise registers the queue with the first origin queue that has not, to be woken
    /// when it issues or retires more.
    pub(crate) fn origins_issued(&self, device: &DeviceShared, waiter: QueueId) -> bool {
        self.origins
            .iter()
            .flatten()
            .all(|origin| device.queues[origin.queue.0].has_issued_or_waits(origin.epoch, waiter))
    }

    /// Whether every native device wait's origin has retired; otherwise registers the queue
    /// with the first origin queue that has not, to be woken when it retires more.
    pub(crate) fn origins_retired(&self, device: &DeviceShared, waiter: QueueId) -> bool {
        self.origins
            .iter()
            .flatten()
            .all(|origin| device.queues[origin.queue.0].has_retired_or_waits(origin.epoch, waiter))
    }
}

/// Counts an operation's outstanding waits and remembers the first failure among them (see
/// `gate_count` for the protocol); the notify target of the slot's timepoints.
pub(crate) struct WaitGate {
    pub(crate) count: GateCount,
    /// The queue to wake when the count reaches zero; set once when the device is built.
    pub(crate) queue: OnceLock<&'static QueueShared>,
}

impl WaitGate {
    pub(crate) fn new() -> WaitGate {
        WaitGate { count: GateCount::new(), queue: OnceLock::new() }
    }

    pub(crate) fn record_failure(&self, failure: Failure) {
        self.count.record_failure(failure);
    }

    pub(crate) fn failure(&self) -> Option<Failure> {
        self.count.failure()
    }

    /// Drops one outstanding wait; the last one wakes the queue.
    pub(crate) fn release(&self) {
        if self.count.release() {
            if let Some(queue) = self.queue.get() {
                queue.wake();
            }
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.count.is_open()
    }
}

impl Notify for WaitGate {
    fn notify(&self, outcome: Outcome) {
        // Asked for before `release` waits for the gate's own line: this thread is likely to
        // run the queue next (see `prefetch`).
        if let Some(queue) = self.queue.get() {
            queue.prefetch_for_drain();
        }
        if let Err(failure) = outcome {
            self.record_failure(failure);
        }
        self.release();
    }

    /// The signalling thread may have been preempted inside `notify` by the queue it woke.
    fn while_firing(&self) {
        std::thread::yield_now();
    }
}

impl fmt::Debug for WaitGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGate")
            .field("pending", &self.count.pending())
            .field("failure", &self.failure())
            .finish_non_exhaustive()
    }
}

/// One entry of a queue's operation ring.
pub(crate) struct OpSlot {
    pub(crate) gate: WaitGate,
    /// One timepoint per wait, pointing at `gate`; set once when the device is built.
    pub(crate) timepoints: [OnceLock<Timepoint<'static>>; MAX_WAITS],
    /// Written by the submitter before it publishes the slot, read by the queue process
    /// until it retires it (the ring indices order the two; see `queue`).
    pub(crate) body: UnsafeCell<OpBody>,
}

impl OpSlot {
    pub(crate) fn new(point: Point) -> OpSlot {
        OpSlot {
            gate: WaitGate::new(),
            timepoints: [const { OnceLock::new() }; MAX_WAITS],
            body: UnsafeCell::new(OpBody::empty(point)),
        }
    }
}

// SAFETY: `body` is accessed by one thread at a time: the submitter (holding the queue's
// submit lock) while the slot is outside the published range, the queue process (the only
// drainer of an immediate process) while it is inside; the ring indices' Release/Acquire pairs
// hand it over (see `queue`'s protocol). Everything else is atomic or `Sync`.
unsafe impl Sync for OpSlot {}

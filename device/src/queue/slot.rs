//! One entry of a queue's operation ring: what submission writes for the queue process to
//! read, and the wait gate its timepoints count down.

use std::cell::UnsafeCell;
use std::fmt;
use std::sync::OnceLock;

use causeway_core::frontier::Point;
use causeway_core::queue::Resolution;
use causeway_core::semaphore::{Failure, Notify, Outcome, Timepoint};
use heapless::Vec as FixedVec;

use super::wait_count::WaitCount;
use super::QueueShared;
use crate::backend::{NativeWait, Origin};
use crate::ids::QueueId;
use crate::ids::SemaphoreId;
use crate::limits::{MAX_SIGNALS, MAX_WAITS};
use crate::memory::AllocationId;
use crate::op::{Args, Kernel, OpStatus, Work};
use crate::sync::thread;

/// The part of a slot written at submission and read by the queue process.
#[derive(Debug)]
pub(crate) struct OpBody {
    pub(crate) tag: u64,
    pub(crate) args: Args,
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
    /// The kernel issued to the driver, which reported it pending (or finished it ahead of
    /// the head); `None` until then.
    pub(crate) issued: Option<Kernel>,
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
            args: Args::NONE,
            point,
            work: Work::Barrier,
            allocation: None,
            waits: FixedVec::new(),
            resolutions: [None; MAX_WAITS],
            origins: [None; MAX_WAITS],
            armed: [false; MAX_WAITS],
            signals: FixedVec::new(),
            issued: None,
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

    /// Whether every native device wait's origin may be waited on by the driver now: on a
    /// queue of the same driver, issued to the driver or retired; on another driver's queue (a
    /// wait on the driver's mirror of it, see `mirror`), started or ended — claimed as running,
    /// so no cancellation can take it back, and its end moves the mirror whatever it is.
    /// Otherwise registers the queue with the first origin queue that is behind, to be woken
    /// when it issues, starts or retires more.
    pub(crate) fn origins_issued(&self, queues: &[QueueShared], waiter: QueueId) -> bool {
        let driver = queues[waiter.index()].driver;
        self.origins.iter().flatten().all(|origin| {
            let origin_queue = &queues[origin.queue.index()];
            if origin_queue.driver == driver {
                origin_queue.has_issued_or_waits(origin.epoch, waiter)
            } else {
                origin_queue.has_started_or_waits(origin.epoch, waiter)
            }
        })
    }

    /// Whether every native device wait's origin has retired; otherwise registers the queue
    /// with the first origin queue that has not, to be woken when it retires more.
    pub(crate) fn origins_retired(&self, queues: &[QueueShared], waiter: QueueId) -> bool {
        self.origins
            .iter()
            .flatten()
            .all(|origin| queues[origin.queue.index()].has_retired_or_waits(origin.epoch, waiter))
    }
}

/// Counts an operation's outstanding waits and remembers the first failure among them (see
/// `wait_count` for the protocol); the notify target of the slot's timepoints.
pub(crate) struct WaitGate {
    pub(crate) count: WaitCount,
    /// The queue to wake when the count reaches zero; set once when the device is built.
    pub(crate) queue: OnceLock<&'static QueueShared>,
}

impl WaitGate {
    pub(crate) fn new() -> WaitGate {
        WaitGate { count: WaitCount::new(), queue: OnceLock::new() }
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
        thread::yield_now();
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

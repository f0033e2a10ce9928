//! What a run produced: the [`Outcome`] and the records it holds — each operation's, each
//! semaphore's, each queue's and driver's, and where a run stopped at its deadline.
//!
//! The runner ([`run`](super::run)) writes them, and across ranks
//! [`rank_records`](super::rank_records) carries them to rank 0, which
//! [`gather`](super::gather)s them into one outcome; the expectations
//! ([`expect`](super::expect)), the totals ([`stats`](super::stats)), the summary, the report
//! and the trace read them. Plain data: nothing here runs anything.

use std::time::Duration;

use causeway_core::queue::{Resolution, WaitResolution};

use super::model::{DriverKind, Scenario, ScenarioError};

/// How an operation ended, as the report spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Ran and signalled.
    Ok,
    /// Failed (and failed what it signals).
    Failed,
    /// Never ran.
    Cancelled,
    /// Still running when the run was stopped at its deadline: it ran partly.
    Running,
    /// Not started when the run was stopped at its deadline (waiting, or never submitted).
    NotStarted,
}

impl Status {
    /// The report's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Running => "running",
            Status::NotStarted => "not_started",
        }
    }

    /// Whether the operation was cut off by the deadline (running, or not started, then).
    pub fn at_deadline(self) -> bool {
        matches!(self, Status::Running | Status::NotStarted)
    }
}

/// Consecutive entries of one of an [`Outcome`]'s shared arrays: an operation's waits, a
/// frontier's points, a semaphore's history.
///
/// A large run records hundreds of thousands of small lists; each in an allocation of its own
/// would spread them over the heap, and every later pass over the outcome (stats, report,
/// trace) would wait for memory at each one. In one array each, a pass reads them in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    start: u32,
    len: u32,
}

impl Span {
    /// The entries of `items` from `start` to its end.
    pub(crate) fn since<T>(items: &[T], start: usize) -> Span {
        let index = |at: usize| u32::try_from(at).expect("an outcome holds under 2^32 entries");
        Span { start: index(start), len: index(items.len() - start) }
    }

    /// This span's entries of `items`.
    pub fn of<T>(self, items: &[T]) -> &[T] {
        &items[self.start as usize..][..self.len as usize]
    }

    /// How many entries it spans.
    pub fn len(self) -> usize {
        self.len as usize
    }

    /// Whether it spans nothing.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }
}

/// One wait of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitRecord {
    /// Semaphore index.
    pub semaphore: u32,
    /// Waited value.
    pub value: u64,
    /// How it resolved; `None` when the semaphore had already failed.
    pub resolution: Option<Resolution>,
    /// The value lay in an external taint window.
    pub tainted: bool,
}

impl WaitRecord {
    pub(super) fn new(
        semaphore: usize,
        value: u64,
        resolved: Option<WaitResolution>,
    ) -> WaitRecord {
        let semaphore = u32::try_from(semaphore).expect("semaphore indices fit in u32");
        let (resolution, tainted) = match resolved {
            Some(resolved) => (Some(resolved.resolution), resolved.tainted),
            None => (None, false),
        };
        WaitRecord { semaphore, value, resolution, tainted }
    }
}

/// One entry of a recorded frontier: an epoch on an axis named in [`Outcome::axis_names`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointRecord {
    /// Where the axis's name is in [`Outcome::axis_names`].
    pub axis: u32,
    /// The position on it.
    pub epoch: u64,
}

/// A recorded frontier: its points in [`Outcome::points`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrontierRecord {
    /// Its entries.
    pub points: Span,
    /// Whether it overflowed (and may be incomplete).
    pub tainted: bool,
}

/// What happened to one operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpRecord {
    /// Its epoch on its own axis.
    pub epoch: u64,
    /// When it was submitted (ns since the device started).
    pub submit_ns: u64,
    /// When it started.
    pub start_ns: u64,
    /// When it finished.
    pub end_ns: u64,
    /// Its waits, in order, in [`Outcome::waits`].
    pub waits: Span,
    /// What it knew, itself included.
    pub frontier: FrontierRecord,
    /// The worker that ran it (`None` for host steps and cancelled operations).
    pub worker: Option<u32>,
    /// Whether it was submitted to a device queue (host steps are performed by the runner).
    pub queued: bool,
    /// How it ended.
    pub status: Status,
    /// What a `cancel` host step found it to be, if it depended on rejected speculation.
    pub speculation: Option<Speculation>,
}

/// How a rejection of speculation (a `cancel` host step) found an operation that depended on
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Speculation {
    /// Only its tainted frontier made it dependent (it might have forgotten a rejected epoch).
    pub conservative: bool,
    /// It had already started, and ran to its end on rejected work (else it was cancelled).
    pub started: bool,
}

impl Speculation {
    /// The report's spelling of why: `"speculation"` or `"conservative"`.
    pub fn reason(self) -> &'static str {
        if self.conservative {
            "conservative"
        } else {
            "speculation"
        }
    }
}

impl OpRecord {
    /// A host step the deadline stopped: waiting (`started` none), or running its work since
    /// `started` (it ends when the run is stopped).
    pub(super) fn at_deadline(submit_ns: u64, waits: Span, started: Option<u64>) -> OpRecord {
        OpRecord {
            submit_ns,
            start_ns: started.unwrap_or(0),
            waits,
            status: if started.is_some() { Status::Running } else { Status::NotStarted },
            ..OpRecord::UNSUBMITTED
        }
    }

    /// An operation not submitted yet (cancelled, unless its queue reports otherwise).
    pub(super) const UNSUBMITTED: OpRecord = OpRecord {
        epoch: 0,
        submit_ns: 0,
        start_ns: 0,
        end_ns: 0,
        waits: Span { start: 0, len: 0 },
        frontier: FrontierRecord { points: Span { start: 0, len: 0 }, tainted: false },
        worker: None,
        queued: false,
        status: Status::Cancelled,
        speculation: None,
    };
}

/// One retained history entry of a semaphore.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HistoryRecord {
    /// The signalled value.
    pub value: u64,
    /// What it knew.
    pub frontier: FrontierRecord,
    /// External (untracked) signal.
    pub tainted: bool,
    /// The signal was cancelled: the values it would have reached failed.
    pub cancelled: bool,
    /// The signalling operation ran on rejected speculation (it had started when a `cancel`
    /// step rejected what it depended on).
    pub ran_on_rejected: bool,
}

/// A semaphore at the end of the run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SemaphoreRecord {
    /// Final value.
    pub value: u64,
    /// Whether a wait on it fails: the timeline failed, or one of its signals was cancelled
    /// (the values that signal would have reached fail; its history entry says which).
    pub failed: bool,
    /// Retained history, oldest first, in [`Outcome::history`].
    pub history: Span,
}

/// Everything a run produced. The records' lists lie in shared arrays (see [`Span`]).
#[derive(Debug)]
pub struct Outcome<'s> {
    /// The scenario.
    pub scenario: &'s Scenario,
    /// One record per operation, in file order.
    pub ops: Vec<OpRecord>,
    /// Every operation's waits, in file order.
    pub waits: Vec<WaitRecord>,
    /// One record per semaphore, in declaration order.
    pub semaphores: Vec<SemaphoreRecord>,
    /// Every semaphore's retained history, in declaration order.
    pub history: Vec<HistoryRecord>,
    /// Every recorded frontier's points.
    pub points: Vec<PointRecord>,
    /// The display names of the axes that appear in frontiers.
    pub axis_names: Vec<String>,
    /// Stream-ordered memory totals.
    pub memory: causeway::device::MemoryStats,
    /// Wall time of the run.
    pub wall: Duration,
    /// Per queue, in declaration order: the driver it ran on.
    pub queues: Vec<QueueRecord>,
    /// Every compute or copy operation's result check, in file order.
    pub compute: Vec<ComputeRecord>,
    /// What the Vulkan driver issued, when the scenario ran Vulkan queues.
    pub vulkan: Option<VulkanRecord>,
    /// What the NPU driver emitted, when the scenario ran NPU queues.
    pub npu: Option<NpuRecord>,
    /// What the CUDA driver called for its queues' waits, when the scenario ran CUDA queues.
    pub cuda: Option<CudaRecord>,
    /// How the run was stopped, when it reached its deadline: its records are then what was
    /// known at the deadline (operations still running or not started say so).
    pub timed_out: Option<TimedOut>,
}

/// A run stopped at its deadline ([`RunOptions::timeout`](super::run::RunOptions::timeout)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimedOut {
    /// When it was stopped: nanoseconds since the device started.
    pub at_ns: u64,
    /// The timeout it ran under.
    pub timeout: Duration,
    /// What the runner itself was waiting for at the deadline.
    pub reason: String,
    /// Every wait not reached at the deadline of an operation that had not started, in file
    /// order.
    pub pending_waits: Vec<PendingWait>,
    /// What was stuck, as `causeway run` reports it (the file named, every operation still
    /// running and every one waiting listed, long lists cut with a count).
    pub error: ScenarioError,
}

/// A wait not reached when a run was stopped at its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingWait {
    /// The waiting operation's index.
    pub op: u32,
    /// The semaphore's index.
    pub semaphore: u32,
    /// The waited value.
    pub value: u64,
    /// The semaphore's value at the deadline.
    pub at: u64,
}

impl Outcome<'_> {
    /// `op`'s waits.
    pub fn waits_of(&self, op: &OpRecord) -> &[WaitRecord] {
        op.waits.of(&self.waits)
    }

    /// The points of `frontier`.
    pub fn points_of(&self, frontier: FrontierRecord) -> &[PointRecord] {
        frontier.points.of(&self.points)
    }

    /// `semaphore`'s retained history.
    pub fn history_of(&self, semaphore: &SemaphoreRecord) -> &[HistoryRecord] {
        semaphore.history.of(&self.history)
    }

    /// The display name of `point`'s axis.
    pub fn axis_name(&self, point: PointRecord) -> &str {
        &self.axis_names[point.axis as usize]
    }
}

/// The driver a queue ran on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueRecord {
    /// The driver.
    pub driver: DriverKind,
    /// The device it ran on: the Vulkan adapter's name, the NPU model's, or the host's worker
    /// pool.
    pub adapter: String,
}

/// What the Vulkan driver issued natively in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VulkanRecord {
    /// The adapter's name.
    pub adapter: String,
    /// Native timeline waits passed to `vkQueueSubmit2`.
    pub native_waits: u64,
    /// What the Khronos validation layer reported (when it was on): any message fails the run.
    pub validation_messages: Vec<String>,
}

/// What the NPU driver emitted for its queues' waits in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpuRecord {
    /// The device's name.
    pub adapter: &'static str,
    /// WAIT descriptors emitted (one per device-wait resolution of an issued operation).
    pub wait_descriptors: u64,
    /// Waits of issued operations that emitted nothing: resolved elided or satisfied.
    pub elided: u64,
    /// Waits of issued operations that emitted nothing: held by the device layer until reached.
    pub held: u64,
    /// Issues the ring answered busy (full: backpressure, issued again later).
    pub ring_full: u64,
}

/// What the CUDA driver did with its queues' waits in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaRecord {
    /// The device and the timeline emulation it ran.
    pub adapter: String,
    /// Stream waits issued for device waits (`cuStreamWaitValue64_v2` or
    /// `cuStreamWaitEvent`).
    pub native_waits: u64,
    /// Device waits whose signalling operation had completed by issue: no call (the event
    /// emulation).
    pub completed: u64,
    /// Waits of issued operations resolved elided or satisfied: no call.
    pub elided: u64,
    /// Waits of issued operations held by the device layer until reached: no call.
    pub held: u64,
}

/// The check of one compute or copy operation's results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComputeRecord {
    /// The operation's index.
    pub op: usize,
    /// `Err` names the first wrong element; `None` when the operation did not complete (its
    /// results are not there to check).
    pub result: Option<Result<(), String>>,
}

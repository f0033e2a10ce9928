//! Running a checked scenario on a CPU device and recording what happened.
//!
//! Operations are taken in file order. A queue operation is submitted and the runner moves on
//! (submit-before-wait is allowed); when a bounded resource it needs is full (its queue's
//! ring, a signalled semaphore's history) the submission waits for earlier work to make room.
//! A host step acts on this thread at that point: it blocks until its waits are reached, does
//! its work, then signals as a tracked participant with its own axis (or as an untracked
//! outside source, or fails a semaphore). Then the runner waits for every queue operation to
//! finish.
//!
//! Everything the runner waits for — room, a host step's waits and work, the queues — ends at
//! one deadline. Past it the run is recorded as the deadline found it ([`Outcome::timed_out`]:
//! what ran, what was still running, what had not started, every wait not reached, and the
//! report naming them), and the device is shut down within [`SHUTDOWN_GRACE`]: work that never
//! returns is abandoned on its worker, not joined.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway::device::{
    allocate_axis, BufferId, CommandBufferId, Device, DeviceSemaphore, HostCallId, HostTimeline,
    Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId, Receipt, SemaphoreConfig, SemaphoreId,
    SubmitError, WaitOutcome, Work, DEFAULT_SEMAPHORE_HISTORY,
};
use causeway::runtime::blocking::{self, HostWaitError};
use causeway::runtime::spin_for;
use causeway::{PoolConfig, FRONTIER_CAPACITY};
use causeway_core::axis::{Axis, Domain};
use causeway_core::collective::CollectiveChannel;
use causeway_core::frontier::{Frontier, Point};
use causeway_core::queue::{Resolution, WaitResolution};
use causeway_core::scope::Endpoint;
use causeway_core::semaphore::{Failure, SignalError, MAX_HISTORY_SLOTS, MIN_HISTORY_SLOTS};
use causeway_core::speculation::{Dependence, Rejection};
use causeway_core::unpoisoned::{Condvar, Mutex};

use super::check::Plan;
use super::drivers::{self, ComputeCheck, Drivers};
use super::model::{DriverKind, Home, OpSpec, Scenario, ScenarioError, Target, WorkSpec};
use super::ranks::Share;

// The records a run produces, defined in `outcome`, also under the runner's path.
pub use super::outcome::{
    ComputeRecord, CudaRecord, FrontierRecord, HistoryRecord, NpuRecord, OpRecord, Outcome,
    PendingWait, PointRecord, QueueRecord, SemaphoreRecord, Span, Speculation, Status, TimedOut,
    VulkanRecord, WaitRecord,
};

/// Frontiers as they are recorded: points appended to one array, each axis named once.
struct FrontierRecorder {
    points: Vec<PointRecord>,
    names: Vec<String>,
    /// Each named axis and its index in `names`, by axis: a binary search finds it without
    /// hashing, and queues are few.
    indices: Vec<(Axis, u32)>,
}

impl FrontierRecorder {
    /// A recorder that knows `named` axes by those names.
    fn new(named: impl IntoIterator<Item = (Axis, String)>) -> FrontierRecorder {
        let mut recorder =
            FrontierRecorder { points: Vec::new(), names: Vec::new(), indices: Vec::new() };
        for (axis, name) in named {
            recorder.name(axis, name);
        }
        recorder
    }

    fn name(&mut self, axis: Axis, name: String) -> u32 {
        let index = u32::try_from(self.names.len()).expect("axes are few");
        self.names.push(name);
        let at = self.indices.partition_point(|&(named, _)| named < axis);
        self.indices.insert(at, (axis, index));
        index
    }

    fn record(&mut self, frontier: &Frontier<FRONTIER_CAPACITY>) -> FrontierRecord {
        let start = self.points.len();
        for point in frontier.iter() {
            let axis = match self.indices.binary_search_by_key(&point.axis, |&(axis, _)| axis) {
                Ok(at) => self.indices[at].1,
                // An axis no queue of the scenario owns: named by its ordinal, once.
                Err(_) => self.name(point.axis, format!("axis{}", point.axis.ordinal())),
            };
            self.points.push(PointRecord { axis, epoch: point.epoch });
        }
        FrontierRecord { points: Span::since(&self.points, start), tainted: frontier.is_tainted() }
    }
}

/// Options for a run.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Give up (reporting what is stuck) after this long.
    pub timeout: Duration,
    /// Show a progress bar on a terminal.
    pub progress: bool,
    /// Run every queue on the CPU driver, whatever driver it names (a machine without Vulkan).
    pub all_cpu: bool,
}

/// How long a stuck run's device gets to finish what it is running before its workers are
/// abandoned (see [`Device::shutdown`]).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
/// Running and waiting operations a deadlock report lists by name, each.
const STUCK_LISTED: usize = 20;
/// How often the progress bar is redrawn while the runner waits for the queues.
const PROGRESS_TICK: Duration = Duration::from_millis(100);

/// Why a run stopped early.
enum Halt {
    /// Bad input found while running (a scope violation, a refused signal).
    Invalid(ScenarioError),
    /// The deadline passed; the headline says what the runner itself was waiting for.
    Stuck(String),
}

/// How a host step's work occupies the runner's thread.
#[derive(Clone, Copy)]
enum Pace {
    Busy,
    Blocking,
}

/// Does `duration` of host-step work, but stops at `deadline`; `false` when the deadline cut it
/// short.
fn work_until(duration: Duration, deadline: Option<Instant>, pace: Pace) -> bool {
    let end = Instant::now().checked_add(duration);
    let (stop, cut_short) = match (end, deadline) {
        (Some(end), Some(deadline)) if deadline < end => (Some(deadline), true),
        (None, Some(deadline)) => (Some(deadline), true),
        (end, _) => (end, false),
    };
    loop {
        let now = Instant::now();
        if stop.is_some_and(|stop| now >= stop) {
            return !cut_short;
        }
        match pace {
            Pace::Busy => std::hint::spin_loop(),
            // Short sleeps, so a deadline is noticed; `None` (work too long to represent and
            // no deadline) sleeps on in the same steps.
            Pace::Blocking => std::thread::sleep(
                stop.map_or(PROGRESS_TICK, |stop| (stop - now).min(PROGRESS_TICK)),
            ),
        }
    }
}

const STATUS_PENDING: u32 = 0;
const STATUS_OK: u32 = 1;
const STATUS_FAILED: u32 = 2;
const STATUS_CANCELLED: u32 = 3;

/// `OpEvents::worker` of an operation no worker started.
const NO_WORKER: u32 = u32::MAX;

/// The events of one queue operation, side by side: an event writes one place in memory.
struct OpEvents {
    start_ns: AtomicU64,
    end_ns: AtomicU64,
    worker: AtomicU32,
    status: AtomicU32,
    /// [`Speculation::code`], 0 for none.
    speculation: AtomicU32,
}

impl Speculation {
    /// Packed into an [`OpEvents`] word (0 is none).
    fn code(dependence: Dependence, started: bool) -> u32 {
        1 + u32::from(dependence == Dependence::Conservative) + 2 * u32::from(started)
    }

    fn from_code(code: u32) -> Option<Speculation> {
        (code != 0).then(|| Speculation { conservative: (code - 1) & 1 == 1, started: code >= 3 })
    }
}

/// Collects start and finish events, indexed by operation (the op tag).
struct Recorder {
    ops: Vec<OpEvents>,
    /// A plain count, consistent whatever panicked while holding it.
    finished: Mutex<usize>,
    changed: Condvar,
}

impl Observer for Recorder {
    fn op_event(&self, _queue: causeway::device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let op = &self.ops[tag as usize];
        match event {
            OpEvent::Started { worker, at_ns } => {
                op.start_ns.store(at_ns, Ordering::Relaxed);
                let worker = u32::try_from(worker).expect("workers are few");
                op.worker.store(worker, Ordering::Relaxed);
            }
            OpEvent::Speculative { dependence, started, .. } => {
                op.speculation.store(Speculation::code(dependence, started), Ordering::Relaxed);
            }
            OpEvent::Finished { at_ns, status, .. } => {
                if op.start_ns.load(Ordering::Relaxed) == 0 {
                    op.start_ns.store(at_ns, Ordering::Relaxed);
                }
                op.end_ns.store(at_ns, Ordering::Relaxed);
                let code = match status {
                    OpStatus::Ok => STATUS_OK,
                    OpStatus::Cancelled => STATUS_CANCELLED,
                    _ => STATUS_FAILED,
                };
                op.status.store(code, Ordering::Relaxed);
                // The mutex orders the stores above before the reader's loads.
                let mut finished = self.finished.lock();
                *finished += 1;
                self.changed.notify_all();
            }
            _ => {}
        }
    }
}

/// Runs `scenario`, already checked into `plan`: the plan sizes the bounded resources (queue
/// rings, semaphore histories) so that a submission waiting for room never waits forever.
pub fn run<'s>(
    scenario: &'s Scenario,
    plan: &Plan,
    options: RunOptions,
) -> Result<Outcome<'s>, ScenarioError> {
    Runner::new(scenario, plan, options, None)?.run()
}

/// How a rank's runner reaches the other ranks (over MPI, in `mpi_run`): semaphores are named
/// by their index in the scenario, and every call is about one this rank imports or exports.
pub trait Peers {
    /// Links the device's semaphores (`semaphores[k]` is the scenario's semaphore `k`) with
    /// the other ranks and starts moving their values; the device lives as long as the
    /// process. `Err` says why the ranks cannot be joined.
    fn connect(&self, device: &'static Device, semaphores: &[SemaphoreId]) -> Result<(), String>;
    /// Submits `op` as [`Device::submit_timeout`] does, then sends its signals on semaphores
    /// other ranks wait on to them, with its frontier.
    fn submit(
        &self,
        queue: QueueId,
        op: &Op<'_>,
        timeout: Duration,
    ) -> Result<Receipt, SubmitError>;
    /// Blocks until imported `semaphore` has a signal to `value` (or more) recorded here,
    /// pending with its signaller's frontier, or reached.
    fn await_announced(
        &self,
        semaphore: usize,
        value: u64,
        timeout: Duration,
    ) -> Result<(), PeerWaitError>;
    /// Blocks until imported `semaphore` reaches `value`.
    fn wait(&self, semaphore: usize, value: u64, timeout: Duration) -> Result<(), PeerWaitError>;
    /// Sends the host's tracked signals, committed with `origin` and `frontier`, to the ranks
    /// that wait on them.
    fn announce(
        &self,
        signals: &[(SemaphoreId, u64)],
        origin: Point,
        frontier: &Frontier<FRONTIER_CAPACITY>,
    );
    /// Fails `semaphore` here and tells the ranks that wait on it.
    fn fail(&self, semaphore: SemaphoreId, failure: Failure);
    /// Sums `data` element-wise across every rank, in place; every rank calls it at the same
    /// collective step with equally long `data`. Gives up after `timeout`
    /// ([`PeerWaitError::TimedOut`]: some rank had not joined), leaving `data` as it was.
    fn sum_across_ranks(&self, data: &mut [f64], timeout: Duration) -> Result<(), PeerWaitError>;
}

/// Why a wait on another rank's value returned without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerWaitError {
    /// The semaphore failed (on its rank, or here because its messages could not be trusted).
    Failed,
    /// The time ran out (the semaphore is failed here, as its rank is presumed gone).
    TimedOut,
}

/// Runs this rank's share of `scenario` (checked into `plan`): the operations of its own
/// queues, and host steps on rank 0, reaching the other ranks through `peers`. Every queue is
/// declared on every rank, so that a queue's axis — the name frontiers give it — is the same
/// number everywhere; a queue of another rank is declared on the CPU driver with one ring slot
/// and never used. The outcome holds this rank's records (what it did not run stays
/// unsubmitted): [`gather`](super::gather::gather) makes the whole run's of every rank's.
pub fn run_share<'s>(
    scenario: &'s Scenario,
    plan: &Plan,
    options: RunOptions,
    share: &Share,
    peers: &dyn Peers,
) -> Result<Outcome<'s>, ScenarioError> {
    let mut runner = Runner::new(scenario, plan, options, Some(share))?;
    let device = runner.device.share();
    peers
        .connect(device, &runner.semaphore_ids)
        .map_err(|error| ScenarioError::in_file(&scenario.path, error))?;
    runner.peers = Some(peers);
    let mut outcome = runner.run()?;
    // Across ranks, a share stopped at its deadline is the error that says what was stuck:
    // rank 0 prints every rank's.
    match outcome.timed_out.take() {
        Some(timed_out) => Err(timed_out.error),
        None => Ok(outcome),
    }
}

/// The runner's device: its own, or shared for as long as the process lives with the code that
/// moves values between ranks.
enum DeviceHold {
    Own(Device),
    Shared(&'static Device),
    /// Only while it changes hands.
    Moving,
}

impl DeviceHold {
    /// Makes the device live as long as the process (what a cross-rank link requires of it).
    fn share(&mut self) -> &'static Device {
        let device = match std::mem::replace(self, DeviceHold::Moving) {
            DeviceHold::Own(device) => Box::leak(Box::new(device)),
            DeviceHold::Shared(device) => device,
            DeviceHold::Moving => unreachable!("a device is never left moving"),
        };
        *self = DeviceHold::Shared(device);
        device
    }

    /// Shuts an own device down within `grace`; a shared one stays up for the code it is
    /// shared with, which stops when the process does.
    fn shutdown(self, grace: Duration) {
        if let DeviceHold::Own(device) = self {
            let _ = device.shutdown(grace);
        }
    }
}

impl std::ops::Deref for DeviceHold {
    type Target = Device;

    fn deref(&self) -> &Device {
        match self {
            DeviceHold::Own(device) => device,
            DeviceHold::Shared(device) => device,
            DeviceHold::Moving => unreachable!("a device is never left moving"),
        }
    }
}

/// Ring slots a queue gets at least (when it has that many operations): room to submit ahead
/// of execution beyond what the plan strictly needs.
const RING_FLOOR: usize = 64;

/// What a run sizes its device by: the plan's needs, raised to a floor that lets the submitter
/// run ahead (rings) and keeps late waiters exact (histories), but never beyond what the
/// workload could use — memory follows the work, not worst case times count.
struct Sizes {
    queue_slots: Vec<usize>,
    history_slots: Vec<usize>,
    allocas: usize,
}

impl Sizes {
    fn of(scenario: &Scenario, plan: &Plan) -> Sizes {
        let mut ops = vec![0usize; scenario.queues.len()];
        let mut signals = vec![0usize; scenario.semaphores.len()];
        let mut allocas = 0;
        for op in &scenario.ops {
            if let Target::Queue(queue) = op.target {
                ops[queue] += 1;
            }
            for &(semaphore, _) in scenario.signals(op) {
                signals[semaphore] += 1;
            }
            allocas += usize::from(matches!(op.work, WorkSpec::Alloca { .. }));
        }
        let queue_slots = ops
            .iter()
            .zip(&plan.queue_slots)
            .map(|(&ops, &needed)| needed.max(ops.min(RING_FLOOR)).max(1))
            .collect();
        // Every signal plus the newest reached one fits, up to the device's default: no value
        // of a small timeline ages out.
        let history_slots = signals
            .iter()
            .zip(&plan.history_slots)
            .map(|(&signals, &needed)| {
                needed.max((signals + 1).min(DEFAULT_SEMAPHORE_HISTORY)).max(MIN_HISTORY_SLOTS)
            })
            .collect();
        Sizes { queue_slots, history_slots, allocas }
    }
}

struct Runner<'s, 'p> {
    scenario: &'s Scenario,
    options: RunOptions,
    device: DeviceHold,
    /// This rank's share, when the run spans ranks.
    share: Option<&'p Share>,
    /// The other ranks, once connected.
    peers: Option<&'p dyn Peers>,
    /// Per semaphore, the highest value the operations before the current one (in file order,
    /// on any rank) signal it to.
    signalled: Vec<u64>,
    recorder: Arc<Recorder>,
    host_timeline: HostTimeline,
    /// The device's ID of each declared semaphore, in declaration order.
    semaphore_ids: Vec<SemaphoreId>,
    host_calls: Vec<HostCallId>,
    command_buffers: Vec<CommandBufferId>,
    queues: Vec<QueueRecord>,
    /// Per compute or copy operation, in file order: its index and the check of its result.
    compute: Vec<(usize, ComputeCheck)>,
    /// The channel `all_reduce` steps run on: one axis for the whole world of ranks.
    channel: CollectiveChannel,
    registered: drivers::Registered,
    /// Per operation, once submitted or performed (`queued` false until then).
    records: Vec<OpRecord>,
    /// The operation the runner is at, in file order (where it stopped, if it did).
    reached: usize,
    waits: Vec<WaitRecord>,
    frontiers: FrontierRecorder,
}

/// What the device holds for an op that needs registration.
#[derive(Clone, Copy)]
enum Registered {
    Host(HostCallId),
    Buffer(CommandBufferId),
}

fn host_endpoint(axis: Axis) -> Endpoint {
    Endpoint {
        machine: 0,
        process: 0,
        device_group: u32::MAX,
        device: u32::MAX,
        queue: axis.to_bits(),
    }
}

impl<'s, 'p> Runner<'s, 'p> {
    fn new(
        scenario: &'s Scenario,
        plan: &Plan,
        options: RunOptions,
        share: Option<&'p Share>,
    ) -> Result<Runner<'s, 'p>, ScenarioError> {
        let hosts = |target: Target| share.is_none_or(|share| share.hosts(target));
        let fail = |message: String| ScenarioError::in_file(&scenario.path, message);
        let sizes = Sizes::of(scenario, plan);
        let n = scenario.ops.len();
        let recorder = Arc::new(Recorder {
            ops: (0..n)
                .map(|_| OpEvents {
                    start_ns: AtomicU64::new(0),
                    end_ns: AtomicU64::new(0),
                    worker: AtomicU32::new(NO_WORKER),
                    status: AtomicU32::new(STATUS_PENDING),
                    speculation: AtomicU32::new(0),
                })
                .collect(),
            finished: Mutex::new(0),
            changed: Condvar::new(),
        });
        let host_axis = allocate_axis(share.map_or(0, |share| share.rank), Domain::Host)
            .map_err(|e| fail(format!("host axis: {e}")))?;
        let ranks = share.map_or(1, |share| share.placement.size);
        let channel = Axis::try_new(COLLECTIVE_MACHINE, Domain::Collective, 0)
            .and_then(|axis| CollectiveChannel::new(axis, ranks).ok())
            .ok_or_else(|| fail("no collective channel for the ranks".to_string()))?;
        let mut pool = PoolConfig::with_workers(scenario.workers);
        pool.name = "causeway".to_string();
        let mut builder = Device::builder(pool);
        let hosted: Vec<bool> =
            (0..scenario.queues.len()).map(|queue| hosts(Target::Queue(queue))).collect();
        let mut drivers = Drivers::new(scenario, options.all_cpu, &hosted).map_err(fail)?;
        let mut host_calls = Vec::new();
        let mut command_buffers = Vec::new();
        let mut compute = Vec::new();
        for (index, op) in scenario.ops.iter().enumerate() {
            if !hosts(op.target) {
                continue;
            }
            match op.work {
                WorkSpec::Host { duration, fail } => {
                    host_calls.push(builder.host_call(move |_| {
                        spin_for(duration);
                        fail.map_or(Ok(()), |code| Err(Failure::Application(code)))
                    }))
                }
                WorkSpec::Tiles { regions, tiles, duration } => {
                    let driver = match op.target {
                        Target::Queue(queue) => scenario.queues[queue].driver,
                        Target::Host => DriverKind::Cpu,
                    };
                    let recorded = drivers.record_tiles(driver, regions, tiles, duration);
                    let at = |error| {
                        ScenarioError::at(&scenario.path, op.line, format!("tiles: {error}"))
                    };
                    command_buffers.push(recorded.map_err(at)?)
                }
                WorkSpec::Compute { kernel, elements, tiles, regions } => {
                    let Target::Queue(queue) = op.target else { continue };
                    let driver = scenario.queues[queue].driver;
                    let sizes = (kernel, elements, tiles, regions);
                    let (buffer, check) = drivers
                        .record_compute(driver, sizes)
                        .map_err(|error| ScenarioError::at(&scenario.path, op.line, error))?;
                    command_buffers.push(buffer);
                    compute.push((index, check));
                }
                WorkSpec::Copy { bytes } => {
                    let Target::Queue(queue) = op.target else { continue };
                    let driver = scenario.queues[queue].driver;
                    let (buffer, check) = drivers
                        .record_copy(driver, bytes)
                        .map_err(|error| ScenarioError::at(&scenario.path, op.line, error))?;
                    command_buffers.push(buffer);
                    compute.push((index, check));
                }
                _ => {}
            }
        }
        let registered = drivers.register(&mut builder, scenario.workers);
        let mut queues = Vec::with_capacity(scenario.queues.len());
        let mut queue_ids = Vec::with_capacity(scenario.queues.len());
        for ((queue, &slots), &hosted) in
            scenario.queues.iter().zip(&sizes.queue_slots).zip(&hosted)
        {
            let mut config = QueueConfig::default();
            config.machine = queue.machine;
            config.device = queue.device;
            config.device_group = queue.group;
            config.wait_before_signal = queue.wait_before_signal;
            // Another rank's queue only holds its axis here: it is never submitted to.
            config.capacity = if hosted { slots } else { 1 };
            let kind = if hosted { queue.driver } else { DriverKind::Cpu };
            let (driver, id, adapter) = registered.driver(kind);
            config.driver = id;
            queues.push(QueueRecord { driver, adapter });
            queue_ids.push(builder.queue(config));
        }
        let mut semaphore_ids = Vec::with_capacity(scenario.semaphores.len());
        for (semaphore, &history) in scenario.semaphores.iter().zip(&sizes.history_slots) {
            let home = match semaphore.home {
                Home::Queue(queue) => queue_ids
                    .get(queue)
                    .and_then(|&id| builder.endpoint(id))
                    .ok_or_else(|| fail(format!("queue {queue} got no axis")))?,
                Home::Host => host_endpoint(host_axis),
            };
            if history > MAX_HISTORY_SLOTS {
                return Err(ScenarioError::at(
                    &scenario.path,
                    semaphore.line,
                    format!(
                        "semaphore `{}` can have {} signals pending at once; a history holds at most {MAX_HISTORY_SLOTS}",
                        semaphore.name,
                        history - 2
                    ),
                ));
            }
            let mut config = SemaphoreConfig::new(semaphore.initial, semaphore.scope, home);
            config.history = history;
            semaphore_ids.push(builder.semaphore_config(config));
        }
        builder.memory(scenario.buffers.len(), scenario.memory_quota);
        // One record per alloca: reservations never wait for one.
        builder.allocation_records(sizes.allocas.max(1));
        builder.observer(recorder.clone());
        let device = builder.build().map_err(|e| fail(format!("cannot start the device: {e}")))?;
        let host_timeline = HostTimeline::new(host_axis, host_endpoint(host_axis));
        let queue_axes = scenario.queues.iter().enumerate().filter_map(|(index, queue)| {
            device
                .queue(index)
                .and_then(|id| device.axis(id))
                .map(|axis| (axis, queue.name.clone()))
        });
        let host_axis = (host_timeline.axis(), super::parse::HOST.to_string());
        let channel_axis = (channel.axis(), super::parse::COLLECTIVE.to_string());
        let frontiers = FrontierRecorder::new(queue_axes.chain([host_axis, channel_axis]));
        let waits = scenario.ops.iter().map(|op| scenario.waits(op).len()).sum();
        Ok(Runner {
            scenario,
            options,
            device: DeviceHold::Own(device),
            share,
            peers: None,
            signalled: vec![0; scenario.semaphores.len()],
            recorder,
            host_timeline,
            semaphore_ids,
            host_calls,
            command_buffers,
            queues,
            compute,
            channel,
            registered,
            records: vec![OpRecord::UNSUBMITTED; n],
            reached: 0,
            waits: Vec::with_capacity(waits),
            frontiers,
        })
    }

    fn run(mut self) -> Result<Outcome<'s>, ScenarioError> {
        let started = Instant::now();
        // A timeout too large to add to now is no deadline at all.
        let deadline = started.checked_add(self.options.timeout);
        match self.perform(started, deadline) {
            Ok(()) => Ok(self.finish(started.elapsed(), None)),
            Err(Halt::Stuck(reason)) => Ok(self.finish(started.elapsed(), Some(reason))),
            Err(Halt::Invalid(error)) => {
                // Within a bound, so that work which never returns does not keep the process.
                self.device.shutdown(SHUTDOWN_GRACE);
                Err(error)
            }
        }
    }

    /// Submits and performs every operation in file order, then waits for the queues.
    fn perform(&mut self, started: Instant, deadline: Option<Instant>) -> Result<(), Halt> {
        let mut host_calls = self.host_calls.clone().into_iter();
        let mut command_buffers = self.command_buffers.clone().into_iter();
        let mut queue_ops = 0;
        for (index, op) in self.scenario.ops.iter().enumerate() {
            self.reached = index;
            if self.share.is_some_and(|share| !share.performs(op)) {
                self.note_signals(op);
                continue;
            }
            match op.target {
                Target::Queue(queue) => {
                    let registered = match op.work {
                        WorkSpec::Host { .. } => host_calls.next().map(Registered::Host),
                        WorkSpec::Tiles { .. }
                        | WorkSpec::Compute { .. }
                        | WorkSpec::Copy { .. } => command_buffers.next().map(Registered::Buffer),
                        _ => None,
                    };
                    self.submit(index, op, queue, registered, deadline)?;
                    queue_ops += 1;
                }
                Target::Host => match op.work {
                    WorkSpec::AllReduce { elements } => {
                        self.collective_step(index, op, elements, deadline)?
                    }
                    _ => self.host_step(index, op, deadline)?,
                },
            }
            self.note_signals(op);
        }
        self.wait_for_queues(queue_ops, started, deadline)
    }

    /// Raises [`Runner::signalled`] by `op`'s signals.
    fn note_signals(&mut self, op: &OpSpec) {
        for &(semaphore, value) in self.scenario.signals(op) {
            let highest = &mut self.signalled[semaphore];
            *highest = (*highest).max(value);
        }
    }

    fn op_error(&self, op: &OpSpec, message: impl std::fmt::Display) -> ScenarioError {
        ScenarioError::at(
            &self.scenario.path,
            op.line,
            format!("op `{}`: {message}", self.scenario.op_name(op)),
        )
    }

    fn submit(
        &mut self,
        index: usize,
        op: &OpSpec,
        queue: usize,
        registered: Option<Registered>,
        deadline: Option<Instant>,
    ) -> Result<(), Halt> {
        let work = match (op.work, registered) {
            (WorkSpec::Noop, _) => Work::Barrier,
            (WorkSpec::Spin(duration), _) => Work::Spin(duration),
            (WorkSpec::Sleep(duration), _) => Work::Sleep(duration),
            (WorkSpec::Host { .. }, Some(Registered::Host(call))) => Work::Host(call),
            (
                WorkSpec::Tiles { .. } | WorkSpec::Compute { .. } | WorkSpec::Copy { .. },
                Some(Registered::Buffer(buffer)),
            ) => Work::Execute(buffer),
            (WorkSpec::Alloca { buffer, bytes }, _) => {
                Work::Alloca { buffer: BufferId(buffer as u32), bytes }
            }
            (WorkSpec::Dealloca { buffer }, _) => Work::Dealloca(BufferId(buffer as u32)),
            (
                WorkSpec::Host { .. }
                | WorkSpec::Tiles { .. }
                | WorkSpec::Compute { .. }
                | WorkSpec::Copy { .. },
                _,
            ) => {
                unreachable!("one host call or command buffer is registered per such op")
            }
            (WorkSpec::AllReduce { .. }, _) => {
                unreachable!("all_reduce steps are host steps (refused on queues at load)")
            }
        };
        let waits: Vec<(SemaphoreId, u64)> =
            self.scenario.waits(op).iter().map(|&(s, v)| (self.semaphore_ids[s], v)).collect();
        let signals: Vec<(SemaphoreId, u64)> =
            self.scenario.signals(op).iter().map(|&(s, v)| (self.semaphore_ids[s], v)).collect();
        for &(semaphore, value) in self.scenario.waits(op) {
            self.await_announced(op, semaphore, value, deadline)?;
        }
        let submit_ns = self.device.now_ns();
        let request =
            Op { waits: &waits, signals: &signals, work, tag: index as u64, ..Default::default() };
        // A full ring or history makes the submission wait for earlier work, up to the deadline.
        let queue_id = self.device.queue(queue).ok_or_else(|| {
            Halt::Stuck(format!(
                "op `{}` names queue {queue}, which the device has not got",
                self.scenario.op_name(op)
            ))
        })?;
        let submitted = match (self.peers, deadline) {
            (Some(peers), _) => peers.submit(queue_id, &request, remaining(deadline)),
            (None, Some(deadline)) => {
                self.device.submit_timeout(queue_id, &request, remaining(Some(deadline)))
            }
            (None, None) => self.device.submit(queue_id, &request),
        };
        let receipt = match submitted {
            Ok(receipt) => receipt,
            Err(SubmitError::TimedOut(resource)) => {
                return Err(Halt::Stuck(format!(
                    "the submitter waited past the {:?} deadline for room to submit op `{}` (line {}) on queue {}: {resource}",
                    self.options.timeout,
                    self.scenario.op_name(op),
                    op.line,
                    self.scenario.queues[queue].name
                )));
            }
            Err(error) => {
                return Err(Halt::Invalid(self.op_error(op, self.describe_submit_error(op, error))))
            }
        };
        let waits_start = self.waits.len();
        let waits = self.scenario.waits(op).iter().zip(receipt.waits.iter());
        self.waits.extend(waits.map(|(&(semaphore, value), outcome)| {
            let resolved = match *outcome {
                WaitOutcome::Resolved(resolved) => Some(resolved),
                _ => None,
            };
            WaitRecord::new(semaphore, value, resolved)
        }));
        self.records[index] = OpRecord {
            epoch: receipt.point.epoch,
            submit_ns,
            waits: Span::since(&self.waits, waits_start),
            frontier: self.frontiers.record(&receipt.frontier),
            queued: true,
            ..OpRecord::UNSUBMITTED
        };
        Ok(())
    }

    /// When `semaphore` is imported from another rank and an operation earlier in the file
    /// signals it to `value`: blocks until that signal is recorded here with the signaller's
    /// frontier, so that what waits on it imports that frontier and is queued behind it (one
    /// message from the signalling rank, no round trip). A failed semaphore returns at once
    /// (the wait fails as any failed wait does).
    ///
    /// A value no earlier operation signals is waited for on the device as in one process
    /// (wait-before-signal): blocking the submitter for it could deadlock. Blocking only on
    /// earlier signals cannot: the earliest blocked operation in file order, on any rank,
    /// waits for one before it, which its rank has submitted (every rank submits its
    /// operations in file order), so its announcement is on its way.
    fn await_announced(
        &self,
        op: &OpSpec,
        semaphore: usize,
        value: u64,
        deadline: Option<Instant>,
    ) -> Result<(), Halt> {
        let (Some(share), Some(peers)) = (self.share, self.peers) else { return Ok(()) };
        let Some(exporter) = share.exporter_of(semaphore) else { return Ok(()) };
        if self.signalled[semaphore] < value {
            return Ok(());
        }
        match peers.await_announced(semaphore, value, remaining(deadline)) {
            Ok(()) | Err(PeerWaitError::Failed) => Ok(()),
            Err(PeerWaitError::TimedOut) => Err(Halt::Stuck(format!(
                "op `{}` (line {}) waits for {}>={value} from rank {exporter}, which did not \
                 announce it within the {:?} deadline",
                self.scenario.op_name(op),
                op.line,
                self.scenario.semaphores[semaphore].name,
                self.options.timeout
            ))),
        }
    }

    fn describe_submit_error(&self, op: &OpSpec, error: SubmitError) -> String {
        let name = |s: usize| &self.scenario.semaphores[s].name;
        match error {
            SubmitError::WaitOutOfScope { wait } => {
                let s = self.scenario.waits(op)[wait].0;
                format!(
                    "semaphore `{}` ({}) is not visible to this queue",
                    name(s),
                    self.scenario.semaphores[s].scope.name()
                )
            }
            SubmitError::Signal { signal, error, .. } => {
                let (semaphore, value) = self.scenario.signals(op)[signal];
                format!("signal {}={value}: {error}", name(semaphore))
            }
            other => other.to_string(),
        }
    }

    fn semaphore(&self, index: usize) -> &DeviceSemaphore {
        self.device
            .semaphore(self.semaphore_ids[index])
            .expect("declared semaphores exist on the device")
    }

    fn host_step(
        &mut self,
        index: usize,
        op: &OpSpec,
        deadline: Option<Instant>,
    ) -> Result<(), Halt> {
        let submit_ns = self.device.now_ns();
        for &(semaphore, value) in self.scenario.waits(op) {
            self.await_announced(op, semaphore, value, deadline)?;
        }
        let mut step = self.host_timeline.step();
        let waits_start = self.waits.len();
        for &(semaphore, value) in self.scenario.waits(op) {
            let device_semaphore =
                self.device.semaphore(self.semaphore_ids[semaphore]).expect("declared");
            // `None`: the semaphore had failed; the step fails with it.
            let Ok(resolved) = step.wait(device_semaphore, value) else {
                let spec = &self.scenario.semaphores[semaphore];
                return Err(Halt::Invalid(ScenarioError::at(
                    &self.scenario.path,
                    op.line,
                    format!(
                        "op `{}`: semaphore `{}` ({}) is not visible to the host",
                        self.scenario.op_name(op),
                        spec.name,
                        spec.scope.name()
                    ),
                )));
            };
            self.waits.push(WaitRecord::new(semaphore, value, resolved));
        }
        for &(semaphore, value) in self.scenario.waits(op) {
            let device_semaphore =
                self.device.semaphore(self.semaphore_ids[semaphore]).expect("declared");
            let imported = self.share.and_then(|share| share.exporter_of(semaphore)).is_some();
            let reached = match self.peers {
                // Reached on the rank that exports it; a failure there fails the local copy.
                Some(peers) if imported => {
                    match peers.wait(semaphore, value, remaining(deadline)) {
                        Ok(()) => true,
                        Err(PeerWaitError::Failed) => {
                            let failure = device_semaphore.failure_for(value);
                            step.fail(failure.unwrap_or(Failure::Aborted));
                            true
                        }
                        Err(_) => false,
                    }
                }
                _ => step.block_until(device_semaphore, value, deadline).is_ok(),
            };
            if !reached {
                let waits = Span::since(&self.waits, waits_start);
                self.records[index] = OpRecord::at_deadline(submit_ns, waits, None);
                let name = &self.scenario.semaphores[semaphore].name;
                return Err(Halt::Stuck(format!(
                    "op `{}` (line {}) on the host waits for {name}>={value} (at {}) past the {:?} deadline",
                    self.scenario.op_name(op),
                    op.line,
                    device_semaphore.value(),
                    self.options.timeout
                )));
            }
        }
        // Started once its waits have ended, as a queue operation starts once its gate opens.
        let start_ns = self.device.now_ns();
        let finished = match op.work {
            WorkSpec::Spin(duration) => work_until(duration, deadline, Pace::Busy),
            WorkSpec::Sleep(duration) => work_until(duration, deadline, Pace::Blocking),
            _ => true,
        };
        if !finished {
            let waits = Span::since(&self.waits, waits_start);
            self.records[index] = OpRecord::at_deadline(submit_ns, waits, Some(start_ns));
            return Err(Halt::Stuck(format!(
                "op `{}` (line {}) on the host was still running its work at the {:?} deadline",
                self.scenario.op_name(op),
                op.line,
                self.options.timeout
            )));
        }
        // Ended before anything it signals, fails or cancels is published: what waits on it
        // may start at once.
        let end_ns = self.device.now_ns();
        let (device, ids) = (&self.device, &self.semaphore_ids);
        let signals: Vec<(&DeviceSemaphore, u64)> = self
            .scenario
            .signals(op)
            .iter()
            .map(|&(semaphore, value)| {
                (device.semaphore(ids[semaphore]).expect("declared semaphores exist"), value)
            })
            .collect();
        let (point, frontier, result) = if op.external {
            // From outside the scheduler's knowledge: the values arrive with nothing to
            // import (a taint window), so no operation of the host's timeline signals them.
            let (point, frontier, failure) = step.commit_untracked();
            for (index, &(target, value)) in signals.iter().enumerate() {
                let result = match failure {
                    Some(failure) => {
                        target.fail(failure);
                        Ok(())
                    }
                    None => target.signal_external(value),
                };
                // A refusal because the timeline already failed is the failure spreading; any
                // other refusal is the scenario's fault.
                if let Err(error) = result.or_else(|error| match error {
                    SignalError::Failed(_) => Ok(()),
                    error => Err(error),
                }) {
                    return Err(Halt::Invalid(self.signal_error(op, index, error)));
                }
            }
            (point, frontier, failure.map_or(Ok(()), Err))
        } else {
            let committed = step.commit(&signals).map_err(|refused| {
                Halt::Invalid(self.signal_error(op, refused.index, refused.error))
            })?;
            if let Some(peers) = self.peers {
                let signalled: Vec<(SemaphoreId, u64)> =
                    self.scenario.signals(op).iter().map(|&(s, v)| (ids[s], v)).collect();
                peers.announce(&signalled, committed.point, &committed.frontier);
            }
            let (point, frontier) = (committed.point, committed.frontier);
            // A failed wait or a signal on a failed timeline dooms it; the host's work itself
            // does not fail.
            (point, frontier, committed.finish(Ok(())))
        };
        if let Some((semaphore, code)) = op.fail {
            match self.peers {
                Some(peers) => {
                    peers.fail(self.semaphore_ids[semaphore], Failure::Application(code))
                }
                None => {
                    self.semaphore(semaphore).fail(Failure::Application(code));
                }
            }
        }
        if let Some((queue, after)) = op.cancel {
            if let Some(axis) = self.device.queue(queue).and_then(|id| self.device.axis(id)) {
                self.device.cancel_speculative(Rejection::new(axis, after));
            }
        }
        self.records[index] = OpRecord {
            epoch: point.epoch,
            submit_ns,
            start_ns,
            end_ns,
            waits: Span::since(&self.waits, waits_start),
            frontier: self.frontiers.record(&frontier),
            worker: None,
            queued: false,
            status: if result.is_ok() { Status::Ok } else { Status::Failed },
            speculation: None,
        };
        Ok(())
    }

    /// An `all_reduce` step, performed by every rank at this point of the file (one process is
    /// one rank). It waits for the waits whose values come from this rank — what its
    /// contribution depends on; the collective itself orders the other ranks', which are
    /// recorded as elided here — then contributes [`contribution`]s, receives their sums over
    /// every rank (checked after the run) and signals its one semaphore with a single frontier
    /// entry: the collective channel's round. That entry stands for every rank's contribution,
    /// so whatever waits on the result knows one entry for the collective at any rank count
    /// (knowing less than everything behind it is sound: knowledge only ever elides less).
    ///
    /// A failed wait on any rank fails the result on every rank: each contribution carries a
    /// failure count, summed with the values. Every rank takes part in the reduction whatever
    /// happened to its waits, or the others would wait for it forever.
    fn collective_step(
        &mut self,
        index: usize,
        op: &OpSpec,
        elements: u32,
        deadline: Option<Instant>,
    ) -> Result<(), Halt> {
        let submit_ns = self.device.now_ns();
        let waits_start = self.waits.len();
        let mut failed = false;
        for &(semaphore, value) in self.scenario.waits(op) {
            if !self.share.is_none_or(|share| share.contributes(semaphore)) {
                let resolved = WaitResolution {
                    resolution: Resolution::Elided,
                    tainted: false,
                    aged_out: false,
                };
                self.waits.push(WaitRecord::new(semaphore, value, Some(resolved)));
                continue;
            }
            let device_semaphore = self.semaphore(semaphore);
            let resolution = if device_semaphore.value() >= value {
                Resolution::Satisfied
            } else {
                Resolution::DeviceWait
            };
            let resolved = match blocking::wait_until(device_semaphore, value, deadline) {
                Ok(_) => Some(WaitResolution { resolution, tainted: false, aged_out: false }),
                Err(HostWaitError::Failed(_)) => {
                    failed = true;
                    None
                }
                Err(_) => {
                    let name = &self.scenario.semaphores[semaphore].name;
                    let reason = format!(
                        "all_reduce step `{}` (line {}) waits for {name}>={value} (at {}) past the {:?} deadline",
                        self.scenario.op_name(op),
                        op.line,
                        device_semaphore.value(),
                        self.options.timeout
                    );
                    let waits = Span::since(&self.waits, waits_start);
                    self.records[index] = OpRecord::at_deadline(submit_ns, waits, None);
                    return Err(Halt::Stuck(reason));
                }
            };
            self.waits.push(WaitRecord::new(semaphore, value, resolved));
        }
        let start_ns = self.device.now_ns();
        let (rank, ranks) = self.share.map_or((0, 1), |share| (share.rank, share.placement.size));
        let elements = elements as usize;
        let mut data: Vec<f64> = (0..elements).map(|i| contribution(rank, i)).collect();
        data.push(f64::from(u8::from(failed)));
        if let Some(peers) = self.peers {
            match peers.sum_across_ranks(&mut data, remaining(deadline)) {
                Ok(()) => {}
                // A rank that never joins (killed, or stuck before this step) ends the run at
                // the deadline, as a wait would.
                Err(PeerWaitError::TimedOut) => {
                    return Err(Halt::Stuck(format!(
                        "all_reduce step `{}` (line {}) was still waiting for every rank to join it at the {:?} deadline",
                        self.scenario.op_name(op),
                        op.line,
                        self.options.timeout
                    )))
                }
                Err(PeerWaitError::Failed) => {
                    return Err(Halt::Invalid(
                        self.op_error(op, "MPI refused the all-reduce across ranks"),
                    ))
                }
            }
        }
        let any_failed = data.pop().is_some_and(|failures| failures > 0.0);
        let sums: Vec<f32> = data.iter().map(|&sum| sum as f32).collect();
        let expected =
            (0..elements).map(|i| (0..ranks).map(|r| contribution(r, i)).sum::<f64>() as f32);
        self.compute.push((index, ComputeCheck::host(&sums, expected.collect())));

        let round = self.channel.begin_round().map_err(|error| {
            Halt::Invalid(self.op_error(op, format!("collective channel: {error:?}")))
        })?;
        let point = round.point();
        let mut frontier = Frontier::new();
        frontier.insert_or_raise(point.axis, point.epoch);
        let (semaphore, value) = self.scenario.signals(op)[0];
        // Ended before its result is published, as a host step (see `host_step`).
        let end_ns = self.device.now_ns();
        let result = if any_failed {
            self.semaphore(semaphore).fail(Failure::Aborted);
            Err(Failure::Aborted)
        } else {
            match self.semaphore(semaphore).signal(value, point, &frontier) {
                Ok(()) => Ok(()),
                // The timeline failed meanwhile (a host step's `fail`, say): a run-time outcome
                // that fails this step, not a fault of the file.
                Err(SignalError::Failed(failure)) => Err(failure),
                Err(error) => return Err(Halt::Invalid(self.signal_error(op, 0, error))),
            }
        };
        self.records[index] = OpRecord {
            epoch: point.epoch,
            submit_ns,
            start_ns,
            end_ns,
            waits: Span::since(&self.waits, waits_start),
            frontier: self.frontiers.record(&frontier),
            worker: None,
            queued: false,
            status: if result.is_ok() { Status::Ok } else { Status::Failed },
            speculation: None,
        };
        Ok(())
    }

    /// The scenario's fault: signal number `index` of `op` was refused.
    fn signal_error(&self, op: &OpSpec, index: usize, error: SignalError) -> ScenarioError {
        let (semaphore, value) = self.scenario.signals(op)[index];
        let name = &self.scenario.semaphores[semaphore].name;
        self.op_error(op, format!("signal {name}={value}: {error}"))
    }

    fn wait_for_queues(
        &self,
        total: usize,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<(), Halt> {
        let show = self.options.progress && std::io::stderr().is_terminal();
        let mut finished = self.recorder.finished.lock();
        let mut drawn = false;
        while *finished < total {
            let now = Instant::now();
            let wait = match deadline {
                Some(deadline) if now >= deadline => {
                    let unfinished = total - *finished;
                    drop(finished);
                    if drawn {
                        eprintln!();
                    }
                    return Err(Halt::Stuck(format!(
                        "{unfinished} of {total} queue ops had not finished"
                    )));
                }
                Some(deadline) => (deadline - now).min(PROGRESS_TICK),
                None => PROGRESS_TICK,
            };
            finished = self.recorder.changed.wait_timeout(finished, wait).0;
            if show && started.elapsed() > Duration::from_millis(500) {
                draw_progress(*finished, total);
                drawn = true;
            }
        }
        if drawn {
            eprintln!();
        }
        Ok(())
    }

    /// Records how the run stood when it was stopped at its deadline: each operation's events
    /// (what still ran and what had not started), every wait not reached, and the report of
    /// what was stuck — all before the device is stopped, which fails and cancels that work.
    fn stop_at_deadline(&mut self, reason: String) -> TimedOut {
        let at_ns = self.device.now_ns();
        {
            // Every finish counted before this lock is visible with its times.
            let _counted = self.recorder.finished.lock();
            record_events(&mut self.records, &self.recorder, Some(at_ns));
        }
        for (op, record) in self.scenario.ops.iter().zip(&mut self.records) {
            let performed_here = self.share.is_none_or(|share| share.performs(op));
            if !record.queued && record.status == Status::Cancelled && performed_here {
                // Never performed: the runner had not reached it, or stopped at it.
                record.status = Status::NotStarted;
            }
        }
        let mut pending_waits = Vec::new();
        for (index, (op, record)) in self.scenario.ops.iter().zip(&self.records).enumerate() {
            if record.status != Status::NotStarted {
                continue;
            }
            for &(semaphore, value) in self.scenario.waits(op) {
                let device_semaphore = self.semaphore(semaphore);
                let at = device_semaphore.value();
                if at < value && device_semaphore.failure().is_none() {
                    let op = u32::try_from(index).expect("operation indices fit in u32");
                    let semaphore = u32::try_from(semaphore).expect("semaphore indices fit in u32");
                    pending_waits.push(PendingWait { op, semaphore, value, at });
                }
            }
        }
        let error = self.stuck(&reason, at_ns);
        TimedOut { at_ns, timeout: self.options.timeout, reason, pending_waits, error }
    }

    /// The report of a run stopped at its deadline, from its records: what the runner was
    /// waiting for, then every queue operation still running (how long, on which worker) and
    /// every submitted one not started, with its unreached waits, and how many were never
    /// submitted. Long lists are cut after [`STUCK_LISTED`] lines each, with a count.
    fn stuck(&self, reason: &str, at_ns: u64) -> ScenarioError {
        let mut running = Vec::new();
        let mut waiting = Vec::new();
        let (mut running_total, mut waiting_total, mut unsubmitted) = (0, 0, 0);
        for (index, (op, record)) in self.scenario.ops.iter().zip(&self.records).enumerate() {
            let Target::Queue(queue) = op.target else { continue };
            if !record.queued {
                unsubmitted +=
                    usize::from(record.status == Status::NotStarted && index > self.reached);
                continue;
            }
            let queue = &self.scenario.queues[queue].name;
            let name = self.scenario.op_name(op);
            match record.status {
                Status::Running => {
                    running_total += 1;
                    if running.len() < STUCK_LISTED {
                        let on =
                            record.worker.map(|w| format!(", on worker {w}")).unwrap_or_default();
                        let seconds = at_ns.saturating_sub(record.start_ns) as f64 / 1e9;
                        running.push(format!(
                            "  op `{name}` (line {}) on queue {queue} was still running at the deadline (for {seconds:.3} s{on})",
                            op.line
                        ));
                    }
                }
                Status::NotStarted => {
                    waiting_total += 1;
                    if waiting.len() >= STUCK_LISTED {
                        continue;
                    }
                    let unmet: Vec<String> = self
                        .scenario
                        .waits(op)
                        .iter()
                        .filter(|&&(s, v)| {
                            self.semaphore(s).value() < v && self.semaphore(s).failure().is_none()
                        })
                        .map(|&(s, v)| {
                            format!(
                                "{}>={v} (at {})",
                                self.scenario.semaphores[s].name,
                                self.semaphore(s).value()
                            )
                        })
                        .collect();
                    let why = if unmet.is_empty() {
                        "behind earlier work".to_string()
                    } else {
                        format!("waits for {}", unmet.join(", "))
                    };
                    waiting
                        .push(format!("  op `{name}` (line {}) on queue {queue} {why}", op.line));
                }
                _ => {}
            }
        }
        let mut lines = vec![format!("timed out after {:?}: {reason}", self.options.timeout)];
        let host_running =
            self.records.iter().any(|record| !record.queued && record.status == Status::Running);
        if running_total == 0 && !host_running {
            lines.push("  nothing was running at the deadline: the run was stalled".to_string());
        }
        lines.extend(running);
        if running_total > STUCK_LISTED {
            lines.push(format!("  … and {} more running", running_total - STUCK_LISTED));
        }
        lines.extend(waiting);
        if waiting_total > STUCK_LISTED {
            lines.push(format!("  … and {} more waiting", waiting_total - STUCK_LISTED));
        }
        if unsubmitted > 0 {
            lines.push(format!("  {unsubmitted} later queue ops were never submitted"));
        }
        ScenarioError::in_file(&self.scenario.path, lines.join("\n")).deadlock()
    }

    /// Records the run. Stopped at its deadline (`stuck`: what the runner was waiting for), it
    /// is recorded as the deadline found it, then its device is shut down within
    /// [`SHUTDOWN_GRACE`] (work that never returns is abandoned on its worker, not joined); a
    /// run that finished drops its device, which joins the workers and makes every event
    /// visible.
    fn finish(mut self, wall: Duration, stuck: Option<String>) -> Outcome<'s> {
        let timed_out = stuck.map(|reason| self.stop_at_deadline(reason));
        let mut history = Vec::new();
        let (device, frontiers) = (&self.device, &mut self.frontiers);
        let semaphores = (self.semaphore_ids.iter())
            .map(|&id| {
                let semaphore = device.semaphore(id).expect("declared semaphores exist");
                let start = history.len();
                semaphore.with_history(|entries| {
                    history.extend(entries.iter().map(|entry| HistoryRecord {
                        value: entry.value,
                        frontier: frontiers.record(&entry.frontier),
                        tainted: entry.is_external(),
                        cancelled: entry.cancelled,
                        ran_on_rejected: entry.ran_on_rejected,
                    }))
                });
                SemaphoreRecord {
                    value: semaphore.value(),
                    failed: semaphore.failure().is_some() || semaphore.has_cancelled_signals(),
                    history: Span::since(&history, start),
                }
            })
            .collect();
        let memory = self.device.memory_stats();
        if timed_out.is_some() {
            self.device.shutdown(SHUTDOWN_GRACE);
        } else {
            // Joining the workers makes every event visible; nothing is left to cancel.
            drop(self.device);
            record_events(&mut self.records, &self.recorder, None);
        }
        let records = &self.records;
        // Collective steps' checks joined the registered ones as the steps ran.
        self.compute.sort_by_key(|(op, _)| *op);
        let compute = (self.compute.iter())
            .map(|(op, check)| ComputeRecord {
                op: *op,
                result: (records[*op].status == Status::Ok).then(|| check.verify()),
            })
            .collect();
        Outcome {
            scenario: self.scenario,
            ops: self.records,
            waits: self.waits,
            semaphores,
            history,
            points: self.frontiers.points,
            axis_names: self.frontiers.names,
            memory,
            wall,
            queues: self.queues,
            compute,
            vulkan: self.registered.vulkan().map(|(adapter, native_waits, validation_messages)| {
                VulkanRecord { adapter, native_waits, validation_messages }
            }),
            npu: self.registered.npu().map(|(adapter, counts)| NpuRecord {
                adapter,
                wait_descriptors: counts.emitted,
                elided: counts.elided,
                held: counts.held,
                ring_full: counts.ring_full,
            }),
            cuda: self.registered.cuda().map(|(adapter, counts)| CudaRecord {
                adapter,
                native_waits: counts.native,
                completed: counts.completed,
                elided: counts.elided,
                held: counts.held,
            }),
            timed_out,
        }
    }
}

/// What rank `rank` contributes at element `i` of an `all_reduce`: small whole numbers, so
/// every sum is exact in `f32` and is checked bit for bit.
fn contribution(rank: u16, i: usize) -> f64 {
    f64::from(rank + 1) * (i % 5 + 1) as f64
}

/// The machine of the collective channel's axis: the whole world's, never a rank's (as
/// `causeway-distributed` numbers its channels).
const COLLECTIVE_MACHINE: u16 = u16::MAX;

/// Copies each queued operation's events into its record. `deadline_ns`, when the run was
/// stopped then: an operation not finished is recorded as still running (until then) or not
/// started, as the deadline found it.
fn record_events(records: &mut [OpRecord], recorder: &Recorder, deadline_ns: Option<u64>) {
    for (record, events) in records.iter_mut().zip(&recorder.ops) {
        if !record.queued {
            continue;
        }
        record.start_ns = events.start_ns.load(Ordering::Relaxed);
        record.end_ns = events.end_ns.load(Ordering::Relaxed);
        let worker = events.worker.load(Ordering::Relaxed);
        record.worker = (worker != NO_WORKER).then_some(worker);
        // At the deadline, an end not visible yet is an operation ending then: still running.
        let ended = deadline_ns.is_none() || record.end_ns != 0;
        record.status = match events.status.load(Ordering::Relaxed) {
            STATUS_OK if ended => Status::Ok,
            STATUS_FAILED if ended => Status::Failed,
            STATUS_CANCELLED if ended => Status::Cancelled,
            _ if deadline_ns.is_none() => Status::Cancelled,
            _ if record.start_ns != 0 => Status::Running,
            _ => Status::NotStarted,
        };
        record.speculation = Speculation::from_code(events.speculation.load(Ordering::Relaxed));
    }
    let Some(deadline_ns) = deadline_ns else { return };
    for record in records.iter_mut().filter(|record| record.status == Status::Running) {
        record.end_ns = deadline_ns;
    }
}

/// What is left of the time before `deadline` (all of it when there is none).
fn remaining(deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::MAX, |deadline| deadline.saturating_duration_since(Instant::now()))
}

fn draw_progress(done: usize, total: usize) {
    const WIDTH: usize = 30;
    let filled = done * WIDTH / total.max(1);
    let mut stderr = std::io::stderr().lock();
    let _ = write!(
        stderr,
        "\r[{}{}] {done}/{total} ops",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled)
    );
    let _ = stderr.flush();
}

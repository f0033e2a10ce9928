//! Running a checked scenario on a CPU device and recording what happened.
//!
//! Operations are taken in file order. A queue operation is submitted and the runner moves on
//! (submit-before-wait is allowed); a host step acts on this thread at that point: it blocks
//! until its waits are reached, does its work, then signals as a tracked participant with its
//! own axis (or as an untracked outside source, or fails a semaphore). Then the runner waits
//! for every queue operation to finish, within a deadline.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use causeway_core::axis::{Axis, Domain};
use causeway_core::frontier::{Frontier, Point};
use causeway_core::queue::{Capabilities, QueueClock, Resolution};
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_driver_cpu::device::{
    allocate_axis, spin_for, BufferId, CommandBufferId, CpuDevice, DeviceKernel, DeviceSemaphore,
    HostCallId, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId, SemaphoreId, SubmitError,
    WaitOutcome, Work,
};
use causeway_driver_cpu::PoolConfig;

use super::model::{Home, OpSpec, Scenario, ScenarioError, Target, WorkSpec};
use crate::host::{self, HostWaitError};

/// How an operation ended, as the report spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Ran and signalled.
    Ok,
    /// Failed (and failed what it signals).
    Failed,
    /// Never ran.
    Cancelled,
}

impl Status {
    /// The report's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// One wait of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitRecord {
    /// Semaphore index.
    pub semaphore: usize,
    /// Waited value.
    pub value: u64,
    /// How it resolved; `None` when the semaphore had already failed.
    pub resolution: Option<Resolution>,
    /// The value lay in an external taint window.
    pub tainted: bool,
}

/// What happened to one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct OpRecord {
    /// Its `(axis, epoch)`.
    pub point: Point,
    /// What it knew, itself included.
    pub frontier: Frontier<8>,
    /// Its waits, in order.
    pub waits: Vec<WaitRecord>,
    /// When it was submitted (ns since the device started).
    pub submit_ns: u64,
    /// When it started.
    pub start_ns: u64,
    /// When it finished.
    pub end_ns: u64,
    /// The worker that ran it (`None` for host steps and cancelled operations).
    pub worker: Option<usize>,
    /// How it ended.
    pub status: Status,
}

/// One retained history entry of a semaphore.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryRecord {
    /// The signalled value.
    pub value: u64,
    /// The signalling operation, if tracked.
    pub origin: Option<Point>,
    /// What it knew.
    pub frontier: Frontier<8>,
    /// External (untracked) signal.
    pub tainted: bool,
}

/// A semaphore at the end of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct SemaphoreRecord {
    /// Final value.
    pub value: u64,
    /// Whether it failed.
    pub failed: bool,
    /// Retained history, oldest first.
    pub history: Vec<HistoryRecord>,
}

/// Everything a run produced.
#[derive(Debug)]
pub struct Outcome<'s> {
    /// The scenario.
    pub scenario: &'s Scenario,
    /// One record per operation, in file order.
    pub ops: Vec<OpRecord>,
    /// One record per semaphore, in declaration order.
    pub semaphores: Vec<SemaphoreRecord>,
    /// Names of the axes that can appear in frontiers.
    pub axes: Vec<(Axis, String)>,
    /// Stream-ordered memory totals.
    pub memory: causeway_driver_cpu::device::MemoryStats,
    /// Wall time of the run.
    pub wall: Duration,
}

impl Outcome<'_> {
    /// The display name of `axis`.
    pub fn axis_name(&self, axis: Axis) -> String {
        self.axes
            .iter()
            .find(|(a, _)| *a == axis)
            .map_or_else(|| format!("axis{}", axis.ordinal()), |(_, name)| name.clone())
    }
}

/// Options for a run.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Give up (reporting what is stuck) after this long.
    pub timeout: Duration,
    /// Show a progress bar on a terminal.
    pub progress: bool,
}

const STATUS_PENDING: usize = 0;
const STATUS_OK: usize = 1;
const STATUS_FAILED: usize = 2;
const STATUS_CANCELLED: usize = 3;

/// Collects start and finish events, indexed by operation (the op tag).
struct Recorder {
    start_ns: Vec<AtomicU64>,
    end_ns: Vec<AtomicU64>,
    worker: Vec<AtomicUsize>,
    status: Vec<AtomicUsize>,
    finished: Mutex<usize>,
    changed: Condvar,
}

impl Observer for Recorder {
    fn op_event(&self, _queue: usize, tag: u64, event: OpEvent) {
        let index = tag as usize;
        match event {
            OpEvent::Started { worker, at_ns } => {
                self.start_ns[index].store(at_ns, Ordering::Relaxed);
                self.worker[index].store(worker, Ordering::Relaxed);
            }
            OpEvent::Finished { at_ns, status, .. } => {
                if self.start_ns[index].load(Ordering::Relaxed) == 0 {
                    self.start_ns[index].store(at_ns, Ordering::Relaxed);
                }
                self.end_ns[index].store(at_ns, Ordering::Relaxed);
                let code = match status {
                    OpStatus::Ok => STATUS_OK,
                    OpStatus::Cancelled => STATUS_CANCELLED,
                    _ => STATUS_FAILED,
                };
                self.status[index].store(code, Ordering::Relaxed);
                // The mutex orders the stores above before the reader's loads.
                let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
                *finished += 1;
                self.changed.notify_all();
            }
            _ => {}
        }
    }
}

/// Runs `scenario` (already [`check`](super::check::check)ed).
pub fn run(scenario: &Scenario, options: RunOptions) -> Result<Outcome<'_>, ScenarioError> {
    Runner::new(scenario, options)?.run()
}

struct Runner<'s> {
    scenario: &'s Scenario,
    options: RunOptions,
    device: CpuDevice,
    recorder: Arc<Recorder>,
    host_clock: QueueClock<8>,
    host_calls: Vec<HostCallId>,
    command_buffers: Vec<CommandBufferId>,
    records: Vec<Option<OpRecord>>,
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

impl<'s> Runner<'s> {
    fn new(scenario: &'s Scenario, options: RunOptions) -> Result<Runner<'s>, ScenarioError> {
        let fail = |message: String| ScenarioError::in_file(&scenario.path, message);
        let n = scenario.ops.len();
        let recorder = Arc::new(Recorder {
            start_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
            end_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
            worker: (0..n).map(|_| AtomicUsize::new(usize::MAX)).collect(),
            status: (0..n).map(|_| AtomicUsize::new(STATUS_PENDING)).collect(),
            finished: Mutex::new(0),
            changed: Condvar::new(),
        });
        let host_axis =
            allocate_axis(0, Domain::Host).map_err(|e| fail(format!("host axis: {e}")))?;
        let mut pool = PoolConfig::with_workers(scenario.workers);
        pool.name = "causeway".to_string();
        let mut builder = CpuDevice::builder(pool);
        for queue in &scenario.queues {
            let mut config = QueueConfig::default();
            config.machine = queue.machine;
            config.device = queue.device;
            config.device_group = queue.group;
            config.wait_before_signal = queue.wait_before_signal;
            config.capacity = scenario.ops.len().max(1);
            builder.queue(config);
        }
        for semaphore in &scenario.semaphores {
            let home = match semaphore.home {
                Home::Queue(queue) => builder
                    .endpoint(QueueId(queue))
                    .ok_or_else(|| fail(format!("queue {queue} got no axis")))?,
                Home::Host => host_endpoint(host_axis),
            };
            builder.semaphore(semaphore.initial, semaphore.scope, home);
        }
        let mut host_calls = Vec::new();
        let mut command_buffers = Vec::new();
        for op in &scenario.ops {
            match op.work {
                WorkSpec::Host { duration, fail } => {
                    host_calls.push(builder.host_call(move || {
                        spin_for(duration);
                        fail.map_or(Ok(()), |code| Err(Failure::Application(code)))
                    }))
                }
                WorkSpec::Tiles { regions, tiles, duration } => {
                    let kernel =
                        || -> DeviceKernel { Box::new(move |_tile: u32| spin_for(duration)) };
                    let recorded = (0..regions).map(|_| (tiles, kernel())).collect();
                    command_buffers.push(builder.command_buffer(recorded));
                }
                _ => {}
            }
        }
        builder.memory(scenario.buffers.len(), scenario.memory_quota);
        builder.observer(recorder.clone());
        let device = builder.build().map_err(|e| fail(format!("cannot start the device: {e}")))?;
        let host_clock = QueueClock::new(
            host_axis,
            host_endpoint(host_axis),
            Capabilities { wait_before_signal: true },
        );
        Ok(Runner {
            scenario,
            options,
            device,
            recorder,
            host_clock,
            host_calls,
            command_buffers,
            records: vec![None; n],
        })
    }

    fn run(mut self) -> Result<Outcome<'s>, ScenarioError> {
        let started = Instant::now();
        let deadline = started + self.options.timeout;
        let mut host_calls = self.host_calls.clone().into_iter();
        let mut command_buffers = self.command_buffers.clone().into_iter();
        let mut queue_ops = 0;
        for (index, op) in self.scenario.ops.iter().enumerate() {
            match op.target {
                Target::Queue(queue) => {
                    let registered = match op.work {
                        WorkSpec::Host { .. } => host_calls.next().map(Registered::Host),
                        WorkSpec::Tiles { .. } => command_buffers.next().map(Registered::Buffer),
                        _ => None,
                    };
                    self.submit(index, op, queue, registered)?;
                    queue_ops += 1;
                }
                Target::Host => self.host_step(index, op, deadline)?,
            }
        }
        self.wait_for_queues(queue_ops, started, deadline)?;
        Ok(self.finish(started.elapsed()))
    }

    fn op_error(&self, op: &OpSpec, message: impl std::fmt::Display) -> ScenarioError {
        ScenarioError::at(&self.scenario.path, op.line, format!("op `{}`: {message}", op.name))
    }

    fn submit(
        &mut self,
        index: usize,
        op: &OpSpec,
        queue: usize,
        registered: Option<Registered>,
    ) -> Result<(), ScenarioError> {
        let work = match (op.work, registered) {
            (WorkSpec::Noop, _) => Work::Barrier,
            (WorkSpec::Spin(duration), _) => Work::Spin(duration),
            (WorkSpec::Sleep(duration), _) => Work::Sleep(duration),
            (WorkSpec::Host { .. }, Some(Registered::Host(call))) => Work::Host(call),
            (WorkSpec::Tiles { .. }, Some(Registered::Buffer(buffer))) => Work::Execute(buffer),
            (WorkSpec::Alloca { buffer, bytes }, _) => {
                Work::Alloca { buffer: BufferId(buffer as u32), bytes }
            }
            (WorkSpec::Dealloca { buffer }, _) => Work::Dealloca(BufferId(buffer as u32)),
            (WorkSpec::Host { .. } | WorkSpec::Tiles { .. }, _) => {
                unreachable!("one host call or command buffer is registered per such op")
            }
        };
        let waits: Vec<(SemaphoreId, u64)> =
            op.waits.iter().map(|&(s, v)| (SemaphoreId(s as u32), v)).collect();
        let signals: Vec<(SemaphoreId, u64)> =
            op.signals.iter().map(|&(s, v)| (SemaphoreId(s as u32), v)).collect();
        let submit_ns = self.device.now_ns();
        let request = Op { waits: &waits, signals: &signals, work, tag: index as u64 };
        let receipt = match self.device.submit(QueueId(queue), &request) {
            Ok(receipt) => receipt,
            Err(error) => return Err(self.op_error(op, self.describe_submit_error(op, error))),
        };
        let waits = op
            .waits
            .iter()
            .zip(receipt.waits.iter())
            .map(|(&(semaphore, value), outcome)| match *outcome {
                WaitOutcome::Resolved(r) => WaitRecord {
                    semaphore,
                    value,
                    resolution: Some(r.resolution),
                    tainted: r.tainted,
                },
                _ => WaitRecord { semaphore, value, resolution: None, tainted: false },
            })
            .collect();
        self.records[index] = Some(OpRecord {
            point: receipt.point,
            frontier: receipt.frontier,
            waits,
            submit_ns,
            start_ns: 0,
            end_ns: 0,
            worker: None,
            status: Status::Cancelled,
        });
        Ok(())
    }

    fn describe_submit_error(&self, op: &OpSpec, error: SubmitError) -> String {
        let name = |s: usize| &self.scenario.semaphores[s].name;
        match error {
            SubmitError::WaitOutOfScope { wait } => {
                let s = op.waits[wait].0;
                format!(
                    "semaphore `{}` ({}) is not visible to this queue",
                    name(s),
                    scope_name(self.scenario.semaphores[s].scope)
                )
            }
            SubmitError::Signal { signal, error, .. } => {
                format!("signal {}={}: {error}", name(op.signals[signal].0), op.signals[signal].1)
            }
            other => other.to_string(),
        }
    }

    fn semaphore(&self, index: usize) -> &DeviceSemaphore {
        self.device
            .semaphore(SemaphoreId(index as u32))
            .expect("declared semaphores exist on the device")
    }

    fn host_step(
        &mut self,
        index: usize,
        op: &OpSpec,
        deadline: Instant,
    ) -> Result<(), ScenarioError> {
        let submit_ns = self.device.now_ns();
        let endpoint = self.host_clock.endpoint();
        let mut submission = self.host_clock.begin();
        let mut waits = Vec::with_capacity(op.waits.len());
        let mut failed = false;
        for &(semaphore, value) in &op.waits {
            let device_semaphore =
                self.device.semaphore(SemaphoreId(semaphore as u32)).expect("declared");
            let record = match submission.wait(device_semaphore, value) {
                Ok(r) => WaitRecord {
                    semaphore,
                    value,
                    resolution: Some(r.resolution),
                    tainted: r.tainted,
                },
                Err(causeway_core::queue::WaitError::Failed(_)) => {
                    failed = true;
                    WaitRecord { semaphore, value, resolution: None, tainted: false }
                }
                Err(_) => {
                    let spec = &self.scenario.semaphores[semaphore];
                    return Err(ScenarioError::at(
                        &self.scenario.path,
                        op.line,
                        format!(
                            "op `{}`: semaphore `{}` ({}) is not visible to the host",
                            op.name,
                            spec.name,
                            scope_name(spec.scope)
                        ),
                    ));
                }
            };
            waits.push(record);
        }
        let start_ns = self.device.now_ns();
        for &(semaphore, value) in &op.waits {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let device_semaphore =
                self.device.semaphore(SemaphoreId(semaphore as u32)).expect("declared");
            match host::wait(device_semaphore, value, Some(remaining)) {
                Ok(_) => {}
                Err(HostWaitError::Failed(_)) => failed = true,
                Err(_) => {
                    let name = &self.scenario.semaphores[semaphore].name;
                    return Err(self.stuck(format!(
                        "op `{}` (line {}) on the host waits for {name}>={value} (at {}) past the {:?} deadline",
                        op.name, op.line, device_semaphore.value(), self.options.timeout
                    )));
                }
            }
        }
        match op.work {
            WorkSpec::Spin(duration) => spin_for(duration),
            WorkSpec::Sleep(duration) => std::thread::sleep(duration),
            _ => {}
        }
        let submitted = submission.commit();
        for &(semaphore, value) in &op.signals {
            let target = self.device.semaphore(SemaphoreId(semaphore as u32)).expect("declared");
            if failed {
                target.fail(Failure::Aborted);
                continue;
            }
            let result = if op.external {
                target.signal_external(value)
            } else {
                submitted
                    .submit_signal(target, value, &endpoint)
                    .and_then(|()| target.complete_signal(value))
            };
            // A refusal because the timeline already failed is the failure spreading; any
            // other refusal is the scenario's fault.
            match result {
                Ok(()) | Err(causeway_core::semaphore::SignalError::Failed(_)) => {}
                Err(error) => {
                    let name = &self.scenario.semaphores[semaphore].name;
                    return Err(self.op_error(op, format_args!("signal {name}={value}: {error}")));
                }
            }
        }
        if let Some((semaphore, code)) = op.fail {
            self.semaphore(semaphore).fail(Failure::Application(code));
        }
        let end_ns = self.device.now_ns();
        self.records[index] = Some(OpRecord {
            point: submitted.point,
            frontier: submitted.frontier,
            waits,
            submit_ns,
            start_ns,
            end_ns,
            worker: None,
            status: if failed { Status::Failed } else { Status::Ok },
        });
        Ok(())
    }

    fn wait_for_queues(
        &self,
        total: usize,
        started: Instant,
        deadline: Instant,
    ) -> Result<(), ScenarioError> {
        let show = self.options.progress && std::io::stderr().is_terminal();
        let mut finished = self.recorder.finished.lock().unwrap_or_else(|e| e.into_inner());
        let mut drawn = false;
        while *finished < total {
            let now = Instant::now();
            if now >= deadline {
                drop(finished);
                return Err(self.stuck(format!("still running after {:?}", self.options.timeout)));
            }
            let (guard, _) = self
                .recorder
                .changed
                .wait_timeout(finished, (deadline - now).min(Duration::from_millis(100)))
                .unwrap_or_else(|e| e.into_inner());
            finished = guard;
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

    /// A run-time deadlock report: every unfinished queue operation with its unmet waits.
    fn stuck(&self, headline: String) -> ScenarioError {
        let mut lines = vec![format!("deadlock: {headline}")];
        for (index, op) in self.scenario.ops.iter().enumerate() {
            let Target::Queue(queue) = op.target else { continue };
            if self.recorder.status[index].load(Ordering::Relaxed) != STATUS_PENDING
                || self.records[index].is_none()
            {
                continue;
            }
            let unmet: Vec<String> = op
                .waits
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
            lines.push(format!(
                "  op `{}` (line {}) on queue {} {why}",
                op.name, op.line, self.scenario.queues[queue].name
            ));
        }
        ScenarioError::in_file(&self.scenario.path, lines.join("\n")).deadlock()
    }

    fn finish(mut self, wall: Duration) -> Outcome<'s> {
        let semaphores = (0..self.scenario.semaphores.len())
            .map(|index| {
                let semaphore = self.semaphore(index);
                let history = semaphore.with_history(|history| {
                    history
                        .iter()
                        .map(|entry| HistoryRecord {
                            value: entry.value,
                            origin: entry.origin,
                            frontier: entry.frontier,
                            tainted: entry.is_external(),
                        })
                        .collect()
                });
                SemaphoreRecord {
                    value: semaphore.value(),
                    failed: semaphore.failure().is_some(),
                    history,
                }
            })
            .collect();
        let mut axes: Vec<(Axis, String)> = self
            .scenario
            .queues
            .iter()
            .enumerate()
            .filter_map(|(i, q)| self.device.axis(QueueId(i)).map(|axis| (axis, q.name.clone())))
            .collect();
        axes.push((self.host_clock.axis(), super::parse::HOST.to_string()));
        let memory = self.device.memory_stats();
        let recorder = Arc::clone(&self.recorder);
        // Joining the workers makes every event visible; nothing is left to cancel.
        drop(self.device);
        let ops = self
            .records
            .iter_mut()
            .enumerate()
            .map(|(index, record)| {
                let mut record = record.take().expect("every op was submitted or performed");
                if matches!(self.scenario.ops[index].target, Target::Queue(_)) {
                    record.start_ns = recorder.start_ns[index].load(Ordering::Relaxed);
                    record.end_ns = recorder.end_ns[index].load(Ordering::Relaxed);
                    let worker = recorder.worker[index].load(Ordering::Relaxed);
                    record.worker = (worker != usize::MAX).then_some(worker);
                    record.status = match recorder.status[index].load(Ordering::Relaxed) {
                        STATUS_OK => Status::Ok,
                        STATUS_FAILED => Status::Failed,
                        _ => Status::Cancelled,
                    };
                }
                record
            })
            .collect();
        Outcome { scenario: self.scenario, ops, semaphores, axes, memory, wall }
    }
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

/// The scenario-file spelling of a scope.
pub fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::QueueLocal => "queue-local",
        Scope::DeviceLocal => "device-local",
        Scope::DeviceGroup => "device-group",
        Scope::ProcessLocal => "process-local",
        _ => "system-wide",
    }
}

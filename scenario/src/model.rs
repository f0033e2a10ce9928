//! A validated scenario: every name resolved to an index, every value checked.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;

/// A problem with a scenario file, located as precisely as the file allows, and the file's
/// other problems, when a check found several (each is reported: the first one found must not
/// hide the rest).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScenarioError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
    /// The workload can never finish (as opposed to malformed input).
    pub deadlock: bool,
    /// The file's other problems, in line order after this one (each with none of its own).
    pub more: Vec<ScenarioError>,
}

impl ScenarioError {
    /// A problem at `line` (1-based) of the file at `path`. Public so that files read beside
    /// scenarios (the CLI's graph files) report their problems the same way.
    pub fn at(path: &Path, line: usize, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            path: path.to_path_buf(),
            line: Some(line),
            message: message.into(),
            deadlock: false,
            more: Vec::new(),
        }
    }

    /// A problem with the file at `path` as a whole (it cannot be read, it has no line to
    /// point at).
    pub fn in_file(path: &Path, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            path: path.to_path_buf(),
            line: None,
            message: message.into(),
            deadlock: false,
            more: Vec::new(),
        }
    }

    pub(crate) fn deadlock(mut self) -> ScenarioError {
        self.deadlock = true;
        self
    }

    /// `problems` as one error, in line order (those without a line, about the whole file,
    /// last; the order found among equals); `None` when there are none.
    pub(crate) fn gathered(mut problems: Vec<ScenarioError>) -> Option<ScenarioError> {
        problems.sort_by_key(|problem| problem.line.unwrap_or(usize::MAX));
        let mut problems = problems.into_iter();
        let mut first = problems.next()?;
        first.more.extend(problems);
        Some(first)
    }

    /// Each problem, in line order, as `file:line: message`.
    pub fn problems(&self) -> impl Iterator<Item = Problem<'_>> {
        std::iter::once(self).chain(&self.more).map(|error| Problem {
            path: &error.path,
            line: error.line,
            message: &error.message,
        })
    }
}

/// One problem of a [`ScenarioError`], displayed as `file:line: message` (`file: message`
/// when it has no line).
#[derive(Clone, Copy, Debug)]
pub struct Problem<'a> {
    path: &'a Path,
    line: Option<usize>,
    message: &'a str,
}

impl fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Every problem, one a line.
impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, problem) in self.problems().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// A whole scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// The file it came from.
    pub path: PathBuf,
    /// Worker threads (default 2).
    pub workers: usize,
    /// Stream-ordered pool size in bytes.
    pub memory_quota: u64,
    /// Queues, in declaration order.
    pub queues: Vec<QueueSpec>,
    /// Semaphores, in declaration order.
    pub semaphores: Vec<SemaphoreSpec>,
    /// Stream-ordered buffer names, in first-use order.
    pub buffers: Vec<String>,
    /// Operations, in file (= submission) order.
    pub ops: Vec<OpSpec>,
    /// Every operation's waits, then its signals, as `(semaphore, value)`, in file order (see
    /// [`Conditions`]).
    pub conditions: Vec<(usize, u64)>,
    /// Every operation's name, one after another in file order (see [`OpName`]).
    pub op_names: String,
    /// Whole-run expectations.
    pub expect: TotalsExpect,
}

impl Scenario {
    /// `op`'s name.
    pub fn op_name(&self, op: &OpSpec) -> &str {
        let start = op.name.start as usize;
        &self.op_names[start..start + op.name.len as usize]
    }

    /// `op`'s `(semaphore, value)` waits.
    pub fn waits(&self, op: &OpSpec) -> &[(usize, u64)] {
        let start = op.conditions.start as usize;
        &self.conditions[start..start + usize::from(op.conditions.waits)]
    }

    /// `op`'s `(semaphore, value)` signals.
    pub fn signals(&self, op: &OpSpec) -> &[(usize, u64)] {
        let start = op.conditions.start as usize + usize::from(op.conditions.waits);
        &self.conditions[start..start + usize::from(op.conditions.signals)]
    }
}

/// Where an operation's name lies in [`Scenario::op_names`].
///
/// For the same reason as [`Conditions`]: the report and the trace name every operation, and
/// names in one string are read in order, not from an allocation of their own each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpName {
    /// Where it starts.
    pub start: u32,
    /// Its length in bytes.
    pub len: u32,
}

impl OpName {
    /// Appends `name` to `names`, and says where it lies.
    pub fn push(names: &mut String, name: &str) -> OpName {
        let offset = |at: usize| u32::try_from(at).expect("a scenario's names hold under 4 GiB");
        let start = offset(names.len());
        names.push_str(name);
        OpName { start, len: offset(name.len()) }
    }
}

/// Where an operation's waits and signals lie in [`Scenario::conditions`]: its waits from
/// `start`, then its signals.
///
/// A large scenario has hundreds of thousands of operations with a wait or two each; a list of
/// its own for each would put every operation's conditions in a small allocation of its own,
/// spread over the heap, and each pass that reads them (the checks, the run, the trace) would
/// wait for memory at every one. In one array they are read in order, and an operation's
/// record stays small.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conditions {
    /// Where its waits start.
    pub start: u32,
    /// How many waits it has.
    pub waits: u16,
    /// How many signals it has (after its waits).
    pub signals: u16,
}

impl Conditions {
    /// Appends `waits`, then `signals`, to `conditions`, and says where they lie.
    pub fn push(
        conditions: &mut Vec<(usize, u64)>,
        waits: impl IntoIterator<Item = (usize, u64)>,
        signals: impl IntoIterator<Item = (usize, u64)>,
    ) -> Conditions {
        let start = conditions.len();
        conditions.extend(waits);
        let signals_start = conditions.len();
        conditions.extend(signals);
        let count = |count: usize| u16::try_from(count).expect("an operation has few conditions");
        Conditions {
            start: u32::try_from(start).expect("a scenario holds under 2^32 conditions"),
            waits: count(signals_start - start),
            signals: count(conditions.len() - signals_start),
        }
    }
}

/// One declared queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueSpec {
    /// Its name.
    pub name: String,
    /// Declaration line.
    pub line: usize,
    /// Machine index.
    pub machine: u16,
    /// Device index.
    pub device: u32,
    /// Device group.
    pub group: u32,
    /// Whether waits may precede their signal (false: binary-event behaviour, waits held).
    pub wait_before_signal: bool,
    /// The driver that runs it.
    pub driver: DriverKind,
}

/// A driver a queue may name (`driver = "cpu"`, the default, `"vulkan"` or `"npu"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DriverKind {
    /// The CPU driver: kernels on the worker pool.
    #[default]
    Cpu,
    /// The Vulkan driver: compute work on a Vulkan device.
    Vulkan,
    /// The NPU driver: compute work as EXEC descriptors on the rings of the software NPU model.
    Npu,
    /// The CUDA driver: `tiles`, `spin` and `sleep` work as the shipped PTX kernel on CUDA
    /// streams.
    Cuda,
}

impl DriverKind {
    /// Every driver, by the name a scenario gives it.
    pub const ALL: &'static [DriverKind] =
        &[DriverKind::Cpu, DriverKind::Vulkan, DriverKind::Npu, DriverKind::Cuda];

    /// The name a scenario gives it.
    pub const fn name(self) -> &'static str {
        match self {
            DriverKind::Cpu => "cpu",
            DriverKind::Vulkan => "vulkan",
            DriverKind::Npu => "npu",
            DriverKind::Cuda => "cuda",
        }
    }
}

/// The kernel of `compute` work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeKernel {
    /// `c = a + b`.
    Add,
    /// `y = 2x + y`.
    Saxpy,
}

impl ComputeKernel {
    /// Every kernel, by its name in a scenario.
    pub const ALL: &'static [ComputeKernel] = &[ComputeKernel::Add, ComputeKernel::Saxpy];

    /// Its name in a scenario.
    pub const fn name(self) -> &'static str {
        match self {
            ComputeKernel::Add => "add",
            ComputeKernel::Saxpy => "saxpy",
        }
    }
}

/// Where a semaphore lives, for scope checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    /// Beside a queue.
    Queue(usize),
    /// With the host.
    Host,
}

/// One declared semaphore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemaphoreSpec {
    /// Its name.
    pub name: String,
    /// Declaration line.
    pub line: usize,
    /// Initial value.
    pub initial: u64,
    /// Visibility.
    pub scope: Scope,
    /// Home endpoint.
    pub home: Home,
    /// Expected final value.
    pub expect_value: Option<u64>,
    /// Expected final failure state.
    pub expect_failed: Option<bool>,
}

/// Who performs an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A device queue: submitted asynchronously.
    Queue(usize),
    /// The host, synchronously at this point of the file.
    Host,
}

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkSpec {
    /// Nothing (orders only).
    Noop,
    /// Busy work for a duration.
    Spin(Duration),
    /// Blocking work for a duration.
    Sleep(Duration),
    /// A host function that busy-works for a duration and then succeeds, or fails with a code.
    Host {
        /// How long it works.
        duration: Duration,
        /// Its failure code, if it fails.
        fail: Option<u32>,
    },
    /// A recorded command buffer of `regions` tiled dispatches (a barrier between each), each
    /// of `tiles` tiles of `duration` busy work, run by every worker.
    Tiles {
        /// Regions in the command buffer.
        regions: u32,
        /// Tiles per region.
        tiles: u32,
        /// Work per tile.
        duration: Duration,
    },
    /// A compute kernel over `elements` floats of the operation's own buffers, in `regions`
    /// dispatches of `tiles` tiles (a barrier between regions); its results are checked after
    /// the run.
    Compute {
        /// The kernel.
        kernel: ComputeKernel,
        /// Floats per buffer.
        elements: u32,
        /// Tiles per dispatch.
        tiles: u32,
        /// Dispatches, one per region.
        regions: u32,
    },
    /// A copy of `bytes` bytes between two buffers of the operation's own (on a Vulkan queue
    /// `vkCmdCopyBuffer`, on a CPU queue a copy in tiles on the block processor); the
    /// destination is checked after the run.
    Copy {
        /// Bytes copied (a whole number of 4-byte words).
        bytes: u32,
    },
    /// A stream-ordered allocation.
    Alloca {
        /// Buffer index.
        buffer: usize,
        /// Bytes.
        bytes: u64,
    },
    /// A stream-ordered deallocation.
    Dealloca {
        /// Buffer index.
        buffer: usize,
    },
    /// A collective step (host steps only): every rank contributes `elements` values and
    /// receives their element-wise sum over all ranks (one process is one rank), checked after
    /// the run; the step's one signal carries a single frontier entry, the collective
    /// channel's round, whatever the number of ranks.
    AllReduce {
        /// Values each rank contributes.
        elements: u32,
    },
}

/// How an operation is expected to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusExpect {
    /// Ran and signalled.
    Ok,
    /// Failed.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl StatusExpect {
    /// The report's spelling.
    pub fn name(self) -> &'static str {
        match self {
            StatusExpect::Ok => "ok",
            StatusExpect::Failed => "failed",
            StatusExpect::Cancelled => "cancelled",
        }
    }
}

/// Per-operation expectations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpExpect {
    /// Exact frontier: axis name → epoch.
    pub frontier: Option<Vec<(String, u64)>>,
    /// Per wait, the resolutions accepted (more than one where timing decides, e.g. whether a
    /// signal on another queue has been reached by the time the wait is submitted).
    pub resolution: Option<Vec<Vec<Resolution>>>,
    /// Final status.
    pub status: Option<StatusExpect>,
    /// Whether the frontier is tainted.
    pub tainted: Option<bool>,
}

/// One operation.
#[derive(Clone, Debug, PartialEq)]
pub struct OpSpec {
    /// Its name, in [`Scenario::op_names`] (read it with [`Scenario::op_name`]).
    pub name: OpName,
    /// Its line.
    pub line: usize,
    /// Who runs it.
    pub target: Target,
    /// Its `(semaphore, value)` waits and signals, in [`Scenario::conditions`] (read them with
    /// [`Scenario::waits`] and [`Scenario::signals`]).
    pub conditions: Conditions,
    /// Its work.
    pub work: WorkSpec,
    /// Host only: signal as an untracked outside source.
    pub external: bool,
    /// Host only: fail this semaphore with this application code.
    pub fail: Option<(usize, u32)>,
    /// Host only: reject the speculation of this queue after this epoch of its axis
    /// (`Device::cancel_speculative`).
    pub cancel: Option<(usize, u64)>,
    /// What it should end as.
    pub expect: OpExpect,
}

/// Expected whole-run totals (any subset).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TotalsExpect {
    /// Elided waits.
    pub elided: Option<u64>,
    /// Satisfied waits.
    pub satisfied: Option<u64>,
    /// Device waits.
    pub device: Option<u64>,
    /// Held waits.
    pub held: Option<u64>,
    /// Tainted waits.
    pub tainted: Option<u64>,
    /// Operations that reused memory without a fence.
    pub memory_reused: Option<u64>,
    /// Highest committed byte count.
    pub peak_memory: Option<u64>,
}

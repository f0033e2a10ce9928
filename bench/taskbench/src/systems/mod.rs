//! The systems measured, each running a [`TaskGraph`] its own way:
//!
//! - [`executor`]: causeway's cooperative executor, one process per task, each dependency an
//!   edge from the producing process to its dependents; timed with the graph's wiring
//!   (`executor`) and without it (`executor_prebuilt`);
//! - [`queues`]: a causeway device, one CPU queue per column, each task an operation on its
//!   column's queue and each dependency a timeline-semaphore wait on the producing column's
//!   semaphore;
//! - [`peers`]: rayon (a scope per timestep), tokio (a spawned task per graph task, the
//!   timestep's join handles awaited), and std threads meeting at a `Barrier` after every
//!   timestep;
//! - [`outside`]: programs built outside the repository from other projects' sources (Task
//!   Bench's OpenMP and MPI implementations, and a Taskflow implementation of Task Bench), run
//!   with Task Bench's command line; they time their own graph and check it with Task Bench's
//!   core.
//!
//! Every run of the harness's own systems starts from zeroed outputs, is timed from its first task's release to its last
//! task's end (pools and devices are started before the timer and shut down after it), and
//! is checked against the graph's reference checksum before its time counts.

pub mod executor;
pub mod outside;
pub mod peers;
pub mod queues;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use causeway::core::queue::ResolutionCounts;

use self::outside::{OutsideKind, OutsidePeer};
use crate::graph::{Outputs, TaskGraph};
use crate::TaskBenchError;

/// A system the harness runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum System {
    /// causeway's executor: a process per task, wired and submitted inside the timed part.
    Executor,
    /// causeway's executor, the graph wired and submitted before the timer.
    ExecutorPrebuilt,
    /// causeway's device: a CPU queue per column, a semaphore wait per dependency.
    Queues,
    /// rayon: a scope per timestep.
    Rayon,
    /// tokio: a spawned task per graph task.
    Tokio,
    /// std threads and a `Barrier` per timestep.
    Threads,
    /// A program built outside the repository (see [`outside`]); not in [`System::ALL`]: it
    /// runs only where [`Limits::outside`] gives its binary.
    Outside(OutsideKind),
}

impl System {
    /// Every system, in table order.
    pub const ALL: [System; 6] = [
        System::Executor,
        System::ExecutorPrebuilt,
        System::Queues,
        System::Rayon,
        System::Tokio,
        System::Threads,
    ];

    /// The system's name in tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            System::Executor => "executor",
            System::ExecutorPrebuilt => "executor_prebuilt",
            System::Queues => "queues",
            System::Rayon => "rayon",
            System::Tokio => "tokio",
            System::Threads => "threads",
            System::Outside(kind) => kind.name(),
        }
    }

    /// Refuses a graph this system cannot run under `limits`, before anything is timed.
    pub fn validate(self, graph: &TaskGraph, limits: &Limits) -> Result<(), TaskBenchError> {
        if limits.workers == 0 {
            return Err(TaskBenchError::ZeroWorkers);
        }
        match self {
            System::Queues => queues::validate(graph, limits),
            System::Outside(kind) => outside::validate(kind, graph),
            _ => Ok(()),
        }
    }

    /// Runs `graph` once with `iterations` kernel iterations per task and checks its checksum
    /// against `expected` (an outside peer checks its own graph with Task Bench's core: a
    /// failed check ends it, and the run fails).
    pub fn run(
        self,
        graph: &Arc<TaskGraph>,
        iterations: u32,
        limits: &Limits,
        expected: u64,
    ) -> Result<RunOutcome, TaskBenchError> {
        self.validate(graph, limits)?;
        let outputs = Arc::new(Outputs::new(graph));
        let outcome = match self {
            System::Executor | System::ExecutorPrebuilt => {
                let wiring = if self == System::Executor {
                    executor::Wiring::Timed
                } else {
                    executor::Wiring::BeforeTimer
                };
                RunOutcome {
                    elapsed: executor::run(graph, &outputs, iterations, limits.workers, wiring)?,
                    tasks: graph.tasks(),
                    waits: None,
                }
            }
            System::Queues => queues::run(graph, &outputs, iterations, limits.workers)?,
            System::Outside(kind) => {
                // Its outputs live in its own process, checked there.
                let report = limits.peer(kind)?.run(graph, iterations, limits.workers)?;
                return Ok(RunOutcome {
                    elapsed: report.elapsed,
                    tasks: report.tasks,
                    waits: None,
                });
            }
            System::Rayon => RunOutcome {
                elapsed: peers::run_rayon(graph, &outputs, iterations, limits.workers)?,
                tasks: graph.tasks(),
                waits: None,
            },
            System::Tokio => RunOutcome {
                elapsed: peers::run_tokio(graph, &outputs, iterations, limits.workers)?,
                tasks: graph.tasks(),
                waits: None,
            },
            System::Threads => RunOutcome {
                elapsed: peers::run_threads(graph, &outputs, iterations, limits.workers),
                tasks: graph.tasks(),
                waits: None,
            },
        };
        graph.check(&outputs, expected)?;
        Ok(outcome)
    }
}

impl fmt::Display for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for System {
    type Err = TaskBenchError;

    fn from_str(name: &str) -> Result<System, TaskBenchError> {
        System::ALL
            .into_iter()
            .find(|system| system.name() == name)
            .ok_or_else(|| TaskBenchError::UnknownSystem { name: name.to_owned() })
    }
}

/// What every system is given to run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Worker threads (one per core measured).
    pub workers: usize,
    /// Most device queues the queues variant may create (one per column).
    pub max_queues: u32,
    /// The outside peers' programs.
    pub outside: Vec<OutsidePeer>,
}

impl Limits {
    /// The program of outside peer `kind`.
    pub fn peer(&self, kind: OutsideKind) -> Result<&OutsidePeer, TaskBenchError> {
        self.outside
            .iter()
            .find(|peer| peer.kind == kind)
            .ok_or(TaskBenchError::MissingPeer { peer: kind.name() })
    }
}

/// One timed run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    /// From the first task's release to the last task's end.
    pub elapsed: Duration,
    /// Tasks run: the graph's, or an outside peer's own count (Task Bench's tree is not the
    /// harness's).
    pub tasks: u64,
    /// The queues variant's waits: issued, and how the device resolved them.
    pub waits: Option<WaitCounts>,
}

/// The queues variant's semaphore waits over one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCounts {
    /// Waits the operations carried (one per dependency).
    pub issued: u64,
    /// How the device resolved them at submission.
    pub resolutions: ResolutionCounts,
}

/// A failure of a system's machinery (a pool that would not start, a task that failed) as the
/// harness's error.
fn system_error(system: System, reason: impl fmt::Display) -> TaskBenchError {
    TaskBenchError::System { system: system.name(), reason: reason.to_string() }
}

//! Why the harness refused its parameters or a run.

use std::fmt;

use crate::pattern::Pattern;

/// Why the harness refused its parameters or a run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskBenchError {
    /// A graph with no columns.
    ZeroWidth,
    /// A graph with no timesteps.
    ZeroSteps,
    /// A run on no worker threads.
    ZeroWorkers,
    /// A sweep that would measure nothing: no kernel iteration counts (the largest below the
    /// smallest), no blocks or no runs per point.
    EmptySweep,
    /// A radix pattern with radix 0.
    ZeroRadix {
        /// The pattern.
        pattern: Pattern,
    },
    /// A graph with more tasks or dependencies than the harness indexes.
    TooManyTasks {
        /// Its columns.
        width: u32,
        /// Its timesteps.
        steps: u32,
    },
    /// The queues variant runs one device queue per column; the graph has more columns than
    /// it is allowed queues.
    TooManyColumns {
        /// The graph's columns.
        width: u32,
        /// Queues allowed.
        queues: u32,
    },
    /// The queues variant makes each dependency a wait of one operation, and a task of this
    /// pattern has more dependencies than an operation may wait on.
    TooManyDependencies {
        /// The pattern.
        pattern: Pattern,
        /// The graph's columns.
        width: u32,
        /// The most dependencies of one task.
        dependencies: usize,
        /// The most waits of one operation.
        waits: usize,
    },
    /// A pattern name the harness does not know.
    UnknownPattern {
        /// The name given.
        name: String,
    },
    /// A system name the harness does not know.
    UnknownSystem {
        /// The name given.
        name: String,
    },
    /// A command-line argument that could not be read.
    BadArgument {
        /// The argument and what was wrong with it.
        reason: String,
    },
    /// A run's checksum differs from the reference: some task ran before a dependency.
    ChecksumMismatch {
        /// The reference checksum.
        expected: u64,
        /// The run's.
        found: u64,
    },
    /// A run of the sweep failed: which, and why.
    InRun {
        /// The system.
        system: &'static str,
        /// The graph's pattern.
        pattern: Pattern,
        /// The graph's width.
        width: u32,
        /// Why.
        error: Box<TaskBenchError>,
    },
    /// A `--peer` argument that names no outside peer or no program.
    BadPeer {
        /// The argument.
        spec: String,
        /// What was wrong with it.
        reason: String,
    },
    /// An outside peer was asked to run, but no program was given for it.
    MissingPeer {
        /// The peer.
        peer: &'static str,
    },
    /// A system could not be set up or failed while running.
    System {
        /// The system.
        system: &'static str,
        /// What went wrong.
        reason: String,
    },
}

impl fmt::Display for TaskBenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskBenchError::ZeroWidth => f.write_str("width 0: a graph needs at least one column"),
            TaskBenchError::ZeroSteps => {
                f.write_str("steps 0: a graph needs at least one timestep")
            }
            TaskBenchError::ZeroWorkers => f.write_str("workers 0: a run needs a worker thread"),
            TaskBenchError::EmptySweep => f.write_str(
                "the sweep would measure nothing: the largest iteration count is below the \
                 smallest, or blocks or repeats is 0",
            ),
            TaskBenchError::ZeroRadix { pattern } => {
                write!(f, "pattern {pattern}: a radix of 0 names no dependency")
            }
            TaskBenchError::TooManyTasks { width, steps } => {
                write!(f, "a graph {width} wide and {steps} steps long is too large to index")
            }
            TaskBenchError::TooManyColumns { width, queues } => write!(
                f,
                "width {width} needs {width} queues (one per column), but at most {queues} \
                 are allowed"
            ),
            TaskBenchError::TooManyDependencies { pattern, width, dependencies, waits } => write!(
                f,
                "pattern {pattern} at width {width} gives a task {dependencies} dependencies, \
                 but an operation waits on at most {waits} semaphores"
            ),
            TaskBenchError::UnknownPattern { name } => write!(
                f,
                "unknown pattern {name:?} (trivial, no_comm, stencil_1d, fft, tree, \
                 nearest_<radix>, spread_<radix>, all_to_all)"
            ),
            TaskBenchError::UnknownSystem { name } => {
                write!(
                    f,
                    "unknown system {name:?} (executor, executor_prebuilt, queues, rayon, tokio, \
                 threads)"
                )
            }
            TaskBenchError::BadArgument { reason } => f.write_str(reason),
            TaskBenchError::ChecksumMismatch { expected, found } => write!(
                f,
                "checksum {found:#018x} differs from the reference {expected:#018x}: a task ran \
                 before one of its dependencies"
            ),
            TaskBenchError::InRun { system, pattern, width, error } => {
                write!(f, "{system} on {pattern} width {width}: {error}")
            }
            TaskBenchError::BadPeer { spec, reason } => {
                write!(
                    f,
                    "--peer {spec}: {reason} (expected openmp=PATH, mpi=PATH or taskflow=PATH)"
                )
            }
            TaskBenchError::MissingPeer { peer } => {
                write!(
                    f,
                    "outside peer {peer} requested, but no program given (--peer {peer}=PATH)"
                )
            }
            TaskBenchError::System { system, reason } => write!(f, "{system}: {reason}"),
        }
    }
}

impl std::error::Error for TaskBenchError {}

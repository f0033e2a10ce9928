//! The outside peers: Task Bench's own implementations (OpenMP, and MPI with non-blocking
//! point-to-point messages) and this repository's Taskflow implementation
//! (`bench/taskbench/peers/taskflow.cc`), all built outside the repository by
//! `scripts/taskbench_peers.sh` and run here as programs, with Task Bench's own command line.
//!
//! Each run is one process: `-steps`, `-width`, `-type` (and `-radix`, `-period` where the
//! pattern has them), `-kernel compute_bound -iter N`, and the workers as each implementation
//! takes them (`-worker N` for OpenMP and Taskflow, `N` ranks of `mpirun` for MPI). The program
//! times its own graph and prints Task Bench's report, of which the harness reads the elapsed
//! time and the total tasks. The kernel is Task Bench's, not the harness's, so outside runs are
//! rated against a peak of that kernel (see [`crate::sweep`]).
//!
//! Task Bench's core asserts, in every task, that each input holds the output of the task it
//! stands for: a broken dependency aborts the program. Any exit but success, or a report
//! without the two figures, is a failure of the run naming the peer.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

use crate::graph::TaskGraph;
use crate::pattern::Pattern;
use crate::TaskBenchError;

/// Which outside implementation a binary is: it decides how the program is launched and what
/// it can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutsideKind {
    /// Task Bench's `openmp/main`: OpenMP tasks with `depend` clauses.
    OpenMp,
    /// Task Bench's `mpi/nonblock`: a rank per worker, non-blocking sends and receives.
    Mpi,
    /// `bench/taskbench/peers/taskflow.cc`: a Taskflow task per graph task, an edge per
    /// dependency.
    Taskflow,
}

impl OutsideKind {
    /// Every kind, in table order.
    pub const ALL: [OutsideKind; 3] =
        [OutsideKind::OpenMp, OutsideKind::Mpi, OutsideKind::Taskflow];

    /// The kind's name in tables and in `--peer NAME=PATH`.
    pub fn name(self) -> &'static str {
        match self {
            OutsideKind::OpenMp => "openmp",
            OutsideKind::Mpi => "mpi",
            OutsideKind::Taskflow => "taskflow",
        }
    }
}

impl fmt::Display for OutsideKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Task Bench's OpenMP implementation spells out one `depend` clause list per input count, up
/// to 10 arguments: the task's own output and 9 inputs.
const OPENMP_MOST_INPUTS: usize = 9;

/// An outside peer: its kind and the program to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutsidePeer {
    /// Its kind.
    pub kind: OutsideKind,
    /// Its program.
    pub binary: PathBuf,
}

impl FromStr for OutsidePeer {
    type Err = TaskBenchError;

    /// `NAME=PATH`, the name one of `openmp`, `mpi`, `taskflow` and the path a file that
    /// exists (checked here, so that a mistyped path fails before the sweep, not in it).
    fn from_str(spec: &str) -> Result<OutsidePeer, TaskBenchError> {
        let bad = |reason: String| TaskBenchError::BadPeer { spec: spec.to_owned(), reason };
        let Some((name, path)) = spec.split_once('=') else {
            return Err(bad("expected NAME=PATH".to_owned()));
        };
        let kind = OutsideKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| bad(format!("unknown peer {name:?} (openmp, mpi, taskflow)")))?;
        if path.is_empty() {
            return Err(bad("no path given".to_owned()));
        }
        let binary = PathBuf::from(path);
        if !binary.is_file() {
            return Err(bad(format!(
                "{} is not a file (build it with scripts/taskbench_peers.sh)",
                binary.display()
            )));
        }
        Ok(OutsidePeer { kind, binary })
    }
}

/// What a run's report says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeerReport {
    /// Tasks executed (Task Bench's own count: its tree, for one, is not the harness's).
    pub tasks: u64,
    /// The graph's execution, as the program timed it.
    pub elapsed: Duration,
}

/// Reads the `Total Tasks N` and `Elapsed Time X seconds` lines of Task Bench's report; any
/// other line is left alone. Refuses a report without either, with a figure that is not a
/// number, or with a count or time that is zero or not finite.
pub fn parse_report(text: &str) -> Result<PeerReport, String> {
    let mut tasks = None;
    let mut elapsed = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(count) = line.strip_prefix("Total Tasks ") {
            let count: u64 =
                count.trim().parse().map_err(|_| format!("unreadable task count {count:?}"))?;
            tasks = Some(count);
        } else if let Some(time) = line.strip_prefix("Elapsed Time ") {
            let seconds = time.trim().strip_suffix("seconds").unwrap_or(time).trim();
            let seconds: f64 =
                seconds.parse().map_err(|_| format!("unreadable elapsed time {time:?}"))?;
            elapsed = Some(seconds);
        }
    }
    let tasks = tasks.ok_or("no \"Total Tasks\" line in its report")?;
    let seconds = elapsed.ok_or("no \"Elapsed Time\" line in its report")?;
    if tasks == 0 {
        return Err("it reports 0 tasks".to_owned());
    }
    let elapsed = Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|elapsed| !elapsed.is_zero())
        .ok_or_else(|| format!("it reports an elapsed time of {seconds} s"))?;
    Ok(PeerReport { tasks, elapsed })
}

/// Task Bench's `-type` and its parameters for `pattern` on a graph `width` wide.
fn pattern_arguments(pattern: Pattern, width: u32) -> Vec<String> {
    let mut arguments = vec!["-type".to_owned()];
    match pattern {
        Pattern::Nearest { radix } => {
            arguments.extend(["nearest".to_owned(), "-radix".to_owned(), radix.to_string()]);
        }
        Pattern::Spread { radix } => {
            // Task Bench's spread rotates its columns over a period (3 unless told), which it
            // requires to be at most ⌈width / radix⌉.
            let period = width.div_ceil(radix.max(1)).min(3);
            arguments.extend([
                "spread".to_owned(),
                "-radix".to_owned(),
                radix.to_string(),
                "-period".to_owned(),
                period.to_string(),
            ]);
        }
        other => arguments.push(other.to_string()),
    }
    arguments
}

/// Refuses, before anything runs, a graph Task Bench or this implementation of it cannot run.
pub fn validate(kind: OutsideKind, graph: &TaskGraph) -> Result<(), TaskBenchError> {
    let refused = |reason: String| TaskBenchError::System { system: kind.name(), reason };
    if let Pattern::Spread { radix } = graph.pattern() {
        // Task Bench's own check refuses a spread whose columns would repeat.
        if graph.width() < radix {
            return Err(refused(format!(
                "Task Bench's spread needs a width of at least its radix {radix}"
            )));
        }
    }
    if kind == OutsideKind::OpenMp && graph.max_dependencies() > OPENMP_MOST_INPUTS {
        return Err(refused(format!(
            "Task Bench's OpenMP implementation passes at most {OPENMP_MOST_INPUTS} inputs to a \
             task; this graph has {}",
            graph.max_dependencies()
        )));
    }
    Ok(())
}

impl OutsidePeer {
    /// The command that runs `graph` at `iterations` kernel iterations per task on `workers`.
    fn command(&self, graph: &TaskGraph, iterations: u32, workers: usize) -> Command {
        let mut command = match self.kind {
            OutsideKind::Mpi => {
                let mut mpirun = Command::new("mpirun");
                mpirun.arg("-n").arg(workers.to_string()).arg(&self.binary);
                mpirun
            }
            OutsideKind::OpenMp | OutsideKind::Taskflow => {
                let mut program = Command::new(&self.binary);
                program.arg("-worker").arg(workers.to_string());
                program
            }
        };
        command
            .arg("-steps")
            .arg(graph.steps().to_string())
            .arg("-width")
            .arg(graph.width().to_string())
            .args(pattern_arguments(graph.pattern(), graph.width()))
            .arg("-kernel")
            .arg("compute_bound")
            .arg("-iter")
            .arg(iterations.to_string());
        command
    }

    /// Runs `graph` once; fails, naming the peer, on any exit but success or an unreadable
    /// report.
    pub fn run(
        &self,
        graph: &TaskGraph,
        iterations: u32,
        workers: usize,
    ) -> Result<PeerReport, TaskBenchError> {
        validate(self.kind, graph)?;
        let failed = |reason: String| TaskBenchError::System { system: self.kind.name(), reason };
        let mut command = self.command(graph, iterations, workers);
        let output = command
            .output()
            .map_err(|error| failed(format!("cannot start {}: {error}", program(&command))))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(failed(format!(
                "{} exited with {} (a failed check of Task Bench's core aborts it):\n{}",
                program(&command),
                output.status,
                last_lines(&format!("{stdout}{stderr}"), 6)
            )));
        }
        parse_report(&stdout).map_err(|reason| {
            failed(format!("{}: {reason}:\n{}", program(&command), last_lines(&stdout, 6)))
        })
    }
}

/// The command line, for messages.
fn program(command: &Command) -> String {
    let mut line = Path::new(command.get_program()).display().to_string();
    for argument in command.get_args() {
        line.push(' ');
        line.push_str(&argument.to_string_lossy());
    }
    line
}

/// The last `count` lines of `text`, for messages.
fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_map_to_task_bench_types() {
        assert_eq!(pattern_arguments(Pattern::Stencil1d, 8), ["-type", "stencil_1d"]);
        assert_eq!(
            pattern_arguments(Pattern::Nearest { radix: 5 }, 8),
            ["-type", "nearest", "-radix", "5"]
        );
        assert_eq!(
            pattern_arguments(Pattern::Spread { radix: 3 }, 8),
            ["-type", "spread", "-radix", "3", "-period", "3"]
        );
        assert_eq!(
            pattern_arguments(Pattern::Spread { radix: 3 }, 4),
            ["-type", "spread", "-radix", "3", "-period", "2"]
        );
        assert_eq!(pattern_arguments(Pattern::AllToAll, 2), ["-type", "all_to_all"]);
    }
}

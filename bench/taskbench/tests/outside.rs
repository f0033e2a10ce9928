//! The outside peers' plumbing: reading Task Bench's report (on text captured from real runs of
//! the programs scripts/taskbench_peers.sh builds), `--peer NAME=PATH`, a requested peer with no
//! program, and a program that fails or prints no report. The peers themselves are not built
//! by the test command; `scripts/taskbench.sh --peer …` runs them.

use std::path::PathBuf;
use std::time::Duration;

use causeway_taskbench::graph::TaskGraph;
use causeway_taskbench::pattern::Pattern;
use causeway_taskbench::sweep::{run_sweep, SweepConfig};
use causeway_taskbench::systems::outside::{parse_report, OutsideKind, OutsidePeer};
use causeway_taskbench::systems::{Limits, System};
use causeway_taskbench::TaskBenchError;

/// Task Bench's report from the Taskflow implementation and from MPI (`nonblock`, 2 ranks):
/// stencil_1d, width 2, 4 timesteps, 16 iterations.
const TASKFLOW_REPORT: &str = include_str!("data/taskflow-stencil_1d-report.txt");
const MPI_REPORT: &str = include_str!("data/mpi-stencil_1d-report.txt");

#[test]
fn reads_the_task_count_and_elapsed_time_of_a_captured_report() {
    let report = parse_report(TASKFLOW_REPORT).expect("a real report reads");
    assert_eq!(report.tasks, 8);
    assert_eq!(report.elapsed, Duration::from_secs_f64(4.100800e-05));
    let report = parse_report(MPI_REPORT).expect("a real report reads");
    assert_eq!(report.tasks, 8);
    assert_eq!(report.elapsed, Duration::from_secs_f64(6.059000e-06));
}

#[test]
fn refuses_a_report_without_its_figures() {
    let without_time: String = TASKFLOW_REPORT
        .lines()
        .filter(|line| !line.starts_with("Elapsed"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(parse_report(&without_time).unwrap_err().contains("Elapsed Time"));
    let without_tasks: String = TASKFLOW_REPORT
        .lines()
        .filter(|line| !line.starts_with("Total Tasks"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(parse_report(&without_tasks).unwrap_err().contains("Total Tasks"));
    assert!(parse_report("").is_err());
    assert!(parse_report("Total Tasks many\nElapsed Time 1e-3 seconds\n").is_err());
    assert!(parse_report("Total Tasks 8\nElapsed Time soon seconds\n").is_err());
    assert!(parse_report("Total Tasks 0\nElapsed Time 1e-3 seconds\n").is_err());
    assert!(parse_report("Total Tasks 8\nElapsed Time 0 seconds\n").is_err());
    assert!(parse_report("Total Tasks 8\nElapsed Time -1e-3 seconds\n").is_err());
    assert!(parse_report("Total Tasks 8\nElapsed Time nan seconds\n").is_err());
}

#[test]
fn peer_specs_name_a_known_peer_and_an_existing_file() {
    let program = std::env::current_exe().expect("the test's own program");
    let spec = format!("taskflow={}", program.display());
    assert_eq!(
        spec.parse::<OutsidePeer>(),
        Ok(OutsidePeer { kind: OutsideKind::Taskflow, binary: program.clone() })
    );
    let bad =
        |spec: &str| matches!(spec.parse::<OutsidePeer>(), Err(TaskBenchError::BadPeer { .. }));
    assert!(bad("taskflow"), "no path");
    assert!(bad("taskflow="), "empty path");
    assert!(bad(&format!("charm={}", program.display())), "unknown peer");
    assert!(bad("mpi=/nonexistent/task-bench/mpi/nonblock"), "missing file");
    assert!(bad(&format!("openmp={}", program.parent().expect("a folder").display())), "a folder");
}

fn config(systems: Vec<System>, outside: Vec<OutsidePeer>) -> SweepConfig {
    SweepConfig {
        patterns: vec![Pattern::Stencil1d],
        widths: vec![2],
        steps: 4,
        work_per_run: 64,
        systems,
        blocks: 1,
        repeats: 1,
        max_iterations: 2,
        min_iterations: 1,
        limits: Limits { workers: 2, max_queues: 8, outside },
    }
}

#[test]
fn a_requested_peer_without_a_program_is_refused_before_anything_runs() {
    let config = config(vec![System::Rayon, System::Outside(OutsideKind::Mpi)], Vec::new());
    assert_eq!(run_sweep(&config, |_| {}), Err(TaskBenchError::MissingPeer { peer: "mpi" }));
}

#[test]
fn task_bench_refuses_a_spread_narrower_than_its_radix() {
    let graph = TaskGraph::new(Pattern::Spread { radix: 3 }, 2, 4).expect("a graph");
    assert!(System::Outside(OutsideKind::Taskflow)
        .validate(&graph, &config(Vec::new(), Vec::new()).limits)
        .is_err());
    let wide = TaskGraph::new(Pattern::Spread { radix: 3 }, 8, 4).expect("a graph");
    assert!(System::Outside(OutsideKind::Taskflow)
        .validate(&wide, &config(Vec::new(), Vec::new()).limits)
        .is_ok());
}

/// A program that fails, or that succeeds without a report, ends the sweep with the peer
/// named (`false` and `true` stand for a peer whose check aborted and one that printed
/// nothing).
#[cfg(unix)]
#[test]
fn a_failing_or_silent_program_fails_the_sweep_naming_the_peer() {
    for (program, says) in [("/bin/false", "exited with"), ("/bin/true", "no \"Total Tasks\"")] {
        let peer = OutsidePeer { kind: OutsideKind::Taskflow, binary: PathBuf::from(program) };
        let config =
            config(vec![System::Rayon, System::Outside(OutsideKind::Taskflow)], vec![peer]);
        let error = run_sweep(&config, |_| {}).expect_err("the sweep fails").to_string();
        assert!(error.contains("taskflow"), "{error}");
        assert!(error.contains(says), "{error}");
    }
}

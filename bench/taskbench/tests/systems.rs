//! Every system end to end on small graphs of every pattern, checksum checked; a graph with a
//! dependency removed fails every system's check; parameters that make no sense are refused.

use std::sync::Arc;

use causeway_taskbench::graph::{Outputs, TaskGraph};
use causeway_taskbench::pattern::Pattern;
use causeway_taskbench::report::{case_svg, metg_summary, metg_table, points_csv, waits_table};
use causeway_taskbench::sweep::{run_sweep, SweepConfig};
use causeway_taskbench::systems::{Limits, System};
use causeway_taskbench::TaskBenchError;

const LIMITS: Limits = Limits { workers: 2, max_queues: 8, outside: Vec::new() };
const ITERATIONS: u32 = 20;

#[test]
fn every_system_reaches_the_reference_on_every_pattern() {
    for pattern in Pattern::STANDARD {
        let graph = Arc::new(TaskGraph::new(pattern, 5, 8).expect("a valid graph"));
        let expected = graph.reference_checksum(ITERATIONS);
        for system in System::ALL {
            let outcome = system
                .run(&graph, ITERATIONS, &LIMITS, expected)
                .unwrap_or_else(|error| panic!("{system} on {pattern}: {error}"));
            assert_eq!(outcome.waits.is_some(), system == System::Queues);
        }
    }
}

#[test]
fn a_missing_dependency_fails_every_system() {
    let graph = TaskGraph::new(Pattern::Stencil1d, 4, 6).expect("a valid graph");
    let expected = graph.reference_checksum(ITERATIONS);
    let broken = Arc::new(graph.without_first_dependency(3, 2));
    for system in System::ALL {
        match system.run(&broken, ITERATIONS, &LIMITS, expected) {
            Err(TaskBenchError::ChecksumMismatch { expected: reference, .. }) => {
                assert_eq!(reference, expected)
            }
            other => panic!("{system}: a broken graph gave {other:?}"),
        }
    }
}

#[test]
fn a_changed_output_changes_the_checksum() {
    let graph = TaskGraph::new(Pattern::AllToAll, 3, 3).expect("a valid graph");
    let outputs = Outputs::new(&graph);
    let untouched = graph.checksum(&outputs);
    graph.run_task(&outputs, 0, 1, ITERATIONS);
    assert_ne!(graph.checksum(&outputs), untouched);
    assert!(graph.check(&outputs, untouched).is_err());
}

#[test]
fn the_queues_variant_elides_its_own_columns_waits() {
    let graph = Arc::new(TaskGraph::new(Pattern::NoComm, 3, 10).expect("a valid graph"));
    let expected = graph.reference_checksum(ITERATIONS);
    let outcome = System::Queues.run(&graph, ITERATIONS, &LIMITS, expected).expect("runs");
    let waits = outcome.waits.expect("the queues variant counts its waits");
    assert_eq!(waits.issued, 3 * 9);
    // Each column waits only on itself: stream order covers every wait.
    assert_eq!(waits.resolutions.elided, waits.issued);
}

#[test]
fn parameters_that_make_no_sense_are_refused() {
    assert_eq!(TaskGraph::new(Pattern::Stencil1d, 0, 4), Err(TaskBenchError::ZeroWidth));
    assert_eq!(TaskGraph::new(Pattern::Stencil1d, 4, 0), Err(TaskBenchError::ZeroSteps));
    let zero_radix = Pattern::Nearest { radix: 0 };
    assert_eq!(
        TaskGraph::new(zero_radix, 4, 4),
        Err(TaskBenchError::ZeroRadix { pattern: zero_radix })
    );
    assert!(matches!("spread_x".parse::<Pattern>(), Err(TaskBenchError::UnknownPattern { .. })));
    assert!(matches!("openmp".parse::<System>(), Err(TaskBenchError::UnknownSystem { .. })));

    let wide = Arc::new(TaskGraph::new(Pattern::NoComm, 9, 2).expect("a valid graph"));
    let refused = System::Queues.run(&wide, 1, &LIMITS, 0);
    assert_eq!(refused, Err(TaskBenchError::TooManyColumns { width: 9, queues: 8 }));
    let many = Limits { max_queues: 64, ..LIMITS };
    let all = Arc::new(TaskGraph::new(Pattern::AllToAll, 9, 2).expect("a valid graph"));
    assert!(matches!(
        System::Queues.run(&all, 1, &many, 0),
        Err(TaskBenchError::TooManyDependencies { dependencies: 9, waits: 8, .. })
    ));
    let no_workers = Limits { workers: 0, ..LIMITS };
    assert_eq!(
        System::Rayon.run(&all, 1, &no_workers, 0).map(|_| ()),
        Err(TaskBenchError::ZeroWorkers)
    );
    // Every refusal reads as a sentence.
    let message = TaskBenchError::TooManyColumns { width: 9, queues: 8 }.to_string();
    assert!(message.contains("width 9") && message.contains("8"), "{message}");
}

#[test]
fn a_tiny_sweep_reports_every_system() {
    let config = SweepConfig {
        patterns: vec![Pattern::Stencil1d, Pattern::AllToAll],
        widths: vec![2, 9],
        steps: 4,
        work_per_run: 1 << 10,
        systems: System::ALL.to_vec(),
        blocks: 2,
        repeats: 1,
        max_iterations: 64,
        min_iterations: 16,
        limits: LIMITS,
    };
    let result = run_sweep(&config, |_| {}).expect("the sweep runs");
    assert_eq!(result.peaks.len(), 2);
    assert_eq!(result.cases.len(), 4);
    for case in &result.cases {
        for system in &case.systems {
            let refused = system.system == System::Queues && case.width == 9;
            assert_eq!(system.refused.is_some(), refused, "{} {}", case.pattern, case.width);
            let blocks = if refused { 0 } else { 2 };
            assert_eq!(system.sweeps.len(), blocks);
            assert!(system.sweeps.iter().all(|sweep| sweep.len() == 3));
        }
    }
    // The reports name every case and system; the plot is one SVG document with a line per
    // system that ran.
    let summary = metg_summary(&result);
    assert_eq!(summary.lines().count(), 2 + result.cases.len());
    assert!(summary.contains("| all_to_all | 9 |") && summary.contains("refused"), "{summary}");
    assert_eq!(metg_table(&result).lines().count(), 2 + 4 * System::ALL.len());
    assert_eq!(waits_table(&result).lines().count(), 2 + 2);
    assert_eq!(points_csv(&result).lines().count(), 1 + (4 * System::ALL.len() - 2) * 2 * 3);
    let svg = case_svg(&result.cases[0]);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<polyline").count(), System::ALL.len());

    let bad = SweepConfig { min_iterations: 128, ..config.clone() };
    assert_eq!(run_sweep(&bad, |_| {}), Err(TaskBenchError::EmptySweep));
    let no_repeats = SweepConfig { repeats: 0, ..config.clone() };
    assert_eq!(run_sweep(&no_repeats, |_| {}), Err(TaskBenchError::EmptySweep));
    let empty = SweepConfig { widths: vec![0], ..config };
    assert_eq!(run_sweep(&empty, |_| {}), Err(TaskBenchError::ZeroWidth));
}

//! The measurement: for every case (pattern × width) and every system, the kernel's iterations
//! swept downward, repeated in blocks that alternate the systems, so that a shared machine's
//! drift lands on all of them alike.
//!
//! Each block first measures the machine's peak (the kernel alone on every worker, see
//! [`measure_peak`]); every run of the block is rated against it. Within a block the systems
//! run in an order rotated by one from the block before. Every run's checksum is compared with
//! the reference computed once per graph and iteration count before the first block: a
//! mismatch ends the sweep with [`TaskBenchError::ChecksumMismatch`].

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::graph::{kernel, TaskGraph};
use crate::metg::{metg, Metg, SweepPoint};
use crate::pattern::Pattern;
use crate::systems::{Limits, System, WaitCounts};
use crate::TaskBenchError;

/// The efficiency whose granularity is reported (the paper's METG(50 %)).
pub const THRESHOLD: f64 = 0.5;

/// How long the peak measurement runs the kernel on each worker.
const PEAK_DURATION: Duration = Duration::from_millis(100);

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepConfig {
    /// Patterns, in table order.
    pub patterns: Vec<Pattern>,
    /// Graph widths (columns).
    pub widths: Vec<u32>,
    /// Timesteps of every graph.
    pub steps: u32,
    /// Systems, in table order.
    pub systems: Vec<System>,
    /// Alternating blocks.
    pub blocks: usize,
    /// Kernel iterations per task at the start of the sweep; halved down to `min_iterations`.
    pub max_iterations: u32,
    /// Kernel iterations per task at the end of the sweep.
    pub min_iterations: u32,
    /// Workers and queues.
    pub limits: Limits,
}

impl SweepConfig {
    /// The iteration counts swept, largest first: `max_iterations` halved while it stays at
    /// or above `min_iterations`.
    pub fn iteration_counts(&self) -> Vec<u32> {
        let mut counts = Vec::new();
        let mut iterations = self.max_iterations;
        while iterations >= self.min_iterations.max(1) {
            counts.push(iterations);
            iterations /= 2;
        }
        counts
    }

    /// Refuses parameters that make no sense, before anything runs.
    pub fn validate(&self) -> Result<(), TaskBenchError> {
        if self.limits.workers == 0 {
            return Err(TaskBenchError::ZeroWorkers);
        }
        if self.iteration_counts().is_empty() || self.blocks == 0 {
            return Err(TaskBenchError::EmptySweep);
        }
        for &pattern in &self.patterns {
            for &width in &self.widths {
                TaskGraph::new(pattern, width, self.steps)?;
            }
        }
        Ok(())
    }
}

/// One system's results on one case.
#[derive(Clone, Debug, PartialEq)]
pub struct SystemResult {
    /// The system.
    pub system: System,
    /// Why it did not run this case (a limit of the system), if it did not.
    pub refused: Option<TaskBenchError>,
    /// Per block, the sweep from the largest granularity down.
    pub sweeps: Vec<Vec<SweepPoint>>,
    /// The waits of the last block's run at the fewest iterations (the queues variant only).
    pub waits: Option<WaitCounts>,
}

impl SystemResult {
    /// The METG of each block's sweep.
    pub fn metgs(&self) -> Vec<Metg> {
        self.sweeps.iter().map(|sweep| metg(sweep, THRESHOLD)).collect()
    }
}

/// One case: a graph and every system's results on it.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    /// The pattern.
    pub pattern: Pattern,
    /// The width.
    pub width: u32,
    /// Tasks per run.
    pub tasks: u64,
    /// Per system, in the configuration's order.
    pub systems: Vec<SystemResult>,
}

/// Everything a sweep measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepResult {
    /// Per block, the peak in kernel iterations per second on all workers.
    pub peaks: Vec<f64>,
    /// Per case, in pattern-then-width order.
    pub cases: Vec<CaseResult>,
}

/// The machine's peak: the kernel alone on each of `workers` threads, for
/// 100 ms, in `iterations`-long calls; kernel iterations per second in all.
pub fn measure_peak(workers: usize, iterations: u32) -> f64 {
    let iterations = iterations.max(1);
    let start = Instant::now();
    let done: u64 = thread::scope(|scope| {
        let threads: Vec<_> = (0..workers)
            .map(|worker| {
                scope.spawn(move || {
                    let mut calls = 0u64;
                    while start.elapsed() < PEAK_DURATION {
                        black_box(kernel(black_box(worker as u64 + calls), iterations));
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        threads.into_iter().map(|thread| thread.join().unwrap_or(0)).sum()
    });
    done as f64 * f64::from(iterations) / start.elapsed().as_secs_f64()
}

/// Runs the whole sweep, telling `progress` what it starts.
pub fn run_sweep(
    config: &SweepConfig,
    mut progress: impl FnMut(&str),
) -> Result<SweepResult, TaskBenchError> {
    config.validate()?;
    let counts = config.iteration_counts();
    let mut graphs = Vec::new();
    let mut references: HashMap<(usize, u32), u64> = HashMap::new();
    for &pattern in &config.patterns {
        for &width in &config.widths {
            let graph = Arc::new(TaskGraph::new(pattern, width, config.steps)?);
            progress(&format!("reference checksums: {pattern} width {width}"));
            for &iterations in &counts {
                references.insert((graphs.len(), iterations), graph.reference_checksum(iterations));
            }
            graphs.push(graph);
        }
    }
    let mut cases: Vec<CaseResult> = graphs
        .iter()
        .map(|graph| CaseResult {
            pattern: graph.pattern(),
            width: graph.width(),
            tasks: graph.tasks(),
            systems: config
                .systems
                .iter()
                .map(|&system| SystemResult {
                    system,
                    refused: system.validate(graph, &config.limits).err(),
                    sweeps: Vec::new(),
                    waits: None,
                })
                .collect(),
        })
        .collect();

    let mut peaks = Vec::with_capacity(config.blocks);
    for block in 0..config.blocks {
        let peak = measure_peak(config.limits.workers, config.max_iterations);
        progress(&format!(
            "block {} of {}: peak {:.3e} iterations/s",
            block + 1,
            config.blocks,
            peak
        ));
        peaks.push(peak);
        for (case_index, (graph, case)) in graphs.iter().zip(&mut cases).enumerate() {
            let systems = case.systems.len();
            for turn in 0..systems {
                let result = &mut case.systems[(turn + block) % systems];
                if result.refused.is_some() {
                    continue;
                }
                let mut sweep = Vec::with_capacity(counts.len());
                for &iterations in &counts {
                    let expected = references[&(case_index, iterations)];
                    let outcome = result
                        .system
                        .run(graph, iterations, &config.limits, expected)
                        .map_err(|error| in_case(error, result.system, graph))?;
                    sweep.push(SweepPoint::of_run(
                        iterations,
                        graph.tasks(),
                        config.limits.workers,
                        outcome.elapsed,
                        peak,
                    ));
                    result.waits = outcome.waits.or(result.waits);
                }
                result.sweeps.push(sweep);
            }
        }
    }
    Ok(SweepResult { peaks, cases })
}

/// Names the system and graph in a run's error, so a checksum mismatch says where it happened.
fn in_case(error: TaskBenchError, system: System, graph: &TaskGraph) -> TaskBenchError {
    TaskBenchError::InRun {
        system: system.name(),
        pattern: graph.pattern(),
        width: graph.width(),
        error: Box::new(error),
    }
}

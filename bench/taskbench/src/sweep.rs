//! The measurement: for every case (pattern × width) and every system, the kernel's iterations
//! swept downward, repeated in blocks that alternate the systems, so that a shared machine's
//! drift lands on all of them alike.
//!
//! Each block measures the machine's peak: the kernel alone on every worker (see
//! [`measure_peak`]), or the best rate of useful work any run of the block reached, whichever
//! is higher (so that a moment of interference during the kernel's own measurement does not
//! rate every system above 100 %); every run of the block is rated against it. Each point of a sweep is the
//! fastest of `repeats` runs, and the peak the fastest of as many windows: on a machine shared
//! with other work, interference only ever adds time, so the fastest run is the one closest to
//! what the system itself costs, and taking it for the peak and for every system alike keeps
//! the ratio fair. Within a block the systems
//! run in an order rotated by one from the block before. Every run's checksum is compared with
//! the reference computed once per graph and iteration count before the first block: a
//! mismatch ends the sweep with [`TaskBenchError::ChecksumMismatch`].
//!
//! Outside peers ([`System::Outside`]) run in the same blocks and turns, on graphs of the same
//! pattern, width, timesteps and iteration counts, but with Task Bench's kernel, whose
//! iterations cost more than the harness's: their runs are rated against a peak of that kernel,
//! measured per block the same way — Task Bench's `trivial` graph, as wide as there are
//! workers, at the sweep's largest iteration count, run by the first outside peer given (the
//! fastest of twice `repeats` runs; every task a long kernel call, no dependency), or the best
//! rate any outside run of the block reached, whichever is higher. Their own core checks their
//! runs; a failed check aborts the program and ends the sweep.

use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::graph::{kernel, TaskGraph};
use crate::metg::{metg, Metg, SweepPoint};
use crate::pattern::Pattern;
use crate::systems::outside::OutsidePeer;
use crate::systems::{Limits, System, WaitCounts};
use crate::TaskBenchError;

/// The efficiency whose granularity is reported (the paper's METG(50 %)).
pub const THRESHOLD: f64 = 0.5;

/// How long one window of the peak measurement runs the kernel on each worker: as long as a
/// run, about.
const PEAK_WINDOW: Duration = Duration::from_millis(5);

/// The fewest timesteps a graph of the sweep has: enough for every pattern's period (a tree of
/// width 2^10 restarts every 11 steps).
pub const MIN_STEPS: u32 = 32;

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepConfig {
    /// Patterns, in table order.
    pub patterns: Vec<Pattern>,
    /// Graph widths (columns).
    pub widths: Vec<u32>,
    /// Timesteps of a graph at most (see [`SweepConfig::steps_for`]).
    pub steps: u32,
    /// Kernel iterations a run's tasks do in all, which sets its timesteps.
    pub work_per_run: u64,
    /// Systems, in table order.
    pub systems: Vec<System>,
    /// Alternating blocks.
    pub blocks: usize,
    /// Runs per point of a sweep (the fastest counts), and windows of the peak measurement.
    pub repeats: usize,
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

    /// The timesteps of the graph of `width` columns run at `iterations` per task: as many as
    /// do [`work_per_run`](Self::work_per_run) kernel iterations, between
    /// [`MIN_STEPS`] and [`steps`](Self::steps). Every run thus lasts about as long (until
    /// overhead dominates), short enough that the fastest of a few repeats escapes a shared
    /// machine's interference alike at every granularity.
    pub fn steps_for(&self, width: u32, iterations: u32) -> u32 {
        let per_step = u64::from(width.max(1)) * u64::from(iterations.max(1));
        let steps = self.work_per_run / per_step;
        steps.clamp(u64::from(MIN_STEPS.min(self.steps)), u64::from(self.steps)) as u32
    }

    /// Refuses parameters that make no sense, before anything runs.
    pub fn validate(&self) -> Result<(), TaskBenchError> {
        if self.limits.workers == 0 {
            return Err(TaskBenchError::ZeroWorkers);
        }
        if self.iteration_counts().is_empty() || self.blocks == 0 || self.repeats == 0 {
            return Err(TaskBenchError::EmptySweep);
        }
        for system in &self.systems {
            if let System::Outside(kind) = *system {
                self.limits.peer(kind)?;
            }
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
    /// Per system, in the configuration's order.
    pub systems: Vec<SystemResult>,
}

/// Everything a sweep measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepResult {
    /// Per block, the peak in kernel iterations per second on all workers (see the module
    /// docs).
    pub peaks: Vec<f64>,
    /// Per block, the peak of Task Bench's kernel, in its iterations per second on all
    /// workers; empty when no outside peer ran.
    pub outside_peaks: Vec<f64>,
    /// Per case, in pattern-then-width order.
    pub cases: Vec<CaseResult>,
}

/// The machine's peak: the kernel alone on each of `workers` threads, in `iterations`-long
/// calls, over `windows` windows of 5 ms; kernel iterations per second in all, in the fastest
/// window.
pub fn measure_peak(workers: usize, iterations: u32, windows: usize) -> f64 {
    (0..windows).map(|_| peak_window(workers, iterations.max(1))).fold(0.0, f64::max)
}

fn peak_window(workers: usize, iterations: u32) -> f64 {
    let start = Instant::now();
    let done: u64 = thread::scope(|scope| {
        let threads: Vec<_> = (0..workers)
            .map(|worker| {
                scope.spawn(move || {
                    let mut calls = 0u64;
                    while start.elapsed() < PEAK_WINDOW {
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

/// The peak of Task Bench's kernel through `peer`: its `trivial` graph, one column per
/// worker, at `iterations` per task, the fastest of `runs` runs; Task Bench's kernel
/// iterations per second on all workers.
fn measure_outside_peak(
    peer: &OutsidePeer,
    config: &SweepConfig,
    iterations: u32,
    runs: usize,
) -> Result<f64, TaskBenchError> {
    let width = config.limits.workers as u32;
    let graph = TaskGraph::new(Pattern::Trivial, width, config.steps_for(width, iterations))?;
    let mut best = 0.0f64;
    for _ in 0..runs {
        let report = peer
            .run(&graph, iterations, config.limits.workers)
            .map_err(|error| in_case(error, System::Outside(peer.kind), &graph))?;
        let work = report.tasks as f64 * f64::from(iterations);
        best = best.max(work / report.elapsed.as_secs_f64());
    }
    Ok(best)
}

/// The fastest of a point's runs and the tasks it ran.
type FastestRun = (Duration, u64);

/// One graph of a case's sweep, with the checksum its runs must reach.
struct SweepGraph {
    graph: Arc<TaskGraph>,
    iterations: u32,
    reference: u64,
}

/// Runs the whole sweep, telling `progress` what it starts.
pub fn run_sweep(
    config: &SweepConfig,
    mut progress: impl FnMut(&str),
) -> Result<SweepResult, TaskBenchError> {
    config.validate()?;
    let counts = config.iteration_counts();
    // Per case (pattern, then width), a graph per iteration count.
    let mut graphs: Vec<Vec<SweepGraph>> = Vec::new();
    for &pattern in &config.patterns {
        for &width in &config.widths {
            progress(&format!("reference checksums: {pattern} width {width}"));
            let mut sweep = Vec::with_capacity(counts.len());
            for &iterations in &counts {
                let graph = TaskGraph::new(pattern, width, config.steps_for(width, iterations))?;
                let reference = graph.reference_checksum(iterations);
                sweep.push(SweepGraph { graph: Arc::new(graph), iterations, reference });
            }
            graphs.push(sweep);
        }
    }
    let mut cases: Vec<CaseResult> = graphs
        .iter()
        .map(|sweep| {
            let graph = &sweep[0].graph;
            CaseResult {
                pattern: graph.pattern(),
                width: graph.width(),
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
            }
        })
        .collect();

    let mut peaks = Vec::with_capacity(config.blocks);
    let mut outside_peaks = Vec::new();
    // The outside peer whose program measures Task Bench's kernel, if any runs.
    let outside_gauge = config.systems.iter().find_map(|system| match *system {
        System::Outside(kind) => config.limits.peer(kind).ok(),
        _ => None,
    });
    for block in 0..config.blocks {
        let kernel_peak =
            measure_peak(config.limits.workers, config.max_iterations, 2 * config.repeats);
        let outside_kernel_peak = match outside_gauge {
            Some(peer) => {
                measure_outside_peak(peer, config, config.max_iterations, 2 * config.repeats)?
            }
            None => 0.0,
        };
        // Per case and system, the fastest run of each graph; rated once the block is over,
        // against the higher of the kernel's peak and the best rate any run reached.
        let mut fastest_runs: Vec<Vec<Option<Vec<FastestRun>>>> = Vec::with_capacity(cases.len());
        let mut best_rate = 0.0f64;
        let mut best_outside_rate = 0.0f64;
        for (sweep, case) in graphs.iter().zip(&mut cases) {
            let systems = case.systems.len();
            let mut case_runs = vec![None; systems];
            for turn in 0..systems {
                let index = (turn + block) % systems;
                let result = &mut case.systems[index];
                if result.refused.is_some() {
                    continue;
                }
                let mut runs = Vec::with_capacity(sweep.len());
                for point in sweep {
                    let mut fastest = Duration::MAX;
                    let mut tasks = point.graph.tasks();
                    for _ in 0..config.repeats {
                        let outcome = result
                            .system
                            .run(&point.graph, point.iterations, &config.limits, point.reference)
                            .map_err(|error| in_case(error, result.system, &point.graph))?;
                        fastest = fastest.min(outcome.elapsed);
                        tasks = outcome.tasks;
                        result.waits = outcome.waits.or(result.waits);
                    }
                    let work = tasks as f64 * f64::from(point.iterations);
                    let rate = work / fastest.as_secs_f64().max(f64::MIN_POSITIVE);
                    if matches!(result.system, System::Outside(_)) {
                        best_outside_rate = best_outside_rate.max(rate);
                    } else {
                        best_rate = best_rate.max(rate);
                    }
                    runs.push((fastest, tasks));
                }
                case_runs[index] = Some(runs);
            }
            fastest_runs.push(case_runs);
        }
        let peak = kernel_peak.max(best_rate);
        progress(&format!(
            "block {} of {}: peak {peak:.3e} iterations/s (kernel alone {kernel_peak:.3e})",
            block + 1,
            config.blocks
        ));
        peaks.push(peak);
        let outside_peak = outside_kernel_peak.max(best_outside_rate);
        if outside_gauge.is_some() {
            progress(&format!(
                "block {} of {}: Task Bench kernel peak {outside_peak:.3e} iterations/s (trivial \
                 graph alone {outside_kernel_peak:.3e})",
                block + 1,
                config.blocks
            ));
            outside_peaks.push(outside_peak);
        }
        for ((sweep, case), case_runs) in graphs.iter().zip(&mut cases).zip(fastest_runs) {
            for (result, runs) in case.systems.iter_mut().zip(case_runs) {
                let Some(runs) = runs else { continue };
                let peak =
                    if matches!(result.system, System::Outside(_)) { outside_peak } else { peak };
                let points = sweep.iter().zip(runs).map(|(point, (elapsed, tasks))| {
                    SweepPoint::of_run(
                        point.iterations,
                        tasks,
                        config.limits.workers,
                        elapsed,
                        peak,
                    )
                });
                result.sweeps.push(points.collect());
            }
        }
    }
    Ok(SweepResult { peaks, outside_peaks, cases })
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

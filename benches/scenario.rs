//! Scenario phases at 10^3, 10^4 and 10^5 operations: how each grows with the workload.
//!
//! Three shapes from [`causeway::scenario::generate`] — a long single-queue pipeline, a wide
//! fan-in (joins waiting on eight lanes each, submitted before their producers) and many
//! semaphores (one per operation, each operation waiting on a recent one) — generated as TOML
//! text in memory, then each phase timed on its own:
//!
//! - `parse`: TOML text to a validated [`Scenario`] (names resolved, lines attached);
//! - `check`: the whole-scenario checks, the deadlock pre-run included;
//! - `report`, `trace`: the `--report` and `--trace` JSON of a real run, written to a sink.
//!   They need a run's outcome, which only [`run::run`] makes, so they are measured at the
//!   sizes the runner takes today (10^3 and 10^4 operations).
//!
//! After the criterion functions the bench prints, per phase and shape, the growth per ×10 in
//! operations: the fastest iteration at 10n over the fastest at n (the fastest, because the
//! machine is shared and noise only ever adds time). Linear growth is 10×, n log n a little
//! more; the target is at most [`GROWTH_TARGET`]×, and a quadratic phase shows about 100×.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use causeway::scenario::run::{self, RunOptions};
use causeway::scenario::{check, generate, parse, report, trace, Scenario};
use criterion::{criterion_group, BenchmarkId, Criterion, SamplingMode};

/// Operation counts, each ten times the one before.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// Sizes at which `report` and `trace` are measured: those a real run is made at.
const RUN_SIZES: [usize; 2] = [1_000, 10_000];

/// The most a phase may grow per ×10 in operations.
const GROWTH_TARGET: f64 = 12.0;

const PHASES: [&str; 4] = ["parse", "check", "report", "trace"];

struct Shape {
    name: &'static str,
    generate: fn(usize) -> String,
}

const SHAPES: [Shape; 3] = [
    Shape { name: "pipeline", generate: generate::pipeline },
    Shape { name: "fan_in", generate: generate::fan_in },
    Shape { name: "many_semaphores", generate: generate::many_semaphores },
];

/// The fastest iteration seen of each (phase, shape, size).
#[derive(Default)]
struct Fastest(RefCell<BTreeMap<(&'static str, &'static str, usize), Duration>>);

impl Fastest {
    /// Runs `work` `iters` times for criterion, remembering the fastest iteration.
    fn time<T>(
        &self,
        key: (&'static str, &'static str, usize),
        iters: u64,
        mut work: impl FnMut() -> T,
    ) -> Duration {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let started = Instant::now();
            black_box(work());
            let took = started.elapsed();
            total += took;
            let mut fastest = self.0.borrow_mut();
            let entry = fastest.entry(key).or_insert(took);
            *entry = (*entry).min(took);
        }
        total
    }

    fn print_growth(&self) {
        let fastest = self.0.borrow();
        eprintln!("growth per ×10 operations (fastest iteration at 10n / at n; target ≤ {GROWTH_TARGET}×):");
        for phase in PHASES {
            for shape in &SHAPES {
                let times: Vec<(usize, Duration)> = SIZES
                    .iter()
                    .filter_map(|&size| fastest.get(&(phase, shape.name, size)).map(|&t| (size, t)))
                    .collect();
                let mut line = format!("  {phase:<6} {:<16}", shape.name);
                for &(size, time) in &times {
                    line.push_str(&format!(" {size:>6}: {:>10.3} ms", time.as_secs_f64() * 1e3));
                }
                for pair in times.windows(2) {
                    let growth = pair[1].1.as_secs_f64() / pair[0].1.as_secs_f64();
                    let verdict = if growth <= GROWTH_TARGET { "" } else { " OVER TARGET" };
                    line.push_str(&format!(
                        "  ×{:.1} ({}→{}){verdict}",
                        growth, pair[0].0, pair[1].0
                    ));
                }
                eprintln!("{line}");
            }
        }
    }
}

fn parsed(text: &str) -> Scenario {
    parse::parse(Path::new("generated.toml"), text).expect("generated scenarios are valid")
}

fn bench_phases(c: &mut Criterion) {
    let fastest = Fastest::default();
    for shape in &SHAPES {
        let mut group = c.benchmark_group(format!("scenario_{}", shape.name));
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(2));
        for size in SIZES {
            let text = (shape.generate)(size);
            group.bench_function(BenchmarkId::new("parse", size), |b| {
                b.iter_custom(|iters| {
                    fastest.time(("parse", shape.name, size), iters, || parsed(&text))
                })
            });
            let scenario = parsed(&text);
            group.bench_function(BenchmarkId::new("check", size), |b| {
                b.iter_custom(|iters| {
                    fastest.time(("check", shape.name, size), iters, || check::check(&scenario))
                })
            });
            if !RUN_SIZES.contains(&size) {
                continue;
            }
            let options = RunOptions { timeout: Duration::from_secs(60), progress: false };
            let plan = check::check(&scenario).expect("generated scenarios check");
            let outcome = run::run(&scenario, &plan, options).expect("generated scenarios run");
            group.bench_function(BenchmarkId::new("report", size), |b| {
                b.iter_custom(|iters| {
                    fastest.time(("report", shape.name, size), iters, || {
                        report::write(&outcome, std::io::sink())
                    })
                })
            });
            group.bench_function(BenchmarkId::new("trace", size), |b| {
                b.iter_custom(|iters| {
                    fastest.time(("trace", shape.name, size), iters, || {
                        trace::write(&outcome, std::io::sink())
                    })
                })
            });
        }
        group.finish();
    }
    fastest.print_growth();
}

// `criterion_group!` emits an undocumented `pub fn`; a private module keeps it out of the
// workspace's `missing_docs` lint without silencing the lint for the rest of the file.
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        // Groups set their own windows.
        config = Criterion::default();
        targets = bench_phases
    }
}

fn main() {
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}

//! Scenario phases at 10^3, 10^4 and 10^5 operations: how each grows with the workload.
//!
//! Three shapes from [`causeway_scenario::generate`] — a long single-queue pipeline, a wide
//! fan-in (joins waiting on eight lanes each, submitted before their producers) and many
//! semaphores (one per operation, each operation waiting on a recent one) — generated as TOML
//! text in memory, then each phase timed on its own:
//!
//! - `parse`: TOML text to a validated [`Scenario`] (names resolved, lines attached);
//! - `check`: the whole-scenario checks, the deadlock pre-run and the plan included;
//! - `run`: [`run::run`] from the check's plan — a CPU device built, every operation submitted
//!   (waiting for room where a ring or history is full), performed and recorded;
//! - `report`, `trace`: the `--report` and `--trace` JSON of a real run (made by [`run::run`]
//!   from the check's plan, outside the measurement), written to a byte counter.
//!
//! Each phase has a peer measured in the same run, the least work of its kind over the same
//! input, which grows only as fast as the machine's memory lets a linear pass grow:
//!
//! - `toml_table` (for `parse`): the TOML library's own document of the text, as a
//!   `toml::Table`;
//! - `read_ops` (for `check`): one pass reading every operation's waits and signals;
//! - `device_submit` (for `run`): the same device built with the same rings and histories,
//!   every operation submitted to it directly with its waits and signals, and the last value of
//!   every semaphore waited for — the library's own cost, with no scenario bookkeeping;
//! - `read_outcome` (for `report` and `trace`): one pass reading every operation's record
//!   (times, waits, frontier) and every semaphore's history.
//!
//! After the criterion functions the bench prints, per phase and shape, the growth per ×10 in
//! operations: the fastest *block* at 10n over the fastest at n, per iteration. A block is as
//! many consecutive iterations as make [`BLOCK_OPS`] operations (100 at 10^3, 10 at 10^4, one
//! at 10^5), so every size is timed over the same amount of work. The fastest, because the
//! machine is shared and noise only ever adds time; over equal work, because the fastest of
//! thousands of short iterations is one that no timer tick or preemption touched, while an
//! iteration of 10^5 operations always meets some — comparing single iterations would charge
//! that difference in luck to the larger size. Linear growth is 10×, n log n a little more,
//! and a quadratic phase shows about 100×; the target is at most [`GROWTH_TARGET`]×. Each line
//! also gives the peer's growth and the phase's growth over it.
//!
//! It prints the table twice. *Warm*: criterion's iterations, back to back, so at 10^3 and 10^4
//! operations the data stays in the caches from one iteration to the next while at 10^5 it
//! does not fit (2 MB of L2 per core here); even the plain peer passes then grow far beyond
//! 10× per ×10. *Cold*: [`COLD_BLOCKS`] more blocks of each, every iteration after reading
//! [`EVICTION_BYTES`] of other memory, so that every size starts from caches that do not hold
//! its data — as a phase of the CLI does, which runs once over data the one before left
//! behind. The cold table shows how the work itself grows.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use causeway::cpu::CpuBackend;
use causeway::device::{Device, Op, QueueConfig, QueueId, SemaphoreConfig, SemaphoreId, Work};
use causeway::PoolConfig;
use causeway_scenario::check::Plan;
use causeway_scenario::model::{Home, Target};
use causeway_scenario::run::{self, RunOptions};
use causeway_scenario::{check, generate, parse, report, trace, Scenario};
use criterion::{criterion_group, BenchmarkId, Criterion, SamplingMode};

/// Operation counts, each ten times the one before.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// The most a phase may grow per ×10 in operations.
const GROWTH_TARGET: f64 = 12.0;

/// Operations in a timed block: each size is timed over this much work (see the module
/// documentation).
const BLOCK_OPS: usize = SIZES[SIZES.len() - 1];

/// Cold blocks of each phase, shape and size (one under `--test`, which only checks that the
/// bench runs).
const COLD_BLOCKS: usize = 3;

/// Memory read before each cold iteration: twice the last-level cache here (32 MB).
const EVICTION_BYTES: usize = 64 << 20;

/// A measured phase and its peer (see the module documentation).
struct Phase {
    name: &'static str,
    peer: &'static str,
}

const PHASES: [Phase; 5] = [
    Phase { name: "parse", peer: "toml_table" },
    Phase { name: "check", peer: "read_ops" },
    Phase { name: "run", peer: "device_submit" },
    Phase { name: "report", peer: "read_outcome" },
    Phase { name: "trace", peer: "read_outcome" },
];

struct Shape {
    name: &'static str,
    generate: fn(usize) -> String,
}

const SHAPES: [Shape; 3] = [
    Shape { name: "pipeline", generate: generate::pipeline },
    Shape { name: "fan_in", generate: generate::fan_in },
    Shape { name: "many_semaphores", generate: generate::many_semaphores },
];

/// Whether an iteration found the caches as the one before left them, or emptied of its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Caches {
    Warm,
    Cold,
}

/// A timed (phase, shape, size) at one cache temperature.
type Key = (Caches, &'static str, &'static str, usize);

/// Iterations of a block at `size` operations (see [`BLOCK_OPS`]).
fn block_iterations(size: usize) -> u32 {
    (BLOCK_OPS / size).max(1) as u32
}

/// A block being timed: the iterations so far and their total time.
#[derive(Clone, Copy, Default)]
struct Block {
    iterations: u32,
    took: Duration,
}

/// The fastest block seen of each measurement (per iteration), the blocks being timed, and the
/// memory read to make caches cold.
struct Fastest {
    times: RefCell<BTreeMap<Key, Duration>>,
    open: RefCell<BTreeMap<Key, Block>>,
    eviction: Vec<u8>,
    cold_blocks: usize,
}

impl Fastest {
    fn new() -> Fastest {
        // Distinct bytes, so the pages are really there to be read.
        let eviction = (0..EVICTION_BYTES).map(|at| at as u8).collect();
        let cold_blocks = if std::env::args().any(|arg| arg == "--test") { 1 } else { COLD_BLOCKS };
        Fastest { times: RefCell::default(), open: RefCell::default(), eviction, cold_blocks }
    }

    /// Adds one iteration to `key`'s open block; a block that is complete records its time per
    /// iteration if it is the fastest yet, and the next iteration opens a new one.
    fn record(&self, key: Key, took: Duration) {
        let (_, _, _, size) = key;
        let mut open = self.open.borrow_mut();
        let block = open.entry(key).or_default();
        block.iterations += 1;
        block.took += took;
        if block.iterations < block_iterations(size) {
            return;
        }
        let per_iteration = block.took / block.iterations;
        *block = Block::default();
        let mut times = self.times.borrow_mut();
        let entry = times.entry(key).or_insert(per_iteration);
        *entry = (*entry).min(per_iteration);
    }

    /// Runs `work` `iters` times for criterion, timing each iteration into its block.
    fn time<T>(
        &self,
        (phase, shape, size): (&'static str, &'static str, usize),
        iters: u64,
        mut work: impl FnMut() -> T,
    ) -> Duration {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let started = Instant::now();
            black_box(work());
            let took = started.elapsed();
            total += took;
            self.record((Caches::Warm, phase, shape, size), took);
        }
        total
    }

    /// Runs `work` for [`COLD_BLOCKS`] blocks, each iteration after reading the eviction memory.
    fn time_cold<T>(
        &self,
        (phase, shape, size): (&'static str, &'static str, usize),
        mut work: impl FnMut() -> T,
    ) {
        for _ in 0..self.cold_blocks as u32 * block_iterations(size) {
            let lines = self.eviction.iter().step_by(64);
            black_box(lines.fold(0u8, |sum, &byte| sum.wrapping_add(byte)));
            let started = Instant::now();
            black_box(work());
            self.record((Caches::Cold, phase, shape, size), started.elapsed());
        }
    }

    /// The fastest times of `phase` on `shape`, by size, for the sizes it was measured at.
    fn times(&self, caches: Caches, phase: &str, shape: &str) -> Vec<(usize, Duration)> {
        let times = self.times.borrow();
        let at = |size: usize| times.get(&(caches, phase, shape, size)).map(|&time| (size, time));
        SIZES.iter().filter_map(|&size| at(size)).collect()
    }

    fn print_growth(&self, caches: Caches) {
        eprintln!(
            "{caches:?}: growth per ×10 operations (fastest block of {BLOCK_OPS} operations, per \
             iteration, at 10n / at n; target ≤ \
             {GROWTH_TARGET}×), beside the peer's growth and the phase's growth over the peer's:"
        );
        for phase in &PHASES {
            for shape in &SHAPES {
                let times = self.times(caches, phase.name, shape.name);
                let peer = self.times(caches, phase.peer, shape.name);
                let mut line = format!("  {:<6} {:<16}", phase.name, shape.name);
                for &(size, time) in &times {
                    line.push_str(&format!(" {size:>6}: {:>9.3} ms", time.as_secs_f64() * 1e3));
                }
                for (pair, peer_pair) in times.windows(2).zip(peer.windows(2)) {
                    let growth = pair[1].1.as_secs_f64() / pair[0].1.as_secs_f64();
                    let peer_growth = peer_pair[1].1.as_secs_f64() / peer_pair[0].1.as_secs_f64();
                    let verdict = if growth <= GROWTH_TARGET { "" } else { " (over target)" };
                    line.push_str(&format!(
                        " | {}→{}: ×{growth:.1}{verdict}, {} ×{peer_growth:.1}, over it ×{:.2}",
                        pair[0].0,
                        pair[1].0,
                        phase.peer,
                        growth / peer_growth
                    ));
                }
                eprintln!("{line}");
            }
        }
    }
}

/// Every operation's waits and signals, read once.
fn read_ops(scenario: &Scenario) -> u64 {
    let conditions =
        scenario.ops.iter().flat_map(|op| scenario.waits(op).iter().chain(scenario.signals(op)));
    conditions.map(|&(semaphore, value)| semaphore as u64 ^ value).fold(0, u64::wrapping_add)
}

/// `scenario`'s operations submitted straight to a device sized by `plan` (all of them queue
/// operations with no work, as in the generated shapes), then every semaphore's last value
/// waited for.
fn device_submit(scenario: &Scenario, plan: &Plan) -> u64 {
    let mut builder = Device::builder(PoolConfig::with_workers(scenario.workers));
    builder.driver(CpuBackend::new());
    let queues: Vec<QueueId> = plan
        .queue_slots
        .iter()
        .map(|&slots| {
            let mut config = QueueConfig::default();
            config.capacity = slots;
            builder.queue(config)
        })
        .collect();
    let ids: Vec<SemaphoreId> = scenario
        .semaphores
        .iter()
        .zip(&plan.history_slots)
        .map(|(semaphore, &history)| {
            let Home::Queue(home) = semaphore.home else {
                unreachable!("generated homes are queues")
            };
            let home = builder.endpoint(queues[home]).expect("declared queues have endpoints");
            let mut config = SemaphoreConfig::new(semaphore.initial, semaphore.scope, home);
            config.history = history;
            builder.semaphore_config(config)
        })
        .collect();
    let device = builder.build().expect("the device starts");
    let mut last = vec![0; ids.len()];
    for (index, op) in scenario.ops.iter().enumerate() {
        let Target::Queue(queue) = op.target else { unreachable!("generated ops are queued") };
        let waits: Vec<_> = scenario.waits(op).iter().map(|&(s, v)| (ids[s], v)).collect();
        let signals: Vec<_> = scenario.signals(op).iter().map(|&(s, v)| (ids[s], v)).collect();
        for &(semaphore, value) in scenario.signals(op) {
            last[semaphore] = last[semaphore].max(value);
        }
        let op = Op {
            waits: &waits,
            signals: &signals,
            work: Work::Barrier,
            tag: index as u64,
            ..Default::default()
        };
        device.submit(queues[queue], &op).expect("room frees as the device runs");
    }
    for (&id, &value) in ids.iter().zip(&last) {
        let semaphore = device.semaphore(id).expect("built semaphores exist");
        causeway::runtime::blocking::wait(semaphore, value, None)
            .expect("generated scenarios finish");
    }
    last.iter().sum()
}

/// Every operation's record and every semaphore's history, read once.
fn read_outcome(outcome: &run::Outcome<'_>) -> u64 {
    let ops = outcome.ops.iter().map(|record| {
        let waits = outcome.waits_of(record).iter().map(|wait| wait.value);
        let frontier = outcome.points_of(record.frontier).iter().map(|point| point.epoch);
        let times = [record.start_ns, record.end_ns, record.epoch];
        waits.chain(frontier).chain(times).fold(0, u64::wrapping_add)
    });
    let history = outcome.semaphores.iter().flat_map(|semaphore| outcome.history_of(semaphore));
    let histories = history
        .map(|entry| outcome.points_of(entry.frontier).iter().map(|point| point.epoch).sum());
    ops.chain(histories).fold(0, u64::wrapping_add)
}

/// A writer that only counts bytes, so nothing the documents write is optimised away.
struct Written(u64);

impl io::Write for Written {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn parsed(text: &str) -> Scenario {
    parse::parse(Path::new("generated.toml"), text).expect("generated scenarios are valid")
}

fn bench_phases(c: &mut Criterion) {
    let fastest = Fastest::new();
    for shape in &SHAPES {
        let mut group = c.benchmark_group(format!("scenario_{}", shape.name));
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(2));
        for size in SIZES {
            let text = (shape.generate)(size);
            let mut measure = |phase: &'static str, work: &mut dyn FnMut() -> u64| {
                group.bench_function(BenchmarkId::new(phase, size), |b| {
                    b.iter_custom(|iters| {
                        fastest.time((phase, shape.name, size), iters, &mut *work)
                    })
                });
                fastest.time_cold((phase, shape.name, size), &mut *work);
            };
            measure("parse", &mut || parsed(&text).ops.len() as u64);
            measure("toml_table", &mut || {
                text.parse::<toml::Table>().expect("generated scenarios are TOML").len() as u64
            });
            let scenario = parsed(&text);
            measure("check", &mut || {
                check::check(&scenario).expect("generated scenarios finish").queue_slots.len()
                    as u64
            });
            measure("read_ops", &mut || read_ops(&scenario));
            let options =
                RunOptions { timeout: Duration::from_secs(60), progress: false, all_cpu: false };
            let plan = check::check(&scenario).expect("generated scenarios check");
            measure("run", &mut || {
                let outcome = run::run(&scenario, &plan, options).expect("generated scenarios run");
                outcome.ops.len() as u64
            });
            measure("device_submit", &mut || device_submit(&scenario, &plan));
            let outcome = run::run(&scenario, &plan, options).expect("generated scenarios run");
            let mut written = Written(0);
            measure("report", &mut || {
                report::write(&outcome, &mut written).expect("a counter takes every byte");
                written.0
            });
            measure("trace", &mut || {
                trace::write(&outcome, &mut written).expect("a counter takes every byte");
                written.0
            });
            measure("read_outcome", &mut || read_outcome(&outcome));
        }
        group.finish();
    }
    fastest.print_growth(Caches::Warm);
    fastest.print_growth(Caches::Cold);
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

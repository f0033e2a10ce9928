//! Block processor benchmarks: tiled dispatches run by causeway's
//! [`BlockProcessor`](causeway_driver_cpu::block::BlockProcessor) on a two-worker pool beside the
//! same kernels run directly on two persistent threads.
//!
//! Measured, each group with its floor in the same run:
//!
//! - `add_1m`: `c[i] = a[i] + b[i]` over [`ELEMENTS`] `f32`s as one dispatch of [`ADD_TILES`]
//!   tiles of [`TILE_ELEMENTS`] elements, on two workers. `causeway`: the bench thread submits a
//!   block processor to a [`CpuPool`] of two workers that never park and sleeps until the
//!   processor's finish hook wakes it. `direct_floor`: the same kernel over the same tiles on
//!   two persistent threads that spin between rounds, claiming tiles from one plain atomic
//!   counter (`fetch_add`, one tile per claim) and meeting at an arrival counter, the last
//!   arriver waking the bench thread in the same way. The difference is the runtime's overhead
//!   per dispatch; since both include the same wake of the bench thread, it cancels out.
//! - `region_transition`: a command buffer of [`REGIONS`] regions of [`REGION_TILES`] trivial
//!   tiles each, reported **per region** (each function divides its time by [`REGIONS`]), so
//!   the figure is the cost of one barrier between dispatches. Floor: the two persistent
//!   threads running [`REGIONS`] phases, claiming each phase's tiles from that phase's counter
//!   and passing a spin barrier (an arrival counter and a phase word) between phases.
//!
//! After the criterion functions of `add_1m`, the bench prints a blocked paired estimate of the
//! overhead (alternating blocks of causeway and floor runs, median of each block, median of the
//! differences), which is steadier than the difference of two criterion means on a shared
//! machine where memory bandwidth and competing load drift. Every run records which threads ran
//! its tiles (the same one load per tile and one RMW per thread in both peers): on a loaded
//! two-core machine one of the two threads is often descheduled for a whole run, which the
//! criterion figures silently include; the paired report gives the share of runs both threads
//! took part in and compares medians over those runs.
//!
//! How the bench thread waits: it parks (`std::thread::park`) and the finisher unparks it, in
//! both peers, because on a two-core machine a third spinning thread would take a core from
//! the two being measured. Thread spawning is never timed: the pool and the floor threads are
//! started before measuring and stay up for the whole function. Pool worker `i` and floor thread
//! `i` are both pinned to CPU `i`, so that on a shared machine both peers meet other load on
//! the same CPUs in the same way (unpinned, the scheduler placed the two peers' threads
//! differently, which decided the comparison more than either runtime did).
//!
//! Every run is checked outside the timed part: the output of `add_1m` after the check runs, and
//! per-tile counts of every region transition run.

use std::cell::Cell;
use std::hint::{black_box, spin_loop};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use causeway::executor::{Class, Process, SpinPolicy};
use causeway::{Failure, HostExecutor};
use causeway_driver_cpu::block::{BlockProcessor, CommandBuffer, Kernel};
use causeway_driver_cpu::{CpuPool, PoolConfig};
use causeway_platform_linux::pin_current_thread;
use criterion::{criterion_group, Criterion, SamplingMode, Throughput};

/// Elements of each vector in `add_1m`.
const ELEMENTS: usize = 1 << 20;

/// Elements per tile: 64 KiB of each input and of the output, a comfortable L2 working set.
const TILE_ELEMENTS: usize = 16 * 1024;

/// Tiles of the `add_1m` dispatch.
const ADD_TILES: u32 = (ELEMENTS / TILE_ELEMENTS) as u32;

/// Regions in one `region_transition` buffer.
const REGIONS: u32 = 1000;

/// Tiles per region in `region_transition`: one per worker.
const REGION_TILES: u32 = 2;

/// Workers, and floor threads: one per core of the benchmark machine.
const WORKERS: usize = 2;

/// `u32::MAX` idle scans is minutes of spinning: the workers never park during a benchmark.
const SPIN_WITHOUT_PARKING: SpinPolicy = SpinPolicy::Fixed(u32::MAX);

/// Checked runs before measuring each function.
const CHECK_RUNS: usize = 3;

/// Blocks and runs per block of the paired `add_1m` overhead estimate.
const PAIRED_BLOCKS: usize = 12;
const PAIRED_RUNS: usize = 100;

/// One value on its own pair of cache lines (adjacent-line prefetch pairs them on x86).
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

/// Parks the bench thread until the end of a run is signalled.
struct Waiter {
    ended: AtomicBool,
    thread: Thread,
}

impl Waiter {
    fn for_current_thread() -> Waiter {
        Waiter { ended: AtomicBool::new(false), thread: thread::current() }
    }

    /// Called by whoever finishes the run.
    fn end(&self) {
        // Release pairs with the Acquire load in `wait`: the run's writes are visible.
        self.ended.store(true, Ordering::Release);
        self.thread.unpark();
    }

    /// Sleeps until `end`, then re-arms.
    fn wait(&self) {
        // `park` may return spuriously or for an earlier `unpark`: re-check.
        while !self.ended.load(Ordering::Acquire) {
            thread::park();
        }
        self.ended.store(false, Ordering::Relaxed);
    }
}

/// `c[i] = a[i] + b[i]` over one tile of [`TILE_ELEMENTS`].
struct Add<'a> {
    a: &'a [f32],
    b: &'a [f32],
    c: NonNull<f32>,
}

// SAFETY: `c` is written only through `run`, and each tile writes its own disjoint range of it;
// every tile runs exactly once per execution (the block processor's claims, or the floor's
// counter, hand each index out once), and the bench reads `c` only between executions, after
// the finisher's Release (`Waiter::end`) has been acquired.
unsafe impl Sync for Add<'_> {}

/// The number of the current `add_1m` run, bumped before every run (untimed).
static RUN: AtomicU64 = AtomicU64::new(0);

/// One bit per thread that ran at least one tile of the current run.
static PARTICIPANTS: AtomicU64 = AtomicU64::new(0);

/// Hands every thread that runs tiles its own bit (modulo 64: only the two threads of one
/// pool or floor, numbered consecutively, ever meet in a run).
static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// This thread's bit, and the last run it reported itself in.
    static PARTICIPANT: Cell<(u64, u64)> =
        Cell::new((1 << (NEXT_THREAD.fetch_add(1, Ordering::Relaxed) % 64), u64::MAX));
}

/// Records that this thread ran a tile of the current run: one load per tile, one RMW per
/// thread and run, the same in both peers.
fn participate() {
    let run = RUN.load(Ordering::Relaxed);
    PARTICIPANT.with(|cell| {
        let (bit, last) = cell.get();
        if last != run {
            cell.set((bit, run));
            PARTICIPANTS.fetch_or(bit, Ordering::Relaxed);
        }
    });
}

/// Starts a new run's participation record (untimed, between runs).
fn next_run() {
    PARTICIPANTS.store(0, Ordering::Relaxed);
    RUN.fetch_add(1, Ordering::Relaxed);
}

/// How many threads ran tiles of the run just ended (read after its end was acquired).
fn participants() -> u32 {
    PARTICIPANTS.load(Ordering::Relaxed).count_ones()
}

impl Kernel for Add<'_> {
    fn run(&self, tile: u32) {
        participate();
        let start = tile as usize * TILE_ELEMENTS;
        let end = (start + TILE_ELEMENTS).min(self.a.len());
        // SAFETY: `start..end` lies within `c` (same length as `a`), and no other tile of this
        // execution touches it (see the `Sync` impl).
        let c = unsafe { std::slice::from_raw_parts_mut(self.c.as_ptr().add(start), end - start) };
        for ((c, a), b) in c.iter_mut().zip(&self.a[start..end]).zip(&self.b[start..end]) {
            *c = a + b;
        }
    }
}

/// Vectors of `add_1m`: `a[i] = i`, `b[i] = 2i`, so `c[i]` must be `3i`.
struct Vectors {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
}

impl Vectors {
    fn new() -> Vectors {
        Vectors {
            a: (0..ELEMENTS).map(|i| i as f32).collect(),
            b: (0..ELEMENTS).map(|i| 2.0 * i as f32).collect(),
            c: vec![0.0; ELEMENTS],
        }
    }

    fn kernel(&mut self) -> Add<'_> {
        Add { a: &self.a, b: &self.b, c: NonNull::new(self.c.as_mut_ptr()).expect("a vector") }
    }
}

/// Checks and clears `c` through the raw pointer the kernel writes with (between runs only).
fn check_and_clear(kernel: &Add<'_>) {
    for index in 0..ELEMENTS {
        // SAFETY: no execution is running (the caller waited for the last one), and `index` is
        // within `c`.
        let cell = unsafe { &mut *kernel.c.as_ptr().add(index) };
        assert_eq!(*cell, 3.0 * index as f32, "c[{index}]");
        *cell = 0.0;
    }
}

/// Runs one execution of `process` (rearming a finished one first) and returns the time from
/// submission to the bench thread being woken by the finish hook.
fn run_causeway<'p>(
    executor: &HostExecutor<'p>,
    processor: &BlockProcessor<'_>,
    process: &'p Process<'p>,
    waiter: &Waiter,
) -> Duration {
    if process.is_completed() {
        process.rearm().expect("a completed process rearms");
        processor.reset().expect("a finished processor resets");
    }
    next_run();
    let start = Instant::now();
    executor.submit(process).expect("a fresh process submits");
    waiter.wait();
    let elapsed = start.elapsed();
    // The hook (which woke this thread) runs just before the executor marks completion, on the
    // worker this thread has most likely just preempted (a wake lands on the waker's CPU):
    // yield to it rather than spin against it.
    while !process.is_completed() {
        thread::yield_now();
    }
    assert_eq!(process.failure(), None, "the execution succeeded");
    elapsed
}

/// The floor: two persistent threads claiming tiles of `phases` phases, a spin barrier
/// between phases, and the last arriver of the last phase waking the bench thread.
struct Floor {
    /// Bumped by the bench thread to start a round.
    round: Padded<AtomicU64>,
    /// Per phase, the next unclaimed tile.
    next: Vec<Padded<AtomicU32>>,
    /// Threads arrived at the current phase's barrier.
    arrived: Padded<AtomicU32>,
    /// The phase the threads may work on, within a round: the barrier's release word.
    phase: Padded<AtomicU32>,
    stop: AtomicBool,
    waiter: Waiter,
    tiles: u32,
}

impl Floor {
    fn new(phases: u32, tiles: u32) -> Floor {
        Floor {
            round: Padded::default(),
            next: (0..phases).map(|_| Padded::default()).collect(),
            arrived: Padded::default(),
            phase: Padded::default(),
            stop: AtomicBool::new(false),
            waiter: Waiter::for_current_thread(),
            tiles,
        }
    }

    /// One floor thread: waits for a round after `seen`, runs every phase of it, and goes back
    /// to waiting.
    fn serve(&self, kernel: &(impl Kernel + ?Sized), mut seen: u64) {
        let phases = self.next.len() as u32;
        loop {
            // Acquire pairs with the Release bump in `run`: the round's reset is visible.
            let round = loop {
                let round = self.round.0.load(Ordering::Acquire);
                if round != seen {
                    break round;
                }
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                spin_loop();
            };
            seen = round;
            for phase in 0..phases {
                // Acquire pairs with the last arriver's Release store of `phase`.
                while self.phase.0.load(Ordering::Acquire) != phase {
                    spin_loop();
                }
                loop {
                    let tile = self.next[phase as usize].0.fetch_add(1, Ordering::Relaxed);
                    if tile >= self.tiles {
                        break;
                    }
                    kernel.run(tile);
                }
                // AcqRel: the Release half publishes this thread's tiles to the last arriver,
                // whose Acquire half gathers both threads' before it opens the next phase.
                if self.arrived.0.fetch_add(1, Ordering::AcqRel) + 1 == WORKERS as u32 {
                    self.arrived.0.store(0, Ordering::Relaxed);
                    if phase + 1 == phases {
                        self.waiter.end();
                    } else {
                        // Release pairs with the other thread's Acquire wait above.
                        self.phase.0.store(phase + 1, Ordering::Release);
                    }
                }
            }
        }
    }

    /// Runs one round and returns the time from its start to the bench thread being woken.
    fn run(&self) -> Duration {
        for next in &self.next {
            next.0.store(0, Ordering::Relaxed);
        }
        self.phase.0.store(0, Ordering::Relaxed);
        next_run();
        let start = Instant::now();
        // Release: pairs with the Acquire wait in `serve`, publishing the resets above.
        self.round.0.fetch_add(1, Ordering::Release);
        self.waiter.wait();
        start.elapsed()
    }

    /// Runs `body` with the two floor threads serving rounds of `kernel`.
    fn with_threads<R>(&self, kernel: &(impl Kernel + ?Sized), body: impl FnOnce() -> R) -> R {
        // Threads of an earlier call have been joined: nothing else touches these now.
        self.stop.store(false, Ordering::Relaxed);
        let seen = self.round.0.load(Ordering::Relaxed);
        thread::scope(|scope| {
            for index in 0..WORKERS {
                thread::Builder::new()
                    .name(format!("floor-{index}"))
                    .spawn_scoped(scope, move || {
                        pin(index);
                        self.serve(kernel, seen)
                    })
                    .expect("spawn a floor thread");
            }
            let result = body();
            self.stop.store(true, Ordering::Relaxed);
            result
        })
    }
}

/// A pool of two workers that never park, for the duration of `body`.
fn with_pool<'p, R>(name: &str, body: impl FnOnce(&HostExecutor<'p>) -> R) -> R {
    let mut config = PoolConfig::with_workers(WORKERS);
    config.spin = SPIN_WITHOUT_PARKING;
    config.name = name.into();
    // Worker `i` on CPU `i`, exactly as `pin` places floor thread `i`.
    config.pin = true;
    CpuPool::scope(config, body).expect("start the pool")
}

/// Pins the calling thread to CPU `index` modulo the available parallelism, as the pool pins
/// its workers: both peers then share the same CPUs the same way, whatever else runs there.
fn pin(index: usize) {
    let cpus = thread::available_parallelism().map_or(1, usize::from);
    // A refusal (a restricted cpuset) leaves the thread free, as it does for the pool.
    let _ = pin_current_thread(index % cpus);
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn bench_add_1m(c: &mut Criterion) {
    let mut group = c.benchmark_group("add_1m");
    // An iteration is a whole dispatch (about a millisecond): flat sampling keeps the sample
    // count within the window.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(ELEMENTS as u64));
    eprintln!(
        "add_1m: {ELEMENTS} f32 elements, {ADD_TILES} tiles of {TILE_ELEMENTS} elements, \
         {WORKERS} workers"
    );

    let mut vectors = Vectors::new();
    let kernel = vectors.kernel();
    let waiter = Waiter::for_current_thread();
    let hook = |outcome: Result<(), Failure>| {
        assert_eq!(outcome, Ok(()));
        waiter.end();
    };
    let buffer = CommandBuffer::builder().dispatch(ADD_TILES, &kernel).build().expect("record");
    let processor =
        BlockProcessor::new(&buffer, WORKERS).expect("a processor").with_finish_hook(&hook);
    let process = Process::new(&processor, Class::Compute);
    let floor = Floor::new(1, ADD_TILES);

    with_pool("add", |executor| {
        for _ in 0..CHECK_RUNS {
            run_causeway(executor, &processor, &process, &waiter);
            check_and_clear(&kernel);
        }
        group.bench_function("causeway", |b| {
            b.iter_custom(|iters| {
                (0..iters).map(|_| run_causeway(executor, &processor, &process, &waiter)).sum()
            })
        });
    });
    floor.with_threads(&kernel, || {
        for _ in 0..CHECK_RUNS {
            floor.run();
            check_and_clear(&kernel);
        }
        group.bench_function("direct_floor", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| floor.run()).sum())
        });
    });
    group.finish();

    // Blocked pairs: memory bandwidth and competing load on a shared machine drift over
    // seconds, so compare neighbouring blocks rather than two windows far apart. Runs where
    // only one thread ran tiles (the other was descheduled) are counted and reported apart.
    let mut causeway_runs = Vec::new();
    let mut floor_runs = Vec::new();
    let mut differences = Vec::with_capacity(PAIRED_BLOCKS);
    for _ in 0..PAIRED_BLOCKS {
        let causeway: Vec<Run> = with_pool("add", |executor| {
            (0..PAIRED_RUNS)
                .map(|_| Run::new(run_causeway(executor, &processor, &process, &waiter)))
                .collect()
        });
        let direct: Vec<Run> = floor
            .with_threads(&kernel, || (0..PAIRED_RUNS).map(|_| Run::new(floor.run())).collect());
        if let (Some(causeway), Some(direct)) =
            (Run::median_of_both(&causeway), Run::median_of_both(&direct))
        {
            differences.push(causeway.as_nanos() as f64 - direct.as_nanos() as f64);
        }
        causeway_runs.extend(causeway);
        floor_runs.extend(direct);
    }
    eprintln!("add_1m paired, {PAIRED_BLOCKS} alternating blocks of {PAIRED_RUNS} runs:");
    Run::report("causeway", &causeway_runs);
    Run::report("direct_floor", &floor_runs);
    differences.sort_by(f64::total_cmp);
    if let (Some(first), Some(last)) = (differences.first(), differences.last()) {
        eprintln!(
            "  overhead (both-thread medians, median over {} blocks): {:+.2} µs \
             (blocks {:+.2} .. {:+.2} µs)",
            differences.len(),
            differences[differences.len() / 2] / 1e3,
            first / 1e3,
            last / 1e3,
        );
    }
}

/// One timed run and how many threads ran its tiles.
struct Run {
    time: Duration,
    both: bool,
}

impl Run {
    fn new(time: Duration) -> Run {
        Run { time, both: participants() == WORKERS as u32 }
    }

    /// The median time of the runs both threads took part in.
    fn median_of_both(runs: &[Run]) -> Option<Duration> {
        let times: Vec<Duration> = runs.iter().filter(|run| run.both).map(|run| run.time).collect();
        (!times.is_empty()).then(|| median(times))
    }

    fn report(name: &str, runs: &[Run]) {
        let both = runs.iter().filter(|run| run.both).count();
        let all = median(runs.iter().map(|run| run.time).collect());
        let micros = |time: Duration| time.as_nanos() as f64 / 1e3;
        eprintln!(
            "  {name}: median {:.1} µs over all {} runs; both threads ran tiles in {both} \
             ({:.0}%), median {}",
            micros(all),
            runs.len(),
            100.0 * both as f64 / runs.len() as f64,
            Run::median_of_both(runs)
                .map_or_else(|| "n/a".to_owned(), |time| format!("{:.1} µs", micros(time))),
        );
    }
}

fn bench_region_transition(c: &mut Criterion) {
    let mut group = c.benchmark_group("region_transition");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));

    // Trivial tiles: one relaxed increment of a per-tile counter, checked after every run.
    let counts: Vec<Padded<AtomicU32>> = (0..REGION_TILES).map(|_| Padded::default()).collect();
    let tile = |tile: u32| {
        counts[tile as usize].0.fetch_add(1, Ordering::Relaxed);
        black_box(tile);
    };
    let check = || {
        for (index, count) in counts.iter().enumerate() {
            assert_eq!(count.0.swap(0, Ordering::Relaxed), REGIONS, "tile {index} of every region");
        }
    };
    let per_region = |total: Duration| total / REGIONS;

    let waiter = Waiter::for_current_thread();
    let hook = |outcome: Result<(), Failure>| {
        assert_eq!(outcome, Ok(()));
        waiter.end();
    };
    let buffer = (0..REGIONS)
        .fold(CommandBuffer::builder(), |builder, _| builder.dispatch(REGION_TILES, &tile))
        .build()
        .expect("record");
    let processor =
        BlockProcessor::new(&buffer, WORKERS).expect("a processor").with_finish_hook(&hook);
    let process = Process::new(&processor, Class::Compute);
    with_pool("regions", |executor| {
        let run = || {
            let elapsed = run_causeway(executor, &processor, &process, &waiter);
            check();
            elapsed
        };
        for _ in 0..CHECK_RUNS {
            run();
        }
        group.bench_function("causeway", |b| {
            b.iter_custom(|iters| per_region((0..iters).map(|_| run()).sum()))
        });
    });

    let floor = Floor::new(REGIONS, REGION_TILES);
    floor.with_threads(&tile, || {
        let run = || {
            let elapsed = floor.run();
            check();
            elapsed
        };
        for _ in 0..CHECK_RUNS {
            run();
        }
        group.bench_function("barrier_floor", |b| {
            b.iter_custom(|iters| per_region((0..iters).map(|_| run()).sum()))
        });
    });
    group.finish();
}

// `criterion_group!` emits an undocumented `pub fn`; a private module keeps it out of the
// workspace's `missing_docs` lint without silencing the lint for the rest of the file.
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        // Groups set their own windows.
        config = Criterion::default();
        targets = bench_add_1m, bench_region_transition
    }
}

fn main() {
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}

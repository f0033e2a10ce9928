//! Block processor benchmarks: tiled dispatches run by causeway's
//! [`BlockProcessor`](causeway_driver_cpu::block::BlockProcessor) on a two-worker pool beside the
//! same kernels run directly, without the runtime, on the same two threads.
//!
//! Measured, each group with its floor in the same run:
//!
//! - `add_1m`: `c[i] = a[i] + b[i]` over [`ELEMENTS`] `f32`s as one dispatch of [`ADD_TILES`]
//!   tiles of [`TILE_ELEMENTS`] elements, on two workers. `causeway`: the bench thread submits a
//!   block processor to a [`CpuPool`] of two workers that never park and sleeps until the
//!   processor's finish hook wakes it. `direct_floor`: the same kernel over the same tiles on
//!   the same pool's two threads, claiming tiles from one plain atomic counter (`fetch_add`, one
//!   tile per claim) and meeting at an arrival counter, the last arriver waking the bench thread
//!   in the same way. The difference is the runtime's overhead per dispatch: submission, the
//!   slot, claims and election, finalization up to the finish hook.
//! - `spin_64`: the same dispatch shape (64 tiles, one per claim, two workers) over a kernel
//!   that touches no shared memory, 0.15–0.3 µs of dependent multiply-adds per tile. The
//!   12 MB of `add_1m` stay in the caches from run to run, so a tile's cost there depends on
//!   where its lines were left; here it is the same on either core, and the difference is the
//!   dispatch alone. Same floor as `add_1m`.
//! - `region_transition`: a command buffer of [`REGIONS`] regions of [`REGION_TILES`] trivial
//!   tiles each, reported **per region** (each function divides its time by [`REGIONS`]), so
//!   the figure is the cost of one barrier between dispatches. Floor: the same two threads
//!   running [`REGIONS`] phases, claiming each phase's tiles from that phase's counter and
//!   passing a spin barrier (an arrival counter and a phase word) between phases.
//!
//! The floor runs on the pool's own threads: a compute process ([`FloorHost`]) that both
//! workers enter and that serves floor rounds from inside one drain call each, so no executor
//! code runs during a floor round and both peers use the very same threads (pinned to CPUs 0
//! and 1). With separate floor threads, the scheduler of the shared two-core machine treated
//! the two peers' threads differently, which decided the comparison more than either runtime.
//! No thread is ever spawned inside a timed section.
//!
//! After the criterion functions, each group prints a blocked paired estimate: alternating
//! blocks of causeway and floor runs on the same pool, medians per block, and the median over
//! block pairs of the difference — steadier than the difference of two criterion means on a
//! machine where memory bandwidth and competing load drift over seconds; the quartiles of the
//! per-pair differences say how far to trust the median. Every run records which
//! threads ran its tiles (one load per tile and one RMW per thread and run, in both peers), and
//! the overhead is given twice: over the runs both threads took part in (both CPUs were the
//! workers', so the difference is the runtime's), and over all runs (what the machine gave).
//! They differ on a loaded machine because the two peers react differently to a worker whose
//! CPU is taken by another process: the floor's barrier makes every round wait for both
//! threads, so each round starts while both are on a CPU, whereas a dispatch finishes as soon as
//! its tiles are done — by one worker if the other is away — and the next one starts at once,
//! often again without it (at single-thread speed, but without waiting for it).
//!
//! How the bench thread waits: it parks (`std::thread::park`) and the finisher unparks it, in
//! both peers, because on a two-core machine a third spinning thread would take a core from
//! the two being measured. A run's time ends where the finisher reads the clock, just before it
//! unparks the bench thread: how soon the woken thread then gets a CPU from the two spinning
//! workers is the scheduler's choice, and while it was timed it moved the `add_1m` overhead
//! between −12 and +8 µs from one run of the bench to the next. Work the runtime does after
//! the finish hook (marking the process completed) is outside the wall figure; the instruction
//! count of `examples/hot_path_instructions.rs` includes it. The finish hook runs just before
//! the executor marks the process completed, so causeway runs alternate between two processors over the same buffer
//! ([`Alternating`]): the bench thread never waits for the worker it has just preempted.
//!
//! Every run is checked outside the timed part: the output of `add_1m` after the check runs, and
//! per-tile counts of every region transition run.

use std::cell::Cell;
use std::hint::{black_box, spin_loop};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use causeway::core::CachePadded;
use causeway::executor::{Class, Drain, DrainContext, Drained, Process, SpinPolicy};
use causeway::{Failure, HostExecutor};
use causeway_driver_cpu::block::{BlockProcessor, CommandBuffer, Kernel};
use causeway_runtime::{CpuPool, PoolConfig};
use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, Criterion, SamplingMode, Throughput};

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

/// Blocks and runs per block of the paired estimates: many short blocks, so that the median
/// and quartiles of the per-pair differences rest on enough pairs to agree from run to run.
const PAIRED_BLOCKS: usize = 30;
const PAIRED_RUNS: usize = 40;
const PAIRED_REGION_RUNS: usize = 20;

/// Parks the bench thread until the end of a run is signalled, and keeps the time of that end.
///
/// The finisher reads the clock, not the woken bench thread: on two cores both held by spinning
/// workers, how soon the bench thread gets a CPU back is the scheduler's choice, and it took
/// some blocks of runs twice as long as others. It is not part of a dispatch.
struct Waiter {
    ended: AtomicBool,
    /// When the run ended, in nanoseconds since `epoch`.
    ended_at: AtomicU64,
    epoch: Instant,
    thread: Thread,
}

impl Waiter {
    fn for_current_thread() -> Waiter {
        Waiter {
            ended: AtomicBool::new(false),
            ended_at: AtomicU64::new(0),
            epoch: Instant::now(),
            thread: thread::current(),
        }
    }

    /// Nanoseconds since `epoch`: a clock that finisher and bench thread share.
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Called by whoever finishes the run.
    fn end(&self) {
        self.ended_at.store(self.now(), Ordering::Relaxed);
        // Release pairs with the Acquire load in `wait`: the run's writes and its end time are
        // visible.
        self.ended.store(true, Ordering::Release);
        self.thread.unpark();
    }

    /// Runs `start` (which begins a run), sleeps until `end`, re-arms, and returns the time
    /// from just before `start` to the end.
    fn time(&self, start: impl FnOnce()) -> Duration {
        let started_at = self.now();
        start();
        // `park` may return spuriously or for an earlier `unpark`: re-check.
        while !self.ended.load(Ordering::Acquire) {
            thread::park();
        }
        self.ended.store(false, Ordering::Relaxed);
        Duration::from_nanos(self.ended_at.load(Ordering::Relaxed).saturating_sub(started_at))
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

/// Two block processors over one buffer, each with its process, used in turn. The finish hook
/// wakes the bench thread just before the executor marks the process completed, usually on the
/// finishing worker's CPU, so the woken thread would otherwise have to wait for the worker it
/// has just preempted before it could rearm and submit again. With two, the next run goes to
/// the pair that finished the run before; an owner pipelining submissions does the same.
struct Alternating<'k, 'p> {
    processors: &'p [BlockProcessor<'k>; 2],
    processes: &'p [Process<'p>; 2],
    next: Cell<usize>,
}

impl<'k, 'p> Alternating<'k, 'p> {
    fn new(processors: &'p [BlockProcessor<'k>; 2], processes: &'p [Process<'p>; 2]) -> Self {
        Alternating { processors, processes, next: Cell::new(0) }
    }

    /// Runs one execution and returns the time from submission to the finish hook's stamp.
    fn run(&self, executor: &HostExecutor<'p>, waiter: &Waiter) -> Duration {
        let index = self.next.get();
        self.next.set(1 - index);
        let (processor, process) = (&self.processors[index], &self.processes[index]);
        if processor.is_finished() {
            // Finished a run ago: completed by now but for a preemption at the wrong moment.
            while !process.is_completed() {
                thread::yield_now();
            }
            assert_eq!(process.failure(), None, "the execution succeeded");
            process.rearm().expect("a completed process rearms");
            processor.reset().expect("a finished processor resets");
        }
        next_run();
        waiter.time(|| executor.submit(process).expect("a fresh process submits"))
    }
}

/// The floor: the same kernel over the same tiles on the pool's two worker threads, without the
/// runtime. Each thread claims tiles of `phases` phases from a plain atomic counter per phase
/// (`fetch_add`, one tile per claim), with a spin barrier between phases; the last arriver of
/// the last phase wakes the bench thread. The threads serve rounds from inside one drain call
/// of a [`FloorHost`] process, so no executor code runs while they do.
struct Floor {
    /// Bumped by the bench thread to start a round.
    round: CachePadded<AtomicU64>,
    /// Per phase, the next unclaimed tile.
    next: Vec<CachePadded<AtomicU32>>,
    /// Threads arrived at the current phase's barrier.
    arrived: CachePadded<AtomicU32>,
    /// The phase the threads may work on, within a round: the barrier's release word.
    phase: CachePadded<AtomicU32>,
    /// Tells the serving threads to return between rounds.
    stop: AtomicBool,
    /// Threads serving rounds now.
    serving: AtomicU32,
    waiter: Waiter,
    tiles: u32,
}

impl Floor {
    fn new(phases: u32, tiles: u32) -> Floor {
        Floor {
            round: CachePadded::default(),
            next: (0..phases).map(|_| CachePadded::default()).collect(),
            arrived: CachePadded::default(),
            phase: CachePadded::default(),
            stop: AtomicBool::new(false),
            serving: AtomicU32::new(0),
            waiter: Waiter::for_current_thread(),
            tiles,
        }
    }

    /// One serving thread: runs every round after `seen` until told to stop.
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

    /// Runs one round and returns the time from its start to its end (the last arrival).
    fn run(&self) -> Duration {
        for next in &self.next {
            next.0.store(0, Ordering::Relaxed);
        }
        self.phase.0.store(0, Ordering::Relaxed);
        next_run();
        self.waiter.time(|| {
            // Release: pairs with the Acquire wait in `serve`, publishing the resets above.
            self.round.0.fetch_add(1, Ordering::Release);
        })
    }

    /// Runs `body` while both of `executor`'s workers serve rounds inside `host`'s drain.
    fn on_pool<'p, R>(
        &self,
        executor: &HostExecutor<'p>,
        host: &'p Process<'p>,
        body: impl FnOnce() -> R,
    ) -> R {
        if host.is_completed() {
            host.rearm().expect("a completed host rearms");
        }
        // No thread serves now (the host is completed or fresh): nothing else touches these.
        self.stop.store(false, Ordering::Relaxed);
        self.serving.store(0, Ordering::Relaxed);
        executor.submit(host).expect("a fresh host submits");
        // Acquire pairs with the AcqRel increment in `FloorHost::drain`.
        while self.serving.load(Ordering::Acquire) != WORKERS as u32 {
            thread::yield_now();
        }
        let result = body();
        self.stop.store(true, Ordering::Relaxed);
        while !host.is_completed() {
            thread::yield_now();
        }
        result
    }
}

/// The compute process that lends the pool's workers to the [`Floor`]: each worker that drains
/// it serves rounds until the floor stops, then finishes it.
struct FloorHost<'a, K: ?Sized> {
    floor: &'a Floor,
    kernel: &'a K,
}

impl<K: Kernel + ?Sized> Drain for FloorHost<'_, K> {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        let floor = self.floor;
        if floor.stop.load(Ordering::Relaxed) {
            return Drained::Done(Ok(()));
        }
        // Rounds are started only once every worker serves, so none is missed.
        let seen = floor.round.0.load(Ordering::Relaxed);
        // AcqRel: the Release half pairs with the bench thread's Acquire wait in `on_pool`.
        floor.serving.fetch_add(1, Ordering::AcqRel);
        floor.serve(self.kernel, seen);
        Drained::Done(Ok(()))
    }
}

/// A pool of two workers that never park, pinned to CPUs 0 and 1, for the duration of `body`.
fn with_pool<'p, R>(name: &str, body: impl FnOnce(&HostExecutor<'p>) -> R) -> R {
    let mut config = PoolConfig::with_workers(WORKERS);
    config.spin = SPIN_WITHOUT_PARKING;
    config.name = name.into();
    config.pin = true;
    CpuPool::scope(config, body).expect("start the pool")
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
    bench_tiles(&mut group, "add_1m", &kernel, || check_and_clear(&kernel));
    group.finish();
}

/// One 64-tile dispatch of `kernel` (one tile per claim) on a fresh two-worker pool named after
/// the group: criterion's functions for causeway and the direct floor, then the paired
/// estimate. `check` verifies and clears the kernel's output after each of the untimed checked
/// runs.
fn bench_tiles(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &'static str,
    kernel: &dyn Kernel,
    check: impl Fn(),
) {
    let waiter = Waiter::for_current_thread();
    let hook = |outcome: Result<(), Failure>| {
        assert_eq!(outcome, Ok(()));
        waiter.end();
    };
    let buffer =
        CommandBuffer::builder().dispatch_batched(ADD_TILES, 1, kernel).build().expect("record");
    let processor =
        || BlockProcessor::new(&buffer, WORKERS).expect("a processor").with_finish_hook(&hook);
    let processors = [processor(), processor()];
    let processes = [0, 1].map(|index| Process::new(&processors[index], Class::Compute));
    let causeway = Alternating::new(&processors, &processes);
    let floor = Floor::new(1, ADD_TILES);
    let host = FloorHost { floor: &floor, kernel };
    let host = Process::new(&host, Class::Compute);

    with_pool(name, |executor| {
        for _ in 0..CHECK_RUNS {
            causeway.run(executor, &waiter);
            check();
        }
        group.bench_function("causeway", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| causeway.run(executor, &waiter)).sum())
        });
        floor.on_pool(executor, &host, || {
            for _ in 0..CHECK_RUNS {
                floor.run();
                check();
            }
            group.bench_function("direct_floor", |b| {
                b.iter_custom(|iters| (0..iters).map(|_| floor.run()).sum())
            });
        });
        let paired = Paired {
            title: name,
            runs: PAIRED_RUNS,
            per: String::new(),
            floor_name: "direct_floor",
        };
        paired.measure(
            (executor, &floor, &host),
            || Run::new(causeway.run(executor, &waiter)),
            || Run::new(floor.run()),
        );
    });
}

/// Dependent multiply-add steps per tile of `spin_64`: a fraction of a microsecond of one
/// core's arithmetic on registers, so a tile costs the same whichever core runs it.
const SPIN_STEPS: u32 = 1000;

/// The `spin_64` kernel: an LCG walk of [`SPIN_STEPS`] from the tile's index, its end stored in
/// the tile's own slot.
struct Spin {
    ends: Vec<CachePadded<AtomicU64>>,
}

impl Spin {
    fn new() -> Spin {
        Spin { ends: (0..ADD_TILES).map(|_| CachePadded::default()).collect() }
    }

    /// The end of the walk from `tile` (`black_box` keeps the compiler from folding it).
    fn walk(tile: u32) -> u64 {
        let mut x = black_box(u64::from(tile));
        for _ in 0..SPIN_STEPS {
            x = x.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(0x1405_7B7E_F767_814F);
        }
        x
    }

    /// Checks every tile's slot against the walk and clears it (between runs only).
    fn check_and_clear(&self) {
        for (tile, end) in (0..).zip(&self.ends) {
            assert_eq!(end.0.swap(0, Ordering::Relaxed), Spin::walk(tile), "tile {tile}");
        }
    }
}

impl Kernel for Spin {
    fn run(&self, tile: u32) {
        participate();
        self.ends[tile as usize].0.store(Spin::walk(tile), Ordering::Relaxed);
    }
}

/// `spin_64`: the dispatch of `add_1m`, 64 tiles claimed one at a time on two workers, over a
/// kernel that touches no shared memory. `add_1m`'s tiles cost what the caches make them cost,
/// and which core ran which tile the run before decides that; here every tile costs the same on
/// either core, so the difference between the peers is the dispatch itself.
fn bench_spin_64(c: &mut Criterion) {
    let mut group = c.benchmark_group("spin_64");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    eprintln!(
        "spin_64: {ADD_TILES} tiles of {SPIN_STEPS} dependent multiply-adds, {WORKERS} workers"
    );

    let kernel = Spin::new();
    bench_tiles(&mut group, "spin_64", &kernel, || kernel.check_and_clear());
    group.finish();
}

/// The blocked paired estimate of one group: alternating blocks of causeway runs and floor
/// runs on the same pool, then the report.
struct Paired {
    title: &'static str,
    /// Runs per block.
    runs: usize,
    /// What a run's time is per, for the heading (empty for a whole run).
    per: String,
    floor_name: &'static str,
}

impl Paired {
    fn measure<'p>(
        &self,
        (executor, floor, host): (&HostExecutor<'p>, &Floor, &'p Process<'p>),
        mut causeway: impl FnMut() -> Run,
        mut direct: impl FnMut() -> Run,
    ) {
        // Memory bandwidth and competing load on a shared machine drift over seconds, so
        // compare neighbouring blocks rather than two windows far apart.
        let mut causeway_runs: Vec<Vec<Run>> = Vec::new();
        let mut floor_runs: Vec<Vec<Run>> = Vec::new();
        for _ in 0..PAIRED_BLOCKS {
            causeway_runs.push((0..self.runs).map(|_| causeway()).collect());
            floor_runs
                .push(floor.on_pool(executor, host, || (0..self.runs).map(|_| direct()).collect()));
        }
        eprintln!(
            "{} paired, {PAIRED_BLOCKS} alternating blocks of {} runs{}:",
            self.title, self.runs, self.per
        );
        Run::report("causeway", &causeway_runs.concat());
        Run::report(self.floor_name, &floor_runs.concat());
        Run::report_overhead(&causeway_runs, &floor_runs);
    }
}

/// One timed run and how many threads ran its tiles.
#[derive(Clone, Copy)]
struct Run {
    time: Duration,
    both: bool,
}

impl Run {
    fn new(time: Duration) -> Run {
        Run { time, both: participants() == WORKERS as u32 }
    }

    /// The median time of `runs`, or of those both threads took part in.
    fn median(runs: &[Run], both_only: bool) -> Option<Duration> {
        let times: Vec<Duration> =
            runs.iter().filter(|run| run.both || !both_only).map(|run| run.time).collect();
        (!times.is_empty()).then(|| median(times))
    }

    fn report(name: &str, runs: &[Run]) {
        let both = runs.iter().filter(|run| run.both).count();
        let show = |time: Option<Duration>| {
            time.map_or_else(|| "n/a".to_owned(), |time| format!("{:.3} µs", micros(time)))
        };
        eprintln!(
            "  {name}: median {} over {} runs; both threads ran tiles in {both} ({:.0}%), \
             median of those {}",
            show(Run::median(runs, false)),
            runs.len(),
            100.0 * both as f64 / runs.len() as f64,
            show(Run::median(runs, true)),
        );
    }

    /// The overhead: per pair of neighbouring blocks, causeway's median minus the floor's,
    /// then the median over blocks — over the runs both threads took part in (both CPUs were
    /// the workers'), and over all runs (what the machine gave).
    fn report_overhead(causeway: &[Vec<Run>], floor: &[Vec<Run>]) {
        for (label, both_only) in [("runs both threads took part in", true), ("all runs", false)] {
            let mut differences: Vec<f64> = causeway
                .iter()
                .zip(floor)
                .filter_map(|(ours, theirs)| {
                    let ours = Run::median(ours, both_only)?;
                    let theirs = Run::median(theirs, both_only)?;
                    Some(micros(ours) - micros(theirs))
                })
                .collect();
            if differences.is_empty() {
                eprintln!("  overhead over {label}: no block had such runs in both peers");
                continue;
            }
            differences.sort_by(f64::total_cmp);
            let quartile = |q: usize| differences[(differences.len() - 1) * q / 4];
            eprintln!(
                "  overhead over {label}: {:+.3} µs (median of {} block pairs; quartiles \
                 {:+.3} .. {:+.3} µs, range {:+.3} .. {:+.3} µs)",
                quartile(2),
                differences.len(),
                quartile(1),
                quartile(3),
                quartile(0),
                quartile(4),
            );
        }
    }
}

fn micros(time: Duration) -> f64 {
    time.as_nanos() as f64 / 1e3
}

fn bench_region_transition(c: &mut Criterion) {
    let mut group = c.benchmark_group("region_transition");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));

    // Trivial tiles: one relaxed increment of a per-tile counter, checked after every run.
    let counts: Vec<CachePadded<AtomicU32>> =
        (0..REGION_TILES).map(|_| CachePadded::default()).collect();
    let tile = |tile: u32| {
        participate();
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
        || BlockProcessor::new(&buffer, WORKERS).expect("a processor").with_finish_hook(&hook);
    let processors = [processor(), processor()];
    let processes = [0, 1].map(|index| Process::new(&processors[index], Class::Compute));
    let alternating = Alternating::new(&processors, &processes);
    let floor = Floor::new(REGIONS, REGION_TILES);
    let host = FloorHost { floor: &floor, kernel: &tile };
    let host = Process::new(&host, Class::Compute);
    with_pool("regions", |executor| {
        let causeway = || {
            let elapsed = alternating.run(executor, &waiter);
            check();
            elapsed
        };
        let direct = || {
            let elapsed = floor.run();
            check();
            elapsed
        };
        for _ in 0..CHECK_RUNS {
            causeway();
        }
        group.bench_function("causeway", |b| {
            b.iter_custom(|iters| per_region((0..iters).map(|_| causeway()).sum()))
        });
        floor.on_pool(executor, &host, || {
            for _ in 0..CHECK_RUNS {
                direct();
            }
            group.bench_function("barrier_floor", |b| {
                b.iter_custom(|iters| per_region((0..iters).map(|_| direct()).sum()))
            });
        });

        let paired = Paired {
            title: "region_transition",
            runs: PAIRED_REGION_RUNS,
            per: format!(" of {REGIONS} regions (times per region)"),
            floor_name: "barrier_floor",
        };
        paired.measure(
            (executor, &floor, &host),
            || Run::new(per_region(causeway())),
            || Run::new(per_region(direct())),
        );
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
        targets = bench_add_1m, bench_spin_64, bench_region_transition
    }
}

fn main() {
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}

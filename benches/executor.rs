//! Executor benchmarks: causeway's cooperative [`Executor`](causeway::executor::Executor) beside
//! rayon, tokio and the raw primitives it is built from.
//!
//! Measured, each group with its peers in the same run:
//!
//! - `chain_hop`: a chain of [`CHAIN_HOPS`] tasks, each started by the completion of the one
//!   before (the first by the bench thread), on two workers. Reported **per hop**: every
//!   function divides a chain's time — from the bench thread starting the head to the last hop
//!   starting, which that hop stamps itself — by [`CHAIN_HOPS`] before handing it to criterion,
//!   so the time column reads time per hop directly. Peers: causeway (immediate processes, each
//!   the sole dependent of the previous, so each is handed off to the worker that completed the
//!   one before — a continuation, as in rayon's scope) on two workers that never park; the same
//!   under the default spin policy, where the idle worker parks; the same on one worker; a
//!   rayon `scope` whose tasks each `spawn` the next; a `rayon::spawn` chain; a tokio
//!   multi-thread `tokio::spawn` chain; and the floor, two threads passing a counter back and
//!   forth through one atomic (per one-way hop, so every hop crosses threads). Every hop
//!   records which worker ran it, and each function prints the share of hops that ran on
//!   another worker than the hop before: a chain that stays on one worker is a continuation,
//!   not a hand-over, and is not bounded below by the ping-pong. Each function also prints the
//!   in-chain hop, from the first hop starting to the last one starting (the start of the chain
//!   left out as well), and the hop with the bench thread's wake-up at the end counted in (see
//!   below).
//! - `parked_wake`: one round trip from a submission to the bench thread seeing the process
//!   completed, with the only worker parked (`SpinPolicy::Park`). Floor: the bench thread wakes
//!   a thread asleep in `futex(2)` and spins until it answers.
//! - `activation`: one release that drives a suspend count to zero, pushes the process onto the
//!   immediate list and notifies, with no worker parked. Peers: a plain `fetch_sub` and Treiber
//!   stack push, alone and followed by the read-modify-write that causeway's notify makes on
//!   the idle mask. After the criterion functions, a paired estimate: blocks of causeway and
//!   the floor with its idle RMW alternating, the ratio taken per block (median and quartiles
//!   printed), which two criterion windows a second apart on a shared machine cannot give.
//! - `scan_64`: one `Worker::step` that finds nothing, over 64 compute slots each holding a
//!   sleeping process. Floor: 64 relaxed loads from an array of 64 words, what a scan costs
//!   without causeway's runnable summary (with it, a step that finds nothing reads one word
//!   for all the slots).
//! - `tiny_1m`: [`TINY_TASKS`] independent tasks of the same tiny work (bumping a per-worker
//!   counter) on two workers, reported as throughput. Peers: causeway submitting from the bench
//!   thread to workers that never park, and to workers under the default spin policy (storage
//!   allocated once and rearmed outside the timed part); causeway submitting from inside the
//!   pool, through an immediate process that submits [`SPAWN_CHUNK`] processes per drain call
//!   (as a queue process issues work), to workers that never park; rayon `scope` (spawned from
//!   inside the pool, like the last) and rayon `in_place_scope` (spawned from the bench thread,
//!   like the first two). Submitting from the bench thread puts three busy threads on two
//!   cores; submitting from inside the pool, two.
//!
//! How the bench thread waits matters on a two-core machine. Where two workers are measured, the
//! bench thread sleeps until the last task wakes it (rayon's own `scope` does the same), because
//! a third spinning thread would take a core away from the two being measured. How soon the
//! woken bench thread runs again is the scheduler's choice: with two workers that never park it
//! must preempt one of them, which took from microseconds to hundreds of microseconds per chain
//! (40 ns per hop of 10^4 in one run), and with workers that park it finds a free core at
//! once. That is why a chain's time ends where its last hop reads the clock, in every peer; the
//! figure with the wake-up is printed beside it. A chain still includes the start: the bench
//! thread's release or spawn, and waking a sleeping pool worker for rayon and tokio (a few
//! microseconds, see `parked_wake`, 1–4% of a chain). Where one worker is measured
//! (`parked_wake`), the bench thread spins, exactly as in the futex floor.
//!
//! Every function checks what it measures on every run, outside the timed part: every hop of a
//! chain must have run, tallies must add up, every release must have activated its process, the
//! parked worker must really be asleep in the kernel before a round trip is timed. Setup that is
//! not the thing measured (rearming storage, building dependencies, draining after
//! `activation`) is done outside the timer through `iter_custom`.

use std::cell::RefCell;
use std::hint::{black_box, spin_loop};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use causeway::core::CachePadded;
use causeway::executor::{
    Class, Drain, DrainContext, Drained, Futex, FutexWord, Process, RoundRobin, SpinPolicy,
};
use causeway::{Failure, HostExecutor, HostFutex, Runtime};
use causeway_platform_linux::LinuxFutex;
use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, Criterion, SamplingMode, Throughput};

/// Tasks in one chain of `chain_hop`: long enough that starting the chain and waking the bench
/// thread at its end stay near 1% of the figure.
const CHAIN_HOPS: u32 = 10_000;

/// Independent tasks per iteration of `tiny_1m`.
const TINY_TASKS: usize = 1_000_000;

/// Processes the in-pool submitter of `tiny_1m` submits per drain call: a bounded amount of work
/// per call, as the drain contract asks, and enough that its own trips through the immediate
/// list stay a small share.
const SPAWN_CHUNK: usize = 1024;

/// Processes released per timed batch in `activation`.
const ACTIVATION_BATCH: usize = 1024;

/// Blocks of the paired `activation` estimate, and activations per block.
const ACTIVATION_PAIRED_BLOCKS: usize = 101;
const ACTIVATION_BLOCK: u64 = 64 * ACTIVATION_BATCH as u64;

/// Compute slots scanned in `scan_64`: every slot of a [`HostExecutor`].
const SCAN_SLOTS: usize = 64;

/// Workers everywhere two are measured: one per core of the benchmark machine.
const WORKERS: usize = 2;

/// `u32::MAX` idle scans is minutes of spinning: the workers never park during a benchmark.
const SPIN_WITHOUT_PARKING: SpinPolicy = SpinPolicy::Fixed(u32::MAX);

/// Quiet time before each timed `parked_wake` round trip. A worker parks within a few
/// microseconds of finishing; the check in [`bench_parked_wake`] confirms it is asleep by then.
const SETTLE: Duration = Duration::from_micros(50);

/// How often the bench thread looks at the live count while a `tiny_1m` run drains; sleeping in
/// between leaves both cores to the workers.
const DRAIN_POLL: Duration = Duration::from_micros(20);

/// Runs of every chain and round trip made untimed before measuring, each fully checked.
const CHECK_RUNS: usize = 3;

/// Busy-waits (no sleep, so the core stays out of idle states) until `condition` holds.
fn spin_until(condition: impl Fn() -> bool) {
    while !condition() {
        spin_loop();
    }
}

/// A chain's record: which worker ran each hop, and the bench thread to wake at its end.
struct Chain {
    /// Entry `p - 1`: one more than the index of the worker that ran hop `p`; zero until it ran.
    ran_on: Vec<AtomicU32>,
    ended: AtomicBool,
    waiter: Thread,
    /// Over the chains checked so far: hops, and hops run by another worker than the hop before.
    hops_checked: AtomicU64,
    crossings: AtomicU64,
    /// When the bench thread started the current chain and when its first and last hop
    /// started, in nanoseconds since `epoch`; over the chains checked so far, the sums of the
    /// in-chain spans (first hop to last) and of the spans up to the bench thread running again.
    epoch: Instant,
    begun: AtomicU64,
    first_started: AtomicU64,
    last_started: AtomicU64,
    in_chain: AtomicU64,
    to_wake: AtomicU64,
}

impl Chain {
    /// A chain that wakes the calling thread when it ends.
    fn for_current_thread() -> Chain {
        Chain {
            ran_on: (0..CHAIN_HOPS).map(|_| AtomicU32::new(0)).collect(),
            ended: AtomicBool::new(false),
            waiter: thread::current(),
            hops_checked: AtomicU64::new(0),
            crossings: AtomicU64::new(0),
            epoch: Instant::now(),
            begun: AtomicU64::new(0),
            first_started: AtomicU64::new(0),
            last_started: AtomicU64::new(0),
            in_chain: AtomicU64::new(0),
            to_wake: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Stamps the start of a chain: the bench thread calls it just before it starts the head.
    fn begin(&self) {
        self.begun.store(self.now(), Ordering::Relaxed);
    }

    /// The chain's time, from [`begin`](Self::begin) to the last hop starting; called by the
    /// bench thread once it has seen the chain end. The last hop reads the clock itself, so
    /// how soon the bench thread runs again is not in the figure; that span is summed apart.
    fn timed(&self) -> Duration {
        let begun = self.begun.load(Ordering::Relaxed);
        self.to_wake.fetch_add(self.now().saturating_sub(begun), Ordering::Relaxed);
        let last = self.last_started.load(Ordering::Relaxed);
        Duration::from_nanos(last.saturating_sub(begun))
    }

    /// Records that hop `position` (from 1) ran on `worker`: one plain store, the same for every
    /// peer, plus a clock read at the first and the last hop.
    fn record(&self, position: u32, worker: usize) {
        if position == 1 || Chain::is_last(position) {
            let now = self.now();
            let at = if position == 1 { &self.first_started } else { &self.last_started };
            at.store(now, Ordering::Relaxed);
        }
        self.ran_on[position as usize - 1].store(worker as u32 + 1, Ordering::Relaxed);
    }

    fn is_last(position: u32) -> bool {
        position == CHAIN_HOPS
    }

    /// Wakes the bench thread: the chain has ended.
    fn end(&self) {
        // Release pairs with the Acquire load in `wait`, publishing the record.
        self.ended.store(true, Ordering::Release);
        self.waiter.unpark();
    }

    /// Sleeps until the chain ends and re-arms for the next one.
    fn wait(&self) {
        // `park` may return spuriously (or for a previous chain's late `unpark`): re-check.
        while !self.ended.load(Ordering::Acquire) {
            thread::park();
        }
        self.ended.store(false, Ordering::Relaxed);
    }

    /// Asserts that every hop ran, counts the hops that changed worker, and clears the record.
    /// The caller has seen the chain end (its Acquire orders the record before this).
    fn check_and_clear(&self) {
        let mut previous = 0;
        let mut crossings = 0;
        for (hop, ran_on) in self.ran_on.iter().enumerate() {
            let worker = ran_on.swap(0, Ordering::Relaxed);
            assert_ne!(worker, 0, "hop {} of the chain ran", hop + 1);
            crossings += u64::from(previous != 0 && previous != worker);
            previous = worker;
        }
        self.hops_checked.fetch_add(u64::from(CHAIN_HOPS), Ordering::Relaxed);
        self.crossings.fetch_add(crossings, Ordering::Relaxed);
        let first = self.first_started.load(Ordering::Relaxed);
        let last = self.last_started.load(Ordering::Relaxed);
        assert!(last >= first, "the last hop started after the first");
        self.in_chain.fetch_add(last - first, Ordering::Relaxed);
    }

    /// Prints the share of hops that changed worker in the chains checked since the last report
    /// (it says whether a hop measured a hand-over between threads or a continuation on one),
    /// the in-chain hop (the start of the chain left out too), and the hop with the bench
    /// thread's wake-up at the end of the chain counted in.
    fn report_crossings(&self, function: &str) {
        let hops = self.hops_checked.swap(0, Ordering::Relaxed);
        let crossings = self.crossings.swap(0, Ordering::Relaxed);
        let in_chain = self.in_chain.swap(0, Ordering::Relaxed);
        let to_wake = self.to_wake.swap(0, Ordering::Relaxed);
        if hops > 0 {
            let share = 100.0 * crossings as f64 / hops as f64;
            let chains = hops / u64::from(CHAIN_HOPS);
            let hop = in_chain as f64 / (chains * u64::from(CHAIN_HOPS - 1)) as f64;
            let woken = to_wake as f64 / hops as f64;
            eprintln!(
                "chain_hop/{function}: {share:.1}% of {hops} hops ran on another worker; \
                 in-chain hop {hop:.1} ns; with the bench thread's wake-up {woken:.1} ns"
            );
        }
    }
}

/// One process of the causeway chain: records its hop; the last one ends the chain once the
/// executor finishes it.
struct Link<'a> {
    position: u32,
    chain: &'a Chain,
}

impl Drain for Link<'_> {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        self.chain.record(self.position, cx.worker());
        Drained::Done(Ok(()))
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        assert_eq!(outcome, Ok(()), "link {} failed", self.position);
        if Chain::is_last(self.position) {
            self.chain.end();
        }
    }
}

/// Runs one causeway chain and returns the time from the head's activation to the tail's start
/// (see [`Chain::timed`]). Rearming and wiring the chain happen before the timer starts.
fn run_causeway_chain<'p>(
    executor: &HostExecutor<'p>,
    processes: &'p [Process<'p>],
    edges: &'p [[&'p Process<'p>; 1]],
    chain: &Chain,
) -> Duration {
    for process in processes {
        if process.is_completed() {
            process.rearm().expect("a completed process rearms");
        }
    }
    for (process, edge) in processes.iter().zip(edges) {
        process.set_dependents(edge).expect("a fresh process takes dependents");
    }
    let head = &processes[0];
    // The hold keeps the head suspended through submission, so the timed release is the first
    // activation of the chain.
    executor.hold(head).expect("a fresh process can be held");
    for process in processes {
        executor.submit(process).expect("a fresh process submits");
    }
    chain.begin();
    executor.release(head).expect("the head is held");
    chain.wait();
    let elapsed = chain.timed();
    let tail = processes.last().expect("the chain is not empty");
    // `finish` (which woke this thread) runs just before the executor marks the tail completed.
    spin_until(|| tail.is_completed());
    chain.check_and_clear();
    elapsed
}

fn rayon_worker() -> usize {
    rayon::current_thread_index().expect("spawned work runs on a pool thread")
}

/// The task at `position` of a rayon scope chain: spawns the next one until the last.
fn rayon_scope_link<'s>(scope: &rayon::Scope<'s>, position: u32, chain: &'s Chain) {
    chain.record(position, rayon_worker());
    if !Chain::is_last(position) {
        scope.spawn(move |scope| rayon_scope_link(scope, position + 1, chain));
    }
}

fn run_rayon_scope_chain(pool: &rayon::ThreadPool, chain: &Chain) -> Duration {
    chain.begin();
    pool.scope(|scope| scope.spawn(|scope| rayon_scope_link(scope, 1, chain)));
    let elapsed = chain.timed();
    chain.check_and_clear();
    elapsed
}

/// The task at `position` of a `rayon::spawn` chain. The chain's `Arc` moves down the chain, so
/// no hop touches its reference count.
fn rayon_spawn_link(position: u32, chain: Arc<Chain>) {
    chain.record(position, rayon_worker());
    if Chain::is_last(position) {
        chain.end();
    } else {
        rayon::spawn(move || rayon_spawn_link(position + 1, chain));
    }
}

fn run_rayon_spawn_chain(pool: &rayon::ThreadPool, chain: &Arc<Chain>) -> Duration {
    let moving = Arc::clone(chain);
    chain.begin();
    pool.spawn(move || rayon_spawn_link(1, moving));
    chain.wait();
    let elapsed = chain.timed();
    chain.check_and_clear();
    elapsed
}

/// A small number naming the calling thread (tokio does not number its workers).
fn thread_tag() -> usize {
    static NEXT_TAG: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static TAG: usize = NEXT_TAG.fetch_add(1, Ordering::Relaxed);
    }
    TAG.with(|tag| *tag)
}

/// The task at `position` of a tokio chain, as [`rayon_spawn_link`].
fn tokio_link(position: u32, chain: Arc<Chain>) {
    chain.record(position, thread_tag());
    if Chain::is_last(position) {
        chain.end();
    } else {
        // Detached: the chain reports its end itself.
        drop(tokio::spawn(async move { tokio_link(position + 1, chain) }));
    }
}

fn run_tokio_chain(runtime: &tokio::runtime::Runtime, chain: &Arc<Chain>) -> Duration {
    let moving = Arc::clone(chain);
    chain.begin();
    drop(runtime.spawn(async move { tokio_link(1, moving) }));
    chain.wait();
    let elapsed = chain.timed();
    chain.check_and_clear();
    elapsed
}

/// The ping-pong partner stops when it reads this (odd, so it is checked before parity).
const PING_PONG_STOP: u64 = u64::MAX;

/// The partner's half of the ping-pong: answers every odd value with the next even one.
fn ping_pong_partner(turn: &AtomicU64) {
    loop {
        // Acquire/Release on both sides, as a scheduler handing over work would need.
        let seen = turn.load(Ordering::Acquire);
        if seen == PING_PONG_STOP {
            return;
        }
        if seen % 2 == 1 {
            turn.store(seen + 1, Ordering::Release);
        }
    }
}

/// [`CHAIN_HOPS`] one-way hops (half of them round trips) with the partner thread: every hop
/// crosses threads.
fn run_ping_pong(turn: &AtomicU64) -> Duration {
    let base = turn.load(Ordering::Relaxed);
    assert_eq!(base % 2, 0, "the partner has answered");
    let start = Instant::now();
    for round in 0..u64::from(CHAIN_HOPS / 2) {
        let ping = base + 2 * round + 1;
        turn.store(ping, Ordering::Release);
        while turn.load(Ordering::Acquire) != ping + 1 {}
    }
    let elapsed = start.elapsed();
    assert_eq!(turn.load(Ordering::Relaxed), base + u64::from(CHAIN_HOPS), "every hop answered");
    elapsed
}

fn per_hop(total: Duration) -> Duration {
    total / CHAIN_HOPS
}

/// One causeway function of `chain_hop`: `workers` workers under `spin`.
fn bench_causeway_chain(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    workers: usize,
    spin: SpinPolicy,
    chain: &Chain,
) {
    let links: Vec<Link> = (1..=CHAIN_HOPS).map(|position| Link { position, chain }).collect();
    let processes: Vec<Process> =
        links.iter().map(|link| Process::new(link, Class::Immediate)).collect();
    let edges: Vec<[&Process; 1]> = processes[1..].iter().map(|next| [next]).collect();
    Runtime::builder()
        .workers(workers)
        .spin(spin)
        .thread_name("chain")
        .scope(|executor| {
            let run = || run_causeway_chain(executor, &processes, &edges, chain);
            for _ in 0..CHECK_RUNS {
                run();
            }
            group.bench_function(name, |b| {
                b.iter_custom(|iters| per_hop((0..iters).map(|_| run()).sum()))
            });
        })
        .expect("start the causeway runtime");
    chain.report_crossings(name);
}

fn bench_chain_hop(c: &mut Criterion) {
    let mut group = c.benchmark_group("chain_hop");
    // An iteration is a whole chain (about a millisecond): flat sampling keeps the sample count
    // within the window.
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let chain = Arc::new(Chain::for_current_thread());

    // Two workers that never park, as asked of the executor; then, to show where its cost comes
    // from, the default spin policy (an idle worker parks) and a single worker.
    bench_causeway_chain(&mut group, "causeway", WORKERS, SPIN_WITHOUT_PARKING, &chain);
    bench_causeway_chain(
        &mut group,
        "causeway_default_spin",
        WORKERS,
        SpinPolicy::default(),
        &chain,
    );
    bench_causeway_chain(&mut group, "causeway_one_worker", 1, SPIN_WITHOUT_PARKING, &chain);

    let pool = rayon::ThreadPoolBuilder::new().num_threads(WORKERS).build().expect("rayon pool");
    for _ in 0..CHECK_RUNS {
        run_rayon_scope_chain(&pool, &chain);
    }
    group.bench_function("rayon_scope_spawn", |b| {
        b.iter_custom(|iters| {
            per_hop((0..iters).map(|_| run_rayon_scope_chain(&pool, &chain)).sum())
        })
    });
    chain.report_crossings("rayon_scope_spawn");
    for _ in 0..CHECK_RUNS {
        run_rayon_spawn_chain(&pool, &chain);
    }
    group.bench_function("rayon_spawn", |b| {
        b.iter_custom(|iters| {
            per_hop((0..iters).map(|_| run_rayon_spawn_chain(&pool, &chain)).sum())
        })
    });
    chain.report_crossings("rayon_spawn");
    drop(pool);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .build()
        .expect("tokio runtime");
    for _ in 0..CHECK_RUNS {
        run_tokio_chain(&runtime, &chain);
    }
    group.bench_function("tokio_spawn", |b| {
        b.iter_custom(|iters| per_hop((0..iters).map(|_| run_tokio_chain(&runtime, &chain)).sum()))
    });
    chain.report_crossings("tokio_spawn");
    drop(runtime);

    let turn = CachePadded(AtomicU64::new(0));
    thread::scope(|scope| {
        let partner = thread::Builder::new()
            .name("ping-pong".into())
            .spawn_scoped(scope, || ping_pong_partner(&turn.0))
            .expect("spawn the ping-pong partner");
        for _ in 0..CHECK_RUNS {
            run_ping_pong(&turn.0);
        }
        group.bench_function("atomic_ping_pong_floor", |b| {
            b.iter_custom(|iters| per_hop((0..iters).map(|_| run_ping_pong(&turn.0)).sum()))
        });
        turn.0.store(PING_PONG_STOP, Ordering::Release);
        partner.join().expect("the ping-pong partner stops");
    });
    group.finish();
}

/// Drains once and finishes: the smallest possible process.
struct Pass;

impl Drain for Pass {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        Drained::Done(Ok(()))
    }
}

/// The state letter of the thread named `name` in `/proc/self/task/*/stat` (`S`: asleep in the
/// kernel), or `None` if no thread has that name.
fn thread_state(name: &str) -> Option<char> {
    for task in std::fs::read_dir("/proc/self/task").expect("procfs is mounted") {
        let path = task.expect("a task entry").path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else { continue };
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).ok()?;
        // The state follows the parenthesised command name, which may itself hold spaces.
        return stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
    }
    None
}

/// Busy-waits through the quiet period before a timed round trip.
fn settle() {
    let until = Instant::now() + SETTLE;
    spin_until(|| Instant::now() >= until);
}

/// Submits `process` to the parked worker and spins until it is completed.
fn causeway_round_trip<'p>(executor: &HostExecutor<'p>, process: &'p Process<'p>) -> Duration {
    if process.is_completed() {
        process.rearm().expect("a completed process rearms");
    }
    settle();
    let start = Instant::now();
    executor.submit(process).expect("a fresh process submits");
    spin_until(|| process.is_completed());
    start.elapsed()
}

/// The futex floor's word values.
const FUTEX_IDLE: u32 = 0;
const FUTEX_GO: u32 = 1;
const FUTEX_STOP: u32 = 2;

/// A thread asleep in `futex(2)` that answers every wake by bumping a counter.
struct FutexPartner {
    word: FutexWord,
    answers: AtomicU64,
}

impl FutexPartner {
    fn serve(&self) {
        let futex = LinuxFutex::new();
        let mut answers = 0;
        loop {
            // Acquire pairs with the bench thread's Release store of GO or STOP.
            match self.word.load(Ordering::Acquire) {
                FUTEX_IDLE => futex.wait(&self.word, FUTEX_IDLE, None),
                FUTEX_GO => {
                    self.word.store(FUTEX_IDLE, Ordering::Relaxed);
                    answers += 1;
                    // Release: the reset above is visible before the answer is.
                    self.answers.store(answers, Ordering::Release);
                }
                _ => return,
            }
        }
    }

    fn round_trip(&self) -> Duration {
        let futex = LinuxFutex::new();
        let expected = self.answers.load(Ordering::Relaxed) + 1;
        settle();
        let start = Instant::now();
        self.word.store(FUTEX_GO, Ordering::Release);
        futex.wake_one(&self.word);
        spin_until(|| self.answers.load(Ordering::Acquire) == expected);
        start.elapsed()
    }

    fn stop(&self) {
        self.word.store(FUTEX_STOP, Ordering::Release);
        LinuxFutex::new().wake_one(&self.word);
    }
}

/// Asserts that the thread named `name` is asleep after the quiet period, several times over:
/// otherwise the round trip would not be measuring a wake-up.
fn check_asleep_after_settling(name: &str, round_trip: impl Fn() -> Duration) {
    for _ in 0..CHECK_RUNS {
        round_trip();
        settle();
        assert_eq!(thread_state(name), Some('S'), "{name} is asleep after {SETTLE:?}");
    }
}

fn bench_parked_wake(c: &mut Criterion) {
    let mut group = c.benchmark_group("parked_wake");
    // Every timed round trip also costs an untimed quiet period several times as long.
    group.warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_secs(1));

    let drain = Pass;
    let process = Process::new(&drain, Class::Immediate);
    Runtime::builder()
        .workers(1)
        .spin(SpinPolicy::Park)
        .thread_name("parked")
        .scope(|executor| {
            check_asleep_after_settling("parked-0", || causeway_round_trip(executor, &process));
            group.bench_function("causeway", |b| {
                b.iter_custom(|iters| {
                    (0..iters).map(|_| causeway_round_trip(executor, &process)).sum()
                })
            });
        })
        .expect("start the causeway runtime");

    let partner = FutexPartner { word: FutexWord::new(FUTEX_IDLE), answers: AtomicU64::new(0) };
    thread::scope(|scope| {
        let serving = thread::Builder::new()
            .name("futex-partner".into())
            .spawn_scoped(scope, || partner.serve())
            .expect("spawn the futex partner");
        check_asleep_after_settling("futex-partner", || partner.round_trip());
        group.bench_function("futex_floor", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| partner.round_trip()).sum())
        });
        partner.stop();
        serving.join().expect("the futex partner stops");
    });
    group.finish();
}

/// The activation peer's node: a suspend count and a stack link; kept on a cache line of its own
/// (in a [`CachePadded`]) like a process's activation fields.
struct TreiberNode {
    pending: AtomicU32,
    next: AtomicPtr<TreiberNode>,
}

/// The activation peer's queue: an intrusive lock-free stack.
struct TreiberStack {
    head: AtomicPtr<TreiberNode>,
}

impl TreiberStack {
    fn push(&self, node: &TreiberNode) {
        let pointer = ptr::from_ref(node).cast_mut();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            node.next.store(head, Ordering::Relaxed);
            // Release: the popper sees the link and what the pusher did before.
            match self.head.compare_exchange_weak(
                head,
                pointer,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Empties the stack; returns how many nodes it held.
    fn take_all(&self) -> usize {
        let mut node = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        let mut taken = 0;
        while !node.is_null() {
            // SAFETY: every pointer on the stack came from a `&TreiberNode` into the node vector
            // of `bench_activation`, which outlives the stack and is not moved while it is used.
            node = unsafe { &*node }.next.load(Ordering::Relaxed);
            taken += 1;
        }
        taken
    }
}

/// The peer's activation: drop one suspension, queue the node when it was the last.
fn release_node(node: &TreiberNode, stack: &TreiberStack) {
    // AcqRel, as causeway's release: the activator sees every earlier releaser's writes.
    if node.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
        stack.push(node);
    }
}

/// The peer's activation of every node, each followed by the read-modify-write causeway's notify
/// makes on its idle mask when `IDLE_RMW` (an RMW rather than a load: it orders the notifier
/// against parking workers).
fn release_nodes<const IDLE_RMW: bool>(
    nodes: &[CachePadded<TreiberNode>],
    stack: &TreiberStack,
    idle: &AtomicU64,
) {
    for node in nodes {
        release_node(node, stack);
        // AcqRel, as causeway's notify, whose RMW pairs with a parking worker's AcqRel
        // `fetch_or` of its idle bit; nobody parks here, so it only costs what notify's does.
        if IDLE_RMW && idle.fetch_or(0, Ordering::AcqRel) != 0 {
            unreachable!("nobody parks in this benchmark");
        }
    }
}

/// Times `iters` activations in batches; `prepare` and `drain` run untimed around each batch
/// of `batch` releases.
fn time_batched(
    iters: u64,
    mut prepare: impl FnMut(usize),
    mut release_all: impl FnMut(usize),
    mut drain: impl FnMut(usize),
) -> Duration {
    let mut timed = Duration::ZERO;
    let mut remaining = iters;
    while remaining > 0 {
        let batch = remaining.min(ACTIVATION_BATCH as u64) as usize;
        prepare(batch);
        let start = Instant::now();
        release_all(batch);
        timed += start.elapsed();
        drain(batch);
        remaining -= batch as u64;
    }
    timed
}

fn bench_activation(c: &mut Criterion) {
    let mut group = c.benchmark_group("activation");
    group.warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));

    let drain = Pass;
    let processes: Vec<Process> =
        (0..ACTIVATION_BATCH).map(|_| Process::new(&drain, Class::Immediate)).collect();
    let executor = HostExecutor::new(HostFutex::new(), 1).expect("a one-worker executor");
    // Never run, so never parked: every notify finds the idle mask empty. In a cell: the
    // causeway closure is called by criterion and by the paired blocks.
    let worker =
        RefCell::new(executor.worker::<RoundRobin>(0, SpinPolicy::Park).expect("worker 0"));
    let causeway = |iters: u64| {
        time_batched(
            iters,
            |batch| {
                for process in &processes[..batch] {
                    if process.is_completed() {
                        process.rearm().expect("a completed process rearms");
                    }
                    executor.hold(process).expect("a fresh process can be held");
                    executor.submit(process).expect("a fresh process submits");
                }
            },
            |batch| {
                for process in &processes[..batch] {
                    executor.release(process).expect("the process is held");
                }
            },
            |batch| {
                let mut drained = 0;
                while worker.borrow_mut().step() {
                    drained += 1;
                }
                assert_eq!(drained, batch, "every release activated its process");
                assert_eq!(executor.live(), 0, "every activated process completed");
            },
        )
    };
    group.bench_function("causeway", |b| b.iter_custom(causeway));

    let nodes: Vec<CachePadded<TreiberNode>> = (0..ACTIVATION_BATCH)
        .map(|_| {
            CachePadded::new(TreiberNode { pending: AtomicU32::new(0), next: AtomicPtr::default() })
        })
        .collect();
    let stack = TreiberStack { head: AtomicPtr::default() };
    let idle = CachePadded(AtomicU64::new(0));
    let prepare_nodes = |batch: usize| {
        for node in &nodes[..batch] {
            node.pending.store(1, Ordering::Relaxed);
        }
    };
    let drain_nodes = |batch: usize| assert_eq!(stack.take_all(), batch, "every node queued");
    group.bench_function("fetch_sub_treiber_push", |b| {
        b.iter_custom(|iters| {
            time_batched(
                iters,
                prepare_nodes,
                |batch| release_nodes::<false>(&nodes[..batch], &stack, &idle.0),
                drain_nodes,
            )
        })
    });
    let floor = |iters: u64| {
        time_batched(
            iters,
            prepare_nodes,
            |batch| release_nodes::<true>(&nodes[..batch], &stack, &idle.0),
            drain_nodes,
        )
    };
    group.bench_function("fetch_sub_treiber_push_idle_rmw", |b| b.iter_custom(floor));
    group.finish();

    // Paired: blocks alternating causeway and the floor with its idle RMW, the ratio taken per
    // block. Two criterion windows a second apart see different machines on a shared host; two
    // neighbouring blocks of a few milliseconds mostly see the same one.
    let mut ratios: Vec<f64> = (0..ACTIVATION_PAIRED_BLOCKS)
        .map(|_| {
            let ours = causeway(ACTIVATION_BLOCK);
            let theirs = floor(ACTIVATION_BLOCK);
            ours.as_secs_f64() / theirs.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let quartile = |q: usize| ratios[(ratios.len() - 1) * q / 4];
    eprintln!(
        "activation paired, {ACTIVATION_PAIRED_BLOCKS} alternating blocks of {ACTIVATION_BLOCK} \
         activations: causeway / (fetch_sub + push + idle RMW) {:.3} (quartiles {:.3} .. {:.3})",
        quartile(2),
        quartile(1),
        quartile(3),
    );
}

/// A compute process that always goes back to sleep: it occupies its slot without being
/// runnable, which is what a scan has to skip.
struct Sleeper {
    drains: AtomicU32,
}

impl Drain for Sleeper {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.drains.fetch_add(1, Ordering::Relaxed);
        Drained::Sleep
    }
}

/// The slot word bits a scanner tests (causeway's `RUNNABLE | CLOSING | FINALIZING` has the same
/// shape: runnable and neither closing nor finalizing).
const FLOOR_RUNNABLE: u32 = 1 << 25;
const FLOOR_SKIP: u32 = FLOOR_RUNNABLE | 1 << 27 | 1 << 28;

fn bench_scan_64(c: &mut Criterion) {
    let mut group = c.benchmark_group("scan_64");
    group.warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));

    let sleeper = Sleeper { drains: AtomicU32::new(0) };
    let processes: Vec<Process> =
        (0..SCAN_SLOTS).map(|_| Process::new(&sleeper, Class::Compute)).collect();
    let executor = HostExecutor::new(HostFutex::new(), 1).expect("a one-worker executor");
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).expect("worker 0");
    for process in &processes {
        executor.submit(process).expect("a fresh process submits");
    }
    // One revolution drains every occupant once; each goes to sleep, so it reports no work.
    assert!(!worker.step(), "sleeping processes are no work");
    assert_eq!(sleeper.drains.load(Ordering::Relaxed), SCAN_SLOTS as u32, "each slot drained");
    assert!(!worker.step(), "nothing runnable");
    group.bench_function("causeway_step", |b| b.iter(|| black_box(worker.step())));
    assert_eq!(sleeper.drains.load(Ordering::Relaxed), SCAN_SLOTS as u32, "no slot drained again");
    for process in &processes {
        executor.cancel(process);
    }
    while worker.step() {}
    assert!(
        processes
            .iter()
            .all(|process| process.failure() == Some(Failure::Cancelled) && process.is_completed()),
        "every sleeper cancelled"
    );

    let words: CachePadded<[AtomicU32; SCAN_SLOTS]> =
        CachePadded([const { AtomicU32::new(0) }; SCAN_SLOTS]);
    let scan = |words: &[AtomicU32; SCAN_SLOTS]| {
        words.iter().any(|word| word.load(Ordering::Relaxed) & FLOOR_SKIP == FLOOR_RUNNABLE)
    };
    assert!(!scan(&words.0), "the floor scans all 64 words and finds nothing");
    group
        .bench_function("relaxed_loads_floor", |b| b.iter(|| black_box(scan(black_box(&words.0)))));
    group.finish();
}

/// The tiny work of `tiny_1m`: each worker bumps its own counter (no contention, no
/// read-modify-write), so the sum checks that every task ran exactly once.
#[derive(Default)]
struct Tally {
    per_worker: [CachePadded<AtomicU64>; WORKERS],
}

impl Tally {
    fn count(&self, worker: usize) {
        let counter = &self.per_worker[worker].0;
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn take(&self) -> u64 {
        self.per_worker.iter().map(|counter| counter.0.swap(0, Ordering::Relaxed)).sum()
    }
}

impl Drain for Tally {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        self.count(cx.worker());
        Drained::Done(Ok(()))
    }
}

fn run_causeway_tiny<'p>(
    executor: &HostExecutor<'p>,
    processes: &'p [Process<'p>],
    tally: &Tally,
) -> Duration {
    for process in processes {
        if process.is_completed() {
            process.rearm().expect("a completed process rearms");
        }
    }
    let start = Instant::now();
    for process in processes {
        executor.submit(process).expect("a fresh process submits");
    }
    while executor.live() != 0 {
        thread::sleep(DRAIN_POLL);
    }
    let elapsed = start.elapsed();
    assert_eq!(tally.take(), TINY_TASKS as u64, "every process drained once");
    elapsed
}

/// The in-pool submitter of `tiny_1m`: an immediate process that submits the next
/// [`SPAWN_CHUNK`] processes per drain call until all are submitted.
struct Spawner<'p> {
    processes: &'p [Process<'p>],
    /// The first process not yet submitted. Relaxed: an immediate process has one drainer at a
    /// time, and the immediate list orders one drain call before the next.
    next: AtomicUsize,
    /// The executor to submit to; set by [`run_causeway_tiny_from_worker`] before each run.
    executor: AtomicPtr<HostExecutor<'p>>,
}

impl Drain for Spawner<'_> {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        // Acquire pairs with the Release store in `run_causeway_tiny_from_worker`.
        let executor = self.executor.load(Ordering::Acquire);
        // SAFETY: `run_causeway_tiny_from_worker` stores a pointer to the executor of the
        // enclosing `Runtime::scope` before it submits this process, and that scope joins the
        // workers (the only callers of `drain`) before the executor is dropped.
        let executor = unsafe { &*executor };
        let start = self.next.load(Ordering::Relaxed);
        let end = (start + SPAWN_CHUNK).min(self.processes.len());
        for process in &self.processes[start..end] {
            executor.submit(process).expect("a fresh process submits");
        }
        self.next.store(end, Ordering::Relaxed);
        if end == self.processes.len() {
            Drained::Done(Ok(()))
        } else {
            Drained::Progress
        }
    }
}

/// As [`run_causeway_tiny`], with the processes submitted by `spawner` (whose process is
/// `spawning`) from inside the pool.
fn run_causeway_tiny_from_worker<'p>(
    executor: &HostExecutor<'p>,
    spawner: &Spawner<'p>,
    spawning: &'p Process<'p>,
    tally: &Tally,
) -> Duration {
    for process in spawner.processes.iter().chain([spawning]) {
        if process.is_completed() {
            process.rearm().expect("a completed process rearms");
        }
    }
    spawner.next.store(0, Ordering::Relaxed);
    // Release pairs with the Acquire load in `Spawner::drain`.
    spawner.executor.store(ptr::from_ref(executor).cast_mut(), Ordering::Release);
    let start = Instant::now();
    executor.submit(spawning).expect("a fresh process submits");
    // The spawner stays live until it has submitted the last process.
    while executor.live() != 0 {
        thread::sleep(DRAIN_POLL);
    }
    let elapsed = start.elapsed();
    assert_eq!(tally.take(), TINY_TASKS as u64, "every process drained once");
    elapsed
}

fn run_rayon_scope_tiny(pool: &rayon::ThreadPool, tally: &Tally) -> Duration {
    let start = Instant::now();
    pool.scope(|scope| {
        for _ in 0..TINY_TASKS {
            scope.spawn(|_| tally.count(rayon_worker()));
        }
    });
    let elapsed = start.elapsed();
    assert_eq!(tally.take(), TINY_TASKS as u64, "every task ran once");
    elapsed
}

fn run_rayon_in_place_tiny(pool: &rayon::ThreadPool, tally: &Tally) -> Duration {
    let start = Instant::now();
    pool.in_place_scope(|scope| {
        for _ in 0..TINY_TASKS {
            scope.spawn(|_| tally.count(rayon_worker()));
        }
    });
    let elapsed = start.elapsed();
    assert_eq!(tally.take(), TINY_TASKS as u64, "every task ran once");
    elapsed
}

/// Who submits the processes of a causeway `tiny_1m` function.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Submitter {
    BenchThread,
    Worker,
}

/// One causeway function of `tiny_1m`, with its workers under `spin`; on its own so that its 1M
/// processes (128 MB) are freed before the next function runs.
fn bench_tiny_causeway(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    spin: SpinPolicy,
    submitter: Submitter,
    tally: &Tally,
) {
    let processes: Vec<Process> =
        (0..TINY_TASKS).map(|_| Process::new(tally, Class::Immediate)).collect();
    let spawner = Spawner {
        processes: &processes,
        next: AtomicUsize::new(0),
        executor: AtomicPtr::new(ptr::null_mut()),
    };
    let spawning = Process::new(&spawner, Class::Immediate);
    Runtime::builder()
        .workers(WORKERS)
        .spin(spin)
        .thread_name("tiny")
        .scope(|executor| {
            let run = || match submitter {
                Submitter::BenchThread => run_causeway_tiny(executor, &processes, tally),
                Submitter::Worker => {
                    run_causeway_tiny_from_worker(executor, &spawner, &spawning, tally)
                }
            };
            group.bench_function(name, |b| b.iter_custom(|iters| (0..iters).map(|_| run()).sum()));
        })
        .expect("start the causeway runtime");
}

fn bench_tiny_1m(c: &mut Criterion) {
    let mut group = c.benchmark_group("tiny_1m");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(TINY_TASKS as u64));

    let tally = Tally::default();
    bench_tiny_causeway(
        &mut group,
        "causeway",
        SPIN_WITHOUT_PARKING,
        Submitter::BenchThread,
        &tally,
    );
    // Workers that park when they outrun the submitter, so submissions sometimes pay a wake.
    bench_tiny_causeway(
        &mut group,
        "causeway_default_spin",
        SpinPolicy::default(),
        Submitter::BenchThread,
        &tally,
    );
    bench_tiny_causeway(
        &mut group,
        "causeway_from_worker",
        SPIN_WITHOUT_PARKING,
        Submitter::Worker,
        &tally,
    );
    let pool = rayon::ThreadPoolBuilder::new().num_threads(WORKERS).build().expect("rayon pool");
    group.bench_function("rayon_scope", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run_rayon_scope_tiny(&pool, &tally)).sum())
    });
    group.bench_function("rayon_in_place_scope", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run_rayon_in_place_tiny(&pool, &tally)).sum())
    });
    group.finish();
}

// `criterion_group!` emits an undocumented `pub fn`; a private module keeps it out of the
// workspace's `missing_docs` lint without silencing the lint for the rest of the file.
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        // Groups set their own windows: most functions do untimed setup per iteration, and
        // criterion plans its windows from the timed part alone.
        config = Criterion::default();
        targets = bench_chain_hop, bench_parked_wake, bench_activation, bench_scan_64, bench_tiny_1m
    }
}

fn main() {
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}

//! The executor's hot paths beside their peers, each run on one thread so that an instruction
//! count of it is exact and the same from run to run: what `scripts/instructions.sh` runs under
//! callgrind (its figures are instructions per hop and per dispatch, steady where wall time on a
//! shared machine is not).
//!
//! Usage: `hot_path_instructions MODE [repeats]`, MODE one of
//!
//! - `chain-causeway`: a chain of [`HOPS`] immediate processes, each the sole dependent of the
//!   one before, run by one worker stepped on this thread, so every hop after the first is a
//!   hand-off (as in the `chain_hop` bench, with nothing spinning beside it);
//! - `chain-rayon`: the same chain as rayon `scope.spawn` continuations on a one-thread pool,
//!   measured from inside the pool;
//! - `dispatch-causeway`: [`DISPATCHES`] executions of a block processor of [`TILES`] tiles of a
//!   trivial kernel (one tile per claim, as in the `add_1m` bench), its two workers stepped in
//!   turn on this thread;
//! - `dispatch-floor`: the same kernel over the same tiles claimed from one plain counter, the
//!   two claimers' loops run in turn on this thread, each ending at an arrival counter (what
//!   the `add_1m` bench's floor does per dispatch, without the waiting).
//!
//! - `activation-causeway`: [`ACTIVATION_ROUNDS`] rounds of [`ACTIVATION_BATCH`] releases, each
//!   driving a suspend count to zero, queueing the process on the immediate list and notifying
//!   (nobody parked), as in the `activation` bench;
//! - `activation-floor`: the same with a plain `fetch_sub`, an intrusive Treiber-stack push and
//!   the idle-mask read-modify-write, the `activation` bench's `fetch_sub_treiber_push_idle_rmw`.
//!
//! - `signal-causeway`: [`SIGNAL_ROUNDS`] rounds of the `signal_to_start` device bench on a CPU
//!   device with one worker: a host function on queue A signals a semaphore that an operation
//!   already waiting on queue B depends on. Counted: from the moment A's host function returns
//!   to the moment B's host function is entered — completing the signal (semaphore lock,
//!   history, timepoint callback, wait gate), the woken queue's wake held back for the wake
//!   hand-off, A's retirement, the end of A's drain, the worker taking B's queue process as its
//!   hand-off and the queue stepping to B's operation. The device's workers are threads of its
//!   own pool, which no caller can step, so the two host functions bracket the span with
//!   callgrind's toggle-collect client request instead of a `measured_*` function; with one
//!   worker both toggles run on its thread, one round after another;
//! - `signal-floor`: the bench's floor, an atomic hand-off, with its two sides run in turn on
//!   this thread: the waiter announces it is ready (a store), the signaller takes the
//!   announcement (a swap) and publishes the round (a store), the waiter loads and compares it.
//!   Everything a peer has to do at the least for one thread to learn of another's signal; the
//!   cost the bench adds on two cores — moving the line between them — is not an instruction.
//!
//! The measured part of each mode but `signal-causeway` is one function (`measured_*`, never
//! inlined), which the script hands to callgrind's `--toggle-collect`; setup, rearming and
//! checks lie outside it.
//! With `repeats` > 1 the mode also prints the median wall time per hop or dispatch over that
//! many runs (a second figure, for a quiet machine). Every run checks what it measured: every
//! hop ran, every tile ran exactly once per dispatch, every process completed.

use std::hint::black_box;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway::core::CachePadded;
use causeway::cpu::{BlockProcessor, CommandBuffer, CpuBackend};
use causeway::device::{Device, Op, QueueConfig, Work};
use causeway::executor::{
    Class, Drain, DrainContext, Drained, Executor, Futex, FutexWord, Process, RoundRobin,
    SpinPolicy, Worker,
};
use causeway::runtime::blocking;
use causeway::scope::{Endpoint, Scope};
use causeway::{Failure, PoolConfig};

#[path = "support/callgrind.rs"]
mod callgrind;

/// Hops in one chain.
const HOPS: u32 = 100_000;

/// Dispatches in one dispatch run.
const DISPATCHES: u32 = 1_000;

/// Tiles per dispatch, as in the `add_1m` bench (1M elements in tiles of 16Ki).
const TILES: u32 = 64;

/// Releases per activation round, as in the `activation` bench.
const ACTIVATION_BATCH: usize = 1024;

/// Activation rounds in one activation run.
const ACTIVATION_ROUNDS: u32 = 100;

/// Workers of the dispatch executor, as in the `add_1m` bench.
const WORKERS: usize = 2;

/// Measured rounds in one signal run (after as many unmeasured warm-up rounds).
const SIGNAL_ROUNDS: u32 = 1_000;

/// How long the host thread leaves the device alone after submitting a round's dependent: long
/// enough, even under callgrind, for the worker to find it waiting and put its queue to sleep
/// before the signalling operation is submitted (else the dependent's queue may still be
/// queued behind the signaller's when the signal lands, and there is nothing to hand off).
const SIGNAL_SETTLE: Duration = Duration::from_millis(1);

/// Workers here are only ever stepped, never parked: waiting and waking are never called.
struct NeverParks;

impl Futex for NeverParks {
    fn wait(&self, _word: &FutexWord, _expected: u32, _timeout: Option<Duration>) {
        unreachable!("a stepped worker never parks");
    }

    fn wake_one(&self, _word: &FutexWord) {}

    fn wake_all(&self, _word: &FutexWord) {}
}

type StepExecutor<'p> = Executor<'p, NeverParks, 64, 64>;
type StepWorker<'e, 'p> = Worker<'e, 'p, NeverParks, RoundRobin, 64, 64>;

/// One hop of a causeway chain: counts itself.
struct Link<'a> {
    ran: &'a AtomicU32,
}

impl Drain for Link<'_> {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.ran.fetch_add(1, Ordering::Relaxed);
        Drained::Done(Ok(()))
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        assert_eq!(outcome, Ok(()), "a link failed");
    }
}

#[inline(never)]
fn measured_chain_causeway<'p>(
    executor: &StepExecutor<'p>,
    worker: &mut StepWorker<'_, 'p>,
    head: &'p Process<'p>,
) {
    executor.release(head).expect("the head is held");
    while worker.step() {}
}

fn chain_causeway() -> Duration {
    let ran = AtomicU32::new(0);
    let links: Vec<Link> = (0..HOPS).map(|_| Link { ran: &ran }).collect();
    let processes: Vec<Process> =
        links.iter().map(|link| Process::new(link, Class::Immediate)).collect();
    let edges: Vec<[&Process; 1]> = processes[1..].iter().map(|next| [next]).collect();
    for (process, edge) in processes.iter().zip(&edges) {
        process.set_dependents(edge).expect("a fresh process takes dependents");
    }
    let executor = StepExecutor::new(NeverParks, 1).expect("one worker");
    executor.hold(&processes[0]).expect("a fresh process can be held");
    for process in &processes {
        executor.submit(process).expect("a fresh process submits");
    }
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).expect("worker 0");
    let start = Instant::now();
    measured_chain_causeway(&executor, &mut worker, &processes[0]);
    let elapsed = start.elapsed();
    assert_eq!(ran.load(Ordering::Relaxed), HOPS, "every hop ran");
    assert!(processes.iter().all(Process::is_completed), "every hop completed");
    assert_eq!(executor.live(), 0);
    elapsed / HOPS
}

fn rayon_link<'s>(scope: &rayon::Scope<'s>, position: u32, ran: &'s AtomicU32) {
    ran.fetch_add(1, Ordering::Relaxed);
    if position < HOPS {
        scope.spawn(move |scope| rayon_link(scope, position + 1, ran));
    }
}

#[inline(never)]
fn measured_chain_rayon(ran: &AtomicU32) {
    rayon::scope(|scope| scope.spawn(|scope| rayon_link(scope, 1, ran)));
}

fn chain_rayon() -> Duration {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a rayon pool");
    let ran = AtomicU32::new(0);
    let elapsed = pool.install(|| {
        let start = Instant::now();
        measured_chain_rayon(black_box(&ran));
        start.elapsed()
    });
    assert_eq!(ran.load(Ordering::Relaxed), HOPS, "every hop ran");
    elapsed / HOPS
}

/// The trivial kernel of both dispatch peers: counts the runs of each tile.
struct TileCounts(Vec<AtomicU32>);

impl TileCounts {
    fn new() -> TileCounts {
        TileCounts((0..TILES).map(|_| AtomicU32::new(0)).collect())
    }

    fn run(&self, tile: u32) {
        self.0[tile as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Checks that every tile ran once per dispatch.
    fn check(&self, dispatches: u32) {
        for (tile, count) in self.0.iter().enumerate() {
            assert_eq!(count.load(Ordering::Relaxed), dispatches, "tile {tile}");
        }
    }
}

#[inline(never)]
fn measured_dispatch_causeway<'p>(
    executor: &StepExecutor<'p>,
    workers: &mut [StepWorker<'_, 'p>; WORKERS],
    process: &'p Process<'p>,
) {
    executor.submit(process).expect("a fresh process submits");
    while !process.is_completed() {
        for worker in workers.iter_mut() {
            worker.step();
        }
    }
}

fn dispatch_causeway() -> Duration {
    let counts = TileCounts::new();
    let kernel = |tile: u32| counts.run(tile);
    let buffer =
        CommandBuffer::builder().dispatch_batched(TILES, 1, &kernel).build().expect("record");
    let processor = BlockProcessor::new(&buffer, WORKERS).expect("a processor");
    let process = Process::new(&processor, Class::Compute);
    let executor = StepExecutor::new(NeverParks, WORKERS).expect("two workers");
    let mut workers = [0, 1].map(|index| {
        executor.worker::<RoundRobin>(index, SpinPolicy::Park).expect("a free worker index")
    });
    let mut elapsed = Duration::ZERO;
    for _ in 0..DISPATCHES {
        if process.is_completed() {
            process.rearm().expect("a completed process rearms");
            processor.reset().expect("a finished processor resets");
        }
        let start = Instant::now();
        measured_dispatch_causeway(&executor, &mut workers, &process);
        elapsed += start.elapsed();
        assert_eq!(process.failure(), None, "the execution succeeded");
    }
    counts.check(DISPATCHES);
    assert_eq!(executor.live(), 0);
    elapsed / DISPATCHES
}

/// The floor's shared words, as the `add_1m` bench's floor has them.
struct Floor {
    next: AtomicU32,
    arrived: AtomicU32,
}

/// One claimer of the floor: claims tiles until none is left, then arrives; `true` for the
/// last arriver.
fn floor_claimer(floor: &Floor, counts: &TileCounts) -> bool {
    loop {
        let tile = floor.next.fetch_add(1, Ordering::Relaxed);
        if tile >= TILES {
            break;
        }
        counts.run(tile);
    }
    floor.arrived.fetch_add(1, Ordering::AcqRel) + 1 == WORKERS as u32
}

#[inline(never)]
fn measured_dispatch_floor(floor: &Floor, counts: &TileCounts) {
    let last = (0..WORKERS).map(|_| floor_claimer(floor, counts)).filter(|&last| last).count();
    assert_eq!(last, 1, "one last arriver");
}

fn dispatch_floor() -> Duration {
    let counts = TileCounts::new();
    let floor = Floor { next: AtomicU32::new(0), arrived: AtomicU32::new(0) };
    let mut elapsed = Duration::ZERO;
    for _ in 0..DISPATCHES {
        floor.next.store(0, Ordering::Relaxed);
        floor.arrived.store(0, Ordering::Relaxed);
        let start = Instant::now();
        measured_dispatch_floor(&floor, &counts);
        elapsed += start.elapsed();
    }
    counts.check(DISPATCHES);
    elapsed / DISPATCHES
}

/// Does nothing: an activation is measured up to the queue, not the drain.
struct Pass;

impl Drain for Pass {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        Drained::Done(Ok(()))
    }
}

#[inline(never)]
fn measured_activation_causeway<'p>(executor: &StepExecutor<'p>, processes: &'p [Process<'p>]) {
    for process in processes {
        executor.release(process).expect("the process is held");
    }
}

fn activation_causeway() -> Duration {
    let pass = Pass;
    let processes: Vec<Process> =
        (0..ACTIVATION_BATCH).map(|_| Process::new(&pass, Class::Immediate)).collect();
    let executor = StepExecutor::new(NeverParks, 1).expect("one worker");
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).expect("worker 0");
    let mut elapsed = Duration::ZERO;
    for _ in 0..ACTIVATION_ROUNDS {
        for process in &processes {
            if process.is_completed() {
                process.rearm().expect("a completed process rearms");
            }
            executor.hold(process).expect("a fresh process can be held");
            executor.submit(process).expect("a fresh process submits");
        }
        let start = Instant::now();
        measured_activation_causeway(&executor, &processes);
        elapsed += start.elapsed();
        let mut drained = 0;
        while worker.step() {
            drained += 1;
        }
        assert_eq!(drained, ACTIVATION_BATCH, "every release activated its process");
        assert_eq!(executor.live(), 0);
    }
    elapsed / (ACTIVATION_ROUNDS * ACTIVATION_BATCH as u32)
}

/// The activation floor's node: a suspend count and a stack link, on a line of its own.
struct TreiberNode {
    pending: AtomicU32,
    next: AtomicPtr<TreiberNode>,
}

#[inline(never)]
fn measured_activation_floor(
    nodes: &[CachePadded<TreiberNode>],
    head: &AtomicPtr<TreiberNode>,
    idle: &AtomicU64,
) {
    for node in nodes {
        // AcqRel, Release and AcqRel: the orderings of causeway's release, push and notify.
        if node.0.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            let pointer = ptr::from_ref(&node.0).cast_mut();
            let mut current = head.load(Ordering::Relaxed);
            loop {
                node.0.next.store(current, Ordering::Relaxed);
                match head.compare_exchange_weak(
                    current,
                    pointer,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(actual) => current = actual,
                }
            }
        }
        assert_eq!(idle.fetch_or(0, Ordering::AcqRel), 0, "nobody parks here");
    }
}

fn activation_floor() -> Duration {
    let nodes: Vec<CachePadded<TreiberNode>> = (0..ACTIVATION_BATCH)
        .map(|_| {
            CachePadded(TreiberNode { pending: AtomicU32::new(0), next: AtomicPtr::default() })
        })
        .collect();
    let head = AtomicPtr::default();
    let idle = AtomicU64::new(0);
    let mut elapsed = Duration::ZERO;
    for _ in 0..ACTIVATION_ROUNDS {
        for node in &nodes {
            node.0.pending.store(1, Ordering::Relaxed);
        }
        let start = Instant::now();
        measured_activation_floor(&nodes, &head, &idle);
        elapsed += start.elapsed();
        let mut node = head.swap(ptr::null_mut(), Ordering::Acquire);
        let mut queued = 0;
        while !node.is_null() {
            // SAFETY: every pointer on the stack came from a node of `nodes`, which outlives
            // the stack and does not move while it is used.
            node = unsafe { &*node }.next.load(Ordering::Relaxed);
            queued += 1;
        }
        assert_eq!(queued, ACTIVATION_BATCH, "every node queued");
    }
    elapsed / (ACTIVATION_ROUNDS * ACTIVATION_BATCH as u32)
}

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

/// Nanoseconds since `origin`.
fn stamp(origin: Instant) -> u64 {
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn signal_causeway() -> Duration {
    let mut pool = PoolConfig::with_workers(1);
    pool.spin = SpinPolicy::Park;
    let mut builder = Device::builder(pool);
    builder.driver(CpuBackend::new());
    let (a, b) = (builder.queue(QueueConfig::default()), builder.queue(QueueConfig::default()));
    let s = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let done = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let origin = Instant::now();
    // Whether the host functions bracket their round for callgrind (not in the warm-up).
    let measuring = Arc::new(AtomicBool::new(false));
    let signalled = Arc::new(AtomicU64::new(0));
    let started = Arc::new(AtomicU64::new(0));
    let signal_ends = {
        let (measuring, signalled) = (Arc::clone(&measuring), Arc::clone(&signalled));
        builder.host_call(move |_| {
            signalled.store(stamp(origin), Ordering::Relaxed);
            if measuring.load(Ordering::Relaxed) {
                callgrind::toggle_collect();
            }
            Ok(())
        })
    };
    let dependent_starts = {
        let (measuring, started) = (Arc::clone(&measuring), Arc::clone(&started));
        builder.host_call(move |_| {
            if measuring.load(Ordering::Relaxed) {
                callgrind::toggle_collect();
            }
            started.store(stamp(origin), Ordering::Relaxed);
            Ok(())
        })
    };
    let device = builder.build().expect("the device starts");
    let done_semaphore = device.semaphore(done).expect("declared");
    let mut elapsed = Duration::ZERO;
    for round in 1..=2 * u64::from(SIGNAL_ROUNDS) {
        let measured = round > u64::from(SIGNAL_ROUNDS);
        // Stored before the round's submissions, whose publication the queue processes
        // acquire before running either host function.
        measuring.store(measured, Ordering::Relaxed);
        let (waits, signals_done, signals_s) = ([(s, round)], [(done, round)], [(s, round)]);
        let dependent = Op {
            waits: &waits,
            signals: &signals_done,
            work: Work::Host(dependent_starts),
            tag: round,
            ..Default::default()
        };
        device.submit(b, &dependent).expect("room in the ring");
        std::thread::sleep(SIGNAL_SETTLE);
        let signaller = Op {
            waits: &[],
            signals: &signals_s,
            work: Work::Host(signal_ends),
            tag: round,
            ..Default::default()
        };
        device.submit(a, &signaller).expect("room in the ring");
        blocking::wait(done_semaphore, round, Some(Duration::from_secs(60)))
            .expect("the round completes");
        if measured {
            let latency = started.load(Ordering::Relaxed) - signalled.load(Ordering::Relaxed);
            elapsed += Duration::from_nanos(latency);
        }
    }
    assert_eq!(done_semaphore.value(), 2 * u64::from(SIGNAL_ROUNDS), "every round completed");
    elapsed / SIGNAL_ROUNDS
}

/// The two sides of the floor's hand-off, on lines of their own as on two cores.
struct HandOffFloor {
    ready: CachePadded<AtomicBool>,
    sequence: CachePadded<AtomicU64>,
}

/// The waiter announces it is ready, the signaller takes that and publishes the round, the
/// waiter sees it: the bench floor's atomics for one round, in the order two cores run them.
#[inline(never)]
fn measured_signal_floor(floor: &HandOffFloor, rounds: u64) {
    for round in 1..=rounds {
        floor.ready.0.store(true, Ordering::Release);
        while !floor.ready.0.swap(false, Ordering::Acquire) {
            std::hint::spin_loop();
        }
        floor.sequence.0.store(round, Ordering::Release);
        while floor.sequence.0.load(Ordering::Acquire) != round {
            std::hint::spin_loop();
        }
    }
}

fn signal_floor() -> Duration {
    let floor = HandOffFloor {
        ready: CachePadded(AtomicBool::new(false)),
        sequence: CachePadded(AtomicU64::new(0)),
    };
    let start = Instant::now();
    measured_signal_floor(&floor, black_box(u64::from(SIGNAL_ROUNDS)));
    let elapsed = start.elapsed();
    assert_eq!(floor.sequence.0.load(Ordering::Relaxed), u64::from(SIGNAL_ROUNDS));
    elapsed / SIGNAL_ROUNDS
}

fn main() {
    let mut arguments = std::env::args().skip(1);
    let mode = arguments.next().unwrap_or_default();
    let run: fn() -> Duration = match mode.as_str() {
        "chain-causeway" => chain_causeway,
        "chain-rayon" => chain_rayon,
        "dispatch-causeway" => dispatch_causeway,
        "dispatch-floor" => dispatch_floor,
        "activation-causeway" => activation_causeway,
        "activation-floor" => activation_floor,
        "signal-causeway" => signal_causeway,
        "signal-floor" => signal_floor,
        _ => {
            eprintln!(
                "usage: hot_path_instructions chain-causeway|chain-rayon|dispatch-causeway|\
                 dispatch-floor|activation-causeway|activation-floor|signal-causeway|\
                 signal-floor [repeats]"
            );
            std::process::exit(2);
        }
    };
    let repeats: usize = match arguments.next().map(|repeats| repeats.parse()) {
        None => 1,
        Some(Ok(repeats)) if repeats > 0 => repeats,
        Some(_) => {
            eprintln!("repeats must be a positive number");
            std::process::exit(2);
        }
    };
    let mut times: Vec<Duration> = (0..repeats).map(|_| run()).collect();
    times.sort_unstable();
    let ops = match mode.split('-').next() {
        Some("chain") => HOPS,
        Some("dispatch") => DISPATCHES,
        Some("signal") => SIGNAL_ROUNDS,
        _ => ACTIVATION_ROUNDS * ACTIVATION_BATCH as u32,
    };
    // Read by `scripts/instructions.sh`: the measured functions ran `ops` times per run.
    println!("ops per run: {ops}");
    if repeats > 1 {
        println!("{mode}: median {:?} per op over {repeats} runs", times[repeats / 2]);
    }
}

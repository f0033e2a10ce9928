//! Cross-rank benchmarks on real Open MPI ranks, each beside its peer in the same run.
//!
//! Run by `cargo bench` as an ordinary bench binary, this program launches itself under
//! `mpirun` (`--oversubscribe` past two ranks; each run under `timeout`); launched by mpirun,
//! it is one rank.
//!
//! - `cross_rank/signal_to_dependent_start` (2 ranks): one causal chain of operations that
//!   alternates between the ranks. Round r is an operation on rank 0 that signals a shared
//!   semaphore to r, an operation on rank 1 that waits on it and signals a second shared
//!   semaphore to r, and an operation on rank 0, after the first in queue order, that waits on
//!   that; the next round's first operation runs only after it. Both ranks submit a batch of
//!   rounds ahead (as causeway is meant to be used: remote waits are queued at submit time):
//!   rank 1 once every announcement of rank 0's batch has arrived, rank 0 then waits for rank
//!   1's last announcement. Rank 0's host thread then signals a local "go" that the batch's
//!   first operation waits on, and sleeps until the batch's last value; the rounds run without
//!   any host thread. Timed on rank 0 in the batch's steady state: from the start of the
//!   dependent operation of its `EDGE`-th round to that of its `EDGE`-th last, each stamping
//!   the time itself in a host function, summed over batches and divided by the hops between
//!   (two per round): one cross-rank signal → dependent-operation start (the reached message,
//!   the receiver's progress process, its queue process). The first and last rounds of a batch
//!   also carry its start (the host's go) and its end (host waiters woken), which are not
//!   hops. The time from the go up to the host thread running again after each batch is
//!   printed beside it: how soon a woken thread gets a CPU is the scheduler's choice, not part
//!   of a hop. Peer in the same run: `cross_rank/raw_mpi_ping_pong`, a
//!   1-byte rsmpi send/receive round trip between the same two processes, halved.
//! - `cross_rank/alternating` (2 ranks; over shared memory, then over TCP loopback): the chain
//!   and the raw ping-pong in many alternating blocks, printed as the median (and quartiles)
//!   over blocks of each chain block's hop beside the raw block just before it. This machine
//!   drifts between faster and slower states within minutes, and a ratio of two criterion
//!   groups measured minutes apart carries that drift; neighbouring blocks share a state. Over
//!   TCP (the kernel's network stack, the path between machines) the same hop is set beside a
//!   one-way latency of network size.
//! - `cross_rank/host_round_trip` (2 ranks): the same hop with each rank's host thread in the
//!   loop every round — rank 0 submits a signal and a dependent operation and sleeps until the
//!   answer, rank 1 submits one operation per round and sleeps until it ran — halved. The
//!   difference from the chain is the cost of waking a sleeping host thread each round.
//! - `collective frontier` (2, 4 and 8 ranks, printed, not timed): after an all-reduce on a
//!   collective channel, the step that waits on it knows its own queue and the channel — the
//!   same two frontier entries at every rank count. Each rank checks it; rank 0 prints it.

use std::hint::black_box;
use std::mem::ManuallyDrop;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use causeway_core::scope::{Endpoint, Scope};
use causeway_device::{
    Device, HostCallId, Op, QueueConfig, QueueId, SemaphoreConfig, SemaphoreId, Work,
};
use causeway_distributed::{LinkId, Links, Node};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::{blocking, PoolConfig};
use criterion::Criterion;
use mpi::traits::{Communicator, Destination, Source};

const LONG: Duration = Duration::from_secs(60);
/// Tag of the commands rank 0 sends rank 1 (how many iterations of which measurement).
const COMMAND_TAG: i32 = 99;
const PING_TAG: i32 = 98;
const RAW: u64 = 1;
const CAUSEWAY: u64 = 2;
const QUIT: u64 = 3;
const CHAIN: u64 = 4;
/// Round trips of the chain submitted ahead at once (each rank's queue holds two operations
/// per round on rank 0, one on rank 1; histories hold every pending value of a batch).
const BATCH: u64 = 64;

fn main() -> ExitCode {
    match (std::env::var("OMPI_COMM_WORLD_RANK"), std::env::var("CAUSEWAY_BENCH_MODE")) {
        (Ok(_), Ok(mode)) => rank_main(&mode),
        _ => launch_all(),
    }
}

fn launch_all() -> ExitCode {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Mode, ranks and Open MPI's transports: shared memory between the ranks of one machine
    // (vader), or the kernel's TCP stack over loopback, a network path as between machines.
    let runs = [
        ("latency", 2, SHARED_MEMORY),
        ("alternating", 2, SHARED_MEMORY),
        ("alternating", 2, TCP),
        ("collective", 2, SHARED_MEMORY),
        ("collective", 4, SHARED_MEMORY),
        ("collective", 8, SHARED_MEMORY),
    ];
    for (mode, ranks, (transport, btl)) in runs {
        let status = Command::new("timeout")
            .args(["--kill-after=5", "600", "mpirun", "-n", &ranks.to_string()])
            .args(["--mca", "btl", btl])
            // Two ranks fit the two-core machine: Open MPI then polls aggressively (as it
            // would on a real cluster) instead of yielding, which is fairer to the raw peer.
            .args(if ranks > 2 { &["--oversubscribe"][..] } else { &[] })
            .arg(&exe)
            .args(&args)
            .env("CAUSEWAY_BENCH_MODE", mode)
            .env("CAUSEWAY_BENCH_TRANSPORT", transport)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("mpirun -n {ranks} ({mode}, {transport}) failed: {status}");
                return ExitCode::FAILURE;
            }
            Err(error) => {
                eprintln!("cannot run timeout/mpirun ({error}); run scripts/mpi.sh");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

/// Open MPI's byte transfer layers for the ranks of one machine: shared memory.
const SHARED_MEMORY: (&str, &str) = ("shared memory", "vader,self");
/// The kernel's TCP stack over loopback: the path of ranks on different machines.
const TCP: (&str, &str) = ("TCP loopback", "tcp,self");

/// The clock the chain's stamping operations and rank 0's host thread share.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Nanoseconds since [`origin`].
fn now() -> u64 {
    origin().elapsed().as_nanos() as u64
}

/// When the first and the last timed operation of the latest chain batch started (nanoseconds
/// since [`origin`]), each stamped by that operation's host function.
static CHAIN_STAMPS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Rounds at either end of a chain batch that are run but not timed.
const EDGE: u64 = 8;

/// A device of one worker and two queues, `semaphores` system-wide semaphores, and the two host
/// functions that stamp [`CHAIN_STAMPS`].
fn device(
    rank: i32,
    semaphores: usize,
) -> (&'static Device, [QueueId; 2], Vec<SemaphoreId>, [HostCallId; 2]) {
    let mut builder = Device::builder(PoolConfig::with_workers(1));
    let stamp = [0, 1].map(|k| {
        builder.host_call(move |_| {
            CHAIN_STAMPS[k].store(now(), Ordering::Relaxed);
            Ok(())
        })
    });
    let driver = builder.driver(CpuBackend::new());
    let mut config = QueueConfig::default();
    config.machine = rank as u16;
    config.driver = driver;
    let queue = [builder.queue(config), builder.queue(config)];
    let home: Endpoint = builder.endpoint(queue[0]).expect("the queue exists");
    let ids = (0..semaphores)
        .map(|_| {
            let mut config = SemaphoreConfig::new(0, Scope::SystemWide, home);
            config.history = 2 * BATCH as usize;
            builder.semaphore_config(config)
        })
        .collect();
    let device = builder.build().expect("the device builds");
    (Box::leak(Box::new(device)), queue, ids, stamp)
}

fn rank_main(mode: &str) -> ExitCode {
    let rank: i32 =
        std::env::var("OMPI_COMM_WORLD_RANK").ok().and_then(|r| r.parse().ok()).unwrap_or(-1);
    let result = match mode {
        "latency" => latency(rank, false),
        "alternating" => latency(rank, true),
        "collective" => collective(rank),
        other => Err(format!("unknown mode {other:?}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("rank {rank}: {why}");
            ExitCode::FAILURE
        }
    }
}

/// Semaphores: 0 = link 0 (rank 0 → 1), 1 = link 1 (rank 1 → 0), 2 = rank 0's local "done",
/// 3 = rank 0's local "go" (a chain batch starts).
fn latency(rank: i32, alternating: bool) -> Result<(), String> {
    // Rank 0 signals from one queue and depends from the other (one in-order queue would hold
    // the signal behind the operation waiting for its answer).
    let (device, [queue, dependent_queue], semaphores, stamp) = device(rank, 4);
    let (there, back, done) = (semaphores[0], semaphores[1], semaphores[2]);
    // Rank 0's go for each batch of the chain (signalled by its host thread).
    let go_id = semaphores[3];
    let done_id = done;
    let mut links = Links::new();
    if rank == 0 {
        links.export(LinkId(0), there, &[1]).import(LinkId(1), back, 1);
    } else {
        links.import(LinkId(0), there, 0).export(LinkId(1), back, &[0]);
    }
    let node = ManuallyDrop::new(Node::start(device, &links).map_err(|e| e.to_string())?);
    let mut round = 0u64;
    if rank == 0 {
        let mut chain = Chain {
            node: &node,
            device,
            queue,
            links: (there, back),
            stamp,
            go: go_id,
            done: done_id,
            round: 0,
            batches: 0,
            hops: 0,
            woken: Duration::ZERO,
        };
        if alternating {
            alternate(&mut chain);
            command(&node, QUIT, 0);
            node.barrier();
            ManuallyDrop::into_inner(node).finish();
            return Ok(());
        }
        let mut criterion = Criterion::default().configure_from_args();
        let mut group = criterion.benchmark_group("cross_rank");
        group.bench_function("raw_mpi_ping_pong", |b| {
            b.iter_custom(|iters| raw_one_way(&node, iters))
        });
        group.bench_function("signal_to_dependent_start", |b| {
            b.iter_custom(|iters| chain.run(iters))
        });
        round = chain.round;
        let (chain_hops, chain_woken) = (chain.hops, chain.woken);
        group.bench_function("host_round_trip", |b| {
            b.iter_custom(|iters| {
                command(&node, CAUSEWAY, iters);
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    // Untimed: rank 1 has submitted its operation for this round, and ours
                    // that depends on it is submitted (pipelined) before the signal.
                    node.await_announced(LinkId(1), round, LONG).expect("rank 1 announces");
                    let dependent = Op {
                        waits: &[(back, round)],
                        signals: &[(done, round)],
                        work: Work::Barrier,
                        tag: round,
                        ..Default::default()
                    };
                    node.submit(dependent_queue, &dependent).expect("submits");
                    let started = Instant::now();
                    let signal = Op {
                        waits: &[],
                        signals: &[(there, round)],
                        work: Work::Barrier,
                        tag: round,
                        ..Default::default()
                    };
                    node.submit(queue, &signal).expect("submits");
                    let semaphore = device.semaphore(done).expect("done");
                    blocking::wait(semaphore, round, Some(LONG)).expect("the round trip ends");
                    total += started.elapsed();
                }
                total / 2
            })
        });
        group.finish();
        if chain_hops > 0 {
            println!(
                "cross_rank/signal_to_dependent_start with rank 0's host thread woken at the end \
                 of each batch of {BATCH} rounds counted in: {:.1} ns per hop",
                chain_woken.as_nanos() as f64 / chain_hops as f64
            );
        }
        command(&node, QUIT, 0);
    } else {
        loop {
            let mut command = [0u64; 2];
            node.with_world(|world| {
                world.process_at_rank(0).receive_into_with_tag(&mut command[..], COMMAND_TAG)
            });
            let [kind, iters] = command;
            match kind {
                RAW => node.with_world(|world| {
                    let peer = world.process_at_rank(0);
                    for _ in 0..iters {
                        let (byte, _) = peer.receive_with_tag::<u8>(PING_TAG);
                        peer.send_with_tag(&[byte][..], PING_TAG);
                    }
                }),
                CAUSEWAY => {
                    for _ in 0..iters {
                        round += 1;
                        relay(&node, queue, (there, back), round)?;
                        node.wait(LinkId(1), round, LONG).map_err(|e| e.to_string())?;
                    }
                }
                CHAIN => {
                    let mut left = iters;
                    while left > 0 {
                        let batch = left.min(BATCH);
                        // Rank 0's announcements of the batch have all arrived (none is left
                        // to deliver while the chain runs).
                        node.await_announced(LinkId(0), round + batch, LONG)
                            .map_err(|e| e.to_string())?;
                        for _ in 0..batch {
                            round += 1;
                            relay(&node, queue, (there, back), round)?;
                        }
                        node.wait(LinkId(1), round, LONG).map_err(|e| e.to_string())?;
                        left -= batch;
                    }
                }
                _ => break,
            }
        }
    }
    node.barrier();
    ManuallyDrop::into_inner(node).finish();
    Ok(())
}

/// Rank 0's side of the chain (see the module docs): its node, queue, semaphores and the
/// rounds run so far.
struct Chain<'a> {
    node: &'a Node,
    device: &'static Device,
    queue: QueueId,
    /// The link semaphores: rank 0 → 1, and back.
    links: (SemaphoreId, SemaphoreId),
    /// The host functions that stamp the first and the last timed operation of a batch.
    stamp: [HostCallId; 2],
    go: SemaphoreId,
    done: SemaphoreId,
    round: u64,
    batches: u64,
    /// Whole batches' hops, timed from the go up to the host thread's wake-up.
    hops: u64,
    woken: Duration,
}

impl Chain<'_> {
    /// Runs `iters` round trips of the chain in batches; the time of `iters` hops in the
    /// batches' steady state (see the module docs), from the hops timed.
    fn run(&mut self, iters: u64) -> Duration {
        let (node, (there, back)) = (self.node, self.links);
        command(node, CHAIN, iters);
        let done = self.device.semaphore(self.done).expect("done");
        let go = self.device.semaphore(self.go).expect("go");
        let (mut timed, mut timed_hops) = (0u64, 0u64);
        let mut left = iters;
        while left > 0 {
            let batch = left.min(BATCH);
            // The rounds whose dependent operations stamp: the steady state when the batch has
            // one, otherwise from its go (`None`) to its last round.
            let (first, last) = if batch > 2 * EDGE {
                (Some(EDGE - 1), batch - 1 - EDGE)
            } else {
                (None, batch - 1)
            };
            self.batches += 1;
            let start = [(self.go, self.batches)];
            for k in 0..batch {
                self.round += 1;
                let round = self.round;
                // In queue order: this round's signal runs once the previous round's dependent
                // operation has run, so the rounds are one causal chain. The batch's first
                // waits for the host's go.
                let signal = Op {
                    waits: if k == 0 { &start } else { &[] },
                    signals: &[(there, round)],
                    work: Work::Barrier,
                    tag: round,
                    ..Default::default()
                };
                node.submit(self.queue, &signal).expect("submits");
                let work = if Some(k) == first {
                    Work::Host(self.stamp[0])
                } else if k == last {
                    Work::Host(self.stamp[1])
                } else {
                    Work::Barrier
                };
                let dependent = Op {
                    waits: &[(back, round)],
                    signals: &[(self.done, round)],
                    work,
                    tag: round,
                    ..Default::default()
                };
                node.submit(self.queue, &dependent).expect("submits");
            }
            // Rank 1 has received every announcement of this batch and submitted its own once
            // it announces the last round.
            node.await_announced(LinkId(1), self.round, LONG).expect("rank 1 announces");
            let started = now();
            go.signal_external(self.batches).expect("go");
            blocking::wait(done, self.round, Some(LONG)).expect("the chain ends");
            // Between the operations' own stamps: how soon this thread runs again is the
            // scheduler's choice, not part of a hop. `done` reaching the round orders the
            // stamps before these loads.
            let from = first.map_or(started, |_| CHAIN_STAMPS[0].load(Ordering::Relaxed));
            timed += CHAIN_STAMPS[1].load(Ordering::Relaxed).saturating_sub(from);
            timed_hops += 2 * first.map_or(last + 1, |first| last - first);
            self.woken += Duration::from_nanos(now().saturating_sub(started));
            self.hops += 2 * batch;
            left -= batch;
        }
        Duration::from_nanos(
            (u128::from(timed) * u128::from(iters) / u128::from(timed_hops)) as u64,
        )
    }
}

/// `iters` raw rsmpi round trips of one byte with rank 1; one-way time, summed.
fn raw_one_way(node: &Node, iters: u64) -> Duration {
    command(node, RAW, iters);
    let started = Instant::now();
    node.with_world(|world| {
        let peer = world.process_at_rank(1);
        for _ in 0..iters {
            peer.send_with_tag(&[1u8][..], PING_TAG);
            let (byte, _) = peer.receive_with_tag::<u8>(PING_TAG);
            black_box(byte);
        }
    });
    started.elapsed() / 2
}

/// Blocks of the raw ping-pong and of the chain, alternating.
const ALTERNATIONS: usize = 41;
/// Round trips per block.
const BLOCK: u64 = 2_048;

/// The chain beside the raw ping-pong in many alternating blocks: this machine moves between
/// faster and slower states within minutes, and two figures measured minutes apart (as
/// criterion's groups are) can carry that drift in their ratio. Each chain block is compared
/// with the raw block just before it; the median of those ratios is printed. Under
/// `cargo bench -- --test` (criterion's one-iteration check) a few short blocks only show the
/// path works.
fn alternate(chain: &mut Chain<'_>) {
    let quick = std::env::args().any(|arg| arg == "--test");
    let (alternations, block) = if quick { (3, 64) } else { (ALTERNATIONS, BLOCK) };
    // Warm both paths (first-touch, Open MPI's connection set-up).
    raw_one_way(chain.node, block);
    chain.run(block);
    let mut ratios = Vec::with_capacity(alternations);
    let (mut raws, mut hops) = (Vec::with_capacity(alternations), Vec::with_capacity(alternations));
    for _ in 0..alternations {
        let raw = raw_one_way(chain.node, block).as_nanos() as f64 / block as f64;
        let hop = chain.run(block).as_nanos() as f64 / block as f64;
        ratios.push(hop / raw);
        raws.push(raw);
        hops.push(hop);
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (ratio, raw, hop) = (median(&mut ratios), median(&mut raws), median(&mut hops));
    let (low, high) = (ratios[alternations / 4], ratios[3 * alternations / 4]);
    let transport = std::env::var("CAUSEWAY_BENCH_TRANSPORT").unwrap_or_default();
    println!(
        "cross_rank/alternating ({transport}): {alternations} block pairs of {block} round trips: \
         signal_to_dependent_start / raw_mpi_ping_pong = {ratio:.2} (quartiles {low:.2}–{high:.2}); \
         medians {hop:.1} ns per hop, {raw:.1} ns one-way"
    );
}

/// Rank 1's operation of `round`: waits for rank 0's signal `from`, signals `to` back.
fn relay(
    node: &Node,
    queue: QueueId,
    (from, to): (SemaphoreId, SemaphoreId),
    round: u64,
) -> Result<(), String> {
    let op = Op {
        waits: &[(from, round)],
        signals: &[(to, round)],
        work: Work::Barrier,
        tag: round,
        ..Default::default()
    };
    node.submit(queue, &op).map(|_| ()).map_err(|e| e.to_string())
}

/// Tells rank 1 what to serve next.
fn command(node: &Node, kind: u64, iters: u64) {
    node.with_world(|world| world.process_at_rank(1).send_with_tag(&[kind, iters], COMMAND_TAG));
}

/// An all-reduce on the world's collective channel, then a step that waits on it.
fn collective(rank: i32) -> Result<(), String> {
    let (device, [queue, _], semaphores, _) = device(rank, 3);
    let (contributed, reduced, stepped) = (semaphores[0], semaphores[1], semaphores[2]);
    let node = ManuallyDrop::new(Node::start(device, &Links::new()).map_err(|e| e.to_string())?);
    let size = node.size();
    let mut channel = node.collective_channel(0).ok_or("no collective channel")?;
    let produce = Op {
        waits: &[],
        signals: &[(contributed, 1)],
        work: Work::Barrier,
        tag: 1,
        ..Default::default()
    };
    let produced = node.submit(queue, &produce).map_err(|e| e.to_string())?;
    let semaphore = device.semaphore(contributed).ok_or("semaphore")?;
    blocking::wait(semaphore, 1, Some(LONG)).map_err(|e| e.to_string())?;
    let mut data = [f64::from(rank), 1.0];
    node.all_reduce_sum(&mut channel, &mut data, &produced.frontier, (reduced, 1))
        .map_err(|e| e.to_string())?;
    let expected = [f64::from(size * (size - 1) / 2), f64::from(size)];
    if data != expected {
        return Err(format!("all-reduce gave {data:?}, not {expected:?}"));
    }
    let step = Op {
        waits: &[(reduced, 1)],
        signals: &[(stepped, 1)],
        work: Work::Barrier,
        tag: 2,
        ..Default::default()
    };
    let receipt = node.submit(queue, &step).map_err(|e| e.to_string())?;
    let entries = receipt.frontier.len();
    if entries != 2 || receipt.frontier.is_tainted() {
        return Err(format!("the step's frontier is {:?}", receipt.frontier));
    }
    if rank == 0 {
        let listed: Vec<String> = receipt
            .frontier
            .iter()
            .map(|point| {
                let axis = point.axis;
                format!(
                    "(machine {} {:?} #{}) = {}",
                    axis.machine(),
                    axis.domain(),
                    axis.ordinal(),
                    point.epoch
                )
            })
            .collect();
        println!(
            "collective frontier: {size} ranks: the step after the all-reduce knows {entries} entries: {}",
            listed.join(", ")
        );
    }
    node.barrier();
    ManuallyDrop::into_inner(node).finish();
    Ok(())
}

//! The instructions of a cross-rank hop's own software — causeway's, not MPI's — counted by
//! callgrind on two Open MPI ranks: what `scripts/hop_instructions.sh` runs, under
//! `mpirun -n 2 valgrind --tool=callgrind --collect-atstart=no`. It is one rank; run outside
//! mpirun it says so and fails. Needs the crate's `hop-probe` feature (the library's hooks on
//! the hop's path, absent from every other build).
//!
//! ## The chain
//!
//! As the `cross_rank/signal_to_dependent_start` bench: one causal chain that alternates
//! between the ranks. Round r is an operation S on rank 0 that signals shared semaphore
//! `there` to r, an operation R on rank 1 that waits on it and signals shared semaphore
//! `back` to r, and an operation D on rank 0, after S in the same queue, that waits on that;
//! S of round r + 1 runs after D of round r. Each rank's device has one worker, which runs
//! its queue process and the node's MPI progress process, so every hop's software runs on
//! that one thread. Both ranks submit a batch of [`BATCH`] rounds ahead (every announcement
//! has arrived before the batch starts, so none is in flight while it runs); rank 0's host
//! thread then signals a local go that the batch's first operation waits on and sleeps until
//! its last. Every operation runs a host function (S and D on rank 0, R on rank 1), which
//! opens and closes the windows below. Each round has two hops: S → R and R → D.
//!
//! ## What is counted
//!
//! Callgrind collects only inside windows, on the worker thread (its collection state is per
//! thread; the client request toggles the calling thread's):
//!
//! - signalling side: from the return of the signalling operation's host function (S, or R)
//!   up to the reached message, encoded in full, about to be handed to rsmpi for `MPI_Send`
//!   (the library's [`Point::SendingReached`]): the operation's retirement up to its signal,
//!   the signal's completion on the exported semaphore (lock, history, timepoints), the watch
//!   callback taking the MPI lock, the export's state and the message's encoding;
//! - receiving side: from the moment the progress process's `MPI_Test` has completed the
//!   receive ([`Point::Received`]) up to the entry of the dependent operation's host function
//!   (R, or D): the receive's bookkeeping (with `MPI_Get_count`, subtracted by the script as
//!   MPI's), the message's decoding, the import's state, the completion of the imported
//!   signal, the wait's timepoint and gate, the woken queue's wake held back and handed to the
//!   worker, the end of the progress drain, the executor switching to the queue process and
//!   the queue stepping to the dependent operation and starting its host function;
//! - the send, apart: from [`Point::SendingReached`] to [`Point::SentReached`]: rsmpi's send
//!   (its rank check calls `MPI_Comm_size`) and `MPI_Send` itself. The script reports
//!   `MPI_Send`'s inclusive instructions per message from it, and adds to the signalling side
//!   what the window holds besides calls into Open MPI's libraries (rsmpi's wrapper, the
//!   library's loop around the send and its sent counter).
//!
//! Each side is measured in a phase of its own — batches in which only that side's windows
//! open — and each phase's counts are dumped apart (`CALLGRIND_DUMP_STATS_AT`, by the host
//! thread once the phase's last batch is done): a window opens at most once per hop, and the
//! dumps say which side they hold. Only rounds in a batch's steady state are measured, the
//! first and last [`EDGE`] of each batch are not (they carry the go and the host's wake-up).
//!
//! ## What is not counted, and why
//!
//! - MPI: `MPI_Test` (the poll that completes the receive), `MPI_Send`, `MPI_Start` (the
//!   receive started again), `MPI_Get_count`: Open MPI's, reported apart (`MPI_Send`) or not.
//! - Waiting: between a reached message's send and the answer, each rank's worker polls MPI
//!   (the progress process's idle drains) as fast as it can. Under callgrind both ranks run
//!   slowly and unevenly, so the polls a hop takes are no property of causeway's software:
//!   no window spans a wait.
//! - The signalling side's work after the send, which is off the hop's path: the rest of the
//!   watch callback (waking the progress process), the signalling operation's retirement and
//!   the queue stepping on to its next operation and going to sleep, the progress process's
//!   next drain re-arming the watch on the next announced value. Per hop, but after the
//!   message has left.
//! - The bracketing itself: the script subtracts the instructions of this example's own
//!   functions (the host functions, the hook) inside the windows. What stays in is the
//!   library's inlined call of the hook at each probe point (a load, a branch, an indirect
//!   call: a few instructions per window), and the device's call of the host function and its
//!   return, which every host function costs.

use std::mem::ManuallyDrop;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

use causeway_core::scope::{Endpoint, Scope};
use causeway_device::{Device, HostCallId, Op, QueueConfig, SemaphoreConfig, SemaphoreId, Work};
use causeway_distributed::probe::{self, Point};
use causeway_distributed::{LinkId, Links, Node};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::{blocking, PoolConfig};

#[path = "../../examples/support/callgrind.rs"]
mod callgrind;

const LONG: Duration = Duration::from_secs(600);

/// Rounds submitted ahead at once.
const BATCH: u64 = 64;
/// Rounds at either end of a batch that run but are not measured.
const EDGE: u64 = 8;
/// Unmeasured batches first (first touch, Open MPI's connection set-up).
const WARM_BATCHES: u64 = 2;
/// Batches per measured phase.
const PHASE_BATCHES: u64 = 8;
/// The phases, in order: the windows each opens, and its dump's name.
const PHASES: [(u8, &std::ffi::CStr); 3] =
    [(SIGNALLING, c"signalling"), (RECEIVING, c"receiving"), (SENDING, c"send")];
/// Batches in all.
const BATCHES: u64 = WARM_BATCHES + PHASES.len() as u64 * PHASE_BATCHES;
/// Windows a phase opens on each rank: one per measured round.
const WINDOWS_PER_PHASE: u64 = PHASE_BATCHES * (BATCH - 2 * EDGE);

/// The worker's window (only the worker thread, which runs every host function and every
/// probe point, touches it).
static WINDOW: AtomicU8 = AtomicU8::new(IDLE);
const IDLE: u8 = 0;
/// Open: the signalling side.
const SIGNALLING: u8 = 1;
/// The next reached message sent opens a send window.
const SEND_ARMED: u8 = 2;
/// Open: rsmpi's send and `MPI_Send`.
const SENDING: u8 = 3;
/// The next receive completed opens a receiving window.
const RECEIVE_ARMED: u8 = 4;
/// Open: the receiving side.
const RECEIVING: u8 = 5;

/// Windows closed per side (signalling, receiving, send), and windows found out of step.
static CLOSED: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
static MISMATCHES: AtomicU64 = AtomicU64::new(0);

/// Rounds run by each host function (S, D, R): the round of its current call.
static CALLS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// The windows round `round` opens: a phase's kind, or `IDLE` (a warm-up batch, or a round at
/// a batch's edge).
fn window_of(round: u64) -> u8 {
    let (batch, k) = ((round - 1) / BATCH, (round - 1) % BATCH);
    if batch < WARM_BATCHES || !(EDGE..BATCH - EDGE).contains(&k) {
        return IDLE;
    }
    PHASES.get(((batch - WARM_BATCHES) / PHASE_BATCHES) as usize).map_or(IDLE, |phase| phase.0)
}

fn mismatch() {
    MISMATCHES.fetch_add(1, Ordering::Relaxed);
}

/// A signalling operation's host function returns (S, or R), in `round`; `next_receipt` is
/// the round of the next reached message this rank receives.
fn signaller_returns(round: u64, next_receipt: u64) {
    if WINDOW.load(Ordering::Relaxed) != IDLE {
        mismatch();
        return;
    }
    if window_of(next_receipt) == RECEIVING {
        WINDOW.store(RECEIVE_ARMED, Ordering::Relaxed);
    }
    match window_of(round) {
        SIGNALLING => {
            WINDOW.store(SIGNALLING, Ordering::Relaxed);
            callgrind::toggle_collect();
        }
        SENDING => WINDOW.store(SEND_ARMED, Ordering::Relaxed),
        _ => {}
    }
}

/// A dependent operation's host function is entered (R, or D), in `round`.
fn dependent_enters(round: u64) {
    match WINDOW.load(Ordering::Relaxed) {
        RECEIVING => {
            callgrind::toggle_collect();
            WINDOW.store(IDLE, Ordering::Relaxed);
            CLOSED[1].fetch_add(1, Ordering::Relaxed);
            if window_of(round) != RECEIVING {
                mismatch();
            }
        }
        IDLE => {}
        _ => {
            // Armed and never opened, or a window of the other side still open.
            WINDOW.store(IDLE, Ordering::Relaxed);
            mismatch();
        }
    }
}

/// The library's probe points (see the module docs).
fn hook(point: Point) {
    match (point, WINDOW.load(Ordering::Relaxed)) {
        (Point::SendingReached, SIGNALLING) => {
            callgrind::toggle_collect();
            WINDOW.store(IDLE, Ordering::Relaxed);
            CLOSED[0].fetch_add(1, Ordering::Relaxed);
        }
        (Point::SendingReached, SEND_ARMED) => {
            WINDOW.store(SENDING, Ordering::Relaxed);
            callgrind::toggle_collect();
        }
        (Point::SentReached, SENDING) => {
            callgrind::toggle_collect();
            WINDOW.store(IDLE, Ordering::Relaxed);
            CLOSED[2].fetch_add(1, Ordering::Relaxed);
        }
        (Point::Received, RECEIVE_ARMED) => {
            WINDOW.store(RECEIVING, Ordering::Relaxed);
            callgrind::toggle_collect();
        }
        _ => {}
    }
}

/// A device of one worker and one queue, four system-wide semaphores (link 0, link 1, rank
/// 0's done, rank 0's go) and the host functions S, D, R.
fn device(
    rank: i32,
) -> (&'static Device, causeway_device::QueueId, Vec<SemaphoreId>, [HostCallId; 3]) {
    let mut builder = Device::builder(PoolConfig::with_workers(1));
    let s = builder.host_call(|_| {
        let round = CALLS[0].fetch_add(1, Ordering::Relaxed) + 1;
        // The next message rank 0 receives: R's reached `back` of this round.
        signaller_returns(round, round);
        Ok(())
    });
    let d = builder.host_call(|_| {
        let round = CALLS[1].fetch_add(1, Ordering::Relaxed) + 1;
        dependent_enters(round);
        Ok(())
    });
    let r = builder.host_call(|_| {
        let round = CALLS[2].fetch_add(1, Ordering::Relaxed) + 1;
        dependent_enters(round);
        // The next message rank 1 receives: S's reached `there` of the next round.
        signaller_returns(round, round + 1);
        Ok(())
    });
    let driver = builder.driver(CpuBackend::new());
    let mut config = QueueConfig::default();
    config.machine = rank as u16;
    config.driver = driver;
    let queue = builder.queue(config);
    let home: Endpoint = builder.endpoint(queue).expect("the queue exists");
    let ids = (0..4)
        .map(|_| {
            let mut config = SemaphoreConfig::new(0, Scope::SystemWide, home);
            config.history = 2 * BATCH as usize;
            builder.semaphore_config(config)
        })
        .collect();
    let device = builder.build().expect("the device builds");
    (Box::leak(Box::new(device)), queue, ids, [s, d, r])
}

/// The phase whose last batch is `batch`, if it is one's last.
fn phase_ending(batch: u64) -> Option<&'static std::ffi::CStr> {
    let measured = batch.checked_sub(WARM_BATCHES)?;
    if (measured + 1) % PHASE_BATCHES != 0 {
        return None;
    }
    PHASES.get((measured / PHASE_BATCHES) as usize).map(|phase| phase.1)
}

fn run(rank: i32) -> Result<(), String> {
    if !probe::set_hook(hook) {
        return Err("a probe hook was installed already".into());
    }
    let (device, queue, semaphores, [s, d, r]) = device(rank);
    let (there, back, done, go) = (semaphores[0], semaphores[1], semaphores[2], semaphores[3]);
    let mut links = Links::new();
    if rank == 0 {
        links.export(LinkId(0), there, &[1]).import(LinkId(1), back, 1);
    } else {
        links.import(LinkId(0), there, 0).export(LinkId(1), back, &[0]);
    }
    let node = ManuallyDrop::new(Node::start(device, &links).map_err(|e| e.to_string())?);
    if node.size() != 2 {
        return Err(format!("run on 2 ranks, not {}", node.size()));
    }
    let submit = |op: &Op<'_>| node.submit(queue, op).map(|_| ()).map_err(|e| e.to_string());
    let mut round = 0u64;
    for batch in 0..BATCHES {
        let last = round + BATCH;
        if rank == 0 {
            let start = [(go, batch + 1)];
            for k in 0..BATCH {
                round += 1;
                let signals = [(there, round)];
                let waits = if k == 0 { &start[..] } else { &[] };
                submit(&Op {
                    waits,
                    signals: &signals,
                    work: Work::Host(s),
                    tag: round,
                    ..Op::default()
                })?;
                let (waits, signals) = ([(back, round)], [(done, round)]);
                submit(&Op {
                    waits: &waits,
                    signals: &signals,
                    work: Work::Host(d),
                    tag: round,
                    ..Op::default()
                })?;
            }
            // Rank 1 has every announcement of the batch and has submitted its operations.
            node.await_announced(LinkId(1), last, LONG).map_err(|e| e.to_string())?;
            let go = device.semaphore(go).ok_or("no go semaphore")?;
            go.signal_external(batch + 1).map_err(|e| format!("go: {e:?}"))?;
            let done = device.semaphore(done).ok_or("no done semaphore")?;
            blocking::wait(done, last, Some(LONG)).map_err(|e| format!("done: {e:?}"))?;
        } else {
            node.await_announced(LinkId(0), last, LONG).map_err(|e| e.to_string())?;
            for _ in 0..BATCH {
                round += 1;
                let (waits, signals) = ([(there, round)], [(back, round)]);
                submit(&Op {
                    waits: &waits,
                    signals: &signals,
                    work: Work::Host(r),
                    tag: round,
                    ..Op::default()
                })?;
            }
            node.wait(LinkId(1), last, LONG).map_err(|e| e.to_string())?;
        }
        if let Some(name) = phase_ending(batch) {
            callgrind::dump_stats_at(name);
        }
    }
    node.barrier();
    ManuallyDrop::into_inner(node).finish();
    let closed = CLOSED.each_ref().map(|count| count.load(Ordering::Relaxed));
    let mismatches = MISMATCHES.load(Ordering::Relaxed);
    // Read by `scripts/hop_instructions.sh`.
    println!(
        "rank {rank} windows: signalling {} receiving {} send {} expected {WINDOWS_PER_PHASE} \
         mismatches {mismatches}",
        closed[0], closed[1], closed[2]
    );
    if closed.iter().any(|&count| count != WINDOWS_PER_PHASE) || mismatches > 0 {
        return Err("the windows did not open and close once per measured hop".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let Some(rank) = std::env::var("OMPI_COMM_WORLD_RANK").ok().and_then(|r| r.parse().ok()) else {
        eprintln!(
            "hop_instructions is one of two MPI ranks: run scripts/hop_instructions.sh (or \
             mpirun -n 2 under callgrind)"
        );
        return ExitCode::FAILURE;
    };
    match run(rank) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("rank {rank}: {why}");
            ExitCode::FAILURE
        }
    }
}

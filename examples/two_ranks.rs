//! Two MPI ranks sharing a semaphore: each rank is a machine running its own device, and a
//! `causeway::distributed::Node` links a semaphore across them — rank 0 exports it, rank 1
//! imports it. Rank 0 submits an operation that signals the semaphore; the node announces the
//! signal to rank 1 *at submission*, with the operation's frontier. Rank 1 waits for that
//! announcement (one message, no round trip), then submits work that waits on the semaphore:
//! its queue runs it once rank 0's value arrives, and its frontier names rank 0's queue — what
//! happened on the other machine is known here.
//!
//! Run (Open MPI; add `--allow-run-as-root` as root):
//! `cargo build --release --features mpi --example two_ranks`, then
//! `mpirun --oversubscribe --bind-to none -n 2 target/release/examples/two_ranks`.
//! Each rank prints its own lines and ends with `rank N: done`; a failed check exits non-zero,
//! and `mpirun` with it.

use std::mem::ManuallyDrop;
use std::process::ExitCode;
use std::time::Duration;

use causeway::axis::Domain;
use causeway::cpu::CpuBackend;
use causeway::device::{Device, Invocation, Op, QueueConfig, Work};
use causeway::distributed::{LinkId, Links, Node};
use causeway::{PoolConfig, Scope};

/// The shared semaphore's name, the same on both ranks.
const SHARED: LinkId = LinkId(0);
const TIMEOUT: Duration = Duration::from_secs(30);

fn run() -> Result<ManuallyDrop<Node>, String> {
    // Open MPI tells each process its rank before MPI starts; the node confirms it below.
    let rank: u16 = std::env::var("OMPI_COMM_WORLD_RANK")
        .ok()
        .and_then(|rank| rank.parse().ok())
        .ok_or("not started by mpirun (OMPI_COMM_WORLD_RANK is not set)")?;

    // Each rank's queue is on machine `rank`, so its axis differs from the other rank's.
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let work = builder.host_call(move |call: &Invocation| {
        println!("rank {rank}: operation {} runs", call.tag);
        Ok(())
    });
    let queue = builder.queue(QueueConfig::on(cpu).machine(rank));
    let home = builder.endpoint(queue).ok_or("the queue has no endpoint")?;
    // System-wide: a semaphore whose values travel to another machine.
    let shared = builder.semaphore(0, Scope::SystemWide, home);
    let done = builder.semaphore(0, Scope::DeviceLocal, home);
    // The node's progress process runs on the device's executor for as long as MPI does.
    let device: &'static Device = Box::leak(Box::new(builder.build().map_err(|e| e.to_string())?));

    let mut links = Links::new();
    match rank {
        0 => links.export(SHARED, shared, &[1]),
        _ => links.import(SHARED, shared, 0),
    };
    // Kept from finalising MPI on an error: finalising waits for every rank, and a rank whose
    // check failed should exit so that mpirun ends the job.
    let node = ManuallyDrop::new(Node::start(device, &links).map_err(|e| e.to_string())?);
    if node.size() != 2 || node.rank() != i32::from(rank) {
        return Err(format!("run with mpirun -n 2 (rank {} of {})", node.rank(), node.size()));
    }

    if rank == 0 {
        let op = Op { signals: &[(shared, 1)], work: Work::Host(work), tag: 1, ..Op::default() };
        let receipt = node.submit(queue, &op).map_err(|e| e.to_string())?;
        println!("rank 0: signalled the shared semaphore to 1 at epoch {}", receipt.point.epoch);
        device.wait(shared, 1, Some(TIMEOUT)).map_err(|e| e.to_string())?;
    } else {
        // Once rank 0's announcement is here, a wait on it imports rank 0's frontier at
        // submission and is queued behind its signal; the value itself follows.
        node.await_announced(SHARED, 1, TIMEOUT).map_err(|e| e.to_string())?;
        let op = Op {
            waits: &[(shared, 1)],
            signals: &[(done, 1)],
            work: Work::Host(work),
            tag: 2,
            ..Op::default()
        };
        let receipt = node.submit(queue, &op).map_err(|e| e.to_string())?;
        device.wait(done, 1, Some(TIMEOUT)).map_err(|e| e.to_string())?;
        let rank_0_epoch = receipt
            .frontier
            .iter()
            .find(|point| point.axis.machine() == 0 && point.axis.domain() == Domain::Queue)
            .map(|point| point.epoch);
        if rank_0_epoch != Some(1) {
            return Err(format!(
                "rank 1's frontier {:?} lacks rank 0's operation",
                receipt.frontier
            ));
        }
        println!("rank 1: waited on rank 0's signal; its frontier holds rank 0's queue at epoch 1");
    }
    // Neither rank leaves before the other has finished with the link.
    node.barrier();
    Ok(node)
}

fn main() -> ExitCode {
    match run() {
        Ok(node) => {
            let rank = node.rank();
            ManuallyDrop::into_inner(node).finish();
            println!("rank {rank}: done");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("two_ranks: {error}");
            ExitCode::FAILURE
        }
    }
}

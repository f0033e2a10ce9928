//! Stream-ordered memory: buffers allocated and freed as queue operations (`Work::Alloca`,
//! `Work::Dealloca`), and a freed block handed to the next allocation that *knows* its death —
//! no fence, no wait — while an allocation that cannot prove it takes fresh memory instead.
//!
//! Three CPU queues share a pool of 2 MiB:
//! - `producer` allocates buffer 0 (1 MiB), uses it, frees it and signals `freed`;
//! - `independent` allocates buffer 2 (1 MiB) with no wait: the block buffer 0 will free is
//!   dead only after the producer's dealloca, which this queue knows nothing of, so the pool
//!   declines it and commits a fresh block;
//! - `consumer` allocates buffer 1 (1 MiB) after waiting on `freed`: its frontier holds the
//!   dealloca's point (the block's death frontier), so it reuses buffer 0's block, its commit
//!   ordered after the decommit by that wait alone.
//!
//! Which block an alloca gets is decided at submission, from causality alone, so the producer
//! is held behind a gate the host opens only after everything is submitted: the decisions
//! never depend on how fast the producer ran. On CPU queues the pool only accounts for the
//! blocks; on Vulkan and CUDA queues each block is device memory the driver keeps for reuse.
//!
//! Run: `cargo run --release --example buffer_reuse`

use std::process::ExitCode;
use std::time::Duration;

use causeway::cpu::CpuBackend;
use causeway::device::{BufferId, Device, Op, QueueConfig, QueueId, SemaphoreId, Work};
use causeway::{PoolConfig, Scope};

const MIB: u64 = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(30);

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    // Three buffer names sharing 2 MiB: three 1 MiB buffers fit only because one block is
    // reused once its first user has freed it.
    builder.memory(3, 2 * MIB);
    let producer = builder.queue(QueueConfig::on(cpu).name("producer"));
    let independent = builder.queue(QueueConfig::on(cpu).name("independent"));
    let consumer = builder.queue(QueueConfig::on(cpu).name("consumer"));
    let home = builder.endpoint(producer).ok_or("the queue has no endpoint")?;
    let [gate, freed, independent_done, consumer_done] =
        [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build()?;

    let submit = |queue: QueueId,
                  tag: u64,
                  waits: &[(SemaphoreId, u64)],
                  signals: &[(SemaphoreId, u64)],
                  work| {
        device.submit(queue, &Op { waits, signals, work, tag, ..Default::default() })
    };
    let alloca = |buffer: u32| Work::Alloca { buffer: BufferId(buffer), bytes: MIB };
    // Stands in for a kernel that writes and reads the buffer.
    let use_buffer = Work::Spin(Duration::from_micros(200));

    // The producer: held at the gate, then alloca, use, dealloca → `freed`.
    submit(producer, 1, &[(gate, 1)], &[], Work::Barrier)?;
    submit(producer, 2, &[], &[], alloca(0))?;
    submit(producer, 3, &[], &[], use_buffer)?;
    submit(producer, 4, &[], &[(freed, 1)], Work::Dealloca(BufferId(0)))?;
    println!("producer: buffer 0 allocated, used and freed (held behind the gate)");

    // No wait on `freed`: buffer 0's block is dead only after the producer's dealloca, which
    // this queue cannot know about, so the pool gives it a fresh block.
    let before = device.memory_stats();
    submit(independent, 11, &[], &[], alloca(2))?;
    submit(independent, 12, &[], &[], use_buffer)?;
    submit(independent, 13, &[], &[(independent_done, 1)], Work::Dealloca(BufferId(2)))?;
    let declined = device.memory_stats().reuse_declined - before.reuse_declined;
    println!("independent: buffer 2 without a wait: {declined} dead block declined, fresh memory");

    // The wait on `freed` imports the producer's frontier, which holds the dealloca: the
    // block's death is known, so the alloca takes it, with no fence of its own.
    let before = device.memory_stats();
    submit(consumer, 21, &[(freed, 1)], &[], alloca(1))?;
    submit(consumer, 22, &[], &[], use_buffer)?;
    submit(consumer, 23, &[], &[(consumer_done, 1)], Work::Dealloca(BufferId(1)))?;
    let reused = device.memory_stats().reused - before.reused;
    println!(
        "consumer: buffer 1 after waiting on `freed`: {reused} block reused by death frontier"
    );

    device.semaphore(gate).ok_or("the gate exists")?.signal_external(1)?;
    device.wait(independent_done, 1, Some(TIMEOUT))?;
    device.wait(consumer_done, 1, Some(TIMEOUT))?;

    let memory = device.stats().memory;
    println!(
        "memory: {} commits, {} reused, {} declined, {} waits for quota, peak {} KiB of {} KiB",
        memory.commits,
        memory.reused,
        memory.reuse_declined,
        memory.over_quota_waits,
        memory.peak_committed / 1024,
        2 * MIB / 1024,
    );
    // Three 1 MiB buffers, one block reused: never more than two committed at once, so the
    // 2 MiB quota never made a commit wait.
    let expected = (3, 1, 1, 0);
    let seen = (memory.commits, memory.reused, memory.reuse_declined, memory.over_quota_waits);
    if (declined, reused) != (1, 1) || seen != expected || memory.peak_committed > 2 * MIB {
        return Err(
            format!("expected (commits, reused, declined, quota waits) {expected:?}").into()
        );
    }
    println!("one block served two buffers: reuse by death frontier checked");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("buffer_reuse: {error}");
            ExitCode::FAILURE
        }
    }
}

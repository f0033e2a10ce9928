//! The native half of stream-ordered memory (`Backend::memory`): the layer tells the driver that
//! owns a block to back it when its alloca runs, to let it go when its dealloca runs (keeping it
//! while the reuse table may hand it on), and to free it when another driver's alloca reuses it;
//! a driver that cannot back an alloca fails it, and what it signals, with its failure. A
//! dealloca that fails lets its block go as one that ran would; an alloca that reused a kept
//! block and fails has that memory released, so failing and reallocating leaks nothing.
#![cfg(not(loom))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, BlockId, BufferId, Device, DeviceContext, DriverError, Issue,
    Issued, Kernel, MemoryOp, NativeBlocks, NativeMemory, Op, OpStatus, QueueConfig, QueueId,
    SemaphoreConfig, Work,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const LONG: Duration = Duration::from_secs(60);

/// A driver whose memory is a log of what it was asked to do; it cannot back more than
/// `largest` bytes at once. With `blocks`, it also keeps real [`NativeBlocks`] of plain byte
/// counts, shared with the test.
struct LoggingDriver {
    name: &'static str,
    largest: u64,
    log: Arc<Mutex<Vec<MemoryOp>>>,
    blocks: Option<Arc<NativeBlocks<Bytes>>>,
}

impl LoggingDriver {
    fn new(name: &'static str, largest: u64) -> (LoggingDriver, Arc<Mutex<Vec<MemoryOp>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        (LoggingDriver { name, largest, log: Arc::clone(&log), blocks: None }, log)
    }

    /// A driver backing every block with `blocks`.
    fn with_blocks(blocks: &Arc<NativeBlocks<Bytes>>) -> LoggingDriver {
        let (driver, _) = LoggingDriver::new("blocks", u64::MAX);
        LoggingDriver { blocks: Some(Arc::clone(blocks)), ..driver }
    }
}

impl Backend for LoggingDriver {
    type Queue = ();

    fn name(&self) -> &'static str {
        self.name
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(true).with_timed_kernels()
    }

    fn open_queue(&mut self, _: QueueId, _: &QueueConfig) -> Result<(), DriverError> {
        Ok(())
    }

    fn start(&'static self, _: DeviceContext) {}

    fn issue(&'static self, _: &'static (), issue: &mut Issue<'_>) -> Issued {
        issue.run_here(|| OpStatus::Ok)
    }

    fn poll(&'static self, _: &'static (), _: u64, _: Kernel) -> Option<OpStatus> {
        Some(OpStatus::Ok)
    }

    fn memory(&self, op: MemoryOp) -> Result<(), Failure> {
        self.log.lock().unwrap().push(op);
        match op {
            MemoryOp::Commit { bytes, .. } if bytes > self.largest => Err(Failure::OutOfMemory),
            _ => self
                .blocks
                .as_ref()
                .map_or(Ok(()), |blocks| blocks.apply(op, |bytes| Ok(Bytes(bytes)))),
        }
    }

    fn is_running(&self, _: &(), _: Kernel, _: bool) -> bool {
        false
    }

    fn stop(&self, _: std::time::Instant) -> bool {
        true
    }
}

fn alloca(buffer: u32, bytes: u64) -> Work {
    Work::Alloca { buffer: BufferId(buffer), bytes }
}

fn op(work: Work, signals: &[(causeway_device::SemaphoreId, u64)]) -> Op<'_> {
    Op { waits: &[], signals, work, tag: 0, ..Default::default() }
}

fn block_of(op: &MemoryOp) -> BlockId {
    match *op {
        MemoryOp::Commit { block, .. }
        | MemoryOp::Decommit { block, .. }
        | MemoryOp::Release { block } => block,
        _ => panic!("an operation this test does not know: {op:?}"),
    }
}

#[test]
fn a_block_is_backed_kept_for_reuse_and_backed_again_by_the_same_driver() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let (driver, log) = LoggingDriver::new("logging", u64::MAX);
    let driver = builder.driver(driver);
    let queue = builder.queue(QueueConfig::on(driver));
    let done = builder.semaphore(0, Scope::DeviceLocal, builder.endpoint(queue).unwrap());
    builder.memory(1, 1 << 20);
    let device = builder.build().unwrap();
    const ROUNDS: u64 = 1000;
    for round in 1..=ROUNDS {
        device.submit(queue, &op(alloca(0, 4096), &[])).unwrap();
        device.submit(queue, &op(Work::Dealloca(BufferId(0)), &[(done, round)])).unwrap();
    }
    assert_eq!(wait(device.semaphore(done).unwrap(), ROUNDS, Some(LONG)), Ok(ROUNDS));
    // Each alloca knows the dealloca before it (one queue, in order): one block, reused.
    assert_eq!(device.memory_stats().reused, ROUNDS - 1);
    let log = log.lock().unwrap();
    assert_eq!(log.len() as u64, 2 * ROUNDS);
    let block = block_of(&log[0]);
    for pair in log.chunks(2) {
        assert_eq!(
            pair,
            [MemoryOp::Commit { block, bytes: 4096 }, MemoryOp::Decommit { block, keep: true }]
        );
    }
}

#[test]
fn a_driver_that_cannot_back_an_alloca_fails_it_and_what_waits_on_it_on_another_driver() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let (small, small_log) = LoggingDriver::new("small", 1024);
    let (other, other_log) = LoggingDriver::new("other", u64::MAX);
    let (small, other) = (builder.driver(small), builder.driver(other));
    let (allocating, waiting) =
        (builder.queue(QueueConfig::on(small)), builder.queue(QueueConfig::on(other)));
    let home = builder.endpoint(allocating).unwrap();
    let [allocated, downstream, released] =
        [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    builder.memory(1, 1 << 20);
    let device = builder.build().unwrap();

    device.submit(allocating, &op(alloca(0, 4096), &[(allocated, 1)])).unwrap();
    let uses = Op {
        waits: &[(allocated, 1)],
        signals: &[(downstream, 1)],
        work: Work::Spin(Duration::ZERO),
        tag: 1,
        ..Default::default()
    };
    device.submit(waiting, &uses).unwrap();
    device.submit(allocating, &op(Work::Dealloca(BufferId(0)), &[(released, 1)])).unwrap();

    let out_of_memory = Err(HostWaitError::Failed(Failure::OutOfMemory));
    assert_eq!(wait(device.semaphore(allocated).unwrap(), 1, Some(LONG)), out_of_memory);
    assert_eq!(wait(device.semaphore(downstream).unwrap(), 1, Some(LONG)), out_of_memory);
    // The dealloca has nothing to give back; it succeeds and the quota is whole again.
    assert_eq!(wait(device.semaphore(released).unwrap(), 1, Some(LONG)), Ok(1));
    assert_eq!(device.committed_bytes(), 0);
    assert!(matches!(small_log.lock().unwrap()[..], [MemoryOp::Commit { bytes: 4096, .. }]));
    assert!(other_log.lock().unwrap().is_empty());
}

#[test]
fn a_block_reused_on_another_driver_is_released_by_the_driver_it_died_on() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let (first, first_log) = LoggingDriver::new("first", u64::MAX);
    let (second, second_log) = LoggingDriver::new("second", u64::MAX);
    let (first, second) = (builder.driver(first), builder.driver(second));
    let (on_first, on_second) =
        (builder.queue(QueueConfig::on(first)), builder.queue(QueueConfig::on(second)));
    let freed = builder.semaphore(0, Scope::DeviceLocal, builder.endpoint(on_first).unwrap());
    builder.memory(2, 1 << 20);
    let device = builder.build().unwrap();

    device.submit(on_first, &op(alloca(0, 256), &[])).unwrap();
    device.submit(on_first, &op(Work::Dealloca(BufferId(0)), &[(freed, 1)])).unwrap();
    // The wait puts the dealloca in the alloca's past: it may take the dead block.
    let reuse = Op {
        waits: &[(freed, 1)],
        signals: &[],
        work: alloca(1, 128),
        tag: 2,
        ..Default::default()
    };
    device.submit(on_second, &reuse).unwrap();
    device.submit(on_second, &op(Work::Dealloca(BufferId(1)), &[(freed, 2)])).unwrap();
    assert_eq!(wait(device.semaphore(freed).unwrap(), 2, Some(LONG)), Ok(2));
    assert_eq!(device.memory_stats().reused, 1);

    let first_log = first_log.lock().unwrap();
    let block = block_of(&first_log[0]);
    assert_eq!(
        first_log[..],
        [
            MemoryOp::Commit { block, bytes: 256 },
            MemoryOp::Decommit { block, keep: true },
            MemoryOp::Release { block },
        ]
    );
    assert_eq!(
        second_log.lock().unwrap()[..],
        [MemoryOp::Commit { block, bytes: 128 }, MemoryOp::Decommit { block, keep: true },]
    );
}

/// A block's native memory in the blocks test: its size alone.
struct Bytes(u64);

impl NativeMemory for Bytes {
    fn size(&self) -> u64 {
        self.0
    }
}

#[test]
fn a_failed_dealloca_lets_its_block_go_and_a_failed_reusing_alloca_releases_the_kept_memory() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let (driver, log) = LoggingDriver::new("logging", u64::MAX);
    let driver = builder.driver(driver);
    let queue = builder.queue(QueueConfig::on(driver));
    let home = builder.endpoint(queue).unwrap();
    let [first_gate, second_gate, freed, done] =
        [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    builder.memory(2, 1 << 20);
    let device = builder.build().unwrap();
    let failure = Failure::Application(3);
    let failed = Err(HostWaitError::Failed(failure));

    device.submit(queue, &op(alloca(0, 256), &[])).unwrap();
    let after_gate = [(first_gate, 1)];
    let dealloca =
        Op { waits: &after_gate, signals: &[(freed, 1)], ..op(Work::Dealloca(BufferId(0)), &[]) };
    device.submit(queue, &dealloca).unwrap();
    device.semaphore(first_gate).unwrap().fail(failure);
    assert_eq!(wait(device.semaphore(freed).unwrap(), 1, Some(LONG)), failed);
    // In order after the failed dealloca, which ended after every use: its block, reused.
    device.submit(queue, &op(alloca(1, 128), &[])).unwrap();
    device.submit(queue, &op(Work::Dealloca(BufferId(1)), &[])).unwrap();
    // Reuses it too, then fails: the kept memory is let go, and its dealloca gives back nothing.
    let after_gate = [(second_gate, 1)];
    device.submit(queue, &Op { waits: &after_gate, ..op(alloca(0, 64), &[]) }).unwrap();
    device.semaphore(second_gate).unwrap().fail(failure);
    device.submit(queue, &op(Work::Dealloca(BufferId(0)), &[(done, 1)])).unwrap();
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, Some(LONG)), Ok(1));

    assert_eq!(device.memory_stats().reused, 2);
    assert_eq!(device.committed_bytes(), 0);
    let log = log.lock().unwrap();
    let block = block_of(&log[0]);
    assert_eq!(
        log[..],
        [
            MemoryOp::Commit { block, bytes: 256 },
            MemoryOp::Decommit { block, keep: true },
            MemoryOp::Commit { block, bytes: 128 },
            MemoryOp::Decommit { block, keep: true },
            MemoryOp::Release { block },
        ]
    );
}

/// Iterations of the native soak; `CAUSEWAY_MEMORY_SOAK` overrides.
fn soak_iterations() -> u64 {
    std::env::var("CAUSEWAY_MEMORY_SOAK").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000)
}

#[test]
fn failing_deallocas_and_reusing_allocas_leak_no_native_memory() {
    let blocks = Arc::new(NativeBlocks::new());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let driver = builder.driver(LoggingDriver::with_blocks(&blocks));
    let mut config = QueueConfig::on(driver);
    config.capacity = 8;
    let queue = builder.queue(config);
    let home = builder.endpoint(queue).unwrap();
    let done = builder.semaphore(0, Scope::DeviceLocal, home);
    const QUOTA: u64 = 4096;
    builder.memory(1, QUOTA);
    builder.allocation_records(2);
    builder.semaphore_pool(32, SemaphoreConfig::new(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    let submit = |op: &Op<'_>| {
        device.submit_timeout(queue, op, LONG).expect("room frees up: nothing leaked");
    };
    let failure = Failure::Application(5);
    let mut committed = 0;
    for round in 0..soak_iterations() {
        let gate = device.create_semaphore_timeout(0, LONG).expect("a pooled semaphore frees up");
        let after_gate = [(gate, 1)];
        match round % 3 {
            // The dealloca fails: its block is kept for the next alloca.
            0 => {
                submit(&op(alloca(0, QUOTA), &[]));
                submit(&Op { waits: &after_gate, ..op(Work::Dealloca(BufferId(0)), &[]) });
                device.semaphore(gate).unwrap().fail(failure);
                committed += 1;
            }
            // The alloca reuses the kept block and fails: the kept memory is released.
            1 => {
                submit(&Op { waits: &after_gate, ..op(alloca(0, QUOTA), &[]) });
                device.semaphore(gate).unwrap().fail(failure);
                submit(&op(Work::Dealloca(BufferId(0)), &[]));
            }
            // The dealloca is doomed at submission.
            _ => {
                device.semaphore(gate).unwrap().fail(failure);
                submit(&op(alloca(0, QUOTA), &[]));
                submit(&Op { waits: &after_gate, ..op(Work::Dealloca(BufferId(0)), &[]) });
                committed += 1;
            }
        }
        device.destroy_semaphore(gate).unwrap();
    }
    submit(&op(alloca(0, QUOTA), &[]));
    submit(&op(Work::Dealloca(BufferId(0)), &[(done, 1)]));
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, Some(LONG)), Ok(1));
    assert_eq!(device.committed_bytes(), 0);
    assert_eq!(device.memory_stats().commits, committed + 1);
    // The last dealloca's block, kept for reuse, is all the driver holds.
    assert_eq!(blocks.len(), 1);
}

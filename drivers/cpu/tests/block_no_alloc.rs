//! Executing a recorded command buffer allocates nothing after warm-up: rearming, resetting,
//! submitting, claiming and running tiles, opening regions, finishing (hook included), and
//! the cancelled path, counted across every thread by a wrapping global allocator.
//!
//! One test only, on purpose: the count covers every thread, so a second test running beside
//! this one would allocate inside the measured window.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{Class, Process, SpinPolicy};
use causeway_core::Failure;
use causeway_driver_cpu::block::{BlockProcessor, CommandBuffer};
use causeway_runtime::{CpuPool, PoolConfig};

#[path = "../../../tests/support/mod.rs"]
mod support;

use support::ALLOCATIONS;

const WORKERS: usize = 2;
const WARM_UP: usize = 200;
const EXECUTIONS: usize = 2_000;
const DEADLINE: Duration = Duration::from_secs(30);

/// Per-tile work that touches memory, so tiles of one region really overlap.
static CELLS: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];
static FINISHED: AtomicU32 = AtomicU32::new(0);
static CANCELLED: AtomicU32 = AtomicU32::new(0);

fn bump(tile: u32) {
    CELLS[tile as usize % CELLS.len()].fetch_add(1, Ordering::Relaxed);
}

fn hook(outcome: Result<(), Failure>) {
    match outcome {
        Ok(()) => FINISHED.fetch_add(1, Ordering::Relaxed),
        Err(_) => CANCELLED.fetch_add(1, Ordering::Relaxed),
    };
}

/// One execution from rearming to completion; every fifth is cancelled before it runs.
fn execute(
    pool: &CpuPool,
    processor: &BlockProcessor<'_>,
    process: &'static Process<'static>,
    index: usize,
) {
    if process.is_completed() {
        process.rearm().expect("a completed process rearms");
        processor.reset().expect("a finished processor resets");
    }
    let executor = pool.executor();
    if index % 5 == 4 {
        executor.hold(process).expect("a fresh process can be held");
        executor.submit(process).expect("a fresh process submits");
        executor.cancel(process);
        executor.release(process).expect("the process is held");
    } else {
        executor.submit(process).expect("a fresh process submits");
    }
    let deadline = Instant::now() + DEADLINE;
    while !process.is_completed() {
        assert!(Instant::now() < deadline, "execution {index} did not complete");
        thread::yield_now();
    }
}

#[test]
fn executing_a_recorded_buffer_allocates_nothing_after_warm_up() {
    static KERNEL: fn(u32) = bump;
    static HOOK: fn(Result<(), Failure>) = hook;
    let buffer: &'static CommandBuffer<'static> = Box::leak(Box::new(
        CommandBuffer::builder()
            .dispatch(64, &KERNEL)
            .dispatch(1, &KERNEL)
            .dispatch_batched(9, 1, &KERNEL)
            .dispatch(300, &KERNEL)
            .build()
            .expect("record the buffer"),
    ));
    let processor: &'static BlockProcessor<'static> = Box::leak(Box::new(
        BlockProcessor::new(buffer, WORKERS).expect("a processor").with_finish_hook(&HOOK),
    ));
    let process: &'static Process<'static> =
        Box::leak(Box::new(Process::new(processor, Class::Compute)));
    // Short spins: workers park and are woken by futex throughout the measured window.
    let mut config = PoolConfig::with_workers(WORKERS);
    config.spin = SpinPolicy::Fixed(8);
    let pool = CpuPool::start(config).expect("start the pool");
    for index in 0..WARM_UP {
        execute(&pool, processor, process, index);
    }

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    assert!(before > 0, "the counting allocator saw the pool start: it is installed");
    for index in 0..EXECUTIONS {
        execute(&pool, processor, process, index);
    }
    // Let the workers go idle and park, so allocations on that path are counted too.
    thread::sleep(Duration::from_millis(10));
    let after = ALLOCATIONS.load(Ordering::SeqCst);

    assert_eq!(after - before, 0, "allocations during {EXECUTIONS} executions");
    let runs = (WARM_UP + EXECUTIONS) as u32;
    assert_eq!(FINISHED.load(Ordering::Relaxed) + CANCELLED.load(Ordering::Relaxed), runs);
    assert_eq!(CANCELLED.load(Ordering::Relaxed), runs / 5);
    let tiles: u32 = CELLS.iter().map(|cell| cell.load(Ordering::Relaxed)).sum();
    assert_eq!(tiles, FINISHED.load(Ordering::Relaxed) * 374, "every tile of every run");
    assert_eq!(pool.shutdown(), 0, "no worker panicked");
}

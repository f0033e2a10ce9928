//! A streaming process allocates nothing per operation: pushing (with the wake of a sleeping
//! stream), draining, running and going back to sleep, counted across every thread of the
//! process by a wrapping global allocator.
//!
//! One test only, on purpose: the count covers every thread, so a second test running beside
//! this one would allocate inside the measured window. Starting the pool and its threads
//! happens before the first snapshot.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{Class, Drain, DrainContext, Drained, Process, SpinPolicy};
use causeway_runtime::{CpuPool, DirectOp, PoolConfig, Producer, Stream};

#[path = "../../tests/support/mod.rs"]
mod support;

use support::ALLOCATIONS;

/// Records which workers drained it: warm-up lasts until every worker thread has run (a thread
/// that starts late allocates its own bookkeeping inside the measured window).
struct Probe {
    workers_seen: AtomicU32,
}

impl Drain for Probe {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        self.workers_seen.fetch_or(1 << cx.worker(), Ordering::Relaxed);
        Drained::Done(Ok(()))
    }
}

/// Operations per burst; between bursts the stream runs dry and sleeps, so every burst's first
/// push wakes it.
const BURST: u64 = 16;

/// Measured bursts.
const BURSTS: u64 = 2_000;

/// One burst: push `BURST` operations (each adding its index to `sum`), then wait until all ran.
fn burst<'o>(producer: &Producer<'_, '_, DirectOp<'o>, 64>, sum: &'o AtomicU64) {
    let target = sum.load(Ordering::SeqCst) + BURST * (BURST + 1) / 2;
    for index in 1..=BURST {
        let add = move || {
            sum.fetch_add(index, Ordering::SeqCst);
        };
        let Ok(op) = DirectOp::new(add) else { panic!("two words fit inline") };
        assert!(producer.push(op).is_ok(), "64 slots hold a burst of 16");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while sum.load(Ordering::SeqCst) != target {
        assert!(Instant::now() < deadline, "a burst did not run within 30 s");
        thread::yield_now();
    }
}

#[test]
fn pushing_waking_and_running_operations_allocates_nothing() {
    let sum = AtomicU64::new(0);
    let stream: Stream<DirectOp<'_>, 64> = Stream::new();
    let process = Process::new(&stream, Class::Compute);
    let probe = Probe { workers_seen: AtomicU32::new(0) };
    let probing = Process::new(&probe, Class::Immediate);
    // Short spins: workers park between bursts and are woken through the futex.
    let mut config = PoolConfig::with_workers(2);
    config.spin = SpinPolicy::Fixed(8);
    let warm_up = CpuPool::scope(config, |executor| {
        let producer = stream.start(executor, &process).expect("a fresh process starts");
        let mut warm_up = 0;
        while warm_up < 200 || probe.workers_seen.load(Ordering::Relaxed) != 0b11 {
            burst(&producer, &sum);
            if probing.is_completed() {
                probing.rearm().expect("a completed probe rearms");
            }
            // A parked pool wakes its lowest idle worker first: probe between bursts until
            // both have run something.
            if executor.submit(&probing).is_ok() {
                while !probing.is_completed() {
                    thread::yield_now();
                }
            }
            warm_up += 1;
        }
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        assert!(before > 0, "the counting allocator saw the pool start: it is installed");
        for round in 0..BURSTS {
            if round % 100 == 0 {
                // Idle long enough for the workers to park: the next push wakes one by futex.
                thread::sleep(Duration::from_millis(1));
            }
            burst(&producer, &sum);
        }
        // Let the stream go to sleep and the workers park, so those paths are counted too.
        thread::sleep(Duration::from_millis(10));
        let after = ALLOCATIONS.load(Ordering::SeqCst);
        assert_eq!(after - before, 0, "allocations during {BURSTS} bursts of {BURST} operations");
        producer.close();
        while !process.is_completed() {
            thread::yield_now();
        }
        warm_up
    })
    .expect("start the pool");
    assert_eq!(sum.load(Ordering::SeqCst), (warm_up + BURSTS) * BURST * (BURST + 1) / 2);
}

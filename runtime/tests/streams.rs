//! Streaming processes on a real pool: concurrent producers with exactly-once execution, bursts
//! that each wake a sleeping stream, a full ring handing operations back, closing, cancellation,
//! a panicking operation, and the wake budget.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{Class, Process, SpinPolicy};
use causeway_core::Failure;
use causeway_runtime::{
    CpuPool, DirectOp, Operation as _, PoolConfig, Producer, PushError, Stream,
};

fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not reached in 30 s");
        thread::yield_now();
    }
}

fn inline<'a>(f: impl FnOnce() + Send + 'a) -> DirectOp<'a> {
    match DirectOp::new(f) {
        Ok(op) => op,
        Err(_) => panic!("the test closures fit inline"),
    }
}

#[test]
fn concurrent_producers_run_every_operation_exactly_once() {
    const PRODUCERS: usize = 4;
    const PER_PRODUCER: usize = if cfg!(miri) { 500 } else { 25_000 };
    let runs: Vec<AtomicU32> = (0..PRODUCERS * PER_PRODUCER).map(|_| AtomicU32::new(0)).collect();
    let full = AtomicUsize::new(0);
    let stream: Stream<DirectOp<'_>, 256> = Stream::new();
    let process = Process::new(&stream, Class::Compute);
    CpuPool::scope(PoolConfig::with_workers(3), |executor| {
        let producer = stream.start(executor, &process).unwrap();
        thread::scope(|scope| {
            for share in runs.chunks(PER_PRODUCER) {
                let full = &full;
                scope.spawn(move || {
                    for run in share {
                        let mut op = inline(move || {
                            run.fetch_add(1, Ordering::Relaxed);
                        });
                        loop {
                            match producer.push(op) {
                                Ok(()) => break,
                                Err(PushError::Full(back)) => {
                                    full.fetch_add(1, Ordering::Relaxed);
                                    op = back;
                                    thread::yield_now();
                                }
                                Err(refused) => panic!("stream closed early: {refused}"),
                            }
                        }
                    }
                });
            }
        });
        producer.close();
        wait_until("the stream process completed", || process.is_completed());
        assert_eq!(process.failure(), None);
    })
    .unwrap();
    let wrong: Vec<usize> =
        (0..runs.len()).filter(|&i| runs[i].load(Ordering::Relaxed) != 1).collect();
    assert!(
        wrong.is_empty(),
        "{} operations ran other than once, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(8)]
    );
    println!("pushes refused as full and retried: {}", full.load(Ordering::Relaxed));
}

#[test]
fn a_full_ring_hands_the_operation_back() {
    let ran = AtomicU32::new(0);
    let stream: Stream<DirectOp<'_>, 4> = Stream::new();
    let process = Process::new(&stream, Class::Compute);
    CpuPool::scope(PoolConfig::with_workers(2), |executor| {
        // Held: the process cannot run, so the ring fills.
        executor.hold(&process).unwrap();
        let producer = stream.start(executor, &process).unwrap();
        let count = || {
            ran.fetch_add(1, Ordering::Relaxed);
        };
        for _ in 0..4 {
            producer.push(inline(count)).unwrap();
        }
        assert_eq!(stream.queued(), 4);
        let refused = producer.push(inline(|| {
            ran.fetch_add(100, Ordering::Relaxed);
        }));
        let Err(PushError::Full(back)) = refused else { panic!("a fifth push must be refused") };
        assert_eq!(stream.queued(), 4, "a refused push leaves no trace");
        back.run();
        assert_eq!(
            ran.load(Ordering::Relaxed),
            100,
            "the refused operation is the one handed back"
        );
        executor.release(&process).unwrap();
        wait_until("the four queued ran", || ran.load(Ordering::Relaxed) == 104);
        producer.close();
        wait_until("closed and drained", || process.is_completed());
    })
    .unwrap();
}

#[test]
fn closing_runs_what_was_accepted_then_refuses_more() {
    let ran = AtomicU32::new(0);
    let stream: Stream<DirectOp<'_>, 64> = Stream::new();
    let process = Process::new(&stream, Class::Compute);
    CpuPool::scope(PoolConfig::with_workers(2), |executor| {
        executor.hold(&process).unwrap();
        let producer = stream.start(executor, &process).unwrap();
        for _ in 0..10 {
            let count = || {
                ran.fetch_add(1, Ordering::Relaxed);
            };
            producer.push(inline(count)).unwrap();
        }
        producer.close();
        assert!(stream.is_closed());
        let after = producer.push(inline(|| unreachable!("pushed after close")));
        assert!(matches!(after, Err(PushError::Closed(_))));
        executor.release(&process).unwrap();
        wait_until("completed", || process.is_completed());
        assert_eq!(process.failure(), None);
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 10);
}

/// Pushes `count` operations that each count one run in `ran` and hold a clone of `captured`
/// until they run or are dropped.
fn push_counted<'r>(
    producer: &Producer<'_, '_, DirectOp<'r>, 16>,
    count: usize,
    captured: &Arc<()>,
    ran: &'r AtomicU32,
) {
    for _ in 0..count {
        let keep = Arc::clone(captured);
        producer
            .push(inline(move || {
                drop(keep);
                ran.fetch_add(1, Ordering::Relaxed);
            }))
            .unwrap();
    }
}

#[test]
fn cancelling_drops_queued_operations_without_running_them() {
    let captured = Arc::new(());
    let ran = AtomicU32::new(0);
    let stream: Stream<DirectOp<'_>, 16> = Stream::new();
    let process = Process::new(&stream, Class::Compute);
    CpuPool::scope(PoolConfig::with_workers(2), |executor| {
        executor.hold(&process).unwrap();
        let producer = stream.start(executor, &process).unwrap();
        push_counted(&producer, 8, &captured, &ran);
        assert_eq!(Arc::strong_count(&captured), 9);
        executor.cancel(&process);
        executor.release(&process).unwrap();
        wait_until("cancelled", || process.is_completed());
        assert!(matches!(producer.push(inline(|| ())), Err(PushError::Closed(_))));
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 0, "cancelled operations never run");
    assert_eq!(Arc::strong_count(&captured), 1, "their captures were dropped");
}

#[test]
fn a_panicking_operation_fails_the_stream_and_the_worker_lives_on() {
    let captured = Arc::new(());
    let ran = AtomicU32::new(0);
    let stream: Stream<DirectOp<'_>, 16> = Stream::new();
    let process = Process::new(&stream, Class::Compute);
    let after: Stream<DirectOp<'_>, 16> = Stream::new();
    let after_process = Process::new(&after, Class::Compute);
    // One worker, so the queued operations are popped in order: the panic comes first.
    CpuPool::scope(PoolConfig::with_workers(1), |executor| {
        executor.hold(&process).unwrap();
        let producer = stream.start(executor, &process).unwrap();
        producer
            .push(inline(|| panic!("a stream operation panics (the test expects this)")))
            .unwrap();
        push_counted(&producer, 8, &captured, &ran);
        executor.release(&process).unwrap();
        wait_until("the failed stream completes", || process.is_completed());
        assert_eq!(process.failure(), Some(Failure::PANICKED));
        assert!(matches!(producer.push(inline(|| ())), Err(PushError::Closed(_))));

        // The worker that ran the panic drains the next stream.
        let producer = after.start(executor, &after_process).unwrap();
        let ran = &ran;
        producer
            .push(inline(move || {
                ran.fetch_add(100, Ordering::Relaxed);
            }))
            .unwrap();
        producer.close();
        wait_until("the next stream completes", || after_process.is_completed());
        assert_eq!(after_process.failure(), None);
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 100, "nothing queued behind the panic ran");
    assert_eq!(Arc::strong_count(&captured), 1, "its captures were dropped");
}

#[test]
fn the_wake_budget_follows_the_queue_up_to_the_worker_count() {
    const WORKERS: usize = 3;
    let mut most = 0;
    let stream: Stream<DirectOp<'_>, 128> = Stream::new();
    let process = Process::new(&stream, Class::Compute);
    CpuPool::scope(PoolConfig::with_workers(WORKERS), |executor| {
        executor.hold(&process).unwrap();
        let producer = stream.start(executor, &process).unwrap();
        for _ in 0..100 {
            // Slow enough (about 150 ms in all) for this thread to watch the budget while the
            // queue drains, even with every core busy.
            producer.push(inline(|| thread::sleep(Duration::from_millis(5)))).unwrap();
        }
        assert_eq!(process.wake_budget(), 1, "no drain has run yet");
        executor.release(&process).unwrap();
        while stream.queued() > 0 && most < WORKERS as u32 {
            most = most.max(process.wake_budget());
            thread::yield_now();
        }
        wait_until("drained", || stream.queued() == 0);
        producer.close();
        wait_until("completed", || process.is_completed());
    })
    .unwrap();
    // After the first batch of 32 the budget was min(68 queued, 3 workers).
    assert_eq!(most, WORKERS as u32);
}

#[test]
fn bursts_after_the_stream_fell_asleep_all_run_before_any_close() {
    // Each round, two producers push a burst at once and the test waits for every operation of
    // it to have run *before* the next round, with the stream open: a lost wake-up leaves a
    // burst stranded and fails at the deadline (a close would wake the stream and hide it).
    // Parking workers and three of them make every round a sleep/wake transition with several
    // drainers deciding `Sleep` at once.
    const ROUNDS: usize = if cfg!(miri) { 30 } else { 300 };
    const PER_PRODUCER: usize = 8;
    let ran = AtomicUsize::new(0);
    let stream: Stream<DirectOp<'_>, 64> = Stream::new();
    let process = Process::new(&stream, Class::Compute);
    let mut config = PoolConfig::with_workers(3);
    config.spin = SpinPolicy::Park;
    CpuPool::scope(config, |executor| {
        let producer = stream.start(executor, &process).unwrap();
        for round in 1..=ROUNDS {
            thread::scope(|scope| {
                for _ in 0..2 {
                    let ran = &ran;
                    scope.spawn(move || {
                        for _ in 0..PER_PRODUCER {
                            let op = inline(move || {
                                ran.fetch_add(1, Ordering::Relaxed);
                            });
                            assert!(producer.push(op).is_ok(), "64 slots hold a burst of 16");
                        }
                    });
                }
            });
            let expected = round * 2 * PER_PRODUCER;
            wait_until(&format!("round {round}'s burst ran"), || {
                ran.load(Ordering::Relaxed) == expected
            });
            assert!(!process.is_completed(), "the open stream completed");
        }
        producer.close();
        wait_until("completed", || process.is_completed());
        assert_eq!(process.failure(), None);
    })
    .unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), ROUNDS * 2 * PER_PRODUCER);
}

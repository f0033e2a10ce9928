//! The CPU device's steady state allocates nothing: submitting operations with waits and
//! signals, resolving them, arming timepoints, running the queue processes, completing signals
//! and waking the next queue — counted across every thread by a wrapping global allocator.
//!
//! One test only: the count covers every thread, so another test beside it would allocate
//! inside the measured window.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use causeway::cpu::CpuBackend;
use causeway::device::{Device, Op, QueueConfig, SemaphoreId, Work};
use causeway::runtime::blocking;
use causeway::scope::{Endpoint, Scope};
use causeway::PoolConfig;
use support::ALLOCATIONS;

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };
const WARM_UP_ROUNDS: u64 = 2_000;
const MEASURED_ROUNDS: u64 = 10_000;
/// Rounds submitted ahead of the host's wait (below the history and ring capacities).
const BATCH: u64 = 16;

/// One round: queue 0 waits for queue 1's previous pong and pings; queue 1 waits for the ping
/// and pongs. Every `BATCH` rounds the host blocks until the device caught up.
fn rounds(device: &Device, ping: SemaphoreId, pong: SemaphoreId, range: std::ops::Range<u64>) {
    let queues = [0, 1].map(|index| device.queue(index).expect("the device has two queues"));
    for round in range {
        let after_pong = [(pong, round - 1)];
        let signal_ping = [(ping, round)];
        let first = Op {
            waits: &after_pong,
            signals: &signal_ping,
            work: Work::Barrier,
            tag: round,
            ..Default::default()
        };
        device.submit(queues[0], &first).expect("ring and history have room");
        let after_ping = [(ping, round)];
        let signal_pong = [(pong, round)];
        let second = Op {
            waits: &after_ping,
            signals: &signal_pong,
            work: Work::Barrier,
            tag: round,
            ..Default::default()
        };
        device.submit(queues[1], &second).expect("ring and history have room");
        if round % BATCH == 0 {
            let pong = device.semaphore(pong).expect("declared");
            blocking::wait(pong, round, Some(Duration::from_secs(30)))
                .expect("the device keeps up");
        }
    }
}

#[test]
fn submit_run_and_signal_allocate_nothing_after_warm_up() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    builder.driver(CpuBackend::new());
    builder.queue(QueueConfig::default());
    builder.queue(QueueConfig::default());
    let ping = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let pong = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let device = builder.build().expect("the device starts");

    rounds(&device, ping, pong, 1..WARM_UP_ROUNDS + 1);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    rounds(&device, ping, pong, WARM_UP_ROUNDS + 1..WARM_UP_ROUNDS + MEASURED_ROUNDS + 1);
    let after = ALLOCATIONS.load(Ordering::SeqCst);

    assert_eq!(device.semaphore(pong).expect("declared").value(), WARM_UP_ROUNDS + MEASURED_ROUNDS);
    assert_eq!(after - before, 0, "{} allocations over {MEASURED_ROUNDS} rounds", after - before);
}

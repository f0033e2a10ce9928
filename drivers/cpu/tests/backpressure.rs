//! Bounded device resources that fill make the submitter wait (or, for `try_submit`, hand the
//! operation back as `Full`); they never fail work that would succeed later.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_device::{
    BufferId, Device, DeviceBuilder, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId,
    Resource, SemaphoreConfig, SemaphoreId, SubmitError, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };
const PATIENCE: Option<Duration> = Some(Duration::from_secs(60));
const LONG: Duration = Duration::from_secs(60);

/// Counts finished operations by status.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
}

impl Observer for Tally {
    fn op_event(&self, _queue: causeway_device::ObservedQueue<'_>, _tag: u64, event: OpEvent) {
        if let OpEvent::Finished { status, .. } = event {
            let counter = if status == OpStatus::Ok { &self.ok } else { &self.failed };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Drops `device` (every operation has ended by then, and its observer has seen it) and checks
/// that all `ops` operations finished, none failed.
fn all_finished_ok(device: Device, tally: &Tally, ops: u64) {
    drop(device);
    assert_eq!((tally.ok.load(Ordering::Relaxed), tally.failed.load(Ordering::Relaxed)), (ops, 0));
}

fn builder() -> (DeviceBuilder, Arc<Tally>) {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    builder.driver(CpuBackend::new());
    let tally = Arc::new(Tally::default());
    builder.observer(tally.clone());
    (builder, tally)
}

fn queue(builder: &mut DeviceBuilder, capacity: usize) -> QueueId {
    let mut config = QueueConfig::default();
    config.capacity = capacity;
    builder.queue(config)
}

fn semaphore(builder: &mut DeviceBuilder, history: usize) -> SemaphoreId {
    let mut config = SemaphoreConfig::new(0, Scope::DeviceLocal, HOME);
    config.history = history;
    builder.semaphore_config(config)
}

fn op<'a>(waits: &'a [(SemaphoreId, u64)], signals: &'a [(SemaphoreId, u64)], tag: u64) -> Op<'a> {
    Op { waits, signals, work: Work::Barrier, tag, ..Default::default() }
}

/// Runs `submit` while another thread opens `gate` (an external signal to 1) after a delay,
/// so the submission has to wait for room that the opened gate frees. The waiting form for
/// that is `submit_timeout`: `submit` waits only for room the submitted work frees by itself
/// (`tests/stall.rs`).
fn with_gate_opened_later<R>(device: &Device, gate: SemaphoreId, submit: impl FnOnce() -> R) -> R {
    thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(Duration::from_millis(20));
            device.semaphore(gate).unwrap().signal_external(1).unwrap();
        });
        submit()
    })
}

#[test]
fn a_full_ring_hands_the_operation_back_and_changes_nothing() {
    let (mut builder, _) = builder();
    let q = queue(&mut builder, 2);
    let gate = semaphore(&mut builder, 4);
    let done = semaphore(&mut builder, 4);
    let device = builder.build().unwrap();
    let first = device.submit(q, &op(&[(gate, 1)], &[], 1)).unwrap();
    device.submit(q, &op(&[], &[], 2)).unwrap();
    let signal_done = [(done, 1)];
    let third = op(&[], &signal_done, 3);
    let rejected = device.try_submit(q, third).unwrap_err();
    assert_eq!(rejected.error, SubmitError::Full(Resource::QueueSlots { capacity: 2 }));
    assert_eq!((rejected.op.tag, rejected.op.signals), (3, &[(done, 1)][..]));
    assert_eq!(device.in_flight(q), Some(2));
    assert_eq!(device.semaphore(done).unwrap().with_history(|h| h.submitted()), 0);

    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    let receipt = device.submit(q, &rejected.op).unwrap();
    // The refused attempt took no epoch.
    assert_eq!(receipt.point.epoch, first.point.epoch + 2);
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, PATIENCE), Ok(1));
}

/// The ring is laid out a power of two long (3 → 4 positions) so a slot is found with a mask;
/// what is in flight is still bounded by the configured capacity, and operations keep their
/// order as their positions wrap around the longer ring.
#[test]
fn a_ring_of_a_capacity_that_is_no_power_of_two_holds_that_many_and_wraps_in_order() {
    const CAPACITY: usize = 3;
    const OPS: u64 = 50;
    let (mut builder, tally) = builder();
    let q = queue(&mut builder, CAPACITY);
    let gate = semaphore(&mut builder, 4);
    let order = semaphore(&mut builder, 8);
    let device = builder.build().unwrap();
    let signal_first = [(order, 1)];
    device.submit(q, &op(&[(gate, 1)], &signal_first, 1)).unwrap();
    let signals: Vec<[(SemaphoreId, u64); 1]> = (2..=OPS).map(|value| [(order, value)]).collect();
    for (tag, signal) in (2..=CAPACITY as u64).zip(&signals) {
        device.submit(q, &op(&[], signal, tag)).unwrap();
    }
    let next = signals[CAPACITY - 1];
    let rejected = device.try_submit(q, op(&[], &next, CAPACITY as u64 + 1)).unwrap_err();
    assert_eq!(rejected.error, SubmitError::Full(Resource::QueueSlots { capacity: CAPACITY }));
    assert_eq!(device.in_flight(q), Some(CAPACITY as u64));

    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    // Each signal completes only in value order (an out-of-order one fails the timeline), so
    // reaching the last value says every operation ran in submission order.
    for (tag, signal) in (CAPACITY as u64 + 1..=OPS).zip(&signals[CAPACITY - 1..]) {
        device.submit(q, &op(&[], signal, tag)).unwrap();
    }
    assert_eq!(wait(device.semaphore(order).unwrap(), OPS, PATIENCE), Ok(OPS));
    assert_eq!(tally.failed.load(Ordering::Relaxed), 0);
}

#[test]
fn a_blocking_submit_waits_for_a_slot_and_a_timed_one_gives_up() {
    let (mut builder, tally) = builder();
    let q = queue(&mut builder, 1);
    let gate = semaphore(&mut builder, 4);
    let done = semaphore(&mut builder, 4);
    let device = builder.build().unwrap();
    device.submit(q, &op(&[(gate, 1)], &[], 1)).unwrap();
    let started = Instant::now();
    assert_eq!(
        device.submit_timeout(q, &op(&[], &[(done, 1)], 2), Duration::from_millis(50)),
        Err(SubmitError::TimedOut(Resource::QueueSlots { capacity: 1 }))
    );
    assert!(started.elapsed() >= Duration::from_millis(50));

    with_gate_opened_later(&device, gate, || {
        device.submit_timeout(q, &op(&[], &[(done, 1)], 2), LONG)
    })
    .unwrap();
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, PATIENCE), Ok(1));
    assert_eq!(tally.ok.load(Ordering::Relaxed), 2);
}

#[test]
fn a_full_history_waits_for_its_oldest_pending_signal_to_be_reached() {
    let (mut builder, _) = builder();
    let q = queue(&mut builder, 16);
    let gate = semaphore(&mut builder, 4);
    let s = semaphore(&mut builder, 2);
    let device = builder.build().unwrap();
    device.submit(q, &op(&[(gate, 1)], &[(s, 1)], 1)).unwrap();
    device.submit(q, &op(&[], &[(s, 2)], 2)).unwrap();
    let signal_s = [(s, 3)];
    let third = op(&[], &signal_s, 3);
    let rejected = device.try_submit(q, third).unwrap_err();
    assert_eq!(rejected.error, SubmitError::Full(Resource::History { signal: 0, capacity: 2 }));
    assert_eq!(device.semaphore(s).unwrap().room_at(), Some(2));

    with_gate_opened_later(&device, gate, || device.submit_timeout(q, &third, LONG)).unwrap();
    let s = device.semaphore(s).unwrap();
    assert_eq!(wait(s, 3, PATIENCE), Ok(3));
    // Values 1 and 2 aged out of the two slots; a late waiter still gets a true answer.
    assert_eq!(s.with_history(|h| h.iter().map(|e| e.value).collect::<Vec<_>>()), [2, 3]);
}

#[test]
fn held_allocation_records_make_the_next_alloca_wait_for_a_dealloca() {
    let (mut builder, _) = builder();
    let q = queue(&mut builder, 16);
    let gate = semaphore(&mut builder, 4);
    let done = semaphore(&mut builder, 4);
    builder.memory(1, 1 << 20);
    builder.allocation_records(1);
    let device = builder.build().unwrap();
    let alloca = Work::Alloca { buffer: BufferId(0), bytes: 64 };
    device.submit(q, &Op { work: alloca, ..op(&[(gate, 1)], &[], 1) }).unwrap();
    device.submit(q, &Op { work: Work::Dealloca(BufferId(0)), ..op(&[], &[], 2) }).unwrap();
    let signal_done = [(done, 1)];
    let again = Op { work: alloca, ..op(&[], &signal_done, 3) };
    assert_eq!(
        device.try_submit(q, again).unwrap_err().error,
        SubmitError::Full(Resource::AllocationRecords { capacity: 1 })
    );
    with_gate_opened_later(&device, gate, || device.submit_timeout(q, &again, LONG)).unwrap();
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, PATIENCE), Ok(1));
    assert_eq!(device.memory_stats().commits, 2);
}

/// A long submit-ahead pipeline through tiny resources runs to completion at the device's
/// pace: 10^5 operations over four queues, each waiting on the previous queue's semaphore,
/// through rings of 8 slots and histories of 4.
#[test]
fn a_long_pipeline_through_small_resources_completes() {
    const OPS: u64 = 100_000;
    const QUEUES: usize = 4;
    let (mut builder, tally) = builder();
    let queues: Vec<QueueId> = (0..QUEUES).map(|_| queue(&mut builder, 8)).collect();
    let semaphores: Vec<SemaphoreId> = (0..QUEUES).map(|_| semaphore(&mut builder, 4)).collect();
    let device = builder.build().unwrap();
    let mut values = [0u64; QUEUES];
    for index in 0..OPS {
        let q = index as usize % QUEUES;
        let previous = (q + QUEUES - 1) % QUEUES;
        let waits = [(semaphores[previous], values[previous])];
        values[q] += 1;
        let signals = [(semaphores[q], values[q])];
        let waits: &[_] = if values[previous] == 0 { &[] } else { &waits };
        device.submit(queues[q], &op(waits, &signals, index)).unwrap();
    }
    for (q, &semaphore) in semaphores.iter().enumerate() {
        assert_eq!(wait(device.semaphore(semaphore).unwrap(), values[q], PATIENCE), Ok(values[q]));
    }
    all_finished_ok(device, &tally, OPS);
}

#[test]
fn a_failed_timeline_ends_a_wait_for_history_room() {
    let (mut builder, _) = builder();
    let q = queue(&mut builder, 16);
    let gate = semaphore(&mut builder, 4);
    let s = semaphore(&mut builder, 2);
    let device = builder.build().unwrap();
    device.submit(q, &op(&[(gate, 1)], &[(s, 1)], 1)).unwrap();
    device.submit(q, &op(&[], &[(s, 2)], 2)).unwrap();
    let refused = thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(Duration::from_millis(20));
            device.semaphore(gate).unwrap().fail(Failure::Application(7));
        });
        // Timed: the room waits for another thread (`submit` would say it is stalled).
        device.submit_timeout(q, &op(&[], &[(s, 3)], 3), LONG)
    });
    let doomed = refused.expect("accepted doomed, not a hang, a timeout or a refusal");
    assert_eq!(doomed.failed_signal, Some((0, Failure::Application(7))));
    assert_eq!(
        wait(device.semaphore(s).unwrap(), 3, PATIENCE),
        Err(HostWaitError::Failed(Failure::Application(7)))
    );
}

/// A submitter that runs ahead of its queue waits for half the ring to free, not for each
/// slot: it sleeps once per refill, where waiting for one slot slept once per operation (each
/// operation here outlasts the watch before a sleep) and, at shorter operations, spun on a
/// core the queue's work needed.
#[test]
fn a_submitter_ahead_of_its_queue_sleeps_once_per_half_ring() {
    const CAPACITY: usize = 16;
    const OPS: u64 = 400;
    let (mut builder, tally) = builder();
    let q = queue(&mut builder, CAPACITY);
    let done = semaphore(&mut builder, 2 * CAPACITY);
    // Each operation spins for 20 µs: four times the watch, a fiftieth of the nap, so a
    // refill of 8 comes long before the nap ends even on a loaded machine.
    let spin = builder.host_call(|_| {
        let started = Instant::now();
        while started.elapsed() < Duration::from_micros(20) {
            std::hint::spin_loop();
        }
        Ok(())
    });
    let device = builder.build().unwrap();
    let signals: Vec<[(SemaphoreId, u64); 1]> = (1..=OPS).map(|value| [(done, value)]).collect();
    for (tag, signal) in (1..).zip(&signals) {
        let op = Op { signals: signal, work: Work::Host(spin), tag, ..Default::default() };
        device.submit(q, &op).unwrap();
    }
    assert_eq!(wait(device.semaphore(done).unwrap(), OPS, PATIENCE), Ok(OPS));
    let sleeps = device.stats().queue(q).unwrap().room_sleeps;
    // 384 submissions found the ring full; a refill is 8 slots, so about 48 sleeps.
    assert!(sleeps <= OPS / 4, "{sleeps} sleeps for {OPS} operations through a ring of 16");
    all_finished_ok(device, &tally, OPS);
}

/// The refill a full ring's submitter waits for may never come: here the operations behind
/// the first wait for a gate this thread opens only after its submission. One free slot is
/// then enough, after a short nap, where insisting on half the ring would wait until the
/// timeout.
#[test]
fn a_submission_takes_one_free_slot_when_the_rest_of_the_ring_waits_for_the_submitter() {
    let (mut builder, tally) = builder();
    let q = queue(&mut builder, 4);
    let first_gate = semaphore(&mut builder, 4);
    let later_gate = semaphore(&mut builder, 4);
    let done = semaphore(&mut builder, 4);
    let device = builder.build().unwrap();
    device.submit(q, &op(&[(first_gate, 1)], &[], 1)).unwrap();
    for tag in 2..=4 {
        device.submit(q, &op(&[(later_gate, 1)], &[], tag)).unwrap();
    }
    let started = Instant::now();
    let submitted = with_gate_opened_later(&device, first_gate, || {
        device.submit_timeout(q, &op(&[], &[(done, 1)], 5), LONG)
    });
    submitted.expect("one free slot taken");
    // Not a bound on speed: the slot is taken about 20 ms in, after the first operation ran;
    // a wait for the refill would last until the deadline, a minute away.
    assert!(started.elapsed() < LONG / 2, "the submission waited for its deadline");
    device.semaphore(later_gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, PATIENCE), Ok(1));
    all_finished_ok(device, &tally, 5);
}

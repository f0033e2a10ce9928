//! `Device::submit` waits only for room that the work already submitted frees by itself: when
//! the room waits for a signal no operation submitted so far gives, it returns
//! `SubmitError::Stalled` at once, naming that wait, instead of blocking for ever.
#![cfg(not(loom))]

use std::thread;
use std::time::Duration;

use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_device::{
    Device, DeviceBuilder, Op, QueueConfig, QueueId, Resource, SemaphoreConfig, SemaphoreId, Stall,
    SubmitError, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::blocking::wait;
use causeway_runtime::PoolConfig;

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };
const PATIENCE: Option<Duration> = Some(Duration::from_secs(60));
const LONG: Duration = Duration::from_secs(60);

fn builder() -> DeviceBuilder {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    builder.driver(CpuBackend::new());
    builder
}

fn queue(builder: &mut DeviceBuilder, capacity: usize) -> QueueId {
    let mut config = QueueConfig::default();
    config.capacity = capacity;
    builder.queue(config)
}

fn semaphore(builder: &mut DeviceBuilder, history: usize, scope: Scope) -> SemaphoreId {
    let mut config = SemaphoreConfig::new(0, scope, HOME);
    config.history = history;
    builder.semaphore_config(config)
}

/// The stall a submission stopped with, as (resource, queue, tag, semaphore, value).
fn stalled<T: std::fmt::Debug>(
    result: Result<T, SubmitError>,
) -> (Resource, QueueId, u64, SemaphoreId, u64) {
    match result {
        Err(SubmitError::Stalled(stall)) => fields(stall),
        other => panic!("expected a stall, got {other:?}"),
    }
}

fn fields(stall: Stall) -> (Resource, QueueId, u64, SemaphoreId, u64) {
    (stall.resource, stall.queue, stall.tag, stall.semaphore, stall.value)
}

fn op<'a>(waits: &'a [(SemaphoreId, u64)], signals: &'a [(SemaphoreId, u64)], tag: u64) -> Op<'a> {
    Op { waits, signals, work: Work::Barrier, tag, ..Default::default() }
}

/// A three-buffer pipeline of `CHUNKS` chunks: chunk `i` is loaded once the consumer has
/// handed buffer `i - BUFFERS` back (`free ≥ i - BUFFERS`), signalling `loaded = i`; the
/// consumer of chunk `i` waits for `loaded ≥ i` and signals `free = i`.
const CHUNKS: u64 = 1_000;
const BUFFERS: u64 = 3;
const HISTORY: usize = 16;

struct Pipeline {
    device: Device,
    loads: QueueId,
    consumers: QueueId,
    loaded: SemaphoreId,
    free: SemaphoreId,
}

impl Pipeline {
    fn new() -> Pipeline {
        let mut builder = builder();
        let loads = queue(&mut builder, 4096);
        let consumers = queue(&mut builder, 4096);
        let loaded = semaphore(&mut builder, HISTORY, Scope::DeviceLocal);
        let free = semaphore(&mut builder, HISTORY, Scope::DeviceLocal);
        let device = builder.build().unwrap();
        Pipeline { device, loads, consumers, loaded, free }
    }

    fn load(&self, chunk: u64) -> Result<(), SubmitError> {
        let waits = [(self.free, chunk.saturating_sub(BUFFERS))];
        let waits = if chunk > BUFFERS { &waits[..] } else { &[] };
        let signals = [(self.loaded, chunk)];
        self.device.submit(self.loads, &op(waits, &signals, chunk)).map(drop)
    }

    fn consume(&self, chunk: u64) -> Result<(), SubmitError> {
        let (waits, signals) = ([(self.loaded, chunk)], [(self.free, chunk)]);
        self.device.submit(self.consumers, &op(&waits, &signals, CHUNKS + chunk)).map(drop)
    }

    fn finishes(&self) {
        let free = self.device.semaphore(self.free).unwrap();
        assert_eq!(wait(free, CHUNKS, PATIENCE), Ok(CHUNKS));
        assert_eq!(self.device.semaphore(self.loaded).unwrap().value(), CHUNKS);
    }
}

/// The natural first loop — every load, then every consumer — would block for ever at the
/// load that finds `loaded`'s history full of loads waiting for buffers only consumers hand
/// back. It stops there with the wait that no submitted operation can end, and nothing
/// changed: the same pipeline then runs to its end once the consumers are submitted.
#[test]
fn a_pipeline_submitted_stage_by_stage_stops_at_a_full_history_naming_the_wait() {
    let pipeline = Pipeline::new();
    let stopped = (1..=CHUNKS)
        .find_map(|chunk| pipeline.load(chunk).err().map(|error| (chunk, error)))
        .expect("the loads cannot all fit the history");
    let (chunk, error) = stopped;
    let message = error.to_string();
    assert_eq!(
        stalled::<()>(Err(error)),
        (
            Resource::History { signal: 0, capacity: HISTORY },
            pipeline.loads,
            BUFFERS + 1,
            pipeline.free,
            1
        ),
        "{message}"
    );
    // The loads up to the buffers ran; from then on the history holds only waiting ones.
    assert!(chunk > BUFFERS + 1 && chunk <= BUFFERS + HISTORY as u64 + 1, "stopped at {chunk}");
    assert_eq!(pipeline.device.in_flight(pipeline.loads), Some(chunk - 1 - BUFFERS));
    assert!(message.contains("operation tagged 4 on queue 0") && message.contains("reach 1"));

    for consumer in 1..chunk {
        pipeline.consume(consumer).unwrap();
    }
    for next in chunk..=CHUNKS {
        pipeline.load(next).unwrap();
        pipeline.consume(next).unwrap();
    }
    pipeline.finishes();
}

/// Interleaved, the same pipeline runs through a history far smaller than its length: each
/// load that finds the history full waits for room the submitted consumers free.
#[test]
fn the_same_pipeline_submitted_interleaved_runs_through_a_small_history() {
    let pipeline = Pipeline::new();
    for chunk in 1..=CHUNKS {
        pipeline.load(chunk).unwrap();
        if chunk > BUFFERS {
            pipeline.consume(chunk - BUFFERS).unwrap();
        }
    }
    for chunk in CHUNKS - BUFFERS + 1..=CHUNKS {
        pipeline.consume(chunk).unwrap();
    }
    pipeline.finishes();
}

/// A full ring whose head waits on a semaphore nobody has signalled names the head; the same
/// submission with a timeout waits for another thread's signal, and failing the semaphore
/// instead frees the room too (its waiters end failed).
#[test]
fn a_ring_whose_head_waits_for_a_signal_nobody_gave_stops_and_a_timed_submit_waits_for_it() {
    let mut builder = builder();
    let q = queue(&mut builder, 2);
    let gate = semaphore(&mut builder, 4, Scope::DeviceLocal);
    let done = semaphore(&mut builder, 4, Scope::DeviceLocal);
    let device = builder.build().unwrap();
    device.submit(q, &op(&[(gate, 1)], &[], 1)).unwrap();
    device.submit(q, &op(&[(gate, 1)], &[], 2)).unwrap();
    let signal_done = [(done, 1)];
    let third = op(&[], &signal_done, 3);
    let stall = (Resource::QueueSlots { capacity: 2 }, q, 1, gate, 1);
    assert_eq!(stalled(device.submit(q, &third)), stall);
    assert_eq!(device.stalled(q, &third, stall.0).map(fields), Some(stall));
    assert_eq!(device.in_flight(q), Some(2));

    thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(Duration::from_millis(20));
            device.semaphore(gate).unwrap().signal_external(1).unwrap();
        });
        device.submit_timeout(q, &third, LONG).unwrap();
    });
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, PATIENCE), Ok(1));

    // Failing the semaphore ends its waiters (failed), which frees their room.
    let (waits_for_two, signal_done_again) = ([(gate, 2)], [(done, 2)]);
    device.submit(q, &op(&waits_for_two, &[], 4)).unwrap();
    device.submit(q, &op(&[], &[], 5)).unwrap();
    let sixth = op(&[], &signal_done_again, 6);
    assert_eq!(stalled(device.submit(q, &sixth)), (stall.0, q, 4, gate, 2));
    assert!(device.semaphore(gate).unwrap().fail(Failure::Application(7)));
    device.submit(q, &sixth).unwrap();
    assert_eq!(wait(device.semaphore(done).unwrap(), 2, PATIENCE), Ok(2));
}

/// The room is followed through the operations it waits for, on other queues, to the wait no
/// submitted operation can end.
#[test]
fn the_wait_is_followed_through_other_queues_to_the_one_nobody_signals() {
    let mut builder = builder();
    let upstream = queue(&mut builder, 8);
    let middle = queue(&mut builder, 8);
    let full = queue(&mut builder, 2);
    let never = semaphore(&mut builder, 4, Scope::DeviceLocal);
    let a = semaphore(&mut builder, 4, Scope::DeviceLocal);
    let b = semaphore(&mut builder, 4, Scope::DeviceLocal);
    let device = builder.build().unwrap();
    // Queue order counts too: the upstream operation that waits is not the one signalling.
    device.submit(upstream, &op(&[(never, 1)], &[], 10)).unwrap();
    device.submit(upstream, &op(&[], &[(a, 1)], 11)).unwrap();
    device.submit(middle, &op(&[(a, 1)], &[(b, 1)], 20)).unwrap();
    device.submit(full, &op(&[(b, 1)], &[], 30)).unwrap();
    device.submit(full, &op(&[], &[], 31)).unwrap();
    assert_eq!(
        stalled(device.submit(full, &op(&[], &[], 32))),
        (Resource::QueueSlots { capacity: 2 }, upstream, 10, never, 1)
    );
    device.semaphore(never).unwrap().signal_external(1).unwrap();
    device.submit(full, &op(&[], &[], 32)).unwrap();
}

/// Room that submitted work frees is waited for, however long that work takes: here the
/// head waits for a signal of a host function that sleeps first.
#[test]
fn room_that_submitted_work_frees_is_waited_for() {
    let mut builder = builder();
    let q = queue(&mut builder, 1);
    let slow = queue(&mut builder, 1);
    let s = semaphore(&mut builder, 4, Scope::DeviceLocal);
    let sleeps = builder.host_call(|_| {
        thread::sleep(Duration::from_millis(30));
        Ok(())
    });
    let device = builder.build().unwrap();
    device.submit(q, &op(&[(s, 1)], &[], 1)).unwrap();
    let signal = [(s, 1)];
    device.submit(slow, &Op { work: Work::Host(sleeps), ..op(&[], &signal, 2) }).unwrap();
    assert_eq!(device.stalled(q, &op(&[], &[], 3), Resource::QueueSlots { capacity: 1 }), None);
    device.submit(q, &op(&[], &[], 3)).unwrap();
    assert_eq!(device.semaphore(s).unwrap().value(), 1);
}

/// A semaphore that others may signal — another device, process or rank — is never counted as
/// unsignalled: only the semaphores this device alone signals are.
#[test]
fn a_semaphore_others_may_signal_is_never_a_stall() {
    let mut builder = builder();
    let q = queue(&mut builder, 1);
    let shared = semaphore(&mut builder, 4, Scope::ProcessLocal);
    let device = builder.build().unwrap();
    device.submit(q, &op(&[(shared, 1)], &[], 1)).unwrap();
    let next = op(&[], &[], 2);
    assert_eq!(device.stalled(q, &next, Resource::QueueSlots { capacity: 1 }), None);
    assert_eq!(
        device.submit_timeout(q, &next, Duration::from_millis(20)),
        Err(SubmitError::TimedOut(Resource::QueueSlots { capacity: 1 }))
    );
    device.semaphore(shared).unwrap().signal_external(1).unwrap();
    device.submit(q, &next).unwrap();
}

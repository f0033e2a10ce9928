//! Stream-ordered memory when a dealloca or an alloca does not run: a dealloca that fails (a
//! wait's semaphore failed, before or after it was submitted) or is cancelled (speculation
//! rejected) gives its bytes back to the quota and frees its allocation record — but only once
//! everything it was ordered after has ended, never while a signaller it waits for may still
//! use the buffer; an alloca that fails or is cancelled leaves its dealloca nothing to give
//! back, and the record is freed once. A soak fails and reallocates the whole quota through
//! one record pair 10^4 times, so a leak of either hangs it (bounded: it then fails).
//!
//! Every wait is bounded: a regression fails a test rather than hanging it.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_core::speculation::Rejection;
use causeway_device::{
    BufferId, Device, DeviceBuilder, HostCallId, Op, QueueConfig, QueueId, SemaphoreConfig,
    SemaphoreId, SubmitError, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

/// The hang guard of every wait that must end: generous, since the test machines are loaded.
const GUARD: Duration = Duration::from_secs(60);
/// How long the tests look for something that must not happen (bytes given back while a user
/// of the buffer still runs): its absence does not depend on it, only the chance to catch it.
const SHORT: Duration = Duration::from_millis(50);
/// The whole quota: one buffer of it at a time.
const QUOTA: u64 = 1000;

const FAILED: Failure = Failure::Application(7);

fn alloca(buffer: u32) -> Work {
    Work::Alloca { buffer: BufferId(buffer), bytes: QUOTA }
}

fn dealloca(buffer: u32) -> Work {
    Work::Dealloca(BufferId(buffer))
}

fn op<'a>(
    work: Work,
    waits: &'a [(SemaphoreId, u64)],
    signals: &'a [(SemaphoreId, u64)],
) -> Op<'a> {
    Op { waits, signals, work, tag: 0, ..Default::default() }
}

/// Submits, waiting (bounded) for room: an allocation record that is never freed fails here.
fn submit(device: &Device, queue: QueueId, op: &Op<'_>) -> causeway_device::Receipt {
    device.submit_timeout(queue, op, GUARD).expect("room frees up: nothing leaked")
}

/// A host function that holds its worker until released: a user of the buffer still running.
#[derive(Clone, Default)]
struct Holder {
    started: Arc<AtomicBool>,
    released: Arc<AtomicBool>,
}

impl Holder {
    fn register(&self, builder: &mut DeviceBuilder) -> HostCallId {
        let holder = self.clone();
        builder.host_call(move |_| {
            holder.started.store(true, Ordering::Release);
            let deadline = Instant::now() + GUARD;
            while !holder.released.load(Ordering::Acquire) {
                if Instant::now() >= deadline {
                    // Never hang the test: a user that is never released fails.
                    return Err(Failure::Aborted);
                }
                std::thread::yield_now();
            }
            Ok(())
        })
    }

    fn wait_started(&self) {
        until(|| self.started.load(Ordering::Acquire), "the holding host function starts");
    }

    fn release(&self) {
        self.released.store(true, Ordering::Release);
    }
}

/// Waits (bounded) until `done` holds.
fn until(done: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + GUARD;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A device of `queues` CPU queues and one buffer name per `buffers` over a [`QUOTA`]-byte pool.
fn device_builder(queues: usize, buffers: usize) -> (DeviceBuilder, Vec<QueueId>) {
    let mut builder = Device::builder(PoolConfig::with_workers(3));
    let cpu = builder.driver(CpuBackend::new());
    let queues = (0..queues).map(|_| builder.queue(QueueConfig::on(cpu))).collect();
    builder.memory(buffers, QUOTA);
    (builder, queues)
}

fn semaphore(builder: &mut DeviceBuilder, queue: QueueId) -> SemaphoreId {
    let home = builder.endpoint(queue).unwrap();
    builder.semaphore(0, Scope::DeviceLocal, home)
}

fn reached(device: &Device, semaphore: SemaphoreId, value: u64) -> Result<u64, HostWaitError> {
    wait(device.semaphore(semaphore).unwrap(), value, Some(GUARD))
}

/// Whether `semaphore` reached `value` within [`SHORT`] (it must not have).
fn reached_soon(device: &Device, semaphore: SemaphoreId, value: u64) -> bool {
    wait(device.semaphore(semaphore).unwrap(), value, Some(SHORT)).is_ok()
}

#[test]
fn a_dealloca_whose_wait_fails_gives_its_bytes_back() {
    let (mut builder, q) = device_builder(2, 2);
    let [gate, freed, again] = [(); 3].map(|()| semaphore(&mut builder, q[0]));
    let device = builder.build().unwrap();

    submit(&device, q[0], &op(alloca(0), &[], &[]));
    submit(&device, q[0], &op(dealloca(0), &[(gate, 1)], &[(freed, 1)]));
    device.semaphore(gate).unwrap().fail(FAILED);
    assert_eq!(reached(&device, freed, 1), Err(HostWaitError::Failed(FAILED)));
    // The whole quota again: this alloca only runs if the failed dealloca gave it back.
    submit(&device, q[1], &op(alloca(1), &[], &[(again, 1)]));
    assert_eq!(reached(&device, again, 1), Ok(1));
    assert_eq!(device.committed_bytes(), QUOTA);
    submit(&device, q[1], &op(dealloca(1), &[], &[(again, 2)]));
    assert_eq!(reached(&device, again, 2), Ok(2));
    assert_eq!(device.committed_bytes(), 0);
}

/// The signaller that uses the buffer, the one that fails the timeline first, and the dealloca
/// after both: `uses` signals `timeline` to 2 from inside a host function that holds its
/// worker; `fails` signals it to 1 after a wait the test fails.
struct FailedUnderAUser {
    device: Device,
    q: Vec<QueueId>,
    user: Holder,
    trigger: SemaphoreId,
    timeline: SemaphoreId,
    freed: SemaphoreId,
    again: SemaphoreId,
}

fn failed_under_a_user() -> FailedUnderAUser {
    let (mut builder, q) = device_builder(5, 2);
    let user = Holder::default();
    let uses = user.register(&mut builder);
    let [allocated, trigger, timeline, freed, again] =
        [(); 5].map(|()| semaphore(&mut builder, q[0]));
    let device = builder.build().unwrap();

    submit(&device, q[0], &op(alloca(0), &[], &[(allocated, 1)]));
    // Value 1 comes from work that fails; value 2 from work that uses the buffer.
    submit(&device, q[1], &op(Work::Barrier, &[(trigger, 1)], &[(timeline, 1)]));
    submit(&device, q[2], &op(Work::Host(uses), &[(allocated, 1)], &[(timeline, 2)]));
    user.wait_started();
    FailedUnderAUser { device, q, user, trigger, timeline, freed, again }
}

impl FailedUnderAUser {
    /// Fails the timeline from below the user's value while the user runs.
    fn fail_the_timeline(&self) {
        self.device.semaphore(self.trigger).unwrap().fail(FAILED);
        let timeline = self.device.semaphore(self.timeline).unwrap();
        until(|| timeline.failure().is_some(), "the timeline fails");
    }

    /// The next alloca of the whole quota must not run while the user does; once the user
    /// ends, the dealloca fails and gives its bytes back, and it runs.
    fn bytes_come_back_only_after_the_user(&self) {
        let device = &self.device;
        submit(device, self.q[4], &op(alloca(1), &[], &[(self.again, 1)]));
        assert!(!reached_soon(device, self.again, 1), "the quota came back under a running user");
        assert_eq!(device.committed_bytes(), QUOTA);
        assert_eq!(device.in_flight(self.q[3]), Some(1), "the dealloca ended before its user");
        self.user.release();
        assert_eq!(reached(device, self.freed, 1), Err(HostWaitError::Failed(FAILED)));
        assert_eq!(reached(device, self.again, 1), Ok(1));
        assert_eq!(device.memory_stats().commits, 2);
    }
}

#[test]
fn a_failed_dealloca_gives_its_bytes_back_only_after_the_user_it_waits_for_has_ended() {
    let case = failed_under_a_user();
    let after_the_user = [(case.timeline, 2)];
    let signal_freed = [(case.freed, 1)];
    submit(&case.device, case.q[3], &op(dealloca(0), &after_the_user, &signal_freed));
    case.fail_the_timeline();
    case.bytes_come_back_only_after_the_user();
}

#[test]
fn a_dealloca_doomed_at_submission_still_waits_for_the_user_before_giving_back() {
    let case = failed_under_a_user();
    case.fail_the_timeline();
    let after_the_user = [(case.timeline, 2)];
    let signal_freed = [(case.freed, 1)];
    let receipt = submit(&case.device, case.q[3], &op(dealloca(0), &after_the_user, &signal_freed));
    assert_eq!(receipt.failure, Some(FAILED), "the wait failed at submission");
    case.bytes_come_back_only_after_the_user();
}

/// A draft queue whose first operation holds behind a gate the test never opens (or runs a
/// holding host function), and queues downstream of it.
struct Speculation {
    device: Device,
    q: Vec<QueueId>,
    draft: QueueId,
    /// Signalled to 1 by the draft operation.
    drafted: SemaphoreId,
    freed: SemaphoreId,
    again: SemaphoreId,
}

impl Speculation {
    fn reject(&self) -> causeway_device::CancelReport {
        self.device.cancel_speculative(Rejection::new(self.device.axis(self.draft).unwrap(), 0))
    }
}

/// A device whose draft queue's one operation runs `user` (else it is a barrier) and, with
/// `gate`, first waits on a semaphore nobody signals (returned beside).
fn speculation(user: Option<&Holder>, gate: bool) -> (Speculation, SemaphoreId) {
    let (mut builder, q) = device_builder(4, 2);
    let uses = user.map(|user| user.register(&mut builder));
    let [gate_semaphore, drafted, freed, again] = [(); 4].map(|()| semaphore(&mut builder, q[0]));
    let device = builder.build().unwrap();
    let draft = q[3];
    let work = uses.map_or(Work::Barrier, Work::Host);
    let waits = [(gate_semaphore, 1)];
    let waits: &[_] = if gate { &waits } else { &[] };
    submit(&device, draft, &op(work, waits, &[(drafted, 1)]));
    (Speculation { device, q, draft, drafted, freed, again }, gate_semaphore)
}

#[test]
fn a_cancelled_dealloca_gives_its_bytes_back() {
    let (case, _never) = speculation(None, true);
    let device = &case.device;
    submit(device, case.q[0], &op(alloca(0), &[], &[]));
    let after_draft = [(case.drafted, 1)];
    submit(device, case.q[0], &op(dealloca(0), &after_draft, &[(case.freed, 1)]));
    let report = case.reject();
    assert_eq!(report.cancelled, 2, "{report:?}");
    assert_eq!(reached(device, case.freed, 1), Err(HostWaitError::Failed(Failure::Cancelled)));
    submit(device, case.q[1], &op(alloca(1), &[], &[(case.again, 1)]));
    assert_eq!(reached(device, case.again, 1), Ok(1));
    assert_eq!(device.committed_bytes(), QUOTA);
}

#[test]
fn a_cancelled_dealloca_gives_its_bytes_back_only_after_the_running_user_has_ended() {
    let user = Holder::default();
    let (case, _) = speculation(Some(&user), false);
    let device = &case.device;
    submit(device, case.q[0], &op(alloca(0), &[], &[]));
    user.wait_started();
    let after_draft = [(case.drafted, 1)];
    submit(device, case.q[0], &op(dealloca(0), &after_draft, &[(case.freed, 1)]));
    let report = case.reject();
    assert_eq!((report.cancelled, report.running), (1, 1), "{report:?}");
    submit(device, case.q[1], &op(alloca(1), &[], &[(case.again, 1)]));
    assert!(!reached_soon(device, case.again, 1), "the quota came back under a running user");
    assert_eq!(device.committed_bytes(), QUOTA);
    user.release();
    assert_eq!(reached(device, case.freed, 1), Err(HostWaitError::Failed(Failure::Cancelled)));
    assert_eq!(reached(device, case.again, 1), Ok(1));
}

#[test]
fn a_cancelled_dealloca_keeps_a_wait_whose_signal_is_not_yet_submitted() {
    let user = Holder::default();
    let (mut builder, q) = device_builder(4, 2);
    let uses = user.register(&mut builder);
    let [gate, drafted, later, freed, again, allocated] =
        [(); 6].map(|()| semaphore(&mut builder, q[0]));
    let device = builder.build().unwrap();
    let draft = q[3];
    submit(&device, draft, &op(Work::Barrier, &[(gate, 1)], &[(drafted, 1)]));
    submit(&device, q[0], &op(alloca(0), &[], &[(allocated, 1)]));
    // Committed before the other queue's alloca asks: otherwise that one could take the quota
    // first and the check below would see nothing of the dealloca.
    assert_eq!(reached(&device, allocated, 1), Ok(1));
    // Ordered after the draft, and after whatever will first signal `later` to 1: nothing has
    // yet.
    let waits = [(drafted, 1), (later, 1)];
    submit(&device, q[0], &op(dealloca(0), &waits, &[(freed, 1)]));
    let report = device.cancel_speculative(Rejection::new(device.axis(draft).unwrap(), 0));
    assert_eq!(report.cancelled, 2, "{report:?}");
    submit(&device, q[1], &op(alloca(1), &[], &[(again, 1)]));
    assert!(!reached_soon(&device, again, 1), "the quota came back before `later`'s signaller");

    // The user that signals `later` arrives after the cancellation, and uses the buffer.
    submit(&device, q[2], &op(Work::Host(uses), &[], &[(later, 1)]));
    user.wait_started();
    assert!(!reached_soon(&device, again, 1), "the quota came back under a running user");
    user.release();
    assert_eq!(reached(&device, freed, 1), Err(HostWaitError::Failed(Failure::Cancelled)));
    assert_eq!(reached(&device, again, 1), Ok(1));
}

#[test]
fn a_failed_alloca_leaves_its_dealloca_nothing_to_give_back() {
    let (mut builder, q) = device_builder(2, 2);
    let [gate, allocated, freed, again] = [(); 4].map(|()| semaphore(&mut builder, q[0]));
    builder.allocation_records(1);
    let device = builder.build().unwrap();

    submit(&device, q[0], &op(alloca(0), &[(gate, 1)], &[(allocated, 1)]));
    device.semaphore(gate).unwrap().fail(FAILED);
    // In order after the alloca that failed, waiting on nothing: it runs and has nothing to
    // give back.
    submit(&device, q[0], &op(dealloca(0), &[], &[(freed, 1)]));
    assert_eq!(reached(&device, allocated, 1), Err(HostWaitError::Failed(FAILED)));
    assert_eq!(reached(&device, freed, 1), Ok(1));
    assert_eq!(device.committed_bytes(), 0);
    // The one record is free again, and the whole quota is there.
    submit(&device, q[1], &op(alloca(1), &[], &[(again, 1)]));
    assert_eq!(reached(&device, again, 1), Ok(1));
    assert_eq!(device.memory_stats().commits, 1);
}

#[test]
fn a_cancelled_alloca_and_its_cancelled_dealloca_free_their_record_once() {
    let (case, _never) = speculation(None, true);
    let device = &case.device;
    let after_draft = [(case.drafted, 1)];
    submit(device, case.q[0], &op(alloca(0), &after_draft, &[]));
    submit(device, case.q[0], &op(dealloca(0), &[], &[(case.freed, 1)]));
    let report = case.reject();
    assert_eq!(report.cancelled, 3, "{report:?}");
    assert_eq!(reached(device, case.freed, 1), Err(HostWaitError::Failed(Failure::Cancelled)));
    assert_eq!(device.committed_bytes(), 0);

    // Records are `2 × buffers` = 4, all held here behind a gate: a record freed twice would
    // let a fifth reservation in.
    let held = [(case.again, 1)];
    for buffer in [0, 1, 0, 1] {
        submit(device, case.q[2], &op(alloca(buffer), &held, &[]));
        submit(device, case.q[2], &op(dealloca(buffer), &[], &[]));
    }
    assert!(matches!(
        device.try_submit(case.q[1], op(alloca(0), &[], &[])),
        Err(rejected) if matches!(rejected.error, SubmitError::Full(_))
    ));
    device.semaphore(case.again).unwrap().signal_external(1).unwrap();
    until(|| device.in_flight(case.q[2]) == Some(0), "the held allocations retire");
    assert_eq!(device.memory_stats().commits, 4);
    assert_eq!(device.committed_bytes(), 0);
}

/// Iterations of the soak; `CAUSEWAY_MEMORY_SOAK` overrides.
fn soak_iterations() -> u64 {
    std::env::var("CAUSEWAY_MEMORY_SOAK").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000)
}

#[test]
fn failing_and_reallocating_the_whole_quota_leaks_neither_bytes_nor_records() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let mut config = QueueConfig::on(cpu);
    config.capacity = 8;
    let [allocating, freeing, draft] = [(); 3].map(|()| builder.queue(config));
    let done = semaphore(&mut builder, allocating);
    builder.memory(1, QUOTA);
    // One reservation being used and one being freed: a record never freed stops the soak.
    builder.allocation_records(2);
    let home = builder.endpoint(draft).unwrap();
    builder.semaphore_pool(64, SemaphoreConfig::new(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    let draft_axis = device.axis(draft).unwrap();
    let fresh = || device.create_semaphore_timeout(0, GUARD).expect("a pooled semaphore frees up");
    let fail = |semaphore| device.semaphore(semaphore).unwrap().fail(FAILED);
    let mut drafts = 0;
    let mut committed = 0;
    for round in 0..soak_iterations() {
        let (gate, allocated) = (fresh(), fresh());
        let signal_allocated = [(allocated, 1)];
        // The dealloca runs on another queue, after its alloca and after the gate.
        let after_both = [(allocated, 1), (gate, 1)];
        match round % 5 {
            // The gate fails after the dealloca was submitted.
            0 => {
                submit(&device, allocating, &op(alloca(0), &[], &signal_allocated));
                submit(&device, freeing, &op(dealloca(0), &after_both, &[]));
                fail(gate);
                committed += 1;
            }
            // Before: the dealloca is doomed at submission, and still ordered after its alloca.
            1 => {
                fail(gate);
                submit(&device, allocating, &op(alloca(0), &[], &signal_allocated));
                submit(&device, freeing, &op(dealloca(0), &after_both, &[]));
                committed += 1;
            }
            // The alloca fails; its dealloca, in order behind it, has nothing to give back.
            2 => {
                submit(&device, allocating, &op(alloca(0), &[(gate, 1)], &[]));
                fail(gate);
                submit(&device, allocating, &op(dealloca(0), &[], &[]));
            }
            // The dealloca (3), or the alloca and so its dealloca (4), depend on a draft that
            // is rejected.
            kind => {
                let drafted = fresh();
                submit(&device, draft, &op(Work::Barrier, &[(gate, 1)], &[(drafted, 1)]));
                drafts += 1;
                if kind == 3 {
                    submit(&device, allocating, &op(alloca(0), &[], &signal_allocated));
                    let after_both = [(allocated, 1), (drafted, 1)];
                    submit(&device, freeing, &op(dealloca(0), &after_both, &[]));
                    committed += 1;
                } else {
                    submit(&device, allocating, &op(alloca(0), &[(drafted, 1)], &[]));
                    submit(&device, allocating, &op(dealloca(0), &[], &[]));
                }
                device.cancel_speculative(Rejection::new(draft_axis, drafts - 1));
                device.destroy_semaphore(drafted).unwrap();
            }
        }
        device.destroy_semaphore(gate).unwrap();
        device.destroy_semaphore(allocated).unwrap();
    }
    submit(&device, allocating, &op(alloca(0), &[], &[]));
    submit(&device, allocating, &op(dealloca(0), &[], &[(done, 1)]));
    assert_eq!(reached(&device, done, 1), Ok(1));
    until(|| device.in_flight(freeing) == Some(0), "every dealloca retires");
    assert_eq!(device.committed_bytes(), 0);
    let stats = device.memory_stats();
    assert_eq!(stats.commits, committed + 1);
    assert_eq!(stats.peak_committed, QUOTA);
}

//! `Device::cancel_speculative` behind the seam: on CPU queues alone and on CPU queues mixed
//! with NPU queues (native waits: held waits on CPU work, WAIT descriptors between NPU queues).
//! A rejection while downstream work is queued cancels exactly the operations that depended on
//! the rejected drafts, the rest run, every waiter wakes; an operation already running runs to
//! its end and is reported; 10^4 queued operations are decided and cancelled in one call.
//!
//! Nothing here depends on timing: every queue starts with an operation held behind a host
//! gate, so the rejection always finds the downstream work queued.
#![cfg(all(feature = "hosted", not(loom)))]

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_core::speculation::{Dependence, Rejection};
use causeway_device::{
    Args, Device, DeviceBuilder, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId,
    SemaphoreId, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_npu::NpuBackend;
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

/// The hang guard of every host wait: generous, since the test machines are loaded.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// How long a host wait that cannot end yet (its signaller is held behind a gate) is given
/// before the test looks on: its outcome does not depend on it.
const SHORT: Duration = Duration::from_millis(20);

/// What the observer saw of one operation: its speculation report and how it finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Seen {
    speculative: Option<(Dependence, bool)>,
    status: Option<OpStatus>,
    started: bool,
}

#[derive(Default)]
struct Events {
    ops: Mutex<HashMap<u64, Seen>>,
    changed: Condvar,
}

impl Observer for Events {
    fn op_event(&self, _queue: causeway_device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let mut ops = self.ops.lock().unwrap();
        let seen = ops.entry(tag).or_default();
        match event {
            OpEvent::Started { .. } => seen.started = true,
            OpEvent::Speculative { dependence, started, .. } => {
                seen.speculative = Some((dependence, started))
            }
            OpEvent::Finished { status, .. } => seen.status = Some(status),
            _ => {}
        }
        self.changed.notify_all();
    }
}

impl Events {
    /// Waits until `count` operations have finished, then returns what was seen.
    fn finished(&self, count: usize) -> HashMap<u64, Seen> {
        let ops = self.ops.lock().unwrap();
        let (ops, timeout) = self
            .changed
            .wait_timeout_while(ops, HANG_GUARD, |ops| {
                ops.values().filter(|seen| seen.status.is_some()).count() < count
            })
            .unwrap();
        assert!(!timeout.timed_out(), "operations still unfinished: {:?}", *ops);
        ops.clone()
    }

    fn wait_started(&self, tag: u64) {
        let ops = self.ops.lock().unwrap();
        let (_ops, timeout) = self
            .changed
            .wait_timeout_while(ops, HANG_GUARD, |ops| !ops.get(&tag).is_some_and(|s| s.started))
            .unwrap();
        assert!(!timeout.timed_out(), "operation {tag} never started");
    }
}

fn queue(
    builder: &mut DeviceBuilder,
    driver: causeway_device::DriverId,
    capacity: usize,
) -> QueueId {
    let mut config = QueueConfig::default();
    config.driver = driver;
    config.capacity = capacity;
    builder.queue(config)
}

/// A CPU device with a draft queue and a consumer queue (room for 8 each) and `N` semaphores
/// homed on the draft queue, observed by `events`.
struct DraftAndConsumer<const N: usize> {
    device: Device,
    events: Arc<Events>,
    draft: QueueId,
    consumer: QueueId,
    semaphores: [SemaphoreId; N],
}

fn draft_and_consumer<const N: usize>() -> DraftAndConsumer<N> {
    let events = Arc::new(Events::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let draft = queue(&mut builder, cpu, 8);
    let consumer = queue(&mut builder, cpu, 8);
    let home = builder.endpoint(draft).unwrap();
    let semaphores = [(); N].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    builder.observer(Arc::clone(&events) as Arc<dyn Observer>);
    let device = builder.build().unwrap();
    DraftAndConsumer { device, events, draft, consumer, semaphores }
}

/// Which drivers the downstream queues run on.
#[derive(Clone, Copy, Debug)]
enum Downstream {
    Cpu,
    CpuAndNpu,
}

/// The CPU driver and, per `downstream`, the driver of the other downstream queues (CPU or
/// NPU) with the work they run.
fn drivers(
    builder: &mut causeway_device::DeviceBuilder,
    downstream: Downstream,
) -> (causeway_device::DriverId, causeway_device::DriverId, Work) {
    let cpu = builder.driver(CpuBackend::new());
    let npu_backend = NpuBackend::new();
    let npu_kernel =
        npu_backend.command_buffer(vec![(2, Box::new(|_tile: u32, _: &Args| {}))]).unwrap();
    let npu = builder.driver(npu_backend);
    match downstream {
        Downstream::Cpu => (cpu, cpu, Work::Spin(Duration::from_micros(5))),
        Downstream::CpuAndNpu => (cpu, npu, Work::Execute(npu_kernel)),
    }
}

/// A draft queue proposes four drafts; three downstream queues (one CPU queue and two more, CPU
/// or NPU) consume them, each other's results, and nothing speculative; the verifier accepts
/// two drafts and rejects the rest while everything is queued behind a host gate.
fn rejection_while_downstream_work_is_queued(downstream: Downstream) {
    let events = Arc::new(Events::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let (cpu, other, kernel) = drivers(&mut builder, downstream);
    let draft = queue(&mut builder, cpu, 16);
    let q1 = queue(&mut builder, cpu, 16);
    let q2 = queue(&mut builder, other, 16);
    let q3 = queue(&mut builder, other, 16);
    let home = builder.endpoint(draft).unwrap();
    // Each draft signals a timeline of its own, so each host wait below names one draft (the
    // drafts sharing one timeline is `accepted_work_signals_a_shared_semaphore_after_the_cancel`).
    let [gate, a2_done, b1_done, b2_done, c2_done, after] =
        [(); 6].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let drafts = [(); 5].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let drafted = |k: usize| (drafts[k], 1);
    builder.observer(Arc::clone(&events) as Arc<dyn Observer>);
    let device = builder.build().unwrap();

    let submit = |queue: QueueId,
                  tag: u64,
                  waits: &[(SemaphoreId, u64)],
                  signals: &[(SemaphoreId, u64)],
                  work: Work| {
        device.submit(queue, &Op { waits, signals, work, tag, ..Default::default() }).unwrap()
    };
    // Every queue starts behind the gate (tags 1..=4), so nothing below has started.
    for (tag, &queue) in [draft, q1, q2, q3].iter().enumerate() {
        submit(queue, tag as u64 + 1, &[(gate, 1)], &[], Work::Barrier);
    }
    // Drafts 1..=4 (tags 11..=14), epochs 2..=5 of the draft queue.
    let mut epochs = Vec::new();
    for k in 1..=4u64 {
        let signal = [drafted(k as usize)];
        epochs.push(submit(draft, 10 + k, &[], &signal, Work::Barrier).point.epoch);
    }
    // Downstream (tag: depends on a rejected draft?):
    //   q1: a1 (21) waits draft 1 — accepted;  a2 (22) waits draft 3 — rejected
    //   q2: b1 (31) waits draft 2 — accepted;  b2 (32) waits a2 — rejected, transitively
    //   q3: c1 (41) waits b1 — accepted (a WAIT descriptor between NPU queues);
    //       c2 (42) waits draft 4 — rejected
    submit(q1, 21, &[drafted(1)], &[], Work::Spin(Duration::from_micros(5)));
    submit(q1, 22, &[drafted(3)], &[(a2_done, 1)], Work::Spin(Duration::from_micros(5)));
    submit(q2, 31, &[drafted(2)], &[(b1_done, 1)], kernel);
    submit(q2, 32, &[(a2_done, 1)], &[(b2_done, 1)], kernel);
    submit(q3, 41, &[(b1_done, 1)], &[], kernel);
    submit(q3, 42, &[drafted(4)], &[(c2_done, 1)], kernel);
    let dependent = [13, 14, 22, 32, 42];

    let draft_axis = device.axis(draft).unwrap();
    let report = device.cancel_speculative(Rejection::new(draft_axis, epochs[1]));
    assert_eq!((report.cancelled, report.conservative, report.running), (5, 0, 0));

    // The cascade: a later submission waiting on a cancelled operation's signal is accepted
    // doomed at once; a host waiter on it ends only when the cancelled operation does (its
    // queue is still held behind the gate), since what the operation imported has not ended.
    let late = device
        .submit(
            q3,
            &Op {
                waits: &[(c2_done, 1)],
                signals: &[(after, 1)],
                work: kernel,
                tag: 43,
                ..Default::default()
            },
        )
        .expect("accepted doomed");
    assert_eq!(late.failure, Some(Failure::Cancelled), "decided at submission");
    let waited = wait(device.semaphore(b2_done).unwrap(), 1, Some(SHORT));
    assert_eq!(waited, Err(HostWaitError::TimedOut { value: 0 }));

    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    let waited = wait(device.semaphore(b2_done).unwrap(), 1, Some(HANG_GUARD));
    assert_eq!(waited, Err(HostWaitError::Failed(Failure::Cancelled)));
    let seen = events.finished(4 + 4 + 6 + 1);
    for (&tag, seen) in &seen {
        if dependent.contains(&tag) {
            assert_eq!(seen.status, Some(OpStatus::Cancelled), "op {tag}");
            assert_eq!(seen.speculative, Some((Dependence::Rejected, false)), "op {tag}");
            assert!(!seen.started, "op {tag} never ran");
        } else if tag == 43 {
            assert_eq!(seen.status, Some(OpStatus::Failed(Failure::Cancelled)), "op {tag}");
        } else {
            assert_eq!(seen.status, Some(OpStatus::Ok), "op {tag}");
            assert_eq!(seen.speculative, None, "op {tag}");
        }
    }
    assert_eq!(
        wait(device.semaphore(drafts[3]).unwrap(), 1, Some(HANG_GUARD)),
        Err(HostWaitError::Failed(Failure::Cancelled))
    );
    assert!(wait(device.semaphore(drafts[2]).unwrap(), 1, Some(HANG_GUARD)).is_ok());
    assert!(wait(device.semaphore(b1_done).unwrap(), 1, Some(HANG_GUARD)).is_ok());
    assert_eq!(
        wait(device.semaphore(after).unwrap(), 1, Some(HANG_GUARD)),
        Err(HostWaitError::Failed(Failure::Cancelled))
    );
    let report = device.shutdown(Duration::from_secs(10));
    assert_eq!(report.cancelled, 0, "everything retired before shutdown");
}

#[test]
fn a_rejection_cancels_exactly_the_dependent_work_on_cpu_queues() {
    rejection_while_downstream_work_is_queued(Downstream::Cpu);
}

#[test]
fn a_rejection_cancels_exactly_the_dependent_work_across_cpu_and_npu_queues() {
    rejection_while_downstream_work_is_queued(Downstream::CpuAndNpu);
}

#[test]
fn an_operation_already_running_finishes_and_is_reported() {
    let DraftAndConsumer { device, events, draft, consumer, semaphores: [drafted, consumed] } =
        draft_and_consumer();
    let first = device
        .submit(
            draft,
            &Op {
                waits: &[],
                signals: &[(drafted, 1)],
                work: Work::Barrier,
                tag: 1,
                ..Default::default()
            },
        )
        .unwrap();
    let slow = Work::Sleep(Duration::from_millis(200));
    device
        .submit(
            draft,
            &Op { waits: &[], signals: &[(drafted, 2)], work: slow, tag: 2, ..Default::default() },
        )
        .unwrap();
    let waits = [(drafted, 2)];
    let op = Op {
        waits: &waits,
        signals: &[(consumed, 1)],
        work: Work::Barrier,
        tag: 3,
        ..Default::default()
    };
    device.submit(consumer, &op).unwrap();
    events.wait_started(2);

    let rejection = Rejection::new(device.axis(draft).unwrap(), first.point.epoch);
    let report = device.cancel_speculative(rejection);
    assert_eq!((report.cancelled, report.running), (1, 1));
    let seen = events.finished(3);
    assert_eq!(seen[&2].status, Some(OpStatus::Ok));
    assert_eq!(seen[&2].speculative, Some((Dependence::Rejected, true)));
    assert_eq!(seen[&3].status, Some(OpStatus::Cancelled));
    assert_eq!(
        wait(device.semaphore(consumed).unwrap(), 1, Some(HANG_GUARD)),
        Err(HostWaitError::Failed(Failure::Cancelled))
    );
    // The running operation's signal completed, and its history entry says it ran on rejected
    // work: a later waiter on 2 consumes it, one on the accepted draft's 1 does not.
    let drafted = device.semaphore(drafted).unwrap();
    assert_eq!(wait(drafted, 2, Some(HANG_GUARD)), Ok(2));
    assert!(drafted.ran_on_rejected(2));
    assert!(!drafted.ran_on_rejected(1));
    let marked: Vec<(u64, bool)> =
        drafted.with_history(|h| h.iter().map(|e| (e.value, e.ran_on_rejected)).collect());
    assert_eq!(marked, [(1, false), (2, true)]);
}

#[test]
fn ten_thousand_queued_operations_are_decided_and_the_dependent_half_cancelled() {
    const OPS: usize = 10_000;
    let events = Arc::new(Events::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let draft = queue(&mut builder, cpu, 8);
    let consumer = queue(&mut builder, cpu, OPS + 8);
    let home = builder.endpoint(draft).unwrap();
    let [gate, drafted, last] = [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    builder.observer(Arc::clone(&events) as Arc<dyn Observer>);
    let device = builder.build().unwrap();
    let submit = |queue, waits: &[(SemaphoreId, u64)], signals: &[(SemaphoreId, u64)], tag| {
        device.submit(queue, &Op { waits, signals, work: Work::Barrier, tag, ..Default::default() })
    };
    submit(draft, &[], &[(drafted, 1)], 1).unwrap();
    submit(draft, &[], &[(drafted, 2)], 2).unwrap();
    // Held behind the gate; then half that depends only on the accepted draft, and half from
    // the first wait on the rejected one on (later operations of the queue know it too).
    submit(consumer, &[(gate, 1)], &[], 10).unwrap();
    for k in 0..OPS as u64 {
        let waits: &[(SemaphoreId, u64)] = match k {
            0 => &[(drafted, 1)],
            k if k == OPS as u64 / 2 => &[(drafted, 2)],
            _ => &[],
        };
        let signals: &[(SemaphoreId, u64)] = if k + 1 == OPS as u64 { &[(last, 1)] } else { &[] };
        submit(consumer, waits, signals, 100 + k).unwrap();
    }
    wait(device.semaphore(drafted).unwrap(), 2, Some(HANG_GUARD)).unwrap();
    let first = 1; // the draft queue's first epoch: accepted
    let report = device.cancel_speculative(Rejection::new(device.axis(draft).unwrap(), first));
    // Draft 2 already retired: it is no longer in flight, so the walk does not see it.
    assert_eq!((report.cancelled, report.running), (OPS / 2, 0));
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(
        wait(device.semaphore(last).unwrap(), 1, Some(HANG_GUARD)),
        Err(HostWaitError::Failed(Failure::Cancelled))
    );
    let seen = events.finished(OPS + 3);
    let cancelled = seen.values().filter(|s| s.status == Some(OpStatus::Cancelled)).count();
    let ok = seen.values().filter(|s| s.status == Some(OpStatus::Ok)).count();
    assert_eq!((cancelled, ok), (OPS / 2, OPS / 2 + 3));
    for k in 0..OPS as u64 {
        let expected = if k < OPS as u64 / 2 { OpStatus::Ok } else { OpStatus::Cancelled };
        assert_eq!(seen[&(100 + k)].status, Some(expected), "op {k}");
    }
}

/// Accepted and rejected drafts signal one shared semaphore: the accepted draft reaches 1, the
/// rejected one (held behind a gate) would reach 2. Cancelling fails the values 2 would have
/// reached, yet an accepted consumer queued on `shared ≥ 1` runs, and a host wait on 1
/// succeeds; waits on 2 fail.
#[test]
fn accepted_waiters_on_a_semaphore_shared_with_rejected_work_complete() {
    let DraftAndConsumer {
        device,
        events,
        draft,
        consumer,
        semaphores: [gate, consumer_gate, shared],
    } = draft_and_consumer();
    let submit = |queue, waits: &[(SemaphoreId, u64)], signals: &[(SemaphoreId, u64)], tag| {
        device.submit(queue, &Op { waits, signals, work: Work::Barrier, tag, ..Default::default() })
    };
    submit(draft, &[], &[(shared, 1)], 1).unwrap();
    wait(device.semaphore(shared).unwrap(), 1, Some(HANG_GUARD)).unwrap();
    submit(draft, &[(gate, 1)], &[], 2).unwrap();
    submit(draft, &[], &[(shared, 2)], 3).unwrap();
    submit(consumer, &[(consumer_gate, 1)], &[], 10).unwrap();
    submit(consumer, &[(shared, 1)], &[], 11).unwrap();
    submit(consumer, &[(shared, 2)], &[], 12).unwrap();
    let accepted = 2; // the gated op's epoch: everything up to it is accepted
    let report = device.cancel_speculative(Rejection::new(device.axis(draft).unwrap(), accepted));
    assert_eq!(report.cancelled, 2, "the rejected draft and its consumer");
    // The rejected draft is held behind the gate: a wait on what it would have reached ends
    // when it does.
    assert_eq!(
        wait(device.semaphore(shared).unwrap(), 2, Some(SHORT)),
        Err(HostWaitError::TimedOut { value: 1 })
    );
    assert_eq!(wait(device.semaphore(shared).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    device.semaphore(consumer_gate).unwrap().signal_external(1).unwrap();
    assert_eq!(
        wait(device.semaphore(shared).unwrap(), 2, Some(HANG_GUARD)),
        Err(HostWaitError::Failed(Failure::Cancelled))
    );
    let seen = events.finished(6);
    assert_eq!(seen[&11].status, Some(OpStatus::Ok), "the accepted consumer runs");
    assert_eq!(seen[&3].status, Some(OpStatus::Cancelled));
    assert_eq!(seen[&12].status, Some(OpStatus::Cancelled));
}

/// Accepted and rejected work signal one shared semaphore, and accepted work signals it after
/// the cancellation: the accepted draft reaches 1, the rejected draft (queued behind a gate)
/// would reach 2, a verifier that knows only the accepted draft is queued to reach 3, and
/// another accepted operation, submitted after the cancellation, reaches 4. Only the values 2
/// would have reached fail: the verifier's and the late operation's signals complete, and their
/// waiters — a consumer queued on `shared ≥ 3` and host waits — succeed, while waits on 2 fail
/// after the timeline has passed it too.
fn accepted_work_signals_a_shared_semaphore_after_the_cancel(downstream: Downstream) {
    let events = Arc::new(Events::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let (cpu, other, kernel) = drivers(&mut builder, downstream);
    let draft = queue(&mut builder, cpu, 8);
    let verifier = queue(&mut builder, other, 8);
    let consumer = queue(&mut builder, other, 8);
    let home = builder.endpoint(draft).unwrap();
    let [draft_gate, verifier_gate, consumer_gate, shared] =
        [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    builder.observer(Arc::clone(&events) as Arc<dyn Observer>);
    let device = builder.build().unwrap();
    let submit =
        |queue, waits: &[(SemaphoreId, u64)], signals: &[(SemaphoreId, u64)], work, tag| {
            device.submit(queue, &Op { waits, signals, work, tag, ..Default::default() })
        };
    submit(draft, &[], &[(shared, 1)], Work::Barrier, 1).unwrap();
    // Everything up to the gated operation is accepted.
    let accepted = submit(draft, &[(draft_gate, 1)], &[], Work::Barrier, 2).unwrap().point.epoch;
    submit(draft, &[], &[(shared, 2)], Work::Barrier, 3).unwrap();
    submit(verifier, &[(verifier_gate, 1)], &[], Work::Barrier, 20).unwrap();
    submit(verifier, &[(shared, 1)], &[(shared, 3)], kernel, 21).unwrap();
    submit(consumer, &[(consumer_gate, 1)], &[], Work::Barrier, 30).unwrap();
    submit(consumer, &[(shared, 3)], &[], kernel, 31).unwrap();
    submit(consumer, &[(shared, 2)], &[], kernel, 32).unwrap();

    let rejection = Rejection::new(device.axis(draft).unwrap(), accepted);
    let report = device.cancel_speculative(rejection);
    assert_eq!((report.cancelled, report.running), (2, 0), "the rejected draft and its consumer");
    let semaphore = device.semaphore(shared).unwrap();
    // The rejected draft has not ended (its queue is held behind its gate): a wait on what it
    // would have reached ends only when it does.
    assert_eq!(wait(semaphore, 2, Some(SHORT)), Err(HostWaitError::TimedOut { value: 1 }));
    // Accepted work submitted after the cancellation signals the same timeline.
    let late = submit(verifier, &[], &[(shared, 4)], kernel, 22);
    assert!(late.is_ok(), "accepted work may still signal the shared semaphore: {late:?}");

    for gate in [draft_gate, verifier_gate, consumer_gate] {
        device.semaphore(gate).unwrap().signal_external(1).unwrap();
    }
    let seen = events.finished(9);
    for tag in [1, 2, 20, 21, 22, 30, 31] {
        assert_eq!(seen[&tag].status, Some(OpStatus::Ok), "op {tag}");
        assert_eq!(seen[&tag].speculative, None, "op {tag}");
    }
    for tag in [3, 32] {
        assert_eq!(seen[&tag].status, Some(OpStatus::Cancelled), "op {tag}");
    }
    assert_eq!(wait(semaphore, 3, Some(HANG_GUARD)), Ok(4));
    assert_eq!(wait(semaphore, 4, Some(HANG_GUARD)), Ok(4));
    assert_eq!(semaphore.failure(), None, "the timeline itself did not fail");
    assert_eq!(
        wait(semaphore, 2, Some(HANG_GUARD)),
        Err(HostWaitError::Failed(Failure::Cancelled)),
        "passing a cancelled value does not revive it"
    );
    let report = device.shutdown(Duration::from_secs(10));
    assert_eq!(report.cancelled, 0, "everything retired before shutdown");
}

#[test]
fn accepted_work_signals_a_semaphore_shared_with_cancelled_work_on_cpu_queues() {
    accepted_work_signals_a_shared_semaphore_after_the_cancel(Downstream::Cpu);
}

#[test]
fn accepted_work_signals_a_semaphore_shared_with_cancelled_work_across_cpu_and_npu_queues() {
    accepted_work_signals_a_shared_semaphore_after_the_cancel(Downstream::CpuAndNpu);
}

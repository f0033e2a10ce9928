//! NPU waits on CPU work, natively: a wait of an NPU operation on a value a CPU queue's
//! operation signals is a WAIT descriptor on the NPU driver's mirror of the CPU queue's
//! progress, a semaphore slot the host writes as the CPU queue's operations end
//! (`BackendCapabilities::host_written_waits`, `Backend::mirror_progress`). The NPU operation
//! goes to its ring once the CPU operation has started, while it runs — not before: a CPU
//! operation that has not started may still be cancelled by speculation, and its NPU
//! dependents with it — and the mirror moves however the CPU operation ends — completed,
//! failed, cancelled by speculation, ended at shutdown — so the ring never stalls; whether it
//! succeeded reaches the NPU operation through the layer.
//!
//! Nothing here depends on timing: each CPU operation is held (a host function blocked on a
//! latch, or a wait on a gate only the test opens) until the test has seen what it checks.
#![cfg(all(feature = "hosted", not(loom)))]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_core::speculation::Rejection;
use causeway_device::{
    Args, Device, DeviceBuilder, DriverId, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId,
    SemaphoreConfig, SemaphoreId, WaitOutcome, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_npu::{NpuBackend, NpuCounts, NpuTally};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

/// The hang guard of every host wait: generous, since the test machines are loaded.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// How long a wait that cannot end yet is given before the test looks on: its outcome does not
/// depend on it.
const SHORT: Duration = Duration::from_millis(20);

/// A latch a host function blocks on until the test opens it.
#[derive(Default)]
struct Latch {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Latch {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    /// Blocks until opened; `false` when the hang guard ran out first.
    fn wait(&self) -> bool {
        let open = self.open.lock().unwrap();
        let (open, _) = self.opened.wait_timeout_while(open, HANG_GUARD, |open| !*open).unwrap();
        *open
    }
}

/// Every operation's end, as the observer saw it: (queue, tag, status).
#[derive(Default)]
struct Ends(Mutex<Vec<(usize, u64, OpStatus)>>);

impl Observer for Ends {
    fn op_event(&self, observed: causeway_device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let queue = observed.id.index();
        if let OpEvent::Finished { status, .. } = event {
            self.0.lock().unwrap().push((queue, tag, status));
        }
    }
}

fn builder() -> DeviceBuilder {
    Device::builder(PoolConfig::with_workers(2))
}

/// `N` semaphores homed on `home`, each with room for `history` pending signals.
/// A device being built on the CPU driver and the NPU driver, with an empty one-tile NPU
/// kernel and the NPU driver's tally.
struct CpuAndNpu {
    builder: DeviceBuilder,
    cpu: DriverId,
    npu: DriverId,
    kernel: Work,
    tally: NpuTally,
}

fn cpu_and_npu() -> CpuAndNpu {
    let npu = NpuBackend::new();
    let kernel =
        Work::Execute(npu.command_buffer(vec![(1, Box::new(|_tile: u32, _: &Args| {}))]).unwrap());
    let tally = npu.tally();
    let mut builder = builder();
    let cpu = builder.driver(CpuBackend::new());
    let npu = builder.driver(npu);
    CpuAndNpu { builder, cpu, npu, kernel, tally }
}

/// Shuts `device` down within the hang guard: nothing leaked, no driver left busy.
fn shut_down_clean(device: Device) {
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

fn semaphores<const N: usize>(
    builder: &mut DeviceBuilder,
    home: QueueId,
    history: usize,
) -> [SemaphoreId; N] {
    let home = builder.endpoint(home).unwrap();
    [(); N].map(|()| {
        let mut config = SemaphoreConfig::new(0, Scope::DeviceLocal, home);
        config.history = history;
        builder.semaphore_config(config)
    })
}

fn queue(builder: &mut DeviceBuilder, driver: DriverId, capacity: usize) -> QueueId {
    let mut config = QueueConfig::on(driver);
    config.capacity = capacity;
    builder.queue(config)
}

/// Waits until the NPU driver has emitted `count` WAITs on mirror slots: the NPU operations
/// waiting natively on CPU work are on the ring.
fn wait_for_mirror_waits(tally: &NpuTally, count: u64) -> NpuCounts {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let counts = tally.counts();
        if counts.host_written >= count {
            return counts;
        }
        assert!(Instant::now() < deadline, "never issued: {counts:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn resolution_of(waits: &[WaitOutcome]) -> Resolution {
    match waits {
        [WaitOutcome::Resolved(resolved)] => resolved.resolution,
        other => panic!("one resolved wait expected: {other:?}"),
    }
}

#[test]
fn an_npu_wait_on_a_cpu_operation_is_on_the_ring_before_the_cpu_operation_ends() {
    let produced = Arc::new(AtomicBool::new(false));
    // 0: the kernel has not run; 1: it ran after the CPU operation; 2: it ran before.
    let observed = Arc::new(AtomicU32::new(0));
    let npu = NpuBackend::new();
    let (seen, watched) = (Arc::clone(&observed), Arc::clone(&produced));
    let consume = npu
        .command_buffer(vec![(
            1,
            Box::new(move |_tile: u32, _: &Args| {
                // Acquire pairs with the producer's Release store.
                let after = watched.load(Ordering::Acquire);
                seen.store(if after { 1 } else { 2 }, Ordering::Relaxed);
            }),
        )])
        .unwrap();
    let tally = npu.tally();
    let mut builder = builder();
    let cpu = builder.driver(CpuBackend::new());
    let npu = builder.driver(npu);
    let (cpu_queue, npu_queue) = (queue(&mut builder, cpu, 8), queue(&mut builder, npu, 8));
    let [s, t] = semaphores(&mut builder, cpu_queue, 4);
    let latch = Arc::new(Latch::default());
    let (gate, done) = (Arc::clone(&latch), Arc::clone(&produced));
    let produce = builder.host_call(move |_| {
        if !gate.wait() {
            return Err(Failure::Application(1));
        }
        // Release pairs with the kernel's Acquire load.
        done.store(true, Ordering::Release);
        Ok(())
    });
    let device = builder.build().unwrap();

    let producer = Op {
        waits: &[],
        signals: &[(s, 1)],
        work: Work::Host(produce),
        tag: 1,
        ..Default::default()
    };
    let produced_at = device.submit(cpu_queue, &producer).unwrap().point;
    let consumer = Op {
        waits: &[(s, 1)],
        signals: &[(t, 1)],
        work: Work::Execute(consume),
        tag: 2,
        ..Default::default()
    };
    let receipt = device.submit(npu_queue, &consumer).unwrap();
    assert_eq!(resolution_of(&receipt.waits), Resolution::DeviceWait, "native, not held");
    assert_eq!(
        receipt.frontier.get(device.axis(cpu_queue).unwrap()),
        Some(produced_at.epoch),
        "it imports the CPU operation, as a held wait does"
    );

    // The CPU operation has started (its host function is blocked on the latch) and cannot
    // end before the latch opens: the WAIT is on the ring while it runs, and holds the NPU
    // operation there.
    let counts = wait_for_mirror_waits(&tally, 1);
    assert_eq!((counts.emitted, counts.host_written, counts.held), (1, 1, 0), "{counts:?}");
    assert_eq!(
        wait(device.semaphore(t).unwrap(), 1, Some(SHORT)),
        Err(HostWaitError::TimedOut { value: 0 })
    );
    assert_eq!(observed.load(Ordering::Relaxed), 0, "the kernel ran before its wait was met");

    latch.open();
    assert_eq!(wait(device.semaphore(t).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    assert_eq!(
        observed.load(Ordering::Relaxed),
        1,
        "the kernel ran before the CPU operation ended"
    );
    let resolved = device.resolution_counts(npu_queue).unwrap();
    assert_eq!((resolved.device, resolved.held), (1, 0), "{resolved:?}");
    shut_down_clean(device);
}

/// The NPU queue waits natively on a CPU operation that has not started when it registers, so
/// the CPU operation's start wakes it — from inside the CPU queue's drain, which holds such a
/// wake back for its own worker. The CPU operation's host function then blocks until the NPU
/// operation is on the ring: the held wake must go to another worker before the host function
/// runs, or neither ever moves.
#[test]
fn a_native_waiter_woken_by_its_origins_start_is_issued_while_the_origin_blocks() {
    let CpuAndNpu { mut builder, cpu, npu, kernel, tally } = cpu_and_npu();
    let (cpu_queue, npu_queue) = (queue(&mut builder, cpu, 8), queue(&mut builder, npu, 8));
    let [go, s, t] = semaphores(&mut builder, cpu_queue, 4);
    let issued = Arc::new(Latch::default());
    let seen = Arc::clone(&issued);
    let blocks = builder.host_call(move |_| {
        // Opened by the test once the NPU driver emitted the WAIT for this very operation.
        if seen.wait() {
            Ok(())
        } else {
            Err(Failure::Application(1))
        }
    });
    let device = builder.build().unwrap();

    let origin = Op {
        waits: &[(go, 1)],
        signals: &[(s, 1)],
        work: Work::Host(blocks),
        tag: 1,
        ..Default::default()
    };
    device.submit(cpu_queue, &origin).unwrap();
    let waiter =
        Op { waits: &[(s, 1)], signals: &[(t, 1)], work: kernel, tag: 2, ..Default::default() };
    let receipt = device.submit(npu_queue, &waiter).unwrap();
    assert_eq!(resolution_of(&receipt.waits), Resolution::DeviceWait);
    // Only now may the origin start: its start is what wakes the NPU queue. The pause lets the
    // NPU queue look at its head and register for that start first (the order under test);
    // in the other order it sees the start itself, and the test still passes.
    std::thread::sleep(Duration::from_millis(50));
    device.semaphore(go).unwrap().signal_external(1).unwrap();
    wait_for_mirror_waits(&tally, 1);
    issued.open();
    assert_eq!(wait(device.semaphore(t).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    shut_down_clean(device);
}

#[test]
fn a_failed_cpu_origin_fails_its_native_npu_waiter_and_the_ring_goes_on() {
    let CpuAndNpu { mut builder, cpu, npu, kernel, tally } = cpu_and_npu();
    let (cpu_queue, npu_queue) = (queue(&mut builder, cpu, 8), queue(&mut builder, npu, 8));
    let [s, t, u, v, w] = semaphores(&mut builder, cpu_queue, 4);
    let latch = Arc::new(Latch::default());
    let gate = Arc::clone(&latch);
    let fail = builder.host_call(move |_| {
        gate.wait();
        Err(Failure::Application(7))
    });
    let device = builder.build().unwrap();

    let failing =
        Op { waits: &[], signals: &[(s, 1)], work: Work::Host(fail), tag: 1, ..Default::default() };
    device.submit(cpu_queue, &failing).unwrap();
    let waiter =
        Op { waits: &[(s, 1)], signals: &[(t, 1)], work: kernel, tag: 2, ..Default::default() };
    let receipt = device.submit(npu_queue, &waiter).unwrap();
    assert_eq!(resolution_of(&receipt.waits), Resolution::DeviceWait);
    // Behind the waiter on the same ring: it runs only if the ring moves past the WAIT.
    let later = Op { waits: &[], signals: &[(u, 1)], work: kernel, tag: 3, ..Default::default() };
    device.submit(npu_queue, &later).unwrap();
    wait_for_mirror_waits(&tally, 1);

    latch.open();
    let failed = Err(HostWaitError::Failed(Failure::Application(7)));
    assert_eq!(wait(device.semaphore(t).unwrap(), 1, Some(HANG_GUARD)), failed);
    assert_eq!(wait(device.semaphore(u).unwrap(), 1, Some(HANG_GUARD)), Ok(1));

    // The mirror passed the failed operation: a native wait on the CPU queue's next one is met.
    let next =
        Op { waits: &[], signals: &[(v, 1)], work: Work::Barrier, tag: 4, ..Default::default() };
    device.submit(cpu_queue, &next).unwrap();
    let after =
        Op { waits: &[(v, 1)], signals: &[(w, 1)], work: kernel, tag: 5, ..Default::default() };
    device.submit(npu_queue, &after).unwrap();
    assert_eq!(wait(device.semaphore(w).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    shut_down_clean(device);
}

#[test]
fn a_cpu_draft_rejected_before_it_started_cancels_its_npu_dependent_which_was_never_issued() {
    let CpuAndNpu { mut builder, cpu, npu, kernel, tally } = cpu_and_npu();
    let ends = Arc::new(Ends::default());
    let (draft_queue, npu_queue) = (queue(&mut builder, cpu, 8), queue(&mut builder, npu, 8));
    let [gate, drafted, consumed, later_done] = semaphores(&mut builder, draft_queue, 4);
    builder.observer(ends.clone());
    let device = builder.build().unwrap();

    // The draft waits on a gate nobody opens before the rejection, so it has not started; the
    // NPU operation waits on it natively, and stays off the ring until it starts.
    let draft = Op {
        waits: &[(gate, 1)],
        signals: &[(drafted, 1)],
        work: Work::Barrier,
        tag: 1,
        ..Default::default()
    };
    let draft_at = device.submit(draft_queue, &draft).unwrap().point;
    let waiter = Op {
        waits: &[(drafted, 1)],
        signals: &[(consumed, 1)],
        work: kernel,
        tag: 2,
        ..Default::default()
    };
    let receipt = device.submit(npu_queue, &waiter).unwrap();
    assert_eq!(resolution_of(&receipt.waits), Resolution::DeviceWait, "native, not held");
    assert_eq!(
        wait(device.semaphore(consumed).unwrap(), 1, Some(SHORT)),
        Err(HostWaitError::TimedOut { value: 0 })
    );
    assert_eq!(tally.counts().emitted, 0, "issued before its origin started");

    // Accepted through the operation before the draft: the draft is rejected, and the NPU
    // operation that depends on it is cancelled with it.
    let rejection = Rejection::new(device.axis(draft_queue).unwrap(), draft_at.epoch - 1);
    let report = device.cancel_speculative(rejection);
    assert_eq!((report.cancelled, report.running), (2, 0), "{report:?}");
    let cancelled = Err(HostWaitError::Failed(Failure::Cancelled));
    assert_eq!(wait(device.semaphore(drafted).unwrap(), 1, Some(HANG_GUARD)), cancelled);
    assert_eq!(wait(device.semaphore(consumed).unwrap(), 1, Some(HANG_GUARD)), cancelled);

    // The ring goes on; the cancelled operation never reached it.
    let later =
        Op { waits: &[], signals: &[(later_done, 1)], work: kernel, tag: 3, ..Default::default() };
    device.submit(npu_queue, &later).unwrap();
    assert_eq!(wait(device.semaphore(later_done).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    let counts = tally.counts();
    assert_eq!((counts.emitted, counts.host_written), (0, 0), "{counts:?}");
    shut_down_clean(device);
    let ends = ends.0.lock().unwrap();
    assert!(ends.contains(&(draft_queue.index(), 1, OpStatus::Cancelled)), "{ends:?}");
    assert!(ends.contains(&(npu_queue.index(), 2, OpStatus::Cancelled)), "{ends:?}");
    assert!(ends.contains(&(npu_queue.index(), 3, OpStatus::Ok)), "{ends:?}");
}

#[test]
fn a_cpu_draft_rejected_while_it_runs_leaves_its_issued_npu_dependent_running() {
    let CpuAndNpu { mut builder, cpu, npu, kernel, tally } = cpu_and_npu();
    let ends = Arc::new(Ends::default());
    let (draft_queue, npu_queue) = (queue(&mut builder, cpu, 8), queue(&mut builder, npu, 8));
    let [drafted, consumed] = semaphores(&mut builder, draft_queue, 4);
    let latch = Arc::new(Latch::default());
    let gate = Arc::clone(&latch);
    let run = builder.host_call(move |_| {
        gate.wait();
        Ok(())
    });
    builder.observer(ends.clone());
    let device = builder.build().unwrap();

    // The draft has started (blocked on the latch): the NPU operation's WAIT is on the ring.
    let draft = Op {
        waits: &[],
        signals: &[(drafted, 1)],
        work: Work::Host(run),
        tag: 1,
        ..Default::default()
    };
    let draft_at = device.submit(draft_queue, &draft).unwrap().point;
    let waiter = Op {
        waits: &[(drafted, 1)],
        signals: &[(consumed, 1)],
        work: kernel,
        tag: 2,
        ..Default::default()
    };
    device.submit(npu_queue, &waiter).unwrap();
    wait_for_mirror_waits(&tally, 1);

    // Neither can be cancelled any more: both are reported as running on rejected work.
    let rejection = Rejection::new(device.axis(draft_queue).unwrap(), draft_at.epoch - 1);
    let report = device.cancel_speculative(rejection);
    assert_eq!((report.cancelled, report.running), (0, 2), "{report:?}");
    latch.open();
    // They run to their ends, in order.
    let outcome = wait(device.semaphore(consumed).unwrap(), 1, Some(HANG_GUARD));
    shut_down_clean(device);
    let ends = ends.0.lock().unwrap();
    assert_eq!(outcome, Ok(1), "{ends:?}");
    assert_eq!(
        *ends,
        [(draft_queue.index(), 1, OpStatus::Ok), (npu_queue.index(), 2, OpStatus::Ok)]
    );
}

#[test]
fn an_npu_dependent_cancelled_as_its_cpu_origin_starts_never_ends_before_the_origin() {
    // The rejection lands while the CPU operation starts, racing the NPU queue, which its start
    // wakes to issue the dependent: the dependent is issued (reported running) or cancelled
    // just before its issue. Cancelled, it imported the origin all the same (its frontier names
    // it, and what follows it on the NPU queue relies on that), so it ends only once the origin
    // has. Each round races once; the unlucky interleaving is rare, hence many rounds.
    const ROUNDS: u64 = 2_000;
    let CpuAndNpu { mut builder, cpu, npu, kernel, .. } = cpu_and_npu();
    let ends = Arc::new(Ends::default());
    let room = 4;
    let (draft_queue, npu_queue) = (queue(&mut builder, cpu, room), queue(&mut builder, npu, room));
    let [drafted] = semaphores(&mut builder, draft_queue, room);
    let started = Arc::new(AtomicU64::new(0));
    let latch = Arc::new(Mutex::new(0_u64));
    let (mark, gate) = (Arc::clone(&started), Arc::clone(&latch));
    let run = builder.host_call(move |_| {
        // Release pairs with the test's Acquire load: the round's draft is running.
        let round = mark.fetch_add(1, Ordering::Release) + 1;
        let deadline = Instant::now() + HANG_GUARD;
        while *gate.lock().unwrap() < round && Instant::now() < deadline {
            std::thread::yield_now();
        }
        Ok(())
    });
    builder.observer(ends.clone());
    let device = builder.build().unwrap();
    let mut cancelled = 0;
    for round in 1..=ROUNDS {
        let draft = Op {
            waits: &[],
            signals: &[(drafted, round)],
            work: Work::Host(run),
            tag: round,
            ..Default::default()
        };
        let draft_at = device.submit(draft_queue, &draft).unwrap().point;
        let waiter = Op {
            waits: &[(drafted, round)],
            signals: &[],
            work: kernel,
            tag: round,
            ..Default::default()
        };
        let receipt = device.submit(npu_queue, &waiter).unwrap();
        assert_eq!(resolution_of(&receipt.waits), Resolution::DeviceWait, "round {round}");
        // Acquire pairs with the host function's Release increment.
        while started.load(Ordering::Acquire) < round {
            std::hint::spin_loop();
        }
        let rejection = Rejection::new(device.axis(draft_queue).unwrap(), draft_at.epoch - 1);
        cancelled += device.cancel_speculative(rejection).cancelled;
        // The draft still runs: neither may have ended yet.
        std::thread::yield_now();
        let early = ends.0.lock().unwrap().iter().any(|&(_, tag, _)| tag == round);
        *latch.lock().unwrap() = round;
        assert!(!early, "round {round}: an end before the draft's: {:?}", ends.0.lock().unwrap());
        assert_eq!(wait(device.semaphore(drafted).unwrap(), round, Some(HANG_GUARD)), Ok(round));
        let deadline = Instant::now() + HANG_GUARD;
        while ends.0.lock().unwrap().iter().filter(|&&(_, tag, _)| tag == round).count() < 2 {
            assert!(Instant::now() < deadline, "round {round} never ended");
            std::thread::yield_now();
        }
        let ends = ends.0.lock().unwrap();
        let order: Vec<_> = ends.iter().filter(|&&(_, tag, _)| tag == round).collect();
        assert_eq!(
            order[0],
            &(draft_queue.index(), round, OpStatus::Ok),
            "round {round}: {order:?}"
        );
    }
    println!("{cancelled} of {ROUNDS} NPU dependents cancelled before their issue");
    shut_down_clean(device);
}

#[test]
fn a_cpu_origin_that_fails_before_it_starts_fails_its_npu_waiter_which_was_never_issued() {
    let CpuAndNpu { mut builder, cpu, npu, kernel, tally } = cpu_and_npu();
    let (cpu_queue, npu_queue) = (queue(&mut builder, cpu, 8), queue(&mut builder, npu, 8));
    let [gate, s, t, u] = semaphores(&mut builder, cpu_queue, 4);
    let device = builder.build().unwrap();

    // The origin waits on a gate that fails: it fails without starting.
    let origin = Op {
        waits: &[(gate, 1)],
        signals: &[(s, 1)],
        work: Work::Barrier,
        tag: 1,
        ..Default::default()
    };
    device.submit(cpu_queue, &origin).unwrap();
    let waiter =
        Op { waits: &[(s, 1)], signals: &[(t, 1)], work: kernel, tag: 2, ..Default::default() };
    let receipt = device.submit(npu_queue, &waiter).unwrap();
    assert_eq!(resolution_of(&receipt.waits), Resolution::DeviceWait);
    let later = Op { waits: &[], signals: &[(u, 1)], work: kernel, tag: 3, ..Default::default() };
    device.submit(npu_queue, &later).unwrap();
    assert_eq!(tally.counts().emitted, 0, "issued before its origin started");

    device.semaphore(gate).unwrap().fail(Failure::Application(9));
    let failed = Err(HostWaitError::Failed(Failure::Application(9)));
    assert_eq!(wait(device.semaphore(t).unwrap(), 1, Some(HANG_GUARD)), failed);
    assert_eq!(wait(device.semaphore(u).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    // The waiter ended without reaching the ring: no WAIT was emitted.
    let counts = tally.counts();
    assert_eq!((counts.emitted, counts.host_written), (0, 0), "{counts:?}");
    shut_down_clean(device);
}

#[test]
fn shutdown_with_npu_waits_on_cpu_work_not_started_ends_every_operation_unissued() {
    let CpuAndNpu { mut builder, cpu, npu, kernel, tally } = cpu_and_npu();
    let ends = Arc::new(Ends::default());
    let (cpu_queue, npu_queue, last_queue) =
        (queue(&mut builder, cpu, 8), queue(&mut builder, npu, 8), queue(&mut builder, cpu, 8));
    let [never, s, t, u] = semaphores(&mut builder, cpu_queue, 4);
    builder.observer(ends.clone());
    let device = builder.build().unwrap();

    // The CPU operation waits on a gate nobody opens: it never starts, and ends only at
    // shutdown, cancelled. The NPU operation waiting on it natively stays off the ring (and the
    // one behind it with it), and a CPU operation waits on the NPU.
    let origin = Op {
        waits: &[(never, 1)],
        signals: &[(s, 1)],
        work: Work::Barrier,
        tag: 1,
        ..Default::default()
    };
    device.submit(cpu_queue, &origin).unwrap();
    let waiter =
        Op { waits: &[(s, 1)], signals: &[(t, 1)], work: kernel, tag: 2, ..Default::default() };
    device.submit(npu_queue, &waiter).unwrap();
    let behind = Op { waits: &[], signals: &[(u, 1)], work: kernel, tag: 3, ..Default::default() };
    device.submit(npu_queue, &behind).unwrap();
    let last =
        Op { waits: &[(t, 1)], signals: &[], work: Work::Barrier, tag: 4, ..Default::default() };
    device.submit(last_queue, &last).unwrap();
    assert_eq!(
        wait(device.semaphore(u).unwrap(), 1, Some(SHORT)),
        Err(HostWaitError::TimedOut { value: 0 })
    );

    let report = device.shutdown(Duration::from_secs(10));
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    let ends = ends.0.lock().unwrap();
    assert_eq!(ends.len(), 4, "every operation ended once: {ends:?}");
    assert!(ends.contains(&(cpu_queue.index(), 1, OpStatus::Cancelled)), "{ends:?}");
    let status_of = |tag: u64| ends.iter().find(|end| end.1 == tag).map(|end| end.2);
    // The NPU operations were never issued: cancelled at shutdown, not failed on the device.
    assert_eq!(status_of(2), Some(OpStatus::Cancelled), "{ends:?}");
    assert_eq!(status_of(3), Some(OpStatus::Cancelled), "{ends:?}");
    assert!(matches!(status_of(4), Some(OpStatus::Failed(_) | OpStatus::Cancelled)), "{ends:?}");
    assert_eq!(tally.counts().emitted, 0, "{:?}", tally.counts());
}

#[test]
fn ten_thousand_operations_of_cpu_npu_ping_pong_wait_natively_every_time() {
    const ROUNDS: u64 = 5_000;
    let (cpu_count, npu_count, out_of_order) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let npu = NpuBackend::new();
    let (cpu_seen, npu_done, bad) =
        (Arc::clone(&cpu_count), Arc::clone(&npu_count), Arc::clone(&out_of_order));
    let pong_kernel = npu.command_buffer(vec![(
        1,
        Box::new(move |_tile: u32, _: &Args| {
            // Acquire pairs with the host function's release increment: round r of the NPU
            // runs after round r of the CPU.
            let cpu = cpu_seen.load(Ordering::Acquire);
            let npu = npu_done.fetch_add(1, Ordering::AcqRel) + 1;
            if cpu != npu {
                bad.fetch_add(1, Ordering::Relaxed);
            }
        }),
    )]);
    let pong_kernel = Work::Execute(pong_kernel.unwrap());
    let tally = npu.tally();
    let mut builder = builder();
    let cpu = builder.driver(CpuBackend::new());
    let npu = builder.driver(npu);
    let room = ROUNDS as usize + 1;
    let (cpu_queue, npu_queue) = (queue(&mut builder, cpu, room), queue(&mut builder, npu, room));
    let [gate] = semaphores(&mut builder, cpu_queue, 2);
    let [ping, pong] = semaphores(&mut builder, cpu_queue, room + 1);
    let (npu_seen, cpu_done, bad) =
        (Arc::clone(&npu_count), Arc::clone(&cpu_count), Arc::clone(&out_of_order));
    let ping_call = builder.host_call(move |_| {
        // Acquire pairs with the kernel's AcqRel increment: round r of the CPU runs after round
        // r - 1 of the NPU.
        let npu = npu_seen.load(Ordering::Acquire);
        let cpu = cpu_done.fetch_add(1, Ordering::AcqRel) + 1;
        if npu + 1 != cpu {
            bad.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    let device = builder.build().unwrap();

    // Everything queued behind the gate: every NPU wait is on a CPU operation still to run.
    for round in 1..=ROUNDS {
        let previous = if round == 1 { (gate, 1) } else { (pong, round - 1) };
        let ping_op = Op {
            waits: &[previous],
            signals: &[(ping, round)],
            work: Work::Host(ping_call),
            tag: round,
            ..Default::default()
        };
        device.submit(cpu_queue, &ping_op).unwrap();
        let pong_op = Op {
            waits: &[(ping, round)],
            signals: &[(pong, round)],
            work: pong_kernel,
            tag: round,
            ..Default::default()
        };
        let receipt = device.submit(npu_queue, &pong_op).unwrap();
        assert_eq!(resolution_of(&receipt.waits), Resolution::DeviceWait, "round {round}");
    }
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(pong).unwrap(), ROUNDS, Some(HANG_GUARD)), Ok(ROUNDS));
    assert_eq!(out_of_order.load(Ordering::Relaxed), 0, "a round ran before its wait was met");
    let counts = tally.counts();
    assert_eq!(
        (counts.emitted, counts.host_written, counts.held, counts.elided),
        (ROUNDS, ROUNDS, 0, 0),
        "{counts:?}"
    );
    let resolved = device.resolution_counts(npu_queue).unwrap();
    assert_eq!((resolved.device, resolved.held), (ROUNDS, 0), "{resolved:?}");
    shut_down_clean(device);
}

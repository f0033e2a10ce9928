//! The NPU driver behind the device layer's seam, on the software device model, with the real
//! CPU driver beside it: NPU queues share semaphores and frontiers with CPU queues, device
//! waits between NPU queues are WAIT descriptors (one per device-wait resolution, none for
//! anything else), failures cross drivers both ways with the device's completion codes, a full
//! ring is answered busy, and shutdown ends every operation, aborting a kernel that blocks. The
//! contract every driver keeps (native-wait ping-pong counted exactly, 10^5 operations, and the
//! rest) is the conformance suite's, in `tests/conformance.rs`.
//!
//! Nothing here depends on timing: where a resolution would depend on how far the device got,
//! the work is held behind a host gate until every submission is resolved.
#![cfg(all(feature = "hosted", not(loom)))]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Args, Device, DeviceBuilder, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId,
    SemaphoreId, SubmitError, WaitOutcome, Work,
};
use causeway_driver_cpu::{CpuBackend, DeviceKernel};
use causeway_driver_npu::backend::MIN_RING_ORDER;
use causeway_driver_npu::{
    Command, CompletionError, Descriptor, DescriptorError, NpuBackend, NpuCounts, RawDescriptor,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

/// The hang guard of every host wait: generous, since the test machines are loaded.
const HANG_GUARD: Duration = Duration::from_secs(120);
const ELEMENTS: usize = 1024;
const TILES: u32 = 4;

/// An f32 buffer shared by kernels and the test, elements as bits (each element belongs to one
/// tile, and one ring runs its descriptors in order, so relaxed accesses suffice).
type Buffer = Arc<[AtomicU32]>;

fn buffer(value: impl Fn(usize) -> f32) -> Buffer {
    (0..ELEMENTS).map(|i| AtomicU32::new(value(i).to_bits())).collect()
}

fn read(buffer: &Buffer) -> Vec<f32> {
    buffer.iter().map(|bits| f32::from_bits(bits.load(Ordering::Relaxed))).collect()
}

fn tile_range(tile: u32) -> std::ops::Range<usize> {
    let per_tile = ELEMENTS.div_ceil(TILES as usize);
    let start = (tile as usize * per_tile).min(ELEMENTS);
    start..(start + per_tile).min(ELEMENTS)
}

/// `c = a + b`, tile by tile.
fn add(a: &Buffer, b: &Buffer, c: &Buffer) -> DeviceKernel {
    let (a, b, c) = (Arc::clone(a), Arc::clone(b), Arc::clone(c));
    Box::new(move |tile: u32, _: &Args| {
        for i in tile_range(tile) {
            let sum = f32::from_bits(a[i].load(Ordering::Relaxed))
                + f32::from_bits(b[i].load(Ordering::Relaxed));
            c[i].store(sum.to_bits(), Ordering::Relaxed);
        }
    })
}

/// `y = 2x + y`, tile by tile.
fn saxpy(x: &Buffer, y: &Buffer) -> DeviceKernel {
    let (x, y) = (Arc::clone(x), Arc::clone(y));
    Box::new(move |tile: u32, _: &Args| {
        for i in tile_range(tile) {
            let value = 2.0 * f32::from_bits(x[i].load(Ordering::Relaxed))
                + f32::from_bits(y[i].load(Ordering::Relaxed));
            y[i].store(value.to_bits(), Ordering::Relaxed);
        }
    })
}

fn resolution_of(waits: &[WaitOutcome]) -> Resolution {
    match waits {
        [WaitOutcome::Resolved(resolved)] => resolved.resolution,
        other => panic!("one resolved wait: {other:?}"),
    }
}

fn semaphores<const N: usize>(builder: &mut DeviceBuilder, home: QueueId) -> [SemaphoreId; N] {
    let home = builder.endpoint(home).unwrap();
    [(); N].map(|()| builder.semaphore(0, Scope::DeviceLocal, home))
}

fn builder() -> DeviceBuilder {
    Device::builder(PoolConfig::with_workers(2))
}

/// WAIT descriptors emitted, waits elided (or satisfied) and waits held.
fn waits(counts: NpuCounts) -> (u64, u64, u64) {
    (counts.emitted, counts.elided, counts.held)
}

/// What the resolutions of `queues` asked of the NPU driver, as [`waits`] counts it.
fn resolved_waits(device: &Device, queues: &[QueueId]) -> (u64, u64, u64) {
    let (mut device_waits, mut elided, mut held) = (0, 0, 0);
    for &queue in queues {
        let resolved = device.resolution_counts(queue).unwrap();
        device_waits += resolved.device;
        elided += resolved.elided + resolved.satisfied;
        held += resolved.held;
    }
    (device_waits, elided, held)
}

#[test]
fn cpu_to_npu_to_cpu_the_results_are_right_and_knowledge_crosses_transitively() {
    let npu = NpuBackend::new();
    let (a, b, c, y) = (buffer(|_| 0.0), buffer(|_| 0.0), buffer(|_| 0.0), buffer(|_| 1.0));
    let sum = Work::Execute(npu.command_buffer(vec![(TILES, add(&a, &b, &c))]).unwrap());
    let scale = Work::Execute(npu.command_buffer(vec![(TILES, saxpy(&c, &y))]).unwrap());
    let tally = npu.tally();
    let mut builder = builder();
    let cpu = builder.driver(CpuBackend::new());
    let npu = builder.driver(npu);
    let (producer, adder, scaler, consumer) = (
        builder.queue(QueueConfig::on(cpu)),
        builder.queue(QueueConfig::on(npu)),
        builder.queue(QueueConfig::on(npu)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let [gate, inputs, sums, scaled, checked] = semaphores(&mut builder, producer);
    let (a_in, b_in) = (Arc::clone(&a), Arc::clone(&b));
    let write = builder.host_call(move |_| {
        for i in 0..ELEMENTS {
            a_in[i].store((i as f32).to_bits(), Ordering::Relaxed);
            b_in[i].store((0.5 * i as f32).to_bits(), Ordering::Relaxed);
        }
        Ok(())
    });
    let wrong = Arc::new(AtomicU32::new(u32::MAX));
    let (wrong_seen, y_out) = (Arc::clone(&wrong), Arc::clone(&y));
    let check = builder.host_call(move |_| {
        let y = read(&y_out);
        let wrong = (0..ELEMENTS).filter(|&i| y[i] != 3.0 * i as f32 + 1.0).count();
        wrong_seen.store(wrong as u32, Ordering::Relaxed);
        Ok(())
    });
    let device = builder.build().unwrap();

    // Held behind a host gate, so every resolution below is decided before anything runs.
    let write_op = Op {
        waits: &[(gate, 1)],
        signals: &[(inputs, 1)],
        work: Work::Host(write),
        tag: 1,
        ..Default::default()
    };
    device.submit(producer, &write_op).unwrap();
    // On a CPU queue's work: a WAIT descriptor on the driver's mirror of the producer's
    // progress, which the host writes as the producer's operations end.
    let add_op = Op {
        waits: &[(inputs, 1)],
        signals: &[(sums, 1)],
        work: sum,
        tag: 2,
        ..Default::default()
    };
    let resolved = resolution_of(&device.submit(adder, &add_op).unwrap().waits);
    assert_eq!(resolved, Resolution::DeviceWait);
    // Between NPU queues: a WAIT descriptor on the adder's progress slot.
    let scale_op = Op {
        waits: &[(sums, 1)],
        signals: &[(scaled, 1)],
        work: scale,
        tag: 3,
        ..Default::default()
    };
    let resolved = resolution_of(&device.submit(scaler, &scale_op).unwrap().waits);
    assert_eq!(resolved, Resolution::DeviceWait);
    let check_op = Op {
        waits: &[(scaled, 1)],
        signals: &[(checked, 1)],
        work: Work::Host(check),
        tag: 4,
        ..Default::default()
    };
    device.submit(consumer, &check_op).unwrap();
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(checked).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "every element right");

    // The consumer never waited on the producer or the adder, but learned of both through the
    // scaler's signal: its waits on the inputs and the sums are elided.
    for semaphore in [inputs, sums] {
        let again = Op {
            waits: &[(semaphore, 1)],
            signals: &[],
            work: Work::Barrier,
            tag: 5,
            ..Default::default()
        };
        let resolved = resolution_of(&device.submit(consumer, &again).unwrap().waits);
        assert_eq!(resolved, Resolution::Elided);
    }
    assert_eq!(waits(tally.counts()), (2, 0, 0), "{:?}", tally.counts());
    assert_eq!(tally.counts().host_written, 1, "{:?}", tally.counts());
    assert_eq!(waits(tally.counts()), resolved_waits(&device, &[adder, scaler]));
    // The device's one statistics entry point shows the same: the driver's own counters beside
    // the layer's resolutions.
    let stats = device.stats();
    let npu_counter = |name| stats.counter("npu", name).expect("the NPU driver counts it");
    assert_eq!(npu_counter("waits_emitted"), tally.counts().emitted);
    assert_eq!(npu_counter("waits_host_written"), tally.counts().host_written);
    assert_eq!(npu_counter("waits_held"), tally.counts().held);
    assert_eq!(stats.counter("cpu", "waits_emitted"), None, "the CPU driver counts nothing");
    let on_npu = [adder, scaler].map(|queue| stats.queue(queue).expect("a queue of the device"));
    assert_eq!(on_npu.map(|queue| queue.in_flight), [0, 0]);
    assert_eq!(
        on_npu.iter().map(|queue| queue.resolutions.device).sum::<u64>(),
        tally.counts().emitted
    );
    assert!(on_npu.iter().all(|queue| queue.submitted > 0));
    assert_eq!(stats.driver_faults, 0);
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

/// A kernel that blocks its engine until the gate opens.
#[derive(Default)]
struct KernelGate {
    /// Whether a kernel has entered, and whether the gate is open.
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

impl KernelGate {
    fn kernel(self: &Arc<Self>) -> DeviceKernel {
        let gate = Arc::clone(self);
        Box::new(move |_tile: u32, _: &Args| {
            let mut state = gate.state.lock().unwrap();
            state.0 = true;
            gate.changed.notify_all();
            drop(gate.changed.wait_while(state, |(_, open)| !*open).unwrap());
        })
    }

    /// Waits until a kernel has entered: its operation is on the device.
    fn wait_entered(&self) {
        let state = self.state.lock().unwrap();
        drop(self.changed.wait_while(state, |(entered, _)| !*entered).unwrap());
    }

    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

#[test]
fn each_exec_carries_its_operations_arguments_through_the_ring_to_the_kernel() {
    // One recorded buffer, executed 1,000 times with different arguments, on a ring of 32
    // descriptors (so the ring wraps many times and slots are reused with new arguments).
    const EXECUTIONS: u64 = 1_000;
    let sums: Arc<[AtomicU64]> = (0..TILES).map(|_| AtomicU64::new(0)).collect();
    let wrong = Arc::new(AtomicU64::new(0));
    let kernel: DeviceKernel = Box::new({
        let (sums, wrong) = (Arc::clone(&sums), Arc::clone(&wrong));
        move |tile: u32, args: &Args| {
            sums[tile as usize].fetch_add(args.u64(0), Ordering::Relaxed);
            let matches = args.u32(2) == !(args.u64(0) as u32) && args.u64(3) == 7;
            wrong.fetch_add(u64::from(!matches), Ordering::Relaxed);
        }
    });
    let npu = NpuBackend::new().with_ring_order(MIN_RING_ORDER).unwrap();
    let buffer = Work::Execute(npu.command_buffer(vec![(TILES, kernel)]).unwrap());
    let mut builder = builder();
    let npu = builder.driver(npu);
    let queue = builder.queue(QueueConfig::on(npu));
    let [done] = semaphores(&mut builder, queue);
    let device = builder.build().unwrap();
    for execution in 0..EXECUTIONS {
        let args =
            Args::NONE.with_u64(0, execution).with_u32(2, !(execution as u32)).with_u64(3, 7);
        let signals = [(done, execution + 1)];
        let op = Op { signals: &signals, work: buffer, args, tag: execution, ..Op::default() };
        device.submit_timeout(queue, &op, HANG_GUARD).unwrap();
    }
    assert_eq!(wait(device.semaphore(done).unwrap(), EXECUTIONS, Some(HANG_GUARD)), Ok(EXECUTIONS));
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "a tile saw another EXEC's arguments");
    for (tile, sum) in sums.iter().enumerate() {
        let expected = EXECUTIONS * (EXECUTIONS - 1) / 2;
        assert_eq!(sum.load(Ordering::Relaxed), expected, "tile {tile}");
    }
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

#[test]
fn command_buffers_recorded_while_the_device_runs_load_their_kernels_and_execute() {
    // 200 buffers of two regions each, recorded one by one while the engine runs the earlier
    // ones: each region adds its buffer's number times the argument to every tile's cell, so
    // the totals show each kernel ran once per tile with its execution's arguments.
    const BUFFERS: u64 = 200;
    let cells: Arc<[AtomicU64]> = (0..TILES).map(|_| AtomicU64::new(0)).collect();
    let mut builder = builder();
    let npu = builder.driver(NpuBackend::new().with_ring_order(MIN_RING_ORDER).unwrap());
    let queue = builder.queue(QueueConfig::on(npu));
    let [done] = semaphores(&mut builder, queue);
    let device = builder.build().unwrap();
    assert!(device.backend::<CpuBackend>(npu).is_none(), "the driver is not a CPU backend");
    let backend = device.backend::<NpuBackend>(npu).expect("the driver is the NPU backend");
    let region = |number: u64| -> (u32, DeviceKernel) {
        let cells = Arc::clone(&cells);
        let kernel = move |tile: u32, args: &Args| {
            cells[tile as usize].fetch_add(number * args.u64(0), Ordering::Relaxed);
        };
        (TILES, Box::new(kernel))
    };
    for number in 0..BUFFERS {
        let buffer = backend.command_buffer(vec![region(number), region(number)]).unwrap();
        let signals = [(done, number + 1)];
        let args = Args::from_u64s([number + 1]);
        let op = Op { signals: &signals, work: Work::Execute(buffer), args, ..Op::default() };
        device.submit_timeout(queue, &op, HANG_GUARD).unwrap();
    }
    assert_eq!(wait(device.semaphore(done).unwrap(), BUFFERS, Some(HANG_GUARD)), Ok(BUFFERS));
    let expected = 2 * (0..BUFFERS).map(|number| number * (number + 1)).sum::<u64>();
    for (tile, cell) in cells.iter().enumerate() {
        assert_eq!(cell.load(Ordering::Relaxed), expected, "tile {tile}");
    }
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

#[test]
fn a_full_ring_is_backpressure_and_loses_nothing() {
    let gate = Arc::new(KernelGate::default());
    let npu = NpuBackend::new().with_ring_order(MIN_RING_ORDER).unwrap();
    let blocked = Work::Execute(npu.command_buffer(vec![(1, gate.kernel())]).unwrap());
    let (a, b, c) = (buffer(|_| 1.0), buffer(|_| 2.0), buffer(|_| 0.0));
    let sum = Work::Execute(npu.command_buffer(vec![(TILES, add(&a, &b, &c))]).unwrap());
    let tally = npu.tally();
    let mut builder = builder();
    let npu = builder.driver(npu);
    let queue = builder.queue(QueueConfig::on(npu));
    let [done] = semaphores(&mut builder, queue);
    let device = builder.build().unwrap();
    // The first operation holds the engine; 100 more need 200 descriptors of a 32-slot ring.
    // Only the first and the last signal (a semaphore's pending signals are bounded too).
    device
        .submit(
            queue,
            &Op { waits: &[], signals: &[(done, 1)], work: blocked, tag: 0, ..Default::default() },
        )
        .unwrap();
    const OPS: u64 = 100;
    for tag in 1..=OPS {
        let signals = [(done, 2)];
        let signals = if tag == OPS { &signals[..] } else { &[] };
        device
            .submit(queue, &Op { waits: &[], signals, work: sum, tag, ..Default::default() })
            .unwrap();
    }
    assert_eq!(device.semaphore(done).unwrap().value(), 0);
    // The engine is held, so the layer, issuing ahead, fills the ring and is answered `Busy`.
    let started = Instant::now();
    while tally.counts().ring_full == 0 {
        assert!(started.elapsed() < HANG_GUARD, "the ring never filled");
        std::thread::sleep(Duration::from_millis(1));
    }
    gate.open();
    assert_eq!(wait(device.semaphore(done).unwrap(), 2, Some(HANG_GUARD)), Ok(2));
    assert!(read(&c).iter().all(|&v| v == 3.0));
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

#[test]
fn a_failed_cpu_operation_fails_the_npu_work_waiting_on_it_and_the_queues_go_on() {
    let npu = NpuBackend::new();
    let (a, b, c, y) = (buffer(|_| 1.0), buffer(|_| 2.0), buffer(|_| 0.0), buffer(|_| 0.0));
    let sum = Work::Execute(npu.command_buffer(vec![(TILES, add(&a, &b, &c))]).unwrap());
    let scale = Work::Execute(npu.command_buffer(vec![(TILES, saxpy(&c, &y))]).unwrap());
    let mut builder = builder();
    let cpu = builder.driver(CpuBackend::new());
    let npu = builder.driver(npu);
    let (cpu_queue, npu_queue, other_npu_queue) = (
        builder.queue(QueueConfig::on(cpu)),
        builder.queue(QueueConfig::on(npu)),
        builder.queue(QueueConfig::on(npu)),
    );
    let [gate, inputs, sums, result, fresh, chained] = semaphores(&mut builder, cpu_queue);
    let fail = builder.host_call(|_| Err(Failure::Application(7)));
    let device = builder.build().unwrap();

    // Kernels only: a spin is not NPU work.
    let spin = Op {
        waits: &[],
        signals: &[],
        work: Work::Spin(Duration::ZERO),
        tag: 0,
        ..Default::default()
    };
    assert_eq!(
        device.submit(npu_queue, &spin).unwrap_err(),
        SubmitError::Unsupported { driver: "npu" }
    );

    let add_op = Op {
        waits: &[(inputs, 1)],
        signals: &[(sums, 1)],
        work: sum,
        tag: 2,
        ..Default::default()
    };
    device.submit(npu_queue, &add_op).unwrap();
    let scale_op = Op {
        waits: &[(sums, 1)],
        signals: &[(result, 1)],
        work: scale,
        tag: 3,
        ..Default::default()
    };
    device.submit(other_npu_queue, &scale_op).unwrap();
    let fail_op = Op {
        waits: &[(gate, 1)],
        signals: &[(inputs, 1)],
        work: Work::Host(fail),
        tag: 1,
        ..Default::default()
    };
    device.submit(cpu_queue, &fail_op).unwrap();
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    let failed = Err(HostWaitError::Failed(Failure::Application(7)));
    assert_eq!(wait(device.semaphore(sums).unwrap(), 1, Some(HANG_GUARD)), failed);
    assert_eq!(wait(device.semaphore(result).unwrap(), 1, Some(HANG_GUARD)), failed);

    // Both NPU queues still work, and their progress slots moved past the failures: a device
    // wait on the first queue's next operation is met.
    let again = Op { waits: &[], signals: &[(fresh, 1)], work: sum, tag: 4, ..Default::default() };
    device.submit(npu_queue, &again).unwrap();
    let after = Op {
        waits: &[(fresh, 1)],
        signals: &[(chained, 1)],
        work: scale,
        tag: 5,
        ..Default::default()
    };
    device.submit(other_npu_queue, &after).unwrap();
    assert_eq!(wait(device.semaphore(chained).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

#[test]
fn an_npu_failure_fails_the_operation_its_signals_and_the_work_waiting_on_it() {
    let npu = NpuBackend::new();
    let unknown_kernel =
        Descriptor::new(Command::Exec { kernel: 999, tiles: 1, arguments: [0; 8] });
    let unknown_kernel = Work::Execute(npu.raw_command(unknown_kernel.encode()).unwrap());
    let mut malformed = [0; 16];
    malformed[0] = 0x77;
    let malformed = Work::Execute(npu.raw_command(RawDescriptor(malformed)).unwrap());
    let (a, b, c) = (buffer(|_| 1.0), buffer(|_| 2.0), buffer(|_| 0.0));
    let sum = Work::Execute(npu.command_buffer(vec![(TILES, add(&a, &b, &c))]).unwrap());
    let mut builder = builder();
    let cpu = builder.driver(CpuBackend::new());
    let npu = builder.driver(npu);
    let (npu_queue, other_npu_queue, cpu_queue) = (
        builder.queue(QueueConfig::on(npu)),
        builder.queue(QueueConfig::on(npu)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let [gate, bad, worse, downstream, consumed, fresh] = semaphores(&mut builder, cpu_queue);
    let ran = Arc::new(AtomicBool::new(false));
    let ran_seen = Arc::clone(&ran);
    let consume = builder.host_call(move |_| {
        ran_seen.store(true, Ordering::Relaxed);
        Ok(())
    });
    let device = builder.build().unwrap();

    let unknown_code = CompletionError::UnknownKernel.failure_code();
    let malformed_code = CompletionError::Malformed(DescriptorError::UnknownOpcode).failure_code();
    // Gated, so the downstream NPU wait resolves as a device wait on the failing operation.
    let op = Op {
        waits: &[(gate, 1)],
        signals: &[(bad, 1)],
        work: unknown_kernel,
        tag: 1,
        ..Default::default()
    };
    device.submit(npu_queue, &op).unwrap();
    let op =
        Op { waits: &[], signals: &[(worse, 1)], work: malformed, tag: 2, ..Default::default() };
    device.submit(npu_queue, &op).unwrap();
    let op = Op {
        waits: &[(bad, 1)],
        signals: &[(downstream, 1)],
        work: sum,
        tag: 3,
        ..Default::default()
    };
    let resolved = resolution_of(&device.submit(other_npu_queue, &op).unwrap().waits);
    assert_eq!(resolved, Resolution::DeviceWait);
    let op = Op {
        waits: &[(worse, 1)],
        signals: &[(consumed, 1)],
        work: Work::Host(consume),
        tag: 4,
        ..Default::default()
    };
    device.submit(cpu_queue, &op).unwrap();
    device.semaphore(gate).unwrap().signal_external(1).unwrap();

    let device_failure = |code| Err(HostWaitError::Failed(Failure::Faulted(code)));
    assert_eq!(
        wait(device.semaphore(bad).unwrap(), 1, Some(HANG_GUARD)),
        device_failure(unknown_code)
    );
    assert_eq!(
        wait(device.semaphore(worse).unwrap(), 1, Some(HANG_GUARD)),
        device_failure(malformed_code)
    );
    // The NPU operation that waited natively on the failed one fails with it.
    assert_eq!(
        wait(device.semaphore(downstream).unwrap(), 1, Some(HANG_GUARD)),
        device_failure(unknown_code)
    );
    // So does the CPU operation waiting on the malformed one, without running.
    assert_eq!(
        wait(device.semaphore(consumed).unwrap(), 1, Some(HANG_GUARD)),
        device_failure(malformed_code)
    );
    assert!(!ran.load(Ordering::Relaxed));
    // The queue goes on after its failures.
    let op = Op { waits: &[], signals: &[(fresh, 1)], work: sum, tag: 5, ..Default::default() };
    device.submit(npu_queue, &op).unwrap();
    assert_eq!(wait(device.semaphore(fresh).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

/// Every operation's end, as `(queue, tag, status)`; opens `gate` when an NPU operation
/// ends aborted (the shutdown failing work in flight), so the blocked kernel can return.
struct Ends {
    ends: Mutex<Vec<(usize, u64, OpStatus)>>,
    gate: Arc<KernelGate>,
}

impl Observer for Ends {
    fn op_event(&self, observed: causeway_device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let queue = observed.id.index();
        if let OpEvent::Finished { status, .. } = event {
            if status == OpStatus::Failed(Failure::Aborted) {
                self.gate.open();
            }
            self.ends.lock().unwrap().push((queue, tag, status));
        }
    }
}

#[test]
fn shutdown_with_npu_work_in_flight_ends_every_operation_and_waiter() {
    let gate = Arc::new(KernelGate::default());
    let npu = NpuBackend::new();
    let blocked = Work::Execute(npu.command_buffer(vec![(1, gate.kernel())]).unwrap());
    let (a, b, c) = (buffer(|_| 1.0), buffer(|_| 2.0), buffer(|_| 0.0));
    let sum = Work::Execute(npu.command_buffer(vec![(TILES, add(&a, &b, &c))]).unwrap());
    let mut builder = builder();
    let cpu = builder.driver(CpuBackend::new());
    let npu = builder.driver(npu);
    let (first, second, cpu_queue) = (
        builder.queue(QueueConfig::on(npu)),
        builder.queue(QueueConfig::on(npu)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let [never, s, t, u] = semaphores(&mut builder, first);
    let ends = Arc::new(Ends { ends: Mutex::new(Vec::new()), gate: Arc::clone(&gate) });
    builder.observer(ends.clone());
    let device = builder.build().unwrap();

    // The first queue's engine blocks in a kernel; work queues up behind it on both NPU queues
    // (the second waits natively on the first) and on a CPU queue.
    device
        .submit(
            first,
            &Op { waits: &[], signals: &[(s, 1)], work: blocked, tag: 1, ..Default::default() },
        )
        .unwrap();
    const ROUNDS: u64 = 6;
    for round in 2..=ROUNDS {
        device
            .submit(
                first,
                &Op {
                    waits: &[],
                    signals: &[(s, round)],
                    work: sum,
                    tag: round,
                    ..Default::default()
                },
            )
            .unwrap();
        let waits = [(s, round)];
        let op = Op {
            waits: &waits,
            signals: &[(t, round)],
            work: sum,
            tag: round,
            ..Default::default()
        };
        device.submit(second, &op).unwrap();
    }
    let op = Op {
        waits: &[(t, ROUNDS)],
        signals: &[(u, 1)],
        work: Work::Barrier,
        tag: 99,
        ..Default::default()
    };
    device.submit(cpu_queue, &op).unwrap();
    // Behind a gate nobody opens: never issued, cancelled at shutdown.
    let gated =
        Op { waits: &[(never, 1)], signals: &[], work: sum, tag: 100, ..Default::default() };
    device.submit(second, &gated).unwrap();

    gate.wait_entered();
    let report = device.shutdown(Duration::from_secs(10));
    assert!(report.cancelled >= 1, "{report:?}");
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    // Every operation ended exactly once: ran, aborted on the device, or cancelled.
    let ends = ends.ends.lock().unwrap();
    assert_eq!(ends.len() as u64, 2 * (ROUNDS - 1) + 3, "{ends:?}");
    assert!(ends.contains(&(first.index(), 1, OpStatus::Failed(Failure::Aborted))), "{ends:?}");
    assert!(ends.contains(&(second.index(), 100, OpStatus::Cancelled)), "{ends:?}");
    assert!(ends.iter().any(|&(queue, tag, status)| queue == cpu_queue.index()
        && tag == 99
        && status != OpStatus::Ok));
}

#[test]
fn a_kernel_that_does_not_return_by_the_deadline_leaves_the_npu_busy_instead_of_hanging_shutdown() {
    let gate = Arc::new(KernelGate::default());
    let npu = NpuBackend::new();
    let blocked = Work::Execute(npu.command_buffer(vec![(1, gate.kernel())]).unwrap());
    let mut builder = builder();
    let npu = builder.driver(npu);
    let queue = builder.queue(QueueConfig::on(npu));
    let [done] = semaphores(&mut builder, queue);
    let device = builder.build().unwrap();
    device
        .submit(
            queue,
            &Op { waits: &[], signals: &[(done, 1)], work: blocked, tag: 1, ..Default::default() },
        )
        .unwrap();
    gate.wait_entered();
    // The gate opens only after shutdown returned: its kernel is still running then.
    let report = device.shutdown(Duration::from_millis(100));
    assert_eq!(report.busy_drivers, ["npu"], "{report:?}");
    assert!(report.leaked, "the device keeps its state for the running kernel: {report:?}");
    gate.open();
}

#[test]
fn an_operation_retired_on_the_host_moves_its_queue_s_progress_for_device_waits_on_it() {
    let npu = NpuBackend::new();
    let (a, b, c) = (buffer(|_| 1.0), buffer(|_| 2.0), buffer(|_| 0.0));
    let sum = Work::Execute(npu.command_buffer(vec![(TILES, add(&a, &b, &c))]).unwrap());
    let tally = npu.tally();
    let mut builder = builder();
    let npu = builder.driver(npu);
    let (first, second) =
        (builder.queue(QueueConfig::on(npu)), builder.queue(QueueConfig::on(npu)));
    let [gate, marked, summed] = semaphores(&mut builder, first);
    let device = builder.build().unwrap();
    // A barrier never reaches the driver: it retires on the host, which writes the first
    // queue's progress slot. The second queue's device wait on it is a WAIT on that slot.
    let barrier = Op {
        waits: &[(gate, 1)],
        signals: &[(marked, 1)],
        work: Work::Barrier,
        tag: 1,
        ..Default::default()
    };
    device.submit(first, &barrier).unwrap();
    let op = Op {
        waits: &[(marked, 1)],
        signals: &[(summed, 1)],
        work: sum,
        tag: 2,
        ..Default::default()
    };
    assert_eq!(resolution_of(&device.submit(second, &op).unwrap().waits), Resolution::DeviceWait);
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(summed).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    assert!(read(&c).iter().all(|&v| v == 3.0));
    assert_eq!(tally.counts().emitted, 1, "{:?}", tally.counts());
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

//! The Vulkan driver behind the device layer's seam, on lavapipe with validation: Vulkan queues
//! share semaphores and frontiers with CPU queues, device waits between Vulkan queues are native
//! timeline waits (one per device-wait resolution, none for anything else), knowledge crosses
//! drivers transitively, failures cross them too, and shutdown ends every waiter.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Device, DeviceBuilder, DriverId, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId,
    SemaphoreId, SubmitError, WaitOutcome, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{Buffer, Gpu, Kernel, Step, VulkanBackend};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const ELEMENTS: usize = 4096;
const BYTES: u64 = ELEMENTS as u64 * 4;

fn queue_of(driver: DriverId) -> QueueConfig {
    let mut config = QueueConfig::default();
    config.driver = driver;
    config
}

fn resolution_of(waits: &[WaitOutcome]) -> Resolution {
    match waits {
        [WaitOutcome::Resolved(resolved)] => resolved.resolution,
        other => panic!("one resolved wait: {other:?}"),
    }
}

/// Buffers `a`, `b`, `c`, `y` and command buffers `c = a + b` and `y = 2c + y` on `backend`.
struct Kernels {
    buffers: [Buffer; 4],
    add: Work,
    saxpy: Work,
}

fn kernels(backend: &mut VulkanBackend) -> Kernels {
    let gpu = backend.gpu().clone();
    let buffers = [(); 4].map(|()| Buffer::new(&gpu, BYTES).expect("buffer"));
    let [a, b, c, y] = &buffers;
    let add = Kernel::add(&gpu).expect("add").launch(&[a, b, c], ELEMENTS as u32, 4, 0.0);
    let saxpy = Kernel::saxpy(&gpu).expect("saxpy").launch(&[c, y], ELEMENTS as u32, 2, 2.0);
    let add = backend.command_buffer(vec![vec![Step::Dispatch(add.expect("launch"))]]);
    let saxpy = backend.command_buffer(vec![vec![Step::Dispatch(saxpy.expect("launch"))]]);
    Kernels {
        buffers,
        add: Work::Execute(add.expect("record")),
        saxpy: Work::Execute(saxpy.expect("record")),
    }
}

/// A device with a Vulkan driver (validation on) and a CPU driver.
fn builder() -> (DeviceBuilder, Gpu, VulkanBackend) {
    let gpu = common::open();
    let backend = VulkanBackend::new(gpu.clone());
    (Device::builder(PoolConfig::with_workers(2)), gpu, backend)
}

fn semaphores<const N: usize>(builder: &mut DeviceBuilder, home: QueueId) -> [SemaphoreId; N] {
    let home = builder.endpoint(home).unwrap();
    [(); N].map(|()| builder.semaphore(0, Scope::DeviceLocal, home))
}

#[test]
fn cpu_to_vulkan_to_cpu_the_results_are_right_and_knowledge_crosses_transitively() {
    let (mut builder, gpu, mut backend) = builder();
    let Kernels { buffers: [a, b, c, _], add, .. } = kernels(&mut backend);
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (producer, gpu_queue, consumer) = (
        builder.queue(queue_of(cpu)),
        builder.queue(queue_of(vulkan)),
        builder.queue(queue_of(cpu)),
    );
    let [gate, inputs, sums, checked] = semaphores(&mut builder, producer);
    // The CPU writes the inputs, the GPU adds them, the CPU checks every sum.
    let write = builder.host_call(move || {
        let a_values: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
        let b_values: Vec<f32> = (0..ELEMENTS).map(|i| (2 * i) as f32 + 0.5).collect();
        a.write_f32(0, &a_values).map_err(|_| Failure::Application(1))?;
        b.write_f32(0, &b_values).map_err(|_| Failure::Application(1))
    });
    let wrong = Arc::new(AtomicU32::new(u32::MAX));
    let wrong_seen = Arc::clone(&wrong);
    let check = builder.host_call(move || {
        let sums = c.read_f32(0, ELEMENTS).map_err(|_| Failure::Application(2))?;
        let wrong = (0..ELEMENTS).filter(|&i| sums[i] != (3 * i) as f32 + 0.5).count();
        wrong_seen.store(wrong as u32, Ordering::Relaxed);
        Ok(())
    });
    let device = builder.build().unwrap();

    // Held behind a host gate, so every resolution below is decided before anything runs.
    let write_op =
        Op { waits: &[(gate, 1)], signals: &[(inputs, 1)], work: Work::Host(write), tag: 1 };
    device.submit(producer, &write_op).unwrap();
    // A Vulkan queue cannot wait natively on a CPU queue's work: the layer holds it.
    let add_op = Op { waits: &[(inputs, 1)], signals: &[(sums, 1)], work: add, tag: 2 };
    assert_eq!(resolution_of(&device.submit(gpu_queue, &add_op).unwrap().waits), Resolution::Held);
    let check_op =
        Op { waits: &[(sums, 1)], signals: &[(checked, 1)], work: Work::Host(check), tag: 3 };
    let resolved = resolution_of(&device.submit(consumer, &check_op).unwrap().waits);
    assert_eq!(resolved, Resolution::DeviceWait);
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(checked).unwrap(), 1, Some(common::HANG_GUARD)), Ok(1));
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "every sum right");

    // The consumer never waited on the producer, but learned of it through the Vulkan
    // operation's signal: its wait on the inputs is elided, as is one on the sums.
    for semaphore in [inputs, sums] {
        let again = Op { waits: &[(semaphore, 1)], signals: &[], work: Work::Barrier, tag: 4 };
        assert_eq!(
            resolution_of(&device.submit(consumer, &again).unwrap().waits),
            Resolution::Elided
        );
    }
    assert_eq!(gpu.native_waits(), 0, "no wait between Vulkan queues, none native");
    let report = device.shutdown(common::HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    common::assert_validation_clean(&gpu);
}

#[test]
fn waits_between_vulkan_queues_are_native_and_counted_exactly() {
    let (mut builder, gpu, mut backend) = builder();
    let Kernels { buffers: [a, b, _, y], add, saxpy } = kernels(&mut backend);
    a.write_f32(0, &vec![1.0; ELEMENTS]).unwrap();
    b.write_f32(0, &vec![0.5; ELEMENTS]).unwrap();
    y.write_f32(0, &vec![0.0; ELEMENTS]).unwrap();
    let vulkan = builder.driver(backend);
    let (first, second) = (builder.queue(queue_of(vulkan)), builder.queue(queue_of(vulkan)));
    let [added, accumulated] = semaphores(&mut builder, first);
    let device = builder.build().unwrap();

    // Rounds of `c = a + b` on one queue and `y = 2c + y` on the other, each waiting for the
    // other's previous step: every wait is a device wait, issued natively on the signalling
    // queue's timeline. The same command buffers serve every round (a pending one makes the
    // next issue wait for it).
    const ROUNDS: u64 = 5_000;
    for round in 1..=ROUNDS {
        let add_waits = [(accumulated, round - 1)];
        let add_op = Op {
            waits: &add_waits[..usize::from(round > 1)],
            signals: &[(added, round)],
            work: add,
            tag: round,
        };
        device.submit(first, &add_op).unwrap();
        let saxpy_op = Op {
            waits: &[(added, round)],
            signals: &[(accumulated, round)],
            work: saxpy,
            tag: round,
        };
        device.submit(second, &saxpy_op).unwrap();
    }
    let reached = wait(device.semaphore(accumulated).unwrap(), ROUNDS, Some(common::HANG_GUARD));
    assert_eq!(reached, Ok(ROUNDS));
    let y_values = y.read_f32(0, ELEMENTS).unwrap();
    let expected = 2.0 * 1.5 * ROUNDS as f32;
    assert!(y_values.iter().all(|&v| v == expected), "y = {} (expected {expected})", y_values[0]);

    let counts = [first, second].map(|queue| device.resolution_counts(queue).unwrap());
    let device_waits: u64 = counts.iter().map(|c| c.device).sum();
    let held: u64 = counts.iter().map(|c| c.held).sum();
    // One wait per dependency edge would have issued every wait: 2 per round but the first.
    let edges = 2 * ROUNDS - 1;
    let elided: u64 = counts.iter().map(|c| c.elided + c.satisfied).sum();
    assert_eq!(device_waits + held + elided, edges);
    assert_eq!(gpu.native_waits(), device_waits, "native waits are the device resolutions");
    assert!(device_waits > 0);
    drop(device);
    common::assert_validation_clean(&gpu);
}

#[test]
fn a_failed_cpu_operation_fails_the_vulkan_work_waiting_on_it_and_what_that_signals() {
    let (mut builder, gpu, mut backend) = builder();
    let Kernels { add, saxpy, .. } = kernels(&mut backend);
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (cpu_queue, gpu_queue, other_gpu_queue) = (
        builder.queue(queue_of(cpu)),
        builder.queue(queue_of(vulkan)),
        builder.queue(queue_of(vulkan)),
    );
    let [inputs, sums, result, fresh] = semaphores(&mut builder, cpu_queue);
    let fail = builder.host_call(|| Err(Failure::Application(7)));
    let device = builder.build().unwrap();

    // Kernels only: a spin is not Vulkan work.
    let spin = Op { waits: &[], signals: &[], work: Work::Spin(Duration::ZERO), tag: 0 };
    assert_eq!(
        device.submit(gpu_queue, &spin).unwrap_err(),
        SubmitError::Unsupported { driver: "vulkan" }
    );

    let add_op = Op { waits: &[(inputs, 1)], signals: &[(sums, 1)], work: add, tag: 2 };
    device.submit(gpu_queue, &add_op).unwrap();
    let saxpy_op = Op { waits: &[(sums, 1)], signals: &[(result, 1)], work: saxpy, tag: 3 };
    device.submit(other_gpu_queue, &saxpy_op).unwrap();
    device
        .submit(
            cpu_queue,
            &Op { waits: &[], signals: &[(inputs, 1)], work: Work::Host(fail), tag: 1 },
        )
        .unwrap();
    let failed = Err(HostWaitError::Failed(Failure::Application(7)));
    assert_eq!(wait(device.semaphore(result).unwrap(), 1, Some(common::HANG_GUARD)), failed);
    assert_eq!(wait(device.semaphore(sums).unwrap(), 1, Some(common::HANG_GUARD)), failed);
    // The Vulkan queues still work after it, and their timelines moved past the failures.
    let again = Op { waits: &[], signals: &[(fresh, 1)], work: add, tag: 4 };
    device.submit(gpu_queue, &again).unwrap();
    assert_eq!(wait(device.semaphore(fresh).unwrap(), 1, Some(common::HANG_GUARD)), Ok(1));
    let report = device.shutdown(common::HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    common::assert_validation_clean(&gpu);
}

/// Every operation's end, as `(queue, tag, status)`.
#[derive(Default)]
struct Ends(Mutex<Vec<(usize, u64, OpStatus)>>);

impl Observer for Ends {
    fn op_event(&self, queue: usize, tag: u64, event: OpEvent) {
        if let OpEvent::Finished { status, .. } = event {
            self.0.lock().unwrap().push((queue, tag, status));
        }
    }
}

#[test]
fn shutdown_with_vulkan_work_in_flight_ends_every_operation() {
    let (mut builder, gpu, mut backend) = builder();
    let Kernels { add, saxpy, .. } = kernels(&mut backend);
    let vulkan = builder.driver(backend);
    let (first, second) = (builder.queue(queue_of(vulkan)), builder.queue(queue_of(vulkan)));
    let [gate, s, t] = semaphores(&mut builder, first);
    let ends = Arc::new(Ends::default());
    builder.observer(ends.clone());
    let device = builder.build().unwrap();
    const ROUNDS: u64 = 20;
    for round in 1..=ROUNDS {
        let op = Op { waits: &[], signals: &[(s, round)], work: add, tag: round };
        device.submit(first, &op).unwrap();
        let waits = [(s, round)];
        let op = Op { waits: &waits, signals: &[(t, round)], work: saxpy, tag: round };
        device.submit(second, &op).unwrap();
    }
    // Behind a gate nobody opens: never issued, cancelled at shutdown.
    let gated = Op { waits: &[(gate, 1)], signals: &[(s, 99)], work: add, tag: 99 };
    device.submit(first, &gated).unwrap();
    let report = device.shutdown(Duration::from_secs(10));
    assert!(report.cancelled >= 1, "{report:?}");
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    // Every operation ended exactly once: ran, aborted on the device, or cancelled.
    let ends = ends.0.lock().unwrap();
    assert_eq!(ends.len() as u64, 2 * ROUNDS + 1, "{ends:?}");
    assert!(ends.contains(&(first.0, 99, OpStatus::Cancelled)), "{ends:?}");
    common::assert_validation_clean(&gpu);
}

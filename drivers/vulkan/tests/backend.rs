//! The Vulkan driver behind the device layer's seam, on lavapipe with validation, with the real
//! CPU driver beside it: the results of CPU → Vulkan → CPU work are right, knowledge crosses
//! drivers transitively (and no wait is native between a CPU and a Vulkan queue), work the
//! driver has no kernel for is refused, failures cross drivers, and a command buffer recorded
//! while the device runs copies each operation's arguments for its kernel. The contract every driver
//! keeps (native-wait ping-pong between Vulkan queues counted exactly, held waits, failures,
//! elision, memory, backpressure, shutdown with work in flight, speculation, 10^5 operations)
//! is the conformance suite's, in `tests/conformance.rs`.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Args, Device, DeviceBuilder, Op, QueueConfig, QueueId, SemaphoreId, SubmitError, WaitOutcome,
    Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{Buffer, Gpu, Kernel, Step, VulkanBackend};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const ELEMENTS: usize = 4096;
const BYTES: u64 = ELEMENTS as u64 * 4;

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
        builder.queue(QueueConfig::on(cpu)),
        builder.queue(QueueConfig::on(vulkan)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let [gate, inputs, sums, checked] = semaphores(&mut builder, producer);
    // The CPU writes the inputs, the GPU adds them, the CPU checks every sum.
    let write = builder.host_call(move |_| {
        let a_values: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
        let b_values: Vec<f32> = (0..ELEMENTS).map(|i| (2 * i) as f32 + 0.5).collect();
        a.write_f32(0, &a_values).map_err(|_| Failure::Application(1))?;
        b.write_f32(0, &b_values).map_err(|_| Failure::Application(1))
    });
    let wrong = Arc::new(AtomicU32::new(u32::MAX));
    let wrong_seen = Arc::clone(&wrong);
    let check = builder.host_call(move |_| {
        let sums = c.read_f32(0, ELEMENTS).map_err(|_| Failure::Application(2))?;
        let wrong = (0..ELEMENTS).filter(|&i| sums[i] != (3 * i) as f32 + 0.5).count();
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
    // A Vulkan queue cannot wait natively on a CPU queue's work: the layer holds it.
    let add_op = Op {
        waits: &[(inputs, 1)],
        signals: &[(sums, 1)],
        work: add,
        tag: 2,
        ..Default::default()
    };
    assert_eq!(resolution_of(&device.submit(gpu_queue, &add_op).unwrap().waits), Resolution::Held);
    let check_op = Op {
        waits: &[(sums, 1)],
        signals: &[(checked, 1)],
        work: Work::Host(check),
        tag: 3,
        ..Default::default()
    };
    let resolved = resolution_of(&device.submit(consumer, &check_op).unwrap().waits);
    assert_eq!(resolved, Resolution::DeviceWait);
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(checked).unwrap(), 1, Some(common::HANG_GUARD)), Ok(1));
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "every sum right");

    // The consumer never waited on the producer, but learned of it through the Vulkan
    // operation's signal: its wait on the inputs is elided, as is one on the sums.
    for semaphore in [inputs, sums] {
        let again = Op {
            waits: &[(semaphore, 1)],
            signals: &[],
            work: Work::Barrier,
            tag: 4,
            ..Default::default()
        };
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
fn a_failed_cpu_operation_fails_the_vulkan_work_waiting_on_it_and_what_that_signals() {
    let (mut builder, gpu, mut backend) = builder();
    let Kernels { add, saxpy, .. } = kernels(&mut backend);
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (cpu_queue, gpu_queue, other_gpu_queue) = (
        builder.queue(QueueConfig::on(cpu)),
        builder.queue(QueueConfig::on(vulkan)),
        builder.queue(QueueConfig::on(vulkan)),
    );
    let [inputs, sums, result, fresh] = semaphores(&mut builder, cpu_queue);
    let fail = builder.host_call(|_| Err(Failure::Application(7)));
    let device = builder.build().unwrap();

    // Kernels only: a spin is not Vulkan work.
    let spin = Op {
        waits: &[],
        signals: &[],
        work: Work::Spin(Duration::ZERO),
        tag: 0,
        ..Default::default()
    };
    assert_eq!(
        device.submit(gpu_queue, &spin).unwrap_err(),
        SubmitError::Unsupported { driver: "vulkan" }
    );

    let add_op = Op {
        waits: &[(inputs, 1)],
        signals: &[(sums, 1)],
        work: add,
        tag: 2,
        ..Default::default()
    };
    device.submit(gpu_queue, &add_op).unwrap();
    let saxpy_op = Op {
        waits: &[(sums, 1)],
        signals: &[(result, 1)],
        work: saxpy,
        tag: 3,
        ..Default::default()
    };
    device.submit(other_gpu_queue, &saxpy_op).unwrap();
    device
        .submit(
            cpu_queue,
            &Op {
                waits: &[],
                signals: &[(inputs, 1)],
                work: Work::Host(fail),
                tag: 1,
                ..Default::default()
            },
        )
        .unwrap();
    let failed = Err(HostWaitError::Failed(Failure::Application(7)));
    assert_eq!(wait(device.semaphore(result).unwrap(), 1, Some(common::HANG_GUARD)), failed);
    assert_eq!(wait(device.semaphore(sums).unwrap(), 1, Some(common::HANG_GUARD)), failed);
    // The Vulkan queues still work after it, and their timelines moved past the failures.
    let again = Op { waits: &[], signals: &[(fresh, 1)], work: add, tag: 4, ..Default::default() };
    device.submit(gpu_queue, &again).unwrap();
    assert_eq!(wait(device.semaphore(fresh).unwrap(), 1, Some(common::HANG_GUARD)), Ok(1));
    let report = device.shutdown(common::HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    common::assert_validation_clean(&gpu);
}

#[test]
fn a_command_buffer_recorded_while_the_device_runs_reads_each_operations_arguments() {
    // acc += x, where x is copied from the executing operation's arguments: 200 executions of
    // one buffer recorded after the device started, execution k carrying (k + j) as f32 in
    // word j, leave acc[j] = Σk (k + j).
    const EXECUTIONS: u64 = 200;
    const WORDS: usize = 8;
    let (mut builder, gpu, backend) = builder();
    let vulkan = builder.driver(backend);
    let queue = builder.queue(QueueConfig::on(vulkan));
    let [done] = semaphores(&mut builder, queue);
    let device = builder.build().expect("the device starts");
    let backend = device.backend::<VulkanBackend>(vulkan).expect("the driver is Vulkan's");
    assert!(device.backend::<CpuBackend>(vulkan).is_none());

    let bytes = (WORDS * 4) as u64;
    let [x, acc] = [(); 2].map(|()| Buffer::new(&gpu, bytes).expect("buffer"));
    let add = Kernel::add(&gpu).expect("add").launch(&[&x, &acc, &acc], WORDS as u32, 1, 0.0);
    let past_the_end = Step::Arguments { destination: x.clone(), offset: 4 };
    assert!(backend.command_buffer(vec![vec![past_the_end]]).is_err(), "32 bytes do not fit");
    let accumulate = backend
        .command_buffer(vec![
            vec![Step::Arguments { destination: x.clone(), offset: 0 }],
            vec![Step::Dispatch(add.expect("launch"))],
        ])
        .expect("record");
    for execution in 0..EXECUTIONS {
        let words = std::array::from_fn(|word| (execution as f32 + word as f32).to_bits());
        let signals = [(done, execution + 1)];
        let op = Op {
            signals: &signals,
            work: Work::Execute(accumulate),
            args: Args::from_words(words),
            ..Op::default()
        };
        device.submit(queue, &op).expect("the queue takes it");
    }
    device.wait(done, EXECUTIONS, Some(Duration::from_secs(120))).expect("every execution ran");
    let sums = acc.read_f32(0, WORDS).expect("read");
    let executions = EXECUTIONS as f32;
    let expected: Vec<f32> = (0..WORDS)
        .map(|word| executions * (executions - 1.0) / 2.0 + executions * word as f32)
        .collect();
    assert_eq!(sums, expected);
    device.shutdown(Duration::from_secs(10));
    common::assert_validation_clean(&gpu);
}

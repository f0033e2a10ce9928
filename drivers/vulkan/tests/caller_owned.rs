//! A `Gpu` on Vulkan handles the application owns (`Gpu::from_raw_handles`), as an application
//! with its own `ash` set-up would lend them: the test creates the instance (with the Khronos
//! validation layer, synchronization validation and its own debug messenger), picks lavapipe,
//! creates the device and destroys both itself. CPU → Vulkan → CPU work on it is right (the last
//! operation's wait on the first elided across the drivers) and the validation layer reports
//! nothing, not even a leaked object when the test destroys the device after causeway let go
//! of it. Handles causeway cannot use (a queue family that does not exist,
//! no queue, an instance created for Vulkan 1.1) are typed errors. The application's device
//! lost in the middle of a run fails causeway's work on it and every waiter, the device goes
//! on, and the application destroys its handles afterwards as usual.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ash::vk;
use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{Device, Op, QueueConfig, WaitOutcome, Work};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{Buffer, FaultPoint, Gpu, Kernel, Step, VulkanBackend, VulkanError};
use causeway_runtime::blocking::wait;
use causeway_runtime::PoolConfig;
use common::app::AppVulkan;
use common::HANG_GUARD;

const ELEMENTS: usize = 4096;
const BYTES: u64 = ELEMENTS as u64 * 4;

/// Destroys the application's Vulkan objects, as the application would once causeway let go,
/// and fails on any message its validation layer reported over the test.
fn destroy_without_messages(app: AppVulkan) {
    let messages = app.destroy();
    assert!(
        messages.is_empty(),
        "{} validation messages:\n{}",
        messages.len(),
        messages.join("\n")
    );
}

#[test]
fn cpu_to_vulkan_to_cpu_on_the_applications_own_device_is_right_and_validation_clean() {
    let app = AppVulkan::create(vk::API_VERSION_1_3, true);
    // SAFETY: the handles are the ones `app` just created from one another, the device with
    // timeline semaphores and synchronization2; `app` destroys them only after every causeway
    // object below is dropped, and touches the queue only through `with_queue` meanwhile.
    let gpu = unsafe { Gpu::from_raw_handles(app.handles(app.family, vec![app.queue])) }
        .unwrap_or_else(|error| panic!("cannot lend the device: {error}"));
    assert_eq!(gpu.queue_count(), 1);
    assert!(!gpu.adapter_name().is_empty());

    let backend = VulkanBackend::new(gpu.clone());
    let buffers = [(); 3].map(|()| Buffer::new(&gpu, BYTES).expect("buffer"));
    let [a, b, c] = buffers.clone();
    let add = Kernel::add(&gpu).expect("add").launch(&[&a, &b, &c], ELEMENTS as u32, 4, 0.0);
    let add = backend.command_buffer(vec![vec![Step::Dispatch(add.expect("launch"))]]);
    let add = Work::Execute(add.expect("record"));

    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (producer, gpu_queue, consumer) = (
        builder.queue(QueueConfig::on(cpu)),
        builder.queue(QueueConfig::on(vulkan)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let home = builder.endpoint(producer).unwrap();
    let [go, inputs, sums, checked] =
        [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
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

    // The chain is submitted whole before the host lets the upload go, so nothing has run
    // when the check is submitted and its waits resolve from frontiers alone.
    let write_op = Op {
        waits: &[(go, 1)],
        signals: &[(inputs, 1)],
        work: Work::Host(write),
        tag: 1,
        ..Default::default()
    };
    assert_eq!(device.submit(producer, &write_op).unwrap().failure, None);
    let add_op = Op {
        waits: &[(inputs, 1)],
        signals: &[(sums, 1)],
        work: add,
        tag: 2,
        ..Default::default()
    };
    assert_eq!(device.submit(gpu_queue, &add_op).unwrap().failure, None);
    let check_waits = [(sums, 1), (inputs, 1)];
    let check_op = Op {
        waits: &check_waits,
        signals: &[(checked, 1)],
        work: Work::Host(check),
        tag: 3,
        ..Default::default()
    };
    let receipt = device.submit(consumer, &check_op).unwrap();
    match receipt.waits.as_slice() {
        [WaitOutcome::Resolved(on_sums), WaitOutcome::Resolved(on_inputs)] => {
            // The wait on the Vulkan operation is one (its signal is submitted: not held);
            // the wait on the CPU upload is elided across the drivers: the add's frontier,
            // imported by the first wait, already says the upload comes first.
            assert_ne!(on_sums.resolution, Resolution::Held);
            assert_eq!(on_inputs.resolution, Resolution::Elided);
        }
        other => panic!("two resolved waits: {other:?}"),
    }
    assert_eq!(receipt.failure, None);
    device.semaphore(go).unwrap().signal_external(1).unwrap();
    // Every operation ended ok: each signal reached its value, none failed.
    for semaphore in [go, inputs, sums, checked] {
        assert_eq!(wait(device.semaphore(semaphore).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    }
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "every sum right");
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");

    // The application may use the queue it lent, under causeway's lock for it.
    // SAFETY: the queue is the device's, and `with_queue` holds its lock across the call.
    let idle = gpu.with_queue(0, |queue| unsafe { app.device.queue_wait_idle(queue) });
    assert_eq!(idle, Ok(Ok(())));
    assert_eq!(gpu.with_queue(1, |_| ()), Err(VulkanError::NoSuchQueue(1)));
    assert!(
        gpu.validation_messages().is_empty(),
        "a lent instance gets no messenger of causeway's"
    );

    drop(buffers);
    drop(gpu);
    destroy_without_messages(app);
}

#[test]
fn a_queue_family_that_does_not_exist_and_no_queues_are_typed_errors() {
    let app = AppVulkan::create(vk::API_VERSION_1_3, true);
    // SAFETY: the handles are `app`'s, from one another, its device with the features causeway
    // needs; no queue is lent (the family is checked before any would be used), and `app`
    // outlives the call, whose `Gpu` is never made.
    let refused = unsafe { Gpu::from_raw_handles(app.handles(app.families, Vec::new())) };
    match refused {
        Err(VulkanError::QueueFamilyUnsuitable { family, families, .. }) => {
            assert_eq!((family, families), (app.families, app.families));
        }
        other => panic!("expected QueueFamilyUnsuitable, got {other:?}"),
    }
    // SAFETY: as above, with the device's own compute family.
    let refused = unsafe { Gpu::from_raw_handles(app.handles(app.family, Vec::new())) };
    assert_eq!(refused.unwrap_err(), VulkanError::NoSuchQueue(0));
    destroy_without_messages(app);
}

#[test]
fn an_instance_created_for_vulkan_1_1_is_a_typed_error() {
    // The physical device reports 1.2 or later, but a device made from an instance created for
    // 1.1 has none of the core 1.2 commands causeway's timelines call.
    let app = AppVulkan::create(vk::API_VERSION_1_1, true);
    // SAFETY: the handles are `app`'s, from one another, its device with both features (from
    // their extensions); `app` outlives the call.
    let refused = unsafe { Gpu::from_raw_handles(app.handles(app.family, vec![app.queue])) };
    match refused {
        Err(VulkanError::AdapterUnsuitable { missing, .. }) => {
            assert!(missing.contains("Vulkan 1.2 commands"), "{missing}");
        }
        other => panic!("expected AdapterUnsuitable, got {other:?}"),
    }
    destroy_without_messages(app);
}

#[test]
fn the_applications_device_lost_mid_run_fails_the_work_on_it_and_its_waiters_and_nothing_hangs() {
    let app = AppVulkan::create(vk::API_VERSION_1_3, true);
    // SAFETY: as in the first test: `app`'s handles, from one another, with the features
    // causeway needs; `app` destroys them after every causeway object below is dropped.
    let gpu = unsafe { Gpu::from_raw_handles(app.handles(app.family, vec![app.queue])) }
        .unwrap_or_else(|error| panic!("cannot lend the device: {error}"));
    let backend = VulkanBackend::new(gpu.clone());
    let buffers = [(); 3].map(|()| Buffer::new(&gpu, BYTES).expect("buffer"));
    let [a, b, c] = &buffers;
    let add = Kernel::add(&gpu).expect("add").launch(&[a, b, c], ELEMENTS as u32, 4, 0.0);
    let add = backend.command_buffer(vec![vec![Step::Dispatch(add.expect("launch"))]]);
    let add = Work::Execute(add.expect("record"));
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (gpu_queue, cpu_queue) =
        (builder.queue(QueueConfig::on(vulkan)), builder.queue(QueueConfig::on(cpu)));
    let home = builder.endpoint(cpu_queue).unwrap();
    let [first, downstream, later, cpu_alone] =
        [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build().unwrap();
    let lost = Err(causeway_runtime::blocking::HostWaitError::Failed(Failure::DeviceLost));

    // The first submission meets a lost device.
    gpu.inject_fault(FaultPoint::QueueSubmit, vk::Result::ERROR_DEVICE_LOST);
    device.submit(gpu_queue, &Op { signals: &[(first, 1)], work: add, ..Op::default() }).unwrap();
    let waiter = Op { waits: &[(first, 1)], signals: &[(downstream, 1)], ..Op::default() };
    device.submit(cpu_queue, &waiter).unwrap();
    assert_eq!(wait(device.semaphore(first).unwrap(), 1, Some(HANG_GUARD)), lost);
    assert_eq!(wait(device.semaphore(downstream).unwrap(), 1, Some(HANG_GUARD)), lost);
    // Later work on the lost device fails too; the CPU queue goes on.
    device.submit(gpu_queue, &Op { signals: &[(later, 1)], work: add, ..Op::default() }).unwrap();
    device.submit(cpu_queue, &Op { signals: &[(cpu_alone, 1)], ..Op::default() }).unwrap();
    assert_eq!(wait(device.semaphore(later).unwrap(), 1, Some(HANG_GUARD)), lost);
    assert_eq!(wait(device.semaphore(cpu_alone).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    drop((buffers, gpu));
    destroy_without_messages(app);
}

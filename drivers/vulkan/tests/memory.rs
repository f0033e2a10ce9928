//! Stream-ordered memory on Vulkan queues, on lavapipe with validation: an alloca that runs on a
//! Vulkan queue is backed by device memory of its own; a block the device layer lets a later
//! alloca reuse (its death frontier dominated) keeps its memory, so reuse allocates nothing; and
//! memory Vulkan cannot give fails the alloca, what it signals and what waits on it elsewhere,
//! with `Failure::OutOfMemory`, while the device goes on.

mod common;

use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    BufferId, Device, DeviceBuilder, Op, QueueConfig, QueueId, SemaphoreId, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{Buffer, FaultPoint, Gpu, Kernel, Step, VulkanBackend};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

use ash::vk;

/// A device with a Vulkan driver (validation on) and the Vulkan device it runs.
fn builder() -> (DeviceBuilder, Gpu, VulkanBackend) {
    let gpu = common::open();
    let backend = VulkanBackend::new(gpu.clone());
    (Device::builder(PoolConfig::with_workers(2)), gpu, backend)
}

fn semaphores<const N: usize>(builder: &mut DeviceBuilder, home: QueueId) -> [SemaphoreId; N] {
    let home = builder.endpoint(home).unwrap();
    [(); N].map(|()| builder.semaphore(0, Scope::DeviceLocal, home))
}

fn alloca(buffer: u32, bytes: u64) -> Work {
    Work::Alloca { buffer: BufferId(buffer), bytes }
}

fn signalling(work: Work, signals: &[(SemaphoreId, u64)]) -> Op<'_> {
    Op { waits: &[], signals, work, tag: 0, ..Default::default() }
}

/// 10 000 operations on one Vulkan queue: each alloca knows the dealloca before it, so the layer
/// reuses the one block throughout, and the driver allocates device memory exactly once.
#[test]
fn allocas_on_one_vulkan_queue_reuse_one_block_of_device_memory() {
    let (mut builder, gpu, backend) = builder();
    let vulkan = builder.driver(backend);
    let queue = builder.queue(QueueConfig::on(vulkan));
    let [freed] = semaphores(&mut builder, queue);
    builder.memory(1, 1 << 20);
    let device = builder.build().unwrap();
    const ROUNDS: u64 = 5000;
    for round in 1..=ROUNDS {
        device.submit(queue, &signalling(alloca(0, 64 << 10), &[])).unwrap();
        let signals = [(freed, round)];
        device.submit(queue, &signalling(Work::Dealloca(BufferId(0)), &signals)).unwrap();
    }
    let freed_value = wait(device.semaphore(freed).unwrap(), ROUNDS, Some(common::HANG_GUARD));
    assert_eq!(freed_value, Ok(ROUNDS));
    let stats = device.memory_stats();
    assert_eq!((stats.commits, stats.reused), (ROUNDS, ROUNDS - 1));
    let blocks = gpu.memory_blocks();
    assert_eq!((blocks.allocated, blocks.alive), (1, 1), "{blocks:?}");
    let report = device.shutdown(common::HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    assert_eq!(gpu.memory_blocks().alive, 0, "the driver frees what it kept");
    common::assert_validation_clean(&gpu);
}

/// Two Vulkan queues that know nothing of each other allocate and free side by side, with a
/// kernel between each alloca and its dealloca, 12 000 operations in all. Whatever the layer
/// decides, the driver allocates exactly one block of device memory per alloca the layer gave
/// fresh memory, and none per reuse.
#[test]
fn device_memory_follows_the_layers_reuse_decisions_across_queues() {
    let (mut builder, gpu, backend) = builder();
    // A command buffer per queue: one shared by both would have each queue read the other's
    // timeline while that queue signals it from the host, which the validation layer 1.3.239
    // misreports (see the watcher's module documentation).
    let vk_gpu = backend.gpu().clone();
    let add = Kernel::add(&vk_gpu).expect("add");
    let kernel = || {
        let [a, b, c] = [(); 3].map(|()| Buffer::new(&vk_gpu, 4096 * 4).expect("buffer"));
        let launch = add.launch(&[&a, &b, &c], 4096, 4, 0.0).expect("launch");
        Work::Execute(backend.command_buffer(vec![vec![Step::Dispatch(launch)]]).expect("record"))
    };
    let kernels = [kernel(), kernel()];
    let vulkan = builder.driver(backend);
    let queues = [builder.queue(QueueConfig::on(vulkan)), builder.queue(QueueConfig::on(vulkan))];
    let [freed_first, freed_second] = semaphores(&mut builder, queues[0]);
    builder.memory(2, 1 << 30);
    let device = builder.build().unwrap();
    const ROUNDS: u64 = 2000;
    for round in 1..=ROUNDS {
        for (index, (&queue, freed)) in queues.iter().zip([freed_first, freed_second]).enumerate() {
            // Sizes differ from round to round, so reuse needs a dead block large enough.
            let size = 1024 * (1 + (round + index as u64) % 4);
            device.submit(queue, &signalling(alloca(index as u32, size), &[])).unwrap();
            device.submit(queue, &signalling(kernels[index], &[])).unwrap();
            let signals = [(freed, round)];
            let dealloca = signalling(Work::Dealloca(BufferId(index as u32)), &signals);
            device.submit(queue, &dealloca).unwrap();
        }
    }
    for freed in [freed_first, freed_second] {
        let reached = wait(device.semaphore(freed).unwrap(), ROUNDS, Some(common::HANG_GUARD));
        assert_eq!(reached, Ok(ROUNDS));
    }
    let stats = device.memory_stats();
    assert_eq!(stats.commits, 2 * ROUNDS);
    assert!(stats.reused > 0, "{stats:?}");
    let blocks = gpu.memory_blocks();
    assert_eq!(blocks.allocated, stats.commits - stats.reused, "{blocks:?} {stats:?}");
    let report = device.shutdown(common::HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    assert_eq!(gpu.memory_blocks().alive, 0);
    common::assert_validation_clean(&gpu);
}

/// A block is device memory only while a Vulkan alloca owns it: when the layer hands a block that
/// died on a Vulkan queue to an alloca on a CPU queue, the driver frees its memory; when a Vulkan
/// alloca takes a block that died on the CPU queue, the driver allocates for it.
#[test]
fn a_block_reused_across_drivers_is_device_memory_only_on_the_vulkan_side() {
    let (mut builder, gpu, backend) = builder();
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (gpu_queue, cpu_queue) =
        (builder.queue(QueueConfig::on(vulkan)), builder.queue(QueueConfig::on(cpu)));
    let [freed] = semaphores(&mut builder, gpu_queue);
    builder.memory(2, 1 << 20);
    let device = builder.build().unwrap();
    let guard = Some(common::HANG_GUARD);
    let free = |queue, buffer, value: u64| {
        let signals = [(freed, value)];
        let op = signalling(Work::Dealloca(BufferId(buffer)), &signals);
        device.submit(queue, &op).unwrap();
        assert_eq!(wait(device.semaphore(freed).unwrap(), value, guard), Ok(value));
    };
    // Each alloca after the first waits for the last dealloca, so the layer lets it reuse that
    // block.
    let allocate = |queue, buffer, after: u64| {
        let waits = [(freed, after)];
        let waits = if after == 0 { &waits[..0] } else { &waits[..] };
        let op =
            Op { waits, signals: &[], work: alloca(buffer, 4096), tag: 0, ..Default::default() };
        device.submit(queue, &op).unwrap();
    };

    allocate(gpu_queue, 0, 0);
    free(gpu_queue, 0, 1);
    assert_eq!((gpu.memory_blocks().allocated, gpu.memory_blocks().alive), (1, 1));

    allocate(cpu_queue, 1, 1);
    free(cpu_queue, 1, 2);
    assert_eq!((gpu.memory_blocks().allocated, gpu.memory_blocks().alive), (1, 0));

    allocate(gpu_queue, 0, 2);
    free(gpu_queue, 0, 3);
    assert_eq!((gpu.memory_blocks().allocated, gpu.memory_blocks().alive), (2, 1));
    assert_eq!(device.memory_stats().reused, 2);
    let report = device.shutdown(common::HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    common::assert_validation_clean(&gpu);
}

/// lavapipe reports a 2 GiB heap and allocates lazily, so an allocation within the heap never
/// fails; one larger than the heap is what Vulkan forbids asking for, and the driver refuses it
/// as the device would: the alloca fails with `OutOfMemory`, so does a CPU operation waiting on
/// it, and the queue and the device go on.
#[test]
fn an_alloca_larger_than_the_heap_fails_with_out_of_memory_and_the_device_goes_on() {
    let (mut builder, gpu, backend) = builder();
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (gpu_queue, cpu_queue) =
        (builder.queue(QueueConfig::on(vulkan)), builder.queue(QueueConfig::on(cpu)));
    let [allocated, used, released, again] = semaphores(&mut builder, gpu_queue);
    builder.memory(2, u64::MAX);
    let device = builder.build().unwrap();

    device.submit(gpu_queue, &signalling(alloca(0, 1 << 50), &[(allocated, 1)])).unwrap();
    let uses = Op {
        waits: &[(allocated, 1)],
        signals: &[(used, 1)],
        work: Work::Spin(std::time::Duration::ZERO),
        tag: 1,
        ..Default::default()
    };
    device.submit(cpu_queue, &uses).unwrap();
    device.submit(gpu_queue, &signalling(Work::Dealloca(BufferId(0)), &[(released, 1)])).unwrap();
    let out_of_memory = Err(HostWaitError::Failed(Failure::OutOfMemory));
    let guard = Some(common::HANG_GUARD);
    assert_eq!(wait(device.semaphore(allocated).unwrap(), 1, guard), out_of_memory);
    assert_eq!(wait(device.semaphore(used).unwrap(), 1, guard), out_of_memory);
    assert_eq!(wait(device.semaphore(released).unwrap(), 1, guard), Ok(1));
    assert_eq!(device.committed_bytes(), 0, "the failed alloca gave its quota back");

    device.submit(gpu_queue, &signalling(alloca(1, 4096), &[])).unwrap();
    device.submit(gpu_queue, &signalling(Work::Dealloca(BufferId(1)), &[(again, 1)])).unwrap();
    assert_eq!(wait(device.semaphore(again).unwrap(), 1, guard), Ok(1));
    assert_eq!(gpu.memory_blocks().allocated, 1);
    let report = device.shutdown(common::HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    common::assert_validation_clean(&gpu);
}

/// `vkAllocateMemory` answering `VK_ERROR_OUT_OF_DEVICE_MEMORY` (injected: lavapipe never does
/// within its heap) fails the alloca with `OutOfMemory` and leaves the device usable;
/// `VK_ERROR_DEVICE_LOST` fails it with `DeviceLost`, and every later kernel of the driver too.
#[test]
fn vulkan_refusing_device_memory_fails_the_alloca_with_what_vulkan_said() {
    let (mut builder, gpu, backend) = builder();
    let vk_gpu = backend.gpu().clone();
    let [a, b, c] = [(); 3].map(|()| Buffer::new(&vk_gpu, 4096).expect("buffer"));
    let add = Kernel::add(&vk_gpu).expect("add").launch(&[&a, &b, &c], 1024, 1, 0.0);
    let add = Work::Execute(
        backend.command_buffer(vec![vec![Step::Dispatch(add.expect("launch"))]]).expect("record"),
    );
    let vulkan = builder.driver(backend);
    let queue = builder.queue(QueueConfig::on(vulkan));
    let [first, second, third, kernel] = semaphores(&mut builder, queue);
    builder.memory(1, 1 << 20);
    let device = builder.build().unwrap();
    let guard = Some(common::HANG_GUARD);

    gpu.inject_fault(FaultPoint::AllocateMemory, vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
    device.submit(queue, &signalling(alloca(0, 4096), &[(first, 1)])).unwrap();
    device.submit(queue, &signalling(Work::Dealloca(BufferId(0)), &[])).unwrap();
    let out_of_memory = Err(HostWaitError::Failed(Failure::OutOfMemory));
    assert_eq!(wait(device.semaphore(first).unwrap(), 1, guard), out_of_memory);

    device.submit(queue, &signalling(alloca(0, 4096), &[(second, 1)])).unwrap();
    device.submit(queue, &signalling(Work::Dealloca(BufferId(0)), &[])).unwrap();
    assert_eq!(wait(device.semaphore(second).unwrap(), 1, guard), Ok(1));

    // A fresh size, so the block kept from the last round does not serve it.
    gpu.inject_fault(FaultPoint::AllocateMemory, vk::Result::ERROR_DEVICE_LOST);
    device.submit(queue, &signalling(alloca(0, 8192), &[(third, 1)])).unwrap();
    device.submit(queue, &signalling(add, &[(kernel, 1)])).unwrap();
    let lost = Err(HostWaitError::Failed(Failure::DeviceLost));
    assert_eq!(wait(device.semaphore(third).unwrap(), 1, guard), lost);
    assert_eq!(wait(device.semaphore(kernel).unwrap(), 1, guard), lost);
    let report = device.shutdown(common::HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    common::assert_validation_clean(&gpu);
}

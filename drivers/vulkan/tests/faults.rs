//! Vulkan errors behind the device layer's seam, on lavapipe with validation. The errors a
//! working device never gives — `vkQueueSubmit2` or the watcher's `vkWaitSemaphores` failing —
//! are injected (`Gpu::inject_fault`, the `fault-injection` feature these tests turn on): the
//! operation struck fails with what Vulkan said, so do its signals and the CPU operations waiting
//! on them, every later operation of the driver fails as `DeviceLost`, and shutdown ends every
//! operation, work held on the device included. Nothing hangs, nothing panics.
//!
//! Work is held on the device deterministically by a *gate*: a batch on each VkQueue waiting for
//! a timeline only the test signals. lavapipe's one VkQueue runs batches in order
//! (`tests/submit.rs`), so everything submitted after the gate waits for it.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ash::vk;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Device, DeviceBuilder, DriverId, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId,
    SemaphoreConfig, SemaphoreId, ShutdownReport, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{
    submit, Buffer, FaultPoint, Gpu, Kernel, Step, Timeline, VulkanBackend,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

/// Operations each queue and semaphore has room for, so that the work held behind a gate is
/// all submitted without waiting for room.
const HELD: usize = 2048;

fn queue_of(driver: DriverId) -> QueueConfig {
    let mut config = QueueConfig::on(driver);
    config.capacity = HELD;
    config
}

/// A device with a Vulkan driver (validation on, one `c = a + b` command buffer per Vulkan
/// queue) and a CPU driver: one CPU queue, then `vulkan_queues` Vulkan queues.
struct Rig {
    device: Device,
    gpu: Gpu,
    cpu_queue: QueueId,
    vulkan_queues: Vec<(QueueId, Work)>,
    semaphores: Vec<SemaphoreId>,
}

fn rig(vulkan_queues: usize, semaphore_count: usize) -> Rig {
    rig_built(vulkan_queues, semaphore_count, |_| {})
}

/// [`rig`], its device reporting every operation's end to `ends`.
fn rig_observed(vulkan_queues: usize, semaphore_count: usize, ends: &Arc<Ends>) -> Rig {
    let ends: Arc<dyn Observer> = ends.clone();
    rig_built(vulkan_queues, semaphore_count, move |builder| builder.observer(ends))
}

fn rig_built(
    vulkan_queues: usize,
    semaphore_count: usize,
    configure: impl FnOnce(&mut DeviceBuilder),
) -> Rig {
    let gpu = common::open();
    let backend = VulkanBackend::new(gpu.clone());
    let add = Kernel::add(&gpu).expect("add kernel");
    let mut kernels = Vec::new();
    for _ in 0..vulkan_queues {
        let [a, b, c] = [(); 3].map(|()| Buffer::new(&gpu, 4096 * 4).expect("buffer"));
        let launch = add.launch(&[&a, &b, &c], 4096, 4, 0.0).expect("launch");
        let recorded = backend.command_buffer(vec![vec![Step::Dispatch(launch)]]).expect("record");
        kernels.push(Work::Execute(recorded));
    }
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let cpu_queue = builder.queue(queue_of(cpu));
    let vulkan_queues =
        kernels.into_iter().map(|kernel| (builder.queue(queue_of(vulkan)), kernel)).collect();
    let home = builder.endpoint(cpu_queue).unwrap();
    let mut config = SemaphoreConfig::new(0, Scope::DeviceLocal, home);
    config.history = HELD;
    let semaphores = (0..semaphore_count).map(|_| builder.semaphore_config(config)).collect();
    configure(&mut builder);
    Rig { device: builder.build().unwrap(), gpu, cpu_queue, vulkan_queues, semaphores }
}

/// Holds every batch submitted to the device after it until [`Gate::open`].
struct Gate {
    gpu: Gpu,
    gate: Timeline,
    passed: Timeline,
}

impl Gate {
    fn close(gpu: &Gpu) -> Gate {
        let gate = Timeline::new(gpu, 0).expect("timeline");
        let passed = Timeline::new(gpu, 0).expect("timeline");
        for vk_queue in 0..gpu.queue_count() {
            let value = vk_queue as u64 + 1;
            submit(gpu, vk_queue, None, &[(&gate, 1)], (&passed, value)).expect("gate");
        }
        Gate { gpu: gpu.clone(), gate, passed }
    }

    /// Lets the held batches run; returns once the gate batch of every VkQueue has passed.
    fn open(self) {
        self.gate.signal_host(1).expect("open the gate");
        let passed = self.passed.wait_host(self.gpu.queue_count() as u64, common::HANG_GUARD);
        assert_eq!(passed, Ok(true));
    }
}

fn cpu_waiter<'a>(waits: &'a [(SemaphoreId, u64)], signals: &'a [(SemaphoreId, u64)]) -> Op<'a> {
    Op { waits, signals, work: Work::Spin(Duration::ZERO), tag: 0, ..Default::default() }
}

fn failed(failure: Failure) -> Result<u64, HostWaitError> {
    Err(HostWaitError::Failed(failure))
}

fn assert_stopped_cleanly(report: &ShutdownReport) {
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

/// `vkQueueSubmit2` answers `VK_ERROR_DEVICE_LOST`: the operation and its signal fail as
/// `DeviceLost`, so does a CPU operation waiting on it (and its own signal), and so does every
/// later Vulkan operation, on any queue of the driver. The CPU queue goes on.
#[test]
fn a_submission_that_loses_the_device_fails_the_operation_and_everything_after_it() {
    let Rig { device, gpu, cpu_queue, vulkan_queues, semaphores } = rig(2, 5);
    let [struck, downstream, later, other_queue, cpu_alone] = semaphores[..] else {
        unreachable!()
    };
    let [(first, kernel), (second, other_kernel)] = vulkan_queues[..] else { unreachable!() };
    let guard = Some(common::HANG_GUARD);

    gpu.inject_fault(FaultPoint::QueueSubmit, vk::Result::ERROR_DEVICE_LOST);
    let op = Op { waits: &[], signals: &[(struck, 1)], work: kernel, tag: 1, ..Default::default() };
    device.submit(first, &op).unwrap();
    device.submit(cpu_queue, &cpu_waiter(&[(struck, 1)], &[(downstream, 1)])).unwrap();
    assert_eq!(wait(device.semaphore(struck).unwrap(), 1, guard), failed(Failure::DeviceLost));
    assert_eq!(wait(device.semaphore(downstream).unwrap(), 1, guard), failed(Failure::DeviceLost));

    device
        .submit(
            first,
            &Op { waits: &[], signals: &[(later, 1)], work: kernel, tag: 2, ..Default::default() },
        )
        .unwrap();
    let op = Op {
        waits: &[],
        signals: &[(other_queue, 1)],
        work: other_kernel,
        tag: 3,
        ..Default::default()
    };
    device.submit(second, &op).unwrap();
    device.submit(cpu_queue, &cpu_waiter(&[], &[(cpu_alone, 1)])).unwrap();
    assert_eq!(wait(device.semaphore(later).unwrap(), 1, guard), failed(Failure::DeviceLost));
    let other = wait(device.semaphore(other_queue).unwrap(), 1, guard);
    assert_eq!(other, failed(Failure::DeviceLost));
    assert_eq!(wait(device.semaphore(cpu_alone).unwrap(), 1, guard), Ok(1));
    assert_stopped_cleanly(&device.shutdown(common::HANG_GUARD));
    common::assert_validation_clean(&gpu);
}

/// `vkQueueSubmit2` answers `VK_ERROR_OUT_OF_DEVICE_MEMORY`: the operation fails with
/// `OutOfMemory`, what waits on it too; the driver stops taking work (its queue's timeline
/// expects a signal that will never come), so later operations fail as `DeviceLost`.
#[test]
fn a_submission_out_of_memory_fails_the_operation_with_out_of_memory() {
    let Rig { device, gpu, cpu_queue, vulkan_queues, semaphores } = rig(1, 3);
    let [struck, downstream, later] = semaphores[..] else { unreachable!() };
    let (queue, kernel) = vulkan_queues[0];
    let guard = Some(common::HANG_GUARD);

    gpu.inject_fault(FaultPoint::QueueSubmit, vk::Result::ERROR_OUT_OF_DEVICE_MEMORY);
    device
        .submit(
            queue,
            &Op { waits: &[], signals: &[(struck, 1)], work: kernel, tag: 1, ..Default::default() },
        )
        .unwrap();
    device.submit(cpu_queue, &cpu_waiter(&[(struck, 1)], &[(downstream, 1)])).unwrap();
    device
        .submit(
            queue,
            &Op { waits: &[], signals: &[(later, 1)], work: kernel, tag: 2, ..Default::default() },
        )
        .unwrap();
    let out_of_memory = failed(Failure::OutOfMemory);
    assert_eq!(wait(device.semaphore(struck).unwrap(), 1, guard), out_of_memory);
    assert_eq!(wait(device.semaphore(downstream).unwrap(), 1, guard), out_of_memory);
    assert_eq!(wait(device.semaphore(later).unwrap(), 1, guard), failed(Failure::DeviceLost));
    assert_stopped_cleanly(&device.shutdown(common::HANG_GUARD));
    common::assert_validation_clean(&gpu);
}

/// The watcher's `vkWaitSemaphores` answers `VK_ERROR_DEVICE_LOST` while an operation is held
/// on the device: the operation fails as `DeviceLost` though the device would have run it, so
/// do its signal and a CPU operation waiting on it. Once the gate opens the device drains, and
/// the driver stops cleanly.
#[test]
fn a_watcher_wait_that_loses_the_device_fails_the_pending_operation_and_its_waiters() {
    let Rig { device, gpu, cpu_queue, vulkan_queues, semaphores } = rig(1, 2);
    let [pending, downstream] = semaphores[..] else { unreachable!() };
    let (queue, kernel) = vulkan_queues[0];
    let guard = Some(common::HANG_GUARD);

    // The watcher makes no Vulkan call before its first registration, which this operation's
    // first poll makes: the gate keeps it from completing before then.
    gpu.inject_fault(FaultPoint::WatcherWait, vk::Result::ERROR_DEVICE_LOST);
    let gate = Gate::close(&gpu);
    let op =
        Op { waits: &[], signals: &[(pending, 1)], work: kernel, tag: 1, ..Default::default() };
    device.submit(queue, &op).unwrap();
    device.submit(cpu_queue, &cpu_waiter(&[(pending, 1)], &[(downstream, 1)])).unwrap();
    assert_eq!(wait(device.semaphore(pending).unwrap(), 1, guard), failed(Failure::DeviceLost));
    assert_eq!(wait(device.semaphore(downstream).unwrap(), 1, guard), failed(Failure::DeviceLost));
    gate.open();
    assert_stopped_cleanly(&device.shutdown(common::HANG_GUARD));
    common::assert_validation_clean(&gpu);
}

/// Every operation's end, as `(queue, tag, status)`.
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

/// Shutdown while a thousand Vulkan operations are held on the device, native waits chaining
/// two Vulkan queues, and CPU operations wait on them: every operation ends exactly once and
/// none as done — what the device holds fails as aborted, what never ran is cancelled — so
/// every signal fails and no waiter is left; the driver, whose device work cannot end before
/// the gate opens, is reported busy instead of waited for.
#[test]
fn teardown_with_work_held_on_the_device_ends_every_operation() {
    let ends = Arc::new(Ends::default());
    let Rig { device, gpu, cpu_queue, vulkan_queues, semaphores } = rig_observed(2, 3, &ends);
    let [on_first, on_second, on_cpu] = semaphores[..] else { unreachable!() };
    let [(first, kernel), (second, other_kernel)] = vulkan_queues[..] else { unreachable!() };
    let gate = Gate::close(&gpu);
    const ROUNDS: u64 = 1000;
    for round in 1..=ROUNDS {
        let op = Op {
            waits: &[],
            signals: &[(on_first, round)],
            work: kernel,
            tag: round,
            ..Default::default()
        };
        device.submit(first, &op).unwrap();
        let waits = [(on_first, round)];
        let op = Op {
            waits: &waits,
            signals: &[(on_second, round)],
            work: other_kernel,
            tag: round,
            ..Default::default()
        };
        device.submit(second, &op).unwrap();
        device.submit(cpu_queue, &cpu_waiter(&[(on_second, round)], &[(on_cpu, round)])).unwrap();
    }
    let report = device.shutdown(Duration::ZERO);
    assert_eq!(report.busy_drivers, ["vulkan"], "{report:?}");
    {
        let ends = ends.0.lock().unwrap();
        assert_eq!(ends.len() as u64, 3 * ROUNDS, "every operation ends once");
        let done = ends.iter().filter(|(_, _, status)| *status == OpStatus::Ok).count();
        assert_eq!(done, 0, "nothing passed the gate");
    }
    gate.open();
    common::assert_validation_clean(&gpu);
}

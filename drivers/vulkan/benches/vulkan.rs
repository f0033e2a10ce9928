//! The Vulkan driver beside a raw program on the same Vulkan plumbing, in the same run (lavapipe
//! on the test machines; `CAUSEWAY_VULKAN_ADAPTER` picks another device). The raw side calls
//! [`submit`] directly — one `vkQueueSubmit2` per operation, timeline waits and signals, host
//! waits — with no device layer, no frontiers and no queue processes: the floor causeway's
//! bookkeeping adds to.
//!
//! - `submit`: 64 small kernels (an add over 256 floats) on one queue, each signalling the
//!   queue's progress, then a host wait for the last. Eight command buffers in rotation (one is
//!   resubmitted only once its previous submission ended: causeway waits for that inside the
//!   layer, the raw program on the host).
//! - `dag`: 64 kernels on two queues in 32 fork-join stages, each operation depending on both
//!   operations of the stage before and of the stage before that (the second pair is implied
//!   transitively). Raw: one timeline wait per dependency edge (4 per operation after the
//!   first stages). causeway: same-queue edges elided by FIFO, the stage-before-last elided by
//!   frontier knowledge — one native wait per operation. The native waits of one iteration are
//!   printed beside the timing.
//! - `cpu_signal_to_vulkan`: a CPU queue's host function signals a semaphore a Vulkan kernel
//!   waits on (held by the layer: it is another driver's work); measured from the signal to the
//!   host seeing the kernel done. Floor: a batch already submitted with a native wait on a
//!   timeline, host-signalled, then waited on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway_core::scope::Scope;
use causeway_device::{Device, DriverId, Op, QueueConfig, QueueId, SemaphoreId, Work};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{
    submit, Buffer, CommandBuffer, Gpu, GpuOptions, Kernel, Step, Timeline, VulkanBackend,
};
use causeway_runtime::blocking::wait;
use causeway_runtime::PoolConfig;
use criterion::{criterion_main, Criterion, SamplingMode};

const ELEMENTS: u32 = 256;
const ROTATION: usize = 8;
const OPS: u64 = 64;
const STAGES: u64 = OPS / 2;
const PATIENCE: Option<Duration> = Some(Duration::from_secs(60));

fn gpu() -> Gpu {
    let options = GpuOptions::from_env().expect("CAUSEWAY_VULKAN_* variables");
    Gpu::open(&options).expect("a Vulkan device (lavapipe: mesa-vulkan-drivers)")
}

/// `ROTATION` command buffers of one small add each, over buffers of their own.
fn recordings(gpu: &Gpu) -> Vec<Vec<Vec<Step>>> {
    let kernel = Kernel::add(gpu).expect("kernel");
    (0..ROTATION)
        .map(|_| {
            let [a, b, c] = [(); 3].map(|()| Buffer::new(gpu, u64::from(ELEMENTS) * 4).unwrap());
            vec![vec![Step::Dispatch(kernel.launch(&[&a, &b, &c], ELEMENTS, 1, 0.0).unwrap())]]
        })
        .collect()
}

fn queue_of(driver: DriverId) -> QueueConfig {
    let mut config = QueueConfig::default();
    config.driver = driver;
    config
}

/// A device with two Vulkan queues and a CPU queue, the rotation recorded, `semaphores` made.
struct Rig {
    device: Device,
    gpu: Gpu,
    kernels: Vec<Work>,
    vulkan: [QueueId; 2],
    cpu: QueueId,
    semaphores: Vec<SemaphoreId>,
    /// Nanoseconds after `origin` at which the `stamp` host function last ran.
    stamped: Arc<AtomicU64>,
    stamp: Work,
    origin: Instant,
}

fn rig(semaphores: usize) -> Rig {
    let gpu = gpu();
    let mut backend = VulkanBackend::new(gpu.clone());
    let kernels = recordings(&gpu)
        .into_iter()
        .map(|regions| Work::Execute(backend.command_buffer(regions).unwrap()))
        .collect();
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let vulkan_driver = builder.driver(backend);
    let cpu_driver = builder.driver(CpuBackend::new());
    let vulkan = [builder.queue(queue_of(vulkan_driver)), builder.queue(queue_of(vulkan_driver))];
    let cpu = builder.queue(queue_of(cpu_driver));
    let home = builder.endpoint(cpu).unwrap();
    let semaphores =
        (0..semaphores).map(|_| builder.semaphore(0, Scope::DeviceLocal, home)).collect();
    let origin = Instant::now();
    let stamped = Arc::new(AtomicU64::new(0));
    let stamp = {
        let stamped = Arc::clone(&stamped);
        Work::Host(builder.host_call(move || {
            stamped.store(origin.elapsed().as_nanos() as u64, Ordering::Relaxed);
            Ok(())
        }))
    };
    let device = builder.build().unwrap();
    Rig { device, gpu, kernels, vulkan, cpu, semaphores, stamped, stamp, origin }
}

fn submit_pipeline(c: &mut Criterion) {
    let rig = rig(1);
    let progress = rig.semaphores[0];
    let mut value = 0;
    let raw_gpu = gpu();
    let raw_commands: Vec<CommandBuffer> = recordings(&raw_gpu)
        .into_iter()
        .map(|regions| CommandBuffer::record(&raw_gpu, regions).unwrap())
        .collect();
    let raw_timeline = Timeline::new(&raw_gpu, 0).unwrap();
    let mut raw_value = 0;

    let mut group = c.benchmark_group("submit");
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(6));
    group.bench_function("causeway_64_kernels", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for op in 0..OPS {
                    value += 1;
                    let work = rig.kernels[op as usize % ROTATION];
                    let op = Op { waits: &[], signals: &[(progress, value)], work, tag: value };
                    rig.device.submit(rig.vulkan[0], &op).unwrap();
                }
                wait(rig.device.semaphore(progress).unwrap(), value, PATIENCE).unwrap();
            }
            start.elapsed()
        })
    });
    group.bench_function("raw_64_kernels", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for op in 0..OPS {
                    raw_value += 1;
                    // The command buffer's previous submission must have ended.
                    if raw_value > ROTATION as u64 {
                        let previous = raw_value - ROTATION as u64;
                        assert!(raw_timeline.wait_host(previous, Duration::from_secs(60)).unwrap());
                    }
                    let commands = &raw_commands[op as usize % ROTATION];
                    submit(&raw_gpu, 0, Some(commands), &[], (&raw_timeline, raw_value)).unwrap();
                }
                assert!(raw_timeline.wait_host(raw_value, Duration::from_secs(60)).unwrap());
            }
            start.elapsed()
        })
    });
    group.finish();
}

/// The dependencies of operation (stage, side): both operations of each of the two stages
/// before, as (stage, side) pairs, the latest stage first (so that its import makes the
/// earlier stage known before that stage's waits are resolved).
fn dependencies(stage: u64) -> impl Iterator<Item = (u64, usize)> {
    (stage.saturating_sub(2)..stage).rev().flat_map(|before| [(before, 0), (before, 1)])
}

fn dag(c: &mut Criterion) {
    let rig = rig(2);
    let done = [rig.semaphores[0], rig.semaphores[1]];
    let mut base = 0;
    let raw_gpu = gpu();
    let raw_commands: Vec<CommandBuffer> = recordings(&raw_gpu)
        .into_iter()
        .map(|regions| CommandBuffer::record(&raw_gpu, regions).unwrap())
        .collect();
    let raw_timelines = [Timeline::new(&raw_gpu, 0).unwrap(), Timeline::new(&raw_gpu, 0).unwrap()];
    let mut raw_base = 0;

    let native_before = rig.gpu.native_waits();
    let mut group = c.benchmark_group("dag");
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(6));
    let mut causeway_rounds = 0;
    group.bench_function("causeway_64_ops_fork_join", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                causeway_rounds += 1;
                for stage in 1..=STAGES {
                    for side in 0..2 {
                        let waits: Vec<(SemaphoreId, u64)> = dependencies(stage)
                            .filter(|&(before, _)| before > 0)
                            .map(|(before, other)| (done[other], base + before))
                            .collect();
                        let work = rig.kernels[(2 * stage as usize + side) % ROTATION];
                        let signals = [(done[side], base + stage)];
                        let op = Op { waits: &waits, signals: &signals, work, tag: stage };
                        rig.device.submit(rig.vulkan[side], &op).unwrap();
                    }
                }
                base += STAGES;
                for semaphore in done {
                    wait(rig.device.semaphore(semaphore).unwrap(), base, PATIENCE).unwrap();
                }
            }
            start.elapsed()
        })
    });
    let mut raw_rounds = 0;
    let mut raw_native = 0;
    group.bench_function("raw_64_ops_one_wait_per_edge", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                raw_rounds += 1;
                for stage in 1..=STAGES {
                    for side in 0..2 {
                        let waits: Vec<(&Timeline, u64)> = dependencies(stage)
                            .filter(|&(before, _)| before > 0)
                            .map(|(before, other)| (&raw_timelines[other], raw_base + before))
                            .collect();
                        raw_native += waits.len() as u64;
                        let slot = (2 * stage as usize + side) % ROTATION;
                        // The command buffer's previous submission (ROTATION / 2 stages ago).
                        let reuse = (raw_base + stage).saturating_sub((ROTATION / 2) as u64);
                        if reuse > 0 {
                            assert!(raw_timelines[side]
                                .wait_host(reuse, Duration::from_secs(60))
                                .unwrap());
                        }
                        let signal = (&raw_timelines[side], raw_base + stage);
                        submit(&raw_gpu, 0, Some(&raw_commands[slot]), &waits, signal).unwrap();
                    }
                }
                raw_base += STAGES;
                for timeline in &raw_timelines {
                    assert!(timeline.wait_host(raw_base, Duration::from_secs(60)).unwrap());
                }
            }
            start.elapsed()
        })
    });
    group.finish();
    let causeway_native = rig.gpu.native_waits() - native_before;
    println!(
        "dag native waits per 64 ops: causeway {:.1}, raw one-per-edge {:.1}",
        causeway_native as f64 / causeway_rounds.max(1) as f64,
        raw_native as f64 / raw_rounds.max(1) as f64,
    );
}

fn cpu_signal_to_vulkan(c: &mut Criterion) {
    let rig = rig(2);
    let (signalled, done) = (rig.semaphores[0], rig.semaphores[1]);
    let mut value = 0;
    let raw_gpu = gpu();
    let raw_commands = CommandBuffer::record(&raw_gpu, recordings(&raw_gpu).remove(0)).unwrap();
    let (raw_gate, raw_done) =
        (Timeline::new(&raw_gpu, 0).unwrap(), Timeline::new(&raw_gpu, 0).unwrap());
    let mut raw_value = 0;

    let mut group = c.benchmark_group("cpu_signal_to_vulkan");
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("causeway_held_wait", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                value += 1;
                let work = rig.kernels[0];
                let kernel = Op {
                    waits: &[(signalled, value)],
                    signals: &[(done, value)],
                    work,
                    tag: value,
                };
                rig.device.submit(rig.vulkan[0], &kernel).unwrap();
                let stamp =
                    Op { waits: &[], signals: &[(signalled, value)], work: rig.stamp, tag: value };
                rig.device.submit(rig.cpu, &stamp).unwrap();
                wait(rig.device.semaphore(done).unwrap(), value, PATIENCE).unwrap();
                let ended = rig.origin.elapsed();
                total +=
                    ended.saturating_sub(Duration::from_nanos(rig.stamped.load(Ordering::Relaxed)));
            }
            total
        })
    });
    group.bench_function("floor_native_wait_host_signal", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                raw_value += 1;
                let waits = [(&raw_gate, raw_value)];
                submit(&raw_gpu, 0, Some(&raw_commands), &waits, (&raw_done, raw_value)).unwrap();
                let signalled_at = Instant::now();
                raw_gate.signal_host(raw_value).unwrap();
                assert!(raw_done.wait_host(raw_value, Duration::from_secs(60)).unwrap());
                total += signalled_at.elapsed();
            }
            total
        })
    });
    group.finish();
}

// `criterion_group!` emits an undocumented `pub fn`; a private module keeps it out of the
// crate's documented surface.
mod group {
    criterion::criterion_group!(
        benches,
        super::submit_pipeline,
        super::dag,
        super::cpu_signal_to_vulkan
    );
}
criterion_main!(group::benches);

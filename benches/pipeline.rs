//! One pipeline stage across drivers: a CPU producer queue feeding a consumer stage on an NPU
//! queue (the software device model), against the same consumer stage on a CPU queue, in the
//! same device and the same run.
//!
//! A block is [`ITEMS`] items submitted ahead, in order: producer item `i` busy-runs
//! [`PRODUCE`] on the CPU queue and signals `produced ≥ i`; consumer item `i` waits on it, runs a
//! one-tile command buffer (an empty kernel) and signals `consumed ≥ i`. Measured: from the
//! first submission to the host seeing the last item consumed. The producer bounds the block
//! at `ITEMS × PRODUCE`; what a consumer stage adds above that is what each dependency costs
//! it — on the NPU, a WAIT descriptor on the word mirroring the CPU queue's progress when the
//! driver waits on it natively, a host round trip per item when the layer holds the wait.
//!
//! The second group, `chunk_pipeline`, times the `chunk_pipeline` example's work — chunks
//! through load, transform and store, each stage one host function or kernel told its chunk by
//! its submission's arguments — on a device against three threads joined by `std::sync::mpsc`
//! channels, in alternating blocks of [`CHUNKS_PER_BLOCK`] chunks.
//!
//! The two stages run as alternating blocks: each measured block of one stage follows an
//! unmeasured block of the other, so drift on the noisy two-core machine (other processes,
//! frequency) lands on both. The ratio of the two means is the figure of interest.

use std::time::{Duration, Instant};

use causeway::cpu::CpuBackend;
use causeway::device::{
    Args, Device, DriverId, Op, QueueConfig, QueueId, SemaphoreConfig, SemaphoreId, Work,
};
use causeway::npu::NpuBackend;
use causeway::runtime::blocking;
use causeway::scope::{Endpoint, Scope};
use causeway::PoolConfig;
use criterion::{criterion_main, Criterion, SamplingMode};

#[path = "../examples/support/chunk_pipeline.rs"]
mod chunk_pipeline;

/// Chunks per block of the `chunk_pipeline` group.
const CHUNKS_PER_BLOCK: u64 = 100;

/// Items per block.
const ITEMS: u64 = 64;

/// The producer's busy work per item.
const PRODUCE: Duration = Duration::from_micros(10);

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

/// One consumer stage: its queue, its kernel and the two semaphores of its pipeline.
struct Stage {
    queue: QueueId,
    kernel: Work,
    produced: SemaphoreId,
    consumed: SemaphoreId,
    /// Items through the stage so far (the semaphores' values).
    items: u64,
}

struct PipelineBench {
    device: Device,
    producer: QueueId,
    on_npu: Stage,
    on_cpu: Stage,
}

#[derive(Clone, Copy)]
enum Consumer {
    Npu,
    Cpu,
}

impl PipelineBench {
    fn new() -> PipelineBench {
        let cpu = CpuBackend::new();
        let cpu_kernel =
            cpu.command_buffer(vec![(1, Box::new(|_tile: u32, _: &Args| {}))]).expect("one tile");
        let npu = NpuBackend::new();
        let npu_kernel =
            npu.command_buffer(vec![(1, Box::new(|_tile: u32, _: &Args| {}))]).expect("one tile");
        let mut builder = Device::builder(PoolConfig::with_workers(2));
        let cpu: DriverId = builder.driver(cpu);
        let npu: DriverId = builder.driver(npu);
        let producer = builder.queue(QueueConfig::on(cpu));
        let npu_queue = builder.queue(QueueConfig::on(npu));
        let cpu_queue = builder.queue(QueueConfig::on(cpu));
        let mut semaphore = || {
            let mut config = SemaphoreConfig::new(0, Scope::DeviceLocal, HOME);
            config.history = ITEMS as usize + 2;
            builder.semaphore_config(config)
        };
        let (npu_produced, npu_consumed, cpu_produced, cpu_consumed) =
            (semaphore(), semaphore(), semaphore(), semaphore());
        let device = builder.build().expect("the device starts");
        PipelineBench {
            device,
            producer,
            on_npu: Stage {
                queue: npu_queue,
                kernel: Work::Execute(npu_kernel),
                produced: npu_produced,
                consumed: npu_consumed,
                items: 0,
            },
            on_cpu: Stage {
                queue: cpu_queue,
                kernel: Work::Execute(cpu_kernel),
                produced: cpu_produced,
                consumed: cpu_consumed,
                items: 0,
            },
        }
    }

    /// Runs one block through `consumer`'s stage; how long it took.
    fn block(&mut self, consumer: Consumer) -> Duration {
        let producer = self.producer;
        let stage = match consumer {
            Consumer::Npu => &mut self.on_npu,
            Consumer::Cpu => &mut self.on_cpu,
        };
        let start = Instant::now();
        for _ in 0..ITEMS {
            stage.items += 1;
            let item = stage.items;
            let produced = [(stage.produced, item)];
            let produce = Op {
                waits: &[],
                signals: &produced,
                work: Work::Spin(PRODUCE),
                tag: item,
                ..Default::default()
            };
            self.device.submit(producer, &produce).expect("the producer takes the item");
            let consumed = [(stage.consumed, item)];
            let consume = Op {
                waits: &produced,
                signals: &consumed,
                work: stage.kernel,
                tag: item,
                ..Default::default()
            };
            self.device.submit(stage.queue, &consume).expect("the consumer takes the item");
        }
        let consumed = self.device.semaphore(stage.consumed).expect("declared");
        blocking::wait(consumed, stage.items, Some(Duration::from_secs(30)))
            .expect("the block ends");
        start.elapsed()
    }

    /// `iters` blocks of `measured`'s stage, each after an unmeasured block of the other.
    fn alternating(&mut self, measured: Consumer, iters: u64) -> Duration {
        let other = match measured {
            Consumer::Npu => Consumer::Cpu,
            Consumer::Cpu => Consumer::Npu,
        };
        (0..iters)
            .map(|_| {
                self.block(other);
                self.block(measured)
            })
            .sum()
    }
}

fn cpu_to_consumer_stage(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline_stage");
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(4));
    let mut bench = PipelineBench::new();
    group.bench_function("cpu_producer_npu_consumer", |b| {
        b.iter_custom(|iters| bench.alternating(Consumer::Npu, iters))
    });
    group.bench_function("cpu_producer_cpu_consumer", |b| {
        b.iter_custom(|iters| bench.alternating(Consumer::Cpu, iters))
    });
    group.finish();
}

// `criterion_group!` emits an undocumented `pub fn`; a private module keeps it out of the
// workspace's `missing_docs` lint without silencing the lint for the rest of the file.
#[derive(Clone, Copy)]
enum ChunkRunner {
    Device,
    Threads,
}

fn chunk_block(device: &mut chunk_pipeline::DevicePipeline, runner: ChunkRunner) -> Duration {
    let start = Instant::now();
    match runner {
        ChunkRunner::Device => {
            device.run(CHUNKS_PER_BLOCK).expect("the device pipeline runs");
        }
        ChunkRunner::Threads => {
            std::hint::black_box(chunk_pipeline::run_threads(CHUNKS_PER_BLOCK));
        }
    }
    start.elapsed()
}

fn chunks_device_against_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("chunk_pipeline");
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(6));
    let mut device = chunk_pipeline::DevicePipeline::new(2).expect("the device starts");
    // Both do the work before either is timed: the same total over the first block.
    let expected = chunk_pipeline::expected_total(CHUNKS_PER_BLOCK);
    assert_eq!(chunk_pipeline::run_threads(CHUNKS_PER_BLOCK), expected);
    assert_eq!(device.run(CHUNKS_PER_BLOCK).expect("the device pipeline runs"), expected);
    for (name, measured, other) in [
        ("causeway_device_args", ChunkRunner::Device, ChunkRunner::Threads),
        ("mpsc_threads", ChunkRunner::Threads, ChunkRunner::Device),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        chunk_block(&mut device, other);
                        chunk_block(&mut device, measured)
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

mod group {
    criterion::criterion_group!(
        benches,
        super::cpu_to_consumer_stage,
        super::chunks_device_against_threads
    );
}

criterion_main!(group::benches);

//! CPU → NPU → Vulkan: a CPU queue writes the input `a` (a host function), an NPU queue (the
//! software model of `causeway::npu`) computes `b = 2·a` with a tiled kernel, and a Vulkan queue
//! (lavapipe on a machine without a GPU) adds `c = a + b` with a compute shader; the host checks
//! `c = 3·a`. All three operations are submitted at once, each waiting on the one before it
//! through a semaphore, and the caller never blocks until it wants the result.
//!
//! How each wait is resolved depends on what the waiting queue's driver can wait for:
//! - the NPU queue waits on the CPU queue's value with a WAIT descriptor on a host-written
//!   mirror of the CPU queue's progress (the NPU driver's `waits_host_written`);
//! - the Vulkan queue cannot wait natively on the NPU's work (a Vulkan timeline follows only
//!   Vulkan queues): the device layer holds that operation until the NPU's value is reached,
//!   then issues it with no native wait (the Vulkan driver's `native_waits` stays 0).
//!
//! Run: `CAUSEWAY_VULKAN_ADAPTER=llvmpipe CAUSEWAY_VULKAN_VALIDATION=1 cargo run --release
//! --example npu_vulkan_chain` (the adapter names the Vulkan device; validation reports any
//! misuse of Vulkan, which fails the run).

use std::process::ExitCode;
use std::time::Duration;

use causeway::cpu::CpuBackend;
use causeway::device::{Args, Device, Op, QueueConfig, SemaphoreId, Work};
use causeway::npu::NpuBackend;
use causeway::vulkan::{Buffer, Gpu, GpuOptions, Kernel, Step, VulkanBackend};
use causeway::{Failure, PoolConfig, Scope};

const ELEMENTS: usize = 1024;
const TILES: u32 = 4;
const PER_TILE: usize = ELEMENTS / TILES as usize;

fn run() -> Result<(), Box<dyn std::error::Error>> {
    // Host-visible Vulkan buffers: the CPU and the NPU model write them, the shader reads them.
    let gpu = Gpu::open(&GpuOptions::from_env()?)?;
    let [a, b, c] = [(); 3].map(|()| Buffer::new(&gpu, (ELEMENTS * 4) as u64));
    let (a, b, c) = (a?, b?, c?);

    let vulkan = VulkanBackend::new(gpu.clone());
    let launch = Kernel::add(&gpu)?.launch(&[&a, &b, &c], ELEMENTS as u32, TILES, 0.0)?;
    let add = vulkan.command_buffer(vec![vec![Step::Dispatch(launch)]])?;

    // The NPU kernel, one tile per quarter: b = 2·a. A tile that cannot reach the buffers
    // leaves b unwritten, which the final check catches.
    let npu = NpuBackend::new();
    let double = npu.command_buffer(vec![(
        TILES,
        Box::new({
            let (a, b) = (a.clone(), b.clone());
            move |tile: u32, _: &Args| {
                let first = tile as usize * PER_TILE;
                if let Ok(values) = a.read_f32(first, PER_TILE) {
                    let doubled: Vec<f32> = values.iter().map(|x| 2.0 * x).collect();
                    let _ = b.write_f32(first, &doubled);
                }
            }
        }),
    )])?;

    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu_driver = builder.driver(CpuBackend::new());
    let npu_driver = builder.driver(npu);
    let vulkan_driver = builder.driver(vulkan);
    let input: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
    let produce = builder.host_call({
        let a = a.clone();
        move |_| a.write_f32(0, &input).map_err(|_| Failure::Application(1))
    });
    let host = builder.queue(QueueConfig::on(cpu_driver).name("cpu"));
    let transform = builder.queue(QueueConfig::on(npu_driver).name("npu"));
    let consume = builder.queue(QueueConfig::on(vulkan_driver).name("vulkan"));
    let home = builder.endpoint(host).ok_or("the queue has no endpoint")?;
    // `input_ready` is the host's: it signals it once the whole chain is submitted, so every
    // wait below is resolved while the work it waits for is still to come, as in a pipeline
    // whose input arrives later (and the counts printed do not depend on timing).
    let [input_ready, produced, transformed, consumed] =
        [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let device = builder.build()?;

    // Each operation waits on the one before it; all three are submitted before any runs.
    type Signal = (SemaphoreId, u64);
    let submit = |queue, tag, waits: &[Signal], signals: &[Signal], work| {
        device.submit(queue, &Op { waits, signals, work, tag, ..Default::default() })
    };
    submit(host, 1, &[(input_ready, 1)], &[(produced, 1)], Work::Host(produce))?;
    submit(transform, 2, &[(produced, 1)], &[(transformed, 1)], Work::Execute(double))?;
    let last = submit(consume, 3, &[(transformed, 1)], &[(consumed, 1)], Work::Execute(add))?;
    device.semaphore(input_ready).ok_or("declared")?.signal_external(1)?;
    device.wait(consumed, 1, Some(Duration::from_secs(30)))?;

    let expected: Vec<f32> = (0..ELEMENTS).map(|i| 3.0 * i as f32).collect();
    let correct = c.read_f32(0, ELEMENTS)? == expected;
    println!(
        "c = a + 2·a over {ELEMENTS} floats: {}; the Vulkan operation's frontier names {} queues",
        if correct { "correct" } else { "WRONG" },
        last.frontier.len()
    );

    // How every wait was resolved, per queue, and what each driver counted.
    let stats = device.stats();
    for (queue, name) in [(transform, "npu"), (consume, "vulkan")] {
        let r = stats.queue(queue).ok_or("the queue is counted")?.resolutions;
        println!(
            "{name} queue's waits: {} elided, {} satisfied, {} device, {} held",
            r.elided, r.satisfied, r.device, r.held
        );
    }
    let counter = |driver, name| stats.counter(driver, name).unwrap_or(0);
    let host_written = counter("npu", "waits_host_written");
    let npu_held = counter("npu", "waits_held");
    let native_waits = counter("vulkan", "native_waits");
    println!(
        "npu driver: {} WAITs emitted, {host_written} on a host-written mirror, {npu_held} held; \
         vulkan driver: {native_waits} native waits",
        counter("npu", "waits_emitted"),
    );

    // With CAUSEWAY_VULKAN_VALIDATION=1 the Khronos validation layer watches every call, the
    // device's teardown included.
    drop(device);
    let messages = gpu.validation_message_count();
    let vulkan_held = stats.queue(consume).map_or(0, |queue| queue.resolutions.held);
    let npu_device_waits = stats.queue(transform).map_or(0, |queue| queue.resolutions.device);
    let expected = (true, 0, 1, 0, 1, 1);
    let seen = (correct, messages, vulkan_held, native_waits, npu_device_waits, host_written);
    if seen != expected {
        return Err(format!(
            "expected (correct, validation messages, held Vulkan waits, native Vulkan waits, \
             NPU device waits, host-written WAITs) {expected:?}, saw {seen:?}"
        )
        .into());
    }
    println!("the Vulkan wait on the NPU's value was held by the layer, not issued to Vulkan");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("npu_vulkan_chain: {error}");
            ExitCode::FAILURE
        }
    }
}

//! The README's library example with the add on a Vulkan queue: a CPU queue uploads the inputs
//! from the host, a Vulkan queue (Mesa's lavapipe on a machine without a GPU) adds them with a
//! compute shader, and a semaphore signalled on the CPU queue is waited on from the Vulkan one.
//! The Vulkan operation is submitted right behind the upload without waiting for it: the layer
//! holds it until the upload's value is reached, then issues it to Vulkan; the caller never
//! blocks.
//!
//! Run: `cargo run --example cross_driver` (needs a Vulkan ≥ 1.2 device; the adapter is the one
//! `CAUSEWAY_VULKAN_ADAPTER` names, else the first suitable one). `scripts/dependent.sh` builds
//! it as a crate outside the workspace with `causeway`'s `vulkan` feature and runs it on
//! lavapipe.

use std::time::Duration;

use causeway::cpu::CpuBackend;
use causeway::device::{Device, Op, QueueConfig, Work};
use causeway::vulkan::{Buffer, Gpu, GpuOptions, Kernel, Step, VulkanBackend};
use causeway::{Failure, PoolConfig, Scope};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A compute kernel c = a + b over 1024 floats in 4 tiles, recorded once.
    let gpu = Gpu::open(&GpuOptions::from_env()?)?;
    let [a, b, c] = [(); 3].map(|()| Buffer::new(&gpu, 4096));
    let (a, b, c) = (a?, b?, c?);
    let vulkan = VulkanBackend::new(gpu.clone());
    let launch = Kernel::add(&gpu)?.launch(&[&a, &b, &c], 1024, 4, 0.0)?;
    let add = vulkan.command_buffer(vec![vec![Step::Dispatch(launch)]])?;

    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu_driver = builder.driver(CpuBackend::new());
    let vulkan_driver = builder.driver(vulkan);
    let upload = builder.host_call(move |_| {
        a.write_f32(0, &[1.0; 1024]).map_err(|_| Failure::Application(1))?;
        b.write_f32(0, &[2.0; 1024]).map_err(|_| Failure::Application(1))
    });
    let host = builder.queue(QueueConfig::on(cpu_driver));
    let compute = builder.queue(QueueConfig::on(vulkan_driver));
    let home = builder.endpoint(host).expect("the queue has an axis");
    let uploaded = builder.semaphore(0, Scope::DeviceLocal, home);
    let added = builder.semaphore(0, Scope::DeviceLocal, home);
    let device = builder.build()?;

    let upload_op = Op {
        waits: &[],
        signals: &[(uploaded, 1)],
        work: Work::Host(upload),
        tag: 1,
        ..Default::default()
    };
    device.submit(host, &upload_op)?;
    let add_op = Op {
        waits: &[(uploaded, 1)],
        signals: &[(added, 1)],
        work: Work::Execute(add),
        tag: 2,
        ..Default::default()
    };
    let receipt = device.submit(compute, &add_op)?;

    device.wait(added, 1, Some(Duration::from_secs(30)))?;
    assert_eq!(c.read_f32(0, 1024)?, vec![3.0; 1024]);
    // The Vulkan operation's frontier names both queues: whoever waits on `added` knows the
    // upload happened, on whichever driver it waits.
    assert_eq!(receipt.frontier.len(), 2);
    println!(
        "c = a + b on Vulkan after a CPU upload: frontier of {} queues",
        receipt.frontier.len()
    );

    // With CAUSEWAY_VULKAN_VALIDATION=1 the Khronos validation layer watches every call, the
    // device's teardown included: any message it reports is a misuse of Vulkan.
    drop(device);
    if gpu.validation_message_count() != 0 {
        let (count, first) = (gpu.validation_message_count(), gpu.validation_messages().join("\n"));
        return Err(format!("{count} validation messages, the first:\n{first}").into());
    }
    Ok(())
}

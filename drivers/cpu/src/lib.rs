//! # causeway-driver-cpu
//!
//! The CPU driver: a [`Backend`] of the device layer (`causeway-device`) whose kernels run on
//! the device's worker pool, and the [`block`] processor that runs recorded command buffers of
//! tiled dispatches on every worker at once.
//!
//! What the driver does natively, and nothing more (the rest — semaphores, queue clocks, wait
//! resolution, rings, memory, host functions, failure, teardown — is the device layer's):
//!
//! - [`Work::Spin`] and [`Work::Sleep`] run on the worker that issues them, as the operation's
//!   body, abandoned at shutdown if they never return;
//! - [`Work::Execute`] hands a command buffer recorded with [`CpuBackend::command_buffer`] to
//!   its block processor on every worker and reports the operation pending until the
//!   processor's finish hook wakes the queue (see `execute`); one queue at a time executes a
//!   given buffer, the others wait for it;
//! - its queues wait before signal natively: a wait on a value still to come is a semaphore
//!   timepoint on the operation's wait gate, which the layer arms.
//!
//! [`Backend`]: causeway_device::Backend
//! [`Work::Spin`]: causeway_device::Work::Spin
//! [`Work::Sleep`]: causeway_device::Work::Sleep
//! [`Work::Execute`]: causeway_device::Work::Execute
//!
//! ```
//! use std::time::Duration;
//!
//! use causeway_core::scope::Scope;
//! use causeway_device::{Args, Device, Op, QueueConfig, Work};
//! use causeway_driver_cpu::CpuBackend;
//! use causeway_runtime::PoolConfig;
//!
//! let cpu = CpuBackend::new();
//! let tiles = cpu.command_buffer(vec![(64, Box::new(|_tile: u32, _: &Args| {}))])?;
//! let mut builder = Device::builder(PoolConfig::with_workers(2));
//! let cpu = builder.driver(cpu);
//! let queue = builder.queue(QueueConfig::on(cpu).capacity(64));
//! let home = builder.endpoint(queue).expect("the queue has an axis");
//! let done = builder.semaphore(0, Scope::DeviceLocal, home);
//! let device = builder.build()?;
//! let op = Op { signals: &[(done, 1)], work: Work::Execute(tiles), ..Op::default() };
//! device.submit(queue, &op)?;
//! let semaphore = device.semaphore(done).expect("declared");
//! causeway_runtime::blocking::wait(semaphore, 1, Some(Duration::from_secs(30)))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! In the guide: `docs/src/drivers.md` in the repository, "CPU".

pub mod block;
// The backend and executions are not loom-modelled (they run whole devices on real threads;
// the device layer's own protocols are modelled in its crate); under `--cfg loom` only the
// block processor is built.
#[cfg(not(loom))]
mod backend;
#[cfg(not(loom))]
mod execute;

#[cfg(not(loom))]
pub use backend::{CpuBackend, CpuQueue};
pub use block::{BlockError, BlockProcessor, CommandBuffer, Kernel, OnFinish};
#[cfg(not(loom))]
pub use execute::{DeviceKernel, DispatchKernel};

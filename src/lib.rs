//! # causeway
//!
//! The hosted facade of causeway. It re-exports the `no_std` causal core ([`causeway_core`])
//! and adds what only a hosted process has: blocking host waits ([`host`]), the [`Runtime`]
//! (the executor with its worker threads; the rest of the hosted runtime is [`runtime`]),
//! the device layer every driver shares ([`device`]), the CPU driver ([`cpu`]), the Vulkan
//! driver ([`vulkan`]) and the NPU driver on its software device model ([`npu`]). It has no
//! command-line dependencies: the `causeway` CLI and its scenario runner are the
//! `causeway-cli` crate (`cli/`), built on this one.
pub use causeway_core::*;
pub use causeway_device as device;
pub use causeway_driver_cpu as cpu;
pub use causeway_driver_npu as npu;
pub use causeway_driver_vulkan as vulkan;
pub use causeway_runtime as runtime;
pub use causeway_runtime::{HostExecutor, HostFutex, PoolConfig, PoolError, FRONTIER_CAPACITY};
pub use workers::{Runtime, RuntimeBuilder};

pub mod host;
mod workers;

/// The README's code, compiled and run as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

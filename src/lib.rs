//! # causeway
//!
//! The hosted facade of causeway. It re-exports the `no_std` causal core ([`causeway_core`])
//! and adds what only a hosted process has: blocking host waits ([`host`]) and the
//! [`Runtime`], the executor with its worker threads, and the CPU device ([`device`]). It has
//! no command-line dependencies: the `causeway` CLI and its scenario runner are the
//! `causeway-cli` crate (`cli/`), built on this one.
pub use causeway_core::*;
pub use causeway_driver_cpu::{
    device, HostExecutor, HostFutex, PoolConfig, PoolError, FRONTIER_CAPACITY,
};
pub use runtime::{Runtime, RuntimeBuilder};

pub mod host;
mod runtime;

/// The README's code, compiled and run as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

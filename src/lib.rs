//! # causeway
//!
//! The hosted facade of causeway. It re-exports the `no_std` causal core ([`causeway_core`])
//! and adds what only a hosted process has: blocking host waits ([`host`]) and the
//! [`Runtime`], the executor with its worker threads. Drivers and the CLI grow here in later
//! layers.
pub use causeway_core::*;
pub use causeway_driver_cpu::{HostExecutor, PoolError};
pub use runtime::{Runtime, RuntimeBuilder};

pub mod host;
mod runtime;

//! # causeway
//!
//! The hosted facade of causeway. It re-exports the `no_std` causal core ([`causeway_core`])
//! and adds what only a hosted process has: blocking host waits ([`host`]). Runtimes, drivers
//! and the CLI grow here in later layers.
pub use causeway_core::*;

pub mod host;

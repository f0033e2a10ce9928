//! # causeway
//!
//! The hosted facade of causeway. Today it re-exports the causal core ([`causeway_core`]);
//! runtimes, drivers and the CLI grow here in later layers.
pub use causeway_core::*;

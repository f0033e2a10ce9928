//! # causeway-cli
//!
//! What the `causeway` command runs: scenario files — a described workload of queues,
//! semaphores and operations — loaded with line-accurate errors, checked (signals advance, the
//! workload can finish) before anything runs, run on the CPU device, and reported as JSON and
//! as a Perfetto trace ([`scenario`]); and a run's report shown as one interactive HTML page
//! ([`view`]). The library crate `causeway` stays free of these command-line dependencies
//! (clap, serde, toml); this crate sits on top of it.
pub mod scenario;
pub mod view;

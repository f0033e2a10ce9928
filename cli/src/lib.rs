//! # causeway-cli
//!
//! What the `causeway` command runs: scenario files — a described workload of queues,
//! semaphores and operations — loaded with line-accurate errors, checked (signals advance, the
//! workload can finish) before anything runs, run on the CPU device, and reported as JSON and
//! as a Perfetto trace ([`scenario`]); a run's report shown as one interactive HTML page
//! ([`view`]); graph files scheduled onto streams and emitted as scenarios ([`schedule`]); loops
//! and branches over scheduled graphs as coroutines ([`control`]); text that a closed
//! pipe ends quietly ([`output`]). The library crate `causeway` stays free of these
//! command-line dependencies (clap, serde, toml); this crate sits on top of it.
pub mod control;
pub mod output;
pub mod scenario;
pub mod schedule;
pub mod view;

//! # causeway-taskbench
//!
//! Task Bench (Slaughter et al., "Task Bench: A Parameterized Benchmark for Evaluating
//! Parallel Runtime Performance", SC'20) for causeway, written for this repository: its
//! dependency patterns ([`pattern`]), its compute-bound kernel and a checksum over every task's
//! output ([`graph`]), the systems measured ([`systems`]: causeway's executor and device
//! queues, rayon, tokio and std threads), the sweep in alternating blocks ([`sweep`]), and the
//! paper's metric, the minimum effective task granularity at 50 % efficiency ([`metg`]).
//!
//! The binary (`cargo run --release -p causeway-taskbench -- --help`, or
//! `scripts/taskbench.sh`) runs the sweep and writes the METG table, the queues variant's
//! wait counts and one plot per case ([`report`]). The guide's chapter "Task Bench: METG"
//! (`docs/src/taskbench.md`) shows a run and reads it.

pub mod graph;
pub mod metg;
pub mod pattern;
pub mod report;
pub mod sweep;
pub mod systems;

mod error;

pub use error::TaskBenchError;

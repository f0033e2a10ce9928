//! # causeway-scenario
//!
//! Scenario files: a described workload run on a real device (CPU queues, and Vulkan, NPU or
//! CUDA queues where a scenario names them), reporting how causality flowed. The `causeway`
//! command line runs them; this crate is the engine on its own, for programs that embed
//! causeway and want to load, check and run a scenario without the command line.
//!
//! A scenario (TOML) declares queues and semaphores and lists operations in submission order
//! (the format is in the guide, `docs/src/scenarios.md`). Running one is four steps:
//!
//! 1. [`parse::load`] — read the file, resolve names, check values; every problem is reported,
//!    in line order, with its file and line;
//! 2. [`check::check`] — whole-scenario checks: signal values advance, and the workload can
//!    finish (a wait nothing will ever signal, or a cycle, is reported as a deadlock naming
//!    the stuck waits, before anything runs); from the same pre-run, the [`check::Plan`] of
//!    ring and history slots a run needs so that a submitter waiting for room never waits
//!    forever;
//! 3. [`run::run`] — submit and perform the operations on a real device and record what
//!    happened: an [`outcome::Outcome`], plain data that nothing after this step runs;
//! 4. [`expect::unmet`], [`summary::summary`], [`report::write`], [`trace::write`] — check
//!    the scenario's own expectations and render the results (the JSON documents streamed to
//!    their writer), reading the outcome alone.
//!
//! Loading, checking and rendering cost O(n log n) or less in operations, waits and semaphores.
//!
//! Across MPI ranks, [`ranks`] decides from the scenario alone which rank runs what, each rank
//! runs its share, and [`gather::gather`] makes one outcome of the ranks' records
//! ([`rank_records`]) for step 4.
//!
//! [`generate`] writes scenarios of any size in a few shapes, for scaling tests and benchmarks;
//! [`random`] writes random valid scenarios with failures, for the differential test.
//!
//! ## Running a scenario from Rust
//!
//! Two CPU queues: `b` waits for what `a` signals, so `b`'s frontier holds `a`'s epoch, and
//! the semaphore ends at the value the scenario expects of it.
//!
//! ```
//! use std::path::Path;
//! use std::time::Duration;
//!
//! use causeway_scenario::run::{run, RunOptions};
//! use causeway_scenario::{check, expect, parse};
//!
//! let source = r#"
//! name = "handoff"
//!
//! [[queue]]
//! name = "a"
//!
//! [[queue]]
//! name = "b"
//!
//! [[semaphore]]
//! name = "s"
//! expect_value = 1
//!
//! [[op]]
//! name = "produce"
//! queue = "a"
//! signal = ["s=1"]
//! work = { kind = "spin", us = 20 }
//!
//! [[op]]
//! name = "consume"
//! queue = "b"
//! wait = ["s>=1"]
//! expect_frontier = { a = 1, b = 1 }
//! "#;
//! // The path only names the file in error messages.
//! let scenario = parse::parse(Path::new("handoff.toml"), source)?;
//! let plan = check::check(&scenario)?;
//! let options = RunOptions { timeout: Duration::from_secs(10), progress: false, all_cpu: false };
//! let outcome = run(&scenario, &plan, options)?;
//!
//! assert_eq!(outcome.semaphores[0].value, 1);
//! let (unmet, checked) = expect::unmet(&outcome);
//! assert!(unmet.is_empty(), "{unmet:?}");
//! assert!(checked >= 2);
//! # Ok::<(), causeway_scenario::ScenarioError>(())
//! ```
//!
//! Built with the `mpi` feature, `mpi_run` runs one scenario across the ranks `mpirun`
//! started.
//!
//! In the guide: `docs/src/scenarios.md` (the format) and `docs/src/cli.md` (the report's
//! schema) in the repository.

pub mod bundled;
pub mod check;
pub mod drivers;
pub mod expect;
pub mod gather;
pub mod generate;
pub mod model;
#[cfg(feature = "mpi")]
pub mod mpi_run;
pub mod outcome;
pub mod parse;
pub mod random;
pub mod rank_records;
pub mod ranks;
pub mod report;
pub mod run;
mod segment;
pub mod stats;
pub mod summary;
pub mod trace;

pub use model::{Scenario, ScenarioError};

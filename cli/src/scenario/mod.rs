//! Scenario files: a described workload the CLI runs on the CPU device, reporting how
//! causality flowed.
//!
//! A scenario (TOML) declares queues and semaphores and lists operations in submission order
//! (see the README for the format). Running one is four steps:
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

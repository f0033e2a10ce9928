//! # causeway-cli
//!
//! What the `causeway` command adds to the scenario engine ([`causeway_scenario`], which loads,
//! checks, runs and reports scenario files): a run's report shown as one interactive HTML page
//! ([`view`]); graph files scheduled onto streams, emitted as scenarios, or run with their loops
//! and branches (by `causeway_schedule::run`) and checked ([`schedule`]); text that a closed
//! pipe ends quietly ([`output`]). The library crates `causeway` and `causeway-scenario` stay
//! free of the command line's own dependencies (clap); this crate sits on top of them.
//!
//! In the guide: `docs/src/cli.md` in the repository.
pub mod output;
pub mod schedule;
pub mod view;

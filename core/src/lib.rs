//! # causeway-core
//!
//! The causal core of causeway: `no_std`, without `alloc`, linkable into firmware and NPU
//! controllers as well as hosted runtimes.
//!
//! - [`axis`] — never-reused timeline identities and their allocator.
//! - [`frontier`] — fixed-capacity vector clocks, their algebra and wire encoding.
//! - [`semaphore`] — timeline semaphores with a frontier history, taint windows, sticky
//!   failure and intrusive timepoints.
//! - [`scope`] — how far a semaphore's signals are visible.
//! - [`queue`] — queue clocks and the resolution of every wait into elided, satisfied,
//!   device wait or held.
//! - [`speculation`] — whether an operation depended on rejected speculation, from its
//!   frontier alone.
//! - [`fence`] — sets of semaphore points for wait and signal lists.
//! - [`collective`] — one shared axis for an N-participant collective.
//! - [`reuse`] — death frontiers and the buffer reuse decision.
//! - [`executor`] — the cooperative process executor and its platform wait seam.
//! - [`CachePadded`] — a value on a cache line of its own, one width per target architecture,
//!   for every concurrent structure here and in the hosted crates.
//! - `unpoisoned` (with the `std` feature, for the hosted crates only) — std's mutex and
//!   condition variable with lock poisoning ignored, and the rule that makes that sound.
//!
//! Every fallible operation returns a small typed error; nothing here panics on data that came
//! from outside the program, and nothing allocates. Without the `std` feature (the default) the
//! crate links neither `std` nor `alloc`.
//!
//! The model in the guide: `docs/src/concepts.md` in the repository, and in depth
//! `docs/src/architecture.md`.
#![no_std]

#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod axis;
mod cache_padded;
pub mod collective;
pub mod executor;
#[cfg(all(test, not(loom)))]
mod failure_model;
pub mod fence;
pub mod frontier;
pub mod queue;
pub mod reuse;
pub mod scope;
pub mod semaphore;
pub mod speculation;
mod sync;
#[cfg(all(test, not(loom)))]
mod testing;
#[cfg(feature = "std")]
pub mod unpoisoned;

pub use axis::{Axis, AxisAllocator, AxisError, Domain};
pub use cache_padded::CachePadded;
pub use collective::{CollectiveChannel, CollectiveRound};
pub use fence::Fence;
pub use frontier::{Frontier, Point, WireError};
pub use queue::{
    Capabilities, QueueClock, Resolution, Submission, Submitted, UnknownResolution, WaitResolution,
};
pub use reuse::{Acquire, DeathRecord, ReuseDecision, ReusePool};
pub use scope::{Endpoint, Scope, UnknownScope};
pub use semaphore::{Failure, Semaphore, SignalError};
pub use speculation::{Dependence, Rejection};

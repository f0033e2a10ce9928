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
//!
//! Every fallible operation returns a small typed error; nothing here panics on data that came
//! from outside the program, and nothing allocates.
#![no_std]

#[cfg(test)]
extern crate std;

pub mod axis;
pub mod frontier;
pub mod scope;
pub mod semaphore;
mod sync;

pub use axis::{Axis, AxisAllocator, AxisError, Domain};
pub use frontier::{Frontier, Point, WireError};
pub use scope::{Endpoint, Scope};
pub use semaphore::{Failure, Semaphore, SignalError};

//! Host implementations of causeway's executor wait seam, [`Futex`].
//!
//! The executor in `causeway-core` never blocks by itself: an idle worker parks by waiting while
//! its 32-bit word holds a "parked" value, and a waker changes the word and then wakes it. This
//! crate supplies that wait for hosted targets:
//!
//! - `LinuxFutex` (Linux only) is the kernel's futex, reached through `rustix`: one system
//!   call per wait or wake, no user-space state at all.
//! - [`ParkingFutex`] (every std target) emulates the futex with a fixed table of
//!   `std::sync::{Mutex, Condvar}` buckets, for hosts without a futex-like system call.
//! - [`HostFutex`] names the best of the two for the target being built, so executors can be
//!   written once: `static FUTEX: HostFutex = HostFutex::new();`.
//! - [`pin_current_thread`] restricts a worker thread to one CPU.
//! - [`barrier`] pairs a compiler-only barrier on a frequent path with a process-wide one
//!   (`membarrier`) on a rare path, where both would otherwise need a `SeqCst` fence.
//!
//! [`Futex`]: causeway_core::executor::Futex
//!
//! Where this crate sits among the layers: `docs/src/architecture.md` in the repository.

mod affinity;
pub mod barrier;
// Under `cfg(loom)` core's futex word is a loom model type the kernel cannot wait on (it has no
// address of a real 32-bit word), so loom builds fall back to the parking emulation; that keeps
// crates above this one (the CPU driver) compiling for their own loom models.
#[cfg(all(target_os = "linux", not(loom)))]
mod linux;
mod parking;

pub use affinity::{pin_current_thread, PinError};
#[cfg(all(target_os = "linux", not(loom)))]
pub use linux::LinuxFutex;
pub use parking::ParkingFutex;

/// The wait primitive this target should use: [`LinuxFutex`] here, because the kernel's futex
/// is available.
#[cfg(all(target_os = "linux", not(loom)))]
pub type HostFutex = LinuxFutex;

/// The wait primitive this target should use: [`ParkingFutex`] here, because Linux's futex is
/// not available (or, under `cfg(loom)`, cannot see the modelled word).
#[cfg(any(not(target_os = "linux"), loom))]
pub type HostFutex = ParkingFutex;

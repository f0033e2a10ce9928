//! The Windows implementation of causeway's executor wait seam, [`Futex`]:
//! `WaitOnAddress`, `WakeByAddressSingle` and `WakeByAddressAll` (Windows 8 and later), reached
//! through `windows-sys`.
//!
//! These calls are Windows' futex: the kernel keys its wait queues by the word's address, so
//! `WindowsFutex` holds no state and one value serves every word in the process.
//! `pin_current_thread` restricts a worker thread to one logical processor. On other targets
//! this crate is empty.
//!
//! [`Futex`]: causeway_core::executor::Futex
//!
//! Where this crate sits among the layers: `docs/src/architecture.md` in the repository.

#[cfg(windows)]
mod address_wait;
#[cfg(windows)]
mod affinity;

#[cfg(windows)]
pub use address_wait::WindowsFutex;
#[cfg(windows)]
pub use affinity::{pin_current_thread, PinError};

/// The wait primitive this target should use: [`WindowsFutex`].
#[cfg(windows)]
pub type HostFutex = WindowsFutex;

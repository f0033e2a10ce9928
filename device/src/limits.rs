//! The fixed bounds of an operation and the shape of a device's semaphores.

use causeway_core::semaphore::{HistoryEntry, Semaphore};
use causeway_runtime::FRONTIER_CAPACITY;

#[cfg(doc)]
use crate::SemaphoreConfig;

/// Most waits one operation may carry.
pub const MAX_WAITS: usize = 8;
/// Most signals one operation may carry.
pub const MAX_SIGNALS: usize = 8;
/// History slots a semaphore gets unless configured otherwise ([`SemaphoreConfig::history`]):
/// how many signals may be pending at once, plus recent reached ones for late waiters.
pub const DEFAULT_SEMAPHORE_HISTORY: usize = 64;

/// A device semaphore's history slots, sized when the device is built.
pub type HistorySlots = Box<[HistoryEntry<FRONTIER_CAPACITY>]>;
/// The semaphores a device owns (their history lives in run-time sized slots, so the inline
/// count is 0).
pub type DeviceSemaphore = Semaphore<0, FRONTIER_CAPACITY, HistorySlots>;

//! The drivers that mirror a queue's progress, for their native waits on its operations
//! (`BackendCapabilities::host_written_waits`): the per-queue words of the protocol in
//! `device::process::mirror` ("Host-written waits"), which registers drivers and writes their
//! mirrors as the queue's operations end.

use causeway_core::unpoisoned::Mutex;

use crate::sync::atomic::AtomicU64;

/// The drivers that mirror one queue's progress (see `device::process::mirror`).
#[derive(Debug, Default)]
pub(crate) struct Mirrors {
    /// Bit `d`: driver `d` is registered (set before the registrar's catch-up); read by the
    /// queue process after each retirement.
    pub(crate) drivers: AtomicU64,
    /// Bit `d`: driver `d`'s registration is complete (set after its catch-up).
    pub(crate) ready: AtomicU64,
    /// Each registered driver and the epoch its mirror was last written to.
    pub(crate) written: Mutex<Vec<(usize, u64)>>,
    /// Epoch of the last operation claimed as running, published only while a driver is
    /// registered (see "Issued once the origin has started"); written by the queue process.
    pub(crate) started: AtomicU64,
}

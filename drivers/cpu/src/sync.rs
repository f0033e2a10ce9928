//! The crate's only door to atomics: `--cfg loom` swaps in loom's model-checked types, so the
//! block processor's claim and election protocol is checked by `tests/loom_block.rs` exactly as
//! it is compiled for the pool.

#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
}

#[cfg(loom)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
}

/// One pause of a busy-wait. Under loom a spinning thread must yield, or the model checker
/// would explore the same spin forever instead of running the thread it waits for.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

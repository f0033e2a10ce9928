//! The crate's door to the atomics and cells of its lock-free protocols: under `--cfg loom`
//! they are loom's model-checked types, so the block processor's claim and election protocol
//! (`tests/loom_block.rs`) and the streaming ring (`tests/loom_stream.rs`) are checked exactly
//! as they are compiled for the pool. Code that merely uses std's locks and atomics outside a
//! modelled protocol (the device, coroutines, awaitables) uses std directly.

#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

#[cfg(loom)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

pub(crate) use atomic::{AtomicU32, AtomicUsize, Ordering};

/// Interior mutability whose accesses loom can check for data races.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// Interior mutability with loom's closure-based access API, so the same code builds both ways.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a unique pointer to the contents; the caller's protocol rules out others.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
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

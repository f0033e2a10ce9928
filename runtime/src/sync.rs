//! The hosted layers' door to the atomics and cells of their lock-free protocols: under
//! `--cfg loom` they are loom's model-checked types, so the streaming ring (this crate's
//! `tests/loom_stream.rs`) and the CPU driver's block processor (its `tests/loom_block.rs`) are
//! checked exactly as they are compiled for the pool. Code that merely uses std's locks and atomics outside a
//! modelled protocol (coroutines, awaitables) uses std directly; the device layer has a door of
//! its own (its `sync` module).

/// The atomic types and orderings (std's, or loom's under `--cfg loom`).
#[cfg(not(loom))]
pub mod atomic {
    pub use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

/// The atomic types and orderings (std's, or loom's under `--cfg loom`).
#[cfg(loom)]
pub mod atomic {
    pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
}

pub use atomic::{AtomicU32, AtomicUsize, Ordering};

/// Interior mutability whose accesses loom can check for data races.
#[cfg(loom)]
pub use loom::cell::UnsafeCell;

/// Interior mutability with loom's closure-based access API, so the same code builds both ways.
#[cfg(not(loom))]
#[derive(Debug)]
pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// A cell holding `value`.
    pub const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a unique pointer to the contents; the caller's protocol rules out others.
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// One pause of a busy-wait. Under loom a spinning thread must yield, or the model checker
/// would explore the same spin forever instead of running the thread it waits for.
#[inline]
pub fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

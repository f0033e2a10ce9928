//! The driver's door to the atomics and cells of its lock-free protocols.
//!
//! Only the streaming ring goes through here: under `--cfg loom` it gets loom's model-checked
//! types (see `tests/loom_stream.rs`), otherwise std's. Code that merely uses std's locks and
//! atomics outside a modelled protocol (coroutines, awaitables) uses std directly.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

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

/// Tells the processor (or loom's scheduler) that this thread is waiting on another one.
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Gives the thread's time slice away: for waits that may last as long as another thread takes
/// to be scheduled, not just a few instructions.
pub(crate) fn yield_thread() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

//! The crate's only door to atomics and locks.
//!
//! Everything concurrent in core goes through here so that `--cfg loom` swaps in loom's
//! model-checked types, and bare-metal targets get CAS and 64-bit atomics through
//! `portable-atomic` (critical sections where the hardware has none).

#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use portable_atomic::{
        AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

#[cfg(loom)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

/// Interior mutability whose accesses loom can check for data races.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// Interior mutability with loom's closure-based access API, so the same code builds both ways.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a shared pointer to the contents; the caller's protocol rules out writers.
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a unique pointer to the contents; the caller's protocol rules out others.
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// A short mutual-exclusion lock around plain data.
///
/// Held only for a bounded number of steps (a history update, a list splice); callbacks never
/// run under it. With the `isr-safe` feature the lock is taken inside a critical section, so an
/// interrupt handler on the same core can never find it held.
pub(crate) struct Lock<T> {
    #[cfg(not(loom))]
    inner: spin::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

impl<T> Lock<T> {
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Lock<T> {
        Lock { inner: spin::Mutex::new(value) }
    }

    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Lock<T> {
        Lock { inner: loom::sync::Mutex::new(value) }
    }

    /// Runs `f` with exclusive access to the data. Inlined on hosted targets, as is
    /// `with_unmasked`: the lock is a compare-exchange and a store around `f`, and a frame of
    /// its own around every semaphore update cost a retirement about seven instructions.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(feature = "isr-safe")]
        {
            critical_section::with(|_| self.with_unmasked(f))
        }
        #[cfg(not(feature = "isr-safe"))]
        {
            self.with_unmasked(f)
        }
    }

    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn with_unmasked<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(not(loom))]
        let mut guard = self.inner.lock();
        #[cfg(loom)]
        let mut guard = self.inner.lock().unwrap();
        f(&mut guard)
    }
}

/// Tells the processor it is in a spin-wait loop.
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

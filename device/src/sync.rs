//! The crate's only door to atomics, to the asymmetric barrier and to yielding in a spin-wait.
//!
//! Every file of the crate takes them from here, so that under `--cfg loom` the whole crate is
//! compiled against loom's model-checked types, and the loom models (`tests/loom_*.rs`) check
//! the queue protocols' own types (`crate::loom_models`) exactly as the device uses them.
//! Under loom the crate's objects work only inside `loom::model`; only the models run there.
//!
//! Locks and condition variables are core's `unpoisoned` ones (std's, poisoning ignored), except
//! the one lock and condition variable a loom model checks a protocol through (the queue's
//! `HeadWaiters`: [`lock`]), which are loom's under `--cfg loom`. `OnceLock`s and the slots'
//! cells stay std's in both builds: no model checks a protocol that goes through them.

/// The atomic types and orderings: std's, or loom's under `--cfg loom`.
#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

/// The atomic types and orderings: std's, or loom's under `--cfg loom`.
#[cfg(loom)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{
        AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

/// The asymmetric store → load barrier the queue's Dekker pairs use (the ring's wait for room,
/// the run claim's fast start, the ring ownership's handshake): the runtime's
/// (`causeway_runtime::barrier`: a compiler barrier on the frequent side, `membarrier` on the
/// rare one).
#[cfg(not(loom))]
pub(crate) mod barrier {
    pub(crate) use causeway_runtime::barrier::{heavy, light, prepare};
}

/// The asymmetric store → load barrier under loom: what both of its sides are equivalent to, a
/// `SeqCst` fence, as a fence loom sees (the runtime's fences are std's, invisible to it).
#[cfg(loom)]
pub(crate) mod barrier {
    use loom::sync::atomic::{fence, Ordering};

    /// The frequent side: a `SeqCst` fence, which pairs with the one in [`heavy`] on the other
    /// side of the handshake (two `SeqCst` fences forbid store buffering, as the two sides do).
    pub(crate) fn light() {
        fence(Ordering::SeqCst);
    }

    /// The rare side: a `SeqCst` fence, which pairs with the one in [`light`].
    pub(crate) fn heavy() {
        fence(Ordering::SeqCst);
    }

    /// Nothing to register: both sides are fences. `false`, as the runtime's `prepare` answers
    /// where it keeps fences.
    pub(crate) fn prepare() -> bool {
        false
    }
}

/// Yielding the processor in a spin-wait: std's, or loom's under `--cfg loom`, where a thread
/// that spins without yielding to loom would be explored spinning forever instead of letting
/// the thread it waits for run.
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::yield_now;

    #[cfg(loom)]
    pub(crate) use loom::thread::yield_now;
}

/// The lock and condition variable of the queue's `HeadWaiters`, whose protocol a loom model
/// checks: core's `unpoisoned` ones, or loom's under `--cfg loom`, with one interface.
pub(crate) mod lock {
    use std::time::Duration;

    #[cfg(not(loom))]
    use causeway_core::unpoisoned as imp;
    #[cfg(loom)]
    use loom::sync as imp;

    #[cfg(loom)]
    pub(crate) use loom::sync::MutexGuard;
    #[cfg(not(loom))]
    pub(crate) use std::sync::MutexGuard;

    /// The guard, poisoned or not (core's locks already ignore poisoning).
    #[cfg(loom)]
    fn unpoison<G>(result: std::sync::LockResult<G>) -> G {
        result.unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(not(loom))]
    fn unpoison<G>(guard: G) -> G {
        guard
    }

    /// A mutex whose [`lock`](Self::lock) always returns the guard.
    pub(crate) struct Mutex<T>(imp::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(imp::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            unpoison(self.0.lock())
        }
    }

    /// A condition variable for a [`Mutex`] of this module.
    pub(crate) struct Condvar(imp::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar(imp::Condvar::new())
        }

        /// Releases the lock, sleeps until notified (or woken spuriously), takes it again.
        pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            unpoison(self.0.wait(guard))
        }

        /// As [`wait`](Self::wait), for at most `timeout`.
        pub(crate) fn wait_timeout<'a, T>(
            &self,
            guard: MutexGuard<'a, T>,
            timeout: Duration,
        ) -> MutexGuard<'a, T> {
            unpoison(self.0.wait_timeout(guard, timeout)).0
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

//! The platform seam: a futex-like wait on a 32-bit word.
//!
//! The executor's only platform dependency. Workers park by waiting while their word holds a
//! "parked" value; wakers change the word and then wake. Implementations live in the platform
//! crates (`causeway-platform-linux` over the futex system call, a std-parking fallback for
//! other hosts, WFE/WFI on bare metal); core itself never blocks.

use core::time::Duration;

/// The word a [`Futex`] waits on: a plain 32-bit atomic (`portable-atomic`'s type, which has the
/// layout of `core::sync::atomic::AtomicU32`; `as_ptr` reaches the raw word for system calls).
pub type FutexWord = crate::sync::atomic::AtomicU32;

/// "Wait while the word equals X / wake one / wake all", as the kernel's futex offers it.
///
/// # Contract
///
/// - [`wait`](Futex::wait) returns promptly if `word` does not hold `expected` when it starts
///   (the comparison and the sleep are atomic with respect to [`wake_one`](Futex::wake_one) and
///   [`wake_all`](Futex::wake_all) on the same word), and otherwise sleeps until woken, until
///   `timeout` elapses, or spuriously. Callers always re-check their condition.
/// - A wake issued after a store to `word` reaches every waiter that observed the old value.
/// - Implementations never allocate and never panic.
pub trait Futex: Sync {
    /// Blocks while `word` holds `expected`, for at most `timeout` when one is given.
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>);

    /// Wakes at least one thread waiting on `word`, if any.
    fn wake_one(&self, word: &FutexWord);

    /// Wakes every thread waiting on `word`.
    fn wake_all(&self, word: &FutexWord);

    /// Offers this thread's CPU to another runnable thread, if the platform has threads; a
    /// worker that keeps spinning with nothing to do calls it every
    /// [`IDLE_SCANS_PER_YIELD`](super::IDLE_SCANS_PER_YIELD) scans. A thread woken onto a CPU
    /// that a spinning worker holds (the owner of a finished chain, on a machine with as many
    /// workers as cores) otherwise waits until the scheduler preempts the worker, which took
    /// hundreds of microseconds on Linux. The default does nothing: on bare metal there is no
    /// other thread to run.
    fn yield_now(&self) {}
}

impl<F: Futex + ?Sized> Futex for &F {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        (**self).wait(word, expected, timeout);
    }

    fn wake_one(&self, word: &FutexWord) {
        (**self).wake_one(word);
    }

    fn wake_all(&self, word: &FutexWord) {
        (**self).wake_all(word);
    }

    fn yield_now(&self) {
        (**self).yield_now();
    }
}

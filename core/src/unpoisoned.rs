//! std's [`Mutex`] and [`Condvar`] for the hosted crates, with lock poisoning ignored (the `std`
//! feature).
//!
//! std marks a mutex *poisoned* when a thread panics while holding it, and from then on every
//! `lock` and every condition-variable wait on it returns an error. That protects data a
//! panicking thread may have left half-updated, at the price of turning one panic into a panic
//! in every later user of the lock. causeway's hosted layers cannot pay that price: a panicking
//! kernel, host function or waker fails its own operation, contained, and must not wedge every
//! queue, worker and waiter that takes the same lock afterwards, nor turn a destructor that
//! locks while the panic unwinds into an abort.
//!
//! The rule that makes ignoring poison sound: **every critical section guarded by these types
//! leaves its data valid at every point where it could panic** — a count or flag written in one
//! step, a collection changed through methods that keep it whole when they unwind, fields
//! written before any caller-supplied code (a waker's `clone` or `wake`, an observer) runs, and
//! callbacks run after the guard is dropped. The state a panicking holder leaves is therefore
//! state the next holder can use as it is. Code that needs an update to be all-or-nothing
//! across a possible panic must not use these types.

use core::fmt;
use std::sync::{LockResult, PoisonError, TryLockError};
use std::time::Duration;

pub use std::sync::{MutexGuard, WaitTimeoutResult};

/// [`std::sync::Mutex`] whose [`lock`](Self::lock) always returns the guard: a holder's panic
/// does not poison it for the next (see the [module docs](self) for when that is sound).
#[derive(Default)]
pub struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`; usable in a `static`.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex(std::sync::Mutex::new(value))
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Blocks until the lock is free, then holds it until the guard is dropped.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        unpoison(self.0.lock())
    }

    /// Takes the lock if it is free (`None` if any thread, this one included, holds it).
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// [`std::sync::Condvar`] whose waits return the guard whether or not the mutex was poisoned
/// meanwhile; for waiting on a [`Mutex`] of this module.
#[derive(Debug, Default)]
pub struct Condvar(std::sync::Condvar);

impl Condvar {
    /// A condition variable nobody waits on; usable in a `static`.
    pub const fn new() -> Condvar {
        Condvar(std::sync::Condvar::new())
    }

    /// Releases `guard`'s lock, sleeps until notified (or woken spuriously), and takes the lock
    /// again.
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        unpoison(self.0.wait(guard))
    }

    /// As [`wait`](Self::wait), for at most `timeout`.
    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        unpoison(self.0.wait_timeout(guard, timeout))
    }

    /// Waits (as [`wait`](Self::wait)) for as long as `condition` holds of the guarded value.
    pub fn wait_while<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        condition: impl FnMut(&mut T) -> bool,
    ) -> MutexGuard<'a, T> {
        unpoison(self.0.wait_while(guard, condition))
    }

    /// As [`wait_while`](Self::wait_while), for at most `timeout`.
    pub fn wait_timeout_while<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
        condition: impl FnMut(&mut T) -> bool,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        unpoison(self.0.wait_timeout_while(guard, timeout, condition))
    }

    /// Wakes every thread waiting on this condition variable.
    pub fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// The guard (or whatever else the lock operation returns), poisoned or not.
fn unpoison<G>(result: LockResult<G>) -> G {
    result.unwrap_or_else(PoisonError::into_inner)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::thread;

    /// Panics while holding `mutex`, as a contained kernel would.
    fn poison(mutex: &Mutex<u32>) {
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            let mut value = mutex.lock();
            *value += 1;
            panic!("a kernel panics while holding the lock");
        }));
        assert!(panicked.is_err());
    }

    #[test]
    fn a_panic_while_locked_does_not_stop_the_next_holder() {
        let mutex = Mutex::new(1);
        poison(&mutex);
        assert_eq!(*mutex.lock(), 2, "the count written before the panic is kept");
    }

    #[test]
    fn waits_on_a_poisoned_mutex_return_the_guard() {
        let mutex = Mutex::new(0);
        let changed = Condvar::new();
        poison(&mutex);
        thread::scope(|scope| {
            scope.spawn(|| {
                *mutex.lock() += 1;
                changed.notify_all();
            });
            let guard = changed.wait_while(mutex.lock(), |value| *value < 2);
            assert_eq!(*guard, 2);
        });
        let (guard, timeout) = changed.wait_timeout(mutex.lock(), Duration::from_millis(1));
        assert!(timeout.timed_out());
        let (guard, timeout) =
            changed.wait_timeout_while(guard, Duration::from_millis(1), |value| *value == 2);
        assert!(timeout.timed_out());
        assert_eq!(*guard, 2);
    }
}

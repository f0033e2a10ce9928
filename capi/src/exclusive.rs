//! A value one call uses at a time, without waiting: a second call finds it held and is told
//! `CW_STATUS_BUSY` instead of blocking, so an interrupt handler that preempts the main loop in
//! the middle of a call on the same object gets an answer rather than a deadlock.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::status::Error;

pub(crate) struct Exclusive<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through `with`, by the one call that set `held`, so it is
// never shared; it may be used from (and dropped on) any thread if `T: Send`.
unsafe impl<T: Send> Sync for Exclusive<T> {}

/// Clears `held` when the call ends, also when it unwinds (hosted builds).
struct Release<'a>(&'a AtomicBool);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire swap in `with`: the next holder sees this one's writes.
        self.0.store(false, Ordering::Release);
    }
}

impl<T> Exclusive<T> {
    pub(crate) const fn new(value: T) -> Exclusive<T> {
        Exclusive { held: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Runs `f` on the value, or refuses with `busy` when another call holds it.
    pub(crate) fn with<R>(
        &self,
        busy: &'static str,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<R, Error> {
        // Acquire pairs with the Release store in `Release::drop`.
        if self.held.swap(true, Ordering::Acquire) {
            return Err(Error::Busy(busy));
        }
        let _release = Release(&self.held);
        // SAFETY: `held` was clear and is now set by this call: no other reference to the value
        // exists until `_release` clears it.
        Ok(f(unsafe { &mut *self.value.get() }))
    }
}

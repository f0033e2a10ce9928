//! The portable fallback: spin on the word.

use core::sync::atomic::Ordering;
use core::time::Duration;

use causeway_core::executor::{Futex, FutexWord};

use crate::delay::{Delay, NoDelay, WaitBound};

/// [`Futex`] that spins until the word changes: no sleep instruction, no interrupt
/// configuration, correct on any core (and between cores) where the word is shared memory.
///
/// The fallback for targets without a sleep-until-interrupt this crate knows; it burns power
/// while parked, so prefer `InterruptFutex` or `EventFutex` where they exist. Timed waits are
/// bounded by `B` (see [`WaitBound`]).
#[derive(Debug, Default)]
pub struct SpinFutex<B = NoDelay> {
    bound: B,
}

impl SpinFutex {
    /// A spinning futex whose timed waits return at once (see [`NoDelay`]); usable in a
    /// `static`.
    pub const fn new() -> SpinFutex {
        SpinFutex { bound: NoDelay }
    }
}

impl<D> SpinFutex<Delay<D>> {
    /// A spinning futex whose timed waits last their timeout, measured by `delay`.
    pub const fn with_delay(delay: D) -> SpinFutex<Delay<D>> {
        SpinFutex { bound: Delay::new(delay) }
    }
}

impl<B: WaitBound> Futex for SpinFutex<B> {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        // Relaxed loads: the contract asks only that a changed word ends the wait; the caller's
        // re-check orders its own data.
        let mut woken = || word.load(Ordering::Relaxed) != expected;
        match timeout {
            Some(timeout) => self.bound.poll_for(timeout, &mut woken),
            None => {
                while !woken() {
                    core::hint::spin_loop();
                }
            }
        }
    }

    fn wake_one(&self, _word: &FutexWord) {
        // The spinning waiter sees the waker's store by itself.
    }

    fn wake_all(&self, _word: &FutexWord) {}
}

//! Bounds for timed waits: none, or an `embedded-hal` delay to poll under.

use core::cell::UnsafeCell;
use core::fmt;
use core::time::Duration;

use core::sync::atomic::{AtomicBool, Ordering};

use embedded_hal::delay::DelayNs;

/// How long one delay call lasts between two looks at the word. Short, so a wake is noticed
/// within a few microseconds; long enough that the delay's own overhead stays small.
const POLL_SLICE: Duration = Duration::from_micros(10);

/// What a futex does with a timed wait. Implemented by [`NoDelay`] and [`Delay`]; firmware with
/// a monotonic timer may implement it to poll against that instead.
pub trait WaitBound: Sync {
    /// Calls `woken` repeatedly until it returns `true` or at least `timeout` has passed, and
    /// may return earlier (a spurious wake-up). Never sleeps past the deadline by more than one
    /// polling step.
    fn poll_for(&self, timeout: Duration, woken: &mut dyn FnMut() -> bool);
}

/// No time source: a timed wait returns at once, as a spurious wake-up.
///
/// The executor never times its waits, so most firmware needs nothing more; a caller that does
/// time a wait re-checks its condition and its own deadline after every return anyway.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoDelay;

impl WaitBound for NoDelay {
    fn poll_for(&self, _timeout: Duration, _woken: &mut dyn FnMut() -> bool) {}
}

/// Timed waits poll the word between calls to an [`embedded_hal::delay::DelayNs`], in steps of
/// ten microseconds, until the delays asked for add up to the timeout.
///
/// `DelayNs` promises *at least* the time asked for, so a timed wait lasts at least its timeout
/// unless woken. The delay is borrowed by one wait at a time: a timed wait that finds it in use
/// (an interrupt handler timing a wait while the main loop does) returns at once instead of
/// sharing it.
pub struct Delay<D> {
    in_use: AtomicBool,
    delay: UnsafeCell<D>,
}

// SAFETY: `delay` is only reached through `Delay::with`, which hands out `&mut D` only to the
// caller that flipped `in_use` from false to true, until it stores false again: at most one
// context uses the `D` at a time, so sharing a `Delay<D>` is as sound as sending a `D`.
unsafe impl<D: Send> Sync for Delay<D> {}

impl<D> Delay<D> {
    /// Wraps `delay` for use by one futex.
    pub const fn new(delay: D) -> Delay<D> {
        Delay { in_use: AtomicBool::new(false), delay: UnsafeCell::new(delay) }
    }

    /// Gives the delay back.
    pub fn into_inner(self) -> D {
        self.delay.into_inner()
    }

    /// Runs `f` with the delay unless another context is using it.
    fn with<R>(&self, f: impl FnOnce(&mut D) -> R) -> Option<R> {
        if !self.claim() {
            return None;
        }
        // SAFETY: `claim` moved `in_use` from false to true, so this context is the only one
        // between that claim and the store below (see the `Sync` impl).
        let result = f(unsafe { &mut *self.delay.get() });
        // Release pairs with the Acquire swap of the next user.
        self.in_use.store(false, Ordering::Release);
        Some(result)
    }
}

impl<D> Delay<D> {
    /// Moves `in_use` from false to true; `false` if it was already true.
    #[cfg(target_has_atomic = "8")]
    fn claim(&self) -> bool {
        // Acquire pairs with the Release store in `with`: the previous user's accesses to the
        // delay happen before this one's.
        !self.in_use.swap(true, Ordering::Acquire)
    }

    /// Moves `in_use` from false to true; `false` if it was already true. Without CAS (a
    /// Cortex-M0), the load and store are made one step by masking interrupts around them.
    #[cfg(not(target_has_atomic = "8"))]
    fn claim(&self) -> bool {
        critical_section::with(|_| {
            // Acquire pairs with the Release store in `with`, as above.
            let taken = self.in_use.load(Ordering::Acquire);
            self.in_use.store(true, Ordering::Relaxed);
            !taken
        })
    }
}

impl<D: DelayNs + Send> WaitBound for Delay<D> {
    fn poll_for(&self, timeout: Duration, woken: &mut dyn FnMut() -> bool) {
        // `None`: another context holds the delay; returning is a spurious wake-up.
        let _ = self.with(|delay| {
            let mut remaining = timeout;
            while !remaining.is_zero() && !woken() {
                let step = remaining.min(POLL_SLICE);
                // In range: `step` is at most `POLL_SLICE`, ten thousand nanoseconds.
                delay.delay_ns(step.as_nanos() as u32);
                remaining -= step;
            }
        });
    }
}

impl<D> fmt::Debug for Delay<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delay").field("in_use", &self.in_use.load(Ordering::Relaxed)).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU32, Ordering as StdOrdering};

    use super::*;

    /// Counts the nanoseconds it is asked to wait, without waiting.
    #[derive(Default)]
    struct CountingDelay {
        asked_ns: u64,
        calls: u32,
    }

    impl DelayNs for CountingDelay {
        fn delay_ns(&mut self, ns: u32) {
            self.asked_ns += u64::from(ns);
            self.calls += 1;
        }
    }

    #[test]
    fn an_unwoken_wait_asks_for_its_whole_timeout_in_slices() {
        let delay = Delay::new(CountingDelay::default());
        let looks = Cell::new(0);
        delay.poll_for(Duration::from_micros(35), &mut || {
            looks.set(looks.get() + 1);
            false
        });
        let counted = delay.into_inner();
        assert_eq!(counted.asked_ns, 35_000);
        assert_eq!(counted.calls, 4, "10 + 10 + 10 + 5 microseconds");
        assert_eq!(looks.get(), 4, "one look before each slice");
    }

    #[test]
    fn a_woken_wait_stops_at_the_next_look() {
        let delay = Delay::new(CountingDelay::default());
        let looks = AtomicU32::new(0);
        delay.poll_for(Duration::from_secs(3600), &mut || {
            looks.fetch_add(1, StdOrdering::Relaxed) == 2
        });
        assert_eq!(delay.into_inner().asked_ns, 20_000);
    }

    #[test]
    fn a_huge_timeout_is_not_truncated() {
        // 5 seconds exceeds one `delay_ns` call (u32 nanoseconds); the slices add up instead.
        let delay = Delay::new(CountingDelay::default());
        delay.poll_for(Duration::from_secs(5), &mut || false);
        assert_eq!(delay.into_inner().asked_ns, 5_000_000_000);
    }

    #[test]
    fn a_delay_in_use_makes_the_wait_return_at_once() {
        let delay = Delay::new(CountingDelay::default());
        let nested_asked = delay.with(|_| {
            // A second context (an interrupt handler, say) tries to time a wait meanwhile.
            delay.poll_for(Duration::from_secs(1), &mut || false);
        });
        assert_eq!(nested_asked, Some(()));
        assert_eq!(delay.into_inner().asked_ns, 0);
    }

    #[test]
    fn no_delay_returns_without_looking() {
        let looks = Cell::new(0);
        NoDelay.poll_for(Duration::from_secs(1), &mut || {
            looks.set(looks.get() + 1);
            false
        });
        assert_eq!(looks.get(), 0);
    }
}

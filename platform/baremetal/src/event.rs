//! Sleep in `WFE`, wake with `SEV` (Cortex-M).

use core::sync::atomic::Ordering;
use core::time::Duration;

use causeway_core::executor::{Futex, FutexWord};

use crate::delay::{Delay, NoDelay, WaitBound};

/// [`Futex`] over the Arm event register (Cortex-M): wait with `WFE`, wake with `SEV`.
///
/// # Why no wake-up is lost
///
/// A waker stores the word and then executes `SEV`, which sets the event register of every
/// core. If that happens between the waiter's load and its `WFE`, the register is already set
/// and `WFE` returns at once (clearing it); otherwise the waiter is asleep and the event wakes
/// it. Either way the waiter's loop re-reads the word. `WFE` also returns on other events
/// (interrupt entry and exit among them): spurious wake-ups, which the contract allows.
///
/// Unlike [`InterruptFutex`](crate::InterruptFutex) the waker need not be an interrupt handler
/// on this core: another core, or a DMA-complete interrupt routed as an event, works too.
#[derive(Debug, Default)]
pub struct EventFutex<B = NoDelay> {
    bound: B,
}

impl EventFutex {
    /// A futex whose timed waits return at once (see [`NoDelay`]); usable in a `static`.
    pub const fn new() -> EventFutex {
        EventFutex { bound: NoDelay }
    }
}

impl<D> EventFutex<Delay<D>> {
    /// A futex whose timed waits poll the word under `delay` until their timeout (untimed waits
    /// still sleep in `WFE`).
    pub const fn with_delay(delay: D) -> EventFutex<Delay<D>> {
        EventFutex { bound: Delay::new(delay) }
    }
}

impl<B: WaitBound> Futex for EventFutex<B> {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        if let Some(timeout) = timeout {
            self.bound.poll_for(timeout, &mut || word.load(Ordering::Relaxed) != expected);
            return;
        }
        // Relaxed: the event register, not the load's ordering, closes the window to `WFE`;
        // the caller's re-check orders its data.
        if word.load(Ordering::Relaxed) == expected {
            // SAFETY: `wfe` only suspends execution until the event register is set (or
            // returns at once, clearing it); it touches no memory, stack or flags.
            unsafe { core::arch::asm!("wfe", options(nomem, nostack, preserves_flags)) };
        }
    }

    fn wake_one(&self, _word: &FutexWord) {
        send_event();
    }

    fn wake_all(&self, _word: &FutexWord) {
        send_event();
    }
}

fn send_event() {
    // SAFETY: `dsb sy` waits for earlier memory accesses to complete and `sev` sets the event
    // register of every core; neither reads or writes memory itself, nor the stack or flags.
    // The barrier completes the waker's store to the word before the event is sent, so a core
    // woken by it reads the new value (the asm is not `nomem`, so the compiler also keeps
    // that store before it).
    unsafe { core::arch::asm!("dsb sy", "sev", options(nostack, preserves_flags)) };
}

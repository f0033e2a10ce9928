//! Sleep in `WFI` with the check made under masked interrupts (Cortex-M, RISC-V).

use core::sync::atomic::Ordering;
use core::time::Duration;

use causeway_core::executor::{Futex, FutexWord};

use crate::delay::{Delay, NoDelay, WaitBound};

/// [`Futex`] for a single core whose wakers are interrupt handlers: compare with interrupts
/// masked, then `WFI` inside the same critical section.
///
/// # Why no wake-up is lost
///
/// ```text
///   main loop:  mask ── load word ── equal? ── WFI ······ (pending IRQ ends WFI) ── unmask ─┐
///   interrupt:               raised here: stays pending ───────────────────────────► runs ◄┘
///                                                         (stores the word, wakes: nothing to do)
/// ```
///
/// The handler that changes the word can only run before the masked load (the load then sees
/// the new value and the wait returns) or after the unmask (and an interrupt that became pending
/// in between ends `WFI`, which both architectures do for a pending interrupt even while
/// interrupts are masked: PRIMASK on Cortex-M, `mstatus.MIE` on RISC-V with the source enabled
/// in `mie`). `wake_one` and `wake_all` therefore do nothing.
///
/// Requirements: one core; the critical-section implementation masks interrupts the way
/// `critical-section-single-hart` does; the wait is made from thread mode, never from a handler
/// or inside another critical section (the handler could then never run). A waker on another
/// core would not be seen: use `EventFutex` there (Cortex-M).
#[derive(Debug, Default)]
pub struct InterruptFutex<B = NoDelay> {
    bound: B,
}

impl InterruptFutex {
    /// A futex whose timed waits return at once (see [`NoDelay`]); usable in a `static`.
    pub const fn new() -> InterruptFutex {
        InterruptFutex { bound: NoDelay }
    }
}

impl<D> InterruptFutex<Delay<D>> {
    /// A futex whose timed waits poll the word under `delay` until their timeout (untimed waits
    /// still sleep in `WFI`).
    pub const fn with_delay(delay: D) -> InterruptFutex<Delay<D>> {
        InterruptFutex { bound: Delay::new(delay) }
    }
}

impl<B: WaitBound> Futex for InterruptFutex<B> {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        if let Some(timeout) = timeout {
            // `WFI` could sleep past the deadline (no interrupt may come): poll instead.
            self.bound.poll_for(timeout, &mut || word.load(Ordering::Relaxed) != expected);
            return;
        }
        critical_section::with(|_| {
            // Relaxed: masking makes the load and the sleep one step for interrupt handlers on
            // this core, which are the only wakers; the caller's re-check orders its data.
            if word.load(Ordering::Relaxed) == expected {
                wait_for_interrupt();
            }
        });
    }

    fn wake_one(&self, _word: &FutexWord) {
        // The waker is an interrupt handler: its own arrival ended the sleep.
    }

    fn wake_all(&self, _word: &FutexWord) {}
}

/// Sleeps until an interrupt is pending (masked or not).
fn wait_for_interrupt() {
    // SAFETY: `wfi` only suspends execution until an interrupt (or, as the architectures
    // allow, nothing at all) wakes the core; it touches no memory, stack or flags. The
    // instruction exists on every Arm M-profile (and A/R) core and is part of the RISC-V
    // privileged base ISA, executed here in machine mode.
    unsafe { core::arch::asm!("wfi", options(nomem, nostack, preserves_flags)) };
}

//! The shared tick: a counter every board's timer handler advances, and one replaceable hook
//! that the running test installs to act inside the interrupt.

use core::cell::Cell;

use critical_section::Mutex;
use portable_atomic::{AtomicU64, Ordering};

/// Ticks since boot. 64-bit on purpose: on the Cortex-M0 every access goes through
/// portable-atomic's critical-section fallback, from the handler and from thread mode.
static TICKS: AtomicU64 = AtomicU64::new(0);

/// A function the tick handler calls, if one is installed.
type Hook = Option<fn()>;

/// What the handler calls after counting the tick.
static HOOK: Mutex<Cell<Hook>> = Mutex::new(Cell::new(None));

/// Called by the board's timer handler, in interrupt context.
pub fn on_tick() {
    TICKS.fetch_add(1, Ordering::Relaxed);
    let hook = critical_section::with(|cs| HOOK.borrow(cs).get());
    if let Some(hook) = hook {
        hook();
    }
}

/// Ticks counted so far.
pub fn now() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

/// Makes every tick call `hook` (inside the interrupt) until replaced; `None` removes it.
pub fn set_hook(hook: Hook) {
    critical_section::with(|cs| HOOK.borrow(cs).set(hook));
}

/// Sleeps in `WFI` until at least `ticks` more ticks have been counted. The ticks must be
/// running; interrupts end each sleep.
pub fn sleep_ticks(ticks: u64) {
    let until = now() + ticks;
    while now() < until {
        wait_for_interrupt();
    }
}

#[cfg(target_arch = "arm")]
fn wait_for_interrupt() {
    cortex_m::asm::wfi();
}

#[cfg(target_arch = "riscv32")]
fn wait_for_interrupt() {
    riscv::asm::wfi();
}

//! Cortex-M boards (mps2-an386, microbit): SysTick is the timer.

use cortex_m::peripheral::scb::{Exception, VectActive};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{SCB, SYST};

/// The board, as reports name it.
#[cfg(board = "mps2_an386")]
pub const NAME: &str = "qemu mps2-an386 (Cortex-M4, thumbv7em-none-eabihf)";

/// The board, as reports name it.
#[cfg(board = "microbit")]
pub const NAME: &str = "qemu microbit (Cortex-M0, thumbv6m-none-eabi)";

/// The core clock as qemu models it, which SysTick counts when it runs as the cycle clock.
#[cfg(board = "mps2_an386")]
pub const CYCLE_CLOCK_HZ: u32 = 25_000_000;

/// The core clock as qemu models it, which SysTick counts when it runs as the cycle clock.
#[cfg(board = "microbit")]
pub const CYCLE_CLOCK_HZ: u32 = 16_000_000;

/// The cycle clock's width: SysTick's counter has 24 bits.
pub const CYCLE_CLOCK_MASK: u32 = 0x00FF_FFFF;

/// Core clock cycles between two ticks: under a millisecond on both boards (25 MHz and
/// 16 MHz cores in qemu).
const TICK_CYCLES: u32 = 10_000;

/// Brings the board to a known state; call once, first thing in `main`.
pub fn init() {
    stop_ticks();
}

fn systick() -> SYST {
    // SAFETY: these images own the core peripherals and touch SysTick only through this
    // module, from thread mode (`start_ticks`, `stop_ticks`); the handler never does. Stealing
    // a handle to its registers therefore aliases no other live handle's use.
    unsafe { cortex_m::Peripherals::steal() }.SYST
}

/// Starts the periodic tick interrupt.
pub fn start_ticks() {
    let mut syst = systick();
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(TICK_CYCLES - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

/// Stops the tick interrupt; no tick handler starts after this returns.
pub fn stop_ticks() {
    let mut syst = systick();
    syst.disable_interrupt();
    syst.disable_counter();
    // A tick that became pending just before the interrupt was disabled must not run later.
    SCB::clear_pendst();
}

/// Runs SysTick as a free-running cycle clock instead of the periodic tick: no interrupt of
/// its own, so only [`raise_tick`] enters the tick handler. Call with the ticks stopped.
pub fn start_cycle_clock() {
    let mut syst = systick();
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(CYCLE_CLOCK_MASK);
    syst.clear_current();
    syst.disable_interrupt();
    syst.enable_counter();
}

/// Core clock cycles since [`start_cycle_clock`], modulo [`CYCLE_CLOCK_MASK`] + 1 (SysTick
/// counts down; this counts up).
pub fn cycle_clock() -> u32 {
    CYCLE_CLOCK_MASK - SYST::get_current()
}

/// Enters the tick handler as soon as interrupts allow, without waiting for the period (the
/// SysTick exception is made pending by software, which works with its interrupt disabled).
pub fn raise_tick() {
    SCB::set_pendst();
}

/// Whether the caller runs inside the tick handler: the active exception is SysTick.
pub fn in_tick_handler() -> bool {
    SCB::vect_active() == VectActive::Exception(Exception::SysTick)
}

#[cortex_m_rt::exception]
fn SysTick() {
    crate::ticks::on_tick();
}

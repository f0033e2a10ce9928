//! qemu `virt` (riscv32): the CLINT's machine timer is the timer.

use core::ptr;

use portable_atomic::{AtomicBool, Ordering};
use riscv::interrupt::Interrupt;
use riscv::register::{mie, mstatus};

/// The board, as reports name it.
pub const NAME: &str = "qemu virt (RV32IMAC, riscv32imac-unknown-none-elf)";

/// The CLINT's `mtime` and hart 0's `mtimecmp` (qemu `virt` memory map).
const MTIME: usize = 0x0200_BFF8;
const MTIMECMP: usize = 0x0200_4000;

/// `mtime` counts at 10 MHz on `virt`: one tick per millisecond.
const TICK_PERIOD: u64 = 10_000;

/// `mtime`'s rate, which is also the cycle clock's.
pub const CYCLE_CLOCK_HZ: u32 = 10_000_000;

/// The cycle clock's width: the low word of `mtime`.
pub const CYCLE_CLOCK_MASK: u32 = u32::MAX;

/// Set while the periodic tick runs: the handler re-arms the timer only then (a tick raised by
/// [`raise_tick`] while the ticks are stopped is a single one).
static PERIODIC: AtomicBool = AtomicBool::new(false);

/// Set while the machine-timer handler runs (the handler is never nested: machine interrupts
/// stay masked in a trap).
static IN_TICK_HANDLER: AtomicBool = AtomicBool::new(false);

fn read_mtime() -> u64 {
    loop {
        // SAFETY: MTIME is the CLINT's always-mapped, read-only-for-us timer register on
        // `virt`; volatile 32-bit reads of its halves have no side effects.
        let (high, low, again) = unsafe {
            let high = ptr::read_volatile((MTIME + 4) as *const u32);
            let low = ptr::read_volatile(MTIME as *const u32);
            (high, low, ptr::read_volatile((MTIME + 4) as *const u32))
        };
        if high == again {
            return u64::from(high) << 32 | u64::from(low);
        }
    }
}

fn write_mtimecmp(value: u64) {
    // SAFETY: MTIMECMP is hart 0's compare register, written only by this module (thread mode
    // with the timer interrupt disabled, or the timer handler itself). Writing the high half
    // to all-ones first keeps the 64-bit compare from matching a half-written value.
    unsafe {
        ptr::write_volatile((MTIMECMP + 4) as *mut u32, u32::MAX);
        ptr::write_volatile(MTIMECMP as *mut u32, value as u32);
        ptr::write_volatile((MTIMECMP + 4) as *mut u32, (value >> 32) as u32);
    }
}

/// Brings the board to a known state and enables machine interrupts; call once, first thing
/// in `main`.
pub fn init() {
    stop_ticks();
    // SAFETY: every interrupt source is disabled in `mie` at this point (reset state, and
    // `stop_ticks` above), so enabling interrupts globally lets nothing in yet; the handlers
    // this image registers are written for interrupts arriving at any point in thread mode.
    unsafe { mstatus::set_mie() };
}

/// Starts the periodic tick interrupt.
pub fn start_ticks() {
    PERIODIC.store(true, Ordering::Relaxed);
    write_mtimecmp(read_mtime() + TICK_PERIOD);
    // SAFETY: the timer handler below is ready to run from now on.
    unsafe { mie::set_mtimer() };
}

/// Stops the tick interrupt; no tick handler starts after this returns.
pub fn stop_ticks() {
    // SAFETY: masking an interrupt source cannot break anything that relies on it firing;
    // callers that need ticks start them again.
    unsafe { mie::clear_mtimer() };
    PERIODIC.store(false, Ordering::Relaxed);
    write_mtimecmp(u64::MAX);
}

/// `mtime` runs from reset: nothing to start.
pub fn start_cycle_clock() {}

/// `mtime` ticks since reset, modulo 2^32.
pub fn cycle_clock() -> u32 {
    read_mtime() as u32
}

/// Enters the timer handler as soon as interrupts allow: a compare value already passed.
pub fn raise_tick() {
    write_mtimecmp(0);
    // SAFETY: the timer handler below is ready to run from now on; with the periodic tick
    // stopped it disarms the timer again after this one tick.
    unsafe { mie::set_mtimer() };
}

/// Whether the caller runs inside the tick handler.
pub fn in_tick_handler() -> bool {
    IN_TICK_HANDLER.load(Ordering::Relaxed)
}

#[riscv_rt::core_interrupt(Interrupt::MachineTimer)]
fn machine_timer() {
    IN_TICK_HANDLER.store(true, Ordering::Relaxed);
    if PERIODIC.load(Ordering::Relaxed) {
        write_mtimecmp(read_mtime() + TICK_PERIOD);
    } else {
        write_mtimecmp(u64::MAX);
    }
    crate::ticks::on_tick();
    IN_TICK_HANDLER.store(false, Ordering::Relaxed);
}

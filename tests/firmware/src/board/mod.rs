//! The one board-specific part of the images: a periodic timer interrupt, and a way to tell
//! whether code is running inside its handler. Everything else is shared.
//!
//! Every board offers the same functions: `NAME`, `init`, `start_ticks`, `stop_ticks`,
//! `in_tick_handler`, and a cycle clock for cost measurements under qemu's `-icount`:
//! `CYCLE_CLOCK_HZ`, `CYCLE_CLOCK_MASK`, `start_cycle_clock`, `cycle_clock`, `raise_tick`. The
//! timer's handler calls [`crate::ticks::on_tick`].

#[cfg(any(board = "mps2_an386", board = "microbit"))]
mod cortex_m_systick;
#[cfg(any(board = "mps2_an386", board = "microbit"))]
pub use cortex_m_systick::*;

#[cfg(board = "riscv_virt")]
mod riscv_clint;
#[cfg(board = "riscv_virt")]
pub use riscv_clint::*;

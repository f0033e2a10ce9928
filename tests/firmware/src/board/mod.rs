//! The one board-specific part of the images: a periodic timer interrupt, and a way to tell
//! whether code is running inside its handler. Everything else is shared.
//!
//! Every board offers the same functions: `NAME`, `init`, `start_ticks`, `stop_ticks`,
//! `in_tick_handler`. The timer's handler calls [`crate::ticks::on_tick`].

#[cfg(any(board = "mps2_an386", board = "microbit"))]
mod cortex_m_systick;
#[cfg(any(board = "mps2_an386", board = "microbit"))]
pub use cortex_m_systick::*;

#[cfg(board = "riscv_virt")]
mod riscv_clint;
#[cfg(board = "riscv_virt")]
pub use riscv_clint::*;

//! The cooperative process executor (seed 004): one process abstraction, workers that drain,
//! spin and park, direct wake with no coordinator, nothing allocated.

mod arena;
mod futex;

pub use arena::{Arena, Block};
pub use futex::{Futex, FutexWord};

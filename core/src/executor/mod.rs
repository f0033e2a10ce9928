//! The cooperative process executor (seed 004): one process abstraction, workers that drain,
//! spin and park, direct wake with no coordinator, nothing allocated.

mod futex;

pub use futex::{Futex, FutexWord};

//! The crate's only door to atomics.
//!
//! Everything the two sides of the ring share goes through here, so that `--cfg loom` swaps in
//! loom's model-checked types. Outside loom the words are `portable-atomic`'s, whose loads,
//! stores and fences are the target's own instructions on every target the firmware builds for
//! (a Cortex-M0 has no compare-and-swap, and the protocol never asks for one), and whose
//! `AtomicU32` is the word the platform futex waits on.

#[cfg(not(loom))]
pub(crate) use portable_atomic::{fence, AtomicU32, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, Ordering};

/// A zeroed word; `const` outside loom so register files can be statics in firmware.
#[cfg(not(loom))]
pub(crate) const fn zeroed_word() -> AtomicU32 {
    AtomicU32::new(0)
}

/// A zeroed word (loom's atomics have no `const` constructor).
#[cfg(loom)]
pub(crate) fn zeroed_word() -> AtomicU32 {
    AtomicU32::new(0)
}

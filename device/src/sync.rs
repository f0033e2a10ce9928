//! The crate's only door to atomics, to the asymmetric barrier and to yielding in a spin-wait.
//!
//! Every file of the crate takes them from here, so that under `--cfg loom` the whole crate is
//! compiled against loom's model-checked types, and the loom models (`tests/loom_*.rs`) check
//! the queue protocols' own types (`crate::loom_models`) exactly as the device uses them.
//! Under loom the crate's objects work only inside `loom::model`; only the models run there.
//!
//! Locks, condition variables, `OnceLock`s and the slots' cells stay std's (or core's
//! `unpoisoned` locks) in both builds: no model checks a protocol that goes through them.

/// The atomic types and orderings: std's, or loom's under `--cfg loom`.
#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

/// The atomic types and orderings: std's, or loom's under `--cfg loom`.
#[cfg(loom)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{
        AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
}

/// The asymmetric store → load barrier the queue's Dekker pairs use (the ring's wait for room,
/// the run claim's fast start, the ring ownership's handshake): the runtime's
/// (`causeway_runtime::barrier`: a compiler barrier on the frequent side, `membarrier` on the
/// rare one).
#[cfg(not(loom))]
pub(crate) mod barrier {
    pub(crate) use causeway_runtime::barrier::{heavy, light, prepare};
}

/// The asymmetric store → load barrier under loom: what both of its sides are equivalent to, a
/// `SeqCst` fence, as a fence loom sees (the runtime's fences are std's, invisible to it).
#[cfg(loom)]
pub(crate) mod barrier {
    use loom::sync::atomic::{fence, Ordering};

    /// The frequent side: a `SeqCst` fence, which pairs with the one in [`heavy`] on the other
    /// side of the handshake (two `SeqCst` fences forbid store buffering, as the two sides do).
    pub(crate) fn light() {
        fence(Ordering::SeqCst);
    }

    /// The rare side: a `SeqCst` fence, which pairs with the one in [`light`].
    pub(crate) fn heavy() {
        fence(Ordering::SeqCst);
    }

    /// Nothing to register: both sides are fences. `false`, as the runtime's `prepare` answers
    /// where it keeps fences.
    pub(crate) fn prepare() -> bool {
        false
    }
}

/// Yielding the processor in a spin-wait: std's, or loom's under `--cfg loom`, where a thread
/// that spins without yielding to loom would be explored spinning forever instead of letting
/// the thread it waits for run.
pub(crate) mod thread {
    #[cfg(not(loom))]
    pub(crate) use std::thread::yield_now;

    #[cfg(loom)]
    pub(crate) use loom::thread::yield_now;
}

//! The asymmetric barrier as the self-contained handshake files (`queue::run_claim`,
//! `queue::ownership`) use it: the runtime's (`causeway_runtime::barrier`: a compiler barrier on the frequent side,
//! `membarrier` on the rare one) in builds, and under loom what both of its sides are
//! equivalent to, `SeqCst` fences. The loom models include this file beside the one they
//! check.

#[cfg(not(loom))]
pub(crate) use causeway_runtime::barrier::{heavy, light};

#[cfg(loom)]
use loom::sync::atomic::{fence, Ordering};

/// The frequent side: a `SeqCst` fence under loom.
#[cfg(loom)]
pub(crate) fn light() {
    fence(Ordering::SeqCst);
}

/// The rare side: a `SeqCst` fence under loom.
#[cfg(loom)]
pub(crate) fn heavy() {
    fence(Ordering::SeqCst);
}

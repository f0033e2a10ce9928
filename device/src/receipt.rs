//! What a successful submission tells the host.

use causeway_core::frontier::{Frontier, Point};
use causeway_core::queue::WaitResolution;
use causeway_core::semaphore::Failure;
use causeway_runtime::FRONTIER_CAPACITY;
use heapless::Vec as FixedVec;

use crate::limits::MAX_WAITS;
#[cfg(doc)]
use crate::Op;

/// How one wait of a submitted operation was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitOutcome {
    /// Resolved as `causeway_core::queue` describes: elided, satisfied, device wait or held.
    Resolved(WaitResolution),
    /// The semaphore had already failed: the operation will fail.
    Failed(Failure),
}

/// What a successful submission tells the host. An accepted operation is in its queue, even a
/// doomed one ([`failure`](Self::failure)): an upstream failure is a run-time outcome that
/// reaches its waiters through the semaphores, never a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The operation's `(queue axis, epoch)`.
    pub point: Point,
    /// Everything the operation knows, itself included; its signals carry this.
    pub frontier: Frontier<FRONTIER_CAPACITY>,
    /// One outcome per wait, in order.
    pub waits: FixedVec<WaitOutcome, MAX_WAITS>,
    /// `Some` when the operation was accepted doomed: a semaphore it waits on had already
    /// failed (the first such wait's failure), or only a timeline it signals had
    /// ([`Failure::Aborted`]: its result would have nowhere to go). It will not run; when its
    /// turn comes it fails with this, failing what it signals. Its waits imported nothing, so
    /// its frontier is its queue's knowledge and its own point.
    pub failure: Option<Failure>,
    /// The first signal whose timeline had already failed: its index in [`Op::signals`] and
    /// that timeline's failure.
    pub failed_signal: Option<(usize, Failure)>,
}

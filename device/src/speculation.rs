//! Cancelling the operations that depended on rejected speculation
//! ([`Device::cancel_speculative`](crate::Device::cancel_speculative)).
//!
//! The decision is core's ([`Rejection::classify`](causeway_core::speculation::Rejection::classify)): one lookup in the operation's frontier.
//! What this module adds is who may act on it. For each ring slot the queue keeps
//!
//! - its **lineage** — the operation's frontier and signals, written by the submitter before it
//!   publishes the slot and only read afterwards, by cancellers: kept in an array of its own
//!   beside the ring, apart from the body the queue process mutates, so a cancellation walks
//!   small records in order instead of striding over whole slots; and
//! - a **run claim** (an array of two-byte records beside the ring too: the claim's word and
//!   a `started` flag), on which the queue process (about to start the operation) and a
//!   canceller (about to cancel it) agree who came first.
//!
//! # Run claim
//!
//! The claim's word and its transitions are in `run_claim` (its own file, so that the loom
//! model `tests/loom_run_claim.rs` compiles it against loom's atomics):
//!
//! ```text
//!            start (queue process)
//!   Queued ───────────────────────► Started ──cancel──► Started, ran on rejected work
//!     │                                                   (reported when it retires)
//!     └──cancel (canceller)──► Cancelled(dependence)
//!                               start fails: the queue process retires it as cancelled
//! ```
//!
//! `start` is idempotent (an operation that started and waits for room — a full device ring,
//! no quota — starts again). While no cancellation walk is under way on the queue, a start
//! only raises its `started` flag (a walk that begins later sees it and takes the right-hand
//! path); while one is, both sides settle on the word with compare-and-swaps, so exactly one
//! wins (`run_claim` explains the handshake, an asymmetric barrier between the queue's starts
//! and its walks). No other memory is handed over through the claim (the lineage is published
//! by the ring's `tail` store and read under the submit lock, the queue process is woken
//! through the executor).
//!
//! # Cancelling
//!
//! The canceller walks every queue twice, each time under that queue's submit lock: no slot is
//! refilled while it is held, so the lineage of every slot from the head to the tail stays as
//! submitted even while the queue process retires some of them.
//!
//! 1. **Claim**: for each operation that depends, claim the slot as cancelled (or mark it, if
//!    it started). Nothing fails yet: a failure spreading ahead of the walk would reach a
//!    dependent operation on a queue not walked yet as a failed wait, and it would retire as
//!    failed instead of cancelled.
//! 2. **Fail**: fail the signals of every operation claimed as cancelled that is still in the
//!    ring, at once rather than when its queue reaches it (the cascade: waiters on every
//!    driver wake with the failure, later submissions on those values fail at submission), and
//!    wake the queue. Failure is first-wins, so the queue's own retirement changes nothing.
//!
//! The queue process retires a cancelled operation in order without running it: its held and
//! host-armed waits are released (their timepoints unlinked), and on a native queue the
//! operation, never issued, retires on the host, which moves the queue's native progress past
//! it (`Backend::completed_on_host`), so a native wait on its epoch cannot stall the hardware
//! queue. An operation already started — running on a worker or handed to its driver — runs to
//! its end and is reported as having run on rejected work; the first walk also marks its
//! signals' history entries (`Semaphore::mark_ran_on_rejected`), so a waiter that consumes
//! them later can tell, and a report's semaphore history shows it.

use std::cell::UnsafeCell;

use causeway_core::frontier::Frontier;
use causeway_runtime::FRONTIER_CAPACITY;
use heapless::Vec as FixedVec;

use crate::ids::SemaphoreId;
use crate::limits::{MAX_SIGNALS, MAX_WAITS};

/// What a cancellation found and did, over every queue of the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CancelReport {
    /// Operations that had not started and were cancelled (their signals failed as
    /// cancelled), the conservative ones included.
    pub cancelled: usize,
    /// Of those, the ones cancelled only because their frontier was tainted
    /// ([`Dependence::Conservative`](causeway_core::speculation::Dependence::Conservative)).
    pub conservative: usize,
    /// Operations that depended but had already started: they run to their end and are
    /// reported as having run on rejected work.
    pub running: usize,
}

/// An operation's frontier (what its signals carry), as a canceller reads it.
pub(crate) type LineageFrontier = Frontier<FRONTIER_CAPACITY>;
/// What an operation signals, as a canceller fails it.
pub(crate) type LineageSignals = FixedVec<(SemaphoreId, u64), MAX_SIGNALS>;

/// What an operation waits for before it can end, as a waiting submitter's stall check reads
/// it (`device::stall`): its waits, none for an operation accepted doomed (it fails without
/// waiting), and its tag, to name it.
#[derive(Default)]
pub(crate) struct LineageWaits {
    pub(crate) tag: u64,
    pub(crate) waits: FixedVec<(SemaphoreId, u64), MAX_WAITS>,
}

/// One part of a slot's lineage: written before the slot is published, read-only while it is
/// in the ring, by walks over the ring (cancellers, a waiting submitter's stall check).
pub(crate) struct LineageCell<T>(UnsafeCell<T>);

// SAFETY: written only by the submitter holding the queue's submit lock while the slot is
// outside the published range (the ring's invariant 1, `queue`), read only by walks over the
// ring, which hold the same submit lock, so no write can overlap a read. `T: Send` because the
// value written on one thread is read on another.
unsafe impl<T: Send> Sync for LineageCell<T> {}

impl<T: Default> LineageCell<T> {
    pub(crate) fn new() -> LineageCell<T> {
        LineageCell(UnsafeCell::new(T::default()))
    }
}

impl<T> LineageCell<T> {
    /// Writes the lineage of the operation about to be published.
    ///
    /// # Safety
    /// The caller holds the queue's submit lock and the slot is outside `[head, tail)`.
    pub(crate) unsafe fn write(&self, lineage: T) {
        // SAFETY: the caller's contract: nobody else reads or writes it now.
        unsafe { *self.0.get() = lineage };
    }

    /// The lineage of the operation about to be published, to write in place (a value built
    /// apart and then written costs a copy of it).
    ///
    /// # Safety
    /// As for [`write`](Self::write), and the reference is dropped before the slot is
    /// published.
    #[allow(clippy::mut_from_ref, reason = "the submit lock makes the access exclusive")]
    pub(crate) unsafe fn get_mut(&self) -> &mut T {
        // SAFETY: the caller's contract: nobody else reads or writes it until it is published.
        unsafe { &mut *self.0.get() }
    }

    /// The lineage of a published operation.
    ///
    /// # Safety
    /// The caller holds the queue's submit lock (so the slot cannot be refilled) and the slot
    /// was published (its index below `tail`).
    pub(crate) unsafe fn read(&self) -> &T {
        // SAFETY: the caller's contract: only readers until the lock is released.
        unsafe { &*self.0.get() }
    }
}

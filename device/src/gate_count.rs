//! The count behind an operation's wait gate: how many of its waits are still outstanding, and
//! the first failure among them. The gate is open when the count is zero.
//!
//! Self-contained on purpose — it names nothing of the crate but this file — so that the loom
//! model (`tests/loom_wait_gate.rs`) includes it as it is, with loom's atomics in place of
//! std's.
//!
//! # Protocol
//!
//! ```text
//!                 hold            add_wait / withdraw_wait        release × n
//!   open (0) ─────────────► 1 ────────────────────────────► 1 + n ────────────► open (0)
//!   (slot free)      (submitter, slot unpublished)   (submitter holding)   (each holder once)
//! ```
//!
//! Every count has one holder: the submitter's *hold* (taken before it arms anything, dropped
//! after it published the slot), and one per armed wait (the wait's timepoint, which releases it
//! when it fires, or whoever unlinks the timepoint instead of letting it fire).
//!
//! Invariants:
//! 1. Only a holder changes the count, and only by its own count: the submitter adds and
//!    withdraws wait counts while it holds, and every holder releases exactly once. So while
//!    the submitter holds, the count never reaches zero, and once a holder reads 1 it is the
//!    only holder left: nobody else can change the count any more.
//! 2. The holder that takes the count to zero opens the gate (`release` answers `true`) and
//!    wakes the queue; the queue process reads the gate with Acquire, and sees every failure
//!    recorded by any holder before its release.
//! 3. The count is zero before a slot is reused (the queue process ran the operation only after
//!    reading it open), and the last release's decrement is its last access: `hold` for the
//!    next operation races with nothing.
//!
//! # Why every release is a read-modify-write
//!
//! By invariant 1 a holder that reads 1 is alone, and could store 0 instead of decrementing;
//! that saves a locked instruction on x86-64 but loses wakes. The holder that opens the gate
//! then wakes the queue process, and an executor wake that finds the process already queued
//! changes nothing: it only loads the process's state. The queue process, starting the drain
//! that queue promised, stores its state and then reads the gate. That is a store → load pair
//! on each side, and only the locked decrement here (and a locked instruction the drain runs
//! between the two, today the phase's compare-and-swap in `enter`) keeps the hardware from
//! letting both loads miss the other side's store. With a plain store here and the phase's
//! compare-and-swap replaced by plain stores as well, the device soak lost an operation's wake
//! in about one run in ten (with the plain store alone it lost none in 60 runs: the window is
//! narrow, not closed). The pair rests on the hardware's ordering of locked instructions, not
//! on the language's memory model, so the loom model below cannot see it; the soak can.

#[cfg(not(loom))]
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use causeway_core::semaphore::Failure;

/// Outstanding waits of one operation and the first failure among them (see the
/// [module documentation](self)).
pub(crate) struct GateCount {
    /// Outstanding holds: armed waits, plus one while the submitter is still arming.
    pending: AtomicU32,
    /// First failure (see [`Failure::to_word`]); zero for none.
    failure: AtomicU64,
}

impl GateCount {
    /// An open gate with no failure.
    pub(crate) fn new() -> GateCount {
        GateCount { pending: AtomicU32::new(0), failure: AtomicU64::new(0) }
    }

    /// The submitter's hold, for a slot about to be published: shuts the gate, with `failure`
    /// (if any) already recorded. The slot is outside the ring and its gate open (invariant 3),
    /// so nothing races with these stores; the ring's publication orders them for the queue
    /// process.
    pub(crate) fn hold(&self, failure: Option<Failure>) {
        self.failure.store(failure.map_or(0, Failure::to_word), Ordering::Relaxed);
        self.pending.store(1, Ordering::Relaxed);
    }

    /// Counts one more wait, about to be armed (the submitter, holding).
    pub(crate) fn add_wait(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes back a wait counted by `add_wait` that was not armed after all (the submitter,
    /// still holding: never the last count).
    pub(crate) fn withdraw_wait(&self) {
        self.pending.fetch_sub(1, Ordering::Relaxed);
    }

    /// Records `failure` unless an earlier one was recorded. Relaxed: the holder's `release`
    /// that follows publishes it (Release) to whoever opens the gate and to the queue process.
    pub(crate) fn record_failure(&self, failure: Failure) {
        let _ = self.failure.compare_exchange(
            0,
            failure.to_word(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The first failure recorded; complete once the gate was read open.
    pub(crate) fn failure(&self) -> Option<Failure> {
        Failure::from_word(self.failure.load(Ordering::Relaxed))
    }

    /// Drops the caller's count; `true` when that opened the gate (the caller wakes the queue).
    pub(crate) fn release(&self) -> bool {
        // AcqRel: Release publishes this holder's failure record to the queue process and to
        // the holder that opens the gate; Acquire makes the opener see earlier holders' records.
        // A read-modify-write even for the last holder (module docs).
        self.pending.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Whether every count was released.
    pub(crate) fn is_open(&self) -> bool {
        // Acquire pairs with the Release of the decrement in `release` that opened it.
        self.pending.load(Ordering::Acquire) == 0
    }

    /// Outstanding counts, for debugging output.
    pub(crate) fn pending(&self) -> u32 {
        self.pending.load(Ordering::Relaxed)
    }
}

// Not under loom: loom's atomics work only inside `loom::model` (the model is
// `tests/loom_wait_gate.rs`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_last_release_opens_and_keeps_the_first_failure() {
        let count = GateCount::new();
        assert!(count.is_open());
        count.hold(None);
        count.add_wait();
        count.add_wait();
        count.add_wait();
        count.withdraw_wait();
        assert!(!count.is_open());
        count.record_failure(Failure::Aborted);
        assert!(!count.release(), "two holders left");
        count.record_failure(Failure::Cancelled);
        assert!(!count.release(), "the submitter still holds");
        assert!(count.release(), "the last holder opens the gate");
        assert!(count.is_open());
        assert_eq!(count.failure(), Some(Failure::Aborted));

        count.hold(Some(Failure::DeviceLost));
        assert_eq!(count.pending(), 1);
        assert!(count.release());
        assert_eq!(count.failure(), Some(Failure::DeviceLost));
    }

    #[test]
    fn racing_holders_open_once() {
        for _ in 0..2000 {
            let count = GateCount::new();
            count.hold(None);
            count.add_wait();
            count.add_wait();
            let opened = std::thread::scope(|scope| {
                let holders: Vec<_> = (0..2).map(|_| scope.spawn(|| count.release())).collect();
                let submitter = count.release();
                holders.into_iter().map(|h| h.join().unwrap()).filter(|&o| o).count()
                    + usize::from(submitter)
            });
            assert_eq!(opened, 1);
            assert!(count.is_open());
        }
    }
}

//! The count behind an operation's wait gate: how many of its waits are still outstanding, and
//! the first failure among them. The gate is open when the count is zero.
//!
//! Its atomics come from `crate::sync`, so that under `--cfg loom` the loom model
//! (`tests/loom_wait_count.rs`) checks this type as the wait gate uses it, on loom's atomics.
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
//! # Why the last release is a store
//!
//! By invariant 1 a holder that reads 1 is alone: nobody else changes the count any more, so
//! it stores 0 instead of decrementing, and saves a locked instruction on every operation
//! whose waits resolve on the host (the common single wait, or the submitter's hold when its
//! waits fired before it published). The read cannot be stale in a way that matters: a holder
//! exists only after the submitter counted it (its timepoint was armed under the semaphore's
//! lock after `add_wait`, and fires under it), so it reads that count or a later one, and every
//! value from there on is at least 1 plus the holders not yet released. A 1 is therefore its
//! own count. Its Acquire reads the last decrement, whose release sequence carries every
//! earlier holder's failure record; its Release store hands them on to the queue process.
//!
//! The opener then wakes the queue process. That wake is ordered before the drain call it asks
//! for whatever state it finds the process in (the executor's invariant 4: even a process
//! already queued is rewritten by a read-modify-write that the drain's starting swap reads,
//! and one a hand-off has claimed gets NOTIFIED, which its drain's end reads), so the drain
//! sees the gate open without this word taking part in the handshake. Before the
//! executor gave that guarantee, this decrement and the phase change at the start of a drain
//! were locked only to keep that pair ordered, on x86-64's locked instructions: with both made
//! plain, the device soak lost an operation's wake in about one run in ten.

use causeway_core::semaphore::Failure;

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Outstanding waits of one operation and the first failure among them (see the
/// [module documentation](self)).
pub struct WaitCount {
    /// Outstanding holds: armed waits, plus one while the submitter is still arming.
    pending: AtomicU32,
    /// First failure (see [`Failure::to_word`]); zero for none.
    failure: AtomicU64,
}

impl WaitCount {
    /// An open gate with no failure.
    pub fn new() -> WaitCount {
        WaitCount { pending: AtomicU32::new(0), failure: AtomicU64::new(0) }
    }

    /// The submitter's hold, for a slot about to be published: shuts the gate, with `failure`
    /// (if any) already recorded. The slot is outside the ring and its gate open (invariant 3),
    /// so nothing races with these stores; the ring's publication orders them for the queue
    /// process.
    pub fn hold(&self, failure: Option<Failure>) {
        self.failure.store(failure.map_or(0, Failure::to_word), Ordering::Relaxed);
        self.pending.store(1, Ordering::Relaxed);
    }

    /// Counts one more wait, about to be armed (the submitter, holding).
    pub fn add_wait(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes back a wait counted by `add_wait` that was not armed after all (the submitter,
    /// still holding: never the last count).
    pub fn withdraw_wait(&self) {
        self.pending.fetch_sub(1, Ordering::Relaxed);
    }

    /// Records `failure` unless an earlier one was recorded. Relaxed: the holder's `release`
    /// that follows publishes it (Release) to whoever opens the gate and to the queue process.
    pub fn record_failure(&self, failure: Failure) {
        let _ = self.failure.compare_exchange(
            0,
            failure.to_word(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The first failure recorded; complete once the gate was read open.
    pub fn failure(&self) -> Option<Failure> {
        Failure::from_word(self.failure.load(Ordering::Relaxed))
    }

    /// Drops the caller's count; `true` when that opened the gate (the caller wakes the queue).
    pub fn release(&self) -> bool {
        // Acquire pairs with the Release of the other holders' decrements: an opener that
        // reads 1 sees every failure they recorded.
        if self.pending.load(Ordering::Acquire) == 1 {
            // The last holder, alone (module docs). Release pairs with the Acquire load in
            // `is_open`: the queue process sees the records.
            self.pending.store(0, Ordering::Release);
            return true;
        }
        // AcqRel: Release publishes this holder's failure record to the holder that opens the
        // gate; Acquire makes the opener, if it is this one after all, see earlier records.
        self.pending.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Whether every count was released.
    pub fn is_open(&self) -> bool {
        // Acquire pairs with the Release of the decrement in `release` that opened it.
        self.pending.load(Ordering::Acquire) == 0
    }

    /// Outstanding counts, for debugging output.
    pub fn pending(&self) -> u32 {
        self.pending.load(Ordering::Relaxed)
    }
}

// Not under loom: loom's atomics work only inside `loom::model` (the model is
// `tests/loom_wait_count.rs`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_last_release_opens_and_keeps_the_first_failure() {
        let count = WaitCount::new();
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
        // Fewer rounds under Miri, which interprets every one (and explores interleavings
        // of its own).
        for _ in 0..if cfg!(miri) { 20 } else { 2000 } {
            let count = WaitCount::new();
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

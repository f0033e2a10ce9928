//! The run claim of one ring slot: the word on which the queue process, about to start an
//! operation, and a canceller, about to cancel it, agree who came first (the state diagram and
//! how cancellation uses it are in `speculation`).
//!
//! Self-contained on purpose — it names nothing of the crate but this file — so that the loom
//! model (`tests/loom_run_claim.rs`) includes it as it is, with loom's atomics in place of
//! std's.
//!
//! # Invariants
//! 1. Every change is a compare-and-swap from a state the changer read: `start` moves only
//!    Queued → Started, `cancel` only Queued → Cancelled or Started → Started-on-rejected, and
//!    nothing leaves a Cancelled or Started-on-rejected state but `reset` (the submitter, for a
//!    slot outside the ring). So of a `start` and a `cancel` racing on a Queued word exactly
//!    one wins, and both see the same winner.
//! 2. An operation is never both run and cancelled: `start` answers `Ok` only from Queued or
//!    Started (it started), and `cancel` answers `Cancelled` only from Queued (it had not).
//! 3. No other memory is handed over through the word, so every access is Relaxed: the lineage
//!    the canceller reads is published by the ring's `tail` store and read under the submit
//!    lock, and the queue process learns of a cancellation's failed signals through the
//!    semaphores' own synchronisation.

#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};

use causeway_core::speculation::Dependence;

const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const CANCELLED_REJECTED: u8 = 2;
const CANCELLED_CONSERVATIVE: u8 = 3;
const STARTED_REJECTED: u8 = 4;
const STARTED_CONSERVATIVE: u8 = 5;

/// Who got to an operation first: the queue process starting it, or a canceller (see the
/// [module documentation](self)).
pub(crate) struct RunClaim(AtomicU8);

/// What [`RunClaim::cancel`] came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claimed {
    /// The operation had not started: it is cancelled.
    Cancelled,
    /// It had started: marked as running on rejected work.
    Running,
    /// An earlier cancellation already decided it.
    AlreadyDecided,
}

impl RunClaim {
    pub(crate) fn new() -> RunClaim {
        RunClaim(AtomicU8::new(QUEUED))
    }

    /// For a slot about to be published (submit lock held, slot outside the ring).
    pub(crate) fn reset(&self) {
        self.0.store(QUEUED, Ordering::Relaxed);
    }

    /// The queue process is about to start the operation: `Err` with the reason when a
    /// canceller came first.
    pub(crate) fn start(&self) -> Result<(), Dependence> {
        match self.0.compare_exchange(QUEUED, STARTED, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => Ok(()),
            Err(state) => match cancelled(state) {
                Some(dependence) => Err(dependence),
                None => Ok(()),
            },
        }
    }

    /// Why the operation was cancelled, if it was.
    pub(crate) fn cancelled(&self) -> Option<Dependence> {
        cancelled(self.0.load(Ordering::Relaxed))
    }

    /// Why a started operation was marked as running on rejected work, if it was.
    pub(crate) fn ran_on_rejected(&self) -> Option<Dependence> {
        match self.0.load(Ordering::Relaxed) {
            STARTED_REJECTED => Some(Dependence::Rejected),
            STARTED_CONSERVATIVE => Some(Dependence::Conservative),
            _ => None,
        }
    }

    /// A canceller decided the operation depends (`dependence` is not `Independent`).
    pub(crate) fn cancel(&self, dependence: Dependence) -> Claimed {
        let conservative = dependence == Dependence::Conservative;
        let (cancelled, marked) = if conservative {
            (CANCELLED_CONSERVATIVE, STARTED_CONSERVATIVE)
        } else {
            (CANCELLED_REJECTED, STARTED_REJECTED)
        };
        let mut state = self.0.load(Ordering::Relaxed);
        loop {
            let (next, claimed) = match state {
                QUEUED => (cancelled, Claimed::Cancelled),
                STARTED => (marked, Claimed::Running),
                _ => return Claimed::AlreadyDecided,
            };
            match self.0.compare_exchange_weak(state, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return claimed,
                Err(now) => state = now,
            }
        }
    }
}

fn cancelled(state: u8) -> Option<Dependence> {
    match state {
        CANCELLED_REJECTED => Some(Dependence::Rejected),
        CANCELLED_CONSERVATIVE => Some(Dependence::Conservative),
        _ => None,
    }
}

// Not under loom: loom's atomics work only inside `loom::model` (the model is
// `tests/loom_run_claim.rs`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_first_side_wins() {
        let claim = RunClaim::new();
        assert_eq!(claim.cancel(Dependence::Conservative), Claimed::Cancelled);
        assert_eq!(claim.start(), Err(Dependence::Conservative));
        assert_eq!(claim.cancel(Dependence::Rejected), Claimed::AlreadyDecided);
        assert_eq!(claim.cancelled(), Some(Dependence::Conservative));

        claim.reset();
        assert_eq!(claim.start(), Ok(()));
        assert_eq!(claim.start(), Ok(()), "starting again (after waiting for room) is fine");
        assert_eq!(claim.cancel(Dependence::Rejected), Claimed::Running);
        assert_eq!(claim.start(), Ok(()));
        assert_eq!(claim.cancelled(), None);
        assert_eq!(claim.ran_on_rejected(), Some(Dependence::Rejected));
        assert_eq!(claim.cancel(Dependence::Rejected), Claimed::AlreadyDecided);
    }

    #[test]
    fn racing_sides_agree() {
        for _ in 0..2000 {
            let claim = RunClaim::new();
            let (started, claimed) = std::thread::scope(|scope| {
                let start = scope.spawn(|| claim.start());
                let cancel = scope.spawn(|| claim.cancel(Dependence::Rejected));
                (start.join().unwrap(), cancel.join().unwrap())
            });
            match claimed {
                Claimed::Cancelled => assert_eq!(started, Err(Dependence::Rejected)),
                Claimed::Running => assert_eq!(started, Ok(())),
                Claimed::AlreadyDecided => panic!("nothing decided it before"),
            }
        }
    }
}

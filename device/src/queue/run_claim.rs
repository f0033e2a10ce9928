//! The run claim of one ring slot: the word on which the queue process, about to start an
//! operation, and a canceller, about to cancel it, agree who came first (the state diagram and
//! how cancellation uses it are in `speculation`).
//!
//! Its atomics and the asymmetric barrier come from `crate::sync`, so that under `--cfg loom`
//! the loom model (`tests/loom_run_claim.rs`) checks these types as the queue uses them, on
//! loom's atomics and with `SeqCst` fences for the barrier's two sides.
//!
//! # The fast start
//!
//! The queue process starts every operation; cancellers are rare (a rejected speculation). So
//! a start does not settle on the word by itself: it raises the slot's `started` flag, then
//! reads how many cancellation walks are under way on the queue ([`Cancellers`]), with the
//! asymmetric barrier's light side between the two; a walk counts itself in, then uses the
//! heavy side, then reads `started` (see `causeway_runtime::barrier`). So either the start sees
//! the walk, or the walk sees the flag:
//!
//! - a start that sees no walk has started, and reads the word only for an earlier walk's
//!   cancellation (the walk's Release decrement, acquired by that read of the count, makes its
//!   decision visible); a later walk sees the flag and concedes: it marks the operation as
//!   running on rejected work;
//! - a start that sees a walk settles on the word with a compare-and-swap, as the walk does: a
//!   walk that saw the flag concedes (it may have, so it must), one that did not cancels; the
//!   first swap decides, and both read the same answer.
//!
//! # Invariants
//! 1. Every change of the word is a compare-and-swap from a state the changer read: a
//!    settling `start` moves only Queued → Started, a walk only Queued → Cancelled, Queued →
//!    Started-on-rejected (conceding) or Started → Started-on-rejected, and nothing leaves a
//!    Cancelled or Started-on-rejected state but `reset` (the submitter, for a slot outside
//!    the ring). So of a start and a walk that both settle on a Queued word exactly one wins,
//!    and both see the same winner.
//! 2. An operation is never both run and cancelled: `start` answers `Ok` only when no walk was
//!    under way (and none had cancelled it) or from Queued or a started state, and a walk
//!    answers `Cancelled` only from Queued and only when it did not see `started`, which a
//!    start that skipped the swap raised before a barrier the walk's heavy barrier pairs with.
//! 3. No other memory is handed over through the claim, so the word and the flag are accessed
//!    Relaxed: the lineage the canceller reads is published by the ring's `tail` store and
//!    read under the submit lock, and the queue process learns of a cancellation's failed
//!    signals through the semaphores' own synchronisation.

use causeway_core::speculation::Dependence;

use crate::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use crate::sync::barrier;

const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const CANCELLED_REJECTED: u8 = 2;
const CANCELLED_CONSERVATIVE: u8 = 3;
const STARTED_REJECTED: u8 = 4;
const STARTED_CONSERVATIVE: u8 = 5;

/// Who got to an operation first: the queue process starting it, or a canceller (see the
/// [module documentation](self)).
pub struct RunClaim {
    state: AtomicU8,
    /// Raised by every start, before it looks for walks.
    started: AtomicBool,
}

/// What [`CancelWalk::cancel`] came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// The operation had not started: it is cancelled.
    Cancelled,
    /// It had started: marked as running on rejected work.
    Running,
    /// An earlier cancellation already decided it.
    AlreadyDecided,
}

/// The cancellation walks under way on one queue (see the [module documentation](self)).
pub struct Cancellers {
    walks: AtomicUsize,
}

impl Cancellers {
    /// No walk under way.
    pub fn new() -> Cancellers {
        Cancellers { walks: AtomicUsize::new(0) }
    }

    /// Counts a walk in; the claims it decides are decided through the returned guard, which
    /// counts it out when dropped. Costs the heavy side of the barrier (a system call).
    pub fn begin(&self) -> CancelWalk<'_> {
        // Relaxed: the barrier below orders it before the walk's reads of `started`.
        self.walks.fetch_add(1, Ordering::Relaxed);
        // Between the count and the reads of `started`; pairs with the light barrier in
        // `RunClaim::start` (module docs).
        barrier::heavy();
        CancelWalk { cancellers: self }
    }
}

/// One cancellation walk, counted in [`Cancellers`] while it lives.
pub struct CancelWalk<'c> {
    cancellers: &'c Cancellers,
}

impl CancelWalk<'_> {
    /// Decides `claim` for a walk that found its operation depends (`dependence` is not
    /// `Independent`).
    pub fn cancel(&self, claim: &RunClaim, dependence: Dependence) -> Claimed {
        let conservative = dependence == Dependence::Conservative;
        let (cancelled, marked) = if conservative {
            (CANCELLED_CONSERVATIVE, STARTED_CONSERVATIVE)
        } else {
            (CANCELLED_REJECTED, STARTED_REJECTED)
        };
        // Read after the heavy barrier of `begin`: a start that skipped the swap raised it
        // before then (invariant 2).
        let started = claim.started.load(Ordering::Relaxed);
        let mut state = claim.state.load(Ordering::Relaxed);
        loop {
            let (next, claimed) = match state {
                QUEUED if started => (marked, Claimed::Running),
                QUEUED => (cancelled, Claimed::Cancelled),
                STARTED => (marked, Claimed::Running),
                _ => return Claimed::AlreadyDecided,
            };
            match claim.state.compare_exchange_weak(
                state,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return claimed,
                Err(now) => state = now,
            }
        }
    }
}

impl Drop for CancelWalk<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire load of the count in `RunClaim::start`: a start that
        // reads the count this leaves sees the walk's decisions.
        self.cancellers.walks.fetch_sub(1, Ordering::Release);
    }
}

impl RunClaim {
    /// Queued, not started.
    pub fn new() -> RunClaim {
        RunClaim { state: AtomicU8::new(QUEUED), started: AtomicBool::new(false) }
    }

    /// For a slot about to be published (submit lock held, slot outside the ring).
    pub fn reset(&self) {
        self.state.store(QUEUED, Ordering::Relaxed);
        self.started.store(false, Ordering::Relaxed);
    }

    /// The queue process is about to start the operation: `Err` with the reason when a
    /// canceller came first. `cancellers` are the walks of the operation's queue.
    pub fn start(&self, cancellers: &Cancellers) -> Result<(), Dependence> {
        self.started.store(true, Ordering::Relaxed);
        // Between the flag and the count; pairs with the heavy barrier in `Cancellers::begin`
        // (module docs).
        barrier::light();
        // Acquire pairs with the Release decrement of a finished walk: its decision on this
        // claim is visible to the load of the word below.
        if cancellers.walks.load(Ordering::Acquire) == 0 {
            // No walk overlaps this start: any later one sees `started` and concedes.
            return match cancelled(self.state.load(Ordering::Relaxed)) {
                Some(dependence) => Err(dependence),
                None => Ok(()),
            };
        }
        match self.state.compare_exchange(QUEUED, STARTED, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => Ok(()),
            Err(state) => match cancelled(state) {
                Some(dependence) => Err(dependence),
                None => Ok(()),
            },
        }
    }

    /// Why the operation was cancelled, if it was.
    pub fn cancelled(&self) -> Option<Dependence> {
        cancelled(self.state.load(Ordering::Relaxed))
    }

    /// Whether a cancellation found the operation dependent on rejected speculation, and
    /// why: cancelled before it started (`false`), or marked while it ran (`true`). One read
    /// of the word, for the operation's ending.
    pub fn speculation(&self) -> Option<(Dependence, bool)> {
        match self.state.load(Ordering::Relaxed) {
            CANCELLED_REJECTED => Some((Dependence::Rejected, false)),
            CANCELLED_CONSERVATIVE => Some((Dependence::Conservative, false)),
            STARTED_REJECTED => Some((Dependence::Rejected, true)),
            STARTED_CONSERVATIVE => Some((Dependence::Conservative, true)),
            _ => None,
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
        let (claim, cancellers) = (RunClaim::new(), Cancellers::new());
        {
            let walk = cancellers.begin();
            assert_eq!(walk.cancel(&claim, Dependence::Conservative), Claimed::Cancelled);
            assert_eq!(claim.start(&cancellers), Err(Dependence::Conservative), "while walking");
            assert_eq!(walk.cancel(&claim, Dependence::Rejected), Claimed::AlreadyDecided);
        }
        assert_eq!(claim.start(&cancellers), Err(Dependence::Conservative), "after the walk");
        assert_eq!(claim.cancelled(), Some(Dependence::Conservative));

        claim.reset();
        assert_eq!(claim.start(&cancellers), Ok(()));
        assert_eq!(claim.start(&cancellers), Ok(()), "starting again (after waiting for room)");
        {
            let walk = cancellers.begin();
            assert_eq!(walk.cancel(&claim, Dependence::Rejected), Claimed::Running);
            assert_eq!(claim.start(&cancellers), Ok(()));
            assert_eq!(walk.cancel(&claim, Dependence::Rejected), Claimed::AlreadyDecided);
        }
        assert_eq!(claim.cancelled(), None);
        assert_eq!(claim.speculation(), Some((Dependence::Rejected, true)));

        claim.reset();
        {
            let walk = cancellers.begin();
            assert_eq!(claim.start(&cancellers), Ok(()), "a start during a walk settles first");
            assert_eq!(walk.cancel(&claim, Dependence::Conservative), Claimed::Running);
        }
        assert_eq!(claim.speculation(), Some((Dependence::Conservative, true)));
    }

    #[test]
    fn racing_sides_agree() {
        // Fewer rounds under Miri, which interprets every one (and explores interleavings
        // of its own).
        for _ in 0..if cfg!(miri) { 20 } else { 2000 } {
            let (claim, cancellers) = (RunClaim::new(), Cancellers::new());
            let (started, claimed) = std::thread::scope(|scope| {
                let start = scope.spawn(|| claim.start(&cancellers));
                let cancel =
                    scope.spawn(|| cancellers.begin().cancel(&claim, Dependence::Rejected));
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

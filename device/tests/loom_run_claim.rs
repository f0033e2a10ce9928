//! Loom model of the run claim (`src/queue/run_claim.rs`: the crate's own `RunClaim` and
//! `Cancellers`, which under `--cfg loom` run on loom's atomics, with `SeqCst` fences for the
//! two sides of the asymmetric barrier; see the crate's `sync` module): every
//! interleaving of the queue process starting an operation — on the fast path when no walk is
//! under way, settling on the word when one is — and cancellation walks cancelling it.
//!
//! What each model checks is the claim's contract with the code around it: exactly one side
//! wins and both see the same winner; an operation whose start succeeded runs and is never
//! failed as cancelled; one whose cancellation succeeded never runs and its signals fail; a
//! start repeated after waiting for room answers as the first did.
//!
//! Each of these changes to `run_claim.rs` makes every model here fail: either barrier side
//! dropped, the count's Acquire load in `start` or the walk's Release decrement made Relaxed, a
//! walk that cancels a Queued claim whose `started` flag it saw, or one that cancels a Started
//! claim.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p causeway-device --release --test
//! loom_run_claim` (the test command's loom tier does).
#![cfg(loom)]

use causeway_core::speculation::Dependence;
use causeway_device::loom_models::{Cancellers, Claimed, RunClaim};
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

/// An operation's fate as the model's threads leave it: whether its work ran, and its signal's
/// failure word (first wins, as a semaphore's).
#[derive(Default)]
struct Fate {
    ran: AtomicBool,
    /// 0: no failure; otherwise the cancellation's dependence (see `word`).
    failed: AtomicU32,
}

/// A failure word per reason a canceller gives.
fn word(dependence: Dependence) -> u32 {
    match dependence {
        Dependence::Rejected => 1,
        Dependence::Conservative => 2,
        other => panic!("a canceller never cancels for {other:?}"),
    }
}

impl Fate {
    fn fail_cancelled(&self, dependence: Dependence) {
        let failure = word(dependence);
        let _ = self.failed.compare_exchange(0, failure, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The signal's failure word (0 for none).
    fn failed(&self) -> u32 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// One ring slot's claim and its queue's cancellation walks.
struct Slot {
    claim: RunClaim,
    cancellers: Cancellers,
}

impl Slot {
    fn new() -> Slot {
        Slot { claim: RunClaim::new(), cancellers: Cancellers::new() }
    }
}

impl std::ops::Deref for Slot {
    type Target = RunClaim;

    fn deref(&self) -> &RunClaim {
        &self.claim
    }
}

/// The queue process: starts the operation (`tries` times, as one waiting for room does) and
/// runs its work if the start succeeded; the answers of every try.
fn queue_process(claim: &Slot, fate: &Fate, tries: usize) -> Vec<Result<(), Dependence>> {
    let answers: Vec<_> = (0..tries).map(|_| claim.start(&claim.cancellers)).collect();
    if answers[0].is_ok() {
        fate.ran.store(true, Ordering::Relaxed);
    }
    answers
}

/// A canceller: claims the operation and, if that cancelled it, fails its signals.
fn canceller(claim: &Slot, fate: &Fate, dependence: Dependence) -> Claimed {
    // The walk stays counted until its claims are acted on, as `claim_speculative`'s does.
    let walk = claim.cancellers.begin();
    let claimed = walk.cancel(&claim.claim, dependence);
    if claimed == Claimed::Cancelled {
        fate.fail_cancelled(dependence);
    }
    claimed
}

fn spawn_canceller(
    claim: &Arc<Slot>,
    fate: &Arc<Fate>,
    dependence: Dependence,
) -> thread::JoinHandle<Claimed> {
    let (claim, fate) = (Arc::clone(claim), Arc::clone(fate));
    thread::spawn(move || canceller(&claim, &fate, dependence))
}

#[test]
fn a_start_and_a_cancel_agree_on_one_winner_and_the_work_runs_or_fails_never_both() {
    loom::model(|| {
        let (claim, fate) = (Arc::new(Slot::new()), Arc::new(Fate::default()));
        let cancelling = spawn_canceller(&claim, &fate, Dependence::Rejected);
        let started = queue_process(&claim, &fate, 1).remove(0);
        let claimed = cancelling.join().unwrap();
        let ran = fate.ran.load(Ordering::Relaxed);
        match claimed {
            Claimed::Cancelled => {
                assert_eq!(started, Err(Dependence::Rejected));
                assert!(!ran, "a cancelled operation never runs");
                assert_eq!(fate.failed(), word(Dependence::Rejected));
                assert_eq!(claim.cancelled(), Some(Dependence::Rejected));
            }
            Claimed::Running => {
                assert_eq!(started, Ok(()));
                assert!(ran);
                assert_eq!(fate.failed(), 0, "a started operation's signals are its own");
                assert_eq!(claim.speculation(), Some((Dependence::Rejected, true)));
                assert_eq!(claim.cancelled(), None);
            }
            Claimed::AlreadyDecided => panic!("nothing decided it before"),
        }
    });
}

#[test]
fn a_start_repeated_after_waiting_for_room_answers_as_the_first_did() {
    loom::model(|| {
        let (claim, fate) = (Arc::new(Slot::new()), Arc::new(Fate::default()));
        let cancelling = spawn_canceller(&claim, &fate, Dependence::Conservative);
        let answers = queue_process(&claim, &fate, 2);
        let claimed = cancelling.join().unwrap();
        assert_eq!(answers[0], answers[1], "{claimed:?}");
        assert_eq!(answers[0].is_ok(), claimed == Claimed::Running);
    });
}

#[test]
fn of_two_cancellers_and_a_start_one_canceller_decides_and_the_start_sees_its_reason() {
    // Three threads, each with a barrier and a few atomics: unbounded, loom needs more than ten
    // minutes. Three preemptions cover every order of the two walks' count, barrier, flag read
    // and swap around the start's flag, barrier, count read and swap.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let (claim, fate) = (Arc::new(Slot::new()), Arc::new(Fate::default()));
        let rejected = spawn_canceller(&claim, &fate, Dependence::Rejected);
        let conservative = spawn_canceller(&claim, &fate, Dependence::Conservative);
        let started = queue_process(&claim, &fate, 1).remove(0);
        let claims = [
            (Dependence::Rejected, rejected.join().unwrap()),
            (Dependence::Conservative, { conservative.join().unwrap() }),
        ];
        let deciding: Vec<_> =
            claims.iter().filter(|(_, claimed)| *claimed != Claimed::AlreadyDecided).collect();
        assert_eq!(deciding.len(), 1, "exactly one canceller decides: {claims:?}");
        let &(dependence, claimed) = deciding[0];
        match claimed {
            Claimed::Cancelled => {
                assert_eq!(started, Err(dependence));
                assert!(!fate.ran.load(Ordering::Relaxed));
                assert_eq!(fate.failed(), word(dependence));
            }
            Claimed::Running => {
                assert_eq!(started, Ok(()));
                assert_eq!(claim.speculation(), Some((dependence, true)));
                assert_eq!(fate.failed(), 0);
            }
            Claimed::AlreadyDecided => unreachable!("filtered above"),
        }
    });
}

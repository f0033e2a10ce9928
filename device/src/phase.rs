//! Who may touch a queue's ring: its queue process, or — once, at shutdown — the device
//! taking the queue over, even from a worker stuck in an operation's work.
//!
//! Self-contained on purpose — it names nothing of the crate but this file — so that the loom
//! model (`tests/loom_phase.rs`) includes it as it is, with loom's atomics and fences in place
//! of std's and of the asymmetric barrier.
//!
//! Two words, each with one writer. The queue process's phase:
//!
//! ```text
//!            enter (a drain starts)            start_work (user work begins)
//!   Idle ───────────────────────────► Stepping ─────────────────────────────► Working
//!    ▲  ◄─────────────────────────────        ◄─────────────────────────────
//!            leave (the drain ends)             finish_work (the work returned)
//! ```
//!
//! and the device's take-over request, written only by the shutdown (one thread):
//!
//! ```text
//!          take_over                       take_over, the phase read Idle or Working
//!   None ─────────────► Requested ─────────────────────────────────────────────► Taken
//!                       (the phase read Stepping: the device tries again)
//! ```
//!
//! `enter` and `finish_work` store Stepping and then read the request; `take_over` stores the
//! request and then reads the phase. Each side puts a store → load barrier between the two
//! (`light` on the queue process's side, which runs twice per operation; `heavy` on the
//! device's, which runs at shutdown: see `causeway_runtime::barrier`), so either the queue
//! process sees the request or the device sees Stepping. A queue process that sees a request
//! stores back the phase it came from (Idle, or Working) and touches nothing more; a later
//! drain that finds the request likewise leaves the phase as it was, so a Working phase
//! frozen by `finish_work` stays Working until the device reads it.
//!
//! Invariants:
//! 1. Only the queue process (one drainer at a time: it is an immediate process) writes the
//!    phase; only the device writes the request, which never goes back to None.
//! 2. In Idle the queue process holds no reference into the ring, so after taking over an
//!    Idle queue the device owns the whole ring. `leave` (Release) pairs with the Acquire
//!    load in `take_over`: everything the last drain wrote is visible to the device. A drain
//!    that begins after the request backs off in `enter`.
//! 3. In Working the queue process is running the head operation's work and holds no
//!    reference to its slot (it copied what the work needs), so the device may read the head
//!    operation's signals and fail them while the work runs on; the worker, when the work
//!    returns, finds the request in `finish_work` and stops without touching anything else.
//!    `start_work` (Release) publishes the ring's state and the running fields before the
//!    work, for the same reason; they stay as they are, because no other work starts.
//! 4. Stepping is short bookkeeping (no user work): the device waits it out, within a bound.
//!    With the request made, the queue process leaves Stepping at its next phase change.

#[cfg(not(loom))]
use causeway_runtime::barrier;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Under loom, both sides of the asymmetric barrier are what they are equivalent to: `SeqCst`
/// fences.
#[cfg(loom)]
mod barrier {
    use loom::sync::atomic::{fence, Ordering};

    pub(super) fn light() {
        fence(Ordering::SeqCst);
    }

    pub(super) fn heavy() {
        fence(Ordering::SeqCst);
    }
}

const IDLE: u8 = 0;
const STEPPING: u8 = 1;
const WORKING: u8 = 2;

const NO_REQUEST: u8 = 0;
const REQUESTED: u8 = 1;
const TAKEN: u8 = 2;

/// What the queue is running right now, recorded at `start_work` for shutdown reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Running {
    /// The operation's tag.
    pub(crate) tag: u64,
    /// The worker running it.
    pub(crate) worker: usize,
    /// When its work started (`clock::start_ns`).
    pub(crate) since_ns: u64,
}

/// What `take_over` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TakeOver {
    /// The queue was between drains: the device now owns its whole ring.
    Idle,
    /// The head operation's work is still running (described); the device owns the ring, and
    /// may read (not write) the head operation's slot.
    Stuck(Running),
    /// A drain is in its bookkeeping; try again.
    Stepping,
    /// Taken over before.
    Abandoned,
}

/// The phase word, the take-over request and what is running; one per queue.
#[derive(Debug)]
pub(crate) struct QueuePhase {
    state: AtomicU8,
    request: AtomicU8,
    tag: AtomicU64,
    worker: AtomicUsize,
    since_ns: AtomicU64,
}

impl QueuePhase {
    pub(crate) fn new() -> QueuePhase {
        QueuePhase {
            state: AtomicU8::new(IDLE),
            request: AtomicU8::new(NO_REQUEST),
            tag: AtomicU64::new(0),
            worker: AtomicUsize::new(0),
            since_ns: AtomicU64::new(0),
        }
    }

    /// Idle → Stepping, at the start of a drain; `false` (and the phase as it was) when the
    /// device asked to take the queue over.
    pub(crate) fn enter(&self) -> bool {
        // Relaxed: this drain follows the previous one through the executor's own
        // synchronisation, so it reads the phase the previous drain left: Idle, or Working when
        // that drain backed off in `finish_work` (then the request is visible here as well, and
        // the phase must stay Working for the device to fail that work).
        let before = self.state.load(Ordering::Relaxed);
        // Relaxed: the store only has to come before the request's load, which the barrier
        // sees to.
        self.state.store(STEPPING, Ordering::Relaxed);
        self.stepping_unrequested(before)
    }

    /// Stepping → Idle, at the end of a drain that was not taken over.
    pub(crate) fn leave(&self) {
        // Release pairs with the Acquire load in `take_over` (invariant 2).
        self.state.store(IDLE, Ordering::Release);
    }

    /// Stepping → Working, before the head operation's work runs.
    pub(crate) fn start_work(&self, running: Running) {
        self.tag.store(running.tag, Ordering::Relaxed);
        self.worker.store(running.worker, Ordering::Relaxed);
        self.since_ns.store(running.since_ns, Ordering::Relaxed);
        // Release pairs with the Acquire load in `take_over` (invariant 3): the ring's state
        // and the fields above are visible to a device that takes over during the work.
        self.state.store(WORKING, Ordering::Release);
    }

    /// Working → Stepping, after the work returned; `false` (and Working again) when the device
    /// asked to take the queue over meanwhile (the caller must then touch nothing of the queue).
    pub(crate) fn finish_work(&self) -> bool {
        self.state.store(STEPPING, Ordering::Relaxed);
        self.stepping_unrequested(WORKING)
    }

    /// The queue process's half of the handshake, just after storing Stepping: whether the
    /// device has not asked for the queue; if it has, `back` (the phase before) is restored.
    #[inline]
    fn stepping_unrequested(&self, back: u8) -> bool {
        // Between the store of Stepping and the load of the request; pairs with the heavy
        // barrier in `take_over` (module docs).
        barrier::light();
        if self.request.load(Ordering::Relaxed) == NO_REQUEST {
            return true;
        }
        // Release pairs with the Acquire load in `take_over`: a device that reads the phase
        // back sees the ring as this drain left it.
        self.state.store(back, Ordering::Release);
        false
    }

    /// The device takes the queue over (shutdown only, one thread): asks for it, then reads the
    /// phase. Idle or Working make the take-over final; Stepping leaves the request standing,
    /// and the caller tries again (the queue process leaves Stepping at its next phase change).
    pub(crate) fn take_over(&self) -> TakeOver {
        // Relaxed: only this thread writes the request.
        match self.request.load(Ordering::Relaxed) {
            TAKEN => return TakeOver::Abandoned,
            NO_REQUEST => self.request.store(REQUESTED, Ordering::Relaxed),
            _ => {}
        }
        // Between the store of the request and the load of the phase; pairs with the light
        // barrier in `enter` and `finish_work` (module docs).
        barrier::heavy();
        // Acquire pairs with the Release of `leave`, `start_work` or a backing-off drain's
        // restore: the ring's state (and, for Working, the running fields) as the queue
        // process last left it.
        let state = self.state.load(Ordering::Acquire);
        if state == STEPPING {
            return TakeOver::Stepping;
        }
        self.request.store(TAKEN, Ordering::Relaxed);
        if state == IDLE {
            return TakeOver::Idle;
        }
        // Frozen now: the queue process cannot start other work (its `finish_work` sees the
        // request), so these are the fields of the work the load caught.
        TakeOver::Stuck(Running {
            tag: self.tag.load(Ordering::Relaxed),
            worker: self.worker.load(Ordering::Relaxed),
            since_ns: self.since_ns.load(Ordering::Relaxed),
        })
    }
}

// Not under loom: loom's atomics work only inside `loom::model` (the model is
// `tests/loom_phase.rs`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const WORK: Running = Running { tag: 7, worker: 1, since_ns: 100 };

    #[test]
    fn a_drain_cycles_through_its_phases() {
        let phase = QueuePhase::new();
        assert!(phase.enter());
        phase.start_work(WORK);
        assert!(phase.finish_work());
        phase.leave();
        assert!(phase.enter());
        assert_eq!(phase.take_over(), TakeOver::Stepping);
        phase.leave();
        assert_eq!(phase.take_over(), TakeOver::Idle);
        assert!(!phase.enter(), "a taken-over queue is never drained again");
        assert_eq!(phase.take_over(), TakeOver::Abandoned);
    }

    #[test]
    fn taking_over_during_work_reports_it_and_stops_the_worker_afterwards() {
        let phase = QueuePhase::new();
        assert!(phase.enter());
        phase.start_work(WORK);
        assert_eq!(phase.take_over(), TakeOver::Stuck(WORK));
        assert!(!phase.finish_work());
        assert!(!phase.enter());
    }
}

//! Who may touch a queue's ring: its queue process, or — once, at shutdown — the device
//! taking the queue over, even from a worker stuck in an operation's work.
//!
//! Its atomics and the asymmetric barrier come from `crate::sync`, so that under `--cfg loom`
//! the loom model (`tests/loom_ownership.rs`) checks these types as the queue uses them, on
//! loom's atomics and with `SeqCst` fences for the barrier's two sides.
//!
//! ```text
//!            enter (a drain starts)            start_work (user work begins)
//!   Idle ───────────────────────────► Stepping ─────────────────────────────► Working
//!    ▲  ◄─────────────────────────────         ◄─────────────────────────────
//!             leave (the drain ends)             finish_work (the work returned)
//!
//!   device: take_over raises `asked` (once), then reads the phase:
//!           Idle → the device owns the ring; Working → it owns the ring and the work runs on;
//!           Stepping → not yet (ask again)
//! ```
//!
//! # A handshake with one rare side
//!
//! The queue process moves the phase on every drain and every operation; the device takes a
//! queue over once, at shutdown. So the phase word belongs to the queue process alone and
//! changes by plain stores, and the device says it is taking over in a word of its own,
//! `asked`. The two meet where the queue process starts touching the ring — `enter` and
//! `finish_work`: it stores Stepping, then reads `asked`; the device raises `asked`, then reads
//! the phase. That is a Dekker pair, ordered by the asymmetric barrier (`barrier::light` on the
//! queue's side, `barrier::heavy` once on the device's; see `causeway_runtime::barrier`), so
//! either the device reads Stepping (and asks again later) or the queue process reads `asked`
//! (and backs off), or both. The queue process backs off by storing back the phase it left —
//! Idle in `enter`, Working in `finish_work` — and touching nothing; from then on every `enter`
//! and `finish_work` refuses. Two compare-and-swaps per operation (start of a drain, end of a
//! work) became plain stores.
//!
//! # Invariants
//! 1. Only the queue process (one drainer at a time: it is an immediate process) writes the
//!    phase; only the device writes `asked`, and never lowers it.
//! 2. In Idle the queue process holds no reference into the ring, so after reading Idle past
//!    its barrier the device owns the whole ring: a drain entering later reads `asked` and
//!    backs off. `leave` (Release) pairs with the device's Acquire read: everything the last
//!    drain wrote is visible to the device.
//! 3. In Working the queue process is running the head operation's work and holds no reference
//!    to its slot (it copied what the work needs), so the device may read the head operation's
//!    signals and fail them while the work runs on; the worker, when the work returns, reads
//!    `asked` in `finish_work` and stops without touching anything else. `start_work`
//!    (Release) publishes the ring's state and the running fields before the work.
//! 4. Stepping is short bookkeeping (no user work): the device waits it out, within a bound.

use crate::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use crate::sync::barrier;

const IDLE: u8 = 0;
const STEPPING: u8 = 1;
const WORKING: u8 = 2;

/// `asked`: the device has not begun to take the queue over.
const NOT_ASKED: u8 = 0;
/// `asked`: the device is taking the queue over (a drain may still be stepping).
const ASKED: u8 = 1;
/// `asked`: the device owns the ring.
const TAKEN: u8 = 2;

/// What the queue is running right now, recorded at `start_work` for shutdown reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Running {
    /// The operation's tag.
    pub tag: u64,
    /// The worker running it.
    pub worker: usize,
    /// When its work started (`clock::start_ns`).
    pub since_ns: u64,
}

/// What `take_over` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeOver {
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

/// The phase word, the device's request and what is running; one per queue.
#[derive(Debug)]
pub struct RingOwnership {
    /// Idle, Stepping or Working: the queue process's alone (invariant 1).
    state: AtomicU8,
    /// Not asked, asked or taken: the device's alone.
    asked: AtomicU8,
    tag: AtomicU64,
    worker: AtomicUsize,
    since_ns: AtomicU64,
}

impl RingOwnership {
    /// Idle, not asked.
    pub fn new() -> RingOwnership {
        RingOwnership {
            state: AtomicU8::new(IDLE),
            asked: AtomicU8::new(NOT_ASKED),
            tag: AtomicU64::new(0),
            worker: AtomicUsize::new(0),
            since_ns: AtomicU64::new(0),
        }
    }

    /// Idle → Stepping, at the start of a drain; `false` when the queue is being taken over
    /// (the phase stays Idle, and the caller touches nothing of the queue).
    pub fn enter(&self) -> bool {
        // Relaxed: the barrier orders it before the read of `asked`; the previous drain's
        // writes are ordered before this one by the executor.
        self.state.store(STEPPING, Ordering::Relaxed);
        self.stepping_unless_asked(IDLE)
    }

    /// Stepping → Idle, at the end of a drain that was not refused.
    pub fn leave(&self) {
        // Release pairs with the Acquire read in `take_over` (invariant 2).
        self.state.store(IDLE, Ordering::Release);
    }

    /// Stepping → Working, before the head operation's work runs.
    pub fn start_work(&self, running: Running) {
        self.tag.store(running.tag, Ordering::Relaxed);
        self.worker.store(running.worker, Ordering::Relaxed);
        self.since_ns.store(running.since_ns, Ordering::Relaxed);
        // Release pairs with the Acquire read in `take_over` (invariant 3): the ring's state
        // and the fields above are visible to a device that takes over during the work.
        self.state.store(WORKING, Ordering::Release);
    }

    /// Working → Stepping, after the work returned; `false` when the queue was taken over
    /// meanwhile (the phase stays Working, and the caller must touch nothing of the queue).
    pub fn finish_work(&self) -> bool {
        // Relaxed, as in `enter`.
        self.state.store(STEPPING, Ordering::Relaxed);
        self.stepping_unless_asked(WORKING)
    }

    /// The queue process's half of the handshake, after it stored Stepping: whether it may go
    /// on; if not, it stores `before` back (module docs).
    fn stepping_unless_asked(&self, before: u8) -> bool {
        // Between the store of Stepping and the read of `asked`; pairs with the heavy barrier
        // in `take_over`.
        barrier::light();
        // Relaxed: a request is all this reads; the device reads the ring only after it reads
        // a phase the queue process published with Release.
        if self.asked.load(Ordering::Relaxed) == NOT_ASKED {
            return true;
        }
        // Release pairs with the device's Acquire read: it may be waiting for this phase to
        // end, and reads the ring (Idle) or the running fields (Working) once it sees it.
        self.state.store(before, Ordering::Release);
        false
    }

    /// The device takes the queue over (shutdown only, from one thread): Idle, or Working with
    /// what runs; Stepping when a drain is in its bookkeeping (ask again); Abandoned when an
    /// earlier call took it over.
    pub fn take_over(&self) -> TakeOver {
        // Relaxed: only this thread writes `asked` (invariant 1).
        match self.asked.load(Ordering::Relaxed) {
            TAKEN => return TakeOver::Abandoned,
            NOT_ASKED => {
                self.asked.store(ASKED, Ordering::Relaxed);
                // Between the store of `asked` and the read of the phase; pairs with the
                // light barrier of `enter` and `finish_work`. Once is enough: every phase the
                // queue process stored before this barrier is visible to the reads below, so
                // whichever phase they find, the queue process's next `enter` or
                // `finish_work` comes after the barrier and reads `asked`.
                barrier::heavy();
            }
            _ => {}
        }
        // Acquire pairs with the Release of `leave`, `start_work` and a refused `enter` or
        // `finish_work`: the ring's state (and, for Working, the running fields) as the queue
        // process last left it.
        let taken = match self.state.load(Ordering::Acquire) {
            STEPPING => return TakeOver::Stepping,
            WORKING => TakeOver::Stuck(Running {
                tag: self.tag.load(Ordering::Relaxed),
                worker: self.worker.load(Ordering::Relaxed),
                since_ns: self.since_ns.load(Ordering::Relaxed),
            }),
            _ => TakeOver::Idle,
        };
        self.asked.store(TAKEN, Ordering::Relaxed);
        taken
    }
}

// Not under loom: loom's atomics work only inside `loom::model` (the model is
// `tests/loom_ownership.rs`).
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const WORK: Running = Running { tag: 7, worker: 1, since_ns: 100 };

    #[test]
    fn a_drain_cycles_through_its_phases() {
        let phase = RingOwnership::new();
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
        let phase = RingOwnership::new();
        assert!(phase.enter());
        phase.start_work(WORK);
        assert_eq!(phase.take_over(), TakeOver::Stuck(WORK));
        assert!(!phase.finish_work());
        assert!(!phase.enter());
    }
}

//! Who may touch a queue's ring: its queue process, or — once, at shutdown — the device
//! taking the queue over, even from a worker stuck in an operation's work.
//!
//! ```text
//!            enter (a drain starts)            start_work (user work begins)
//!   Idle ───────────────────────────► Stepping ─────────────────────────────► Working
//!    ▲  ◄─────────────────────────────   │     ◄─────────────────────────────    │
//!    │        leave (the drain ends)     │      finish_work (the work returned)  │
//!    │                                   │                                       │
//!    └──────── take_over ───────► Abandoned ◄──────────── take_over ─────────────┘
//! ```
//!
//! Invariants:
//! 1. Only the queue process (one drainer at a time: it is an immediate process) moves the
//!    phase out of Idle, Stepping or Working, except `take_over`, which moves Idle or Working
//!    to Abandoned and is final: a drain that finds Abandoned touches nothing.
//! 2. In Idle the queue process holds no reference into the ring, so after taking over an
//!    Idle queue the device owns the whole ring. `leave` (Release) pairs with the Acquire of
//!    `take_over`'s exchange: everything the last drain wrote is visible to the device.
//! 3. In Working the queue process is running the head operation's work and holds no
//!    reference to its slot (it copied what the work needs), so the device may read the head
//!    operation's signals and fail them while the work runs on; the worker, when the work
//!    returns, finds Abandoned in `finish_work` and stops without touching anything else.
//!    `start_work` (Release) publishes the ring's state before the work, for the same reason.
//! 4. Stepping is short bookkeeping (no user work): the device waits it out, within a bound.

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

const IDLE: u8 = 0;
const STEPPING: u8 = 1;
const WORKING: u8 = 2;
const ABANDONED: u8 = 3;

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

/// The phase word and what is running; one per queue.
#[derive(Debug)]
pub(crate) struct QueuePhase {
    state: AtomicU8,
    tag: AtomicU64,
    worker: AtomicUsize,
    since_ns: AtomicU64,
}

impl QueuePhase {
    pub(crate) fn new() -> QueuePhase {
        QueuePhase {
            state: AtomicU8::new(IDLE),
            tag: AtomicU64::new(0),
            worker: AtomicUsize::new(0),
            since_ns: AtomicU64::new(0),
        }
    }

    /// Idle → Stepping, at the start of a drain; `false` when the queue was taken over.
    pub(crate) fn enter(&self) -> bool {
        // Acquire pairs with nothing the device writes before taking over (a taken-over queue
        // is never entered again); it orders this drain after the previous drain's `leave`,
        // which the executor already does, so Relaxed would do — Acquire keeps it obvious.
        self.state.compare_exchange(IDLE, STEPPING, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Stepping → Idle, at the end of a drain that was not taken over.
    pub(crate) fn leave(&self) {
        // Release pairs with the Acquire exchange in `take_over` (invariant 2).
        self.state.store(IDLE, Ordering::Release);
    }

    /// Stepping → Working, before the head operation's work runs.
    pub(crate) fn start_work(&self, running: Running) {
        self.tag.store(running.tag, Ordering::Relaxed);
        self.worker.store(running.worker, Ordering::Relaxed);
        self.since_ns.store(running.since_ns, Ordering::Relaxed);
        // Release pairs with the Acquire exchange in `take_over` (invariant 3): the ring's
        // state and the fields above are visible to a device that takes over during the work.
        self.state.store(WORKING, Ordering::Release);
    }

    /// Working → Stepping, after the work returned; `false` when the queue was taken over
    /// meanwhile (the caller must then touch nothing of the queue).
    pub(crate) fn finish_work(&self) -> bool {
        // Acquire: a successful exchange follows the device's decision not to take over, and
        // the drain goes on owning the ring.
        self.state.compare_exchange(WORKING, STEPPING, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Idle or Working → Abandoned: the device takes the queue over (shutdown only).
    pub(crate) fn take_over(&self) -> TakeOver {
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if state == STEPPING {
                return TakeOver::Stepping;
            }
            if state == ABANDONED {
                return TakeOver::Abandoned;
            }
            // Acquire pairs with the Release of `leave` or `start_work`: the ring's state (and,
            // for Working, the running fields) as the queue process last left it.
            if self
                .state
                .compare_exchange(state, ABANDONED, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            if state == IDLE {
                return TakeOver::Idle;
            }
            // Frozen now: the queue process cannot start other work (its `finish_work` fails),
            // so these are the fields of the work the exchange caught.
            return TakeOver::Stuck(Running {
                tag: self.tag.load(Ordering::Relaxed),
                worker: self.worker.load(Ordering::Relaxed),
                since_ns: self.since_ns.load(Ordering::Relaxed),
            });
        }
    }
}

#[cfg(test)]
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

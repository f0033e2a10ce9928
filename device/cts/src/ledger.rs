//! What the cases observe of every operation: when it started, every time it finished (a
//! driver that completes an operation twice shows up as two finishes), and its speculation
//! report.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use causeway_core::speculation::Dependence;
use causeway_device::{Observer, OpEvent, OpStatus, QueueId};

/// One operation as observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    /// When it started (nanoseconds on the device clock), if it did.
    pub started_ns: Option<u64>,
    /// Every finish reported, in order: exactly one for a driver that keeps the contract.
    pub finishes: Vec<(OpStatus, u64)>,
    /// Its speculation report: why it depended on rejected work, and whether it had started.
    pub speculative: Option<(Dependence, bool)>,
}

impl Seen {
    /// Its one status; panics naming `what` unless it finished exactly once.
    pub fn status(&self, what: &str) -> OpStatus {
        match self.finishes[..] {
            [(status, _)] => status,
            ref finishes => {
                panic!("{what}: expected to finish exactly once, finished {finishes:?}")
            }
        }
    }

    /// When it finished (its one finish).
    pub fn finished_ns(&self, what: &str) -> u64 {
        self.status(what);
        self.finishes[0].1
    }
}

/// The observer every case's device reports to.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    ops: Mutex<Ops>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Ops {
    by_op: HashMap<(usize, u64), Seen>,
    finishes: u64,
}

impl Ledger {
    fn lock(&self) -> MutexGuard<'_, Ops> {
        // Each update is one map entry's field; a panicking case thread leaves it consistent.
        self.ops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What was seen of the operation tagged `tag` on `queue` (nothing yet: the default).
    pub fn seen(&self, queue: QueueId, tag: u64) -> Seen {
        self.lock().by_op.get(&(queue.index(), tag)).cloned().unwrap_or_default()
    }

    /// Every operation seen, by `(queue index, tag)`.
    pub fn all(&self) -> HashMap<(usize, u64), Seen> {
        self.lock().by_op.clone()
    }

    /// Finish events so far, over every operation.
    pub fn finishes(&self) -> u64 {
        self.lock().finishes
    }

    /// Waits until at least `count` finish events were reported; panics naming `what` after
    /// `budget`.
    pub fn wait_for_finishes(&self, count: u64, budget: Duration, what: &str) {
        let deadline = Instant::now() + budget;
        let mut ops = self.lock();
        while ops.finishes < count {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{what}: {} of {count} operations finished", ops.finishes);
            ops = self.changed.wait_timeout(ops, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Waits until the operation tagged `tag` on `queue` started; panics naming `what` after
    /// `budget`.
    pub fn wait_for_start(&self, queue: QueueId, tag: u64, budget: Duration, what: &str) {
        let deadline = Instant::now() + budget;
        let mut ops = self.lock();
        while ops.by_op.get(&(queue.index(), tag)).and_then(|seen| seen.started_ns).is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{what}: it never started");
            ops = self.changed.wait_timeout(ops, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

impl Observer for Ledger {
    fn op_event(&self, observed: causeway_device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let queue = observed.id.index();
        let mut ops = self.lock();
        let seen = ops.by_op.entry((queue, tag)).or_default();
        match event {
            OpEvent::Started { at_ns, .. } => seen.started_ns = Some(at_ns),
            OpEvent::Speculative { dependence, started, .. } => {
                seen.speculative = Some((dependence, started));
            }
            OpEvent::Finished { status, at_ns, .. } => {
                seen.finishes.push((status, at_ns));
                ops.finishes += 1;
            }
            _ => {}
        }
        drop(ops);
        self.changed.notify_all();
    }
}

//! A property test of the whole causal core with failures at every moment: queues (each a
//! [`QueueClock`] and a ring run in order), semaphores, operations whose waits are resolved,
//! imported and armed as the device layer does it, and, between any two steps, external
//! failures of a timeline, failing work, cancellations, and a shutdown that abandons what is
//! left. Every operation is checked against the truth when it starts and when it ends:
//!
//! - **knowledge is true**: every point its frontier names, but its own, belongs to an
//!   operation that has already ended — so no wait it elided, and nothing it imported, is
//!   ahead of what really happened;
//! - **failure is never skipped**: an operation that runs has no wait on a value that failed,
//!   whichever way the wait was resolved, and at the end of the run no wait of an operation
//!   that ran ok is on a failed value;
//! - **nothing hangs**: once every timeline has failed, every operation ends — but one whose
//!   wait came before its signal and only work queued behind it signals (a deadlocked
//!   program: a failure does not release it, since it may wait for that very work), which
//!   a shutdown ends — and no timepoint is left armed.
//!
//! The simulated queue keeps the device layer's rules (`causeway_device`'s queue process):
//! an operation runs when it is the head of its queue and every wait armed on the host has
//! fired; one doomed at submission, with a failed wait or cancelled does not run, but ends —
//! retires, failing or cancelling what it signals — only once its armed waits have fired too,
//! except those of a cancelled operation that no live signal covers (they imported nothing).

use std::boxed::Box;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::vec::Vec;

use proptest::prelude::*;

use crate::axis::{Axis, Domain};
use crate::frontier::{Frontier, Point};
use crate::queue::{self, Capabilities, QueueClock, Resolution, WaitError};
use crate::scope::{Endpoint, Scope};
use crate::semaphore::{Arm, Failure, Notify, Outcome, Semaphore, Timepoint};

const QUEUES: usize = 3;
const SEMAPHORES: usize = 3;

type Sem = Semaphore<64, 8>;

const HERE: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

/// An operation's wait gate: armed waits not yet fired, and the first failure they reported.
#[derive(Default)]
struct Gate {
    pending: AtomicUsize,
    failure: AtomicU64,
}

impl Notify for Gate {
    fn notify(&self, outcome: Outcome) {
        if let Err(failure) = outcome {
            let _ = self.failure.compare_exchange(
                0,
                failure.to_word(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        self.pending.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Gate {
    fn failure(&self) -> Option<Failure> {
        Failure::from_word(self.failure.load(Ordering::Relaxed))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    Ran { ok: bool },
    Failed,
    Cancelled,
}

struct Op {
    point: Point,
    frontier: Frontier<8>,
    /// Whether a wait was on a value no signal had been submitted for (wait-before-signal):
    /// only such a wait can leave an operation stuck, on work that was queued behind it.
    waits_before_signal: bool,
    /// Semaphore, value, and how the wait was resolved (`None`: its semaphore had failed).
    waits: Vec<(usize, u64, Option<Resolution>)>,
    signals: Vec<(usize, u64)>,
    doomed: Option<Failure>,
    work_fails: bool,
    cancelled: bool,
    /// The waits armed on the host: semaphore, value, timepoint (before `gate`, which they
    /// point at, so they are dropped first).
    armed: Vec<(usize, u64, Pin<Box<Timepoint<'static>>>)>,
    /// Shared, not boxed: moving a box would claim its contents afresh, while the timepoints
    /// point at it.
    gate: Arc<Gate>,
    ended: Option<Ended>,
}

#[derive(Clone, Debug)]
enum Action {
    /// Submits an operation: each wait is on a semaphore and how far from its newest
    /// submitted value (0: one older, 1: the newest, 2: one not signalled yet).
    Submit { queue: usize, waits: Vec<(usize, u8)>, signals: Vec<usize>, fails: bool },
    /// Lets a queue run (or end) its head operation, if it may.
    Step(usize),
    /// Fails a timeline from outside its signallers.
    Fail(usize),
    /// Cancels an operation (by index among those submitted) if it has not started.
    Cancel(usize),
}

fn action() -> impl Strategy<Value = Action> {
    let submit = (
        0..QUEUES,
        proptest::collection::vec((0..SEMAPHORES, 0u8..3), 0..3),
        proptest::collection::vec(0..SEMAPHORES, 0..3),
        proptest::bool::weighted(0.15),
    )
        .prop_map(|(queue, waits, signals, fails)| Action::Submit {
            queue,
            waits,
            signals,
            fails,
        });
    prop_oneof![
        4 => submit,
        5 => (0..QUEUES).prop_map(Action::Step),
        1 => (0..SEMAPHORES).prop_map(Action::Fail),
        2 => (0usize..64).prop_map(Action::Cancel),
    ]
}

struct World {
    semaphores: Vec<Sem>,
    clocks: Vec<QueueClock<8>>,
    rings: Vec<VecDeque<usize>>,
    ops: Vec<Op>,
}

impl World {
    fn new() -> World {
        World {
            semaphores: (0..SEMAPHORES).map(|_| Sem::new(0, Scope::DeviceLocal, HERE)).collect(),
            clocks: (0..QUEUES)
                .map(|q| {
                    let axis = Axis::new(0, Domain::Queue, q as u64 + 1);
                    QueueClock::new(axis, HERE, Capabilities { wait_before_signal: true })
                })
                .collect(),
            rings: (0..QUEUES).map(|_| VecDeque::new()).collect(),
            ops: Vec::new(),
        }
    }

    fn submit(&mut self, queue: usize, waits: &[(usize, u8)], signals: &[usize], fails: bool) {
        let newest = |s: &Sem| s.with_history(|h| h.submitted());
        let mut submission = self.clocks[queue].begin();
        let mut resolved = Vec::new();
        let mut waits_before_signal = false;
        for &(s, distance) in waits {
            let newest = newest(&self.semaphores[s]);
            let value = (newest + u64::from(distance)).saturating_sub(1).max(1);
            waits_before_signal |= value > newest;
            let resolution = match submission.wait(&self.semaphores[s], value) {
                Ok(resolution) => Some(resolution.resolution),
                Err(WaitError::Failed(_)) => None,
                Err(error) => panic!("every semaphore reaches every queue: {error}"),
            };
            resolved.push((s, value, resolution));
        }
        let mut signalled: Vec<usize> = signals.to_vec();
        signalled.sort_unstable();
        signalled.dedup();
        let values: Vec<(usize, u64)> =
            signalled.iter().map(|&s| (s, newest(&self.semaphores[s]) + 1)).collect();
        let semaphores = &self.semaphores;
        let committed =
            submission.commit_signalling(values.iter().map(|&(s, v)| (&semaphores[s], v)));
        let Ok(submitted) = committed else { return };
        let gate: Arc<Gate> = Arc::default();
        // SAFETY: the gate stays in its allocation, which the operation keeps, for as long as
        // the operation's timepoints (dropped before it, see `Op`) may call it; the world's
        // semaphores never call a timepoint after it fired or was unlinked.
        let notify: &'static Gate = unsafe { &*Arc::as_ptr(&gate) };
        let mut armed = Vec::new();
        if submitted.failure.is_none() {
            for &(s, value, resolution) in &resolved {
                if !matches!(resolution, Some(Resolution::DeviceWait | Resolution::Held)) {
                    continue;
                }
                let timepoint = Box::pin(Timepoint::new(notify));
                gate.pending.fetch_add(1, Ordering::Relaxed);
                // SAFETY: the timepoint is pinned in its box, which the operation keeps until
                // the world ends; the semaphores, dropped first, touch it no more then.
                match unsafe { self.semaphores[s].arm(timepoint.as_ref(), value) } {
                    Ok(Arm::Armed) => armed.push((s, value, timepoint)),
                    Ok(Arm::Ready(outcome)) => gate.notify(outcome),
                    Err(busy) => panic!("a fresh timepoint is idle: {busy}"),
                }
            }
        }
        self.rings[queue].push_back(self.ops.len());
        self.ops.push(Op {
            point: submitted.point,
            frontier: submitted.frontier,
            waits_before_signal,
            waits: resolved,
            signals: values,
            doomed: submitted.failure,
            work_fails: fails,
            cancelled: false,
            gate,
            armed,
            ended: None,
        });
    }

    /// The operation whose point is `point`, if it is one of the world's.
    fn op_at(&self, point: Point) -> Option<&Op> {
        self.ops.iter().find(|op| op.point == point)
    }

    /// Everything `op`'s frontier names but itself has ended.
    fn check_knowledge(&self, index: usize, moment: &str) -> Result<(), TestCaseError> {
        let op = &self.ops[index];
        for point in op.frontier.iter().filter(|&point| point.axis != op.point.axis) {
            // Knowing epoch e of a queue means knowing every epoch up to it.
            for epoch in 1..=point.epoch {
                let named = self.op_at(Point::new(point.axis, epoch));
                let named = named.ok_or_else(|| TestCaseError::fail("a point of no operation"))?;
                prop_assert!(
                    named.ended.is_some(),
                    "op {:?} {} while {:?}, which its frontier {:?} names, has not ended",
                    op.point,
                    moment,
                    named.point,
                    op.frontier
                );
            }
        }
        Ok(())
    }

    /// Runs or ends the head of `queue` if it may; whether it did.
    fn step(&mut self, queue: usize) -> Result<bool, TestCaseError> {
        let Some(&index) = self.rings[queue].front() else { return Ok(false) };
        let op = &self.ops[index];
        if op.cancelled {
            // A wait no live signal covers imported nothing: released.
            for (s, value, timepoint) in &op.armed {
                if !timepoint.is_done()
                    && !self.semaphores[*s].is_live_at(*value)
                    && self.semaphores[*s].cancel(timepoint)
                        == crate::semaphore::Cancelled::Unlinked
                {
                    op.gate.pending.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        if op.gate.pending.load(Ordering::Relaxed) != 0 {
            return Ok(false);
        }
        // Every wait, elided and satisfied ones too: their signals have ended by now.
        let failed_wait =
            op.waits.iter().find_map(|&(s, value, _)| self.semaphores[s].failure_for(value));
        let failure = op.doomed.or(op.gate.failure()).or(failed_wait);
        let ended = if op.cancelled {
            Ended::Cancelled
        } else if failure.is_some() {
            Ended::Failed
        } else {
            self.check_knowledge(index, "started")?;
            Ended::Ran { ok: !op.work_fails }
        };
        let result = match ended {
            Ended::Ran { ok: true } => Ok(()),
            Ended::Ran { ok: false } => Err(Failure::Application(2)),
            Ended::Failed => Err(failure.unwrap_or(Failure::Aborted)),
            Ended::Cancelled => Err(Failure::Cancelled),
        };
        self.check_knowledge(index, "ended")?;
        let signals = op.signals.iter().map(|&(s, v)| (&self.semaphores[s], v));
        queue::retire(signals, result);
        self.ops[index].ended = Some(ended);
        self.rings[queue].pop_front();
        Ok(true)
    }

    fn cancel(&mut self, which: usize) {
        if self.ops.is_empty() {
            return;
        }
        let index = which % self.ops.len();
        let op = &mut self.ops[index];
        if op.ended.is_some() {
            return;
        }
        op.cancelled = true;
        for &(s, value) in &op.signals {
            // Refused where the retirement decides instead (a failed timeline).
            let _ = self.semaphores[s].mark_cancelled(value);
        }
    }

    /// Whether the operation at `index`, the head of its queue, waits (directly, or through
    /// the live signal of another stuck head) on a value it waited for before anything
    /// signalled it: only that deadlocks, and a failure does not release it.
    fn stuck_on_a_deadlock(&self, index: usize) -> bool {
        let mut seen = Vec::new();
        let mut at = index;
        loop {
            let op = &self.ops[at];
            if op.waits_before_signal {
                return true;
            }
            if seen.contains(&at) {
                return false;
            }
            seen.push(at);
            // The live signal its first armed wait still waits on: that signaller is stuck too.
            let signaller =
                op.armed.iter().filter(|(_, _, t)| !t.is_done()).find_map(|&(s, v, _)| {
                    let origin = self.semaphores[s]
                        .with_history(|h| h.iter().find(|e| e.value >= v).and_then(|e| e.origin))?;
                    self.ops.iter().position(|op| op.point == origin)
                });
            match signaller {
                // A signaller queued behind a stuck head: its own head is what blocks it.
                Some(next) => {
                    let queue = self.rings.iter().find(|ring| ring.contains(&next));
                    match queue.and_then(|ring| ring.front()) {
                        Some(&head) => at = head,
                        None => return false,
                    }
                }
                None => return false,
            }
        }
    }

    /// Shutdown: every operation still queued is abandoned — its armed waits unlinked, its
    /// signals cancelled — without waiting for anything.
    fn shut_down(&mut self) {
        for queue in 0..QUEUES {
            while let Some(index) = self.rings[queue].pop_front() {
                let op = &mut self.ops[index];
                for (s, _, timepoint) in &op.armed {
                    self.semaphores[*s].cancel(timepoint);
                }
                let signals = op.signals.iter().map(|&(s, v)| (&self.semaphores[s], v));
                queue::retire(signals, Err(Failure::Cancelled));
                op.ended = Some(Ended::Cancelled);
            }
        }
    }

    /// Steps every queue until none can move.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        loop {
            let mut moved = false;
            for queue in 0..QUEUES {
                moved |= self.step(queue)?;
            }
            if !moved {
                return Ok(());
            }
        }
    }
}

proptest! {
    // Four times the default cases (a case takes well under a millisecond): a cancellation
    // that meets a reach of a later value is rarer than the rest. Under Miri, which interprets
    // every instruction (a case takes seconds there), two: enough for it to look at the unsafe
    // list walks with a real mix of arms, cuts and cancels.
    #![proptest_config(proptest::test_runner::Config {
        cases: if cfg!(miri) { 2 } else { crate::testing::proptest_config().cases * 4 },
        ..crate::testing::proptest_config()
    })]

    #[test]
    fn failure_never_teaches_what_did_not_happen(
        actions in proptest::collection::vec(action(), 1..60),
        shut_down in proptest::bool::weighted(0.2),
    ) {
        let mut world = World::new();
        for action in actions {
            match action {
                Action::Submit { queue, waits, signals, fails } => {
                    world.submit(queue, &waits, &signals, fails)
                }
                Action::Step(queue) => {
                    world.step(queue)?;
                }
                Action::Fail(s) => {
                    world.semaphores[s].fail(Failure::Application(1));
                }
                Action::Cancel(which) => world.cancel(which),
            }
        }
        world.drain()?;
        if shut_down {
            world.shut_down();
        }
        // Whatever still waits, waits on a value nobody will signal, or on one only work
        // queued behind it signals (a wait before its signal, which deadlocks): failing every
        // timeline ends the first, and then everything but the second ends.
        for semaphore in &world.semaphores {
            semaphore.fail(Failure::Aborted);
        }
        world.drain()?;
        for queue in 0..QUEUES {
            if let Some(&head) = world.rings[queue].front() {
                prop_assert!(world.stuck_on_a_deadlock(head), "op {:?} is stuck", world.ops[head].point);
            }
        }
        // A failure does not release such a wait (it may wait for that very work to end):
        // a shutdown does.
        world.shut_down();
        for op in &world.ops {
            prop_assert!(op.ended.is_some(), "op {:?} never ended", op.point);
            prop_assert!(op.armed.iter().all(|(_, _, timepoint)| !timepoint.is_busy()));
            if op.ended == Some(Ended::Ran { ok: true }) {
                for &(s, value, resolution) in &op.waits {
                    prop_assert_eq!(
                        world.semaphores[s].failure_for(value),
                        None,
                        "op {:?} ran ok on a failed value ({:?})",
                        op.point,
                        resolution
                    );
                }
            }
        }
    }
}

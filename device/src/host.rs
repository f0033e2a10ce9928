//! The host as a participant in a device's causal graph: a timeline of its own, whose steps
//! wait on device semaphores, run on the calling thread, and signal with everything they
//! learned — the four steps every queue operation takes (`causeway_core::queue`: begin,
//! resolve the waits, commit the signals, retire), for code that is not a queue: a scenario's
//! host steps, a rank's host thread announcing to other ranks, an application thread that
//! produces input for the device.
//!
//! ```text
//!  HostTimeline::step ──► HostStep::wait (resolve, import) ──► HostStep::block_until (reach)
//!        │                                                              │
//!        │                         the host's own work, on this thread ◄┘
//!        ▼
//!  HostStep::commit(signals) ──► CommittedStep { point, frontier } ──► CommittedStep::finish
//!                                 (announce it to other ranks here)      (complete or fail)
//! ```
//!
//! A step fails — and fails everything it signals, with the same value every waiter sees —
//! when a semaphore it waits on failed before reaching the value (at resolution or while the
//! host blocked), when a timeline it signals had already failed, or when the host's own work
//! reports a failure. The first failure wins.

use std::time::Instant;

use causeway_core::axis::Axis;
use causeway_core::frontier::{Frontier, Point};
use causeway_core::queue::{
    self, Capabilities, QueueClock, SignalRefused, Submission, WaitError, WaitResolution,
};
use causeway_core::scope::Endpoint;
use causeway_core::semaphore::Failure;
use causeway_runtime::blocking::{wait_until, HostWaitError};
use causeway_runtime::FRONTIER_CAPACITY;

use crate::limits::DeviceSemaphore;

/// A host thread's timeline: an axis of its own and the clock of what its steps learned. One
/// step at a time ([`step`](Self::step) borrows it).
#[derive(Debug)]
pub struct HostTimeline {
    clock: QueueClock<FRONTIER_CAPACITY>,
}

impl HostTimeline {
    /// A timeline on `axis` (allocated for the host, e.g. with
    /// [`allocate_axis`](crate::allocate_axis) in `Domain::Host`) at `endpoint`. The host can
    /// wait for a value whose signal is not submitted yet: it blocks until it is.
    pub fn new(axis: Axis, endpoint: Endpoint) -> HostTimeline {
        let capabilities = Capabilities { wait_before_signal: true };
        HostTimeline { clock: QueueClock::new(axis, endpoint, capabilities) }
    }

    /// Its axis.
    pub fn axis(&self) -> Axis {
        self.clock.axis()
    }

    /// What it knows: every step committed so far and what their waits imported.
    pub fn frontier(&self) -> &Frontier<FRONTIER_CAPACITY> {
        self.clock.frontier()
    }

    /// Starts the next step.
    pub fn step(&mut self) -> HostStep<'_> {
        HostStep { submission: self.clock.begin(), failure: None }
    }
}

/// One step of a [`HostTimeline`] between its start and its commit.
#[derive(Debug)]
pub struct HostStep<'t> {
    submission: Submission<'t, FRONTIER_CAPACITY>,
    /// The first failure met: a wait on a failed semaphore (at resolution or while the host
    /// blocked), or the host's own (see [`fail`](Self::fail)).
    failure: Option<Failure>,
}

/// A host step blocked past its deadline for a value not reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepTimedOut {
    /// The semaphore's value when the deadline passed.
    pub value: u64,
}

impl<'t> HostStep<'t> {
    /// Resolves a wait on `semaphore ≥ value`, importing what the value carries: `Ok(None)`
    /// when the semaphore failed before reaching it (the step will fail with that failure),
    /// `Err` for a wait the host may not make (a semaphore whose scope does not reach it).
    pub fn wait(
        &mut self,
        semaphore: &DeviceSemaphore,
        value: u64,
    ) -> Result<Option<WaitResolution>, WaitError> {
        match self.submission.wait(semaphore, value) {
            Ok(resolved) => Ok(Some(resolved)),
            // The submission discards what the step imported: a failed step teaches nothing.
            Err(WaitError::Failed(failure)) => {
                self.fail(failure);
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// Blocks this thread until `semaphore ≥ value` (a wait this step resolved) or `deadline`
    /// passes. A semaphore that fails first fails the step with its failure (`Ok`: the step
    /// goes on, doomed, so that its signals fail rather than hang).
    pub fn block_until(
        &mut self,
        semaphore: &DeviceSemaphore,
        value: u64,
        deadline: Option<Instant>,
    ) -> Result<(), StepTimedOut> {
        match wait_until(semaphore, value, deadline) {
            Ok(_) => Ok(()),
            Err(HostWaitError::Failed(failure)) => {
                self.fail(failure);
                Ok(())
            }
            Err(_) => Err(StepTimedOut { value: semaphore.value() }),
        }
    }

    /// Fails the step with `failure` unless it failed already: a wait reached elsewhere (on
    /// another rank) that failed, or the host's own work.
    pub fn fail(&mut self, failure: Failure) {
        self.failure = self.failure.or(Some(failure));
    }

    /// The failure the step is doomed to, if a wait failed or [`fail`](Self::fail) was called:
    /// its work should not run.
    pub fn failed(&self) -> Option<Failure> {
        self.failure
    }

    /// Records the step's `signals` (all or none; see `causeway_core::queue`), then assigns it
    /// the timeline's next epoch. On a refusal nothing is recorded or committed, and the
    /// timeline is as it was before the step: a new step may resolve the same waits and
    /// commit again (after waiting for room, say).
    pub fn commit<'s>(
        self,
        signals: &'s [(&'s DeviceSemaphore, u64)],
    ) -> Result<CommittedStep<'s>, SignalRefused> {
        let submitted = self.submission.commit_signalling(signals.iter().copied())?;
        Ok(CommittedStep {
            point: submitted.point,
            frontier: submitted.frontier,
            signals,
            // A signal on a failed timeline dooms the step too (`Submitted::failure`).
            failure: self.failure.or(submitted.failure),
        })
    }

    /// Assigns the step the next epoch without recording any signal (its signals, if any,
    /// come from outside the scheduler's knowledge: untracked). Its failure, if any, is
    /// returned for the caller to act on.
    pub fn commit_untracked(self) -> (Point, Frontier<FRONTIER_CAPACITY>, Option<Failure>) {
        let submitted = self.submission.commit();
        (submitted.point, submitted.frontier, self.failure.or(submitted.failure))
    }
}

/// A committed host step: its place on the timeline and its frontier (what other ranks are
/// told with its signals), still to be finished.
#[derive(Debug)]
#[must_use = "a committed step's signals stay pending until it is finished"]
pub struct CommittedStep<'s> {
    /// The step's own point on the host timeline.
    pub point: Point,
    /// Everything it knows, itself included.
    pub frontier: Frontier<FRONTIER_CAPACITY>,
    signals: &'s [(&'s DeviceSemaphore, u64)],
    failure: Option<Failure>,
}

impl CommittedStep<'_> {
    /// The failure the step ends with whatever its work does, if one is decided already.
    pub fn failure(&self) -> Option<Failure> {
        self.failure
    }

    /// Ends the step with the host's `result`: completes its signals, or fails them with the
    /// first failure — the step's own (a failed wait or signalled timeline), else `result`'s.
    /// Returns how it ended.
    pub fn finish(self, result: Result<(), Failure>) -> Result<(), Failure> {
        let outcome = match self.failure {
            Some(failure) => Err(failure),
            None => result,
        };
        queue::retire(self.signals.iter().copied(), outcome);
        outcome
    }
}

//! Queue clocks: how a queue's knowledge advances and how each wait is resolved.
//!
//! Every queue owns a [`QueueClock`]: its axis, the epoch of its last submitted operation and
//! its frontier (what it knows has happened, or will have happened by the time its next
//! operation runs — FIFO order makes the two the same). Submitting an operation:
//!
//! 1. starts from the queue frontier ([`QueueClock::begin`]);
//! 2. resolves each wait ([`Submission::wait`]) into exactly one [`Resolution`], importing the
//!    frontier of the signal that first reached the waited value;
//! 3. adds the queue's own `(axis, epoch + 1)` ([`Submission::commit`]); the result is the
//!    operation's frontier, the queue's new frontier and what its signals attach.
//!
//! A wait on `S ≥ v` is discharged exactly by knowing the one operation that first signalled
//! `S` to ≥ `v` (its origin point), never by the possibly-evicted imported frontier. So the
//! elision test stays exact however full frontiers get.

use core::fmt;

use crate::axis::Axis;
use crate::collective::CollectiveRound;
use crate::fence::Fence;
use crate::frontier::{Frontier, Point};
use crate::scope::Endpoint;
use crate::semaphore::{Failure, HistorySlots, Lookup, Semaphore, SignalError};

/// How one wait was resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Resolution {
    /// The queue already knows the signalling operation (FIFO or transitive knowledge): no
    /// primitive at all.
    Elided,
    /// The value is already reached: import, no device wait.
    Satisfied,
    /// A native primitive orders it (timeline wait, event wait, ring wait descriptor).
    DeviceWait,
    /// The backend cannot wait before the signal exists: the operation stays pending on the
    /// host until the signal is submitted, then resolves again.
    Held,
}

impl Resolution {
    /// Lower-case name, as reports print it.
    pub const fn name(self) -> &'static str {
        match self {
            Resolution::Elided => "elided",
            Resolution::Satisfied => "satisfied",
            Resolution::DeviceWait => "device",
            Resolution::Held => "held",
        }
    }
}

/// The outcome of resolving one wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitResolution {
    /// Which of the four resolutions applied.
    pub resolution: Resolution,
    /// The waited value lies in an external taint window: nothing exact was imported.
    pub tainted: bool,
    /// The exact history entry aged out; a later, still true, one was imported.
    pub aged_out: bool,
}

/// Why a wait could not be resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// The semaphore's scope does not reach this queue.
    OutOfScope,
    /// The semaphore failed; the operation must fail and fail what it signals.
    Failed(Failure),
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::OutOfScope => f.write_str("semaphore scope does not reach this queue"),
            WaitError::Failed(failure) => write!(f, "waited semaphore failed: {failure}"),
        }
    }
}

impl core::error::Error for WaitError {}

/// What the queue's backend can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// A wait may be enqueued before its signal is submitted (timeline semaphores); without
    /// it (binary events) such waits are [`Resolution::Held`].
    pub wait_before_signal: bool,
}

/// Running totals of wait resolutions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolutionCounts {
    /// Waits elided by knowledge.
    pub elided: u64,
    /// Waits on values already reached.
    pub satisfied: u64,
    /// Waits needing a device primitive.
    pub device: u64,
    /// Waits held on the host.
    pub held: u64,
    /// Waits that hit an external taint window.
    pub tainted: u64,
    /// Waits whose exact history entry had aged out.
    pub aged_out: u64,
}

impl ResolutionCounts {
    fn count(&mut self, r: &WaitResolution) {
        match r.resolution {
            Resolution::Elided => self.elided += 1,
            Resolution::Satisfied => self.satisfied += 1,
            Resolution::DeviceWait => self.device += 1,
            Resolution::Held => self.held += 1,
        }
        self.tainted += u64::from(r.tainted);
        self.aged_out += u64::from(r.aged_out);
    }

    /// All waits counted.
    pub fn total(&self) -> u64 {
        self.elided + self.satisfied + self.device + self.held
    }
}

/// What a resolved wait imports, if anything: the signalling operation and its frontier,
/// borrowed from the lookup.
pub type Import<'l, const N: usize> = Option<(Point, &'l Frontier<N>)>;

/// Resolves a wait given what the waiter knows and what the semaphore's history says; returns
/// the resolution and what to import (the origin and its frontier). Pure: no semaphore access.
pub fn resolve<'l, const K: usize, const N: usize>(
    knowledge: &Frontier<K>,
    lookup: &'l Lookup<N>,
    capabilities: Capabilities,
) -> Result<(WaitResolution, Import<'l, N>), WaitError> {
    let exact = |resolution| WaitResolution { resolution, tainted: false, aged_out: false };
    Ok(match *lookup {
        Lookup::Failed(failure) => return Err(WaitError::Failed(failure)),
        Lookup::Initial => (exact(Resolution::Satisfied), None),
        Lookup::Unsignalled if capabilities.wait_before_signal => {
            (exact(Resolution::DeviceWait), None)
        }
        Lookup::Unsignalled => (exact(Resolution::Held), None),
        Lookup::External { reached } => {
            let resolution = if reached { Resolution::Satisfied } else { Resolution::DeviceWait };
            (WaitResolution { resolution, tainted: true, aged_out: false }, None)
        }
        Lookup::Tracked { origin, ref frontier, reached, aged_out } => {
            let resolution = if knowledge.knows(origin) {
                Resolution::Elided
            } else if reached {
                Resolution::Satisfied
            } else {
                Resolution::DeviceWait
            };
            let import = (resolution != Resolution::Elided).then_some((origin, frontier));
            (WaitResolution { resolution, tainted: false, aged_out }, import)
        }
    })
}

/// One queue's causal clock.
#[derive(Clone, Debug)]
pub struct QueueClock<const N: usize = 8> {
    axis: Axis,
    endpoint: Endpoint,
    capabilities: Capabilities,
    epoch: u64,
    frontier: Frontier<N>,
    counts: ResolutionCounts,
}

impl<const N: usize> QueueClock<N> {
    /// A queue with axis `axis` at `endpoint`, no operations yet.
    pub fn new(axis: Axis, endpoint: Endpoint, capabilities: Capabilities) -> QueueClock<N> {
        QueueClock {
            axis,
            endpoint,
            capabilities,
            epoch: 0,
            frontier: Frontier::new(),
            counts: ResolutionCounts::default(),
        }
    }

    /// The queue's axis.
    pub fn axis(&self) -> Axis {
        self.axis
    }

    /// Where the queue sits (for scope checks).
    pub fn endpoint(&self) -> Endpoint {
        self.endpoint
    }

    /// Epoch of the last submitted operation (0 before the first).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What the queue knows.
    pub fn frontier(&self) -> &Frontier<N> {
        &self.frontier
    }

    /// Resolution totals so far.
    pub fn counts(&self) -> ResolutionCounts {
        self.counts
    }

    /// Starts submitting an operation.
    pub fn begin(&mut self) -> Submission<'_, N> {
        Submission { frontier: self.frontier, held: 0, failed: false, clock: self }
    }
}

/// An operation being submitted to a queue: resolve its waits, then [`commit`](Self::commit).
/// Dropping it without committing leaves the queue unchanged except for the counters.
///
/// A wait on a failed semaphore dooms the operation: it will fail without waiting for its
/// other waits (nothing is armed for them), so what they import has not necessarily happened
/// when it runs. Keeping those imports would let the queue's later operations — which only
/// wait for this one — elide waits on work that has not run yet, and miss its failure. So the
/// first failed wait discards every import, and later waits import nothing: a doomed operation
/// knows only what its queue knew.
#[derive(Debug)]
pub struct Submission<'q, const N: usize> {
    clock: &'q mut QueueClock<N>,
    frontier: Frontier<N>,
    held: u32,
    /// A wait failed: imports are discarded (see above).
    failed: bool,
}

impl<const N: usize> Submission<'_, N> {
    /// Resolves a wait on `semaphore ≥ value`, importing what it carries.
    pub fn wait<const H: usize, const M: usize, S: HistorySlots<M>>(
        &mut self,
        semaphore: &Semaphore<H, M, S>,
        value: u64,
    ) -> Result<WaitResolution, WaitError> {
        if !semaphore.admits(&self.clock.endpoint) {
            return Err(WaitError::OutOfScope);
        }
        // The lookup's frontier is merged where it lies: each further move of a frontier is a
        // bulk copy that waits for the previous copy's stores.
        let lookup = semaphore.lookup(value);
        let (resolution, import) = match resolve(&self.frontier, &lookup, self.clock.capabilities) {
            Ok(resolved) => resolved,
            Err(error) => {
                if let WaitError::Failed(_) = error {
                    self.failed = true;
                    self.frontier = self.clock.frontier;
                }
                return Err(error);
            }
        };
        if let (Some((origin, frontier)), false) = (import, self.failed) {
            self.frontier.merge(frontier);
            // The origin is normally inside its own frontier already; it is re-added only
            // when that frontier evicted it.
            if !self.frontier.knows(origin) {
                self.frontier.insert_or_raise(origin.axis, origin.epoch);
            }
        }
        self.held += u32::from(resolution.resolution == Resolution::Held);
        self.clock.counts.count(&resolution);
        Ok(resolution)
    }

    /// Resolves every point of a wait fence, calling `each` with each resolution in order.
    /// Stops at the first error.
    pub fn wait_fence<const K: usize, const H: usize, const M: usize, S: HistorySlots<M>>(
        &mut self,
        fence: &Fence<'_, K, H, M, S>,
        mut each: impl FnMut(&Semaphore<H, M, S>, u64, WaitResolution),
    ) -> Result<(), WaitError> {
        for (semaphore, value) in fence.iter() {
            let resolution = self.wait(semaphore, value)?;
            each(semaphore, value, resolution);
        }
        Ok(())
    }

    /// Marks the operation as a participant of a collective round: one shared entry for all
    /// participants instead of one per participant queue.
    pub fn join_collective(&mut self, round: &CollectiveRound) {
        self.frontier.insert_or_raise(round.point().axis, round.point().epoch);
    }

    /// What the operation knows so far (before its own entry is added).
    pub fn frontier(&self) -> &Frontier<N> {
        &self.frontier
    }

    /// Assigns the operation the next epoch and makes its frontier the queue's.
    pub fn commit(mut self) -> Submitted<N> {
        self.clock.epoch += 1;
        let point = Point::new(self.clock.axis, self.clock.epoch);
        // Raised in place and copied out twice from the same source, rather than through a
        // local: each copy of a copy waits for the stores of the one before.
        self.frontier.insert_or_raise(point.axis, point.epoch);
        self.clock.frontier = self.frontier;
        Submitted { point, frontier: self.frontier, held: self.held }
    }
}

/// A committed operation: its position, its frontier and how many waits are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted<const N: usize> {
    /// The operation's own `(queue axis, epoch)`.
    pub point: Point,
    /// Everything the operation knows, including itself.
    pub frontier: Frontier<N>,
    /// Waits held on the host until their signals are submitted.
    pub held: u32,
}

impl<const N: usize> Submitted<N> {
    /// Records this operation's pending signal of `semaphore` to `value`, checking scope.
    pub fn submit_signal<const H: usize, const M: usize, S: HistorySlots<M>>(
        &self,
        semaphore: &Semaphore<H, M, S>,
        value: u64,
        at: &Endpoint,
    ) -> Result<(), SignalError> {
        if !semaphore.admits(at) {
            return Err(SignalError::OutOfScope);
        }
        semaphore.submit_signal(value, self.point, &self.frontier)
    }

    /// Records pending signals for every point of `fence`. On the first refusal returns the
    /// index of the refused point with the error; earlier points stay recorded.
    pub fn submit_signals<const K: usize, const H: usize, const M: usize, S: HistorySlots<M>>(
        &self,
        fence: &Fence<'_, K, H, M, S>,
        at: &Endpoint,
    ) -> Result<(), (usize, SignalError)> {
        for (index, (semaphore, value)) in fence.iter().enumerate() {
            self.submit_signal(semaphore, value, at).map_err(|e| (index, e))?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::axis::Domain;
    use crate::scope::Scope;

    const TIMELINE: Capabilities = Capabilities { wait_before_signal: true };
    const BINARY_EVENTS: Capabilities = Capabilities { wait_before_signal: false };

    fn endpoint(queue: u64) -> Endpoint {
        Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue }
    }

    fn clock(ordinal: u64, capabilities: Capabilities) -> QueueClock<8> {
        QueueClock::new(Axis::new(0, Domain::Queue, ordinal), endpoint(ordinal), capabilities)
    }

    #[test]
    fn unsignalled_waits_are_device_or_held_by_capability() {
        let s: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let mut q = clock(1, TIMELINE);
        let mut op = q.begin();
        assert_eq!(op.wait(&s, 1).unwrap().resolution, Resolution::DeviceWait);
        let mut cuda_like = clock(2, BINARY_EVENTS);
        let mut op2 = cuda_like.begin();
        assert_eq!(op2.wait(&s, 1).unwrap().resolution, Resolution::Held);
        assert_eq!(op2.commit().held, 1);
        assert_eq!(cuda_like.counts().held, 1);
    }

    #[test]
    fn scope_is_enforced_for_waits_and_signals() {
        let local: Semaphore = Semaphore::new(0, Scope::QueueLocal, endpoint(1));
        let mut other = clock(2, TIMELINE);
        assert_eq!(other.begin().wait(&local, 1), Err(WaitError::OutOfScope));
        let done = other.begin().commit();
        assert_eq!(done.submit_signal(&local, 1, &endpoint(2)), Err(SignalError::OutOfScope));
        let mut own = clock(1, TIMELINE);
        assert!(own.begin().wait(&local, 1).is_ok());
    }

    #[test]
    fn commit_adds_own_epoch_and_advances_the_queue() {
        let mut q = clock(1, TIMELINE);
        let first = q.begin().commit();
        let second = q.begin().commit();
        assert_eq!((first.point.epoch, second.point.epoch), (1, 2));
        assert_eq!(q.frontier().get(q.axis()), Some(2));
        assert_eq!(second.frontier, *q.frontier());
    }

    #[test]
    fn a_failed_wait_discards_what_the_operation_imported() {
        let elsewhere = |queue| Point::new(Axis::new(0, Domain::Queue, queue), 1);
        let pending: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        pending
            .submit_signal(1, elsewhere(5), &Frontier::<8>::from_points([elsewhere(5)]))
            .unwrap();
        let failed: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        failed.fail(Failure::Aborted);
        let later: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        later.signal(1, elsewhere(6), &Frontier::<8>::from_points([elsewhere(6)])).unwrap();

        let mut q = clock(1, TIMELINE);
        let mut doomed = q.begin();
        assert_eq!(doomed.wait(&pending, 1).unwrap().resolution, Resolution::DeviceWait);
        assert!(doomed.frontier().knows(elsewhere(5)));
        assert_eq!(doomed.wait(&failed, 1), Err(WaitError::Failed(Failure::Aborted)));
        assert_eq!(doomed.wait(&later, 1).unwrap().resolution, Resolution::Satisfied);
        let submitted = doomed.commit();
        // Only its own entry: it never waited for queue 5's operation, nor imported queue 6's.
        assert_eq!(submitted.frontier.len(), 1);
        // So the queue's next operation must still wait for queue 5's.
        assert_eq!(q.begin().wait(&pending, 1).unwrap().resolution, Resolution::DeviceWait);
    }

    #[test]
    fn resolve_never_elides_a_tainted_window() {
        let knows_all: Frontier =
            Frontier::from_points([Point::new(Axis::new(0, Domain::Queue, 1), u64::MAX)]);
        let (r, import) =
            resolve(&knows_all, &Lookup::<8>::External { reached: true }, TIMELINE).unwrap();
        assert_eq!(
            r,
            WaitResolution { resolution: Resolution::Satisfied, tainted: true, aged_out: false }
        );
        assert!(import.is_none());
    }
}

//! Queue clocks: how a queue's knowledge advances and how each wait is resolved.
//!
//! Every queue owns a [`QueueClock`]: its axis, the epoch of its last submitted operation and
//! its frontier (what it knows has happened, or will have happened by the time its next
//! operation runs — FIFO order makes the two the same). Submitting an operation:
//!
//! 1. starts from the queue frontier ([`QueueClock::begin`]);
//! 2. resolves each wait ([`Submission::wait`]) into exactly one [`Resolution`], importing the
//!    frontier of the signal that first reached the waited value;
//! 3. adds the queue's own `(axis, epoch + 1)` and records its signals
//!    ([`Submission::commit_signalling`], or [`Submission::commit`] for an operation that
//!    signals nothing); the result is the operation's frontier, the queue's new frontier and
//!    what its signals attach;
//! 4. when the operation has run, [`retire`] completes its signals, or fails them with its
//!    failure.
//!
//! Steps 3 and 4 are the only way device drivers, invocations, host steps and firmware turn an
//! operation's outcome into signals, so the rules below hold for all of them.
//!
//! ## Signals are reserved before the queue commits
//!
//! An operation's signals are all accepted or none is, and nothing is committed when one is
//! refused (out of scope, not advancing, history full): the queue's epoch and frontier stay as
//! they were, and every history holds the signals it held, so the caller may wait for room and
//! submit the same operation again. (A full history may have let its oldest reached entry age
//! out to make room for a reservation, as recording would have: waits on values that old then
//! import the oldest retained entry, counted as aged out, which is looser but still true.)
//!
//! To get there without recording a signal that might have to be taken back, every signal but
//! the last is first *reserved* (its value takes its place and a history slot, but carries
//! nothing yet, so no waiter can import it), then the last is recorded in full with the
//! operation's final frontier — after which nothing can fail — the clock commits, and the
//! reservations are filled. A refusal withdraws the reservations made so far. A
//! recorded signal is never taken back: a waiter may already have imported the operation's
//! position, and a later operation of this queue would reuse it.
//!
//! A signal on a timeline that has already failed is not a refusal: the operation is
//! committed and *doomed*, like one with a failed wait, and fails when it retires (see
//! [`Submitted::failure`]).
//!
//! A wait on `S ≥ v` is discharged exactly by knowing the one operation that first signalled
//! `S` to ≥ `v` (its origin point), never by the possibly-evicted imported frontier. So the
//! elision test stays exact however full frontiers get.
//!
//! ## Failure never teaches what did not happen
//!
//! A point in a queue's frontier says that operation will have *ended* — completed, failed,
//! cancelled, or abandoned: it will not run any more — by the time the queue's next operation
//! starts. That is what an elision trusts, what a buffer's reuse trusts, and what every signal
//! of the queue passes on. The rule that keeps it true whatever fails, and when:
//!
//! **A point enters a queue's knowledge, an operation's frontier or a signal's history only
//! if it will truly have ended before whatever relies on it starts.** Concretely:
//!
//! - a wait on a semaphore that has already failed imports nothing, and dooms the operation;
//!   so does a signal on a failed timeline: a doomed operation knows only what its queue knew
//!   and its own point ([`Submission::commit_signalling`] drops what its waits had imported);
//! - a wait resolved on a pending signal imports it at submission, and the operation then ends
//!   — runs, fails, or is cancelled — only after that wait has ended. A wait never ends
//!   before the signal it waits for has ended, also when the timeline fails meanwhile from
//!   outside its signallers (see "A wait ends after its signal" in
//!   [`semaphore`](crate::semaphore)): an operation whose wait fails ends after the operation
//!   it imported, so the queue's later operations may keep eliding by what it imported;
//! - a wait on a failed value fails its operation however it was resolved — elided,
//!   satisfied, device, held: the runner checks every wait ([`Semaphore::failure_for`]) when
//!   the operation's turn comes, and by then the signal of an elided or satisfied wait has
//!   ended, so the answer is final;
//! - retiring a failed operation ends its signals ([`retire`]): their waiters are told then.
//!
//! A failed operation's reported frontier is therefore everything it imported (all of it has
//! ended by the time it ends), or, when it was doomed at submission, its queue's knowledge and
//! its own point. `core/src/failure_model.rs` checks all of this against the truth with
//! failures, cancellations and a shutdown at every moment.

use core::fmt;
use core::str::FromStr;

use crate::axis::Axis;
use crate::collective::CollectiveRound;
use crate::fence::Fence;
use crate::frontier::{Frontier, Point};
use crate::scope::Endpoint;
use crate::semaphore::{Failure, HistorySlots, Lookup, LookupRef, Semaphore, SignalError};

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
    /// Every resolution, cheapest first.
    pub const ALL: &'static [Resolution] =
        &[Resolution::Elided, Resolution::Satisfied, Resolution::DeviceWait, Resolution::Held];

    /// Lower-case name, as reports and scenario expectations spell it; [`str::parse`] reads it
    /// back.
    pub const fn name(self) -> &'static str {
        match self {
            Resolution::Elided => "elided",
            Resolution::Satisfied => "satisfied",
            Resolution::DeviceWait => "device",
            Resolution::Held => "held",
        }
    }
}

impl FromStr for Resolution {
    type Err = UnknownResolution;

    /// The resolution whose [`name`](Resolution::name) is `name`, exactly.
    fn from_str(name: &str) -> Result<Resolution, UnknownResolution> {
        Resolution::ALL.iter().copied().find(|r| r.name() == name).ok_or(UnknownResolution)
    }
}

/// A name that is not any resolution's [`name`](Resolution::name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnknownResolution;

impl fmt::Display for UnknownResolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown wait resolution (")?;
        for (index, resolution) in Resolution::ALL.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            f.write_str(resolution.name())?;
        }
        f.write_str(")")
    }
}

impl core::error::Error for UnknownResolution {}

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
    /// Counts one resolved wait.
    pub fn count(&mut self, r: &WaitResolution) {
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

/// Adds another tally in, field by field (totals over several queues).
impl core::ops::AddAssign for ResolutionCounts {
    fn add_assign(&mut self, other: ResolutionCounts) {
        self.elided += other.elided;
        self.satisfied += other.satisfied;
        self.device += other.device;
        self.held += other.held;
        self.tainted += other.tainted;
        self.aged_out += other.aged_out;
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
            resolve_tracked(knowledge, origin, frontier, reached, aged_out)
        }
    })
}

/// [`resolve`] for a tracked signal: the operation at `origin`, which knew `frontier`.
fn resolve_tracked<'l, const K: usize, const N: usize>(
    knowledge: &Frontier<K>,
    origin: Point,
    frontier: &'l Frontier<N>,
    reached: bool,
    aged_out: bool,
) -> (WaitResolution, Import<'l, N>) {
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

    /// Resolution totals of every wait resolved so far, including those of submissions
    /// dropped without committing (a caller that retries a refused submission counts its
    /// committed operations itself: [`ResolutionCounts::count`]).
    pub fn counts(&self) -> ResolutionCounts {
        self.counts
    }

    /// Starts submitting an operation.
    pub fn begin(&mut self) -> Submission<'_, N> {
        Submission { frontier: self.frontier, held: 0, failure: None, clock: self }
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
/// knows only what its queue knew. A signal on a failed timeline dooms it the same way, and
/// drops its imports the same way.
#[derive(Debug)]
pub struct Submission<'q, const N: usize> {
    clock: &'q mut QueueClock<N>,
    frontier: Frontier<N>,
    held: u32,
    /// The first failed wait's failure: imports are discarded (see above).
    failure: Option<Failure>,
}

impl<const N: usize> Submission<'_, N> {
    /// Resolves a wait on `semaphore ≥ value`, importing what it carries.
    pub fn wait<const H: usize, const M: usize, S: HistorySlots<M>>(
        &mut self,
        semaphore: &Semaphore<H, M, S>,
        value: u64,
    ) -> Result<WaitResolution, WaitError> {
        self.resolve_wait(semaphore, value, None::<fn(Point) -> bool>)
            .map(|(resolution, _)| resolution)
    }

    /// Resolves a wait on `semaphore ≥ value` for a queue whose device waits are native waits
    /// on the *signalling operation* (a wait on another queue's progress, as a timeline per
    /// hardware queue provides): a wait that would be a [`Resolution::DeviceWait`] stays one
    /// only when its origin is tracked and `native(origin)` says this queue can wait on it
    /// natively; otherwise it is [`Resolution::Held`] (the host holds the operation until the
    /// value is reached). Returns the resolution and, for a device wait, its origin.
    pub fn wait_on_origin<const H: usize, const M: usize, S: HistorySlots<M>>(
        &mut self,
        semaphore: &Semaphore<H, M, S>,
        value: u64,
        native: impl FnOnce(Point) -> bool,
    ) -> Result<(WaitResolution, Option<Point>), WaitError> {
        self.resolve_wait(semaphore, value, Some(native))
    }

    /// [`wait`](Self::wait) when `native` is `None`, else
    /// [`wait_on_origin`](Self::wait_on_origin).
    fn resolve_wait<const H: usize, const M: usize, S: HistorySlots<M>>(
        &mut self,
        semaphore: &Semaphore<H, M, S>,
        value: u64,
        native: Option<impl FnOnce(Point) -> bool>,
    ) -> Result<(WaitResolution, Option<Point>), WaitError> {
        if !semaphore.admits(&self.clock.endpoint) {
            return Err(WaitError::OutOfScope);
        }
        // The lookup's frontier is merged where it lies, in the history, under the semaphore's
        // lock: a copy out of the history (two, returned through the lookups) cost about as
        // much as the merge, and each further move of a frontier is a bulk copy that waits for
        // the previous copy's stores. `native` is asked after the lock is released (it may
        // take the device's locks).
        let capabilities = self.clock.capabilities;
        let resolved = semaphore.with_lookup(value, |lookup| {
            let (resolution, import) = match lookup {
                LookupRef::Tracked { origin, frontier, reached, aged_out } => {
                    resolve_tracked(&self.frontier, origin, frontier, reached, aged_out)
                }
                // No frontier, so nothing to import: resolved as any other answer.
                other => (resolve(&self.frontier, &other.to_owned(), capabilities)?.0, None),
            };
            if let (Some((origin, frontier)), None) = (import, self.failure) {
                self.frontier.merge(frontier);
                // The origin is normally inside its own frontier already; raising it then
                // changes nothing, and re-adds it when that frontier evicted it (cheaper than
                // asking first: a lookup scans every entry, a raise stops at the axis).
                self.frontier.insert_or_raise(origin.axis, origin.epoch);
            }
            Ok((resolution, import.map(|(origin, _)| origin)))
        });
        let (mut resolution, origin) = match resolved {
            Ok(resolved) => resolved,
            Err(error) => {
                if let WaitError::Failed(failure) = error {
                    self.failure = self.failure.or(Some(failure));
                    self.forget_imports();
                }
                return Err(error);
            }
        };
        let mut device_origin = None;
        if let (Resolution::DeviceWait, Some(native)) = (resolution.resolution, native) {
            match origin {
                Some(origin) if native(origin) => device_origin = Some(origin),
                _ => resolution.resolution = Resolution::Held,
            }
        }
        self.held += u32::from(resolution.resolution == Resolution::Held);
        self.clock.counts.count(&resolution);
        Ok((resolution, device_origin))
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

    /// Assigns the operation the next epoch and makes its frontier the queue's, for an
    /// operation that signals nothing.
    pub fn commit(mut self) -> Submitted<N> {
        let point = self.own_point();
        self.seal(point, None)
    }

    /// Records the operation's `signals` (each semaphore and the value it will signal), then
    /// assigns the operation the next epoch and makes its frontier the queue's. Either every
    /// signal is recorded and the operation committed, or — on the first refusal — nothing is:
    /// see the [module documentation](self).
    pub fn commit_signalling<'s, const H: usize, const M: usize, S>(
        mut self,
        signals: impl IntoIterator<Item = (&'s Semaphore<H, M, S>, u64), IntoIter: Clone>,
    ) -> Result<Submitted<N>, SignalRefused>
    where
        S: HistorySlots<M> + 's,
    {
        let signals = signals.into_iter();
        // One signal, the common case: checked and recorded in one step (below, the list is
        // walked once to check scopes, once to count and once each to reserve, record and
        // fill, each step looking its semaphore up again). The size hint says so cheaply for
        // most iterators; others take the general path, which is the same for one signal.
        if let (1, Some(1)) = signals.size_hint() {
            if let Some((semaphore, value)) = signals.clone().next() {
                return self.commit_one(semaphore, value);
            }
        }
        let endpoint = self.clock.endpoint;
        if let Some(index) = signals.clone().position(|(semaphore, _)| !semaphore.admits(&endpoint))
        {
            return Err(SignalRefused { index, error: SignalError::OutOfScope });
        }
        let count = match signals.size_hint() {
            (least, Some(most)) if least == most => least,
            _ => signals.clone().count(),
        };
        let last = count.checked_sub(1);
        let reserved = signals.clone().take(last.unwrap_or(0));
        let refuse = |index, error| {
            for (semaphore, value) in reserved.clone().take(index) {
                // Nothing to withdraw where reserving found the timeline failed.
                semaphore.withdraw_signal(value);
            }
            SignalRefused { index, error }
        };
        let mut failed_signal = None;
        for (index, (semaphore, value)) in reserved.clone().enumerate() {
            match semaphore.reserve_signal(value) {
                Ok(()) => {}
                Err(SignalError::Failed(failure)) => {
                    failed_signal = failed_signal.or(Some((index, failure)));
                }
                Err(error) => return Err(refuse(index, error)),
            }
        }
        if failed_signal.is_some() {
            self.forget_imports();
        }
        let point = self.own_point();
        let last = last.and_then(|index| Some((index, signals.clone().nth(index)?)));
        if let Some((index, (semaphore, value))) = last {
            match semaphore.submit_signal(value, point, &self.frontier) {
                Ok(()) => {}
                Err(SignalError::Failed(failure)) => {
                    if failed_signal.is_none() {
                        // Nothing recorded its frontier yet: the reservations are filled below.
                        self.forget_imports();
                        self.frontier.insert_or_raise(point.axis, point.epoch);
                    }
                    failed_signal = failed_signal.or(Some((index, failure)));
                }
                Err(error) => return Err(refuse(index, error)),
            }
        }
        // Nothing can be refused from here on. The reservations are filled with the final
        // frontier before the clock commits it (nobody reads the clock meanwhile: this
        // submission holds it), so that the result is built where it is returned: built first,
        // it was copied out once more, its frontier with it.
        for (semaphore, value) in reserved {
            // No reservation exists where reserving found the timeline failed.
            semaphore.fill_signal(value, point, &self.frontier);
        }
        Ok(self.seal(point, failed_signal))
    }

    /// [`commit_signalling`](Self::commit_signalling) of an operation with one signal: there
    /// is nothing to reserve, so the signal is recorded with the final frontier, or refused
    /// with nothing committed; on a failed timeline the operation is committed doomed.
    fn commit_one<const H: usize, const M: usize, S: HistorySlots<M>>(
        mut self,
        semaphore: &Semaphore<H, M, S>,
        value: u64,
    ) -> Result<Submitted<N>, SignalRefused> {
        if !semaphore.admits(&self.clock.endpoint) {
            return Err(SignalRefused { index: 0, error: SignalError::OutOfScope });
        }
        let point = self.own_point();
        let failed_signal = match semaphore.submit_signal(value, point, &self.frontier) {
            Ok(()) => None,
            Err(SignalError::Failed(failure)) => {
                // Doomed: it knows only what its queue knew and its own point.
                self.forget_imports();
                self.frontier.insert_or_raise(point.axis, point.epoch);
                Some((0, failure))
            }
            Err(error) => return Err(SignalRefused { index: 0, error }),
        };
        Ok(self.seal(point, failed_signal))
    }

    /// Drops what the waits imported: the operation is doomed and will not wait for what they
    /// name, so it knows only what its queue knew (see [`Submission`]).
    fn forget_imports(&mut self) {
        self.frontier = self.clock.frontier;
    }

    /// The operation's own point, the queue's next epoch, added to its frontier (raised in
    /// place and later copied out from the same source, rather than through a local: each copy
    /// of a copy waits for the stores of the one before).
    fn own_point(&mut self) -> Point {
        let point = Point::new(self.clock.axis, self.clock.epoch + 1);
        self.frontier.insert_or_raise(point.axis, point.epoch);
        point
    }

    /// Commits the operation at `point` (from [`own_point`](Self::own_point)).
    #[inline(always)]
    fn seal(self, point: Point, failed_signal: Option<(usize, Failure)>) -> Submitted<N> {
        self.clock.epoch = point.epoch;
        self.clock.frontier = self.frontier;
        Submitted {
            point,
            frontier: self.frontier,
            held: self.held,
            failure: self.failure.or(failed_signal.map(|_| Failure::Aborted)),
            failed_signal,
        }
    }
}

/// A submission refused one of its signals; nothing was committed or recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalRefused {
    /// The refused signal's position in the operation's signals.
    pub index: usize,
    /// Why it was refused.
    pub error: SignalError,
}

impl fmt::Display for SignalRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "signal {} refused: {}", self.index, self.error)
    }
}

impl core::error::Error for SignalRefused {}

/// A committed operation: its position, its frontier, how many waits are held and whether it
/// is doomed to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted<const N: usize> {
    /// The operation's own `(queue axis, epoch)`.
    pub point: Point,
    /// Everything the operation knows, including itself.
    pub frontier: Frontier<N>,
    /// Waits held on the host until their signals are submitted.
    pub held: u32,
    /// The failure the operation must retire with, decided at submission: the first failed
    /// wait's, or [`Failure::Aborted`] when only a signal's timeline had failed (its result
    /// would have nowhere to go). `None` when it may run.
    pub failure: Option<Failure>,
    /// The first signal whose timeline had already failed (its position among the
    /// operation's signals) and that timeline's failure.
    pub failed_signal: Option<(usize, Failure)>,
}

/// The retire half of an operation's life: when it succeeded (`Ok`), completes each of its
/// `signals`; otherwise fails each timeline with its failure and ends the signal, so every
/// waiter — on any queue or driver — learns of it. With the `signal-cancellation` feature a
/// [`Failure::Cancelled`] cancels each signal instead (`Semaphore::cancel_signal`, which only
/// that feature has): only the values it would have reached fail; when a signal cannot be
/// cancelled (none pending) its timeline fails, so no waiter hangs.
///
/// Every signal is settled before any of their waiters is told. A waiter of one learns that
/// this operation ended, and may start work that elides a wait on another of its signals:
/// told before that other signal was reached, the work could run ahead of it and signal past
/// it on the same timeline (which breaks the timeline's order: it fails), and told before that
/// other signal failed, the work would run on a value that fails. Nor is a reach published
/// before every signal is settled: until then the semaphore's value, its lookups and new waits
/// see the value before it, so a waiter arriving in between waits instead of learning early.
/// One signal, the common case, is settled and told in one step.
///
/// A completion refused here (out of order: another signaller broke the timeline's contract)
/// fails the timeline itself, which is how its waiters learn of it; a refusal because the
/// timeline failed meanwhile is that failure already reaching them. Neither is the retiring
/// operation's to report.
///
/// Inlined into the retiring caller on hosted targets: the one-signal path is a few
/// instructions around `complete_signal`, and a call frame of its own cost the device's
/// signal → dependent start path about thirty; the several-signal path stays out of line
/// (`retire_several`).
#[cfg_attr(not(target_os = "none"), inline(always))]
pub fn retire<'s, const H: usize, const M: usize, S>(
    signals: impl IntoIterator<Item = (&'s Semaphore<H, M, S>, u64), IntoIter: Clone>,
    result: Result<(), Failure>,
) where
    S: HistorySlots<M> + 's,
{
    let signals = signals.into_iter();
    // Several signals? The size hint says so cheaply for most iterators; others are asked.
    let several = match signals.size_hint() {
        (_, Some(most)) if most <= 1 => false,
        (least, _) if least >= 2 => true,
        _ => signals.clone().nth(1).is_some(),
    };
    if several {
        retire_several(signals, result);
        return;
    }
    for (semaphore, value) in signals {
        match result {
            Ok(()) => {
                let _ = semaphore.complete_signal(value);
            }
            #[cfg(any(test, feature = "signal-cancellation"))]
            Err(Failure::Cancelled) => {
                if semaphore.cancel_signal(value).is_err() {
                    semaphore.fail_signal(value, Failure::Cancelled);
                }
            }
            Err(failure) => {
                semaphore.fail_signal(value, failure);
            }
        }
    }
}

/// [`retire`] of an operation with several signals: settles every one, publishes every one,
/// then tells their waiters (see `retire` for why in that order).
#[inline(never)]
fn retire_several<'s, const H: usize, const M: usize, S>(
    signals: impl Iterator<Item = (&'s Semaphore<H, M, S>, u64)> + Clone,
    result: Result<(), Failure>,
) where
    S: HistorySlots<M> + 's,
{
    for (semaphore, value) in signals.clone() {
        semaphore.settle_untold(value, result);
    }
    for (semaphore, _) in signals.clone() {
        semaphore.publish_settled();
    }
    for (semaphore, value) in signals {
        semaphore.tell_settled(value);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::axis::Domain;
    use crate::scope::Scope;
    use crate::semaphore::tests::{origin, semaphore, Recorder};
    use crate::semaphore::{Arm, History, HistoryEntry, Timepoint};
    use core::pin::pin;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    const TIMELINE: Capabilities = Capabilities { wait_before_signal: true };
    const BINARY_EVENTS: Capabilities = Capabilities { wait_before_signal: false };

    fn endpoint(queue: u64) -> Endpoint {
        Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue }
    }

    #[test]
    fn resolution_names_read_back_and_nothing_else_does() {
        for &resolution in Resolution::ALL {
            assert_eq!(resolution.name().parse::<Resolution>(), Ok(resolution));
        }
        assert_eq!("Device".parse::<Resolution>(), Err(UnknownResolution));
        assert_eq!("device-wait".parse::<Resolution>(), Err(UnknownResolution));
        assert_eq!(
            std::format!("{UnknownResolution}"),
            "unknown wait resolution (elided, satisfied, device, held)"
        );
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
    fn a_native_queue_keeps_device_waits_only_on_origins_it_can_wait_on() {
        let s: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let t: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let mut signaller = clock(1, TIMELINE);
        let signalled = signaller.begin().commit_signalling([(&s, 1)]).unwrap();
        let mut other = clock(4, TIMELINE);
        other.begin().commit_signalling([(&t, 1)]).unwrap();
        let mut gpu = clock(2, TIMELINE);
        let mut op = gpu.begin();
        let (on_s, origin) = op.wait_on_origin(&s, 1, |origin| origin == signalled.point).unwrap();
        assert_eq!((on_s.resolution, origin), (Resolution::DeviceWait, Some(signalled.point)));
        let (on_t, origin) = op.wait_on_origin(&t, 1, |_| false).unwrap();
        assert_eq!((on_t.resolution, origin), (Resolution::Held, None));
        // Nothing signals 2 yet: no origin to wait on natively, so the host holds it.
        let (unsignalled, origin) = op.wait_on_origin(&s, 2, |_| true).unwrap();
        assert_eq!((unsignalled.resolution, origin), (Resolution::Held, None));
        // Held or not, the origins' knowledge is imported.
        assert!(op.frontier().knows(signalled.point));
        assert_eq!(op.commit().held, 2);
        assert_eq!((gpu.counts().device, gpu.counts().held), (1, 2));
        // Knowledge elides, a reached value is satisfied, as for any queue.
        let mut op = gpu.begin();
        assert_eq!(op.wait_on_origin(&s, 1, |_| true).unwrap().0.resolution, Resolution::Elided);
        s.complete_signal(1).unwrap();
        let mut fresh = clock(3, TIMELINE);
        let (reached, origin) = fresh.begin().wait_on_origin(&s, 1, |_| true).unwrap();
        assert_eq!((reached.resolution, origin), (Resolution::Satisfied, None));
    }

    #[test]
    fn scope_is_enforced_for_waits_and_signals() {
        let local: Semaphore = Semaphore::new(0, Scope::QueueLocal, endpoint(1));
        let mut other = clock(2, TIMELINE);
        assert_eq!(other.begin().wait(&local, 1), Err(WaitError::OutOfScope));
        let refused = other.begin().commit_signalling([(&local, 1)]);
        assert_eq!(refused, Err(SignalRefused { index: 0, error: SignalError::OutOfScope }));
        assert_eq!(other.epoch(), 0, "nothing committed");
        let mut own = clock(1, TIMELINE);
        assert!(own.begin().wait(&local, 1).is_ok());
    }

    fn history_of(semaphore: &Semaphore) -> Vec<HistoryEntry<8>> {
        semaphore.with_history(|history| history.iter().copied().collect())
    }

    #[test]
    fn a_refused_signal_leaves_the_queue_and_every_history_as_they_were() {
        let a: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let b: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let c: Semaphore = Semaphore::new(5, Scope::DeviceLocal, endpoint(1));
        let mut q = clock(1, TIMELINE);
        q.begin().commit_signalling([(&a, 1)]).unwrap();
        let before = (q.epoch(), *q.frontier(), history_of(&a), history_of(&b));
        // The last signal is refused (c starts at 5): the reservations of a and b go.
        let refused = q.begin().commit_signalling([(&a, 2), (&b, 1), (&c, 3)]);
        assert_eq!(
            refused,
            Err(SignalRefused {
                index: 2,
                error: SignalError::NotAdvancing { value: 3, current: 5 }
            })
        );
        assert_eq!((q.epoch(), *q.frontier(), history_of(&a), history_of(&b)), before);
        // A middle one is refused: the first reservation goes, the last is never tried.
        let refused = q.begin().commit_signalling([(&b, 1), (&a, 1), (&c, 6)]);
        assert_eq!(refused.map(|_| ()).unwrap_err().index, 1);
        assert_eq!((q.epoch(), *q.frontier(), history_of(&a), history_of(&b)), before);
        assert_eq!(history_of(&c), []);
        // The same operation, corrected, is accepted whole.
        let done = q.begin().commit_signalling([(&a, 2), (&b, 1), (&c, 6)]).unwrap();
        assert_eq!(done.point.epoch, 2);
        for semaphore in [&a, &b, &c] {
            let entry = *history_of(semaphore).last().unwrap();
            assert_eq!(
                (entry.origin, entry.frontier, entry.reserved),
                (Some(done.point), done.frontier, false)
            );
        }
    }

    #[test]
    fn a_full_history_refuses_the_whole_operation() {
        let small: Semaphore<2> = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let mut q = clock(1, TIMELINE);
        // Fill `small` with pending signals.
        for value in 1..=2 {
            q.begin().commit_signalling([(&small, value)]).unwrap();
        }
        let refused = q.begin().commit_signalling([(&small, 3)]);
        assert_eq!(refused.unwrap_err().error, SignalError::HistoryFull { capacity: 2 });
        // Reserved first, refused second: the reservation on `other` is withdrawn.
        let other: Semaphore<2> = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let refused = q.begin().commit_signalling([(&other, 1), (&small, 3)]);
        assert_eq!(refused.unwrap_err().index, 1);
        assert_eq!(other.with_history(|h| (h.submitted(), h.pending())), (0, 0));
        assert_eq!(q.epoch(), 2);
    }

    #[test]
    fn a_signal_on_a_failed_timeline_dooms_the_operation_instead_of_refusing_it() {
        let failed: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        failed.fail(Failure::DeviceLost);
        let fine: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let mut q = clock(1, TIMELINE);
        let done = q.begin().commit_signalling([(&failed, 1), (&fine, 1)]).unwrap();
        assert_eq!(done.failure, Some(Failure::Aborted));
        assert_eq!(done.failed_signal, Some((0, Failure::DeviceLost)));
        // Its other signals are recorded, so retiring the doomed operation fails them.
        assert_eq!(history_of(&fine)[0].origin, Some(done.point));
        retire([(&failed, 1), (&fine, 1)], Err(done.failure.unwrap()));
        assert_eq!(fine.failure(), Some(Failure::Aborted));
        // A failed wait decides the failure.
        let mut doomed = q.begin();
        assert!(doomed.wait(&failed, 1).is_err());
        let done = doomed.commit_signalling([(&fine, 2)]).unwrap();
        assert_eq!(
            (done.failure, done.failed_signal),
            (Some(Failure::DeviceLost), Some((0, Failure::Aborted)))
        );
    }

    #[test]
    fn an_operation_doomed_by_a_failed_signal_forgets_what_its_waits_imported() {
        let elsewhere = Point::new(Axis::new(0, Domain::Queue, 5), 1);
        let pending: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        pending.submit_signal(1, elsewhere, &Frontier::<8>::from_points([elsewhere])).unwrap();
        let failed: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        failed.fail(Failure::DeviceLost);
        let fine: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let mut q = clock(1, TIMELINE);
        // The failed signal first (reserved), then last (recorded in full): either way neither
        // the operation's frontier, nor the signal it records, nor the queue knows queue 5's
        // operation, which the doomed operation will not wait for.
        for (value, signals) in [(1, [(&failed, 1), (&fine, 1)]), (2, [(&fine, 2), (&failed, 2)])] {
            let mut doomed = q.begin();
            assert_eq!(doomed.wait(&pending, 1).unwrap().resolution, Resolution::DeviceWait);
            let done = doomed.commit_signalling(signals).unwrap();
            assert!(done.failure.is_some());
            assert!(!done.frontier.knows(elsewhere), "{:?}", done.frontier);
            let recorded = *history_of(&fine).iter().find(|e| e.value == value).unwrap();
            assert_eq!((recorded.origin, recorded.frontier), (Some(done.point), done.frontier));
            assert!(!q.frontier().knows(elsewhere));
        }
        // Its only signal on the failed timeline (the one-signal path): doomed, knowing its
        // queue's knowledge and its own point, and the queue learns nothing more.
        let known = *q.frontier();
        let mut doomed = q.begin();
        assert_eq!(doomed.wait(&pending, 1).unwrap().resolution, Resolution::DeviceWait);
        let done = doomed.commit_signalling([(&failed, 3)]).unwrap();
        assert_eq!(
            (done.failure, done.failed_signal),
            (Some(Failure::Aborted), Some((0, Failure::DeviceLost)))
        );
        let mut expected = known;
        expected.insert_or_raise(done.point.axis, done.point.epoch);
        assert_eq!(done.frontier, expected);
        assert_eq!(*q.frontier(), expected);
        assert!(!q.frontier().knows(elsewhere));
    }

    #[test]
    fn retire_completes_on_success_and_fails_on_failure() {
        let s: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let t: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        let mut q = clock(1, TIMELINE);
        q.begin().commit_signalling([(&s, 1), (&t, 1)]).unwrap();
        retire([(&s, 1), (&t, 1)], Ok(()));
        assert_eq!((s.value(), t.value()), (1, 1));
        q.begin().commit_signalling([(&s, 2)]).unwrap();
        retire([(&s, 2)], Err(Failure::Aborted));
        assert_eq!((s.failure(), t.failure()), (Some(Failure::Aborted), None));
        // A cancellation fails only the values its signal would have reached.
        q.begin().commit_signalling([(&t, 2)]).unwrap();
        q.begin().commit_signalling([(&t, 3)]).unwrap();
        retire([(&t, 2)], Err(Failure::Cancelled));
        retire([(&t, 3)], Ok(()));
        assert_eq!(
            (t.failure(), t.failure_for(2), t.failure_for(3)),
            (None, Some(Failure::Cancelled), None)
        );
    }

    /// A waiter of one signal of an operation learns the operation ended, and may elide a
    /// wait on another of its signals: when it is told, every signal of the operation is
    /// settled — reached, failed or cancelled.
    #[test]
    fn retire_settles_every_signal_before_it_tells_any_waiter() {
        struct SeesTheOther<'s> {
            other: &'s Semaphore,
            told: core::sync::atomic::AtomicBool,
        }
        impl crate::semaphore::Notify for SeesTheOther<'_> {
            fn notify(&self, outcome: crate::semaphore::Outcome) {
                let other_settled = match outcome {
                    Ok(_) => self.other.value() >= 1,
                    Err(_) => self.other.failure_for(1).is_some(),
                };
                assert!(other_settled, "told {outcome:?} before the other signal settled");
                self.told.store(true, core::sync::atomic::Ordering::Relaxed);
            }
        }
        for result in [Ok(()), Err(Failure::Aborted), Err(Failure::Cancelled)] {
            let (t, s): (Semaphore, Semaphore) = (
                Semaphore::new(0, Scope::DeviceLocal, endpoint(1)),
                Semaphore::new(0, Scope::DeviceLocal, endpoint(1)),
            );
            let mut q = clock(1, TIMELINE);
            q.begin().commit_signalling([(&t, 1), (&s, 1)]).unwrap();
            let waiter =
                SeesTheOther { other: &s, told: core::sync::atomic::AtomicBool::new(false) };
            let timepoint = core::pin::pin!(crate::semaphore::Timepoint::new(&waiter));
            // SAFETY: pinned here; fires in `retire` below, before the frame ends.
            let armed = unsafe { t.arm(timepoint.as_ref(), 1) }.unwrap();
            assert_eq!(armed, crate::semaphore::Arm::Armed);
            retire([(&t, 1), (&s, 1)], result);
            assert!(waiter.told.load(core::sync::atomic::Ordering::Relaxed), "{result:?}");
        }
    }

    #[test]
    fn retiring_a_cancelled_operation_cancels_its_signals_only() {
        let s = semaphore();
        let (rejected, accepted) = (origin(2, 1), origin(1, 1));
        s.submit_signal(1, rejected, &Frontier::<4>::from_points([rejected])).unwrap();
        s.submit_signal(2, accepted, &Frontier::<4>::from_points([accepted])).unwrap();
        retire([(&s, 1)], Err(Failure::Cancelled));
        retire([(&s, 2)], Ok(()));
        assert_eq!(
            (s.value(), s.failure_for(1), s.failure_for(2)),
            (2, Some(Failure::Cancelled), None)
        );
        // A cancellation with no pending signal to cancel fails the timeline: nobody hangs.
        retire([(&s, 9)], Err(Failure::Cancelled));
        assert_eq!(s.failure(), Some(Failure::Cancelled));
        assert_eq!(s.failure_for(2), None, "reached before the failure");
    }

    #[test]
    fn a_failed_signal_fails_the_timeline_and_its_own_waiters_at_once() {
        let s = semaphore();
        let (own, other) = (Recorder::default(), Recorder::default());
        let (t1, t2) = (pin!(Timepoint::new(&own)), pin!(Timepoint::new(&other)));
        s.submit_signal(1, origin(1, 1), &Frontier::<4>::new()).unwrap();
        s.submit_signal(2, origin(2, 1), &Frontier::<4>::new()).unwrap();
        // SAFETY: pinned here; both fire below.
        unsafe {
            assert_eq!(s.arm(t1.as_ref(), 1), Ok(Arm::Armed));
            assert_eq!(s.arm(t2.as_ref(), 2), Ok(Arm::Armed));
        }
        retire([(&s, 1)], Err(Failure::Faulted(3)));
        assert_eq!((own.seen(), other.seen()), (vec![Err(Failure::Faulted(3))], vec![]));
        retire([(&s, 2)], Ok(()));
        assert_eq!(other.seen(), [Err(Failure::Faulted(3))]);
    }

    #[test]
    fn a_signal_marked_cancelled_ends_its_waits_only_when_its_operation_does() {
        let s = semaphore();
        let (waiter, above) = (Recorder::default(), Recorder::default());
        let (t1, t2) = (pin!(Timepoint::new(&waiter)), pin!(Timepoint::new(&above)));
        s.submit_signal(1, origin(1, 1), &Frontier::<4>::new()).unwrap();
        s.submit_signal(2, origin(2, 1), &Frontier::<4>::new()).unwrap();
        // SAFETY: pinned here; both fire below.
        unsafe {
            assert_eq!(s.arm(t1.as_ref(), 1), Ok(Arm::Armed));
            assert_eq!(s.arm(t2.as_ref(), 2), Ok(Arm::Armed));
        }
        s.mark_cancelled(1).unwrap();
        // Lookups fail at once; the armed waiter waits for the cancelled operation to end.
        assert_eq!(s.lookup(1), Lookup::Failed(Failure::Cancelled));
        assert_eq!(s.failure_for(1), Some(Failure::Cancelled));
        assert_eq!(waiter.seen(), []);
        // Accepted work above it completes, and a reach past the marked value does not end it.
        s.complete_signal(2).unwrap();
        assert_eq!((waiter.seen(), above.seen()), (vec![], vec![Ok(2)]));
        let late = pin!(Timepoint::new(&waiter));
        // SAFETY: pinned here; fires below.
        unsafe { assert_eq!(s.arm(late.as_ref(), 1), Ok(Arm::Armed), "armed until it ends") };
        retire([(&s, 1)], Err(Failure::Cancelled));
        assert_eq!(waiter.seen(), [Err(Failure::Cancelled), Err(Failure::Cancelled)]);
        assert_eq!(s.failure(), None, "the timeline itself did not fail");
    }

    /// Found by the differential test (seed 4820): a signal marked cancelled whose timeline the
    /// accepted work above it passed, and that then failed, ends with its operation — and the
    /// waiter of its values, below the reached value, is told then, not left armed.
    #[test]
    fn a_cancelled_signal_below_the_reached_value_ends_its_waiter_on_a_failed_timeline() {
        let s = semaphore();
        let r = Recorder::default();
        let t = pin!(Timepoint::new(&r));
        s.submit_signal(3, origin(1, 1), &Frontier::<4>::new()).unwrap();
        s.submit_signal(5, origin(2, 1), &Frontier::<4>::new()).unwrap();
        s.submit_signal(7, origin(3, 1), &Frontier::<4>::new()).unwrap();
        s.mark_cancelled(3).unwrap();
        s.complete_signal(5).unwrap();
        // SAFETY: pinned here; fires below.
        unsafe {
            assert_eq!(s.arm(t.as_ref(), 3), Ok(Arm::Armed), "held until its operation ends")
        };
        retire([(&s, 7)], Err(Failure::Aborted));
        assert_eq!(r.seen(), []);
        // The cancelled operation ends: the timeline has failed, so it cannot be cancelled any
        // more, and its signal ends failed.
        retire([(&s, 3)], Err(Failure::Cancelled));
        assert_eq!(r.seen().len(), 1);
        assert!(r.seen()[0].is_err());
        assert!(!s.has_waiters());
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
    fn a_failure_in_a_taint_window_teaches_nothing_and_holds_no_wait_back() {
        let s: Semaphore = Semaphore::new(0, Scope::DeviceLocal, endpoint(1));
        s.signal_external(2).unwrap();
        let mut q = clock(1, TIMELINE);
        let mut op = q.begin();
        // Reached from outside: satisfied, tainted, nothing imported.
        let inside = op.wait(&s, 1).unwrap();
        assert_eq!((inside.resolution, inside.tainted), (Resolution::Satisfied, true));
        // Above the window, nothing signalled yet: a device wait that imports nothing.
        assert_eq!(op.wait(&s, 3).unwrap().resolution, Resolution::DeviceWait);
        let committed = op.commit();
        assert_eq!(committed.frontier.len(), 1, "only its own point");
        struct Told(core::sync::atomic::AtomicBool);
        impl crate::semaphore::Notify for Told {
            fn notify(&self, outcome: crate::semaphore::Outcome) {
                assert_eq!(outcome, Err(Failure::Aborted));
                self.0.store(true, core::sync::atomic::Ordering::Relaxed);
            }
        }
        let told = Told(core::sync::atomic::AtomicBool::new(false));
        let timepoint = core::pin::pin!(crate::semaphore::Timepoint::new(&told));
        // SAFETY: pinned here; fires below, before the frame ends.
        let armed = unsafe { s.arm(timepoint.as_ref(), 3) }.unwrap();
        assert_eq!(armed, crate::semaphore::Arm::Armed);
        s.fail(Failure::Aborted);
        // No live signal covers it: told at once.
        assert!(told.0.load(core::sync::atomic::Ordering::Relaxed));
        // The window's values stay reached; the next operation imports nothing from the failure.
        assert_eq!(s.failure_for(2), None);
        assert_eq!(q.begin().wait(&s, 3), Err(WaitError::Failed(Failure::Aborted)));
        assert_eq!(q.frontier().len(), 1);
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

    proptest! {
        #![proptest_config(crate::testing::proptest_config())]
        /// Against a reference that records an operation's signals one by one with
        /// `History::record` on copies of the histories: `commit_signalling` accepts exactly
        /// when the reference accepts every signal, then leaves the same histories; otherwise
        /// it reports the reference's first refusal and leaves the queue and every history
        /// untouched. Small histories, repeated and non-advancing values, completions between
        /// operations.
        #[test]
        fn signals_are_recorded_all_or_none(
            operations in proptest::collection::vec(
                (proptest::collection::vec((0usize..3, 0u64..3), 0..4), 0usize..4),
                1..50,
            ),
        ) {
            let semaphores: [Semaphore<3>; 3] =
                core::array::from_fn(|_| Semaphore::new(0, Scope::DeviceLocal, endpoint(1)));
            let histories = || -> Vec<History<3, 8>> {
                semaphores.iter().map(|s| s.with_history(History::clone)).collect()
            };
            let mut q = clock(1, TIMELINE);
            for (signals, completions) in operations {
                let signals: Vec<(&Semaphore<3>, u64)> = signals
                    .iter()
                    .map(|&(s, step)| {
                        let next = semaphores[s].with_history(|h| h.submitted()) + step;
                        (&semaphores[s], next)
                    })
                    .collect();
                let point = Point::new(q.axis(), q.epoch() + 1);
                let mut frontier = *q.frontier();
                frontier.insert_or_raise(point.axis, point.epoch);
                let mut reference = histories();
                let expected = signals.iter().enumerate().find_map(|(index, &(semaphore, value))| {
                    let s = semaphores.iter().position(|t| core::ptr::eq(t, semaphore)).unwrap();
                    let refusal = reference[s].record(value, Some(point), &frontier).err();
                    refusal.map(|error| SignalRefused { index, error })
                });
                let before = (q.epoch(), *q.frontier(), histories());
                match (q.begin().commit_signalling(signals.iter().copied()), expected) {
                    (Ok(done), None) => {
                        prop_assert_eq!((done.point, done.frontier), (point, frontier));
                        for (got, want) in histories().iter().zip(&reference) {
                            prop_assert!(got.iter().eq(want.iter()));
                            prop_assert_eq!(got.submitted(), want.submitted());
                        }
                    }
                    (Err(refused), Some(want)) => {
                        prop_assert_eq!(refused, want);
                        let after = (q.epoch(), *q.frontier(), histories());
                        prop_assert_eq!((after.0, after.1), (before.0, before.1));
                        for (got, want) in after.2.iter().zip(&before.2) {
                            // At most reached entries aged out, oldest first; the newest
                            // reached one and every pending one are still there.
                            let kept: Vec<_> = got.iter().copied().collect();
                            let had: Vec<_> = want.iter().copied().collect();
                            prop_assert!(had.ends_with(&kept), "{:?} not a suffix of {:?}", kept, had);
                            prop_assert!(had[..had.len() - kept.len()].iter().all(|e| e.reached));
                            prop_assert_eq!(got.pending(), want.pending());
                            prop_assert_eq!(got.reached(), want.reached());
                            prop_assert_eq!(got.submitted(), want.submitted());
                        }
                    }
                    (got, want) => prop_assert!(false, "got {:?}, reference {:?}", got, want),
                }
                for semaphore in semaphores.iter().cycle().take(completions) {
                    let oldest_pending = semaphore
                        .with_history(|h| h.iter().find(|e| !e.reached).map(|e| e.value));
                    if let Some(value) = oldest_pending {
                        semaphore.complete_signal(value).unwrap();
                    }
                }
            }
        }
    }
}

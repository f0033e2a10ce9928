//! The process: one abstraction for every kind of schedulable work.
//!
//! A [`Process`] is caller-owned storage (a `static`, a struct field, a slice element) that
//! outlives the executor borrow `'p`. It holds a reference to its behaviour (a [`Drain`]), the
//! processes that depend on it, and the atomics the executor drives.
//!
//! The lifecycle and failure rules are documented on [`Process`] itself, where users read them.
//!
//! # Cache lines
//!
//! Two [`CachePadded`] lines on hosts (no padding on bare metal, where RAM is the scarce
//! resource and there is one core), grouped by when they are written:
//! - the *core* line: what is fixed once submitted (the drain reference, class, priority,
//!   dependents) and the *activation* fields (suspend count, state, failure, list link, slot),
//!   written by the threads that release, queue, wake and cancel the process — all before it
//!   runs or when it changes state, not while it is drained. Scanners never read process memory
//!   (a compute process's runnable state is in its slot word), so nothing is gained by keeping
//!   the fixed fields apart, and every activation, drain and completion touches one line
//!   instead of two;
//! - the *scheduling* line — the wake budget — written by the drain function as its parallelism
//!   changes, while other workers are draining the same process.

use core::fmt;
use core::ptr::{self, NonNull};

use crate::semaphore::Failure;
use crate::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::sync::UnsafeCell;
use crate::CachePadded;
use state::State;

/// Where a process is queued when it becomes runnable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Class {
    /// Short, single-worker work (queue management, host calls, retire/signal): the FIFO
    /// immediate list, one drainer at a time.
    Immediate,
    /// Long, multi-worker work (tiled dispatches, streaming rings): a compute slot that every
    /// worker may drain concurrently.
    Compute,
}

/// What one [`Drain::drain`] call achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// Work was done and more remains: drain again.
    Progress,
    /// Nothing to do until an outside event: skip this process until
    /// [`wake`](crate::executor::Executor::wake) is called for it. A wake that arrives before
    /// the drain call started, while the process was still queued, counts for that call. Every
    /// wake happens before the drain call it asks for, so that call sees what the waker wrote
    /// before waking, even with plain loads: a drain arranges its wake-up before it last checks
    /// for work, and the check needs no synchronisation of its own with the wakers.
    Sleep,
    /// The process is finished, successfully or not.
    Done(Result<(), Failure>),
}

/// The behaviour of a process.
pub trait Drain: Sync {
    /// Does a bounded amount of work and says what is left. Compute processes are drained by
    /// several workers at once; exactly one of those calls should return [`Drained::Done`] (the
    /// others may return it too: the first completion request wins, later ones are ignored).
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained;

    /// Called exactly once, after the last drain call has returned, with the final outcome:
    /// the drain's own result, or the failure that stopped it (cancellation, an upstream error)
    /// — the bail path of a process that never ran. The process's storage may be reused as soon
    /// as the executor has marked it completed, right after this returns.
    fn finish(&self, outcome: Result<(), Failure>) {
        let _ = outcome;
    }
}

/// What a drain call can see and adjust besides its own state.
pub struct DrainContext<'a, 'p> {
    worker: usize,
    local: &'a mut u64,
    process: &'a Process<'p>,
    aggregate_budget: &'a AtomicU32,
    /// The draining worker's executor: budget rises wake its workers, and a hand-off from
    /// another executor is published instead of kept.
    executor: &'a dyn Reschedule<'p>,
    /// The process a [`hand_off`](Self::hand_off) left for this worker to run next, type-erased
    /// because the drain's token is not tied to this context's lifetimes (see `take_offered`).
    offered: Option<NonNull<()>>,
    /// Whether the draining worker holds processes it took from the list and has yet to run.
    holds_taken: bool,
}

impl<'a, 'p> DrainContext<'a, 'p> {
    pub(crate) fn new(
        worker: usize,
        local: &'a mut u64,
        process: &'a Process<'p>,
        aggregate_budget: &'a AtomicU32,
        executor: &'a dyn Reschedule<'p>,
        holds_taken: bool,
    ) -> DrainContext<'a, 'p> {
        DrainContext {
            worker,
            local,
            process,
            aggregate_budget,
            executor,
            offered: None,
            holds_taken,
        }
    }

    /// The process handed off during this call, for the worker to run next or publish.
    pub(crate) fn take_offered(&mut self) -> Option<&'p Process<'p>> {
        let erased = self.offered.take()?;
        // SAFETY: `hand_off` stores only processes of tokens whose executor is this worker's
        // (the identity check there). `wake_deferred` on that executor, an
        // `Executor<'p, ..>`, only accepts `&'p Process<'p>`, and the executor is invariant in
        // `'p` (its lists hold atomic pointers to `Process<'p>`), so no view of it under
        // another lifetime could have produced the token: the pointer is a `&'p Process<'p>`.
        Some(unsafe { erased.cast::<Process<'p>>().as_ref() })
    }

    /// The index of the worker making this call.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// This worker's private word for this compute process (zero on the process's first drain
    /// by this worker): a cached sequence number, a cursor. Never shared, never atomic. An
    /// immediate process has one drainer at a time and gets a fresh zero on every call.
    pub fn local(&mut self) -> &mut u64 {
        self.local
    }

    /// Whether other work looks ready for a worker: a process on the immediate or overflow
    /// list, a compute process that looks runnable, or a process the draining worker took from
    /// the list and has yet to run. Hints (relaxed loads, no write), for a drain that polls
    /// something outside the executor (a device, a network): it may poll again within the
    /// same call while this says `false`, since returning would only bring the worker back to
    /// it, and returns as soon as this says `true`, so the worker serves the others.
    pub fn others_waiting(&self) -> bool {
        self.holds_taken || !self.executor.looks_idle()
    }

    /// Whether the process has been cancelled or has failed: long drains may stop early.
    // Inlined in hosted builds, as `Process::failure` is: block processors ask once per tile.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub fn is_failed(&self) -> bool {
        self.failure_flag().is_set()
    }

    /// The process's failure flag, to poll as [`is_failed`](Self::is_failed) does from a loop
    /// that also calls out (a kernel per tile): a copy held in a register, where the context
    /// behind `&mut` is read again through two pointers after every call.
    pub fn failure_flag(&self) -> FailureFlag<'a> {
        FailureFlag(&self.process.core.0.failure)
    }

    /// Sets how many workers this process can keep busy. The executor wakes parked workers up
    /// to the aggregate of all runnable processes' budgets: a compute process raising its
    /// budget wakes parked workers for the increase at once (a region of many tiles after a
    /// region of one must not run on the one worker that opened it), while lowering it wakes
    /// nobody and lets surplus workers park when they next find nothing to do.
    pub fn set_wake_budget(&mut self, budget: u32) {
        let previous = self.process.set_wake_budget(budget, self.aggregate_budget);
        if budget > previous && self.process.class() == Class::Compute {
            self.executor.wake_workers(budget - previous);
        }
    }

    /// Offers a process this drain woke (see [`Executor::wake_deferred`]) to the draining
    /// worker, to run as soon as this call returns instead of crossing to another worker.
    ///
    /// The worker keeps it only if the immediate list looks empty when the call returns and
    /// the worker holds nothing else it took from the list (a call that returns `Progress` is
    /// queued again behind it); otherwise, and for a process of another executor or a second
    /// offer, it is given back (QUEUED) and published as a plain wake would have published it.
    ///
    /// [`Executor::wake_deferred`]: super::Executor::wake_deferred
    pub fn hand_off(&mut self, woken: Woken<'_, '_>) {
        let executor = ptr::from_ref(self.executor).cast::<()>();
        if self.offered.is_none() && ptr::eq(woken.executor_identity(), executor) {
            self.offered = Some(NonNull::from(woken.into_process()).cast());
        }
        // Otherwise `woken` drops here, which publishes it.
    }
}

/// What drains and [`Woken`] tokens ask of their executor, without naming its futex, slot
/// count or worker capacity.
pub(crate) trait Reschedule<'p>: Sync {
    /// Gives back and queues a process that a deferred wake claimed and nobody ran (see
    /// [`Woken`]).
    fn publish(&self, process: &'p Process<'p>);
    /// Wakes up to `wanted` parked workers for a compute process whose budget rose.
    fn wake_workers(&self, wanted: u32);
    /// Whether no process looked queued or runnable (see [`DrainContext::others_waiting`]).
    fn looks_idle(&self) -> bool;
}

/// An immediate process that [`Executor::wake_deferred`] woke and claimed (RUNNING, not yet
/// drained) without publishing it. Whoever holds the token owns the process's next run: pass it
/// to [`DrainContext::hand_off`] to run it on the draining worker, or drop it (or call
/// [`publish`](Self::publish)) to give it back (QUEUED) and push it onto the immediate list and
/// notify, exactly what the plain wake would have done. It can therefore never be lost.
///
/// [`Executor::wake_deferred`]: super::Executor::wake_deferred
#[must_use = "dropping a Woken publishes it at once; hand it off to defer it"]
pub struct Woken<'e, 'p> {
    process: Option<&'p Process<'p>>,
    executor: &'e dyn Reschedule<'p>,
}

impl<'e, 'p> Woken<'e, 'p> {
    pub(crate) fn new(process: &'p Process<'p>, executor: &'e dyn Reschedule<'p>) -> Woken<'e, 'p> {
        Woken { process: Some(process), executor }
    }

    /// Gives the process back (QUEUED), pushes it onto its executor's immediate list and
    /// notifies a worker.
    pub fn publish(self) {
        drop(self);
    }

    fn executor_identity(&self) -> *const () {
        ptr::from_ref(self.executor).cast()
    }

    fn into_process(mut self) -> &'p Process<'p> {
        self.process.take().expect("a Woken holds its process until consumed")
    }
}

impl Drop for Woken<'_, '_> {
    fn drop(&mut self) {
        if let Some(process) = self.process.take() {
            self.executor.publish(process);
        }
    }
}

impl fmt::Debug for Woken<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Woken").finish_non_exhaustive()
    }
}

/// A process's failure flag, from [`DrainContext::failure_flag`]: set once the process has
/// failed or been cancelled, never cleared while it drains.
#[derive(Clone, Copy, Debug)]
pub struct FailureFlag<'a>(&'a AtomicU64);

impl FailureFlag<'_> {
    /// Whether the process has been cancelled or has failed.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub fn is_set(self) -> bool {
        // Acquire pairs with the AcqRel compare-exchange in `record_failure`, as in
        // `Process::failure`; `record_failure` never stores `NO_FAILURE`.
        self.0.load(Ordering::Acquire) != NO_FAILURE
    }
}

/// Why a process could not be configured or submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProcessError {
    /// The process has already been submitted (or activated): its configuration is frozen.
    AlreadySubmitted,
    /// A dependent has already been submitted, so it can no longer gain a suspension.
    DependentSubmitted,
    /// The process is not completed, so its storage cannot be rearmed.
    NotCompleted,
    /// A release found no suspension left to drop.
    NotSuspended,
    /// The suspend count would overflow.
    TooManySuspensions,
    /// The executor is shutting down and accepts no new work.
    ShutDown,
}

impl fmt::Display for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProcessError::AlreadySubmitted => "process already submitted",
            ProcessError::DependentSubmitted => "dependent already submitted",
            ProcessError::NotCompleted => "process not completed",
            ProcessError::NotSuspended => "process has no suspension to release",
            ProcessError::TooManySuspensions => "suspend count overflow",
            ProcessError::ShutDown => "executor is shutting down",
        })
    }
}

impl core::error::Error for ProcessError {}

pub(crate) mod state;

/// The core line (see "Cache lines"): one flat struct, so the two groups pack into 64 bytes.
struct Core<'p> {
    // Fixed once submitted.
    drain: &'p dyn Drain,
    /// Written only in the CONFIGURING stage, before submission; read only after activation,
    /// which the submission orders after the write (see `dependents`).
    dependents: UnsafeCell<&'p [&'p Process<'p>]>,
    class: Class,
    priority: u8,
    /// The worker whose home list takes this process when it is queued, or [`NO_HOME`].
    home: u8,
    // Activation.
    suspend: AtomicU32,
    state: State,
    failure: AtomicU64,
    /// Link in an executor process list while queued there.
    pub(crate) next: AtomicPtr<Process<'p>>,
    /// Compute slot index while active in one.
    slot: AtomicU32,
}

/// A schedulable unit of work in caller-owned storage.
///
/// # Lifecycle
///
/// ```text
///  Created ──submit──► Suspended ──last release──► Queued ◄──────────┐
///     │ hold / set_dependents        (count → 0)     │ pop / enter     │ Progress, or
///     ▼                                              ▼                 │ Sleep after a wake
///  (count += n)                                   Running ─────────────┤
///                                                    │ Sleep           │ wake
///                                                    ▼                 │
///                                                 Sleeping ────────────┘
///                                                    │ Done / failure seen
///                                                    ▼
///                                                 Completed ──rearm──► Created
/// ```
///
/// The suspend count starts at one — the *creation hold*, dropped by submission — plus one per
/// upstream process and per [`hold`](crate::executor::Executor::hold). Whoever drives it to zero
/// activates the process, exactly once. A Queued immediate process is in the immediate list, in a
/// run a worker took from it, handed off to the worker whose completion activated it, or held by a
/// [`Woken`] token (see the executor docs); "pop" covers them all. Immediate processes track
/// Queued / Running / Sleeping in their own state word (its protocol, with every transition's
/// ordering, is written up in `executor/process/state.rs`); compute processes, which many workers
/// drain at once, keep that part in their slot's word (see `slots`), so scanners never touch
/// process memory to skip them.
///
/// # Failure
///
/// The first failure wins (a compare-exchange on the failure word): the drain's own error,
/// cancellation, or an error inherited from an upstream process. A process with a failure is
/// never drained again; it completes with that failure, its [`Drain::finish`] runs, and its
/// dependents inherit the failure and complete the same way — the cascade is iterative (each
/// dependent is activated, not called), so its depth costs no stack.
pub struct Process<'p> {
    core: CachePadded<Core<'p>>,
    wake_budget: CachePadded<AtomicU32>,
}

// SAFETY: every field is an atomic or the `dependents` cell, whose only write happens in the
// CONFIGURING stage, which `set_dependents` enters by compare-exchange, before the process is
// submitted; all reads happen after activation, ordered after that write by the submission
// (see `dependents`). `dyn Drain` is `Sync` by the trait bound.
unsafe impl Sync for Process<'_> {}
// SAFETY: as for `Sync`; the references held are to `Sync` data.
unsafe impl Send for Process<'_> {}

const NO_FAILURE: u64 = 0;

/// `Core::home` of a process without a home (executors have at most 64 workers).
const NO_HOME: u8 = u8::MAX;

impl<'p> Process<'p> {
    /// A created process of `class` running `drain`, with normal priority (128) and a wake
    /// budget of one.
    #[cfg(not(loom))]
    pub const fn new(drain: &'p dyn Drain, class: Class) -> Process<'p> {
        Process::with_priority(drain, class, 128)
    }

    /// A created process of `class` running `drain`, with normal priority (128) and a wake
    /// budget of one.
    #[cfg(loom)]
    pub fn new(drain: &'p dyn Drain, class: Class) -> Process<'p> {
        Process::with_priority(drain, class, 128)
    }

    /// As [`new`](Self::new) with a scan priority (higher runs first under
    /// [`Priority`](crate::executor::Priority) scanning).
    #[cfg(not(loom))]
    pub const fn with_priority(drain: &'p dyn Drain, class: Class, priority: u8) -> Process<'p> {
        Process {
            core: CachePadded(Core {
                drain,
                dependents: UnsafeCell::new(&[]),
                class,
                priority,
                home: NO_HOME,
                suspend: AtomicU32::new(1),
                state: State::new(),
                failure: AtomicU64::new(NO_FAILURE),
                next: AtomicPtr::new(ptr::null_mut()),
                slot: AtomicU32::new(u32::MAX),
            }),
            wake_budget: CachePadded(AtomicU32::new(1)),
        }
    }

    /// As [`new`](Self::new) with a scan priority.
    #[cfg(loom)]
    pub fn with_priority(drain: &'p dyn Drain, class: Class, priority: u8) -> Process<'p> {
        Process {
            core: CachePadded(Core {
                drain,
                dependents: UnsafeCell::new(&[]),
                class,
                priority,
                home: NO_HOME,
                suspend: AtomicU32::new(1),
                state: State::new(),
                failure: AtomicU64::new(NO_FAILURE),
                next: AtomicPtr::new(ptr::null_mut()),
                slot: AtomicU32::new(u32::MAX),
            }),
            wake_budget: CachePadded(AtomicU32::new(1)),
        }
    }

    /// The class fixed at creation.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub fn class(&self) -> Class {
        self.core.0.class
    }

    /// This process with a home: worker `worker` of the executor it is submitted to. An
    /// immediate process with a home is queued on its home worker's own list instead of the
    /// shared one, so the work that one worker's processes do stays in that worker's cache;
    /// a worker with nothing of its own takes from another's (see "Homes" in the
    /// [executor docs](crate::executor)). A hint, never a pin: a `worker` at or beyond the
    /// executor's worker count is no home, and compute processes ignore it (every worker scans
    /// their slots).
    pub const fn with_home(mut self, worker: usize) -> Process<'p> {
        self.core.0.home = if worker < NO_HOME as usize { worker as u8 } else { NO_HOME };
        self
    }

    /// The home worker given by [`with_home`](Self::with_home), if any.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub fn home(&self) -> Option<usize> {
        let home = self.core.0.home;
        (home != NO_HOME).then_some(home as usize)
    }

    /// The scan priority fixed at creation.
    pub fn priority(&self) -> u8 {
        self.core.0.priority
    }

    /// The current wake budget.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub fn wake_budget(&self) -> u32 {
        self.wake_budget.0.load(Ordering::Relaxed)
    }

    /// Whether the process has completed (its `finish` has run).
    #[cfg_attr(not(target_os = "none"), inline)]
    pub fn is_completed(&self) -> bool {
        // The Acquire load pairs with the Release of `transition_to_completed`: an owner that
        // sees it may reuse the storage, everything the executor did is before it.
        self.core.0.state.load().is_completed()
    }

    /// The failure the process has (or will) complete with, if any.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub fn failure(&self) -> Option<Failure> {
        // Acquire pairs with the AcqRel compare-exchange in `record_failure`.
        Failure::from_word(self.core.0.failure.load(Ordering::Acquire))
    }

    /// Makes every process in `dependents` wait for this one: each gains one suspension now and
    /// loses it when this process completes (inheriting its failure, if any). Allowed once,
    /// before this process and each dependent is submitted.
    pub fn set_dependents(&self, dependents: &'p [&'p Process<'p>]) -> Result<(), ProcessError> {
        let activation = &self.core.0;
        if activation.state.transition_to_configuring().is_err() {
            return Err(ProcessError::AlreadySubmitted);
        }
        let mut result = Ok(());
        for (added, dependent) in dependents.iter().enumerate() {
            if let Err(error) = dependent.add_suspension_before_submit() {
                for undone in &dependents[..added] {
                    undone.core.0.suspend.fetch_sub(1, Ordering::Relaxed);
                }
                result = Err(error);
                break;
            }
        }
        if result.is_ok() {
            // SAFETY: the CONFIGURING stage, entered by the compare-exchange above, excludes
            // every other writer and every reader (reads happen after activation only).
            self.core.0.dependents.with_mut(|cell| unsafe { *cell = dependents });
        }
        activation.state.transition_to_created();
        result
    }

    /// Adds a suspension to a process that has not been submitted.
    fn add_suspension_before_submit(&self) -> Result<(), ProcessError> {
        let activation = &self.core.0;
        // The Acquire load pairs with the Release of `transition_to_suspended`.
        if activation.state.load().is_submitted() {
            return Err(ProcessError::DependentSubmitted);
        }
        // The creation hold keeps the count above zero until submission, so no release can
        // race this increment into an activation.
        activation
            .suspend
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |count| count.checked_add(1))
            .map(|_| ())
            .map_err(|_| ProcessError::TooManySuspensions)
    }

    /// Adds a suspension while the process is not yet active (its count is above zero).
    pub(crate) fn hold(&self) -> Result<(), ProcessError> {
        self.core
            .0
            .suspend
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |count| match count {
                0 => None,
                n => n.checked_add(1),
            })
            .map(|_| ())
            .map_err(|count| {
                if count == 0 {
                    ProcessError::AlreadySubmitted
                } else {
                    ProcessError::TooManySuspensions
                }
            })
    }

    /// Marks the process submitted: CREATED → SUSPENDED.
    pub(crate) fn mark_submitted(&self) -> Result<(), ProcessError> {
        self.core.0.state.transition_to_suspended().map_err(|_| ProcessError::AlreadySubmitted)
    }

    /// Drops one suspension; `Ok(true)` when this call drove the count to zero, so the caller
    /// must activate the process. Before submission the creation hold is never dropped here,
    /// so only a submitted process can reach zero.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn release(&self) -> Result<bool, ProcessError> {
        let activation = &self.core.0;
        // AcqRel: the Release half publishes what this releaser wrote before; the Acquire half
        // lets the activating thread (the one that reaches zero) see every earlier releaser's
        // writes, and hands them on through the queue push that follows.
        activation
            .suspend
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |count| {
                // Re-read on every attempt: a submission racing this release changes the state
                // first and the count second, so a retry after it sees the state it needs.
                // The Acquire load pairs with the Release of `transition_to_suspended`; on the
                // submitter's own call, also with the `transition_to_created` that submission
                // read, so a configuration written on another thread becomes the submitter's
                // to hand on (see `transition_to_suspended`).
                let floor = if activation.state.load().is_submitted() { 0 } else { 1 };
                (count > floor).then(|| count - 1)
            })
            .map(|previous| previous == 1)
            .map_err(|_| ProcessError::NotSuspended)
    }

    /// Drops the suspension a completing dependency holds on this process (one that
    /// [`set_dependents`](Self::set_dependents) added); `true` when it was the last, so the
    /// caller must activate the process.
    ///
    /// One decrement, not [`release`](Self::release)'s load and compare-exchange: the executor
    /// added this suspension and drops it once, so the count is above zero — and above one
    /// before submission, where the creation hold is still in it. A load followed by a
    /// compare-exchange moves the cache line twice when another core wrote it last (shared
    /// for the load, then owned for the exchange), and a dependent's count was mostly written
    /// last by the thread that submitted it or by another dependency's worker.
    ///
    /// Only a caller's unmatched [`Executor::release`](super::Executor::release), which took
    /// a suspension it never added, can make this decrement find the count at one before
    /// submission (the creation hold left alone) or at zero (the process already activated
    /// without it). Either way the decrement is undone, as `release` would have refused it:
    /// submission still drops the creation hold and activates the process, and the count of
    /// an activated one does not wrap.
    ///
    /// Bare metal keeps `release`'s path: one core has no cache line to move, and the
    /// controller image's flash is what is scarce there (68 bytes for a second path).
    #[inline]
    pub(crate) fn release_dependency(&self) -> bool {
        if cfg!(target_os = "none") {
            return matches!(self.release(), Ok(true));
        }
        let activation = &self.core.0;
        // AcqRel, as in `release`: the Release half publishes this completion's writes; the
        // Acquire half, when this is the last suspension, synchronises with every earlier
        // releaser's decrement — the submitter's drop of the creation hold among them, which
        // follows its `transition_to_suspended`, so the state load below sees SUSPENDED or
        // later — and hands their writes on through the activation that follows.
        match activation.suspend.fetch_sub(1, Ordering::AcqRel) {
            1 if activation.state.load().is_submitted() => true,
            previous => {
                if previous <= 1 {
                    // The misuse above: take the decrement back (Relaxed: it publishes
                    // nothing; the misused count's only reader is that process's submission).
                    activation.suspend.fetch_add(1, Ordering::Relaxed);
                }
                false
            }
        }
    }

    /// Records `failure` unless one is already recorded; returns whether it won.
    pub(crate) fn record_failure(&self, failure: Failure) -> bool {
        // AcqRel: pairs with the Acquire load in `failure`; the loser learns the winner.
        self.core
            .0
            .failure
            .compare_exchange(NO_FAILURE, failure.to_word(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The state word; every change to it is one of its transitions.
    pub(crate) fn state(&self) -> &State {
        &self.core.0.state
    }

    pub(crate) fn link(&self) -> &AtomicPtr<Process<'p>> {
        &self.core.0.next
    }

    pub(crate) fn slot(&self) -> &AtomicU32 {
        &self.core.0.slot
    }

    pub(crate) fn drain_ref(&self) -> &'p dyn Drain {
        self.core.0.drain
    }

    /// The dependents; only called after activation (see the field's invariant).
    pub(crate) fn dependents(&self) -> &'p [&'p Process<'p>] {
        // SAFETY: the only write happened before submission, in the CONFIGURING stage, which
        // its Release `transition_to_created` left. The submission's compare-exchange read
        // that CREATED and its Acquire `load` in `release` took the write over (see
        // `transition_to_suspended`); its AcqRel suspend-count release hands it on to the
        // activator, whose publication of the process (list push, slot claim or hand-off)
        // orders it before this read.
        self.core.0.dependents.with(|cell| unsafe { *cell })
    }

    /// Sets the wake budget and, for a compute process, moves the executor's aggregate by the
    /// difference. Only drains call this, and a compute process drains only while it holds a
    /// slot, whose claim added its budget to the aggregate and whose finalization (after the
    /// last drain) subtracts it; immediate processes are not part of the aggregate.
    /// Returns the previous budget.
    pub(crate) fn set_wake_budget(&self, budget: u32, aggregate: &AtomicU32) -> u32 {
        let previous = self.wake_budget.0.swap(budget, Ordering::Relaxed);
        if self.class() == Class::Compute {
            adjust(aggregate, previous, budget);
        }
        previous
    }

    /// Reuses the storage of a completed process: back to CREATED with no dependents, no
    /// failure, one creation hold and a wake budget of one.
    pub fn rearm(&self) -> Result<(), ProcessError> {
        let activation = &self.core.0;
        // All executor accesses are over (the transition's Acquire). The Relaxed writes below
        // are published by the Release of `transition_to_created`, which the next
        // configuration or submission acquires.
        activation
            .state
            .transition_to_configuring_from_completed()
            .map_err(|_| ProcessError::NotCompleted)?;
        activation.suspend.store(1, Ordering::Relaxed);
        activation.failure.store(NO_FAILURE, Ordering::Relaxed);
        activation.slot.store(u32::MAX, Ordering::Relaxed);
        self.wake_budget.0.store(1, Ordering::Relaxed);
        // SAFETY: CONFIGURING, entered above from COMPLETED, excludes every other access.
        self.core.0.dependents.with_mut(|cell| unsafe { *cell = &[] });
        activation.state.transition_to_created();
        Ok(())
    }
}

/// Moves an aggregate counter from `previous` to `next` of one contributor.
fn adjust(aggregate: &AtomicU32, previous: u32, next: u32) {
    if next >= previous {
        aggregate.fetch_add(next - previous, Ordering::Relaxed);
    } else {
        aggregate.fetch_sub(previous - next, Ordering::Relaxed);
    }
}

impl fmt::Debug for Process<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process")
            .field("class", &self.class())
            .field("priority", &self.priority())
            .field("state", self.state())
            .field("suspend", &self.core.0.suspend.load(Ordering::Relaxed))
            .field("failure", &self.failure())
            .finish_non_exhaustive()
    }
}

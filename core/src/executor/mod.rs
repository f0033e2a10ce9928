//! The cooperative process executor: one process abstraction, workers that drain,
//! spin and park, direct wake with no coordinator, nothing allocated.
//!
//! - [`Process`] — caller-owned work: a [`Drain`] behaviour, a suspend count, dependents, a
//!   cancellation/failure word (first failure wins) and a wake budget.
//! - [`Executor`] — the shared state: the FIFO immediate list for budget-1 work, the fixed
//!   compute slot array for multi-worker work (with a one-word summary of the slots that may
//!   be runnable, and an overflow list when every slot is taken), the aggregate wake budget,
//!   the submission count and, on one line per worker, its parking word and completion count.
//! - [`Worker`] — one per thread (or the main loop of an MCU): runs a dependent handed to it
//!   by its own last completion, then immediate work (taken from the list a fair-share run at a
//!   time, see `list`), scans compute slots under a swappable [`ScanPolicy`], spins adaptively
//!   (offering its CPU to other threads every [`IDLE_SCANS_PER_YIELD`] scans), then parks on
//!   the platform [`Futex`].
//!
//! # Activation, wake and parking
//!
//! Whoever drives a process's suspend count to zero (a submitter, an upstream completion, a
//! semaphore timepoint callback) activates it inline: it queues the process (list push or slot
//! claim, both Release) and then *notifies*. Notifying performs a read-modify-write on the
//! `idle` mask of parked workers and wakes one if any is parked; a parking worker sets its bit
//! with a read-modify-write on the same mask and then re-checks for work before sleeping. The
//! two RMWs are ordered in the mask's modification order, so either the notifier sees the
//! parker's bit (and wakes it), or the parker's RMW reads the notifier's and therefore
//! synchronises with it and sees the queued work. No wake-up is lost, without SeqCst. The
//! parker's re-check reads the slot words themselves, not the runnable summary that scans use
//! (see `slots`), since the summary may lag a slot word for a moment; a parker that sees work
//! withdraws and spins once before scanning again, giving the waker time to announce it.
//!
//! ```text
//!   worker:  spinning ──no work for the spin limit──► set idle bit ──re-check──► parked
//!               ▲   ▲                                      │ work seen            │
//!               │   └──────────── clear own bit ◄──────────┘                      │
//!               └─────── word := NOTIFIED, futex wake (bit cleared by the waker) ◄┘
//! ```
//!
//! Waking many workers uses a wake tree: the notifier adds `budget − 1` to a pending count and
//! wakes one worker; every woken worker claims up to `fanout` of the pending wakes and wakes
//! that many more before it starts scanning, so N workers are up in about log(N) rounds. A
//! compute process that raises its budget while it runs
//! ([`DrainContext::set_wake_budget`]) notifies for the increase the same way; a lowered budget
//! wakes nobody, and the surplus workers park once they find nothing to do.
//!
//! # Hand-off
//!
//! A worker that completes a process, and by that activates an immediate dependent while the
//! immediate list looks empty, keeps that one dependent and runs it on its next step, before it
//! looks at the list, instead of pushing it and notifying (with homes, see "Homes" for which
//! lists must look empty). The list would have given the
//! dependent the same place — first — and this worker, awake and about to pop, would most
//! likely have taken it; keeping it saves the push, the pop, the notify and the cache-line
//! transfers to a worker racing for it, which is what a dependency chain costs per hop. The
//! kept dependent is *claimed*: it goes straight from SUSPENDED to RUNNING, held by this
//! worker, so its drain starts without the swap a drain of a process taken from the list
//! starts with (that swap reads wakes that found the process queued; a wake of a claimed
//! process finds it RUNNING and sets NOTIFIED instead, which the drain's end reads). At most
//! one process is handed off per completion and held per worker; other dependents, and every
//! dependent while the list or the worker's own run taken from it (see `list`) holds work, are
//! pushed as usual, so FIFO order among activations is kept. A worker dropped while holding a
//! hand-off or a run pushes them back onto the list, the hand-off given back to QUEUED first.
//!
//! # Wake hand-off
//!
//! The same saving applies to a wake that a drain causes: a queue whose operation signals a
//! semaphore wakes the queue waiting on it, and if the signalling queue then has nothing left
//! to run, its worker is free at the very moment the woken process needs one. A waker that
//! knows it runs inside a drain calls [`Executor::wake_deferred`] instead of [`Executor::wake`]:
//! a sleeper is claimed (SLEEPING → RUNNING, where a plain wake makes it QUEUED; a running
//! process gets NOTIFIED as usual) and comes back as a [`Woken`] token instead of being
//! pushed. The drain offers it to its worker with [`DrainContext::hand_off`]; when the call
//! returns, the worker keeps it as its hand-off under the rule above (the list looks empty and
//! the worker holds nothing else) and drains it next without the starting swap. A drain that
//! returns [`Drained::Progress`] gives its worker up all the same: it is queued again, behind
//! the hand-off, for this or any worker to take (a progress process that delivers a message
//! thus starts the operation it woke on its own worker, at once). Otherwise the worker gives
//! the token back (RUNNING → QUEUED) and publishes it — push, then notify — ahead of a drainer
//! that is requeued for more work. A token that is
//! dropped does the same, so a deferred wake is never lost, only made by someone else. While
//! it is held, the process is RUNNING to every waker: a further wake sets NOTIFIED, and the
//! drain that follows reads it when it ends (its `Sleep` becomes a requeue), exactly as for a
//! wake that lands during a drain.
//!
//! ```text
//!   waker inside a drain on worker w:  SLEEPING ──CAS──► RUNNING (claimed; token held)
//!        drain returns, list empty:          token ──► w's hand-off ──► drained on w
//!        otherwise (or token dropped):       token ──► QUEUED (swap) ──► list push + notify
//! ```
//!
//! # Homes
//!
//! A process may name a home worker ([`Process::with_home`]). Each worker has a home list
//! beside the shared immediate list, the same list type (see `list`): an immediate process with
//! a home is queued on its home worker's list, one without on the shared list. A worker looks
//! for immediate work in this order: its hand-off, its run, a run from its own home list, a run
//! from the shared list, a run from another worker's home list (the next indices first). Every
//! [`SHARED_LIST_FIRST_EVERY`]th turn it looks at the shared list before its own, so that a
//! worker whose home list never runs dry still serves processes without a home. A home is a
//! hint: a worker with nothing of its own takes the others' work, so no process waits for its
//! home worker while another is idle, and a home at or beyond the worker count is no home.
//!
//! What it buys is locality. Without homes, a process activated by one worker is as likely to
//! run on any other, and a graph whose tasks read what their neighbours wrote — a stencil —
//! moves every process line, every output and the list's own lines between caches once per
//! task; with the columns split into one block per worker, only a block's edges cross. Task
//! Bench's stencil_1d at width 8 on two cores went from a minimum effective task granularity of
//! 0.63 µs to 0.39 µs (prebuilt graph; alternating runs), below Task Bench's own MPI build on
//! the same machine.
//!
//! The hand-off rule reads the lists a home adds: a worker keeps a dependent (or a woken
//! process) only if the process has no home or its home is this worker, and nothing queued
//! would come first — the process's own list looks empty and, for a process without a home, so
//! does the worker's home list, which it looks at first. The parking re-check and the shutdown
//! quiescence check read every home list as well as the shared one; a push to a home list
//! notifies exactly as a push to the shared list does, and whichever worker wakes takes the
//! process, from its own list or another's. With one worker (`WORKERS == 1`, a bare-metal
//! image) every home is no home and the lists' code compiles away.
//!
//! # Inlining
//!
//! The executor and its workers are generic (futex, scan policy, capacities), so their code is
//! compiled in the crate that names the types, while the small non-generic steps they call on
//! every hop (state transitions, list push and pop, the suspend-count release, failure and budget
//! reads) live here. Without LTO a crate cannot inline another's non-generic function unless it is
//! marked `#[inline]`, and each of those steps was an out-of-line call through the GOT in hosted
//! builds: those steps are marked, in hosted builds only. Bare-metal images are built with LTO,
//! which could inline them already; there the hint only grew the Cortex-M0 controller image
//! past its flash budget (by about 500 bytes), so `target_os = "none"` builds go without it.
//!
//! # Shutdown
//!
//! [`Executor::shutdown`] stops new submissions, cancels every process in a compute slot or the
//! overflow list, and wakes every worker. Workers cancel whatever they pop from then on (its
//! [`Drain::finish`] runs with [`Failure::Cancelled`]) and return from [`Worker::run`] once the
//! lists and slots are empty and they hold no hand-off or run (a worker runs those before it
//! ever finds nothing to do), so teardown waits for at most one running drain call per worker.
//! Processes the executor has never been handed (still suspended, or immediate processes
//! asleep) are not known to it and stay with their owner, who may cancel them.

mod arena;
mod futex;
mod list;
mod process;
mod scan;
mod slots;
mod worker;

use core::fmt;

pub use arena::{Arena, Block};
pub use futex::{Futex, FutexWord};
pub use process::{Class, Drain, DrainContext, Drained, FailureFlag, Process, ProcessError, Woken};

use process::Reschedule;
pub use scan::{BudgetWeighted, Priority, RoundRobin, ScanPolicy, SlotHint};
pub use worker::{SpinPolicy, Worker};

use crate::semaphore::Failure;
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::CachePadded;
use list::{ProcessList, Run};
use process::state::TransitionToNotified;
use slots::{SlotArray, SlotWake};

/// What the executor keeps for each worker, on the worker's own line.
struct PerWorker {
    /// The worker's parking word (see the module docs).
    parking: FutexWord,
    /// Processes completed by this worker. Written only by the thread holding the worker's
    /// [`Worker`] handle, with a plain load and store rather than a read-modify-write (a locked
    /// instruction on every completion was a third of a chain hop's atomics). A worker index
    /// that moves to another thread (a dropped and re-taken [`Worker`]) hands the count on
    /// through `taken`: the Release `fetch_and` in `release_worker` pairs with the Acquire
    /// `fetch_or` in [`Executor::worker`], so the new holder's first load sees the last store.
    completed: AtomicUsize,
}

/// How many scans that found nothing a spinning worker makes between two offers of its CPU to
/// other threads ([`Futex::yield_now`]). A scan and its pause take some tens of nanoseconds, so
/// a thread woken onto a spinning worker's CPU runs within about ten microseconds, and an idle
/// worker spends a few percent of its spinning in the yield. A power of two: the check is a
/// mask.
pub const IDLE_SCANS_PER_YIELD: u32 = 256;

/// How often a worker looks at the shared immediate list before its own home list: once every
/// this many turns (see "Homes"). A worker whose home list never runs dry would otherwise
/// leave processes without a home to the other workers, or to nobody when they are as busy.
/// A power of two: the check is a mask.
pub const SHARED_LIST_FIRST_EVERY: u32 = 32;

/// Parking word values.
const AWAKE: u32 = 0;
const PARKED: u32 = 1;
const NOTIFIED: u32 = 2;

/// Where an activation puts the process: on the list, or in its activator's hands.
#[derive(Clone, Copy)]
enum Activation {
    /// QUEUED, for the list or a compute slot.
    Queued,
    /// RUNNING, claimed by the activating worker, which runs it next (see "Hand-off").
    HandedOff,
}

/// Why an executor or worker could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecutorError {
    /// The worker count must be between 1 and the executor's worker capacity (at most 64).
    WorkerCount {
        /// The count asked for.
        requested: usize,
        /// The capacity.
        capacity: usize,
    },
    /// The wake-tree fan-out must be at least 1.
    Fanout,
    /// That worker index is out of range or already has a [`Worker`].
    WorkerTaken(usize),
}

impl fmt::Display for ExecutorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecutorError::WorkerCount { requested, capacity } => {
                write!(f, "worker count {requested} not in 1..={capacity}")
            }
            ExecutorError::Fanout => f.write_str("wake-tree fan-out must be at least 1"),
            ExecutorError::WorkerTaken(index) => {
                write!(f, "worker {index} is out of range or already taken")
            }
        }
    }
}

impl core::error::Error for ExecutorError {}

/// The executor's shared state for processes borrowed for `'p`, parking through `F`, with
/// `SLOTS` compute slots and room for `WORKERS` (≤ 64) workers. See the [module docs](self).
pub struct Executor<'p, F: Futex, const SLOTS: usize = 64, const WORKERS: usize = 64> {
    /// Each list on a line of its own: every idle worker reads the immediate list on every
    /// step, and sharing a line with the overflow list or the slots made their writers (a
    /// draining worker pushing a dependent) miss on it every time.
    immediate: CachePadded<ProcessList<'p>>,
    /// Each worker's home list: the immediate processes whose home it is (see "Homes").
    homes: [CachePadded<ProcessList<'p>>; WORKERS],
    overflow: CachePadded<ProcessList<'p>>,
    slots: SlotArray<'p, SLOTS>,
    /// Bit `w` set: worker `w` is parked or about to park.
    idle: CachePadded<AtomicU64>,
    /// Sum of the wake budgets of active compute processes.
    budget: CachePadded<AtomicU32>,
    /// Wakes still owed by the wake tree.
    pending_wakes: AtomicU32,
    per_worker: [CachePadded<PerWorker>; WORKERS],
    /// Bit `w` set: a [`Worker`] handle exists for index `w`.
    taken: AtomicU64,
    /// Processes ever submitted; [`live`](Self::live) subtracts the completions counted per
    /// worker. Split so that submitters and completing workers never write the same line (one
    /// shared count cost a cache miss on every submission and every completion), and on a line
    /// of its own so that `stopping`, read on every idle scan, is not on it.
    submitted: CachePadded<AtomicUsize>,
    stopping: AtomicBool,
    workers: usize,
    fanout: u32,
    futex: F,
}

impl<'p, F: Futex, const SLOTS: usize, const WORKERS: usize> Executor<'p, F, SLOTS, WORKERS> {
    const CAPACITY_IS_VALID: () = assert!(
        SLOTS >= 1 && SLOTS <= u16::MAX as usize && WORKERS >= 1 && WORKERS <= 64,
        "executor needs 1..=65535 slots and 1..=64 workers"
    );

    /// An executor for `workers` workers parking through `futex`, with a wake-tree fan-out of
    /// two.
    pub fn new(futex: F, workers: usize) -> Result<Executor<'p, F, SLOTS, WORKERS>, ExecutorError> {
        Self::with_fanout(futex, workers, 2)
    }

    /// As [`new`](Self::new), with each woken worker waking up to `fanout` more.
    pub fn with_fanout(
        futex: F,
        workers: usize,
        fanout: u32,
    ) -> Result<Executor<'p, F, SLOTS, WORKERS>, ExecutorError> {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_IS_VALID;
        if workers == 0 || workers > WORKERS {
            return Err(ExecutorError::WorkerCount { requested: workers, capacity: WORKERS });
        }
        if fanout == 0 {
            return Err(ExecutorError::Fanout);
        }
        Ok(Executor {
            immediate: CachePadded(ProcessList::new()),
            homes: core::array::from_fn(|_| CachePadded(ProcessList::new())),
            overflow: CachePadded(ProcessList::new()),
            slots: SlotArray::new(),
            idle: CachePadded(AtomicU64::new(0)),
            budget: CachePadded(AtomicU32::new(0)),
            pending_wakes: AtomicU32::new(0),
            per_worker: core::array::from_fn(|_| {
                CachePadded(PerWorker {
                    parking: FutexWord::new(AWAKE),
                    completed: AtomicUsize::new(0),
                })
            }),
            taken: AtomicU64::new(0),
            submitted: CachePadded(AtomicUsize::new(0)),
            stopping: AtomicBool::new(false),
            workers,
            fanout,
            futex,
        })
    }

    /// The number of workers this executor was built for.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The handle for worker `index` (each index once), scanning under policy `P`.
    pub fn worker<P: ScanPolicy<SLOTS>>(
        &self,
        index: usize,
        spin: SpinPolicy,
    ) -> Result<Worker<'_, 'p, F, P, SLOTS, WORKERS>, ExecutorError> {
        if index >= self.workers {
            return Err(ExecutorError::WorkerTaken(index));
        }
        let bit = 1u64 << index;
        // Acquire pairs with the Release `fetch_and` in `release_worker`: a re-taken index
        // sees its previous holder's completion count (see `PerWorker::completed`).
        if self.taken.fetch_or(bit, Ordering::Acquire) & bit != 0 {
            return Err(ExecutorError::WorkerTaken(index));
        }
        Ok(Worker::new(self, index, P::for_worker(index, self.workers), spin))
    }

    /// Hands `process` to the executor: drops its creation hold, so it activates now if nothing
    /// else suspends it, or when its last upstream process completes or hold is released.
    pub fn submit(&self, process: &'p Process<'p>) -> Result<(), ProcessError> {
        if self.is_stopping() {
            return Err(ProcessError::ShutDown);
        }
        process.mark_submitted()?;
        self.submitted.0.fetch_add(1, Ordering::Relaxed);
        self.release(process)
    }

    /// Adds a suspension to a process that is not active yet (created, or submitted and still
    /// suspended); a matching [`release`](Self::release) drops it.
    pub fn hold(&self, process: &'p Process<'p>) -> Result<(), ProcessError> {
        process.hold()
    }

    /// Drops one suspension (an awaited event happened); activates the process when it was
    /// the last. Callable from any thread, including semaphore callbacks and interrupts.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub fn release(&self, process: &'p Process<'p>) -> Result<(), ProcessError> {
        if process.release()? {
            self.activate(process);
        }
        Ok(())
    }

    /// Makes a sleeping process runnable again (a no-op if it is queued, not yet active or
    /// completed; a wake during a drain turns that drain's `Sleep` into another drain). Either
    /// way the waker's earlier writes are visible to the drain call it asks for, also when a
    /// compute process is still waiting on the overflow list for a slot.
    pub fn wake(&self, process: &'p Process<'p>) {
        match process.class() {
            Class::Immediate => self.wake_immediate(process),
            Class::Compute => {
                if self.wake_slot(process) == SlotWake::Gone {
                    // In no slot, as far as this thread can tell: on the overflow list, being
                    // claimed, or done. Meet the claim on the state word (invariant 6 of the
                    // state module), then look again: either the claim has read this wake, or
                    // this thread now sees the slot it took.
                    process.state().meet_compute_claim();
                    self.wake_slot(process);
                }
            }
        }
    }

    /// Wakes the compute process `process` in the slot its index names, if it is there.
    fn wake_slot(&self, process: &'p Process<'p>) -> SlotWake {
        let slot = process.slot().load(Ordering::Relaxed) as usize;
        let woken = self.slots.wake(slot, process);
        if woken == SlotWake::Runnable {
            self.notify(process.wake_budget());
        }
        woken
    }

    /// Cancels `process`: unless it already failed, it completes with [`Failure::Cancelled`]
    /// without being drained again, and its dependents inherit the failure. A no-op on a
    /// completed process.
    pub fn cancel(&self, process: &'p Process<'p>) {
        if process.is_completed() {
            return;
        }
        process.record_failure(Failure::Cancelled);
        self.wake(process);
    }

    /// Submitted processes that have not completed yet.
    pub fn live(&self) -> usize {
        // Completions first. Acquire pairs with the Release increments in `complete`: a caller
        // that sees a count also sees those completions' effects, and the submission of every
        // completion counted here happens before the load of `submitted` below, which therefore
        // counts it too (the difference cannot underflow).
        let completed = self.per_worker[..self.workers]
            .iter()
            .fold(0usize, |sum, own| sum.wrapping_add(own.0.completed.load(Ordering::Acquire)));
        self.submitted.0.load(Ordering::Relaxed).wrapping_sub(completed)
    }

    /// Whether [`shutdown`](Self::shutdown) has been called.
    pub fn is_stopping(&self) -> bool {
        // Acquire pairs with the Release store in `shutdown`.
        self.stopping.load(Ordering::Acquire)
    }

    /// Stops the executor: refuses new submissions, cancels every process in a compute slot
    /// (asleep or not) and every process workers pop from now on, and wakes every worker so that [`Worker::run`] returns once nothing is left (see the
    /// module docs for what is not waited for).
    pub fn shutdown(&self) {
        // Release pairs with the Acquire loads in `submit`, `activate` and the worker loop.
        self.stopping.store(true, Ordering::Release);
        // Sleeping occupants become runnable; the worker that enters next sees `stopping`,
        // records the cancellation and closes the slot.
        for index in 0..SLOTS {
            self.slots.rouse(index);
        }
        self.wake_all_workers();
    }

    #[cfg_attr(not(target_os = "none"), inline)]
    fn activate(&self, process: &'p Process<'p>) {
        self.mark_active(process, Activation::Queued);
        match process.class() {
            Class::Immediate => {
                self.list_for(process).push(process);
                self.notify(1);
            }
            Class::Compute => self.place(process),
        }
    }

    /// The list an immediate process is queued on: its home worker's (see "Homes"), or the
    /// shared one. With one worker there is only the shared list.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn list_for(&self, process: &'p Process<'p>) -> &ProcessList<'p> {
        if WORKERS > 1 {
            if let Some(home) = process.home().filter(|&home| home < self.workers) {
                return &self.homes[home].0;
            }
        }
        &self.immediate.0
    }

    /// Whether worker `worker`, free now, may keep the immediate process `process` (a
    /// dependent it activated or a process its drain woke) and run it next instead of queueing
    /// it: nothing queued for it would come first — its list looks empty, and for a process
    /// without a home the worker's own home list too, which the worker looks at before the
    /// shared one — and its home, if any, is this worker.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn may_keep(&self, process: &'p Process<'p>, worker: usize) -> bool {
        if WORKERS == 1 {
            return self.immediate.0.looks_empty();
        }
        match process.home() {
            Some(home) if home < self.workers => home == worker && self.homes[home].0.looks_empty(),
            _ => self.immediate.0.looks_empty() && self.homes[worker].0.looks_empty(),
        }
    }

    /// Immediate work for worker `worker`'s `turn`-th look at the lists: a run from its own
    /// home list, then from the shared list — the other way round every
    /// [`SHARED_LIST_FIRST_EVERY`] turns, so that a worker kept busy by its home list still
    /// serves the shared one — and then from another worker's home list (see "Homes").
    pub(crate) fn take_immediate(&self, worker: usize, turn: u32) -> Run<'p> {
        let shared = &self.immediate.0;
        if WORKERS == 1 {
            return shared.pop_run(self.workers);
        }
        let own = &self.homes[worker].0;
        let (first, second) =
            if turn % SHARED_LIST_FIRST_EVERY == 0 { (shared, own) } else { (own, shared) };
        for list in [first, second] {
            let run = list.pop_run(self.workers);
            if !run.is_empty() {
                return run;
            }
        }
        for offset in 1..self.workers {
            let run = self.homes[(worker + offset) % self.workers].0.pop_run(self.workers);
            if !run.is_empty() {
                return run;
            }
        }
        Run::EMPTY
    }

    /// Whether every home list looks empty (a hint, as for the shared list).
    fn homes_look_empty(&self) -> bool {
        WORKERS == 1 || self.homes[..self.workers].iter().all(|list| list.0.looks_empty())
    }

    /// The first step of every activation, hand-offs included: a process activated after
    /// shutdown is cancelled, and it is QUEUED from now on, or RUNNING for the worker it is
    /// handed off to (claimed; see "Hand-off"). Wakes before this order nothing.
    fn mark_active(&self, process: &'p Process<'p>, activation: Activation) {
        if self.is_stopping() {
            process.record_failure(Failure::Cancelled);
        }
        match activation {
            Activation::Queued => process.state().transition_to_queued(),
            Activation::HandedOff => process.state().transition_to_claimed(),
        }
    }

    /// Puts an activated compute process into a slot, or onto the overflow list.
    fn place(&self, process: &'p Process<'p>) {
        if !self.try_claim_slot(process) {
            self.overflow.0.push(process);
            self.notify(1);
        }
    }

    /// Moves overflowed compute processes into free slots while both exist.
    pub(crate) fn drain_overflow(&self) {
        while let Some(process) = self.overflow.0.pop() {
            if !self.try_claim_slot(process) {
                self.overflow.0.push(process);
                return;
            }
        }
    }

    /// Puts `process` into a free slot, counts its budget and wakes workers for it; `false`
    /// when every slot is taken.
    fn try_claim_slot(&self, process: &'p Process<'p>) -> bool {
        if self.slots.claim(process).is_none() {
            return false;
        }
        let budget = process.wake_budget();
        self.budget.0.fetch_add(budget, Ordering::Relaxed);
        self.notify(budget);
        true
    }

    /// Wakes `process` like [`wake`](Self::wake), except that when this call finds an
    /// immediate process asleep it claims it (RUNNING) instead of queueing and publishing it:
    /// the returned [`Woken`] gives it back and publishes it when dropped, unless a drain hands
    /// it to its own worker with [`DrainContext::hand_off`] (see "Wake hand-off" in the module
    /// docs). `None` when the wake needed nothing more (the process was running, already
    /// queued, or is a compute process, woken as usual).
    pub fn wake_deferred(&self, process: &'p Process<'p>) -> Option<Woken<'_, 'p>> {
        match process.class() {
            Class::Immediate => (process.state().transition_to_claimed_or_notified()
                == TransitionToNotified::Claimed)
                .then(|| Woken::new(process, self)),
            Class::Compute => {
                self.wake(process);
                None
            }
        }
    }

    fn wake_immediate(&self, process: &'p Process<'p>) {
        if self.queue_if_sleeping(process) {
            self.list_for(process).push(process);
            self.notify(1);
        }
    }

    /// The state half of waking an immediate process: SLEEPING becomes QUEUED (`true`: the
    /// caller must publish it), RUNNING gains NOTIFIED, anything else is left alone.
    fn queue_if_sleeping(&self, process: &'p Process<'p>) -> bool {
        process.state().transition_to_notified() == TransitionToNotified::Queued
    }

    /// Completes a process whose last drain call has returned on worker `worker`: runs its
    /// `finish`, marks it completed, then releases its dependents (handing on its failure).
    /// Returns the dependent handed off to that worker, if `may_hand_off` (the worker holds no
    /// other taken processes) and one qualifies (see "Hand-off" above).
    #[must_use]
    pub(crate) fn complete(
        &self,
        process: &'p Process<'p>,
        worker: usize,
        may_hand_off: bool,
    ) -> Option<&'p Process<'p>> {
        let outcome = process.failure().map_or(Ok(()), Err);
        process.drain_ref().finish(outcome);
        let dependents = process.dependents();
        // The executor's last access to the process's storage.
        process.state().transition_to_completed();
        let mut handed = None;
        for &dependent in dependents {
            if let Err(failure) = outcome {
                dependent.record_failure(failure);
            }
            if dependent.release_dependency() {
                if may_hand_off
                    && handed.is_none()
                    && dependent.class() == Class::Immediate
                    && self.may_keep(dependent, worker)
                {
                    // This thread's AcqRel release saw every other releaser's writes, and the
                    // worker runs the dependent next: program order hands them on. Claimed
                    // RUNNING here, so its drain starts without a read-modify-write.
                    self.mark_active(dependent, Activation::HandedOff);
                    handed = Some(dependent);
                } else {
                    self.activate(dependent);
                }
            }
        }
        // Only this worker's thread writes its count (see `PerWorker::completed`), so a load
        // and a store count exactly. Release pairs with the Acquire loads in `live`.
        let completed = &self.per_worker[worker].0.completed;
        completed.store(completed.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
        handed
    }

    /// Publishes a QUEUED immediate process this executor's list has not seen: one of a run a
    /// worker took and gives back.
    pub(crate) fn requeue(&self, process: &'p Process<'p>) {
        self.list_for(process).push(process);
        self.notify(1);
    }

    /// Gives back a claimed (RUNNING, undrained) immediate process — a hand-off its worker will
    /// not run, or a deferred wake nobody ran — and publishes it.
    pub(crate) fn give_back(&self, process: &'p Process<'p>) {
        process.state().transition_to_queued_from_running();
        self.requeue(process);
    }

    /// Finalizes the compute process in `index` on worker `worker` (which won the slot's
    /// FINALIZING); returns the dependent handed off to that worker, if any.
    #[must_use]
    pub(crate) fn finalize_slot(
        &self,
        index: usize,
        process: &'p Process<'p>,
        worker: usize,
    ) -> Option<&'p Process<'p>> {
        self.budget.0.fetch_sub(process.wake_budget(), Ordering::Relaxed);
        self.slots.vacate(index);
        // A worker scans slots only once it holds no taken immediate processes.
        let handed = self.complete(process, worker, true);
        self.drain_overflow();
        handed
    }

    /// Whether any queued work is visible (hints; see the parking protocol).
    pub(crate) fn has_work(&self) -> bool {
        !self.immediate.0.looks_empty()
            || !self.homes_look_empty()
            || self.slots.any_runnable()
            || !self.overflow.0.looks_empty()
    }

    /// Whether nothing is queued or occupying a slot: after shutdown, workers may return.
    pub(crate) fn is_quiescent(&self) -> bool {
        self.immediate.0.looks_empty()
            && self.homes_look_empty()
            && self.overflow.0.looks_empty()
            && self.slots.all_vacant()
    }

    /// Wakes up to `wanted` parked workers: one now, the rest through the wake tree.
    ///
    /// Inlined into every wake path on hosted targets: the call and its register shuffling
    /// were most of what activation cost beyond its floor, a `fetch_sub`, a push and the idle
    /// RMW (101 alternating blocks: 1.050× the floor out of line, 1.017× inlined; 37 → 32
    /// instructions). Bare-metal builds keep one out-of-line copy: inlined into each wake
    /// path, it cost the Cortex-M0 controller image about 190 bytes of its 16 KiB flash
    /// budget.
    #[cfg_attr(target_os = "none", inline(never))]
    pub(crate) fn notify(&self, wanted: u32) {
        // An RMW, not a load: see "Activation, wake and parking" in the module docs. AcqRel
        // pairs with the parker's AcqRel `fetch_or` of its idle bit.
        if self.idle.0.fetch_or(0, Ordering::AcqRel) == 0 {
            return;
        }
        if wanted > 1 {
            self.pending_wakes.fetch_add(wanted - 1, Ordering::Relaxed);
        }
        self.wake_one_idle();
    }

    /// Claims one parked worker's idle bit and wakes it; `false` when none is parked.
    pub(crate) fn wake_one_idle(&self) -> bool {
        let mut idle = self.idle.0.load(Ordering::Relaxed);
        while idle != 0 {
            let bit = idle & idle.wrapping_neg();
            // AcqRel: continues the mask's handshake (see `notify`).
            match self.idle.0.compare_exchange_weak(
                idle,
                idle & !bit,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let word = &self.per_worker[bit.trailing_zeros() as usize].0.parking;
                    // Release pairs with the Acquire load in the parked worker's wait loop.
                    word.store(NOTIFIED, Ordering::Release);
                    self.futex.wake_one(word);
                    return true;
                }
                Err(current) => idle = current,
            }
        }
        false
    }

    /// A freshly woken worker's share of the wake tree.
    pub(crate) fn spread_wakes(&self) {
        let claimed = self
            .pending_wakes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |pending| {
                (pending > 0).then(|| pending - pending.min(self.fanout))
            })
            .map_or(0, |pending| pending.min(self.fanout));
        for _ in 0..claimed {
            if !self.wake_one_idle() {
                // Nobody left to wake: the rest of the tree is moot.
                self.pending_wakes.store(0, Ordering::Relaxed);
                return;
            }
        }
    }

    fn wake_all_workers(&self) {
        // AcqRel: as in `notify`; every bit taken here is a worker this call must wake.
        let idle = self.idle.0.swap(0, Ordering::AcqRel);
        for (index, own) in self.per_worker.iter().enumerate().take(self.workers) {
            let word = &own.0.parking;
            if idle & (1 << index) != 0 {
                // Release pairs with the parked worker's Acquire load.
                word.store(NOTIFIED, Ordering::Release);
            }
            self.futex.wake_all(word);
        }
    }

    /// Frees a worker index when its handle is dropped.
    pub(crate) fn release_worker(&self, index: usize) {
        // Release pairs with the Acquire `fetch_or` in `worker`: the next holder of the index
        // sees this holder's last completion count.
        self.taken.fetch_and(!(1u64 << index), Ordering::Release);
    }

    pub(crate) fn futex(&self) -> &F {
        &self.futex
    }

    pub(crate) fn parking_word(&self, index: usize) -> &FutexWord {
        &self.per_worker[index].0.parking
    }

    pub(crate) fn idle_mask(&self) -> &AtomicU64 {
        &self.idle.0
    }

    pub(crate) fn aggregate_budget(&self) -> &AtomicU32 {
        &self.budget.0
    }

    pub(crate) fn immediate(&self) -> &ProcessList<'p> {
        &self.immediate.0
    }

    pub(crate) fn overflow_looks_empty(&self) -> bool {
        self.overflow.0.looks_empty()
    }

    pub(crate) fn slots(&self) -> &SlotArray<'p, SLOTS> {
        &self.slots
    }
}

impl<F: Futex, const SLOTS: usize, const WORKERS: usize> fmt::Debug
    for Executor<'_, F, SLOTS, WORKERS>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("workers", &self.workers)
            .field("slots", &SLOTS)
            .field("live", &self.live())
            .field("stopping", &self.is_stopping())
            .finish_non_exhaustive()
    }
}

impl<'p, F: Futex, const SLOTS: usize, const WORKERS: usize> Reschedule<'p>
    for Executor<'p, F, SLOTS, WORKERS>
{
    fn publish(&self, process: &'p Process<'p>) {
        self.give_back(process);
    }

    fn wake_workers(&self, wanted: u32) {
        self.notify(wanted);
    }

    fn looks_idle(&self) -> bool {
        self.immediate().looks_empty()
            && self.homes_look_empty()
            && self.overflow_looks_empty()
            && self.slots().runnable_hint() == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

//! A process's state word: where the process is in its lifecycle, and whether a wake arrived
//! while it ran.
//!
//! [`State`] owns the atomic; every change is one of its `transition_to_*` methods, which fixes
//! the operation (compare-exchange, swap or store) and its ordering. [`Snapshot`] is one reading
//! of the word, with a question per stage. Nothing outside this module sees the encoding: the
//! stage in the low byte, [`NOTIFIED`](Snapshot::NOTIFIED) beside it.
//!
//! # Stages
//!
//! ```text
//!            ┌──────────── configured ─────────────┐
//!            ▼                                     │
//!         CREATED ─────────── configure ───► CONFIGURING ◄──── rearm ───── COMPLETED
//!            │ submit                                                          ▲ ▲
//!            ▼                                                                 │ │
//!        SUSPENDED                                                             │ │
//!            │ activate (the suspend count reached zero)                       │ │
//!            ▼                                                                 │ │
//!   ┌────► QUEUED ────────── complete (compute: after its last drain) ─────────┘ │
//!   │       │  ▲                                                                 │
//!   │   run │  │ requeue: Progress, or Sleep after a wake                        │
//!   │       ▼  │                                                                 │
//!   │     RUNNING ───────── complete (Done, or a failure seen) ──────────────────┘
//!   │       │ ▲ │
//!   │ Sleep │ └─┘ wake: sets NOTIFIED
//!   │       ▼
//!   └─wake─ SLEEPING
//! ```
//!
//! Hand-offs add three edges, for claims (below):
//!
//! ```text
//!   SUSPENDED ──── activate, handed off ─────────────► RUNNING (claimed)
//!   SLEEPING ───── wake by a drain, handed off ──────► RUNNING (claimed)
//!   RUNNING (claimed, not drained) ──── given back ──► QUEUED
//! ```
//!
//! Only immediate processes run and sleep here. A compute process stays QUEUED from activation
//! to completion: several workers drain it at once, so its running and sleeping live in its
//! slot word (see `slots`), and wakes of it touch this word only when they find it in no slot
//! (invariant 6).
//!
//! A *claimed* process is RUNNING before its drain call starts: a hand-off (see the executor
//! docs) claims it for the worker that will run it next, straight from SUSPENDED (an
//! activation) or SLEEPING (a wake made inside a drain). Its worker drains it without the
//! swap that starts a drain of a QUEUED process, or, if it will not run it after all, gives it
//! back (RUNNING → QUEUED, a swap) and publishes it. To wakes a claimed process looks like one
//! inside its drain call.
//!
//! # Invariants
//!
//! 1. *One writer per stage, or a race that compare-exchange settles.* CREATED is contended
//!    (configuration, submission), and so are COMPLETED (rearm) and SLEEPING (wakes): those
//!    transitions compare-exchange, and exactly one contender wins. CONFIGURING belongs to the
//!    thread that entered it. SUSPENDED belongs to the activator, the one thread whose release
//!    drove the suspend count to zero; QUEUED to whoever holds the process (the list, a run,
//!    the worker that took it, the finalizer of its slot). Wakes find nothing to do in either
//!    but a rewrite of QUEUED (invariant 4), so the transitions out of them by their holder
//!    are plain stores, or a swap where a wake must be read.
//! 2. *RUNNING has one writer and many wakers.* The writer is the drainer, or the worker that
//!    holds the claim (a hand-off, a `Woken` token) and will drain it. Wakers only add
//!    NOTIFIED, by compare-exchange against RUNNING without it. The writer leaves RUNNING by
//!    compare-exchange when the drain asks to sleep, and by a store or a swap otherwise: the
//!    process is requeued, given back or completed, and a NOTIFIED that the store or swap
//!    overwrites asked for nothing more.
//! 3. *A wake and a `Sleep` never miss each other.* Both are read-modify-writes of this one
//!    word, so one comes first in its modification order: either the waker finds SLEEPING and
//!    queues the process, or the drainer finds NOTIFIED and requeues it. Exactly one of them
//!    queues it; the process neither sleeps through the wake nor is queued twice.
//! 4. *Every wake of an active process happens before the drain call it asks for.* Wakes and
//!    the drainer's transitions out of QUEUED and RUNNING are all read-modify-writes of this
//!    word, so each wake either comes before the start of the next drain call in the word's
//!    modification order — and that start, an Acquire swap, reads it or a later
//!    read-modify-write continuing its release sequence — or it lands during a drain call and
//!    its NOTIFIED is read by that call's end (the `Sleep` compare-exchange, or the `Progress`
//!    swap), which hands the process on to the next call. Either way the waker's earlier
//!    writes are visible to the next drain call, whichever stage the wake found: SLEEPING, a
//!    process already QUEUED (the wake writes QUEUED over QUEUED), RUNNING, or RUNNING with
//!    NOTIFIED already set (likewise). A claimed drain call starts without the swap, and needs
//!    none: a wake before the claim either found the process SLEEPING and queued it itself
//!    (the claim then fails), or came before its activation; a wake after the claim finds
//!    RUNNING and sets NOTIFIED, which that call's end reads, so the call after it sees the
//!    waker's writes. A drain may therefore read a wake's cause with plain loads. A wake of a
//!    process not active yet (CREATED, CONFIGURING, SUSPENDED) or completed orders nothing: no
//!    drain call is asked for.
//! 5. *Completion is the executor's last access.* COMPLETED is written by a Release swap after
//!    `finish` has run and before the dependents are released, and only a rearm leaves it: an
//!    owner who sees COMPLETED may reuse the storage.
//! 6. *A compute wake before its process holds a slot is not lost.* An active compute process
//!    may wait on the overflow list for a slot, and a waker reading its slot index without
//!    ordering may miss a claim in progress. So a wake that finds no slot, and every claim,
//!    both rewrite QUEUED by compare-exchange, the claim after storing the slot and process
//!    pointer and before publishing the slot. If the wake's rewrite comes first, the claim's
//!    reads it and the slot's publication carries the waker's writes to the first drain; if
//!    the claim's comes first, the waker sees the slot and wakes it (a claimed slot not yet
//!    published records the wake, and its publication hands it on).
//!
//! # Transitions and orderings
//!
//! | event | method | from → to | operation | pairs with |
//! |---|---|---|---|---|
//! | configure | [`transition_to_configuring`](State::transition_to_configuring) | CREATED → CONFIGURING | CAS, Acquire | `transition_to_created` |
//! | rearm | [`transition_to_configuring_from_completed`](State::transition_to_configuring_from_completed) | COMPLETED → CONFIGURING | CAS, Acquire | `transition_to_completed` |
//! | configured | [`transition_to_created`](State::transition_to_created) | CONFIGURING → CREATED | store, Release | `transition_to_configuring`; the submitter's `load` |
//! | submit | [`transition_to_suspended`](State::transition_to_suspended) | CREATED → SUSPENDED | CAS, Release | `load` in the suspend-count paths (the submitter's own one continues the sequence of `transition_to_created`) |
//! | activate | [`transition_to_queued`](State::transition_to_queued) | SUSPENDED → QUEUED | store, Relaxed | — (the push publishes) |
//! | activate, handed off | [`transition_to_claimed`](State::transition_to_claimed) | SUSPENDED → RUNNING | store, Relaxed | — (the activator drains it) |
//! | run | [`transition_to_running`](State::transition_to_running) | QUEUED → RUNNING | swap, Acquire | `transition_to_notified` (a wake that found QUEUED), `transition_to_queued_from_running` |
//! | requeue (Progress), give a claim back | [`transition_to_queued_from_running`](State::transition_to_queued_from_running) | RUNNING(+NOTIFIED) → QUEUED | swap, Acquire | `transition_to_notified` (a wake during the drain or the claim) |
//! | Sleep, or requeue after a wake | [`transition_to_sleeping`](State::transition_to_sleeping) | RUNNING → SLEEPING, or RUNNING+NOTIFIED → QUEUED | CAS, AcqRel (Acquire on failure); then a Relaxed store | `transition_to_notified` |
//! | wake | [`transition_to_notified`](State::transition_to_notified) | SLEEPING → QUEUED, RUNNING → RUNNING+NOTIFIED, or QUEUED and RUNNING+NOTIFIED rewritten as they are | load, Acquire; CAS, AcqRel | `transition_to_sleeping`, `transition_to_running`, `transition_to_queued_from_running` |
//! | wake by a drain, handed off | [`transition_to_claimed_or_notified`](State::transition_to_claimed_or_notified) | as a wake, but SLEEPING → RUNNING | load, Acquire; CAS, AcqRel | as a wake |
//! | claim a compute slot; a compute wake that found no slot | [`meet_compute_claim`](State::meet_compute_claim) | QUEUED rewritten as it is | CAS, AcqRel | each other |
//! | complete | [`transition_to_completed`](State::transition_to_completed) | QUEUED or RUNNING → COMPLETED | swap, Release | `load` (`is_completed`), `transition_to_configuring_from_completed` |
//! | — | [`load`](State::load) | — | load, Acquire | every Release above |

use core::fmt;

use crate::sync::atomic::{AtomicU32, Ordering};

/// Where a process is in its lifecycle: the low byte of its state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Stage {
    /// Fresh or rearmed; configurable, not submitted.
    Created = 0,
    /// Being configured (`set_dependents`) or rearmed: excludes every other access.
    Configuring = 1,
    /// Submitted; waiting for its suspend count to reach zero.
    Suspended = 2,
    /// Active and held by a list, a worker or a token; compute processes stay here until done.
    Queued = 3,
    /// An immediate process inside a drain call.
    Running = 4,
    /// An immediate process whose last drain asked to sleep, until a wake.
    Sleeping = 5,
    /// Finished: `finish` has run, the executor will not touch the process again.
    Completed = 6,
}

/// One reading of a process's state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(u32);

impl Snapshot {
    const STAGE: u32 = 0xff;
    /// Beside RUNNING only: a wake arrived during the drain, so a `Sleep` result requeues.
    const NOTIFIED: u32 = 1 << 8;

    const fn at(stage: Stage) -> Snapshot {
        Snapshot(stage as u32)
    }

    fn stage(self) -> Option<Stage> {
        Some(match self.0 & Self::STAGE {
            0 => Stage::Created,
            1 => Stage::Configuring,
            2 => Stage::Suspended,
            3 => Stage::Queued,
            4 => Stage::Running,
            5 => Stage::Sleeping,
            6 => Stage::Completed,
            _ => return None,
        })
    }

    fn is(self, stage: Stage) -> bool {
        self.0 & Self::STAGE == stage as u32
    }

    /// Whether the process has been submitted in this life (it is past CONFIGURING): the
    /// creation hold is gone or about to go, and the configuration is frozen.
    pub(crate) fn is_submitted(self) -> bool {
        !self.is(Stage::Created) && !self.is(Stage::Configuring)
    }

    pub(crate) fn is_configuring(self) -> bool {
        self.is(Stage::Configuring)
    }

    pub(crate) fn is_suspended(self) -> bool {
        self.is(Stage::Suspended)
    }

    pub(crate) fn is_queued(self) -> bool {
        self.is(Stage::Queued)
    }

    /// Inside a drain call, woken during it or not.
    pub(crate) fn is_running(self) -> bool {
        self.is(Stage::Running)
    }

    pub(crate) fn is_sleeping(self) -> bool {
        self.is(Stage::Sleeping)
    }

    pub(crate) fn is_completed(self) -> bool {
        self.is(Stage::Completed)
    }

    /// Whether a wake arrived during the current drain call.
    pub(crate) fn is_notified(self) -> bool {
        self.0 & Self::NOTIFIED != 0
    }

    fn with_notified(self) -> Snapshot {
        Snapshot(self.0 | Self::NOTIFIED)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Snapshot");
        match self.stage() {
            Some(stage) => debug.field("stage", &stage),
            // No transition writes such a word; show it rather than hide it.
            None => debug.field("word", &self.0),
        };
        debug.field("notified", &self.is_notified()).finish()
    }
}

/// What [`State::transition_to_sleeping`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransitionToSleeping {
    /// SLEEPING: the process runs again only after a wake.
    Slept,
    /// A wake arrived during the drain: the process is QUEUED again and the caller must push
    /// it.
    Requeued,
}

/// What [`State::transition_to_notified`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransitionToNotified {
    /// SLEEPING → QUEUED: the caller now holds the process and must publish it.
    Queued,
    /// SLEEPING → RUNNING, by [`State::transition_to_claimed_or_notified`]: the caller now
    /// holds the process and must drain it, or give it back and publish it.
    Claimed,
    /// RUNNING → RUNNING+NOTIFIED: the drain's `Sleep` will requeue it.
    Notified,
    /// Nothing more to do: queued, or already notified (each written again as it was, which
    /// orders the wake before the next drain call), not yet active, or completed.
    Unchanged,
}

/// A process's state word; see the [module docs](self) for the stages and their protocol.
pub(crate) struct State(AtomicU32);

impl State {
    /// A CREATED word.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> State {
        State(AtomicU32::new(Snapshot::at(Stage::Created).0))
    }

    /// A CREATED word.
    #[cfg(loom)]
    pub(crate) fn new() -> State {
        State(AtomicU32::new(Snapshot::at(Stage::Created).0))
    }

    /// The current state.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn load(&self) -> Snapshot {
        // Acquire: pairs with the Release half of every transition that has one
        // (`transition_to_created`, `transition_to_suspended`, `transition_to_sleeping`,
        // `transition_to_notified`, `transition_to_completed`): whoever sees a stage sees what
        // was written before entering it.
        Snapshot(self.0.load(Ordering::Acquire))
    }

    /// CREATED → CONFIGURING: the caller alone may now write the configuration, until
    /// [`transition_to_created`](Self::transition_to_created). The current state when not
    /// CREATED.
    pub(crate) fn transition_to_configuring(&self) -> Result<(), Snapshot> {
        // Acquire pairs with the Release in `transition_to_created`: a second configuration
        // sees the first one's writes (and a rearm's).
        self.compare_exchange(Stage::Created, Stage::Configuring, Ordering::Acquire)
    }

    /// COMPLETED → CONFIGURING: the owner alone may now reset the process, until
    /// [`transition_to_created`](Self::transition_to_created). The current state when not
    /// COMPLETED.
    pub(crate) fn transition_to_configuring_from_completed(&self) -> Result<(), Snapshot> {
        // Acquire pairs with the Release swap in `transition_to_completed`: every executor
        // access to the process happened before.
        self.compare_exchange(Stage::Completed, Stage::Configuring, Ordering::Acquire)
    }

    /// CONFIGURING → CREATED, by the thread that entered CONFIGURING.
    pub(crate) fn transition_to_created(&self) {
        debug_assert!(self.relaxed().is_configuring(), "configuration ended outside it");
        // Release pairs with the Acquire of the next `transition_to_configuring`, and with the
        // submitter's Acquire `load` after `transition_to_suspended` (see there): the
        // configuration is published to the next configurer and to the submitter.
        self.0.store(Snapshot::at(Stage::Created).0, Ordering::Release);
    }

    /// CREATED → SUSPENDED: the process is submitted. The current state when not CREATED.
    ///
    /// The submitter must then `load` the word with its Acquire (as `Process::release`, which
    /// submission calls next, does): that is how it takes over the configuration.
    pub(crate) fn transition_to_suspended(&self) -> Result<(), Snapshot> {
        // Release pairs with the Acquire `load`s in `add_suspension_before_submit` and
        // `release`, which must see a submitted process as such. No Acquire here: this
        // read-modify-write continues the release sequence of the `transition_to_created` it
        // read, so the submitter's own Acquire `load` in `release`, which reads this value,
        // synchronises with that store. The configuration (and a rearm's resets) written on
        // another thread is thus the submitter's to hand on, through its suspend-count
        // release, to the activator and to `complete`, which reads `dependents`.
        self.compare_exchange(Stage::Created, Stage::Suspended, Ordering::Release)
    }

    /// SUSPENDED → QUEUED: activation (the first step of it, hand-offs included), by the
    /// thread whose release drove the suspend count to zero.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn transition_to_queued(&self) {
        debug_assert!(self.relaxed().is_suspended(), "activated twice");
        // Relaxed: the activator is the only writer (invariant 1), and the queue push or
        // hand-off that follows publishes the process with this stage.
        self.0.store(Snapshot::at(Stage::Queued).0, Ordering::Relaxed);
    }

    /// SUSPENDED → RUNNING: activation with a hand-off, by the thread whose release drove the
    /// suspend count to zero and whose worker drains the process next (a claimed drain; see
    /// invariant 4).
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn transition_to_claimed(&self) {
        debug_assert!(self.relaxed().is_suspended(), "activated twice");
        // Relaxed: the activator is the only writer (invariant 1) and drains the process
        // itself, on this thread. A wake that reads this value sets NOTIFIED, which the drain's
        // end reads; a wake that reads SUSPENDED came before activation and orders nothing.
        self.0.store(Snapshot::at(Stage::Running).0, Ordering::Relaxed);
    }

    /// QUEUED → RUNNING: an immediate process's drainer, which took it from the list or a run,
    /// is about to drain it. A claimed process (a hand-off) is RUNNING already and skips this.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn transition_to_running(&self) {
        // A swap, not a store, and Acquire: it pairs with the Release half of a wake that found
        // the process QUEUED and rewrote it so (`transition_to_notified`). Being a
        // read-modify-write, it reads the last such wake or a later read-modify-write in its
        // release sequence, never an older QUEUED, so the drain sees what that waker wrote
        // before waking (invariant 4). A store here and a plain load in the wake would be a
        // store → load pair on each side, which lets both miss the other.
        let left = Snapshot(self.0.swap(Snapshot::at(Stage::Running).0, Ordering::Acquire));
        debug_assert!(left.is_queued(), "ran a process that is not queued: {left:?}");
    }

    /// RUNNING → QUEUED after a `Progress` result, or for a claimed process its holder will not
    /// drain after all (a hand-off refused or given back), before the process is pushed.
    pub(crate) fn transition_to_queued_from_running(&self) {
        // A swap, and Acquire: it reads a wake's NOTIFIED, if one landed during the drain (or
        // while a claim was held), and pairs with that wake's Release, so the next drain (on whichever worker pops the push
        // that follows) sees what the waker wrote (invariant 4). The NOTIFIED itself is
        // dropped: the process runs again anyway (invariant 2).
        let left = Snapshot(self.0.swap(Snapshot::at(Stage::Queued).0, Ordering::Acquire));
        debug_assert!(left.is_running(), "requeued a process that is not running: {left:?}");
    }

    /// RUNNING → SLEEPING after a `Sleep` result; or, if a wake arrived during the drain
    /// (NOTIFIED), QUEUED, and the caller must push the process.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn transition_to_sleeping(&self) -> TransitionToSleeping {
        let running = Snapshot::at(Stage::Running);
        // AcqRel on success: the Release half pairs with the Acquire of the waker's load and
        // compare-exchange in `transition_to_notified`, so a waker that queues the sleeper sees
        // this drain's writes. Acquire on failure: the failure reads the waker's NOTIFIED,
        // written by its AcqRel compare-exchange, so the requeued drain sees what the waker
        // wrote before waking (invariant 4).
        match self.0.compare_exchange(
            running.0,
            Snapshot::at(Stage::Sleeping).0,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => TransitionToSleeping::Slept,
            Err(actual) => {
                debug_assert_eq!(
                    Snapshot(actual),
                    running.with_notified(),
                    "slept while not running"
                );
                // Relaxed: the word stays with this worker (wakes see NOTIFIED and leave it),
                // and the push that follows publishes the process.
                self.0.store(Snapshot::at(Stage::Queued).0, Ordering::Relaxed);
                TransitionToSleeping::Requeued
            }
        }
    }

    /// A wake of an immediate process: SLEEPING → QUEUED (the caller must publish it),
    /// RUNNING → RUNNING+NOTIFIED (its `Sleep` will requeue it); QUEUED and RUNNING+NOTIFIED are
    /// written again as they are, so that the next drain call reads this wake (invariant 4);
    /// a process not active yet, or completed, is left alone.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn transition_to_notified(&self) -> TransitionToNotified {
        self.wake_into(Stage::Queued)
    }

    /// A wake that claims a sleeper for the caller's own worker: as
    /// [`transition_to_notified`](Self::transition_to_notified), except that SLEEPING becomes
    /// RUNNING, and the caller, now holding the process, must drain it without
    /// [`transition_to_running`](Self::transition_to_running) or give it back with
    /// [`transition_to_queued_from_running`](Self::transition_to_queued_from_running) and
    /// publish it.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn transition_to_claimed_or_notified(&self) -> TransitionToNotified {
        self.wake_into(Stage::Running)
    }

    /// The wake, with SLEEPING going to `woken` (QUEUED, or RUNNING for a claim). One copy
    /// in bare-metal builds (flash budget), inlined into both wakes elsewhere.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn wake_into(&self, woken: Stage) -> TransitionToNotified {
        let mut current = self.load();
        loop {
            let (next, outcome) = if current.is_sleeping() {
                let outcome = if woken == Stage::Running {
                    TransitionToNotified::Claimed
                } else {
                    TransitionToNotified::Queued
                };
                (Snapshot::at(woken), outcome)
            } else if current == Snapshot::at(Stage::Running) {
                (current.with_notified(), TransitionToNotified::Notified)
            } else if current.is_queued() || current.is_running() {
                // Already queued, or already notified during this drain: the drain call to
                // come runs anyway, and this rewrite is what orders this wake before it.
                (current, TransitionToNotified::Unchanged)
            } else {
                // Not active yet, or completed: no drain call to order anything before.
                return TransitionToNotified::Unchanged;
            };
            // AcqRel. Acquire pairs with the Release of the drainer's compare-exchange into
            // SLEEPING: a waker that queues or claims the sleeper, and so holds it, sees its
            // last drain's writes (the load above and a failure here are Acquire for the same
            // reason). Release pairs with the Acquire reads of this value or of a later
            // read-modify-write in its release sequence: the failure of that compare-exchange
            // (NOTIFIED: the requeued drain), the `Progress` swap, and the swap that starts
            // the next drain call. A queued sleeper reaches its next drain through the publish,
            // which orders the same; a claimed one is drained by this thread.
            match self.0.compare_exchange_weak(
                current.0,
                next.0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return outcome,
                Err(actual) => current = Snapshot(actual),
            }
        }
    }

    /// A compute process's slot claim, and a wake of it that found it in no slot: QUEUED written
    /// again as it is, so that whichever of the two comes second in this word's modification
    /// order reads the other (invariant 6). Anything but QUEUED is left alone: a process not
    /// active yet or completed has no claim to come.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn meet_compute_claim(&self) {
        let queued = Snapshot::at(Stage::Queued).0;
        // AcqRel, pairing with the other side's: a claim that comes second sees the waker's
        // writes and publishes them to the drainers with its slot word's Release; a wake that
        // comes second sees the claim's slot and process pointer, and wakes that slot.
        let _ = self.0.compare_exchange(queued, queued, Ordering::AcqRel, Ordering::Acquire);
    }

    /// QUEUED (a compute process) or RUNNING (an immediate one) → COMPLETED, after `finish`:
    /// the executor's last access to the process's storage.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn transition_to_completed(&self) {
        // Release pairs with the Acquire of `load` (`Process::is_completed`) and of
        // `transition_to_configuring_from_completed`: an owner that sees COMPLETED sees
        // everything the executor did. A swap, for the stage it hands back to the check below;
        // a store would be as safe, since a waker's compare-exchange expects RUNNING or
        // SLEEPING and so can never overwrite COMPLETED.
        let left = Snapshot(self.0.swap(Snapshot::at(Stage::Completed).0, Ordering::Release));
        debug_assert!(left.is_queued() || left.is_running(), "completed from {left:?}");
    }

    /// `from` → `to` with `success` ordering; the current state when it is not `from`.
    fn compare_exchange(&self, from: Stage, to: Stage, success: Ordering) -> Result<(), Snapshot> {
        // Relaxed on failure: a refused transition reports the state and touches nothing.
        self.0
            .compare_exchange(Snapshot::at(from).0, Snapshot::at(to).0, success, Ordering::Relaxed)
            .map(|_| ())
            .map_err(Snapshot)
    }

    /// A reading for debug assertions only: a transition's caller already holds the process
    /// (invariant 1), so no ordering is needed to see the stage it is leaving.
    fn relaxed(&self) -> Snapshot {
        Snapshot(self.0.load(Ordering::Relaxed))
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.load().fmt(f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const STAGES: [Stage; 7] = [
        Stage::Created,
        Stage::Configuring,
        Stage::Suspended,
        Stage::Queued,
        Stage::Running,
        Stage::Sleeping,
        Stage::Completed,
    ];

    const RUNNING_NOTIFIED: Snapshot = Snapshot(Stage::Running as u32 | Snapshot::NOTIFIED);

    /// Every word a transition can leave behind.
    fn every_snapshot() -> impl Iterator<Item = Snapshot> {
        STAGES.into_iter().map(Snapshot::at).chain([RUNNING_NOTIFIED])
    }

    fn state_at(snapshot: Snapshot) -> State {
        State(AtomicU32::new(snapshot.0))
    }

    /// Checks that the compare-exchange `transition` succeeds from `from` only, to `to`, and
    /// leaves every other word as it was, reporting it.
    fn only_from(from: Stage, to: Stage, transition: impl Fn(&State) -> Result<(), Snapshot>) {
        for snapshot in every_snapshot() {
            let state = state_at(snapshot);
            if snapshot == Snapshot::at(from) {
                assert_eq!(transition(&state), Ok(()));
                assert_eq!(state.load(), Snapshot::at(to));
            } else {
                assert_eq!(transition(&state), Err(snapshot), "from {snapshot:?}");
                assert_eq!(state.load(), snapshot, "rejected, unchanged");
            }
        }
    }

    #[test]
    fn a_new_state_is_created() {
        assert_eq!(State::new().load(), Snapshot::at(Stage::Created));
    }

    #[test]
    fn snapshots_name_their_stage_and_flag() {
        for stage in STAGES {
            let snapshot = Snapshot::at(stage);
            assert_eq!(snapshot.stage(), Some(stage));
            assert!(!snapshot.is_notified());
            assert_eq!(snapshot.is_configuring(), stage == Stage::Configuring);
            assert_eq!(snapshot.is_suspended(), stage == Stage::Suspended);
            assert_eq!(snapshot.is_queued(), stage == Stage::Queued);
            assert_eq!(snapshot.is_running(), stage == Stage::Running);
            assert_eq!(snapshot.is_sleeping(), stage == Stage::Sleeping);
            assert_eq!(snapshot.is_completed(), stage == Stage::Completed);
            assert_eq!(
                snapshot.is_submitted(),
                !matches!(stage, Stage::Created | Stage::Configuring)
            );
        }
        assert!(RUNNING_NOTIFIED.is_running() && RUNNING_NOTIFIED.is_notified());
        assert_eq!(RUNNING_NOTIFIED, Snapshot::at(Stage::Running).with_notified());
    }

    #[test]
    fn configuring_is_entered_from_created_only() {
        only_from(Stage::Created, Stage::Configuring, State::transition_to_configuring);
    }

    #[test]
    fn a_rearm_enters_configuring_from_completed_only() {
        only_from(
            Stage::Completed,
            Stage::Configuring,
            State::transition_to_configuring_from_completed,
        );
    }

    #[test]
    fn submission_leaves_created_only() {
        only_from(Stage::Created, Stage::Suspended, State::transition_to_suspended);
    }

    #[test]
    fn configuring_ends_in_created() {
        let state = state_at(Snapshot::at(Stage::Configuring));
        state.transition_to_created();
        assert_eq!(state.load(), Snapshot::at(Stage::Created));
    }

    #[test]
    fn an_immediate_process_goes_through_every_stage() {
        let state = State::new();
        state.transition_to_configuring().unwrap();
        state.transition_to_created();
        state.transition_to_suspended().unwrap();
        state.transition_to_queued();
        assert!(state.load().is_queued());
        state.transition_to_running();
        assert!(state.load().is_running());
        state.transition_to_queued_from_running();
        assert!(state.load().is_queued());
        state.transition_to_running();
        assert_eq!(state.transition_to_sleeping(), TransitionToSleeping::Slept);
        assert!(state.load().is_sleeping());
        assert_eq!(state.transition_to_notified(), TransitionToNotified::Queued);
        state.transition_to_running();
        state.transition_to_completed();
        assert!(state.load().is_completed());
        state.transition_to_configuring_from_completed().unwrap();
        state.transition_to_created();
        assert_eq!(state.load(), Snapshot::at(Stage::Created));
    }

    #[test]
    fn a_compute_process_completes_from_queued() {
        let state = state_at(Snapshot::at(Stage::Queued));
        state.transition_to_completed();
        assert!(state.load().is_completed());
    }

    #[test]
    fn meeting_a_compute_claim_changes_no_state() {
        for snapshot in every_snapshot() {
            let state = state_at(snapshot);
            state.meet_compute_claim();
            assert_eq!(state.load(), snapshot, "from {snapshot:?}");
        }
    }

    #[test]
    fn a_notified_drainer_completes_or_requeues_without_the_flag() {
        let completing = state_at(RUNNING_NOTIFIED);
        completing.transition_to_completed();
        assert_eq!(completing.load(), Snapshot::at(Stage::Completed));
        let progressing = state_at(RUNNING_NOTIFIED);
        progressing.transition_to_queued_from_running();
        assert_eq!(progressing.load(), Snapshot::at(Stage::Queued));
    }

    #[test]
    fn a_sleep_after_a_wake_requeues() {
        let state = state_at(RUNNING_NOTIFIED);
        assert_eq!(state.transition_to_sleeping(), TransitionToSleeping::Requeued);
        assert_eq!(state.load(), Snapshot::at(Stage::Queued));
    }

    #[test]
    fn a_wake_queues_a_sleeper_notifies_a_drainer_and_leaves_the_rest() {
        for snapshot in every_snapshot() {
            let state = state_at(snapshot);
            let (outcome, after) = if snapshot.is_sleeping() {
                (TransitionToNotified::Queued, Snapshot::at(Stage::Queued))
            } else if snapshot == Snapshot::at(Stage::Running) {
                (TransitionToNotified::Notified, RUNNING_NOTIFIED)
            } else {
                (TransitionToNotified::Unchanged, snapshot)
            };
            assert_eq!(state.transition_to_notified(), outcome, "from {snapshot:?}");
            assert_eq!(state.load(), after, "from {snapshot:?}");
        }
    }

    #[test]
    fn a_claiming_wake_runs_a_sleeper_and_otherwise_wakes_as_a_plain_one() {
        for snapshot in every_snapshot() {
            let (plain, claiming) = (state_at(snapshot), state_at(snapshot));
            let outcome = claiming.transition_to_claimed_or_notified();
            let plain_outcome = plain.transition_to_notified();
            if snapshot.is_sleeping() {
                assert_eq!(outcome, TransitionToNotified::Claimed);
                assert_eq!(claiming.load(), Snapshot::at(Stage::Running));
            } else {
                assert_eq!(outcome, plain_outcome, "from {snapshot:?}");
                assert_eq!(claiming.load(), plain.load(), "from {snapshot:?}");
            }
        }
    }

    #[test]
    fn a_claimed_process_drains_sleeps_and_is_given_back_like_a_running_one() {
        let handed = state_at(Snapshot::at(Stage::Suspended));
        handed.transition_to_claimed();
        assert_eq!(handed.load(), Snapshot::at(Stage::Running));
        // A wake between the claim and the drain: the drain's `Sleep` requeues.
        assert_eq!(handed.transition_to_notified(), TransitionToNotified::Notified);
        assert_eq!(handed.transition_to_sleeping(), TransitionToSleeping::Requeued);
        // A claim its holder does not drain goes back QUEUED, a wake's flag dropped.
        let given_back = state_at(Snapshot::at(Stage::Sleeping));
        given_back.transition_to_claimed_or_notified();
        given_back.transition_to_notified();
        given_back.transition_to_queued_from_running();
        assert_eq!(given_back.load(), Snapshot::at(Stage::Queued));
    }

    #[test]
    fn a_snapshot_shows_its_stage_and_flag() {
        use std::format;
        assert_eq!(format!("{RUNNING_NOTIFIED:?}"), "Snapshot { stage: Running, notified: true }");
        assert_eq!(format!("{:?}", Snapshot(0xff)), "Snapshot { word: 255, notified: false }");
    }

    /// The plain-store transitions, and a swap or failed compare-exchange out of a stage no
    /// caller can be in, are caught in debug builds.
    #[cfg(debug_assertions)]
    mod illegal {
        use super::*;

        #[test]
        #[should_panic(expected = "configuration ended outside it")]
        fn ending_a_configuration_that_was_not_entered() {
            state_at(Snapshot::at(Stage::Created)).transition_to_created();
        }

        #[test]
        #[should_panic(expected = "activated twice")]
        fn activating_an_active_process() {
            state_at(Snapshot::at(Stage::Queued)).transition_to_queued();
        }

        #[test]
        #[should_panic(expected = "activated twice")]
        fn claiming_an_active_process() {
            state_at(Snapshot::at(Stage::Running)).transition_to_claimed();
        }

        #[test]
        #[should_panic(expected = "not queued")]
        fn running_a_sleeper() {
            state_at(Snapshot::at(Stage::Sleeping)).transition_to_running();
        }

        #[test]
        #[should_panic(expected = "not running")]
        fn requeueing_a_queued_process() {
            state_at(Snapshot::at(Stage::Queued)).transition_to_queued_from_running();
        }

        #[test]
        #[should_panic(expected = "slept while not running")]
        fn sleeping_from_queued() {
            let _ = state_at(Snapshot::at(Stage::Queued)).transition_to_sleeping();
        }

        #[test]
        #[should_panic(expected = "completed from")]
        fn completing_a_suspended_process() {
            state_at(Snapshot::at(Stage::Suspended)).transition_to_completed();
        }
    }
}

//! Timepoints: intrusive, caller-owned registrations "tell me when S ≥ v".
//!
//! A [`Timepoint`] lives in its owner's storage (a stack frame, a process, a static); the
//! semaphore only links it into a sorted intrusive list, so arming never allocates and a
//! semaphore has no limit on waiters.
//!
//! # Protocol
//!
//! ```text
//!            arm (lock held)             signal/fail cuts it out (lock held)
//!   IDLE ─────────────────────► ARMED ─────────────────────────────────► FIRING
//!    ▲  ▲                         │                                        │
//!    │  └──── cancel (lock held) ─┘            notify() returned; Release  │
//!    │                                                                     ▼
//!    └──────────────────────────── arm again ◄─────────────────────────── DONE
//! ```
//!
//! Invariants:
//! 1. A timepoint is in a semaphore's list exactly while it is ARMED; list links and the
//!    ARMED → FIRING/IDLE transitions change only under that semaphore's lock, so signal and
//!    cancel can never both take it.
//! 2. Callbacks run after the lock is released. The firing thread reads everything it needs
//!    (`next`, `notify`) before calling, and its last access is the Release store of DONE.
//! 3. `cancel` that finds FIRING waits until DONE (Acquire, pairing with that store), calling
//!    the callback's [`Notify::while_firing`] between looks (a spin, or a hosted yield): once
//!    `cancel` returns, no thread touches the timepoint and the callback has finished, so the
//!    owner may reuse or free both. Callbacks are therefore short and must not cancel, re-arm
//!    or free their own timepoint.

use core::fmt;
use core::marker::PhantomPinned;
use core::ptr;

use super::Failure;
use crate::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use crate::sync::spin_hint;

const IDLE: u8 = 0;
const ARMED: u8 = 1;
const FIRING: u8 = 2;
const DONE: u8 = 3;

/// What a timepoint learns: the timeline value when it fired, or the timeline's failure.
pub type Outcome = Result<u64, Failure>;

/// Receives timepoint callbacks. Runs on the signalling thread (or in an interrupt handler on
/// bare metal), outside every semaphore lock: keep it short and non-blocking, e.g. decrement a
/// wait count and activate a process.
pub trait Notify: Sync {
    /// The timeline reached the timepoint's minimum, or failed.
    fn notify(&self, outcome: Outcome);

    /// Called in a loop while the timepoint's owner waits, in [`Semaphore::cancel`], for this
    /// callback to return on another thread. The default spins. A hosted waiter should give
    /// its core away instead (`std::thread::yield_now`): the signalling thread may have been
    /// preempted inside the callback by the very thread it woke, and a spin then lasts a
    /// scheduler time slice.
    ///
    /// [`Semaphore::cancel`]: super::Semaphore::cancel
    fn while_firing(&self) {
        spin_hint();
    }
}

/// A caller-owned wait registration. See the [module documentation](self) for the protocol.
pub struct Timepoint<'a> {
    notify: &'a dyn Notify,
    minimum: AtomicU64,
    next: AtomicPtr<Timepoint<'static>>,
    state: AtomicU8,
    _pinned: PhantomPinned,
}

impl<'a> Timepoint<'a> {
    /// An idle timepoint that will call `notify` when it fires.
    pub fn new(notify: &'a dyn Notify) -> Timepoint<'a> {
        Timepoint {
            notify,
            minimum: AtomicU64::new(0),
            next: AtomicPtr::new(ptr::null_mut()),
            state: AtomicU8::new(IDLE),
            _pinned: PhantomPinned,
        }
    }

    /// Whether the timepoint fired and its callback has returned.
    pub fn is_done(&self) -> bool {
        // Acquire pairs with the firing thread's Release store of DONE: a `true` here means the
        // callback's effects are visible and the semaphore no longer touches this timepoint.
        self.state.load(Ordering::Acquire) == DONE
    }

    /// Whether the timepoint is linked into a semaphore or its callback is running.
    pub fn is_busy(&self) -> bool {
        // Acquire pairs with the Release store of DONE in `notify_all`, as in `is_done`.
        matches!(self.state.load(Ordering::Acquire), ARMED | FIRING)
    }

    /// The value this timepoint waits for (meaningful while armed).
    pub fn minimum(&self) -> u64 {
        self.minimum.load(Ordering::Relaxed)
    }

    fn erased(&self) -> *mut Timepoint<'static> {
        ptr::from_ref(self).cast::<Timepoint<'static>>().cast_mut()
    }
}

impl fmt::Debug for Timepoint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state.load(Ordering::Relaxed) {
            IDLE => "idle",
            ARMED => "armed",
            FIRING => "firing",
            _ => "done",
        };
        f.debug_struct("Timepoint")
            .field("minimum", &self.minimum())
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

/// Sorted (ascending minimum, FIFO among equals) intrusive list of armed timepoints.
///
/// Lives inside the semaphore's lock; every method requires that lock to be held.
pub(super) struct WaiterList {
    head: *mut Timepoint<'static>,
}

// SAFETY: the list only holds pointers to `Timepoint`s, which are `Sync` (all fields atomic or
// `&dyn Notify` with `Notify: Sync`). The arm contract (`Semaphore::arm`) keeps every linked
// timepoint alive and pinned until it is unlinked, so the pointers may be followed from
// whichever thread holds the lock.
unsafe impl Send for WaiterList {}

/// A chain of timepoints cut out of a list, in FIRING state, to be notified outside the lock.
pub(super) struct FiredChain {
    head: *mut Timepoint<'static>,
}

impl WaiterList {
    pub(super) const fn new() -> WaiterList {
        WaiterList { head: ptr::null_mut() }
    }

    /// Links `timepoint`; the caller has checked it is IDLE or DONE and holds the lock.
    ///
    /// # Safety
    /// `timepoint` stays alive and pinned until it is unlinked (cancelled or fired and DONE).
    pub(super) unsafe fn insert(&mut self, timepoint: &Timepoint<'_>, minimum: u64) {
        timepoint.minimum.store(minimum, Ordering::Relaxed);
        // Relaxed: the state is only read under the lock or, for FIRING/DONE, with the
        // Acquire/Release pair documented on `is_done`; ARMED carries no data across threads
        // that the lock does not already order.
        timepoint.state.store(ARMED, Ordering::Relaxed);
        let node = timepoint.erased();
        let mut previous: *mut Timepoint<'static> = ptr::null_mut();
        let mut current = self.head;
        // SAFETY: every pointer reached from `head` is a linked timepoint, alive and pinned by
        // the arm contract, and we hold the lock that guards the links.
        unsafe {
            while !current.is_null() && (*current).minimum.load(Ordering::Relaxed) <= minimum {
                previous = current;
                current = (*current).next.load(Ordering::Relaxed);
            }
            timepoint.next.store(current, Ordering::Relaxed);
            if previous.is_null() {
                self.head = node;
            } else {
                (*previous).next.store(node, Ordering::Relaxed);
            }
        }
    }

    /// Unlinks `timepoint` if it is in this list. Returns whether it was.
    pub(super) fn remove(&mut self, timepoint: &Timepoint<'_>) -> bool {
        let node = timepoint.erased();
        let mut previous: *mut Timepoint<'static> = ptr::null_mut();
        let mut current = self.head;
        // SAFETY: as in `insert`: every node reachable from `head` is alive and linked, and we
        // hold the lock.
        unsafe {
            while !current.is_null() {
                if current == node {
                    let after = timepoint.next.load(Ordering::Relaxed);
                    if previous.is_null() {
                        self.head = after;
                    } else {
                        (*previous).next.store(after, Ordering::Relaxed);
                    }
                    timepoint.next.store(ptr::null_mut(), Ordering::Relaxed);
                    timepoint.state.store(IDLE, Ordering::Relaxed);
                    return true;
                }
                previous = current;
                current = (*current).next.load(Ordering::Relaxed);
            }
        }
        false
    }

    /// Cuts out every timepoint with minimum ≤ `value` (all of them for `u64::MAX`), marking
    /// each FIRING.
    pub(super) fn cut_through(&mut self, value: u64) -> FiredChain {
        let head = self.head;
        let mut last: *mut Timepoint<'static> = ptr::null_mut();
        let mut current = head;
        // SAFETY: nodes reachable from `head` are alive (arm contract); we hold the lock.
        unsafe {
            while !current.is_null() && (*current).minimum.load(Ordering::Relaxed) <= value {
                (*current).state.store(FIRING, Ordering::Relaxed);
                last = current;
                current = (*current).next.load(Ordering::Relaxed);
            }
            if last.is_null() {
                return FiredChain::empty();
            }
            (*last).next.store(ptr::null_mut(), Ordering::Relaxed);
        }
        self.head = current;
        FiredChain { head }
    }

    /// Cuts out every timepoint with `after < minimum ≤ through` (the waiters of a cancelled
    /// signal's values), marking each FIRING; the others stay linked in order.
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub(super) fn cut_range(&mut self, after: u64, through: u64) -> FiredChain {
        let mut previous: *mut Timepoint<'static> = ptr::null_mut();
        let mut current = self.head;
        // SAFETY: nodes reachable from `head` are alive (arm contract); we hold the lock.
        unsafe {
            while !current.is_null() && (*current).minimum.load(Ordering::Relaxed) <= after {
                previous = current;
                current = (*current).next.load(Ordering::Relaxed);
            }
            let first = current;
            let mut last: *mut Timepoint<'static> = ptr::null_mut();
            while !current.is_null() && (*current).minimum.load(Ordering::Relaxed) <= through {
                (*current).state.store(FIRING, Ordering::Relaxed);
                last = current;
                current = (*current).next.load(Ordering::Relaxed);
            }
            if last.is_null() {
                return FiredChain::empty();
            }
            (*last).next.store(ptr::null_mut(), Ordering::Relaxed);
            if previous.is_null() {
                self.head = current;
            } else {
                (*previous).next.store(current, Ordering::Relaxed);
            }
            FiredChain { head: first }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.head.is_null()
    }
}

impl FiredChain {
    pub(super) const fn empty() -> FiredChain {
        FiredChain { head: ptr::null_mut() }
    }

    /// Calls every callback in the chain with `outcome`, then marks each DONE. Must run after
    /// the semaphore lock is released.
    pub(super) fn notify_all(self, outcome: Outcome) {
        let mut current = self.head;
        while !current.is_null() {
            // SAFETY: a FIRING timepoint is kept alive by its owner (the arm contract, and
            // `cancel` spinning until DONE); nobody else writes its fields meanwhile.
            let node = unsafe { &*current };
            current = node.next.load(Ordering::Relaxed);
            node.notify.notify(outcome);
            // Release pairs with the Acquire loads in `is_done`, `is_busy` and the `cancel`
            // spin: the callback's effects happen-before the owner sees DONE. This is the last
            // access to the node.
            node.state.store(DONE, Ordering::Release);
        }
    }
}

/// What `cancel` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cancelled {
    /// Unlinked before it fired; the callback will not run.
    Unlinked,
    /// It had fired; its callback has returned.
    AlreadyFired,
    /// It was not armed on this semaphore.
    NotArmed,
}

/// Waits, with the callback's [`Notify::while_firing`], until a FIRING timepoint's callback
/// returns (bounded by the callback's length).
pub(super) fn wait_until_not_firing(timepoint: &Timepoint<'_>) {
    // Acquire pairs with the Release store of DONE in `notify_all`.
    while timepoint.state.load(Ordering::Acquire) == FIRING {
        timepoint.notify.while_firing();
    }
}

/// Whether the state says the timepoint may be armed now.
pub(super) fn is_armable(timepoint: &Timepoint<'_>) -> bool {
    // Acquire pairs with the Release store of DONE in `notify_all`: the last firer's accesses
    // happen-before the timepoint is linked again.
    matches!(timepoint.state.load(Ordering::Acquire), IDLE | DONE)
}

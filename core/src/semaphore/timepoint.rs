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
///
/// Besides the head it keeps the last node, `tail` (null exactly when `head` is): a consumer
/// that waits on each next value of a producer's timeline arms in ascending order, and each of
/// those arms appends in constant time instead of walking every earlier waiter (a queue
/// submitted n operations deep on one semaphore armed in O(n²) without it).
pub(super) struct WaiterList {
    head: *mut Timepoint<'static>,
    tail: *mut Timepoint<'static>,
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
        WaiterList { head: ptr::null_mut(), tail: ptr::null_mut() }
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
        // SAFETY: every pointer reached from `head` (and `tail`, the last of them) is a linked
        // timepoint, alive and pinned by the arm contract, and we hold the lock that guards the
        // links.
        unsafe {
            // FIFO among equals: a minimum equal to the last one's goes after it too.
            if !self.tail.is_null() && (*self.tail).minimum.load(Ordering::Relaxed) <= minimum {
                timepoint.next.store(ptr::null_mut(), Ordering::Relaxed);
                (*self.tail).next.store(node, Ordering::Relaxed);
                self.tail = node;
                return;
            }
            let mut previous: *mut Timepoint<'static> = ptr::null_mut();
            let mut current = self.head;
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
            if current.is_null() {
                self.tail = node;
            }
        }
    }

    /// Unlinks `timepoint` if it is in this list. Returns whether it was.
    ///
    /// A timepoint that is not ARMED is in no list (a cut marks it FIRING as it unlinks it), so
    /// the common cancel — after the wait was fired — costs one load instead of a walk over
    /// every waiter still armed here.
    pub(super) fn remove(&mut self, timepoint: &Timepoint<'_>) -> bool {
        // Relaxed: ARMED is written under the lock of the list it joins, held here when that
        // list is this one; any other value, or ARMED on another list, means not in this one.
        if timepoint.state.load(Ordering::Relaxed) != ARMED {
            return false;
        }
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
                    if after.is_null() {
                        self.tail = previous;
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
    /// each FIRING. Inlined into the completion that cuts on hosted targets (see
    /// `Semaphore::cut_reached`).
    #[cfg_attr(not(target_os = "none"), inline(always))]
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
        if current.is_null() {
            self.tail = ptr::null_mut();
        }
        FiredChain { head }
    }

    /// Cuts out every timepoint with `after < minimum ≤ through` that `keep` refuses, marking
    /// each FIRING; the others stay linked in order. It walks the list only up to `through`:
    /// the waiters of the values one signal covers (all of `after < minimum ≤ through` when it
    /// was cancelled), or those no live signal holds back when a signal's operation ended or,
    /// with `through = u64::MAX`, when the timeline failed (rare).
    #[inline]
    pub(super) fn cut_unless(
        &mut self,
        after: u64,
        through: u64,
        keep: impl Fn(u64) -> bool,
    ) -> FiredChain {
        let mut fired = FiredChain::empty();
        let mut fired_tail: *mut Timepoint<'static> = ptr::null_mut();
        let mut previous: *mut Timepoint<'static> = ptr::null_mut();
        let mut current = self.head;
        // SAFETY: nodes reachable from `head` are alive (arm contract); we hold the lock. Each
        // node walked either stays linked after `previous` or moves to the fired chain.
        unsafe {
            while !current.is_null() {
                let minimum = (*current).minimum.load(Ordering::Relaxed);
                if minimum > through {
                    break;
                }
                let next = (*current).next.load(Ordering::Relaxed);
                if minimum <= after || keep(minimum) {
                    previous = current;
                } else {
                    if previous.is_null() {
                        self.head = next;
                    } else {
                        (*previous).next.store(next, Ordering::Relaxed);
                    }
                    (*current).state.store(FIRING, Ordering::Relaxed);
                    (*current).next.store(ptr::null_mut(), Ordering::Relaxed);
                    if fired_tail.is_null() {
                        fired.head = current;
                    } else {
                        (*fired_tail).next.store(current, Ordering::Relaxed);
                    }
                    fired_tail = current;
                }
                current = next;
            }
        }
        if current.is_null() {
            self.tail = previous;
        }
        fired
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
    /// the semaphore lock is released. Inlined on hosted targets: a loop around one dynamic
    /// call, and a frame of its own cost every completion about thirteen instructions.
    #[cfg_attr(not(target_os = "none"), inline(always))]
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

#[cfg(all(test, not(loom)))]
mod tests {
    use std::boxed::Box;
    use std::pin::Pin;
    use std::vec::Vec;

    use proptest::prelude::*;

    use super::*;

    const TIMEPOINTS: usize = 6;

    struct Quiet;

    impl Notify for Quiet {
        fn notify(&self, _outcome: Outcome) {}
    }

    static QUIET: Quiet = Quiet;

    #[derive(Clone, Debug)]
    enum Step {
        Arm {
            id: usize,
            minimum: u64,
        },
        Cancel(usize),
        CutThrough(u64),
        CutRange {
            after: u64,
            through: u64,
        },
        /// Above `after` and up to `through` (6 and more: all of them), keeps the minimums
        /// whose bit is set in the mask.
        CutUnless {
            after: u64,
            through: u64,
            mask: u8,
        },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0..TIMEPOINTS, 0..6u64).prop_map(|(id, minimum)| Step::Arm { id, minimum }),
            2 => (0..TIMEPOINTS).prop_map(Step::Cancel),
            1 => (0..6u64).prop_map(Step::CutThrough),
            1 => (0..6u64, 0..6u64).prop_map(|(a, b)| Step::CutRange {
                after: a.min(b),
                through: a.max(b),
            }),
            1 => (0..4u64, 0..8u64, any::<u8>()).prop_map(|(after, through, mask)| {
                Step::CutUnless { after, through: if through >= 6 { u64::MAX } else { through }, mask }
            }),
        ]
    }

    /// Indices of the timepoints from `head` on; checks that `tail` is the last one when given.
    fn walk(
        head: *mut Timepoint<'static>,
        tail: Option<*mut Timepoint<'static>>,
        timepoints: &[Pin<Box<Timepoint<'static>>>],
    ) -> Vec<usize> {
        let mut order = Vec::new();
        let mut last = ptr::null_mut();
        let mut current = head;
        while !current.is_null() {
            let id = timepoints.iter().position(|t| t.erased() == current);
            order.push(id.expect("only the test's timepoints are linked"));
            last = current;
            // SAFETY: every linked node is one of `timepoints`, alive for the whole test.
            current = unsafe { (*current).next.load(Ordering::Relaxed) };
        }
        if let Some(tail) = tail {
            assert_eq!(tail, last, "tail is the last node");
        }
        order
    }

    /// Removes the model's entries that `fired` selects, returning their ids in list order.
    fn cut(model: &mut Vec<(u64, usize)>, fired: impl Fn(u64) -> bool) -> Vec<usize> {
        let ids = model.iter().filter(|&&(minimum, _)| fired(minimum)).map(|&(_, id)| id);
        let ids: Vec<usize> = ids.collect();
        model.retain(|&(minimum, _)| !fired(minimum));
        ids
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config())]

        /// The list against a model (a vector kept sorted by minimum, FIFO among equals): the
        /// same order, the same timepoints cut and removed, and `tail` on the last node after
        /// every step, through appends, inserts in the middle, removal of the last node and
        /// cuts that empty the list.
        #[test]
        fn the_waiter_list_keeps_model_order_and_its_tail(
            steps in proptest::collection::vec(step(), 1..60)
        ) {
            let timepoints: Vec<Pin<Box<Timepoint<'static>>>> =
                (0..TIMEPOINTS).map(|_| Box::pin(Timepoint::new(&QUIET))).collect();
            let mut list = WaiterList::new();
            let mut model: Vec<(u64, usize)> = Vec::new();
            for step in steps {
                match step {
                    Step::Arm { id, minimum } => {
                        if model.iter().any(|&(_, linked)| linked == id) {
                            continue;
                        }
                        // SAFETY: the timepoint is pinned in its box, which outlives `list`'s
                        // use of it (both live to the end of the case).
                        unsafe { list.insert(&timepoints[id], minimum) };
                        let at = model.partition_point(|&(linked, _)| linked <= minimum);
                        model.insert(at, (minimum, id));
                    }
                    Step::Cancel(id) => {
                        let linked = model.iter().any(|&(_, linked)| linked == id);
                        prop_assert_eq!(list.remove(&timepoints[id]), linked);
                        model.retain(|&(_, other)| other != id);
                    }
                    Step::CutThrough(value) => {
                        let chain = list.cut_through(value);
                        let fired = walk(chain.head, None, &timepoints);
                        prop_assert_eq!(fired, cut(&mut model, |minimum| minimum <= value));
                        chain.notify_all(Ok(value));
                    }
                    Step::CutRange { after, through } => {
                        let chain = list.cut_unless(after, through, |_| false);
                        let fired = walk(chain.head, None, &timepoints);
                        let expected = cut(&mut model, |m| after < m && m <= through);
                        prop_assert_eq!(fired, expected);
                        chain.notify_all(Ok(through));
                    }
                    Step::CutUnless { after, through, mask } => {
                        let keep = |minimum: u64| mask & (1 << minimum) != 0;
                        let chain = list.cut_unless(after, through, keep);
                        let fired = walk(chain.head, None, &timepoints);
                        let expected = cut(&mut model, |m| after < m && m <= through && !keep(m));
                        prop_assert_eq!(fired, expected);
                        chain.notify_all(Err(Failure::Aborted));
                    }
                }
                let ids: Vec<usize> = model.iter().map(|&(_, id)| id).collect();
                prop_assert_eq!(walk(list.head, Some(list.tail), &timepoints), ids);
                prop_assert_eq!(list.is_empty(), model.is_empty());
            }
        }
    }
}

//! Timeline semaphores that carry frontiers.
//!
//! A [`Semaphore`] is a monotonic `u64` timeline plus a bounded [`History`] of the signals that
//! advanced it, each with the frontier of the operation that signalled. Waiters import the
//! frontier of the *first* signal that reached their value (the late-waiter rule), so knowledge
//! flows transitively through every signal without round trips.
//!
//! # Concurrency
//!
//! - The reached value is mirrored in one atomic: [`Semaphore::value`] is a single Acquire load
//!   that pairs with the Release store made when a signal completes, so a reader that sees
//!   `value ≥ v` also sees everything the signaller did before signalling.
//! - History and waiter list sit behind one short lock (a spin lock; with the `isr-safe`
//!   feature, taken inside a critical section so interrupt handlers may signal on bare metal).
//! - Timepoint callbacks run after the lock is released (see [`timepoint`]).
//!
//! # Failure
//!
//! The first [`Failure`] wins and is sticky for every value the timeline had not reached: every
//! later lookup of such a value returns it (a waiter submitted now imports nothing and fails at
//! once), every wait on it ends with it, and further signals are refused. A value reached
//! before the failure stays reached — a wait on it succeeds and its lookup imports the signal
//! that reached it — because that signal completed before anything failed, so the waiter
//! depends on nothing the failure concerns (cancelling speculative work that shares a
//! semaphore with accepted work leaves the waits on the accepted values alone).
//!
//! # A wait ends after its signal
//!
//! A wait — a timepoint, and so every device gate, host wait and awaited future built on one —
//! never ends before the signal it waits for has ended: reached, or failed *and* its operation
//! over. A waiter imported that signal's frontier when it was submitted (the operation and
//! everything it knew), and whatever follows the waiter relies on all of it having ended: the
//! queue's next operation elides waits by it, a buffer is reused by it, a host frees memory
//! once its wait returns. Told of a failure early, the waiter would end — and what follows it
//! would start — alongside work its frontier says has ended.
//!
//! So a failure from outside the signallers ([`fail`](Semaphore::fail): a host's decision, a
//! peer's report, an out-of-order completion) tells at once only the waits that no *live*
//! signal covers (submitted, tracked, and its operation not ended: [`History::is_live_at`]);
//! the others are told when that operation ends — its retirement completes the signal too late
//! to reach the value ([`complete_signal`](Semaphore::complete_signal)), or fails it
//! ([`fail_signal`](Semaphore::fail_signal), what [`queue::retire`](crate::queue::retire)
//! does for a failed operation). A timepoint armed after the failure on a value a live signal
//! covers waits the same way. [`abandon`](Semaphore::abandon) ends every signal at once, for a
//! timeline whose signallers are gone (a dead rank). The same holds for a signal marked
//! cancelled ahead of its operation's end ([`mark_cancelled`](Semaphore::mark_cancelled)): a
//! lookup fails at once, armed waits end when the operation does.
//!
//! A wait placed before its signal existed and whose signal only work queued behind the waiter
//! submits is a deadlock; a failure of the timeline does not release it once that signal is
//! live (the wait may be for that very work), a shutdown does.
//!
//! A *cancelled signal* (`Semaphore::cancel_signal`, with the `signal-cancellation` feature)
//! is a failure with a point: it fails only the values that one signal would have reached,
//! while signals above it — accepted work that does not depend on the cancelled operation —
//! still complete, and waits on their values succeed with their signallers' frontiers. The
//! timeline value stays monotonic, but a value inside a cancelled range stays failed after
//! the timeline passes it, so success is decided by [`failure_for`](Semaphore::failure_for),
//! [`lookup`](Semaphore::lookup) or a timepoint, never by comparing with
//! [`value`](Semaphore::value) alone. The rule and why it is sound are in [`History`]'s
//! module docs ("Cancelled signals").

mod history;
pub mod timepoint;

use core::fmt;
use core::pin::Pin;

pub use history::{
    History, HistoryEntry, HistorySlots, Lookup, SlotCountError, MAX_HISTORY_SLOTS,
    MIN_HISTORY_SLOTS,
};
pub use timepoint::{Cancelled, Notify, Outcome, Timepoint};

use crate::frontier::{Frontier, Point};
use crate::scope::{Endpoint, Scope};
use crate::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use crate::sync::Lock;
pub(crate) use history::LookupRef;
use timepoint::{FiredChain, WaiterList};

/// Why a timeline failed: one vocabulary across every driver. The first failure of a semaphore
/// wins.
///
/// A failure means the same on every driver, so a waiter on another driver, a host, another
/// rank or C code reads it without knowing who failed:
///
/// | variant | the work | raw code |
/// |---|---|---|
/// | `Cancelled` | cancelled (or its speculation rejected) before it ran to its end | — |
/// | `Aborted` | stopped through no fault of its own (a shutdown, a signal already failed) | — |
/// | `Faulted` | ran and failed: a kernel faulted, a command was refused, work panicked | the driver's |
/// | `DeviceLost` | cannot run: its device (or driver) is gone | — |
/// | `OutOfMemory` | could not get the memory it needed | — |
/// | `Application` | a host function returned it | the application's |
/// | `OutOfOrderSignal` | signals completed out of value order | — |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// The work was cancelled, explicitly or because the speculation it depended on was
    /// rejected, before it ran to its end.
    Cancelled,
    /// The work was stopped, or never started, through no fault of its own: its device shut
    /// down while it ran, or a semaphore it was to signal had already failed.
    Aborted,
    /// The device executing the signaller was lost (or its driver broke its contract).
    DeviceLost,
    /// Signals completed out of value order (a broken timeline contract).
    OutOfOrderSignal,
    /// The device executing the signaller could not allocate the memory the work needed.
    OutOfMemory,
    /// An application-defined status code.
    Application(u32),
    /// The work ran and failed: a kernel faulted, the device refused or failed a command, a CPU
    /// kernel or host function panicked. The code is the driver's own, as its device reported
    /// it (an NPU descriptor's completion code, a DMA engine's status), which the driver
    /// documents; a panic on the host is [`Failure::PANICKED`].
    Faulted(u32),
}

impl Failure {
    /// The raw code of work that panicked on the host (a CPU kernel, a host function): no
    /// device reports it.
    pub const PANIC_CODE: u32 = u32::MAX;

    /// Work that panicked on the host, on any driver.
    pub const PANICKED: Failure = Failure::Faulted(Failure::PANIC_CODE);
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Cancelled => f.write_str("cancelled"),
            Failure::Aborted => f.write_str("aborted"),
            Failure::DeviceLost => f.write_str("device lost"),
            Failure::OutOfOrderSignal => f.write_str("signals completed out of order"),
            Failure::OutOfMemory => f.write_str("out of device memory"),
            Failure::Application(code) => write!(f, "application failure {code}"),
            Failure::Faulted(Failure::PANIC_CODE) => f.write_str("work panicked"),
            Failure::Faulted(code) => write!(f, "work faulted (driver code {code:#x})"),
        }
    }
}

impl core::error::Error for Failure {}

impl Failure {
    /// Packs the failure into one non-zero word, so a "first failure wins" slot can be a
    /// single atomic whose zero means "no failure".
    pub const fn to_word(self) -> u64 {
        let (tag, payload): (u64, u32) = match self {
            Failure::Cancelled => (1, 0),
            Failure::Aborted => (2, 0),
            Failure::DeviceLost => (3, 0),
            Failure::OutOfOrderSignal => (4, 0),
            Failure::Application(code) => (5, code),
            Failure::OutOfMemory => (6, 0),
            Failure::Faulted(code) => (7, code),
        };
        tag << 32 | payload as u64
    }

    /// Unpacks a word made by [`to_word`](Self::to_word); `None` for zero (no failure) and for
    /// words no failure packs to.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub const fn from_word(word: u64) -> Option<Failure> {
        let payload = word as u32;
        match word >> 32 {
            1 => Some(Failure::Cancelled),
            2 => Some(Failure::Aborted),
            3 => Some(Failure::DeviceLost),
            4 => Some(Failure::OutOfOrderSignal),
            5 => Some(Failure::Application(payload)),
            6 => Some(Failure::OutOfMemory),
            7 => Some(Failure::Faulted(payload)),
            _ => None,
        }
    }
}

/// Why a signal was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalError {
    /// The value does not advance the timeline past `current`.
    NotAdvancing {
        /// The refused value.
        value: u64,
        /// The value it had to exceed.
        current: u64,
    },
    /// Every history slot holds a pending signal (or the newest reached one).
    HistoryFull {
        /// History capacity.
        capacity: usize,
    },
    /// Completing a signal that was never submitted.
    NotSubmitted {
        /// The value with no submitted signal.
        value: u64,
    },
    /// `value` completed while the smaller `pending` value had not; the timeline has failed.
    OutOfOrder {
        /// The value that completed.
        value: u64,
        /// The smaller value still pending.
        pending: u64,
    },
    /// The semaphore's scope does not reach the signaller.
    OutOfScope,
    /// The timeline has failed.
    Failed(Failure),
}

impl fmt::Display for SignalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SignalError::NotAdvancing { value, current } => {
                write!(f, "signal value {value} does not advance past {current}")
            }
            SignalError::HistoryFull { capacity } => {
                write!(f, "all {capacity} history slots hold pending signals")
            }
            SignalError::NotSubmitted { value } => {
                write!(f, "no signal to value {value} was submitted")
            }
            SignalError::OutOfOrder { value, pending } => {
                write!(f, "value {value} completed before pending value {pending}")
            }
            SignalError::OutOfScope => f.write_str("semaphore scope does not reach the signaller"),
            SignalError::Failed(failure) => write!(f, "semaphore failed: {failure}"),
        }
    }
}

impl core::error::Error for SignalError {}

/// What arming a timepoint did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Arm {
    /// Linked: the callback will run when the value is reached or the timeline fails.
    Armed,
    /// Already decided; nothing was linked and the callback will not run.
    Ready(Outcome),
}

/// Why a timepoint could not be armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArmError {
    /// The timepoint is armed (here or elsewhere) or its callback is running.
    Busy,
}

impl fmt::Display for ArmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArmError::Busy => f.write_str("timepoint is already armed or firing"),
        }
    }
}

impl core::error::Error for ArmError {}

struct State<const H: usize, const N: usize, S> {
    history: History<H, N, S>,
    waiters: WaiterList,
}

/// A timeline semaphore with a frontier history of capacity-`N` frontiers, kept in the slots
/// `S`: by default an inline array of `H` slots (`const`-constructible, for statics and
/// firmware); hosted code may give it slots sized at run time ([`with_slots`]), and then `H`
/// is unused.
///
/// [`with_slots`]: Semaphore::with_slots
pub struct Semaphore<const H: usize = 8, const N: usize = 8, S = [HistoryEntry<N>; H]> {
    value: AtomicU64,
    failed: AtomicU8,
    /// Non-zero once a signal was cancelled: only then can a value the timeline passed fail,
    /// so `failure_for` takes the lock to look.
    #[cfg(any(test, feature = "signal-cancellation"))]
    cancelled: AtomicU8,
    scope: Scope,
    home: Endpoint,
    state: Lock<State<H, N, S>>,
}

impl<const H: usize, const N: usize> Semaphore<H, N> {
    /// A semaphore at `initial`, visible within `scope` around `home` (its creator), with a
    /// history of `H` inline slots.
    #[cfg(not(loom))]
    pub const fn new(initial: u64, scope: Scope, home: Endpoint) -> Semaphore<H, N> {
        Semaphore::from_history(History::new(initial), initial, scope, home)
    }

    /// A semaphore at `initial`, visible within `scope` around `home` (its creator), with a
    /// history of `H` inline slots.
    #[cfg(loom)]
    pub fn new(initial: u64, scope: Scope, home: Endpoint) -> Semaphore<H, N> {
        Semaphore::from_history(History::new(initial), initial, scope, home)
    }
}

impl<const H: usize, const N: usize, S> Semaphore<H, N, S> {
    #[cfg(not(loom))]
    const fn from_history(
        history: History<H, N, S>,
        initial: u64,
        scope: Scope,
        home: Endpoint,
    ) -> Semaphore<H, N, S> {
        Semaphore {
            value: AtomicU64::new(initial),
            failed: AtomicU8::new(0),
            #[cfg(any(test, feature = "signal-cancellation"))]
            cancelled: AtomicU8::new(0),
            scope,
            home,
            state: Lock::new(State { history, waiters: WaiterList::new() }),
        }
    }

    #[cfg(loom)]
    fn from_history(
        history: History<H, N, S>,
        initial: u64,
        scope: Scope,
        home: Endpoint,
    ) -> Semaphore<H, N, S> {
        Semaphore {
            value: AtomicU64::new(initial),
            failed: AtomicU8::new(0),
            #[cfg(any(test, feature = "signal-cancellation"))]
            cancelled: AtomicU8::new(0),
            scope,
            home,
            state: Lock::new(State { history, waiters: WaiterList::new() }),
        }
    }
}

impl<const H: usize, const N: usize, S: HistorySlots<N>> Semaphore<H, N, S> {
    /// A semaphore at `initial`, visible within `scope` around `home` (its creator), whose
    /// history lives in `slots` (2..=65535 of them; their contents are ignored). Size them from
    /// what the workload keeps pending at once: a full history makes signallers wait
    /// ([`SignalError::HistoryFull`], [`room_at`](Self::room_at)).
    pub fn with_slots(
        slots: S,
        initial: u64,
        scope: Scope,
        home: Endpoint,
    ) -> Result<Semaphore<H, N, S>, SlotCountError> {
        Ok(Semaphore::from_history(History::with_slots(slots, initial)?, initial, scope, home))
    }

    /// The reached value: one atomic load.
    pub fn value(&self) -> u64 {
        // Acquire pairs with the Release store in `complete_signal`/`signal_external`: seeing
        // the value means seeing what the signaller wrote before it.
        self.value.load(Ordering::Acquire)
    }

    /// The first failure, if the timeline failed.
    pub fn failure(&self) -> Option<Failure> {
        // Acquire pairs with the Release store in `fail_locked`; the status itself is read
        // under the lock.
        if self.failed.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.state.with(|state| state.history.failure())
    }

    /// The failure a wait for `minimum` meets, if any: the timeline's failure, unless the
    /// timeline had reached `minimum` before it failed (see "Failure" in the module docs), or
    /// [`Failure::Cancelled`] when the signal that would have reached `minimum` was cancelled.
    /// A failed timeline never advances again and a cancellation is never taken back, so a
    /// `Some` is final, and so is a `None` for a failed timeline.
    #[inline]
    pub fn failure_for(&self, minimum: u64) -> Option<Failure> {
        let failure = self.failure().filter(|_| self.value() < minimum);
        #[cfg(any(test, feature = "signal-cancellation"))]
        // The history itself is read under the lock.
        let failure = failure.or_else(|| {
            (self.has_cancelled_signals()
                && self.state.with(|state| state.history.cancels(minimum)))
            .then_some(Failure::Cancelled)
        });
        failure
    }

    /// Cancels the pending signal to `value`: its operation will never run. Waits on the values
    /// it would have reached — above the signal recorded before it, up to `value` — fail with
    /// [`Failure::Cancelled`] (armed timepoints among them are notified now); signals above it
    /// still complete (see "Failure" in the module docs). Cancelling a signal twice is harmless.
    ///
    /// Refused for a failed timeline, a value already reached and a value with no submitted
    /// signal (see [`History::cancel`]): a caller that must not leave waiters hanging fails
    /// the timeline instead ([`fail`](Self::fail)), as [`queue::retire`](crate::queue::retire)
    /// does.
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn cancel_signal(&self, value: u64) -> Result<(), SignalError> {
        let (result, fired) = self.state.with(|state| match state.history.cancel(value) {
            Ok(after) => {
                // Release pairs with the Acquire load in `failure_for`.
                self.cancelled.store(1, Ordering::Release);
                (Ok(()), state.waiters.cut_unless(after, value, |_| false))
            }
            Err(error) => (Err(error), FiredChain::empty()),
        });
        fired.notify_all(Err(Failure::Cancelled));
        result
    }

    /// Marks the pending signal to `value` cancelled ahead of its operation's end (see
    /// [`History::mark_cancelled`]): a lookup of the values it covers fails from now on, so
    /// nothing submitted later imports it, and accepted signals above it may complete; waits
    /// armed on those values end when the operation does ([`cancel_signal`]). Refused as
    /// `cancel_signal` is.
    ///
    /// [`cancel_signal`]: Self::cancel_signal
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn mark_cancelled(&self, value: u64) -> Result<(), SignalError> {
        self.state.with(|state| {
            state.history.mark_cancelled(value)?;
            // Release pairs with the Acquire load in `failure_for`.
            self.cancelled.store(1, Ordering::Release);
            Ok(())
        })
    }

    /// Whether any signal was cancelled since the semaphore was created or reset (some waits on
    /// it fail although the timeline itself has not).
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn has_cancelled_signals(&self) -> bool {
        // Acquire pairs with the Release store in `cancel_signal`.
        self.cancelled.load(Ordering::Acquire) != 0
    }

    /// [`has_cancelled_signals`](Self::has_cancelled_signals) for a caller holding the lock,
    /// which skips the history search of `History::cancels` on a timeline that never had a
    /// signal cancelled. `false` means no entry of the history was ever marked cancelled,
    /// retained or evicted, so `cancels` is `false` for every value: each history change that
    /// marks one (`cancel_signal`, `mark_cancelled`, `settle_untold`) stores the flag in the
    /// same hold of the lock, and `reset` clears both in one (the histories start empty).
    /// Relaxed: the lock orders the load with those stores, all made under it.
    #[cfg(any(test, feature = "signal-cancellation"))]
    fn cancelled_locked(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) != 0
    }

    /// Marks the signal to `value` as coming from an operation that depended on rejected
    /// speculation but had already started (see [`History::mark_ran_on_rejected`]); returns
    /// whether the signal was found.
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn mark_ran_on_rejected(&self, value: u64) -> bool {
        self.state.with(|state| state.history.mark_ran_on_rejected(value))
    }

    /// Whether a wait on `S ≥ minimum` consumes the signal of an operation that ran on rejected
    /// speculation (see [`History::ran_on_rejected`]).
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn ran_on_rejected(&self, minimum: u64) -> bool {
        self.state.with(|state| state.history.ran_on_rejected(minimum))
    }

    /// The scope fixed at creation.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// Where the semaphore was created.
    pub fn home(&self) -> Endpoint {
        self.home
    }

    /// Whether a participant at `endpoint` may wait on or signal this semaphore.
    pub fn admits(&self, endpoint: &Endpoint) -> bool {
        self.scope.admits(&self.home, endpoint)
    }

    /// Records a submitted (pending) signal to `value` by the operation at `origin`, carrying
    /// its frontier. Waits submitted from now on can import it before it completes.
    pub fn submit_signal<const M: usize>(
        &self,
        value: u64,
        origin: Point,
        frontier: &Frontier<M>,
    ) -> Result<(), SignalError> {
        self.state.with(|state| state.history.record(value, Some(origin), frontier))
    }

    /// Reserves `value` for a signal of an operation still being submitted (see
    /// [`History::reserve`]); the queue fills or withdraws it before the submission ends.
    pub(crate) fn reserve_signal(&self, value: u64) -> Result<(), SignalError> {
        self.state.with(|state| state.history.reserve(value))
    }

    /// Fills the reservation of `value` with its operation's position and frontier.
    pub(crate) fn fill_signal<const M: usize>(
        &self,
        value: u64,
        origin: Point,
        frontier: &Frontier<M>,
    ) -> bool {
        self.state.with(|state| state.history.fill(value, origin, frontier))
    }

    /// Withdraws the reservation of `value`: its operation was refused.
    pub(crate) fn withdraw_signal(&self, value: u64) -> bool {
        #[cfg(any(test, feature = "signal-cancellation"))]
        {
            let (withdrawn, fired) = self.state.with(|state| {
                let withdrawn = state.history.withdraw(value);
                // A cancelled signal just above the withdrawn value now covers it: waiters
                // armed on the values the reservation covered fail with it.
                // Unless that signal's operation has not ended: they end with it.
                let ended = !state.history.is_live_at(value);
                match state.history.cancelled_range(value).filter(|_| withdrawn && ended) {
                    Some((after, through)) => {
                        (true, state.waiters.cut_unless(after, through, |_| false))
                    }
                    None => (withdrawn, FiredChain::empty()),
                }
            });
            fired.notify_all(Err(Failure::Cancelled));
            withdrawn
        }
        #[cfg(not(any(test, feature = "signal-cancellation")))]
        self.state.with(|state| state.history.withdraw(value))
    }

    /// Completes the submitted signal to `value`: advances the timeline and fires every
    /// timepoint at or below it (after the lock is released).
    ///
    /// On a failed timeline the value is not reached, but the signal's operation has ended:
    /// the waits its signal covered are told of the failure now (see "A wait ends after its
    /// signal" in the module docs).
    pub fn complete_signal(&self, value: u64) -> Result<(), SignalError> {
        self.reach_then_fire(value, |history| history.reach(value))
    }

    /// The first half of retiring an operation that completes several signals: settles its
    /// signal to `value` with the operation's `result` — reached, failed, or (with the
    /// `signal-cancellation` feature) cancelled — without telling the waiters of that signal
    /// yet; [`tell_settled`](Self::tell_settled) does, once every signal of the operation is
    /// settled (see [`queue::retire`](crate::queue::retire) for why). Waiters a first failure
    /// of the timeline concerns and that do not wait on this signal are told now: what they
    /// wait for does not involve this operation.
    pub(crate) fn settle_untold(&self, value: u64, result: Result<(), Failure>) {
        let (fired, failure) = self.state.with(|state| {
            let failed_before = state.history.failure().is_some();
            let ended = match result {
                // Reached, but not published: `value`, `arm` and `lookup` go on seeing the
                // value before it until `publish_settled`, so that nobody learns this operation
                // ended while another of its signals is still pending.
                Ok(()) => match state.history.reach(value) {
                    Ok(()) => false,
                    Err(_) => state.history.failure().is_some(),
                },
                #[cfg(any(test, feature = "signal-cancellation"))]
                Err(Failure::Cancelled) if state.history.cancel(value).is_ok() => {
                    // Release pairs with the Acquire load in `failure_for`.
                    self.cancelled.store(1, Ordering::Release);
                    false
                }
                Err(failure) => {
                    state.history.fail(failure);
                    true
                }
            };
            if !ended {
                return (FiredChain::empty(), None);
            }
            let failure = state.history.failure();
            // Told before this signal ends, so that its own waiters are still held back.
            let fired = if failed_before {
                FiredChain::empty()
            } else {
                // Release pairs with the Acquire load in `failure`.
                self.failed.store(1, Ordering::Release);
                cut_unheld(state, u64::MAX)
            };
            state.history.end(value);
            (fired, failure)
        });
        if let Some(failure) = failure {
            fired.notify_all(Err(failure));
        }
    }

    /// The second step: publishes the value [`settle_untold`](Self::settle_untold) reached, so
    /// that [`value`](Self::value), lookups and new waits see it. Run for every signal of the
    /// operation before any is told, so that a waiter told of one sees the others reached.
    pub(crate) fn publish_settled(&self) {
        self.state.with(|state| {
            // Release pairs with the Acquire load in `value`.
            self.value.store(state.history.reached(), Ordering::Release);
        });
    }

    /// The last step: tells the waiters of the signal to `value` what
    /// [`settle_untold`](Self::settle_untold) decided — success to those at or below the
    /// reached value, the cancellation to those of a cancelled signal's values, the timeline's
    /// failure to those no live signal holds back any more.
    pub(crate) fn tell_settled(&self, value: u64) {
        let (cancelled, (reached, told), failed) = self.state.with(|state| {
            #[cfg(any(test, feature = "signal-cancellation"))]
            let cancelled = match state.history.cancelled_range(value) {
                Some((after, through)) if !state.history.is_live_at(value) => {
                    state.waiters.cut_unless(after, through, |_| false)
                }
                _ => FiredChain::empty(),
            };
            #[cfg(not(any(test, feature = "signal-cancellation")))]
            let cancelled = FiredChain::empty();
            let reached = state.history.reached();
            let told = self.cut_reached(state, reached);
            let failed = state.history.failure().map(|failure| (failure, cut_unheld(state, value)));
            (cancelled, (reached, told), failed)
        });
        cancelled.notify_all(Err(Failure::Cancelled));
        told.notify_all(Ok(reached));
        if let Some((failure, fired)) = failed {
            fired.notify_all(Err(failure));
        }
    }

    /// Submits and completes a signal in one step (a host or inline signal).
    pub fn signal<const M: usize>(
        &self,
        value: u64,
        origin: Point,
        frontier: &Frontier<M>,
    ) -> Result<(), SignalError> {
        self.reach_then_fire(value, |history| {
            history.record(value, Some(origin), frontier)?;
            history.reach(value)
        })
    }

    /// Advances the timeline from outside the scheduler's knowledge (an imported event, another
    /// process). Values up to `value` that no tracked signal covers become a taint window:
    /// waits on them import nothing and are never elided, until a tracked signal passes it.
    pub fn signal_external(&self, value: u64) -> Result<(), SignalError> {
        self.reach_then_fire(value, |history| {
            history.record(value, None, &Frontier::<N>::new())?;
            history.reach(value)
        })
    }

    /// Runs `reach` (which completes the signal to `value`, or tries to) under the lock, then
    /// fires what it decided: the waiters it reached, or — when the timeline is failed — the
    /// waiters of the signal to `value`, which has ended either way (all of them when `reach`
    /// itself failed the timeline).
    fn reach_then_fire(
        &self,
        value: u64,
        reach: impl FnOnce(&mut History<H, N, S>) -> Result<(), SignalError>,
    ) -> Result<(), SignalError> {
        let (result, fired, outcome) = self.state.with(|state| {
            let result = reach(&mut state.history);
            match (result, state.history.failure()) {
                (_, Some(failure)) => {
                    // Recording and reaching refuse a timeline that failed before them, and
                    // only that way: any other outcome means this call failed it.
                    let failed_before = matches!(result, Err(SignalError::Failed(_)));
                    (result, self.end_signal(state, value, !failed_before), Err(failure))
                }
                (Ok(()), None) => {
                    let reached = state.history.reached();
                    // Release pairs with the Acquire load in `value`.
                    self.value.store(reached, Ordering::Release);
                    (result, self.cut_reached(state, reached), Ok(reached))
                }
                (Err(_), None) => (result, FiredChain::empty(), Ok(0)),
            }
        });
        fired.notify_all(outcome);
        result
    }

    /// Fails the timeline from outside its signallers (a host's decision, a peer's report).
    /// The first failure wins (returns `true`) and every later wait on a value not reached
    /// sees it. Armed waits are told now, except those on values a live signal covers — its
    /// operation has not ended, and a waiter may have imported it: they are told when it ends
    /// ([`complete_signal`](Self::complete_signal) or [`fail_signal`](Self::fail_signal) by
    /// that operation's retirement). See "A wait ends after its signal" in the module docs.
    pub fn fail(&self, failure: Failure) -> bool {
        let (won, first, fired) = self.state.with(|state| {
            let won = state.history.fail(failure);
            let first = state.history.failure().unwrap_or(failure);
            let fired = if won { self.mark_failed(state) } else { FiredChain::empty() };
            (won, first, fired)
        });
        fired.notify_all(Err(first));
        won
    }

    /// The retirement of a failed operation that signals `value`: fails the timeline with
    /// `failure` (the first failure wins; returns whether this one did) and ends that signal,
    /// so the waits it covers are told now, with every wait no live signal holds back.
    pub fn fail_signal(&self, value: u64, failure: Failure) -> bool {
        let (won, first, fired) = self.state.with(|state| {
            let won = state.history.fail(failure);
            let first = state.history.failure().unwrap_or(failure);
            (won, first, self.end_signal(state, value, won))
        });
        fired.notify_all(Err(first));
        won
    }

    /// On a failed timeline, ends the signal to `value` (its operation is over) and cuts out
    /// the waiters that no live signal holds back any more: every such one when `first` (the
    /// failure is new), else those at or below `value`. Runs under the lock. Kept out of line:
    /// every completion inlines the path that reaches, and failures are rare.
    #[cold]
    #[inline(never)]
    fn end_signal(&self, state: &mut State<H, N, S>, value: u64, first: bool) -> FiredChain {
        state.history.end(value);
        if first {
            // Release pairs with the Acquire load in `failure`.
            self.failed.store(1, Ordering::Release);
        }
        cut_unheld(state, if first { u64::MAX } else { value })
    }

    /// Fails the timeline and ends every pending signal: their operations have ended or never
    /// will (the ranks that signal it died, or its exporter reported the failure once every
    /// signal it had announced had ended). Every armed wait is told now. Returns whether this
    /// failure was the first.
    pub fn abandon(&self, failure: Failure) -> bool {
        let (won, first, fired) = self.state.with(|state| {
            let won = state.history.fail(failure);
            let first = state.history.failure().unwrap_or(failure);
            state.history.end_all();
            (won, first, self.mark_failed(state))
        });
        fired.notify_all(Err(first));
        won
    }

    /// Cuts out the waiters a reach of `reached` satisfies: every one at or below it, except,
    /// while a signal marked cancelled has not ended, those its values cover (they fail when
    /// it ends). Runs under the lock. Inlined into the completion on hosted targets, as are
    /// `History::reach` and `WaiterList::cut_through`; bare-metal builds leave it to the
    /// compiler, for their flash budget.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn cut_reached(&self, state: &mut State<H, N, S>, reached: u64) -> FiredChain {
        #[cfg(any(test, feature = "signal-cancellation"))]
        if state.history.has_live_cancellations() {
            let history = &state.history;
            return state.waiters.cut_unless(0, reached, |minimum| {
                history.cancels(minimum) && history.is_live_at(minimum)
            });
        }
        state.waiters.cut_through(reached)
    }

    /// Publishes a failure already recorded in the history and cuts out every waiter that no
    /// live signal holds back, to be notified once the lock is released. Runs under the lock.
    fn mark_failed(&self, state: &mut State<H, N, S>) -> FiredChain {
        // Release pairs with the Acquire load in `failure`.
        self.failed.store(1, Ordering::Release);
        cut_unheld(state, u64::MAX)
    }

    /// When the history is full of pending signals, the value whose completion makes room
    /// for one more (see [`History::room_at`]); `None` when a signal would fit now.
    pub fn room_at(&self) -> Option<u64> {
        self.state.with(|state| state.history.room_at())
    }

    /// Whether a live signal covers a wait on `S ≥ value`: the signal's operation has not
    /// ended and a waiter may have imported it, so even a failure of the timeline does not end
    /// such a wait before that operation ends ([`History::is_live_at`]).
    pub fn is_live_at(&self, value: u64) -> bool {
        self.state.with(|state| state.history.is_live_at(value))
    }

    /// What a wait on `S ≥ value` imports (the late-waiter rule; see [`History::lookup`]).
    ///
    /// A signal that [`queue::retire`](crate::queue::retire) has settled but not yet published
    /// reads as not reached: its operation is still settling its other signals.
    pub fn lookup(&self, value: u64) -> Lookup<N> {
        self.with_lookup(value, |lookup| lookup.to_owned())
    }

    /// Runs `f` over [`lookup`](Self::lookup)'s answer, its frontier borrowed from the history,
    /// under the lock (keep `f` short: a wait merges the frontier there instead of copying it
    /// out and merging the copy).
    #[inline]
    pub(crate) fn with_lookup<R>(&self, value: u64, f: impl FnOnce(LookupRef<'_, N>) -> R) -> R {
        self.state.with(|state| {
            let mut lookup = state.history.lookup_ref(value);
            if let LookupRef::Tracked { ref mut reached, .. }
            | LookupRef::External { ref mut reached } = lookup
            {
                *reached &= value <= self.published();
            }
            f(lookup)
        })
    }

    /// The reached value as published to waiters: the history's, except while a retirement is
    /// between [`settle_untold`](Self::settle_untold) and
    /// [`publish_settled`](Self::publish_settled).
    /// Read under the lock, which orders it with every store (all made under the lock).
    fn published(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }

    /// Runs `f` over the retained history, oldest first, under the lock (keep `f` short).
    pub fn with_history<R>(&self, f: impl FnOnce(&History<H, N, S>) -> R) -> R {
        self.state.with(|state| f(&state.history))
    }

    /// Links `timepoint` to fire when the timeline reaches `minimum` or fails.
    ///
    /// Returns [`Arm::Ready`] without linking when that is already decided. Refuses a
    /// timepoint that is armed or firing.
    ///
    /// # Safety
    /// If this returns `Ok(Arm::Armed)`, `timepoint` must stay alive and in place until it has
    /// fired ([`Timepoint::is_done`]) or [`cancel`](Self::cancel) returned, and this semaphore
    /// must outlive that period. [`wait_scoped`](Self::wait_scoped) packages these obligations
    /// safely.
    pub unsafe fn arm(
        &self,
        timepoint: Pin<&Timepoint<'_>>,
        minimum: u64,
    ) -> Result<Arm, ArmError> {
        let timepoint = timepoint.get_ref();
        self.state.with(|state| {
            if !timepoint::is_armable(timepoint) {
                return Err(ArmError::Busy);
            }
            // A value whose signal was cancelled fails, even below the reached value — once
            // the cancelled operation has ended; until then the wait stays armed (it is cut
            // out when that operation ends, never by a reach: see `reach_then_fire`).
            #[cfg(any(test, feature = "signal-cancellation"))]
            if self.cancelled_locked() && state.history.cancels(minimum) {
                if !state.history.is_live_at(minimum) {
                    return Ok(Arm::Ready(Err(Failure::Cancelled)));
                }
                // SAFETY: as below.
                unsafe { state.waiters.insert(timepoint, minimum) };
                return Ok(Arm::Armed);
            }
            // A value reached before the failure stays reached: the failure only concerns
            // values the timeline had not reached yet. A reach not yet published is not ready:
            // `tell_settled` tells the waiter.
            let reached = self.published();
            if reached >= minimum {
                return Ok(Arm::Ready(Ok(reached)));
            }
            // A failed timeline still holds a wait whose signal is live until it ends (and one
            // reached but not yet told).
            if let Some(failure) = state.history.failure() {
                if minimum > state.history.reached() && !state.history.is_live_at(minimum) {
                    return Ok(Arm::Ready(Err(failure)));
                }
            }
            // SAFETY: the caller upholds the arm contract above (alive and pinned until
            // unlinked); the lock is held.
            unsafe { state.waiters.insert(timepoint, minimum) };
            Ok(Arm::Armed)
        })
    }

    /// Unlinks `timepoint` if it is still armed here. If its callback is running, waits for it
    /// to return, so afterwards nothing touches the timepoint.
    pub fn cancel(&self, timepoint: &Timepoint<'_>) -> Cancelled {
        if self.state.with(|state| state.waiters.remove(timepoint)) {
            return Cancelled::Unlinked;
        }
        // Not linked here: it may be firing, so wait that out before answering.
        timepoint::wait_until_not_firing(timepoint);
        if timepoint.is_done() {
            Cancelled::AlreadyFired
        } else {
            Cancelled::NotArmed
        }
    }

    /// Arms a stack timepoint for `minimum` that calls `notify`, runs `body` with the arming
    /// result, then cancels (waiting out a running callback) before returning. The safe way to
    /// block on a semaphore: `body` parks until `notify` has been called or gives up.
    pub fn wait_scoped<R>(
        &self,
        minimum: u64,
        notify: &dyn Notify,
        body: impl FnOnce(Arm) -> R,
    ) -> R {
        let timepoint = core::pin::pin!(Timepoint::new(notify));
        // SAFETY: the timepoint is pinned in this frame and `self` is borrowed for the whole
        // call; the `cancel` below runs before either can go away (also on unwind, through
        // the guard), and returns only once no thread touches the timepoint.
        let armed =
            unsafe { self.arm(timepoint.as_ref(), minimum) }.expect("a fresh timepoint is idle");
        let guard = CancelOnDrop { semaphore: self, timepoint: &timepoint };
        let result = body(armed);
        drop(guard);
        result
    }

    /// Whether any timepoint is armed (for diagnostics and teardown checks).
    pub fn has_waiters(&self) -> bool {
        self.state.with(|state| !state.waiters.is_empty())
    }

    /// Starts the timeline again at `initial`: history, failure and value are forgotten, so the
    /// semaphore can be reused for unrelated work. Refused while a timepoint is armed (a waiter
    /// would be left on a timeline that no longer means what it waited for).
    ///
    /// Whoever resets must know nothing else still refers to the old timeline: an operation
    /// that would complete a signal of the old timeline would otherwise complete one of the new
    /// (the hosted device defers a reset until every operation submitted before it retired).
    pub fn reset(&self, initial: u64) -> Result<(), ResetError> {
        self.state.with(|state| {
            if !state.waiters.is_empty() {
                return Err(ResetError::Waited);
            }
            state.history.reset(initial);
            // Release pairs with the Acquire loads in `value` and `failure`; the lock orders
            // these stores with every locked reader.
            self.value.store(initial, Ordering::Release);
            self.failed.store(0, Ordering::Release);
            #[cfg(any(test, feature = "signal-cancellation"))]
            self.cancelled.store(0, Ordering::Release);
            Ok(())
        })
    }
}

/// Cuts out the waiters at or below `through` that no live signal holds back (see "A wait
/// ends after its signal" in the module docs). One function for every failure path, so the
/// firmware links one copy of the walk.
#[inline]
fn cut_unheld<const H: usize, const N: usize, S: HistorySlots<N>>(
    state: &mut State<H, N, S>,
    through: u64,
) -> FiredChain {
    let history = &state.history;
    // A waiter at or below the reached value is one a reach has not told yet (an operation
    // still settling its other signals: `settle_untold`): that reach tells it, with success —
    // unless its value lies in a cancelled signal's range, which the timeline passed.
    #[cfg(any(test, feature = "signal-cancellation"))]
    return state.waiters.cut_unless(0, through, |minimum| {
        history.is_live_at(minimum) || minimum <= history.reached() && !history.cancels(minimum)
    });
    #[cfg(not(any(test, feature = "signal-cancellation")))]
    state.waiters.cut_unless(history.reached(), through, |minimum| history.is_live_at(minimum))
}

/// Why a semaphore could not be reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResetError {
    /// A timepoint is armed on it.
    Waited,
}

impl fmt::Display for ResetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResetError::Waited => f.write_str("a waiter is still armed on the semaphore"),
        }
    }
}

impl core::error::Error for ResetError {}

struct CancelOnDrop<'s, 't, const H: usize, const N: usize, S: HistorySlots<N>> {
    semaphore: &'s Semaphore<H, N, S>,
    timepoint: &'t Timepoint<'t>,
}

impl<const H: usize, const N: usize, S: HistorySlots<N>> Drop for CancelOnDrop<'_, '_, H, N, S> {
    fn drop(&mut self) {
        let _ = self.semaphore.cancel(self.timepoint);
    }
}

impl<const H: usize, const N: usize, S: HistorySlots<N>> fmt::Debug for Semaphore<H, N, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("value", &self.value())
            .field("failure", &self.failure())
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests;

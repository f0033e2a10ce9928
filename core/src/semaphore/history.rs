//! The frontier history of one timeline: plain data, no synchronisation.
//!
//! Each signal is recorded when it is *submitted* (pending) and marked reached when it
//! completes. Entries are kept in strictly increasing value order in a ring of slots.
//!
//! A signal may also be *reserved* first: its value takes its place in the order and a slot,
//! but carries nothing yet, because the operation that will signal it is still being
//! submitted and has no position or frontier. A reservation is later *filled* (it becomes an
//! ordinary pending signal) or *withdrawn* (it never happened). Until it is filled, a wait
//! that needs it learns nothing from it — as if nothing had been submitted — so withdrawing it
//! can never take back knowledge some waiter already imported. This is what lets a queue
//! refuse an operation whose later signal does not fit after reserving its earlier ones,
//! without committing anything (see `crate::queue`).
//!
//! The slots are storage the owner provides ([`HistorySlots`]): an inline array sized at
//! compile time (the default, `const`-constructible, what firmware uses), or a buffer sized at
//! run time from what the workload needs (a boxed slice in hosted builds). The history never
//! allocates either way.
//!
//! Invariants (established by [`History::record`] and [`History::reach`]):
//! 1. Recorded values strictly increase; every pending value is above `reached`.
//! 2. Values are reached in order: reaching `v` while a smaller value is still pending is a
//!    broken timeline contract, and the history fails with [`Failure::OutOfOrderSignal`]
//!    rather than let a waiter import a frontier of work that has not happened.
//! 3. Only settled entries (reached, or cancelled: see below) whose operations have ended are
//!    evicted, oldest first, and the newest settled entry is always kept. So every entry older
//!    than a retained one is settled, and a value that aged out was settled long ago.
//! 4. A reserved entry is pending and carries nothing: a lookup that lands on it reports
//!    [`Lookup::Unsignalled`], and it cannot be reached until it is filled.
//!
//! # Cancelled signals
//!
//! With the `signal-cancellation` feature (hosted builds; the firmware, which never cancels,
//! leaves it off and links none of it), a pending signal can be *cancelled*
//! ([`History::cancel`]): the operation that would have signalled it will never run. A
//! cancellation is a failure with a point. It covers exactly the values that signal would
//! have reached — those above the signal recorded before it, up to its own — and nothing else:
//!
//! - A wait for a value in a cancelled range fails with [`Failure::Cancelled`], now and after
//!   the timeline has passed the range.
//! - Signals above it are untouched: they may still be recorded and reached, in order, the
//!   cancelled one skipped (it settles without being reached). A wait for a value they cover
//!   imports their frontier as usual. That frontier is the signaller's own; work that does not
//!   depend on the cancelled operation does not know it, so nothing a waiter imports claims
//!   the cancelled work happened.
//! - The timeline value stays monotonic, but it no longer says that *every* value below it
//!   was reached: one inside a cancelled range never was. Whether a wait on `v` succeeds is
//!   decided by the entry that covers `v` ([`History::lookup`], [`History::cancels`]), never
//!   by comparing `v` with the reached value alone.
//! - Once a cancelled entry ages out, the history keeps only the highest cancelled value it
//!   evicted: an aged-out value at or below it fails as cancelled (sound, conservative: a late
//!   wait on an older value that was reached fails too), one above it was reached.
//!
//! A failure of the whole timeline ([`History::fail`]) is unchanged: it concerns every value
//! not reached before it.
//!
//! # Signals that end without being reached
//!
//! A failure leaves every pending signal pending: its operation has not ended, and a waiter
//! that imported it is told of the failure only once it has (see "A wait ends after its
//! signal" in the semaphore's docs). [`History::end`] records that end; until then the signal
//! is *live* ([`HistoryEntry::is_live`], [`History::is_live_at`]). A cancelled signal has
//! ended, except one marked cancelled ahead of its operation's end
//! ([`History::mark_cancelled`]), which is live until [`History::cancel`] ends it and is not
//! evicted before.
//!
//! A full history (every slot pending, or pending plus the newest reached entry) refuses new
//! signals with [`SignalError::HistoryFull`]; [`History::room_at`] names the value whose
//! completion makes room, so a submitter can wait for exactly that instead of failing.

use core::fmt;

use crate::frontier::{Frontier, Point};

use super::{Failure, SignalError};

/// One recorded signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryEntry<const N: usize> {
    /// The value the signal advances the timeline to.
    pub value: u64,
    /// The signalling operation's own position; `None` for an external signal.
    pub origin: Option<Point>,
    /// What the signalling operation knew (empty for an external signal).
    pub frontier: Frontier<N>,
    /// Whether the signal has completed.
    pub reached: bool,
    /// Whether the signalling operation has ended without reaching the value: it failed, was
    /// cancelled, or will never run (see "A wait ends after its signal" in the module docs).
    /// Waits armed on the values this entry covers may be told of the failure from then on.
    pub ended: bool,
    /// Whether the value is only reserved: the signalling operation is still being submitted,
    /// `origin` and `frontier` are not set yet.
    pub reserved: bool,
    /// Whether the signal was cancelled: it will never complete, and waits on the values it
    /// would have reached fail (see "Cancelled signals" in the module docs).
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub cancelled: bool,
    /// Whether the signalling operation depended on rejected speculation but had already
    /// started when the rejection came, so it ran (or runs) to its end: a waiter on the values
    /// it reaches consumes rejected work ([`History::mark_ran_on_rejected`]).
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub ran_on_rejected: bool,
}

impl<const N: usize> HistoryEntry<N> {
    /// An unused slot.
    pub const BLANK: HistoryEntry<N> = HistoryEntry {
        value: 0,
        origin: None,
        frontier: Frontier::new(),
        reached: false,
        ended: false,
        reserved: false,
        #[cfg(any(test, feature = "signal-cancellation"))]
        cancelled: false,
        #[cfg(any(test, feature = "signal-cancellation"))]
        ran_on_rejected: false,
    };

    /// Whether the value came from outside the scheduler's knowledge (the taint window).
    pub const fn is_external(&self) -> bool {
        self.origin.is_none()
    }

    /// Whether a waiter may have imported this signal and its operation has not ended yet:
    /// a tracked, filled signal, neither reached nor ended (a cancelled signal has ended).
    /// Waits armed on the values it covers are not told of a failure before it ends.
    pub const fn is_live(&self) -> bool {
        self.origin.is_some() && !self.reached && !self.ended && !self.reserved
    }
}

/// Storage for a history's ring: any owned slice of entries. Implemented for arrays
/// (`[HistoryEntry<N>; H]`, the default) and, in hosted builds, for boxed slices.
pub trait HistorySlots<const N: usize>:
    AsRef<[HistoryEntry<N>]> + AsMut<[HistoryEntry<N>]>
{
}

impl<T, const N: usize> HistorySlots<N> for T where
    T: AsRef<[HistoryEntry<N>]> + AsMut<[HistoryEntry<N>]>
{
}

/// Fewest slots a history works with: one for the newest reached entry (never evicted), one
/// for a new signal.
pub const MIN_HISTORY_SLOTS: usize = 2;
/// Most slots a history can index (indices are `u16`: per-semaphore state, and small
/// semaphores matter on MCUs).
pub const MAX_HISTORY_SLOTS: usize = u16::MAX as usize;

/// A history was given storage of an unusable size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotCountError {
    /// The slots offered.
    pub slots: usize,
}

impl fmt::Display for SlotCountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a history needs {MIN_HISTORY_SLOTS}..={MAX_HISTORY_SLOTS} slots, not {}",
            self.slots
        )
    }
}

impl core::error::Error for SlotCountError {}

/// What a wait on `S ≥ v` learns from the history (the late-waiter rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lookup<const N: usize> {
    /// `v` is at or below the initial value: reached, nothing to import.
    Initial,
    /// No signal to a value ≥ `v` has been submitted yet.
    Unsignalled,
    /// The first tracked signal to reach ≥ `v`.
    Tracked {
        /// The signalling operation; knowing it discharges the wait exactly.
        origin: Point,
        /// The frontier to import.
        frontier: Frontier<N>,
        /// Whether the value has been reached.
        reached: bool,
        /// The exact entry aged out; this is the oldest retained one (true, only looser).
        aged_out: bool,
    },
    /// The first signal to reach ≥ `v` was external: nothing exact to import, never elidable.
    External {
        /// Whether the value has been reached.
        reached: bool,
    },
    /// The wait fails: the timeline failed before reaching `v`, or the signal that would have
    /// reached `v` was cancelled ([`Failure::Cancelled`]; see "Cancelled signals" above).
    Failed(Failure),
}

/// A [`Lookup`] whose tracked frontier is borrowed from the history. Its own variants rather
/// than a [`Lookup`] inside for the others: that would make every answer as large as a frontier,
/// and each move of one a copy of it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LookupRef<'h, const N: usize> {
    /// As [`Lookup::Initial`].
    Initial,
    /// As [`Lookup::Unsignalled`].
    Unsignalled,
    /// As [`Lookup::Tracked`].
    Tracked { origin: Point, frontier: &'h Frontier<N>, reached: bool, aged_out: bool },
    /// As [`Lookup::External`].
    External { reached: bool },
    /// As [`Lookup::Failed`].
    Failed(Failure),
}

impl<const N: usize> LookupRef<'_, N> {
    /// The answer with its frontier copied out.
    pub(crate) fn to_owned(self) -> Lookup<N> {
        match self {
            LookupRef::Initial => Lookup::Initial,
            LookupRef::Unsignalled => Lookup::Unsignalled,
            LookupRef::Tracked { origin, frontier, reached, aged_out } => {
                Lookup::Tracked { origin, frontier: *frontier, reached, aged_out }
            }
            LookupRef::External { reached } => Lookup::External { reached },
            LookupRef::Failed(failure) => Lookup::Failed(failure),
        }
    }
}

/// Bounded frontier history of one timeline, in the slots `S` (by default an inline array of
/// `H` slots; with other storage `H` is unused). 2..=65535 slots.
#[derive(Clone, Debug)]
pub struct History<const H: usize, const N: usize, S = [HistoryEntry<N>; H]> {
    entries: S,
    /// Slot count (`entries`' length, kept beside the indices it bounds).
    capacity: u16,
    /// Slot of the oldest retained entry.
    head: u16,
    len: u16,
    /// Retained entries that are settled: reached, or cancelled. They always form a prefix of
    /// the ring: values are recorded ascending, reaching one while a smaller one is pending
    /// fails the timeline, and a cancelled entry joins the prefix only once every entry before
    /// it has (`settle_cancelled`) — so completion only ever extends the prefix, which makes
    /// `reach` O(1).
    settled_len: u16,
    initial: u64,
    reached: u64,
    /// Highest value recorded (pending or reached), at least `initial`.
    submitted: u64,
    /// Value of the newest evicted entry (`initial` when none was evicted).
    evicted_through: u64,
    /// Value of the newest evicted cancelled entry (`initial` when none was evicted): aged-out
    /// values at or below it fail as cancelled.
    #[cfg(any(test, feature = "signal-cancellation"))]
    cancelled_evicted_through: u64,
    failure: Option<Failure>,
    aged_out_imports: u64,
    /// Retained signals marked cancelled whose operations have not ended
    /// ([`mark_cancelled`](Self::mark_cancelled)): while there are any, a reach must not cut
    /// out the waits they cover.
    #[cfg(any(test, feature = "signal-cancellation"))]
    live_cancellations: u16,
}

impl<const H: usize, const N: usize> History<H, N> {
    const SLOTS_ARE_VALID: () = assert!(
        H >= MIN_HISTORY_SLOTS && H <= MAX_HISTORY_SLOTS,
        "a history needs 2..=65535 slots"
    );

    /// An empty history of a timeline that starts at `initial`, in `H` inline slots.
    pub const fn new(initial: u64) -> History<H, N> {
        #[allow(clippy::let_unit_value)]
        let () = Self::SLOTS_ARE_VALID;
        History::blank([HistoryEntry::BLANK; H], H as u16, initial)
    }
}

impl<const H: usize, const N: usize, S> History<H, N, S> {
    const fn blank(entries: S, capacity: u16, initial: u64) -> History<H, N, S> {
        History {
            entries,
            capacity,
            head: 0,
            len: 0,
            settled_len: 0,
            initial,
            reached: initial,
            submitted: initial,
            evicted_through: initial,
            #[cfg(any(test, feature = "signal-cancellation"))]
            cancelled_evicted_through: initial,
            failure: None,
            aged_out_imports: 0,
            #[cfg(any(test, feature = "signal-cancellation"))]
            live_cancellations: 0,
        }
    }
}

impl<const H: usize, const N: usize, S: HistorySlots<N>> History<H, N, S> {
    /// An empty history of a timeline that starts at `initial`, in caller-provided `slots`
    /// (their contents are ignored). Refuses fewer than 2 or more than 65535 slots.
    pub fn with_slots(slots: S, initial: u64) -> Result<History<H, N, S>, SlotCountError> {
        let count = slots.as_ref().len();
        if !(MIN_HISTORY_SLOTS..=MAX_HISTORY_SLOTS).contains(&count) {
            return Err(SlotCountError { slots: count });
        }
        Ok(History::blank(slots, count as u16, initial))
    }

    /// Forgets everything: the timeline starts again at `initial`, in the same slots.
    pub fn reset(&mut self, initial: u64) {
        self.head = 0;
        self.len = 0;
        self.settled_len = 0;
        self.initial = initial;
        self.reached = initial;
        self.submitted = initial;
        self.evicted_through = initial;
        #[cfg(any(test, feature = "signal-cancellation"))]
        {
            self.cancelled_evicted_through = initial;
        }
        self.failure = None;
        self.aged_out_imports = 0;
        #[cfg(any(test, feature = "signal-cancellation"))]
        {
            self.live_cancellations = 0;
        }
    }

    /// Whether a signal marked cancelled is retained whose operation has not ended.
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub const fn has_live_cancellations(&self) -> bool {
        self.live_cancellations != 0
    }

    /// How many signals the history holds at most.
    pub fn capacity(&self) -> usize {
        usize::from(self.capacity)
    }

    /// The reached timeline value.
    pub const fn reached(&self) -> u64 {
        self.reached
    }

    /// The highest submitted value.
    pub const fn submitted(&self) -> u64 {
        self.submitted
    }

    /// The first failure, if any.
    pub const fn failure(&self) -> Option<Failure> {
        self.failure
    }

    /// How many lookups had to import a looser entry because the exact one aged out.
    pub const fn aged_out_imports(&self) -> u64 {
        self.aged_out_imports
    }

    /// Signals submitted and not yet reached.
    pub fn pending(&self) -> usize {
        usize::from(self.len - self.settled_len)
    }

    /// Retained entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &HistoryEntry<N>> {
        (0..usize::from(self.len)).map(move |k| &self.entries.as_ref()[self.slot(k)])
    }

    /// The ring slot of the `k`-th retained entry (`k` below the capacity). Wraps with a
    /// compare instead of `%`: with run-time storage the capacity is not a constant.
    fn slot(&self, k: usize) -> usize {
        let slot = usize::from(self.head) + k;
        let capacity = usize::from(self.capacity);
        if slot >= capacity {
            slot - capacity
        } else {
            slot
        }
    }

    fn entry(&self, k: usize) -> &HistoryEntry<N> {
        &self.entries.as_ref()[self.slot(k)]
    }

    /// Records a submitted signal (pending). Tracked signals carry their origin and frontier
    /// (converted to capacity `N`: a larger one is evicted and tainted as by a merge); external
    /// ones (`origin == None`) carry nothing.
    pub fn record<const M: usize>(
        &mut self,
        value: u64,
        origin: Option<Point>,
        frontier: &Frontier<M>,
    ) -> Result<(), SignalError> {
        let entry = self.take_slot(value)?;
        // Field by field, the frontier merged straight from the caller's: building a whole entry
        // (or a converted frontier) first costs a second copy, which reads stores still in
        // flight and waits for them (about 40 ns per signal on the development machine).
        entry.origin = origin;
        entry.reserved = false;
        if origin.is_some() {
            entry.frontier.assign(frontier);
        } else {
            entry.frontier.clear();
        }
        Ok(())
    }

    /// Reserves `value` for a signal whose operation is still being submitted: refused exactly
    /// when [`record`](Self::record) would be, and once it succeeds, [`fill`](Self::fill)
    /// cannot fail. Waits learn nothing from the reservation until it is filled.
    pub fn reserve(&mut self, value: u64) -> Result<(), SignalError> {
        let entry = self.take_slot(value)?;
        entry.origin = None;
        entry.reserved = true;
        entry.frontier.clear();
        Ok(())
    }

    /// Turns the reservation of `value` into a pending signal of the operation at `origin`,
    /// which knew `frontier`. Returns whether there was such a reservation (there is none when
    /// reserving it found the timeline failed).
    pub fn fill<const M: usize>(
        &mut self,
        value: u64,
        origin: Point,
        frontier: &Frontier<M>,
    ) -> bool {
        let Some(k) = self.reservation(value) else { return false };
        let slot = self.slot(k);
        let entry = &mut self.entries.as_mut()[slot];
        entry.origin = Some(origin);
        entry.reserved = false;
        entry.frontier.merge(frontier);
        true
    }

    /// Withdraws the reservation of `value`, as if it had never been made; later entries keep
    /// their order. Returns whether there was such a reservation.
    pub fn withdraw(&mut self, value: u64) -> bool {
        let Some(k) = self.reservation(value) else { return false };
        // Shift the entries after it down one place (rare: only when an operation is refused
        // after reserving, and another signal was recorded in between).
        for later in k + 1..usize::from(self.len) {
            let (from, to) = (self.slot(later), self.slot(later - 1));
            let moved = self.entries.as_ref()[from];
            self.entries.as_mut()[to] = moved;
        }
        self.len -= 1;
        // A cancelled entry may now follow the settled prefix directly.
        #[cfg(any(test, feature = "signal-cancellation"))]
        self.settle_cancelled();
        if k == usize::from(self.len) {
            // It was the newest: the highest recorded value is now the one before it, or the
            // reached value when nothing else is retained (nothing was ever reached then).
            self.submitted = match self.len {
                0 => self.reached,
                len => self.entry(usize::from(len) - 1).value,
            };
        }
        true
    }

    /// Index of the reserved entry for `value`, if any. The newest entry first: a reservation
    /// is nearly always filled or withdrawn before anything else is recorded.
    fn reservation(&self, value: u64) -> Option<usize> {
        let newest = usize::from(self.len).checked_sub(1)?;
        let k =
            if self.entry(newest).value == value { newest } else { self.first_at_or_above(value) };
        (k < usize::from(self.len) && self.entry(k).value == value && self.entry(k).reserved)
            .then_some(k)
    }

    /// Checks that `value` may be recorded next and takes a slot for it (evicting the oldest
    /// reached entry when full): the entry comes back with its value set, pending.
    ///
    /// Always inlined: `record`, on every signal's path, stays one function, as it was before
    /// reservations shared this part of it (a call here cost the Cortex-M0 controller image
    /// 32 bytes of its flash budget).
    #[inline(always)]
    fn take_slot(&mut self, value: u64) -> Result<&mut HistoryEntry<N>, SignalError> {
        if let Some(failure) = self.failure {
            return Err(SignalError::Failed(failure));
        }
        if value <= self.submitted {
            return Err(SignalError::NotAdvancing { value, current: self.submitted });
        }
        if self.len == self.capacity {
            self.evict_oldest()?;
        }
        let slot = self.slot(usize::from(self.len));
        self.len += 1;
        self.submitted = value;
        let entry = &mut self.entries.as_mut()[slot];
        entry.value = value;
        entry.reached = false;
        entry.ended = false;
        #[cfg(any(test, feature = "signal-cancellation"))]
        {
            entry.cancelled = false;
            entry.ran_on_rejected = false;
        }
        Ok(entry)
    }

    /// Whether [`record`](Self::record) has room for one more signal (it may evict the oldest
    /// reached entry; it cannot evict pending ones).
    pub fn has_room(&self) -> bool {
        self.len < self.capacity || self.oldest_is_evictable()
    }

    /// When the history is full, the value whose completion makes room for one more signal
    /// (the second-oldest retained entry: once it is reached the oldest may be evicted); `None`
    /// when there is room now. A failed timeline has room for nothing, but waiting is pointless
    /// there: [`record`](Self::record) reports the failure.
    pub fn room_at(&self) -> Option<u64> {
        if self.has_room() || self.failure.is_some() {
            return None;
        }
        // The oldest is a signal marked cancelled whose operation has not ended: its end
        // makes room (a wait armed on its value ends then).
        #[cfg(any(test, feature = "signal-cancellation"))]
        if self.settled_len >= 2 {
            return Some(self.entry(0).value);
        }
        // Full means `len == capacity ≥ 2` with at most one settled entry, so entry 1 exists
        // and is not settled.
        #[cfg(any(test, feature = "signal-cancellation"))]
        if self.settled_len == 0 && self.entry(1).cancelled {
            // Entry 1 will never complete; entry 0's completion settles both.
            return Some(self.entry(0).value);
        }
        Some(self.entry(1).value)
    }

    fn oldest_is_evictable(&self) -> bool {
        // The oldest entry may go only if it is settled, a newer settled entry remains, and its
        // operation has ended (a signal marked cancelled may not have: waits armed on it wait
        // for that end, which must still find it).
        #[cfg(any(test, feature = "signal-cancellation"))]
        if !self.entry(0).reached && !self.entry(0).ended {
            return false;
        }
        self.settled_len >= 2
    }

    fn evict_oldest(&mut self) -> Result<(), SignalError> {
        if !self.oldest_is_evictable() {
            return Err(SignalError::HistoryFull { capacity: self.capacity() });
        }
        self.evicted_through = self.entry(0).value;
        #[cfg(any(test, feature = "signal-cancellation"))]
        if self.entry(0).cancelled {
            self.cancelled_evicted_through = self.evicted_through;
        }
        self.head = self.slot(1) as u16;
        self.len -= 1;
        self.settled_len -= 1;
        Ok(())
    }

    /// Marks the signal to `value` reached and advances the timeline to it.
    ///
    /// Reaching a value while a smaller one is still pending fails the timeline
    /// ([`Failure::OutOfOrderSignal`]) and reports [`SignalError::OutOfOrder`].
    ///
    /// Inlined into the completion that holds the lock on hosted targets (a dozen compares and
    /// stores; a call of its own cost the device's signal → dependent start path about ten
    /// instructions).
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub fn reach(&mut self, value: u64) -> Result<(), SignalError> {
        if let Some(failure) = self.failure {
            return Err(SignalError::Failed(failure));
        }
        if value <= self.reached {
            return Err(SignalError::NotAdvancing { value, current: self.reached });
        }
        // Everything before the first pending entry is reached (the prefix invariant), so that
        // entry is the only one this completion may be for.
        if self.settled_len == self.len {
            return Err(SignalError::NotSubmitted { value });
        }
        let first_pending = self.slot(usize::from(self.settled_len));
        let pending = self.entries.as_ref()[first_pending];
        if pending.value != value {
            self.failure = Some(Failure::OutOfOrderSignal);
            return Err(SignalError::OutOfOrder { value, pending: pending.value });
        }
        if pending.reserved {
            // Its operation is still being submitted: it cannot have completed.
            return Err(SignalError::NotSubmitted { value });
        }
        self.entries.as_mut()[first_pending].reached = true;
        self.settled_len += 1;
        self.reached = value;
        #[cfg(any(test, feature = "signal-cancellation"))]
        self.settle_cancelled();
        Ok(())
    }

    /// Records the first failure; later ones are ignored. Returns whether this one won.
    ///
    /// Pending signals stay pending: their operations have not ended, and a waiter that
    /// imported one is told of the failure only once it has ([`end`](Self::end)).
    pub fn fail(&mut self, failure: Failure) -> bool {
        if self.failure.is_some() {
            return false;
        }
        self.failure = Some(failure);
        true
    }

    /// Records that the operation signalling `value` ended without reaching it (it failed, or
    /// it completed after the timeline had failed): waits armed on the values its signal
    /// covers may now be told of the failure. Returns whether there was such a signal.
    #[inline]
    pub fn end(&mut self, value: u64) -> bool {
        let k = self.first_at_or_above(value);
        if k == usize::from(self.len) {
            return false;
        }
        let slot = self.slot(k);
        let entry = &mut self.entries.as_mut()[slot];
        if entry.value != value || entry.reached || entry.reserved {
            return false;
        }
        #[cfg(any(test, feature = "signal-cancellation"))]
        if entry.cancelled && !entry.ended {
            self.live_cancellations -= 1;
        }
        entry.ended = true;
        true
    }

    /// Records that every pending signal's operation has ended or never will (the ranks that
    /// signal the timeline died, say): no wait is held back by one any more.
    pub fn end_all(&mut self) {
        // From the oldest: a signal marked cancelled sits in the settled prefix unended.
        for k in 0..usize::from(self.len) {
            let slot = self.slot(k);
            self.entries.as_mut()[slot].ended = true;
        }
        #[cfg(any(test, feature = "signal-cancellation"))]
        {
            self.live_cancellations = 0;
        }
    }

    /// Whether the signal that covers a wait on `S ≥ value` — the first retained one at or
    /// above it — is live ([`HistoryEntry::is_live`]): a waiter may have imported it and its
    /// operation has not ended, so a failure of the timeline does not end that wait yet.
    pub fn is_live_at(&self, value: u64) -> bool {
        // Evicted entries had ended (`oldest_is_evictable`). A value the timeline passed may
        // still be covered by a live signal: one marked cancelled.
        if value <= self.evicted_through {
            return false;
        }
        let k = self.first_at_or_above(value);
        k < usize::from(self.len) && self.entry(k).is_live()
    }

    /// The late-waiter rule: what a wait on `S ≥ value` imports.
    ///
    /// The entry of the *first* signal to reach ≥ `value` — not the latest — because the waiter
    /// depends on "S reached `value`", not on whatever advanced S further.
    pub fn lookup(&mut self, value: u64) -> Lookup<N> {
        self.lookup_ref(value).to_owned()
    }

    /// [`lookup`](Self::lookup), a tracked entry's frontier borrowed where it lies rather than
    /// copied out: a wait merges it from there (`crate::queue`).
    pub(crate) fn lookup_ref(&mut self, value: u64) -> LookupRef<'_, N> {
        // A value reached before the failure keeps what reached it; only values beyond the
        // reached one fail.
        if let Some(failure) = self.failure.filter(|_| value > self.reached) {
            return LookupRef::Failed(failure);
        }
        if value <= self.initial {
            return LookupRef::Initial;
        }
        let k = self.first_at_or_above(value);
        // A reservation carries nothing yet (invariant 4).
        if k == usize::from(self.len) || self.entry(k).reserved {
            return LookupRef::Unsignalled;
        }
        let aged_out = value <= self.evicted_through;
        #[cfg(any(test, feature = "signal-cancellation"))]
        if let Some(cancelled) = self.cancelled_lookup(k, aged_out, value) {
            return cancelled;
        }
        if aged_out {
            self.aged_out_imports += 1;
        }
        let entry = self.entry(k);
        match entry.origin {
            Some(origin) => LookupRef::Tracked {
                origin,
                frontier: &entry.frontier,
                reached: entry.reached,
                aged_out,
            },
            None => LookupRef::External { reached: entry.reached },
        }
    }

    /// Cancels the pending signal to `value`: its operation ended without running (see
    /// "Cancelled signals" in the module docs). Returns the value below the cancelled range —
    /// waits on values above it, up to `value`, now fail — also when the signal was cancelled
    /// or marked already.
    ///
    /// Refused for a failed timeline ([`SignalError::Failed`]), a value already reached
    /// ([`SignalError::NotAdvancing`]) and a value with no filled signal
    /// ([`SignalError::NotSubmitted`]: never recorded, or only reserved).
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn cancel(&mut self, value: u64) -> Result<u64, SignalError> {
        self.cancel_entry(value, true)
    }

    /// Marks the pending signal to `value` cancelled ahead of its operation's end: the
    /// operation will never run, but its queue has not retired it yet. Lookups of the values it
    /// covers fail from now on, and signals above it may complete; waits armed on those values
    /// stay armed until the operation ends ([`cancel`](Self::cancel)), since a waiter that
    /// imported the signal relies on that operation having ended. Refused as `cancel` is.
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn mark_cancelled(&mut self, value: u64) -> Result<u64, SignalError> {
        self.cancel_entry(value, false)
    }

    /// [`cancel`](Self::cancel) when `ended`, else [`mark_cancelled`](Self::mark_cancelled).
    #[cfg(any(test, feature = "signal-cancellation"))]
    fn cancel_entry(&mut self, value: u64, ended: bool) -> Result<u64, SignalError> {
        if let Some(failure) = self.failure {
            return Err(SignalError::Failed(failure));
        }
        let k = self.first_at_or_above(value);
        if k == usize::from(self.len) || self.entry(k).value != value || self.entry(k).reserved {
            return Err(SignalError::NotSubmitted { value });
        }
        if self.entry(k).reached {
            return Err(SignalError::NotAdvancing { value, current: self.reached });
        }
        let after = self.value_below(k);
        let slot = self.slot(k);
        let entry = &mut self.entries.as_mut()[slot];
        let was_live_cancellation = entry.cancelled && !entry.ended;
        entry.cancelled = true;
        entry.ended |= ended;
        let is_live_cancellation = !entry.ended;
        if is_live_cancellation != was_live_cancellation {
            if is_live_cancellation {
                self.live_cancellations += 1;
            } else {
                self.live_cancellations -= 1;
            }
        }
        self.settle_cancelled();
        Ok(after)
    }

    /// Marks the signal to `value` as coming from an operation that depended on rejected
    /// speculation and had already started when the rejection came: it is not cancelled (it
    /// may have completed already), but a wait on the values it reaches consumes rejected work
    /// ([`ran_on_rejected`](Self::ran_on_rejected)). Returns whether the signal was found
    /// (retained, filled, not cancelled).
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn mark_ran_on_rejected(&mut self, value: u64) -> bool {
        let k = self.first_at_or_above(value);
        if k == usize::from(self.len) {
            return false;
        }
        let slot = self.slot(k);
        let entry = &mut self.entries.as_mut()[slot];
        let found = entry.value == value && !entry.reserved && !entry.cancelled;
        entry.ran_on_rejected |= found;
        found
    }

    /// Whether a wait on `S ≥ value` imports the signal of an operation that ran on rejected
    /// speculation ([`mark_ran_on_rejected`](Self::mark_ran_on_rejected)): the entry the
    /// late-waiter rule picks ([`lookup`](Self::lookup)) is marked. An aged-out value answers
    /// for the entry its lookup imports.
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn ran_on_rejected(&self, value: u64) -> bool {
        if value <= self.initial {
            return false;
        }
        let k = self.first_at_or_above(value);
        k < usize::from(self.len) && self.entry(k).ran_on_rejected
    }

    /// The value below the range entry `k` covers: the entry before it, or the newest evicted
    /// value.
    #[cfg(any(test, feature = "signal-cancellation"))]
    fn value_below(&self, k: usize) -> u64 {
        match k {
            0 => self.evicted_through,
            _ => self.entry(k - 1).value,
        }
    }

    /// When a wait on `S ≥ value` fails because of a cancelled signal that is retained, the
    /// range that signal covers (`after < v ≤ through`): withdrawing a reservation just below a
    /// cancelled signal widens its range down over the withdrawn values.
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn cancelled_range(&self, value: u64) -> Option<(u64, u64)> {
        let k = self.first_at_or_above(value);
        (value > self.evicted_through && k < usize::from(self.len) && self.entry(k).cancelled)
            .then(|| (self.value_below(k), self.entry(k).value))
    }

    /// Whether a wait on `S ≥ value` fails because the signal that would have reached it was
    /// cancelled (conservatively, for an aged-out value: see the module docs).
    #[cfg(any(test, feature = "signal-cancellation"))]
    pub fn cancels(&self, value: u64) -> bool {
        if value <= self.initial {
            return false;
        }
        if value <= self.evicted_through {
            return value <= self.cancelled_evicted_through;
        }
        let k = self.first_at_or_above(value);
        k < usize::from(self.len) && self.entry(k).cancelled
    }

    /// What [`lookup`](Self::lookup) answers instead when the entry it landed on (`k`, the
    /// first retained at or above `value`) tells of a cancellation; `None` otherwise.
    #[cfg(any(test, feature = "signal-cancellation"))]
    fn cancelled_lookup(
        &self,
        k: usize,
        aged_out: bool,
        value: u64,
    ) -> Option<LookupRef<'static, N>> {
        if aged_out && value <= self.cancelled_evicted_through
            || !aged_out && self.entry(k).cancelled
        {
            return Some(LookupRef::Failed(Failure::Cancelled));
        }
        // Aged out above every evicted cancellation: the signal that reached `value` was
        // evicted, and the oldest retained entry, which a plain aged-out lookup imports
        // instead, was cancelled. Its frontier is of work that never ran: import nothing.
        (aged_out && self.entry(k).cancelled).then_some(LookupRef::External { reached: true })
    }

    /// Extends the settled prefix over the cancelled entries that follow it: the first entry
    /// after the prefix is then the one the next completion must be for.
    #[cfg(any(test, feature = "signal-cancellation"))]
    fn settle_cancelled(&mut self) {
        while self.settled_len < self.len && self.entry(usize::from(self.settled_len)).cancelled {
            self.settled_len += 1;
        }
    }

    /// Index of the first retained entry at or above `value` (`len` when there is none). Values
    /// ascend along the ring, so this is a binary search, after a guess from the newest entry.
    ///
    /// The guess: recorded values strictly increase, so the entry `d` places below the newest
    /// holds at most the newest value less `d`. The entry `newest − value` places below it
    /// therefore holds at most `value`, and every entry before it less: the answer is that
    /// entry when it holds `value`, else above it. A timeline signalled one value at a time —
    /// a queue's, or a task graph's — has no gaps, so the guess is the answer, whatever the
    /// distance (a wait on a recent value, the common case, cost a search over every retained
    /// entry: nine probes in a history of 512, a tenth of a device submission's instructions).
    /// Hosted builds only: the firmware's histories are a few slots long.
    fn first_at_or_above(&self, value: u64) -> usize {
        let (mut low, mut high) = (0, usize::from(self.len));
        #[cfg(not(target_os = "none"))]
        if let Some(newest) = high.checked_sub(1) {
            let top = self.entry(newest).value;
            if top < value {
                return high;
            }
            // The answer is at or below the newest, which holds at least `value`.
            high = newest;
            let below = top - value;
            if below <= newest as u64 {
                let guess = newest - below as usize;
                if self.entry(guess).value == value {
                    return guess;
                }
                // It held less than `value`: so did every entry before it.
                low = guess + 1;
            }
        }
        while low < high {
            let middle = low + (high - low) / 2;
            if self.entry(middle).value < value {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::axis::{Axis, Domain};
    use proptest::prelude::*;
    use std::boxed::Box;
    use std::vec;
    use std::vec::Vec;

    fn point(queue: u64, epoch: u64) -> Point {
        Point::new(Axis::new(0, Domain::Queue, queue), epoch)
    }

    fn tracked<const H: usize>(history: &mut History<H, 4>, value: u64, epoch: u64) {
        let origin = point(1, epoch);
        history.record(value, Some(origin), &Frontier::<4>::from_points([origin])).unwrap();
        history.reach(value).unwrap();
    }

    #[test]
    fn late_waiter_imports_the_first_signal_at_or_above() {
        let mut h = History::<8, 4>::new(0);
        for v in 1..=5 {
            let origin = point(1, v);
            h.record(v, Some(origin), &Frontier::<4>::from_points([origin])).unwrap();
            h.reach(v).unwrap();
        }
        match h.lookup(2) {
            Lookup::Tracked { origin, frontier, reached: true, aged_out: false } => {
                assert_eq!(origin, point(1, 2));
                assert_eq!(frontier.get(origin.axis), Some(2));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn values_must_advance() {
        let mut h = History::<4, 4>::new(3);
        assert_eq!(
            h.record(3, None, &Frontier::<4>::new()),
            Err(SignalError::NotAdvancing { value: 3, current: 3 })
        );
        tracked(&mut h, 5, 1);
        assert_eq!(h.reach(5), Err(SignalError::NotAdvancing { value: 5, current: 5 }));
        assert_eq!(h.reach(9), Err(SignalError::NotSubmitted { value: 9 }));
        assert_eq!(h.lookup(3), Lookup::Initial);
    }

    #[test]
    fn reaching_past_a_pending_signal_fails_the_timeline() {
        let mut h = History::<4, 4>::new(0);
        h.record(1, Some(point(1, 1)), &Frontier::<4>::new()).unwrap();
        h.record(2, Some(point(2, 1)), &Frontier::<4>::new()).unwrap();
        assert_eq!(h.reach(2), Err(SignalError::OutOfOrder { value: 2, pending: 1 }));
        assert_eq!(h.lookup(1), Lookup::Failed(Failure::OutOfOrderSignal));
        assert_eq!(h.reach(1), Err(SignalError::Failed(Failure::OutOfOrderSignal)));
    }

    #[test]
    fn pending_entries_are_never_evicted() {
        let mut h = History::<2, 4>::new(0);
        h.record(1, Some(point(1, 1)), &Frontier::<4>::new()).unwrap();
        h.record(2, Some(point(1, 2)), &Frontier::<4>::new()).unwrap();
        assert_eq!(
            h.record(3, Some(point(1, 3)), &Frontier::<4>::new()),
            Err(SignalError::HistoryFull { capacity: 2 })
        );
        h.reach(1).unwrap();
        // The newest reached entry stays, so value 1 still cannot go while 2 is pending.
        assert!(h.record(3, Some(point(1, 3)), &Frontier::<4>::new()).is_err());
        h.reach(2).unwrap();
        h.record(3, Some(point(1, 3)), &Frontier::<4>::new()).unwrap();
        assert_eq!(h.iter().map(|e| e.value).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn a_reservation_carries_nothing_until_filled() {
        let mut h = History::<4, 4>::new(0);
        h.reserve(2).unwrap();
        assert_eq!(h.lookup(1), Lookup::Unsignalled, "nothing to import from a reservation");
        assert_eq!(h.lookup(2), Lookup::Unsignalled);
        assert_eq!(h.reach(2), Err(SignalError::NotSubmitted { value: 2 }));
        assert_eq!(h.failure(), None, "completing a reservation is refused, not a broken contract");
        assert_eq!(
            h.record(2, None, &Frontier::<4>::new()),
            Err(SignalError::NotAdvancing { value: 2, current: 2 })
        );
        // Another signal may be recorded behind it; a wait past the reservation imports that.
        h.record(3, Some(point(2, 1)), &Frontier::<4>::from_points([point(2, 1)])).unwrap();
        assert!(matches!(h.lookup(3), Lookup::Tracked { reached: false, .. }));
        assert_eq!(h.lookup(2), Lookup::Unsignalled);
        assert!(h.fill(2, point(1, 1), &Frontier::<4>::from_points([point(1, 1)])));
        assert!(!h.fill(2, point(1, 1), &Frontier::<4>::new()), "filled once");
        match h.lookup(1) {
            Lookup::Tracked { origin, frontier, reached: false, aged_out: false } => {
                assert_eq!((origin, frontier.get(origin.axis)), (point(1, 1), Some(1)));
            }
            other => panic!("{other:?}"),
        }
        h.reach(2).unwrap();
        h.reach(3).unwrap();
    }

    #[test]
    fn a_withdrawn_reservation_leaves_no_trace_in_the_order() {
        let mut h = History::<4, 4>::new(0);
        tracked(&mut h, 1, 1);
        h.reserve(2).unwrap();
        h.record(3, Some(point(2, 1)), &Frontier::<4>::new()).unwrap();
        assert!(h.withdraw(2));
        assert!(!h.withdraw(2));
        assert!(!h.withdraw(3), "only reservations can be withdrawn");
        assert_eq!(h.iter().map(|e| e.value).collect::<Vec<_>>(), [1, 3]);
        assert_eq!((h.submitted(), h.pending()), (3, 1));
        h.reach(3).unwrap();
        // Withdrawing the newest lowers the highest submitted value again.
        h.reserve(7).unwrap();
        assert!(h.withdraw(7));
        assert_eq!((h.submitted(), h.pending()), (3, 0));
        h.record(4, Some(point(1, 2)), &Frontier::<4>::new()).unwrap();
        // With nothing retained, the timeline is back where it started.
        let mut empty = History::<4, 4>::new(5);
        empty.reserve(6).unwrap();
        assert!(empty.withdraw(6));
        assert_eq!((empty.submitted(), empty.iter().count()), (5, 0));
    }

    #[test]
    fn aged_out_values_import_the_oldest_retained_reached_entry() {
        let mut h = History::<4, 4>::new(0);
        for v in 1..=6 {
            tracked(&mut h, v, v);
        }
        match h.lookup(1) {
            Lookup::Tracked { origin, reached: true, aged_out: true, .. } => {
                assert_eq!(origin, point(1, 3));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(h.aged_out_imports(), 1);
    }

    #[test]
    fn external_window_is_tainted_until_a_tracked_signal_passes_it() {
        let mut h = History::<4, 4>::new(0);
        tracked(&mut h, 1, 1);
        h.record(4, None, &Frontier::<4>::new()).unwrap();
        h.reach(4).unwrap();
        assert!(matches!(h.lookup(1), Lookup::Tracked { .. }));
        assert_eq!(h.lookup(2), Lookup::External { reached: true });
        assert_eq!(h.lookup(4), Lookup::External { reached: true });
        tracked(&mut h, 6, 2);
        assert_eq!(h.lookup(3), Lookup::External { reached: true });
        assert!(matches!(h.lookup(5), Lookup::Tracked { reached: true, .. }));
        assert_eq!(h.lookup(7), Lookup::Unsignalled);
    }

    #[test]
    fn a_failure_leaves_reached_values_reached() {
        let mut h = History::<4, 4>::new(0);
        tracked(&mut h, 3, 1);
        h.record(5, Some(point(1, 2)), &Frontier::<4>::new()).unwrap();
        assert!(h.fail(Failure::Cancelled));
        assert!(matches!(h.lookup(2), Lookup::Tracked { reached: true, .. }));
        assert!(matches!(h.lookup(3), Lookup::Tracked { reached: true, .. }));
        assert_eq!(h.lookup(4), Lookup::Failed(Failure::Cancelled));
        assert_eq!(h.lookup(5), Lookup::Failed(Failure::Cancelled));
    }

    #[test]
    fn a_cancelled_signal_fails_only_its_own_values() {
        let mut h = History::<8, 4>::new(0);
        tracked(&mut h, 1, 1);
        for (value, epoch) in [(3, 2), (5, 3), (8, 4)] {
            h.record(value, Some(point(1, epoch)), &Frontier::<4>::new()).unwrap();
        }
        // The signal to 5 is cancelled while 3 is still pending: values 4..=5 fail.
        assert_eq!(h.cancel(5), Ok(3));
        assert_eq!(h.cancel(5), Ok(3), "cancelling twice is harmless");
        assert_eq!(h.lookup(4), Lookup::Failed(Failure::Cancelled));
        assert_eq!(h.lookup(5), Lookup::Failed(Failure::Cancelled));
        assert!(h.cancels(4) && h.cancels(5) && !h.cancels(3) && !h.cancels(6));
        assert!(matches!(h.lookup(3), Lookup::Tracked { reached: false, .. }));
        // 3 completes, then 8 — the cancelled 5 is skipped, not a broken contract.
        h.reach(3).unwrap();
        h.reach(8).unwrap();
        assert_eq!((h.reached(), h.failure(), h.pending()), (8, None, 0));
        match h.lookup(6) {
            Lookup::Tracked { origin, reached: true, aged_out: false, .. } => {
                assert_eq!(origin, point(1, 4));
            }
            other => panic!("{other:?}"),
        }
        // Passing it does not revive the cancelled range.
        assert_eq!(h.lookup(5), Lookup::Failed(Failure::Cancelled));
        // Later signals go on as usual.
        tracked(&mut h, 9, 5);
        assert_eq!(h.reached(), 9);
    }

    #[test]
    fn cancel_refuses_what_is_not_a_pending_signal() {
        let mut h = History::<4, 4>::new(0);
        tracked(&mut h, 2, 1);
        assert_eq!(h.cancel(2), Err(SignalError::NotAdvancing { value: 2, current: 2 }));
        assert_eq!(h.cancel(3), Err(SignalError::NotSubmitted { value: 3 }));
        h.reserve(4).unwrap();
        assert_eq!(h.cancel(4), Err(SignalError::NotSubmitted { value: 4 }));
        h.fail(Failure::DeviceLost);
        assert_eq!(h.cancel(4), Err(SignalError::Failed(Failure::DeviceLost)));
    }

    #[test]
    fn an_evicted_cancellation_fails_aged_out_values_at_or_below_it() {
        let mut h = History::<2, 4>::new(0);
        tracked(&mut h, 1, 1);
        h.record(2, Some(point(1, 2)), &Frontier::<4>::new()).unwrap();
        h.cancel(2).unwrap();
        tracked(&mut h, 3, 3); // evicts 1
        tracked(&mut h, 4, 4); // evicts the cancelled 2
        assert_eq!(h.iter().map(|e| e.value).collect::<Vec<_>>(), [3, 4]);
        // Conservative below the evicted cancellation, exact above it.
        assert_eq!(h.lookup(1), Lookup::Failed(Failure::Cancelled));
        assert_eq!(h.lookup(2), Lookup::Failed(Failure::Cancelled));
        assert!(matches!(h.lookup(3), Lookup::Tracked { reached: true, aged_out: false, .. }));
    }

    #[test]
    fn an_aged_out_value_never_imports_a_cancelled_frontier() {
        let mut h = History::<2, 4>::new(0);
        tracked(&mut h, 1, 1);
        tracked(&mut h, 2, 2);
        h.record(3, Some(point(1, 3)), &Frontier::<4>::new()).unwrap();
        h.cancel(3).unwrap();
        // 1 is evicted; the oldest retained, 2, is reached; then 2 goes, leaving 3 (cancelled)
        // as the oldest retained.
        h.record(4, Some(point(1, 4)), &Frontier::<4>::new()).unwrap();
        assert_eq!(h.iter().map(|e| e.value).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(h.lookup(2), Lookup::External { reached: true });
        assert_eq!(h.lookup(3), Lookup::Failed(Failure::Cancelled));
    }

    #[test]
    fn withdrawing_the_reservation_before_a_cancelled_signal_settles_it() {
        let mut h = History::<4, 4>::new(0);
        tracked(&mut h, 1, 1);
        h.reserve(2).unwrap();
        h.record(3, Some(point(2, 1)), &Frontier::<4>::new()).unwrap();
        h.cancel(3).unwrap();
        assert!(h.withdraw(2));
        // The next signal completes without the cancelled 3 standing in its way.
        h.record(4, Some(point(1, 2)), &Frontier::<4>::new()).unwrap();
        assert_eq!(h.reach(4), Ok(()));
        assert_eq!((h.reached(), h.failure()), (4, None));
        assert_eq!(h.lookup(3), Lookup::Failed(Failure::Cancelled));
    }

    #[test]
    fn room_at_skips_a_cancelled_signal() {
        let mut h = History::<2, 4>::new(0);
        h.record(1, Some(point(1, 1)), &Frontier::<4>::new()).unwrap();
        h.record(2, Some(point(1, 2)), &Frontier::<4>::new()).unwrap();
        h.cancel(2).unwrap();
        assert_eq!(h.room_at(), Some(1), "2 will never complete; completing 1 settles both");
        h.reach(1).unwrap();
        assert_eq!(h.room_at(), None);
    }

    #[test]
    fn a_signal_of_work_that_ran_on_rejected_speculation_is_marked_for_its_waiters() {
        let mut h = History::<4, 4>::new(0);
        tracked(&mut h, 2, 1);
        h.record(4, Some(point(1, 2)), &Frontier::<4>::new()).unwrap();
        h.record(6, Some(point(1, 3)), &Frontier::<4>::new()).unwrap();
        assert!(h.mark_ran_on_rejected(4));
        assert!(!h.mark_ran_on_rejected(5), "no signal to 5");
        // The waits the marked signal discharges (3..=4) see it; the others do not.
        let marked: Vec<u64> = (1..=7).filter(|&v| h.ran_on_rejected(v)).collect();
        assert_eq!(marked, [3, 4]);
        h.reach(4).unwrap();
        assert!(h.ran_on_rejected(4), "the mark stays once the signal completed");
        assert!(h.cancel(6).is_ok());
        assert!(!h.mark_ran_on_rejected(6), "a cancelled signal never ran");
        // A recycled slot forgets the mark.
        for v in 7..=12 {
            tracked(&mut h, v, v);
        }
        assert!(h.iter().all(|e| !e.ran_on_rejected));
    }

    #[test]
    fn first_failure_wins() {
        let mut h = History::<4, 4>::new(0);
        assert!(h.fail(Failure::Aborted));
        assert!(!h.fail(Failure::DeviceLost));
        assert_eq!(h.failure(), Some(Failure::Aborted));
        assert_eq!(
            h.record(1, None, &Frontier::<4>::new()),
            Err(SignalError::Failed(Failure::Aborted))
        );
    }

    #[test]
    fn room_at_names_the_value_whose_completion_frees_a_slot() {
        let mut h = History::<2, 4>::new(0);
        h.record(1, Some(point(1, 1)), &Frontier::<4>::new()).unwrap();
        assert_eq!(h.room_at(), None);
        h.record(2, Some(point(1, 2)), &Frontier::<4>::new()).unwrap();
        assert_eq!((h.pending(), h.room_at()), (2, Some(2)));
        // Reaching 1 is not enough: it becomes the newest reached entry, which is kept.
        h.reach(1).unwrap();
        assert_eq!((h.pending(), h.room_at()), (1, Some(2)));
        h.reach(2).unwrap();
        assert_eq!(h.room_at(), None);
        h.record(3, Some(point(1, 3)), &Frontier::<4>::new()).unwrap();
        assert_eq!(h.iter().map(|e| e.value).collect::<Vec<_>>(), [2, 3]);
        h.fail(Failure::Aborted);
        assert_eq!(h.room_at(), None, "a failed timeline has nothing to wait for");
    }

    #[test]
    fn run_time_slots_must_number_two_to_65535() {
        let slots = |n: usize| vec![HistoryEntry::<4>::BLANK; n].into_boxed_slice();
        let refused = |n: usize| History::<0, 4, _>::with_slots(slots(n), 0).map(|h| h.capacity());
        assert_eq!(refused(1), Err(SlotCountError { slots: 1 }));
        assert_eq!(refused(65_536), Err(SlotCountError { slots: 65_536 }));
        assert_eq!(refused(2), Ok(2));
        assert_eq!(refused(65_535), Ok(65_535));
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config())]
        /// The guessed search agrees with a scan over the retained entries, over runs of
        /// consecutive values and gaps, with the ring wrapped any number of times.
        #[test]
        fn the_first_entry_at_or_above_is_found_with_or_without_gaps(
            gaps in proptest::collection::vec(prop_oneof![3 => Just(1u64), 1 => 1u64..5], 1..60),
            probes in proptest::collection::vec(0u64..200, 1..20),
        ) {
            let mut h = History::<8, 4>::new(0);
            let mut value = 0;
            for gap in gaps {
                value += gap;
                if !h.has_room() {
                    // Reach every pending entry: the oldest may then be evicted.
                    let pending: Vec<u64> =
                        h.iter().filter(|e| !e.reached).map(|e| e.value).collect();
                    for v in pending {
                        h.reach(v).unwrap();
                    }
                }
                h.record(value, Some(point(1, value)), &Frontier::<4>::new()).unwrap();
                for &v in &probes {
                    let scan = h.iter().position(|e| e.value >= v).unwrap_or(h.iter().count());
                    prop_assert_eq!(h.first_at_or_above(v), scan, "value {}", v);
                }
            }
        }

        /// Against a model that keeps every signal forever: a lookup either returns the exact
        /// first signal ≥ v, or (aged out) a reached signal above it — never an unreached one
        /// when the value has been reached, never a later one when the exact one is retained.
        #[test]
        fn lookups_follow_the_late_waiter_rule(
            steps in proptest::collection::vec((1u64..4, any::<bool>(), any::<bool>()), 1..40),
            probes in proptest::collection::vec(1u64..120, 1..10),
        ) {
            let mut h = History::<4, 4>::new(0);
            let mut all: Vec<(u64, bool, bool)> = Vec::new(); // (value, external, reached)
            let mut next = 0;
            for (gap, external, reach_now) in steps {
                let value = next + gap;
                let origin = (!external).then(|| point(1, value));
                if h.record(value, origin, &Frontier::<4>::new()).is_err() {
                    // Full of pending entries: complete the oldest pending and go on.
                    let pending = all.iter().position(|e| !e.2).unwrap();
                    h.reach(all[pending].0).unwrap();
                    all[pending].2 = true;
                    continue;
                }
                all.push((value, external, false));
                next = value;
                if reach_now {
                    let oldest_pending = all.iter().position(|e| !e.2).unwrap();
                    h.reach(all[oldest_pending].0).unwrap();
                    all[oldest_pending].2 = true;
                }
            }
            for v in probes {
                let truth = all.iter().find(|e| e.0 >= v);
                match (h.lookup(v), truth) {
                    (Lookup::Unsignalled, None) => {}
                    (Lookup::Tracked { origin, reached, aged_out: false, .. }, Some(&(tv, false, tr))) => {
                        prop_assert_eq!(origin.epoch, tv);
                        prop_assert_eq!(reached, tr);
                    }
                    (Lookup::External { reached }, Some(&(_, true, tr))) => prop_assert_eq!(reached, tr),
                    (Lookup::Tracked { origin, reached, aged_out: true, .. }, Some(&(tv, _, true))) => {
                        prop_assert!(reached && origin.epoch >= tv);
                    }
                    (Lookup::External { reached: true }, Some(&(_, _, true))) => {}
                    (got, want) => prop_assert!(false, "lookup({}) = {:?}, truth {:?}", v, got, want),
                }
            }
        }

        /// A failure at any point of any history: a lookup of a value reached before it answers
        /// exactly what the same history without the failure answers; every other value fails.
        #[test]
        fn a_failure_concerns_only_unreached_values(
            steps in proptest::collection::vec((1u64..4, any::<bool>(), any::<bool>()), 1..40),
            probes in proptest::collection::vec(1u64..120, 1..10),
        ) {
            let build = || {
                let mut h = History::<4, 4>::new(0);
                let mut next = 0;
                for &(gap, external, reach_now) in &steps {
                    let value = next + gap;
                    let origin = (!external).then(|| point(1, value));
                    if h.record(value, origin, &Frontier::<4>::new()).is_ok() {
                        next = value;
                    }
                    if reach_now || !h.has_room() {
                        let oldest_pending = h.iter().find(|e| !e.reached).map(|e| e.value);
                        if let Some(value) = oldest_pending {
                            h.reach(value).unwrap();
                        }
                    }
                }
                h
            };
            let mut intact = build();
            let mut failed = build();
            prop_assert!(failed.fail(Failure::Cancelled));
            for v in probes {
                if v <= failed.reached() {
                    prop_assert_eq!(failed.lookup(v), intact.lookup(v));
                } else {
                    prop_assert_eq!(failed.lookup(v), Lookup::Failed(Failure::Cancelled));
                }
            }
        }

        /// Reservations against a model that keeps every signal forever: recording, reserving,
        /// filling, withdrawing and reaching in any order. A lookup that lands on a reservation
        /// learns nothing; a filled one reads as the signal it became; a withdrawn one leaves
        /// no trace (the retained values are the model's, in order); a reservation cannot be
        /// reached; lookups elsewhere follow the late-waiter rule as without reservations.
        #[test]
        fn reservations_hide_until_filled_and_withdraw_without_trace(
            steps in proptest::collection::vec((0u8..5, 1u64..4, any::<bool>(), 0usize..4), 1..60),
            probes in proptest::collection::vec(1u64..200, 1..10),
        ) {
            #[derive(Clone, Copy, Debug, PartialEq)]
            enum Kind { Reserved, Pending, Reached }
            // (value, external, kind); withdrawn entries are removed.
            let mut model: Vec<(u64, bool, Kind)> = Vec::new();
            let mut h = History::<4, 4>::new(0);
            let mut next = 0;
            for (action, gap, external, pick) in steps {
                let reserved: Vec<usize> =
                    (0..model.len()).filter(|&i| model[i].2 == Kind::Reserved).collect();
                match action {
                    0 | 1 => {
                        next += gap;
                        let result = if action == 0 {
                            let origin = (!external).then(|| point(1, next));
                            h.record(next, origin, &Frontier::<4>::new())
                        } else {
                            h.reserve(next)
                        };
                        match result {
                            Ok(()) => {
                                let kind = if action == 0 { Kind::Pending } else { Kind::Reserved };
                                model.push((next, action == 0 && external, kind));
                            }
                            Err(error) => prop_assert!(
                                matches!(error, SignalError::HistoryFull { .. }),
                                "{:?}", error
                            ),
                        }
                    }
                    2 if !reserved.is_empty() => {
                        let i = reserved[pick % reserved.len()];
                        let value = model[i].0;
                        let origin = point(1, value);
                        prop_assert!(h.fill(value, origin, &Frontier::<4>::from_points([origin])));
                        model[i] = (value, false, Kind::Pending);
                    }
                    3 if !reserved.is_empty() => {
                        let i = reserved[pick % reserved.len()];
                        prop_assert!(h.withdraw(model[i].0));
                        prop_assert!(!h.withdraw(model[i].0), "withdrawn twice");
                        model.remove(i);
                    }
                    _ => {
                        let Some(i) = model.iter().position(|e| e.2 != Kind::Reached) else {
                            continue;
                        };
                        let value = model[i].0;
                        if model[i].2 == Kind::Reserved {
                            prop_assert_eq!(h.reach(value), Err(SignalError::NotSubmitted { value }));
                        } else {
                            prop_assert_eq!(h.reach(value), Ok(()));
                            model[i].2 = Kind::Reached;
                        }
                    }
                }
                // The retained entries are the newest of the model's, in order.
                let kept: Vec<(u64, bool)> = h.iter().map(|e| (e.value, e.reserved)).collect();
                let tail: Vec<(u64, bool)> = model[model.len() - kept.len()..]
                    .iter()
                    .map(|e| (e.0, e.2 == Kind::Reserved))
                    .collect();
                prop_assert_eq!(&kept, &tail);
                prop_assert!(model[..model.len() - kept.len()].iter().all(|e| e.2 == Kind::Reached));
            }
            for v in probes {
                let truth = model.iter().find(|e| e.0 >= v);
                match (h.lookup(v), truth) {
                    (Lookup::Unsignalled, None | Some(&(_, _, Kind::Reserved))) => {}
                    (Lookup::Tracked { origin, reached, aged_out: false, .. }, Some(&(tv, false, kind))) => {
                        prop_assert_eq!(origin.epoch, tv);
                        prop_assert_eq!(reached, kind == Kind::Reached);
                    }
                    (Lookup::External { reached }, Some(&(_, true, kind))) => {
                        prop_assert_eq!(reached, kind == Kind::Reached);
                    }
                    (Lookup::Tracked { origin, reached: true, aged_out: true, .. }, Some(&(tv, _, Kind::Reached))) => {
                        prop_assert!(origin.epoch >= tv);
                    }
                    (Lookup::External { reached: true }, Some(&(_, _, Kind::Reached))) => {}
                    (got, want) => prop_assert!(false, "lookup({}) = {:?}, truth {:?}", v, got, want),
                }
            }
        }

        /// Cancellations against a model that keeps every signal forever: recording, reserving,
        /// filling and withdrawing, reaching in order and cancelling pending signals, in any
        /// order. A wait on a value whose
        /// covering signal was cancelled always fails as cancelled; one whose covering signal is
        /// pending or reached answers exactly as without cancellations while retained; an
        /// aged-out one never imports the frontier of a cancelled or unreached signal, and
        /// fails only when a cancelled value at or above it was evicted (the conservative
        /// case). `cancels` agrees with every lookup; completions never break the contract.
        #[test]
        fn a_cancellation_fails_exactly_the_values_it_covers(
            steps in proptest::collection::vec((0u8..7, 1u64..4, any::<bool>(), 0usize..8), 1..80),
            probes in proptest::collection::vec(1u64..300, 1..16),
        ) {
            #[derive(Clone, Copy, Debug, PartialEq)]
            enum Kind { Reserved, Pending, Reached, Cancelled }
            // (value, external, kind)
            let mut model: Vec<(u64, bool, Kind)> = Vec::new();
            let mut h = History::<3, 4>::new(0);
            let mut next = 0;
            for (action, gap, external, pick) in steps {
                match action {
                    0 | 1 | 4 => {
                        let value = next + gap;
                        let origin = (!external).then(|| point(1, value));
                        let result = if action == 4 {
                            h.reserve(value)
                        } else {
                            h.record(value, origin, &Frontier::<4>::from_points(origin))
                        };
                        match result {
                            Ok(()) => {
                                let kind = if action == 4 { Kind::Reserved } else { Kind::Pending };
                                model.push((value, external && action != 4, kind));
                                next = value;
                            }
                            Err(error) => prop_assert!(
                                matches!(error, SignalError::HistoryFull { .. }), "{:?}", error
                            ),
                        }
                    }
                    5 | 6 => {
                        let reserved: Vec<usize> =
                            (0..model.len()).filter(|&i| model[i].2 == Kind::Reserved).collect();
                        if reserved.is_empty() {
                            continue;
                        }
                        let i = reserved[pick % reserved.len()];
                        let value = model[i].0;
                        if action == 5 {
                            prop_assert!(h.withdraw(value));
                            model.remove(i);
                        } else {
                            let origin = point(1, value);
                            prop_assert!(h.fill(value, origin, &Frontier::<4>::from_points([origin])));
                            model[i] = (value, false, Kind::Pending);
                        }
                    }
                    2 => {
                        let Some(i) = model.iter().position(|e| matches!(e.2, Kind::Pending | Kind::Reserved)) else {
                            continue;
                        };
                        let value = model[i].0;
                        if model[i].2 == Kind::Reserved {
                            prop_assert_eq!(h.reach(value), Err(SignalError::NotSubmitted { value }));
                        } else {
                            prop_assert_eq!(h.reach(value), Ok(()));
                            model[i].2 = Kind::Reached;
                        }
                    }
                    _ => {
                        let pending: Vec<usize> =
                            (0..model.len()).filter(|&i| model[i].2 == Kind::Pending).collect();
                        if pending.is_empty() {
                            continue;
                        }
                        let i = pending[pick % pending.len()];
                        let after = if i == 0 { 0 } else { model[i - 1].0 };
                        prop_assert_eq!(h.cancel(model[i].0), Ok(after));
                        model[i].2 = Kind::Cancelled;
                    }
                }
                prop_assert_eq!(h.failure(), None);
                let kept: Vec<u64> = h.iter().map(|e| e.value).collect();
                let tail: Vec<u64> = model[model.len() - kept.len()..].iter().map(|e| e.0).collect();
                prop_assert_eq!(kept, tail);
            }
            let evicted = model.len() - h.iter().count();
            for v in probes {
                let truth = model.iter().position(|e| e.0 >= v);
                let lookup = h.lookup(v);
                prop_assert_eq!(
                    h.cancels(v),
                    lookup == Lookup::Failed(Failure::Cancelled),
                    "cancels({}) disagrees with {:?}", v, lookup
                );
                let Some(t) = truth else {
                    prop_assert_eq!(lookup, Lookup::Unsignalled);
                    continue;
                };
                let (tv, external, kind) = model[t];
                let aged_out = t < evicted;
                match (kind, aged_out, lookup) {
                    (Kind::Reserved, false, Lookup::Unsignalled) => {}
                    (Kind::Cancelled, _, Lookup::Failed(Failure::Cancelled)) => {}
                    (Kind::Pending | Kind::Reached, false, Lookup::Tracked { origin, reached, aged_out: false, .. }) => {
                        prop_assert!(!external);
                        prop_assert_eq!(origin.epoch, tv);
                        prop_assert_eq!(reached, kind == Kind::Reached);
                    }
                    (Kind::Pending | Kind::Reached, false, Lookup::External { reached }) => {
                        prop_assert!(external);
                        prop_assert_eq!(reached, kind == Kind::Reached);
                    }
                    (Kind::Reached, true, Lookup::Tracked { origin, reached: true, aged_out: true, .. }) => {
                        // What it imports is a signal that completed, at or above the truth.
                        let imported = model.iter().find(|e| !e.1 && e.0 == origin.epoch);
                        prop_assert!(origin.epoch >= tv);
                        prop_assert_eq!(imported.map(|e| e.2), Some(Kind::Reached));
                    }
                    (Kind::Reached, true, Lookup::External { reached: true }) => {}
                    (Kind::Reached, true, Lookup::Failed(Failure::Cancelled)) => {
                        // Conservative only when a cancelled value at or above `v` was evicted.
                        prop_assert!(model[t..evicted].iter().any(|e| e.2 == Kind::Cancelled));
                    }
                    (kind, aged_out, got) => prop_assert!(
                        false, "lookup({}) = {:?}, truth {:?} {:?} aged out {}", v, got, tv, kind, aged_out
                    ),
                }
            }
        }

        /// Run-time slots behave exactly as inline ones of the same count, ring wrap included.
        #[test]
        fn run_time_slots_match_inline_slots(
            steps in proptest::collection::vec((1u64..4, any::<bool>(), 0usize..3), 1..60),
            probes in proptest::collection::vec(1u64..200, 1..10),
        ) {
            let mut inline = History::<3, 4>::new(0);
            let boxed = vec![HistoryEntry::<4>::BLANK; 3].into_boxed_slice();
            let mut run_time = History::<0, 4, Box<[HistoryEntry<4>]>>::with_slots(boxed, 0).unwrap();
            let mut next = 0;
            for (gap, external, reach) in steps {
                next += gap;
                let origin = (!external).then(|| point(1, next));
                let frontier = Frontier::<4>::from_points(origin);
                prop_assert_eq!(
                    inline.record(next, origin, &frontier),
                    run_time.record(next, origin, &frontier)
                );
                for _ in 0..reach {
                    let oldest_pending = inline.iter().find(|e| !e.reached).map(|e| e.value);
                    if let Some(value) = oldest_pending {
                        prop_assert_eq!(inline.reach(value), run_time.reach(value));
                    }
                }
                prop_assert_eq!(inline.room_at(), run_time.room_at());
                prop_assert!(inline.iter().eq(run_time.iter()));
            }
            for v in probes {
                prop_assert_eq!(inline.lookup(v), run_time.lookup(v));
            }
        }
    }
}

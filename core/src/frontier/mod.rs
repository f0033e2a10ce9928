//! Frontiers: fixed-capacity sparse vector clocks.
//!
//! A [`Frontier`] is a set of `(axis, epoch)` entries — "everything on this axis up to this epoch
//! is in my causal past" — plus a *tainted* flag. Absent axes have epoch 0; stored epochs are
//! always ≥ 1.
//!
//! # Two uses, one soundness rule
//!
//! A frontier used as **knowledge** (what a queue knows has happened) stays sound when entries
//! are lost: it only knows less. A frontier used as a **requirement** (what must have happened
//! before something may run) becomes unsound if entries vanish. Overflow therefore evicts the
//! smallest epochs *and* marks the frontier tainted, and [`Frontier::dominates`] is `false`
//! whenever its argument is tainted: an incomplete requirement can never be proven from
//! knowledge, only discharged by a real wait. Merging a tainted frontier taints the result.
//!
//! # Layout
//!
//! Axes and epochs live in two parallel arrays (structure of arrays), sorted by axis. Unused
//! slots always hold the sentinel axis `u64::MAX` (never a valid axis: its domain code is
//! unknown) and epoch 0. That invariant makes whole-array comparisons meaningful, which
//! [`Frontier::dominates`] uses: two frontiers over the same axes compare with straight-line
//! element-wise code the compiler vectorises. The merge's union walk relies on it too (see
//! below).
//!
//! Length and taint come first, in the word a copy writes first. A frontier is usually merged
//! into a fresh copy, made a moment ago by a `memcpy` call (136 bytes, too many for the
//! compiler to copy inline), which on x86-64 glibc stores the first 32 bytes and then the last
//! 128 in four overlapping 32-byte stores. A load that lies past the cache-line boundary one of
//! those stores crosses cannot take its data from the store and waits until the store reaches
//! the cache: measured, a copy followed by one such load costs 5.3 ns instead of 2.6. With the
//! length and taint at the end, every merge read such a word at 6 of the 8 positions a
//! frontier can take in a cache line; in the first word no merge does, and a short frontier's
//! merge, which reads only its first entries, meets the seams at fewer positions.
//!
//! # Merge
//!
//! The merge reads its target one entry at a time (a wide load straddling two of the copy's
//! stores would wait on both), sets the taint without reading it, and reads as few target
//! words as the path needs:
//!
//! - same axes in the same slots: one loop compares each slot's axes and joins its epochs,
//!   over the length only, and stops at the first slot whose axes differ (a slot joined before
//!   it already holds what the full merge gives it);
//! - both runs fit side by side: one walk counts the union, a second writes it in place from
//!   the top down, reading both runs backwards (the writes never overtake an unread entry), with
//!   no scratch and no copy of the target;
//! - otherwise the merge walks the union into an uninitialised stack scratch while keeping the
//!   four smallest epochs it wrote, in registers; those fix the eviction cut, and one backward
//!   pass writes the survivors into place, stopping at the last of them. When both runs end
//!   before their arrays, the walk reads both heads straight from the arrays until both are
//!   sentinels: no bounds, no tail loop. More than four evictions take a second pass to find
//!   the cut.

mod wire;

use core::fmt;
use core::mem::MaybeUninit;

pub use wire::WireError;

use crate::axis::Axis;

/// Axis bits of an unused slot. Never a valid [`Axis`] (its domain code is unknown), and larger
/// than every valid axis, so it sorts last.
const EMPTY: u64 = u64::MAX;

/// One exact causal position: an epoch on an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Point {
    /// The timeline.
    pub axis: Axis,
    /// The position on it (≥ 1 for a real operation).
    pub epoch: u64,
}

impl Point {
    /// A point on `axis` at `epoch`.
    pub const fn new(axis: Axis, epoch: u64) -> Point {
        Point { axis, epoch }
    }
}

/// A sparse vector clock of at most `N` entries (1 ≤ `N` ≤ 64), sorted by axis.
///
/// See the [module documentation](self) for the knowledge/requirement soundness rule.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Frontier<const N: usize = 8> {
    // Length and taint first, in the word a copy stores first (see "Layout" in the module
    // docs).
    len: u8,
    tainted: bool,
    axes: [u64; N],
    epochs: [u64; N],
}

// The merge's speed depends on this placement (see "Layout" in the module docs).
const _: () = assert!(
    core::mem::offset_of!(Frontier<8>, len) == 0
        && core::mem::offset_of!(Frontier<8>, tainted) == 1
);

impl<const N: usize> Frontier<N> {
    const CAPACITY_IS_VALID: () = assert!(N >= 1 && N <= 64, "frontier capacity must be 1..=64");

    /// An empty, untainted frontier.
    pub const fn new() -> Frontier<N> {
        // Referencing the constant forces the capacity check at compile time.
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_IS_VALID;
        Frontier { axes: [EMPTY; N], epochs: [0; N], len: 0, tainted: false }
    }

    /// A frontier holding the given points (later duplicates raise earlier ones; overflow evicts
    /// and taints exactly as [`insert_or_raise`](Self::insert_or_raise) does).
    pub fn from_points(points: impl IntoIterator<Item = Point>) -> Frontier<N> {
        let mut frontier = Frontier::new();
        for point in points {
            frontier.insert_or_raise(point.axis, point.epoch);
        }
        frontier
    }

    /// The same entries in a frontier of capacity `N`: a copy when they fit, otherwise
    /// evicted and tainted like any overflowing merge.
    pub fn from_frontier<const M: usize>(other: &Frontier<M>) -> Frontier<N> {
        let mut frontier = Frontier::new();
        frontier.merge(other);
        frontier
    }

    /// Makes this frontier hold `other`'s entries and taint, as [`clear`](Self::clear) then
    /// [`merge`](Self::merge) would: in one pass of stores when `other` fits (its unused slots
    /// hold the empty sentinels already, as every frontier's do), instead of clearing every
    /// slot and then overwriting it (a semaphore's history taking a signaller's frontier).
    #[inline]
    pub(crate) fn assign<const M: usize>(&mut self, other: &Frontier<M>) {
        if M <= N {
            self.len = other.len;
            self.tainted = other.tainted;
            self.axes[..M].copy_from_slice(&other.axes);
            self.axes[M..].fill(EMPTY);
            self.epochs[..M].copy_from_slice(&other.epochs);
            self.epochs[M..].fill(0);
        } else {
            self.clear();
            self.merge(other);
        }
    }

    /// Maximum number of entries.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Number of entries.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the frontier has no entries (it may still be tainted).
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether entries may be missing (overflow, or a tainted input was merged in).
    pub const fn is_tainted(&self) -> bool {
        self.tainted
    }

    /// Marks the frontier as possibly incomplete.
    pub fn taint(&mut self) {
        self.tainted = true;
    }

    /// The epoch known for `axis`, if any.
    pub fn get(&self, axis: Axis) -> Option<u64> {
        let bits = axis.to_bits();
        // Branch-free scan: N is small and the arrays are contiguous, so a full pass beats a
        // data-dependent search.
        let mut found = 0;
        for (&a, &e) in self.axes.iter().zip(self.epochs.iter()) {
            found |= if a == bits { e } else { 0 };
        }
        (found != 0).then_some(found)
    }

    /// Whether this frontier, as knowledge, covers `point`.
    pub fn knows(&self, point: Point) -> bool {
        point.epoch == 0 || self.get(point.axis).is_some_and(|e| e >= point.epoch)
    }

    /// The entries in axis order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Point> + '_ {
        self.axes[..self.len()]
            .iter()
            .zip(&self.epochs[..self.len()])
            .map(|(&a, &e)| Point { axis: Axis::from_trusted_bits(a), epoch: e })
    }

    /// Removes every entry and the taint.
    pub fn clear(&mut self) {
        *self = Frontier::new();
    }

    /// Raises `axis` to at least `epoch`, inserting it if absent. Never lowers an entry; an
    /// epoch of 0 is the absent value and changes nothing.
    ///
    /// When the frontier is full and `axis` is new, the entry with the smallest epoch among the
    /// old entries and the new one is evicted (ties: the larger axis goes) and the frontier
    /// becomes tainted.
    pub fn insert_or_raise(&mut self, axis: Axis, epoch: u64) {
        if epoch == 0 {
            return;
        }
        let bits = axis.to_bits();
        // A forward scan that stops at the first slot not below `axis`: the sentinel in unused
        // slots stops it at the length at the latest. A queue raises the same few axes over and
        // over, so the exit branch predicts well, and it beats a binary search's chain of
        // dependent loads.
        let pos = self.axes.iter().position(|&a| a >= bits).unwrap_or(N);
        if pos < N && self.axes[pos] == bits {
            self.epochs[pos] = self.epochs[pos].max(epoch);
            return;
        }
        if self.len() == N {
            self.insert_overflowing(bits, epoch);
        } else {
            self.insert_at(pos, bits, epoch);
        }
    }

    /// Overflow is rare and goes through the merge, which owns the one eviction rule; kept out
    /// of line so the merge's scratch does not weigh on every raise.
    #[cold]
    #[inline(never)]
    fn insert_overflowing(&mut self, bits: u64, epoch: u64) {
        let mut single = Frontier::<1>::new();
        single.insert_at(0, bits, epoch);
        self.merge(&single);
    }

    /// Component-wise maximum with `other` (the join of two causal histories). A tainted input
    /// taints the result; overflow evicts the smallest epochs and taints.
    pub fn merge<const M: usize>(&mut self, other: &Frontier<M>) {
        // A store only when `other` is tainted, never a read-modify-write of this frontier's
        // taint: no load here that might wait on the fresh copy's stores.
        if other.tainted {
            self.tainted = true;
        }
        let (own_len, other_len) = (self.len(), other.len());
        if other_len == 0 {
            return;
        }
        if own_len == 0 && M <= N {
            // Joining into nothing (a semaphore taking a signaller's frontier): a plain copy.
            // Slots past `other`'s length are already the empty sentinels.
            self.axes[..M].copy_from_slice(&other.axes);
            self.epochs[..M].copy_from_slice(&other.epochs);
            self.len = other.len;
            return;
        }
        // From here on this frontier is read entry by entry, never as whole arrays (see the
        // module documentation).
        if own_len == other_len && self.join_same_axes(other) {
            return;
        }
        self.join_other_axes(other);
    }

    /// The merges that reorder entries. Out of line on hosted targets, so that the registers
    /// their walks save weigh only on them, not on the same-axes join.
    #[cfg_attr(not(target_os = "none"), inline(never))]
    fn join_other_axes<const M: usize>(&mut self, other: &Frontier<M>) {
        let (own_len, other_len) = (self.len(), other.len());
        if own_len + other_len <= N {
            self.join_in_place(&other.axes[..other_len], &other.epochs[..other_len]);
        } else if M <= N {
            // A scratch of 2·max(N, M) slots holds the whole union, so the walk never evicts.
            self.merge_through_scratch::<N, M>(other);
        } else {
            self.merge_through_scratch::<M, M>(other);
        }
    }

    /// The epoch-wise join when `other` (of this frontier's length) holds the same axes in the
    /// same slots; returns `false` at the first slot whose axes differ.
    ///
    /// Compare and join are one loop: each slot is joined once its axes are known equal, and
    /// a slot joined before the first mismatch holds the maximum that the full merge which
    /// follows computes for that axis anyway, so stopping half way changes nothing the caller
    /// sees. The early exit also keeps the loop scalar: a vectorised join would read this
    /// frontier with wide loads (see the module documentation), and the baseline x86-64 target
    /// has no vector maximum of 64-bit lanes to make it pay.
    #[inline(always)]
    fn join_same_axes<const M: usize>(&mut self, other: &Frontier<M>) -> bool {
        let len = self.len();
        let mine = self.axes[..len].iter().zip(&mut self.epochs[..len]);
        for ((&axis, epoch), (&other_axis, &other_epoch)) in
            mine.zip(other.axes.iter().zip(&other.epochs))
        {
            if axis != other_axis {
                return false;
            }
            *epoch = (*epoch).max(other_epoch);
        }
        true
    }

    /// The join of two runs that fit side by side (`len + other.len ≤ N`, which the caller
    /// checks), with no scratch and no wide loads of this frontier: one walk counts the union,
    /// a second walks both runs backwards and writes the union downwards from its last slot,
    /// which never overtakes an own entry still to be read. Own entries below the first axis of
    /// `other` are already in place. Both walks branch on the comparisons rather than advance
    /// branch-free: the axis layout repeats from call to call, so the branches predict, and the
    /// next loads need not wait for the last comparison (measured: 4+4 1.33 → 1.07× IREE's
    /// wall time).
    ///
    /// Writing the union from the top without the count pass and closing the gap the shared
    /// axes leave afterwards measured fewer instructions but slower (4+4 1.25 → 1.56× IREE's
    /// wall time): the moves read slots the walk had just written.
    ///
    /// Inlined into the merge on hosted targets; bare-metal builds keep one copy per
    /// instantiation out of line, for the firmware's flash budget.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn join_in_place(&mut self, other_axes: &[u64], other_epochs: &[u64]) {
        // Never above N (the length invariant), and `other` is clamped to the room the caller
        // checked, so the count walk needs no index checks and the unchecked walk below has
        // its bounds in sight.
        let own_len = self.len().min(N);
        let other_len = other_axes.len().min(other_epochs.len()).min(N - own_len);
        let (mut i, mut j, mut union_len) = (0, 0, 0);
        while i < own_len && j < other_len {
            let (a, b) = (self.axes[i], other_axes[j]);
            if a < b {
                i += 1;
            } else if b < a {
                j += 1;
            } else {
                i += 1;
                j += 1;
            }
            union_len += 1;
        }
        union_len += (own_len - i) + (other_len - j);
        let (axes, epochs) = (&mut self.axes, &mut self.epochs);
        let (mut i, mut j, mut slot) = (own_len, other_len, union_len);
        // SAFETY: for every unchecked access below, `i - 1 < own_len ≤ N` (clamped above)
        // indexes the own arrays of length N; `j - 1 < other_len`, at most both other slices'
        // lengths; `slot` starts at `union_len ≤ own_len + other_len ≤ N` (clamped above) and
        // drops by one per write, staying at or above the size of the union of the unread
        // entries, so it never wraps below 0 and never passes an unread own entry.
        unsafe {
            while j > 0 {
                let b = *other_axes.get_unchecked(j - 1);
                slot -= 1;
                if i > 0 && *axes.get_unchecked(i - 1) > b {
                    *axes.get_unchecked_mut(slot) = *axes.get_unchecked(i - 1);
                    *epochs.get_unchecked_mut(slot) = *epochs.get_unchecked(i - 1);
                    i -= 1;
                } else {
                    let mut epoch = *other_epochs.get_unchecked(j - 1);
                    if i > 0 && *axes.get_unchecked(i - 1) == b {
                        epoch = epoch.max(*epochs.get_unchecked(i - 1));
                        i -= 1;
                    }
                    *axes.get_unchecked_mut(slot) = b;
                    *epochs.get_unchecked_mut(slot) = epoch;
                    j -= 1;
                }
            }
        }
        self.len = union_len as u8;
    }

    /// Sorted union into a stack scratch, then the survivors back into place: all of them, or
    /// on overflow the `N` that the eviction rule keeps. Out of line, so that the scratch's stack
    /// frame and saved registers weigh only on the merges that need it.
    #[inline(never)]
    fn merge_through_scratch<const S: usize, const M: usize>(&mut self, other: &Frontier<M>) {
        // Uninitialised: the walk writes the first `k` slots, and only those are read.
        let mut axes = [[MaybeUninit::<u64>::uninit(); S]; 2];
        let mut epochs = [[MaybeUninit::<u64>::uninit(); S]; 2];
        let (axes, epochs) = (axes.as_flattened_mut(), epochs.as_flattened_mut());
        let own_len = self.len().min(N);
        let own = (&self.axes[..own_len], &self.epochs[..own_len]);
        let theirs = (&other.axes[..other.len().min(M)], &other.epochs[..other.len().min(M)]);
        // The walk offers every epoch it writes, so a cut of a few entries (two 6-entry
        // frontiers into 8 slots evict at most 4) needs no second pass over the union.
        let mut smallest = SmallestEpochs::new();
        // Bare-metal builds leave the sentinel walk out: it is a second copy of the walk, and
        // the firmware's flash budget has no room for it.
        let sentinel_walk = cfg!(not(target_os = "none"));
        let k = if sentinel_walk && own_len < N && other.len() < M && S >= N && S >= M {
            // SAFETY: both runs end before their arrays, so a sentinel slot follows each (the
            // layout invariant, kept by every method that writes a frontier), and the scratch
            // holds 2·S ≥ N + M entries.
            unsafe {
                sentinel_union(
                    (&self.axes, &self.epochs),
                    (&other.axes, &other.epochs),
                    (axes, epochs),
                    |e| smallest.offer(e),
                )
            }
        } else {
            sorted_union(own, theirs, (axes, epochs), |e| smallest.offer(e))
        };
        // SAFETY: `sorted_union` initialised the first `k` slots of both scratch arrays, and
        // `MaybeUninit<u64>` has the layout of `u64`.
        let (axes, epochs) = unsafe {
            (
                &*(&axes[..k] as *const [MaybeUninit<u64>] as *const [u64]),
                &*(&epochs[..k] as *const [MaybeUninit<u64>] as *const [u64]),
            )
        };
        if k <= N {
            // No overflow: the union in order. Slots past it were past the old length too:
            // still sentinels.
            for (slot, (&axis, &epoch)) in axes.iter().zip(epochs).enumerate().take(N) {
                (self.axes[slot], self.epochs[slot]) = (axis, epoch);
            }
            self.len = k as u8;
            return;
        }
        self.tainted = true;
        let count = k - N;
        let cut = if count <= SmallestEpochs::HELD {
            smallest.cut(count)
        } else {
            let mut scratch = [[u64::MAX; S]; 2];
            EvictionCut::find(epochs, count, scratch.as_flattened_mut())
        };
        // Survivors from the back, element by element, straight into place. From the back, the
        // tied entries met first are those with the largest axes, the ones the rule evicts. One
        // by one, because a bulk copy would read the scratch with wide loads that cannot be
        // forwarded from the walk's narrow stores still in flight. Two loops: the first decides
        // each entry with a branch while tied victims remain; the second, once none do, needs
        // only the comparison with the cut and runs without a branch per entry (both together:
        // 131 → 119 instructions per 6+6 merge, against one loop testing for ties throughout;
        // bare-metal builds keep that one loop, which is smaller, for their flash budget).
        let mut ties = cut.tied_victims;
        let (mut slot, mut from) = (N, k);
        if cfg!(target_os = "none") {
            // Bare metal: one loop, testing for ties throughout (flash budget).
            while slot > 0 {
                // SAFETY: as for the two loops below: `slot` survivors remain among the `from`
                // unread entries, so `from - 1` never wraps while `slot > 0`, and a survivor is
                // written at `slot - 1 < N`.
                unsafe {
                    from -= 1;
                    let epoch = *epochs.get_unchecked(from);
                    if epoch < cut.epoch {
                        continue;
                    }
                    if epoch == cut.epoch && ties > 0 {
                        ties -= 1;
                        continue;
                    }
                    slot -= 1;
                    *self.axes.get_unchecked_mut(slot) = *axes.get_unchecked(from);
                    *self.epochs.get_unchecked_mut(slot) = epoch;
                }
            }
            self.len = N as u8;
            return;
        }
        // While tied victims remain: each entry is kept, evicted below the cut, or evicted as
        // a tie.
        while ties > 0 {
            // SAFETY: `from` starts at `k`, the scratch's initialised length, and drops by one
            // per step. `ties` tied victims lie among the unread entries, so `from - 1` never
            // wraps while `ties > 0`. A survivor is written only while one is still unwritten,
            // so `slot - 1 < N` indexes the own arrays.
            unsafe {
                from -= 1;
                let epoch = *epochs.get_unchecked(from);
                if epoch > cut.epoch {
                    slot -= 1;
                    *self.axes.get_unchecked_mut(slot) = *axes.get_unchecked(from);
                    *self.epochs.get_unchecked_mut(slot) = epoch;
                } else {
                    ties -= usize::from(epoch == cut.epoch);
                }
            }
        }
        // Then an entry survives exactly when it is not below the cut. Every entry is written
        // to the next free slot, and the slot is taken only by a survivor: a victim's write is
        // overwritten by the next survivor's. Exactly N survive, so the walk ends with the last
        // of them, in slot 0; every entry below it is evicted and need not be looked at.
        while slot > 0 {
            // SAFETY: `slot` counts the survivors still unwritten, all among the `from` unread
            // entries, so `from ≥ slot ≥ 1` here: `from - 1` never wraps and stays within the
            // initialised scratch, and `slot - 1 < N` indexes the own arrays.
            unsafe {
                from -= 1;
                let epoch = *epochs.get_unchecked(from);
                *self.axes.get_unchecked_mut(slot - 1) = *axes.get_unchecked(from);
                *self.epochs.get_unchecked_mut(slot - 1) = epoch;
                slot = slot - 1 + usize::from(epoch < cut.epoch);
            }
        }
        self.len = N as u8;
    }

    fn insert_at(&mut self, index: usize, bits: u64, epoch: u64) {
        // Shifted element by element: a few entries, cheaper than two `memmove` calls.
        for slot in (index..self.len()).rev() {
            self.axes[slot + 1] = self.axes[slot];
            self.epochs[slot + 1] = self.epochs[slot];
        }
        self.axes[index] = bits;
        self.epochs[index] = epoch;
        self.len += 1;
    }

    /// Whether this frontier, as knowledge, covers every entry of the requirement `other`.
    ///
    /// Always `false` when `other` is tainted: an incomplete requirement cannot be proven.
    pub fn dominates<const M: usize>(&self, other: &Frontier<M>) -> bool {
        if other.tainted {
            return false;
        }
        if N == M && self.len == other.len && same_slots(&self.axes, &other.axes) {
            // Same axes in the same slots: one element-wise pass, no early exit to mispredict.
            let mut covered = true;
            for (mine, theirs) in self.epochs.iter().zip(other.epochs.iter()) {
                covered &= mine >= theirs;
            }
            return covered;
        }
        // Both sides sorted: one forward walk. Knowledge slots past its length hold the
        // sentinel, which no requirement axis reaches, so the walk needs no length check.
        let mut i = 0;
        for (&b, &e) in other.axes[..other.len()].iter().zip(&other.epochs[..other.len()]) {
            while i < N && self.axes[i] < b {
                i += 1;
            }
            if i == N || self.axes[i] != b || self.epochs[i] < e {
                return false;
            }
            i += 1;
        }
        true
    }

    /// The entries of `requirement` this frontier does not cover, as a frontier of the same
    /// capacity. Tainted when `requirement` is: the answer is then incomplete as well.
    pub fn find_undominated<const M: usize>(&self, requirement: &Frontier<M>) -> Frontier<M> {
        let mut missing = Frontier::<M>::new();
        for point in requirement.iter().filter(|&p| !self.knows(p)) {
            // A subset of `requirement` in axis order: appending never overflows.
            let at = missing.len();
            missing.axes[at] = point.axis.to_bits();
            missing.epochs[at] = point.epoch;
            missing.len += 1;
        }
        missing.tainted = requirement.tainted;
        missing
    }
}

/// Writes the axis-sorted union of two sorted runs (`(axes, epochs)` each; shared axes take
/// the larger epoch) to the front of `out`, hands each epoch it writes to `observe`, and
/// returns the union's length.
///
/// # Panics
/// If `out` has less room than both runs together (checked once, up front).
#[inline(always)]
fn sorted_union(
    (own_axes, own_epochs): (&[u64], &[u64]),
    (other_axes, other_epochs): (&[u64], &[u64]),
    (axes, epochs): (&mut [MaybeUninit<u64>], &mut [MaybeUninit<u64>]),
    mut observe: impl FnMut(u64),
) -> usize {
    let own_len = own_axes.len().min(own_epochs.len());
    let other_len = other_axes.len().min(other_epochs.len());
    assert!(own_len + other_len <= axes.len().min(epochs.len()));
    // The head of an exhausted run reads as the sentinel, which no axis reaches, so one loop
    // drains both runs with no tail loop after it; it stops when both heads are sentinels.
    let head = |run: &[u64], at: usize| run.get(at).copied().unwrap_or(EMPTY);
    let (mut i, mut j, mut k) = (0, 0, 0);
    let (mut a, mut b) = (head(own_axes, 0), head(other_axes, 0));
    // A plain two-pointer walk: on real inputs the comparisons follow the axis layout, which
    // repeats from operation to operation, so the branches predict well and beat a branch-free
    // walk's serial dependency chain.
    // SAFETY: the own epochs are read at `i` only while `a` is a real axis, so `i < own_len`,
    // and the other epochs at `j < other_len` likewise (both within both slices of their run,
    // by the clamps above); each write is at `k ≤ i + j < own_len + other_len`, within `out`
    // (asserted above).
    unsafe {
        loop {
            let (axis, epoch);
            if a < b {
                (axis, epoch) = (a, *own_epochs.get_unchecked(i));
                i += 1;
                a = head(own_axes, i);
            } else if b < a {
                (axis, epoch) = (b, *other_epochs.get_unchecked(j));
                j += 1;
                b = head(other_axes, j);
            } else if a != EMPTY {
                (axis, epoch) =
                    (a, (*own_epochs.get_unchecked(i)).max(*other_epochs.get_unchecked(j)));
                i += 1;
                j += 1;
                (a, b) = (head(own_axes, i), head(other_axes, j));
            } else {
                break;
            }
            axes.get_unchecked_mut(k).write(axis);
            epochs.get_unchecked_mut(k).write(epoch);
            observe(epoch);
            k += 1;
        }
    }
    k
}

/// [`sorted_union`] of two runs that each end before their array does, so that the slot past
/// each run holds the sentinel (the layout invariant): the walk reads both heads straight from
/// the arrays until both are sentinels, with no bounds to check, no head registers to rotate
/// and no tail loop.
///
/// # Safety
/// Each array holds a sorted run followed by at least one sentinel slot (`len < N`, `len < M`),
/// and `out` has room for `N + M` entries.
#[inline(always)]
unsafe fn sentinel_union<const N: usize, const M: usize>(
    (own_axes, own_epochs): (&[u64; N], &[u64; N]),
    (other_axes, other_epochs): (&[u64; M], &[u64; M]),
    (axes, epochs): (&mut [MaybeUninit<u64>], &mut [MaybeUninit<u64>]),
    mut observe: impl FnMut(u64),
) -> usize {
    debug_assert!(own_axes.contains(&EMPTY) && other_axes.contains(&EMPTY));
    debug_assert!(N + M <= axes.len().min(epochs.len()));
    let (mut i, mut j, mut k) = (0, 0, 0);
    // SAFETY: for every access below, a sentinel is consumed only by the exit, so `i` stops
    // at the own run's first sentinel slot, below N, and `j` likewise below M (the caller's
    // contract); each write is at `k ≤ i + j < N + M`, within `out` (the caller's contract).
    unsafe {
        loop {
            let (a, b) = (*own_axes.get_unchecked(i), *other_axes.get_unchecked(j));
            let (axis, epoch);
            if a < b {
                (axis, epoch) = (a, *own_epochs.get_unchecked(i));
                i += 1;
            } else if b < a {
                (axis, epoch) = (b, *other_epochs.get_unchecked(j));
                j += 1;
            } else if a != EMPTY {
                (axis, epoch) =
                    (a, (*own_epochs.get_unchecked(i)).max(*other_epochs.get_unchecked(j)));
                i += 1;
                j += 1;
            } else {
                return k;
            }
            axes.get_unchecked_mut(k).write(axis);
            epochs.get_unchecked_mut(k).write(epoch);
            observe(epoch);
            k += 1;
        }
    }
}

/// Whole-array axis equality, written as a fold so it compiles to inline vector compares
/// rather than a call to `bcmp`.
fn same_slots<const N: usize, const M: usize>(a: &[u64; N], b: &[u64; M]) -> bool {
    a.iter().zip(b.iter()).fold(true, |same, (x, y)| same & (x == y))
}

/// Where overflow cuts an axis-sorted run: the entries below `epoch` all go, and of those at
/// `epoch` the `tied_victims` with the largest axes go (smallest epochs first; on equal epochs
/// the larger axis goes).
struct EvictionCut {
    epoch: u64,
    tied_victims: usize,
}

impl EvictionCut {
    /// The cut that evicts `count` (≥ 1) of `epochs`. `smallest` is scratch of at least
    /// `count` slots, all `u64::MAX`.
    ///
    /// One pass keeps the `count` smallest epochs seen so far in ascending order; an epoch that
    /// cannot enter costs one comparison against a register.
    fn find(epochs: &[u64], count: usize, smallest: &mut [u64]) -> EvictionCut {
        let smallest = &mut smallest[..count];
        let mut bound = u64::MAX;
        for &epoch in epochs {
            if epoch >= bound {
                continue;
            }
            let mut at = count - 1;
            while at > 0 && smallest[at - 1] > epoch {
                smallest[at] = smallest[at - 1];
                at -= 1;
            }
            smallest[at] = epoch;
            bound = smallest[count - 1];
        }
        EvictionCut::from_smallest(smallest)
    }

    /// The cut that evicts `smallest.len()` (≥ 1) entries, given their epochs: the smallest of
    /// the run, in ascending order. The last one is the cut.
    #[inline(always)]
    fn from_smallest(smallest: &[u64]) -> EvictionCut {
        let epoch = smallest[smallest.len() - 1];
        // Everything below the cut is among the smallest, so the rest of them are ties.
        let below = smallest.iter().filter(|&&smaller| smaller < epoch).count();
        EvictionCut { epoch, tied_victims: smallest.len() - below }
    }
}

/// The [`HELD`](Self::HELD) smallest epochs offered so far, in ascending order (`u64::MAX`
/// while fewer were offered).
struct SmallestEpochs([u64; SmallestEpochs::HELD]);

impl SmallestEpochs {
    /// Enough for the common overflow; more evictions go through [`EvictionCut::find`].
    /// Every held slot lengthens the insert an entering offer may run through, and more
    /// offers enter, since the last held epoch turns fewer away.
    const HELD: usize = 4;

    const fn new() -> SmallestEpochs {
        SmallestEpochs([u64::MAX; SmallestEpochs::HELD])
    }

    /// Takes `epoch` in if it is among the smallest. Past the one test that turns most epochs
    /// away, an insertion from the top: each held epoch above `epoch` moves up one slot. The
    /// branches follow the data, but they end the insert after a step or two where a min/max
    /// network ran every slot as one chain of dependent operations, which the merge's
    /// write-back then waited on. Measured against that network (copy+merge beside IREE's,
    /// geomean over 8 cache-line positions): fixed 6+6 1.11 → 0.98–1.01× IREE's wall time,
    /// and on 256 varied 6+6 pairs, where the branches do not repeat, 20.3 → 18.0–19.5 ns
    /// (minimum of the block means), for 5 more instructions per merge.
    ///
    /// On hosted targets, unrolled, slot by named slot: with no index into the array, the four
    /// epochs stay in registers through the whole walk (a loop over the array kept them on the
    /// stack, and an entering offer paid a load and a store per slot it moved: 130 → 97
    /// instructions per 6+6 merge). Bare-metal builds keep the loop, which is smaller, for
    /// their flash budget.
    #[inline(always)]
    fn offer(&mut self, epoch: u64) {
        if cfg!(target_os = "none") {
            // Bare metal: the loop, less code than the unrolled insert (flash budget).
            let held = &mut self.0;
            let mut at = SmallestEpochs::HELD - 1;
            if epoch >= held[at] {
                return;
            }
            while at > 0 && held[at - 1] > epoch {
                held[at] = held[at - 1];
                at -= 1;
            }
            held[at] = epoch;
            return;
        }
        let [h0, h1, h2, h3] = &mut self.0;
        if epoch >= *h3 {
            return;
        }
        if epoch >= *h2 {
            *h3 = epoch;
            return;
        }
        *h3 = *h2;
        if epoch >= *h1 {
            *h2 = epoch;
            return;
        }
        *h2 = *h1;
        if epoch >= *h0 {
            *h1 = epoch;
            return;
        }
        *h1 = *h0;
        *h0 = epoch;
    }

    /// The cut that evicts `count` (1 ..= [`HELD`](Self::HELD)) entries: the `count`-th
    /// smallest epoch, and how many of the `count` smallest equal it.
    #[inline(always)]
    fn cut(&self, count: usize) -> EvictionCut {
        if cfg!(target_os = "none") {
            // Bare metal: the general loop (flash budget).
            return EvictionCut::from_smallest(&self.0[..count]);
        }
        let [h0, h1, h2, h3] = self.0;
        let equal = |held: u64, cut: u64| usize::from(held == cut);
        let (epoch, tied_victims) = match count {
            1 => (h0, 1),
            2 => (h1, 1 + equal(h0, h1)),
            3 => (h2, 1 + equal(h1, h2) + equal(h0, h2)),
            _ => (h3, 1 + equal(h2, h3) + equal(h1, h3) + equal(h0, h3)),
        };
        EvictionCut { epoch, tied_victims }
    }
}

impl<const N: usize> Default for Frontier<N> {
    fn default() -> Frontier<N> {
        Frontier::new()
    }
}

impl<const N: usize, const M: usize> PartialEq<Frontier<M>> for Frontier<N> {
    fn eq(&self, other: &Frontier<M>) -> bool {
        self.tainted == other.tainted
            && self.axes[..self.len()] == other.axes[..other.len()]
            && self.epochs[..self.len()] == other.epochs[..other.len()]
    }
}

impl<const N: usize> Eq for Frontier<N> {}

impl<const N: usize> fmt::Debug for Frontier<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (k, point) in self.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{:?}:{}", point.axis, point.epoch)?;
        }
        f.write_str("}")?;
        if self.tainted {
            f.write_str("+tainted")?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

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
//! element-wise code the compiler vectorises.
//!
//! # Merge
//!
//! A merge's target is usually a fresh copy, written a moment ago with wide stores that are
//! still in flight. A wide load straddling two of them cannot take its data from them and waits
//! until both reach the cache, so the merge reads its target one entry at a time:
//!
//! - same axes in the same slots: the epochs join element-wise, over the length only;
//! - both runs fit side by side: one walk counts the union, a second writes it in place from
//!   the top down, reading both runs backwards (the writes never overtake an unread entry), with
//!   no scratch and no copy of the target;
//! - otherwise the merge walks the union into a stack scratch while keeping the four smallest
//!   epochs it wrote in registers; those fix the eviction cut, and one backward pass writes the
//!   survivors into place. More than four evictions take a second pass to find the cut.

mod wire;

use core::fmt;

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
pub struct Frontier<const N: usize = 8> {
    axes: [u64; N],
    epochs: [u64; N],
    len: u8,
    tainted: bool,
}

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
        self.tainted |= other.tainted;
        if other.len == 0 {
            return;
        }
        if self.len == 0 && M <= N {
            // Joining into nothing (a semaphore taking a signaller's frontier): a plain copy.
            // Slots past `other`'s length are already the empty sentinels.
            self.axes[..M].copy_from_slice(&other.axes);
            self.epochs[..M].copy_from_slice(&other.epochs);
            self.len = other.len;
            return;
        }
        // From here on this frontier is read entry by entry, never as whole arrays (see the
        // module documentation). For the same-axes test that measured fewer instructions too
        // (no pass over the empty slots) and 1.5 → 0.9–1.0× IREE's wall time.
        let (own_len, other_len) = (self.len(), other.len());
        let theirs = (&other.axes[..other_len], &other.epochs[..other_len]);
        if own_len == other_len && same_axes(&self.axes[..own_len], theirs.0) {
            // Same axes in the same slots: epochs join element-wise, no reordering.
            for (mine, &theirs) in self.epochs[..own_len].iter_mut().zip(theirs.1) {
                *mine = (*mine).max(theirs);
            }
            return;
        }
        if self.join_in_place(theirs) {
            return;
        }
        // A scratch of 2·max(N, M) slots holds the whole union, so the walk never evicts.
        if M <= N {
            self.merge_through_scratch::<N, M>(other);
        } else {
            self.merge_through_scratch::<M, M>(other);
        }
    }

    /// The join of two runs that fit side by side (`len + other.len ≤ N`), with no scratch and
    /// no wide loads of this frontier: one walk counts the union, a second walks both runs
    /// backwards and writes the union downwards from its last slot, which never overtakes an
    /// own entry still to be read. Own entries below the first axis of `other` are already in
    /// place. Both walks branch on the comparisons rather than advance branch-free: the axis
    /// layout repeats from call to call, so the branches predict, and the next loads need not
    /// wait for the last comparison (measured: 4+4 1.33 → 1.07× IREE's wall time).
    ///
    /// Returns `false`, changing nothing, when the runs do not fit side by side; the union
    /// might overflow then, which needs the eviction walk.
    fn join_in_place(&mut self, (other_axes, other_epochs): (&[u64], &[u64])) -> bool {
        // Never above N (the length invariant); clamped so the count walk needs no index checks
        // and the unchecked walk below has its bound in sight.
        let own_len = self.len().min(N);
        let other_len = other_axes.len().min(other_epochs.len());
        if own_len + other_len > N {
            return false;
        }
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
        // lengths; `slot` starts at `union_len ≤ own_len + other_len ≤ N` (checked above) and
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
        true
    }

    /// Sorted union into a stack scratch, then the survivors back into place: all of them, or
    /// on overflow the `N` that the eviction rule keeps.
    fn merge_through_scratch<const S: usize, const M: usize>(&mut self, other: &Frontier<M>) {
        let mut axes = [[EMPTY; S]; 2];
        let mut epochs = [[0u64; S]; 2];
        let (axes, epochs) = (axes.as_flattened_mut(), epochs.as_flattened_mut());
        let own = (&self.axes[..self.len()], &self.epochs[..self.len()]);
        let theirs = (&other.axes[..other.len()], &other.epochs[..other.len()]);
        // The walk offers every epoch it writes, so a cut of a few entries (two 6-entry
        // frontiers into 8 slots evict at most 4) needs no second pass over the union.
        let mut smallest = SmallestEpochs::new();
        let k = sorted_union(own, theirs, (axes, epochs), |epoch| smallest.offer(epoch));
        let (cut, len) = if k > N {
            self.tainted = true;
            let count = k - N;
            let cut = if count <= SmallestEpochs::HELD {
                EvictionCut::from_smallest(&smallest.held()[..count])
            } else {
                let mut scratch = [[u64::MAX; S]; 2];
                EvictionCut::find(&epochs[..k], count, scratch.as_flattened_mut())
            };
            (cut, N)
        } else {
            (EvictionCut::NONE, k)
        };
        // Survivors from the back, element by element, straight into place. From the back, the
        // tied entries met first are those with the largest axes, the ones the rule evicts. One
        // by one, because a bulk copy would read the scratch with wide loads that cannot be
        // forwarded from the walk's narrow stores still in flight. Slots past the union were
        // past the old length too: still sentinels.
        let mut ties = cut.tied_victims;
        let mut slot = len;
        for (&axis, &epoch) in axes[..k].iter().zip(&epochs[..k]).rev() {
            if epoch == cut.epoch && ties > 0 {
                ties -= 1;
            } else if epoch >= cut.epoch {
                slot -= 1;
                (self.axes[slot], self.epochs[slot]) = (axis, epoch);
            }
        }
        self.len = len as u8;
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
/// the larger epoch) to the front of `out`, which must have room for both runs, hands each
/// epoch it writes to `observe`, and returns the union's length.
#[inline(always)]
fn sorted_union(
    (own_axes, own_epochs): (&[u64], &[u64]),
    (other_axes, other_epochs): (&[u64], &[u64]),
    (axes, epochs): (&mut [u64], &mut [u64]),
    mut observe: impl FnMut(u64),
) -> usize {
    let (mut i, mut j, mut k) = (0, 0, 0);
    // A plain two-pointer walk: on real inputs the comparisons follow the axis layout, which
    // repeats from operation to operation, so the branches predict well and beat a branch-free
    // walk's serial dependency chain.
    while i < own_axes.len() && j < other_axes.len() {
        let (a, b) = (own_axes[i], other_axes[j]);
        let (axis, epoch);
        if a < b {
            (axis, epoch) = (a, own_epochs[i]);
            i += 1;
        } else if b < a {
            (axis, epoch) = (b, other_epochs[j]);
            j += 1;
        } else {
            (axis, epoch) = (a, own_epochs[i].max(other_epochs[j]));
            i += 1;
            j += 1;
        }
        (axes[k], epochs[k]) = (axis, epoch);
        observe(epoch);
        k += 1;
    }
    // One run is exhausted; the other's tail follows element by element (a few entries,
    // cheaper than `memcpy` calls).
    let (tail_axes, tail_epochs) = if i < own_axes.len() {
        (&own_axes[i..], &own_epochs[i..])
    } else {
        (&other_axes[j..], &other_epochs[j..])
    };
    for (&axis, &epoch) in tail_axes.iter().zip(tail_epochs) {
        (axes[k], epochs[k]) = (axis, epoch);
        observe(epoch);
        k += 1;
    }
    k
}

/// Whole-array axis equality, written as a fold so it compiles to inline vector compares
/// rather than a call to `bcmp`.
fn same_slots<const N: usize, const M: usize>(a: &[u64; N], b: &[u64; M]) -> bool {
    a.iter().zip(b.iter()).fold(true, |same, (x, y)| same & (x == y))
}

/// Whether two runs of the same length hold the same axes. An early-exit scalar loop on
/// purpose: a vectorised compare would read `a` with wide loads (see [`Frontier::merge`]).
#[inline(always)]
fn same_axes(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// Where overflow cuts an axis-sorted run: the entries below `epoch` all go, and of those at
/// `epoch` the `tied_victims` with the largest axes go (smallest epochs first; on equal epochs
/// the larger axis goes).
struct EvictionCut {
    epoch: u64,
    tied_victims: usize,
}

impl EvictionCut {
    /// The cut of a union that fits: stored epochs are ≥ 1, so nothing is below it.
    const NONE: EvictionCut = EvictionCut { epoch: 0, tied_victims: 0 };

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
/// while fewer were offered). Fixed size, so they stay in registers through the union walk.
struct SmallestEpochs([u64; SmallestEpochs::HELD]);

impl SmallestEpochs {
    /// Enough for the common overflow; more evictions go through [`EvictionCut::find`].
    /// Every held slot lengthens the network each entering offer runs through, and more
    /// offers enter, since the last held epoch turns fewer away.
    const HELD: usize = 4;

    fn new() -> SmallestEpochs {
        SmallestEpochs([u64::MAX; SmallestEpochs::HELD])
    }

    /// Takes `epoch` in if it is among the smallest. Past the one test that turns most epochs
    /// away, the sorted insert is a min/max network (each slot keeps the smaller of itself and
    /// the larger of its lower neighbour and `epoch`): no branch on the data to mispredict,
    /// and constant indices keep the slots in registers. A branchy insert measured faster on
    /// the fixed benchmark inputs but slower than no fusing at all on varied ones.
    #[inline(always)]
    fn offer(&mut self, epoch: u64) {
        let held = &mut self.0;
        let last = SmallestEpochs::HELD - 1;
        if epoch >= held[last] {
            return;
        }
        for at in (1..=last).rev() {
            held[at] = held[at].min(held[at - 1].max(epoch));
        }
        held[0] = held[0].min(epoch);
    }

    fn held(&self) -> &[u64] {
        &self.0
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

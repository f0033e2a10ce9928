//! Frontier micro-benchmarks: causeway's [`Frontier`] against a plain sorted-array peer.
//!
//! Measured: `merge`, `dominates` and `insert_or_raise` on frontiers of capacity 8, the size the
//! scheduler handles on every submit and every wait. Each benchmark group holds two functions,
//! `causeway` and `sorted_array`, so criterion reports them side by side on identical inputs.
//! Every iteration starts from a fresh copy of the left operand, so no iteration sees a frontier
//! an earlier one already raised; both peers are 136 bytes, so the copy costs them the same.
//!
//! A fixed input repeats the same comparisons every iteration, which the branch predictor
//! learns; `merge/6+6_varied` cycles through 256 different 6+6 pairs so that it cannot, and
//! shows what a merge costs when the interleaving and the evictions change from call to call.
//! `merge/same_axes_in_place` joins into one long-lived frontier, without the fresh copy.
//!
//! Why the peer exists: an absolute nanosecond figure says little on its own. `SortedArrayFrontier`
//! is what a typical C runtime writes (an array of `(axis, epoch)` structs, a two-pointer merge
//! into a scratch buffer, find-min-and-shift eviction), so the ratio shows what causeway's
//! structure-of-arrays layout and same-axes fast paths buy, or cost, per input shape.
//! [`check_peer_agrees`] runs before anything is measured: a faster peer that computes something
//! else would make the comparison meaningless.

use std::hint::black_box;
use std::time::Duration;

use causeway::{Axis, Domain, Frontier, Point};
use criterion::{criterion_group, Criterion};

/// Capacity of both peers; causeway's default `Frontier` capacity.
const CAPACITY: usize = 8;

/// One `(axis bits, epoch)` pair of the peer, laid out as a C `struct { uint64_t axis, epoch; }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    axis: u64,
    epoch: u64,
}

impl Entry {
    const ZERO: Entry = Entry { axis: 0, epoch: 0 };
}

/// Reference peer: array-of-structs sparse vector clock, sorted by axis.
///
/// Deliberately naive in the way production C code tends to be: linear scans, `memmove`-style
/// shifts, eviction by repeated find-min. Slots at or past `len` hold stale data and are never
/// read, as in C, so the peer pays no cost for keeping them clean.
#[derive(Clone, Copy)]
struct SortedArrayFrontier {
    entries: [Entry; CAPACITY],
    // `u8` rather than `usize` keeps the struct at causeway's 136 bytes, so the per-iteration
    // copy does not favour either side.
    len: u8,
    tainted: bool,
}

// The module docs promise equal copy costs; fail the build rather than the claim.
const _: () = assert!(size_of::<Frontier>() == size_of::<SortedArrayFrontier>());

impl SortedArrayFrontier {
    const fn new() -> SortedArrayFrontier {
        SortedArrayFrontier { entries: [Entry::ZERO; CAPACITY], len: 0, tainted: false }
    }

    fn from_points(points: &[Point]) -> SortedArrayFrontier {
        let mut frontier = SortedArrayFrontier::new();
        for point in points {
            frontier.insert_or_raise(point.axis.to_bits(), point.epoch);
        }
        frontier
    }

    fn held(&self) -> &[Entry] {
        &self.entries[..usize::from(self.len)]
    }

    fn insert_or_raise(&mut self, axis: u64, epoch: u64) {
        // Epoch 0 is the absent value; causeway ignores it, so must the peer.
        if epoch == 0 {
            return;
        }
        let mut len = usize::from(self.len);
        let mut pos = 0;
        while pos < len && self.entries[pos].axis < axis {
            pos += 1;
        }
        if pos < len && self.entries[pos].axis == axis {
            if self.entries[pos].epoch < epoch {
                self.entries[pos].epoch = epoch;
            }
            return;
        }
        let incoming = Entry { axis, epoch };
        if len == CAPACITY {
            self.tainted = true;
            let victim = eviction_victim(&self.entries[..len]);
            // The newcomer competes for its slot like any held entry, matching causeway.
            if evicts_before(incoming, self.entries[victim]) {
                return;
            }
            self.entries.copy_within(victim + 1..len, victim);
            len -= 1;
            if victim < pos {
                pos -= 1;
            }
        }
        self.entries.copy_within(pos..len, pos + 1);
        self.entries[pos] = incoming;
        self.len = (len + 1) as u8;
    }

    fn merge(&mut self, other: &SortedArrayFrontier) {
        // Twice the capacity: the union of two full frontiers always fits before eviction.
        let mut merged = [Entry::ZERO; 2 * CAPACITY];
        let (mine, theirs) = (self.held(), other.held());
        let (mut i, mut j, mut n) = (0, 0, 0);
        while i < mine.len() && j < theirs.len() {
            let (a, b) = (mine[i], theirs[j]);
            if a.axis < b.axis {
                merged[n] = a;
                i += 1;
            } else if b.axis < a.axis {
                merged[n] = b;
                j += 1;
            } else {
                merged[n] = Entry { axis: a.axis, epoch: a.epoch.max(b.epoch) };
                i += 1;
                j += 1;
            }
            n += 1;
        }
        for tail in [&mine[i..], &theirs[j..]] {
            merged[n..n + tail.len()].copy_from_slice(tail);
            n += tail.len();
        }

        let mut tainted = self.tainted || other.tainted;
        while n > CAPACITY {
            let victim = eviction_victim(&merged[..n]);
            merged.copy_within(victim + 1..n, victim);
            n -= 1;
            tainted = true;
        }
        self.entries[..n].copy_from_slice(&merged[..n]);
        self.len = n as u8;
        self.tainted = tainted;
    }

    fn dominates(&self, requirement: &SortedArrayFrontier) -> bool {
        // Same soundness rule as causeway: an incomplete requirement is never proven.
        if requirement.tainted {
            return false;
        }
        let mine = self.held();
        let mut i = 0;
        for need in requirement.held() {
            while i < mine.len() && mine[i].axis < need.axis {
                i += 1;
            }
            if i == mine.len() || mine[i].axis != need.axis || mine[i].epoch < need.epoch {
                return false;
            }
            i += 1;
        }
        true
    }
}

/// Causeway's eviction order: smaller epoch first; on equal epochs the larger axis goes first.
fn evicts_before(candidate: Entry, than: Entry) -> bool {
    candidate.epoch < than.epoch || (candidate.epoch == than.epoch && candidate.axis > than.axis)
}

fn eviction_victim(entries: &[Entry]) -> usize {
    let mut victim = 0;
    for (k, &entry) in entries.iter().enumerate().skip(1) {
        if evicts_before(entry, entries[victim]) {
            victim = k;
        }
    }
    victim
}

/// `(ordinal, epoch)` pairs on machine 0's queue domain: short enough to read the cases at a
/// glance, and the ordinal order is the axis order.
type Spec = &'static [(u64, u64)];

struct MergeCase {
    name: &'static str,
    left: Spec,
    right: Spec,
    /// Shape the name promises, asserted so an edited table cannot silently bench something else.
    merged_len: usize,
    tainted: bool,
}

struct DominatesCase {
    name: &'static str,
    knowledge: Spec,
    requirement: Spec,
    expected: bool,
}

struct InsertCase {
    name: &'static str,
    left: Spec,
    point: (u64, u64),
    /// Whether the point's axis is new, i.e. the call must insert rather than raise.
    inserts: bool,
}

const MERGE_CASES: [MergeCase; 3] = [
    MergeCase {
        name: "6+6_interleaved_overflow",
        // 12 distinct axes into 8 slots: 10, 11 and 12 go, then the two 13s tie and the larger
        // axis (ordinal 7) goes, so both the epoch order and the tie rule are exercised.
        left: &[(1, 12), (3, 15), (5, 10), (7, 13), (9, 11), (11, 14)],
        right: &[(2, 17), (4, 13), (6, 16), (8, 14), (10, 18), (12, 15)],
        merged_len: 8,
        tainted: true,
    },
    MergeCase {
        name: "4+4_partial_overlap",
        // Shared axes 3 and 4 take the maximum from opposite sides.
        left: &[(1, 5), (2, 7), (3, 9), (4, 11)],
        right: &[(3, 10), (4, 8), (5, 6), (6, 4)],
        merged_len: 6,
        tainted: false,
    },
    MergeCase {
        name: "same_axes",
        // The maximum alternates sides so neither operand wins wholesale.
        left: &[(1, 3), (2, 9), (3, 4), (4, 8), (5, 5), (6, 7)],
        right: &[(1, 6), (2, 2), (3, 7), (4, 3), (5, 8), (6, 1)],
        merged_len: 6,
        tainted: false,
    },
];

const DOMINATES_CASES: [DominatesCase; 3] = [
    DominatesCase {
        name: "6_vs_6_true",
        knowledge: &[(1, 10), (2, 11), (3, 12), (4, 13), (5, 14), (6, 15)],
        requirement: &[(1, 10), (2, 9), (3, 12), (4, 1), (5, 14), (6, 15)],
        expected: true,
    },
    DominatesCase {
        name: "6_vs_4_subset_true",
        knowledge: &[(1, 10), (2, 11), (3, 12), (4, 13), (5, 14), (6, 15)],
        requirement: &[(2, 11), (3, 5), (5, 14), (6, 2)],
        expected: true,
    },
    DominatesCase {
        name: "6_vs_6_false_last",
        // Only the last entry is short, so an early-exit walk still visits every entry.
        knowledge: &[(1, 10), (2, 11), (3, 12), (4, 13), (5, 14), (6, 15)],
        requirement: &[(1, 10), (2, 11), (3, 12), (4, 13), (5, 14), (6, 16)],
        expected: false,
    },
];

const INSERT_CASES: [InsertCase; 2] = [
    InsertCase {
        name: "raise_existing",
        left: &[(2, 10), (4, 11), (6, 12), (8, 13), (10, 14)],
        point: (6, 40),
        inserts: false,
    },
    InsertCase {
        name: "insert_new_middle",
        // Lands between ordinals 4 and 6, so half the entries shift.
        left: &[(2, 10), (4, 11), (6, 12), (8, 13), (10, 14)],
        point: (5, 40),
        inserts: true,
    },
];

fn axis(ordinal: u64) -> Axis {
    Axis::new(0, Domain::Queue, ordinal)
}

fn points(spec: Spec) -> Vec<Point> {
    spec.iter().map(|&(ordinal, epoch)| Point::new(axis(ordinal), epoch)).collect()
}

/// Both peers built from the same points, so they start from the same state.
fn both(spec: Spec) -> (Frontier, SortedArrayFrontier) {
    let points = points(spec);
    (Frontier::from_points(points.iter().copied()), SortedArrayFrontier::from_points(&points))
}

/// How many different 6+6 pairs the varied merge benchmark cycles through: enough that the
/// branch predictor cannot learn the sequence of comparisons.
const VARIED_PAIRS: usize = 256;

/// `VARIED_PAIRS` pairs of 6-entry frontiers from a fixed-seed xorshift: axes climb by 1 to 3
/// ordinals, so the two sides interleave differently each time and often share axes (from 6
/// to 12 entries in the union, so from none to four evicted), and epochs are 1 to 50.
fn varied_pairs() -> Vec<[(Frontier, SortedArrayFrontier); 2]> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    let mut side = || {
        let mut ordinal = 0;
        let points: Vec<Point> = (0..6)
            .map(|_| {
                ordinal += 1 + next(3);
                Point::new(axis(ordinal), 1 + next(50))
            })
            .collect();
        (Frontier::from_points(points.iter().copied()), SortedArrayFrontier::from_points(&points))
    };
    (0..VARIED_PAIRS).map(|_| [side(), side()]).collect()
}

fn entries_of(frontier: &Frontier) -> Vec<Entry> {
    frontier.iter().map(|p| Entry { axis: p.axis.to_bits(), epoch: p.epoch }).collect()
}

fn assert_same(context: &str, ours: &Frontier, peer: &SortedArrayFrontier) {
    assert_eq!(entries_of(ours), peer.held(), "{context}: entries differ");
    assert_eq!(ours.is_tainted(), peer.tainted, "{context}: taint differs");
}

/// Asserts that the peer computes exactly what causeway does on every benched input.
fn check_peer_agrees() {
    for case in &MERGE_CASES {
        let context = format!("merge/{}", case.name);
        let (left, left_peer) = both(case.left);
        let (right, right_peer) = both(case.right);
        assert_same(&context, &left, &left_peer);
        assert_same(&context, &right, &right_peer);

        let (mut ours, mut peer) = (left, left_peer);
        ours.merge(&right);
        peer.merge(&right_peer);
        assert_same(&context, &ours, &peer);
        assert_eq!(ours.len(), case.merged_len, "{context}: unexpected merged length");
        assert_eq!(ours.is_tainted(), case.tainted, "{context}: unexpected taint");
    }

    let mut overflowing = 0;
    for (index, [(left, left_peer), (right, right_peer)]) in varied_pairs().iter().enumerate() {
        let context = format!("merge/6+6_varied pair {index}");
        let (mut ours, mut peer) = (*left, *left_peer);
        ours.merge(right);
        peer.merge(right_peer);
        assert_same(&context, &ours, &peer);
        overflowing += usize::from(ours.is_tainted());
    }
    assert!(
        overflowing > VARIED_PAIRS / 4 && overflowing < VARIED_PAIRS,
        "merge/6+6_varied: {overflowing} of {VARIED_PAIRS} pairs overflow; the mix should vary"
    );

    for case in &DOMINATES_CASES {
        let context = format!("dominates/{}", case.name);
        let (knowledge, knowledge_peer) = both(case.knowledge);
        let (requirement, requirement_peer) = both(case.requirement);
        assert_same(&context, &knowledge, &knowledge_peer);
        assert_same(&context, &requirement, &requirement_peer);
        assert_eq!(knowledge.dominates(&requirement), case.expected, "{context}: causeway");
        assert_eq!(knowledge_peer.dominates(&requirement_peer), case.expected, "{context}: peer");
    }

    for case in &INSERT_CASES {
        let context = format!("insert_or_raise/{}", case.name);
        let (mut ours, mut peer) = both(case.left);
        assert_same(&context, &ours, &peer);
        let len_before = ours.len();
        let (ordinal, epoch) = case.point;
        ours.insert_or_raise(axis(ordinal), epoch);
        peer.insert_or_raise(axis(ordinal).to_bits(), epoch);
        assert_same(&context, &ours, &peer);
        let expected_len = len_before + usize::from(case.inserts);
        assert_eq!(ours.len(), expected_len, "{context}: insert/raise mismatch");
        assert_eq!(ours.get(axis(ordinal)), Some(epoch), "{context}: point not applied");
    }
}

fn bench_merge(c: &mut Criterion) {
    for case in &MERGE_CASES {
        let (left, left_peer) = both(case.left);
        let (right, right_peer) = both(case.right);
        let mut group = c.benchmark_group(format!("merge/{}", case.name));
        group.bench_function("causeway", |b| {
            b.iter(|| {
                let mut out = *black_box(&left);
                out.merge(black_box(&right));
                // By reference: keeps the result observable without a second 136-byte copy.
                black_box(&out);
            })
        });
        group.bench_function("sorted_array", |b| {
            b.iter(|| {
                let mut out = *black_box(&left_peer);
                out.merge(black_box(&right_peer));
                black_box(&out);
            })
        });
        // The harness floor both peers pay: the fresh operand copy, with no merge.
        group.bench_function("copy_only", |b| {
            b.iter(|| {
                let out = *black_box(&left);
                black_box(&out);
            })
        });
        group.finish();
    }
}

/// One merge per iteration, each on the next of the varied pairs: what the fixed cases cost
/// once the comparisons stop repeating. Both peers pay the same index bookkeeping.
fn bench_varied_merge(c: &mut Criterion) {
    let varied = varied_pairs();
    let mut group = c.benchmark_group("merge/6+6_varied");
    group.bench_function("causeway", |b| {
        let mut pairs = varied.iter().cycle();
        b.iter(|| {
            let [(left, _), (right, _)] = pairs.next().expect("cycle never ends");
            let mut out = *black_box(left);
            out.merge(black_box(right));
            black_box(&out);
        })
    });
    group.bench_function("sorted_array", |b| {
        let mut pairs = varied.iter().cycle();
        b.iter(|| {
            let [(_, left), (_, right)] = pairs.next().expect("cycle never ends");
            let mut out = *black_box(left);
            out.merge(black_box(right));
            black_box(&out);
        })
    });
    group.finish();
}

/// The same-axes merge into one long-lived frontier, as a queue's knowledge absorbs the same
/// signallers again and again: no fresh operand copy in front of each merge. The fixed cases
/// above copy 136 bytes first through `memcpy`, which stores in two overlapping runs of 32-byte
/// stores; the merge's 16-byte loads straddle their seams and then probably wait for the stores
/// instead of taking the data forwarded, so those figures may carry part of the copy's cost.
/// This case shows the merge without it. Every iteration after the first joins an operand
/// already covered, which takes the same path through both peers.
fn bench_in_place_merge(c: &mut Criterion) {
    let case = MERGE_CASES.iter().find(|case| case.name == "same_axes").expect("case exists");
    let (left, left_peer) = both(case.left);
    let (right, right_peer) = both(case.right);
    let mut group = c.benchmark_group("merge/same_axes_in_place");
    group.bench_function("causeway", |b| {
        let mut knowledge = left;
        b.iter(|| black_box(&mut knowledge).merge(black_box(&right)))
    });
    group.bench_function("sorted_array", |b| {
        let mut knowledge = left_peer;
        b.iter(|| black_box(&mut knowledge).merge(black_box(&right_peer)))
    });
    group.finish();
}

fn bench_dominates(c: &mut Criterion) {
    for case in &DOMINATES_CASES {
        let (knowledge, knowledge_peer) = both(case.knowledge);
        let (requirement, requirement_peer) = both(case.requirement);
        let mut group = c.benchmark_group(format!("dominates/{}", case.name));
        group.bench_function("causeway", |b| {
            b.iter(|| black_box(black_box(&knowledge).dominates(black_box(&requirement))))
        });
        group.bench_function("sorted_array", |b| {
            b.iter(|| black_box(black_box(&knowledge_peer).dominates(black_box(&requirement_peer))))
        });
        group.finish();
    }
}

fn bench_insert_or_raise(c: &mut Criterion) {
    for case in &INSERT_CASES {
        let (left, left_peer) = both(case.left);
        let (ordinal, epoch) = case.point;
        let (point_axis, point_bits) = (axis(ordinal), axis(ordinal).to_bits());
        let mut group = c.benchmark_group(format!("insert_or_raise/{}", case.name));
        group.bench_function("causeway", |b| {
            b.iter(|| {
                let mut out = *black_box(&left);
                out.insert_or_raise(black_box(point_axis), black_box(epoch));
                black_box(&out);
            })
        });
        group.bench_function("sorted_array", |b| {
            b.iter(|| {
                let mut out = *black_box(&left_peer);
                out.insert_or_raise(black_box(point_bits), black_box(epoch));
                black_box(&out);
            })
        });
        group.finish();
    }
}

// `criterion_group!` emits an undocumented `pub fn`; a private module keeps it out of the
// workspace's `missing_docs` lint without silencing the lint for the rest of the file.
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        // Twenty-three sub-microsecond functions: short windows still give tight intervals and keep the
        // whole file well under a minute.
        config = Criterion::default()
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .sample_size(50);
        targets = bench_merge, bench_in_place_merge, bench_varied_merge, bench_dominates,
            bench_insert_or_raise
    }
}

// Hand-written instead of `criterion_main!` so the agreement check runs before any measurement.
fn main() {
    check_peer_agrees();
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}

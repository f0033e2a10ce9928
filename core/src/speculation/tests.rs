//! The speculation decision against a model that knows every operation's true causal past.

use std::collections::BTreeMap;
use std::vec::Vec;

use proptest::prelude::*;
use proptest::test_runner::Config;

use super::*;
use crate::axis::Domain;

fn axis(queue: usize) -> Axis {
    Axis::new(0, Domain::Queue, queue as u64 + 1)
}

/// One submitted operation: its queue and the earlier operations whose signals it waits on.
#[derive(Clone, Debug)]
struct OpSpec {
    queue: usize,
    waits_on: Vec<usize>,
}

/// A workload: operations on `queues` queues (queue 0 is the speculative draft queue), and a
/// rejection of the draft after `accepted`. Queues marked `narrow` keep frontiers of only
/// [`NARROW`] entries (a controller's smaller frontiers, say): what they sign passes through
/// that capacity, so wider frontiers downstream meet entries forgotten elsewhere.
#[derive(Clone, Debug)]
struct Workload {
    ops: Vec<OpSpec>,
    accepted: u64,
    narrow: Vec<bool>,
}

/// Capacity of a narrow queue's frontiers.
const NARROW: usize = 2;

fn workload() -> impl Strategy<Value = Workload> {
    (2usize..=7, 1usize..=40).prop_flat_map(|(queues, len)| {
        let ops = proptest::collection::vec(
            (0..queues, proptest::collection::vec(any::<prop::sample::Index>(), 0..=3)),
            len,
        );
        let narrow = proptest::collection::vec(proptest::bool::weighted(0.25), queues);
        (ops, 0u64..=len as u64, narrow).prop_map(|(ops, accepted, narrow)| Workload {
            ops: ops
                .into_iter()
                .enumerate()
                .map(|(at, (queue, waits))| OpSpec {
                    queue,
                    // Waits name earlier operations only (a DAG in submission order).
                    waits_on: if at == 0 {
                        Vec::new()
                    } else {
                        waits.iter().map(|index| index.index(at)).collect()
                    },
                })
                .collect(),
            accepted,
            narrow,
        })
    })
}

/// Submits the workload the way a queue clock does (start from the queue's frontier, import
/// each waited operation's frontier, add the queue's own new epoch) with frontiers of capacity
/// `N`, beside the exact causal past of every operation (axis → highest epoch, never evicted).
fn submit<const N: usize>(
    ops: &[OpSpec],
    narrow: &[bool],
) -> Vec<(Frontier<N>, BTreeMap<usize, u64>)> {
    let mut queue_state: BTreeMap<usize, (Frontier<N>, BTreeMap<usize, u64>, u64)> =
        BTreeMap::new();
    let mut out: Vec<(Frontier<N>, BTreeMap<usize, u64>)> = Vec::with_capacity(ops.len());
    for op in ops {
        let (mut frontier, mut truth, epoch) =
            queue_state.get(&op.queue).cloned().unwrap_or_default();
        for &origin in &op.waits_on {
            let (theirs, their_truth) = &out[origin];
            frontier.merge(theirs);
            for (&q, &e) in their_truth {
                let slot = truth.entry(q).or_insert(0);
                *slot = (*slot).max(e);
            }
        }
        let epoch = epoch + 1;
        frontier.insert_or_raise(axis(op.queue), epoch);
        if narrow.get(op.queue).copied().unwrap_or(false) {
            frontier = Frontier::from_frontier(&Frontier::<NARROW>::from_frontier(&frontier));
        }
        truth.insert(op.queue, epoch);
        queue_state.insert(op.queue, (frontier, truth.clone(), epoch));
        out.push((frontier, truth));
    }
    out
}

/// Checks one capacity: exact when untainted, a superset of the dependent set always.
/// Returns how many operations were decided conservatively.
fn check<const N: usize>(workload: &Workload) -> Result<usize, TestCaseError> {
    let rejection = Rejection::new(axis(0), workload.accepted);
    let mut conservative = 0;
    for (at, (frontier, truth)) in submit::<N>(&workload.ops, &workload.narrow).iter().enumerate() {
        let dependent = truth.get(&0).is_some_and(|&epoch| epoch > workload.accepted);
        let decided = rejection.classify(frontier);
        if dependent {
            prop_assert!(decided.is_dependent(), "op {at} depends but was let run: {frontier:?}");
        }
        if decided == Dependence::Rejected {
            prop_assert!(dependent, "op {at} cancelled as dependent but is not: {frontier:?}");
        }
        if frontier.is_tainted() {
            conservative += usize::from(decided == Dependence::Conservative);
        } else {
            prop_assert_eq!(decided.is_dependent(), dependent, "op {} untainted: exact", at);
            prop_assert_ne!(decided, Dependence::Conservative);
        }
    }
    Ok(conservative)
}

fn config() -> Config {
    if cfg!(miri) {
        crate::testing::proptest_config()
    } else {
        // Ten thousand workloads, each decided at four capacities: one that never overflows
        // (seven queues fit eight entries) unless narrow queues forget, and smaller ones that
        // overflow whenever more queues meet than they hold.
        Config { cases: 10_000, ..crate::testing::proptest_config() }
    }
}

proptest! {
    #![proptest_config(config())]
    #[test]
    fn cancelled_set_is_exact_untainted_and_a_superset_tainted(workload in workload()) {
        check::<8>(&workload)?;
        check::<2>(&workload)?;
        check::<3>(&workload)?;
        check::<5>(&workload)?;
    }
}

#[test]
fn overflow_makes_conservative_decisions() {
    // Four queues each signal; a fifth waits on all of them with room for three entries: it
    // forgets the smallest epochs (the draft's among them) and is decided conservatively.
    let ops: Vec<OpSpec> = [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
        .iter()
        .map(|&queue| OpSpec { queue, waits_on: Vec::new() })
        .chain([OpSpec { queue: 4, waits_on: std::vec![0, 2, 5, 9] }])
        .collect();
    let workload = Workload { ops, accepted: 0, narrow: std::vec![false; 5] };
    let submitted = submit::<3>(&workload.ops, &workload.narrow);
    let (joined, truth) = &submitted[10];
    assert!(joined.is_tainted());
    assert_eq!(joined.get(axis(0)), None, "the draft's entry was evicted");
    assert_eq!(truth.get(&0), Some(&1), "but the operation depends on draft epoch 1");
    assert_eq!(Rejection::new(axis(0), 0).classify(joined), Dependence::Conservative);
    assert_eq!(check::<3>(&workload).ok(), Some(1));
}

#[test]
fn a_forgotten_higher_epoch_behind_a_kept_lower_one_is_conservative() {
    // `a` knows draft epoch 1 exactly; `b` depended on draft epoch 2 but forgot it. Their
    // join (with room for every entry `b` kept) holds draft epoch 1 (accepted) and is
    // tainted: it must not be declared independent.
    let mut a = Frontier::<8>::from_points([crate::frontier::Point::new(axis(0), 1)]);
    let mut b = Frontier::<3>::new();
    b.insert_or_raise(axis(0), 2);
    for queue in 1..=3 {
        b.insert_or_raise(axis(queue), 10);
    }
    assert!(b.is_tainted() && b.get(axis(0)).is_none());
    a.merge(&b);
    assert_eq!(a.get(axis(0)), Some(1));
    assert_eq!(Rejection::new(axis(0), 1).classify(&a), Dependence::Conservative);
}

#[test]
fn examples() {
    let rejection = Rejection::new(axis(0), 2);
    let at = |epoch| Frontier::<8>::from_points([crate::frontier::Point::new(axis(0), epoch)]);
    assert_eq!(rejection.classify(&at(3)), Dependence::Rejected);
    assert_eq!(rejection.classify(&at(2)), Dependence::Independent);
    assert_eq!(rejection.classify(&Frontier::<8>::new()), Dependence::Independent);
    let mut tainted = Frontier::<8>::new();
    tainted.taint();
    assert_eq!(rejection.classify(&tainted), Dependence::Conservative);
    let mut tainted_beyond = at(5);
    tainted_beyond.taint();
    assert_eq!(rejection.classify(&tainted_beyond), Dependence::Rejected);
}

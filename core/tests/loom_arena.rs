//! Loom models of the arena's free list (run with `RUSTFLAGS="--cfg loom"`).
//!
//! Every interleaving of concurrent acquires and releases is explored for:
//! - exclusive ownership: a block never has two owners at once;
//! - the ABA case: a stalled acquirer's CAS on a head that has since been popped and pushed
//!   back must fail instead of installing a link to a block someone owns;
//! - hand-over: a previous owner's accesses to a block happen-before the next owner's (loom's
//!   cell tracking on the arena's slots and on the values reports any race);
//! - nothing lost: once every thread has finished, all blocks are free and distinct.
#![cfg(loom)]

use causeway_core::executor::{Arena, Block};
use loom::cell::UnsafeCell;
use loom::model::Builder;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A value whose every access loom checks for races with other accesses to it.
struct Payload(UnsafeCell<usize>);

/// An arena plus one "someone owns this" flag per block, set and cleared by [`Held`].
struct Checked<const N: usize> {
    arena: Arena<Payload, N>,
    owned: [AtomicBool; N],
}

impl<const N: usize> Checked<N> {
    fn new() -> Arc<Checked<N>> {
        Arc::new(Checked {
            arena: Arena::new(),
            owned: core::array::from_fn(|_| AtomicBool::new(false)),
        })
    }

    /// Takes every block, checks they are `N` distinct ones and that no further block exists.
    fn assert_all_blocks_free(&self) {
        let all: Vec<Held<'_, N>> = (0..N)
            .map(|_| Held::take(self).expect("a block went missing from the free list"))
            .collect();
        assert!(Held::take(self).is_none(), "the free list holds more than N blocks");
        drop(all);
    }
}

/// A block taken from a [`Checked`] arena, touched through its value, flagged as owned.
struct Held<'a, const N: usize> {
    checked: &'a Checked<N>,
    block: Block<'a, Payload, N>,
}

impl<'a, const N: usize> Held<'a, N> {
    /// Takes a block if one is free, asserting no one else owns it, and writes its value.
    fn take(checked: &'a Checked<N>) -> Option<Held<'a, N>> {
        let block = checked.arena.acquire(Payload(UnsafeCell::new(0))).ok()?;
        // Relaxed: the swap reads the latest flag; a correct hand-over orders the previous
        // owner's clear before it through the arena's own Release/Acquire.
        let was_owned = checked.owned[block.index()].swap(true, Ordering::Relaxed);
        assert!(!was_owned, "block {} has two owners", block.index());
        // SAFETY: loom checks this access against every other access to the cell.
        block.0.with_mut(|value| unsafe { *value += 1 });
        Some(Held { checked, block })
    }
}

impl<const N: usize> Drop for Held<'_, N> {
    fn drop(&mut self) {
        // SAFETY: loom checks this access against every other access to the cell.
        let touches = self.block.0.with(|value| unsafe { *value });
        assert_eq!(touches, 1, "block {} was written by another owner", self.block.index());
        let was_owned = self.checked.owned[self.block.index()].swap(false, Ordering::Relaxed);
        assert!(was_owned, "block {} lost its owner flag", self.block.index());
    }
}

fn bounded(preemptions: usize) -> Builder {
    let mut builder = Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder
}

#[test]
fn racing_acquires_and_releases_never_share_a_block() {
    bounded(4).check(|| {
        let checked = Checked::<2>::new();
        let others: Vec<_> = (0..2)
            .map(|_| {
                let checked = checked.clone();
                thread::spawn(move || drop(Held::take(&checked)))
            })
            .collect();
        drop(Held::take(&checked));
        for other in others {
            other.join().unwrap();
        }
        checked.assert_all_blocks_free();
    });
}

#[test]
fn a_stale_head_cannot_install_an_owned_block() {
    // Thread 1 may read head = A and next[A] = B, then stall while thread 2 takes A, takes B
    // and frees A: head is A again. Thread 1's CAS must fail (the tag moved on); otherwise it
    // installs B, which thread 2 still owns, and thread 1's second take gets B too.
    loom::model(|| {
        let checked = Checked::<2>::new();
        let stalled = {
            let checked = checked.clone();
            thread::spawn(move || {
                let first = Held::take(&checked);
                let second = Held::take(&checked);
                drop((first, second));
            })
        };
        let a = Held::take(&checked);
        let b = Held::take(&checked);
        drop(a);
        drop(b);
        stalled.join().unwrap();
        checked.assert_all_blocks_free();
    });
}

#[test]
fn the_next_owner_sees_the_previous_owner_done() {
    // One block, three takers: each hand-over must order the previous owner's writes and its
    // drop of the value before the next owner's write of its own value.
    bounded(4).check(|| {
        let checked = Checked::<1>::new();
        let others: Vec<_> = (0..2)
            .map(|_| {
                let checked = checked.clone();
                thread::spawn(move || drop(Held::take(&checked)))
            })
            .collect();
        drop(Held::take(&checked));
        for other in others {
            other.join().unwrap();
        }
        checked.assert_all_blocks_free();
    });
}

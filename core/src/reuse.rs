//! Buffer reuse through death frontiers.
//!
//! When a buffer is freed, the freeing operation's causal past — its frontier before its own
//! entry — becomes the buffer's *death frontier*: by program structure every use of the buffer
//! is in it. One [`DeathRecord`] per buffer lifecycle replaces per-use event tracking.
//!
//! A requester may reuse the memory without any synchronisation when it already knows the
//! dealloc operation, or when its knowledge joined with what the device knows is complete
//! dominates an *untainted* death frontier. Otherwise the answer is "needs wait" with the
//! minimal entries that close the gap (try before you fence). A tainted death frontier may have
//! lost uses, so the only exact wait left is the dealloc operation itself.
//!
//! Independent workloads have disjoint axes, so the entries a reuse waits on are always the
//! other workload's own, never unrelated work.

use core::fmt;

use heapless::Vec;

use crate::frontier::{Frontier, Point};

/// The O(1) metadata of one dead buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeathRecord<const N: usize = 8> {
    /// The dealloc operation: knowing it discharges every use exactly.
    pub dealloc: Point,
    /// The dealloc operation's causal past (its frontier before its own entry).
    pub death: Frontier<N>,
}

/// Whether a buffer may be reused now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReuseDecision<const N: usize> {
    /// Every use is known to be complete or ordered before the requester.
    ReuseNow,
    /// Waiting on every entry of `missing` makes reuse safe (and so would waiting on
    /// `dealloc` alone, possibly later).
    NeedsWait {
        /// The minimal undominated entries.
        missing: Frontier<N>,
        /// The dealloc operation.
        dealloc: Point,
    },
}

impl<const N: usize> DeathRecord<N> {
    /// A record for a buffer freed by `dealloc` with causal past `death`.
    pub const fn new(dealloc: Point, death: Frontier<N>) -> DeathRecord<N> {
        DeathRecord { dealloc, death }
    }

    /// Decides reuse for a requester that knows `knowledge` on a device that has observed
    /// `completed`.
    pub fn decide<const K: usize, const C: usize>(
        &self,
        knowledge: &Frontier<K>,
        completed: &Frontier<C>,
    ) -> ReuseDecision<N> {
        let known = |point: Point| knowledge.knows(point) || completed.knows(point);
        if known(self.dealloc) {
            return ReuseDecision::ReuseNow;
        }
        if self.death.is_tainted() {
            return ReuseDecision::NeedsWait {
                missing: Frontier::from_points([self.dealloc]),
                dealloc: self.dealloc,
            };
        }
        let mut missing = Frontier::<N>::new();
        for point in self.death.iter().filter(|&p| !known(p)) {
            missing.insert_or_raise(point.axis, point.epoch);
        }
        if missing.is_empty() {
            ReuseDecision::ReuseNow
        } else {
            ReuseDecision::NeedsWait { missing, dealloc: self.dealloc }
        }
    }
}

/// Identity of a pooled block (the pool's own numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u32);

/// A dead block waiting for reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreeBlock<const N: usize> {
    /// The block.
    pub block: BlockId,
    /// Its size in bytes.
    pub size: u64,
    /// How it died.
    pub record: DeathRecord<N>,
}

/// The answer to a reuse request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Acquire<const N: usize> {
    /// Take this block now; it has left the pool.
    Reuse {
        /// The block.
        block: BlockId,
        /// Its size.
        size: u64,
    },
    /// The cheapest fitting block needs these waits first; it stays in the pool.
    NeedsWait {
        /// The block to retry for once the waits are issued.
        block: BlockId,
        /// The minimal undominated entries.
        missing: Frontier<N>,
        /// Its dealloc operation.
        dealloc: Point,
    },
    /// No free block is large enough.
    Exhausted,
}

/// A released block that did not fit, handed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolFull<const N: usize>(pub FreeBlock<N>);

impl<const N: usize> fmt::Display for PoolFull<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reuse pool is full; block {} handed back", self.0.block.0)
    }
}

impl<const N: usize> core::error::Error for PoolFull<N> {}

/// Up to `B` dead blocks awaiting reuse, each with its death record.
#[derive(Clone, Debug, Default)]
pub struct ReusePool<const B: usize, const N: usize = 8> {
    free: Vec<FreeBlock<N>, B>,
}

impl<const B: usize, const N: usize> ReusePool<B, N> {
    /// An empty pool.
    pub const fn new() -> ReusePool<B, N> {
        ReusePool { free: Vec::new() }
    }

    /// Number of dead blocks held.
    pub fn len(&self) -> usize {
        self.free.len()
    }

    /// Whether no block is held.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }

    /// Adds a dead block; a full pool hands it back.
    pub fn release(&mut self, block: FreeBlock<N>) -> Result<(), PoolFull<N>> {
        self.free.push(block).map_err(PoolFull)
    }

    /// Finds a block of at least `size` bytes for a requester with `knowledge` on a device
    /// that has observed `completed`: the smallest block reusable now, else the fitting block
    /// with the fewest missing entries, else [`Acquire::Exhausted`].
    pub fn acquire<const K: usize, const C: usize>(
        &mut self,
        size: u64,
        knowledge: &Frontier<K>,
        completed: &Frontier<C>,
    ) -> Acquire<N> {
        let mut best_now: Option<(usize, u64)> = None;
        let mut best_wait: Option<(BlockId, Frontier<N>, Point)> = None;
        for (index, candidate) in self.free.iter().enumerate().filter(|(_, b)| b.size >= size) {
            match candidate.record.decide(knowledge, completed) {
                ReuseDecision::ReuseNow => {
                    if best_now.is_none_or(|(_, s)| candidate.size < s) {
                        best_now = Some((index, candidate.size));
                    }
                }
                ReuseDecision::NeedsWait { missing, dealloc } => {
                    if best_wait.as_ref().is_none_or(|(_, m, _)| missing.len() < m.len()) {
                        best_wait = Some((candidate.block, missing, dealloc));
                    }
                }
            }
        }
        match (best_now, best_wait) {
            (Some((index, size)), _) => {
                let block = self.free.swap_remove(index).block;
                Acquire::Reuse { block, size }
            }
            (None, Some((block, missing, dealloc))) => {
                Acquire::NeedsWait { block, missing, dealloc }
            }
            (None, None) => Acquire::Exhausted,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::axis::{Axis, Domain};

    fn p(queue: u64, epoch: u64) -> Point {
        Point::new(Axis::new(0, Domain::Queue, queue), epoch)
    }

    fn record(dealloc: Point, past: &[Point]) -> DeathRecord<8> {
        DeathRecord::new(dealloc, Frontier::from_points(past.iter().copied()))
    }

    #[test]
    fn knowing_the_dealloc_or_dominating_the_past_allows_reuse() {
        let r = record(p(1, 4), &[p(1, 3), p(2, 7)]);
        let none = Frontier::<8>::new();
        assert_eq!(
            r.decide(&Frontier::<8>::from_points([p(1, 4)]), &none),
            ReuseDecision::ReuseNow
        );
        assert_eq!(
            r.decide(
                &Frontier::<8>::from_points([p(1, 3)]),
                &Frontier::<4>::from_points([p(2, 9)])
            ),
            ReuseDecision::ReuseNow
        );
        match r.decide(&Frontier::<8>::from_points([p(1, 3)]), &none) {
            ReuseDecision::NeedsWait { missing, dealloc } => {
                assert_eq!(missing, Frontier::<8>::from_points([p(2, 7)]));
                assert_eq!(dealloc, p(1, 4));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tainted_death_frontier_waits_on_the_dealloc_itself() {
        let mut r = record(p(1, 4), &[p(2, 7)]);
        r.death.taint();
        let knows_past = Frontier::<8>::from_points([p(2, 7)]);
        match r.decide(&knows_past, &Frontier::<8>::new()) {
            ReuseDecision::NeedsWait { missing, .. } => {
                assert_eq!(missing, Frontier::<8>::from_points([p(1, 4)]));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pool_prefers_reusable_then_fewest_waits_then_exhausted() {
        let mut pool: ReusePool<3> = ReusePool::new();
        let block = |id, size, r| FreeBlock { block: BlockId(id), size, record: r };
        pool.release(block(1, 64, record(p(1, 2), &[p(1, 1), p(2, 1), p(3, 1)]))).unwrap();
        pool.release(block(2, 64, record(p(2, 5), &[p(2, 4)]))).unwrap();
        pool.release(block(3, 16, record(p(1, 9), &[]))).unwrap();
        assert_eq!(
            pool.release(block(4, 1, record(p(1, 1), &[]))),
            Err(PoolFull(block(4, 1, record(p(1, 1), &[]))))
        );
        let knows = Frontier::<8>::from_points([p(1, 1)]);
        let none = Frontier::<8>::new();
        assert_eq!(pool.acquire(8, &knows, &none), Acquire::Reuse { block: BlockId(3), size: 16 });
        match pool.acquire(32, &knows, &none) {
            Acquire::NeedsWait { block, missing, .. } => {
                assert_eq!(block, BlockId(2));
                assert_eq!(missing.len(), 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(pool.acquire(128, &knows, &none), Acquire::Exhausted);
        assert_eq!(pool.len(), 2);
    }
}

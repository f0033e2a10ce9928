//! Stream-ordered memory: a pool with a byte quota whose allocations are scheduled like any
//! other queue operation.
//!
//! From the host's side an `alloca` is only a *reservation* and a `dealloca` only releases it;
//! the bytes are *committed* when the alloca operation runs (just before the work that uses
//! them) and *decommitted* when the dealloca operation runs (just after the last use), or ends
//! without running (see "A dealloca that does not run"). Peak committed memory therefore
//! follows execution, not submission: N sequential users of a transient buffer need one
//! buffer's worth of quota.
//!
//! A commit that would exceed the quota does not fail: the queue that runs it waits until a
//! decommit makes room, so two requests that together exceed the pool are serialised. Only a
//! single request larger than the whole quota is refused, at submission.
//!
//! Which memory a reservation gets is decided at submission, from causality alone: a submitted
//! dealloca hands its block to the reuse table with its death frontier (see
//! [`causeway_core::reuse`]); a later alloca takes that block when its own knowledge (joined
//! with what the device knows is complete) proves it runs after every use — then its commit is
//! ordered after the decommit with no fence at all. Otherwise it takes fresh memory rather than
//! waiting (try before you fence, and here skip the fence).
//!
//! Native memory: each reservation belongs to the driver of the queue its alloca was submitted
//! to (its *owner*). When the alloca runs, the layer asks the owner to back the block
//! ([`MemoryOp::Commit`](crate::MemoryOp)); when the dealloca runs, to let it go
//! ([`MemoryOp::Decommit`](crate::MemoryOp)), keeping it only while the block sits in the reuse
//! table. A block the table forgets, or that an alloca of another driver reuses, is
//! [released](crate::MemoryOp) by its last owner. The pool decides which block an alloca
//! gets; a driver only binds and frees native memory for the blocks it is told about. What a
//! driver keeps of dead blocks is outside the quota, and bounded by the reuse table (64
//! blocks).
//!
//! # A dealloca that does not run
//!
//! A dealloca that fails (a semaphore it waits on failed) or is cancelled (it depends on
//! rejected speculation) gives its bytes back, lets its block go and frees its record all the
//! same, when it ends — as one that ran does. Giving them back earlier would be unsound: a
//! timeline can fail from below a signal that is still running (the operation that signals 1
//! fails while the one that signals 2, which uses the buffer, runs), and the next alloca would
//! commit the bytes — reusing the block, the very memory — under that user. Never giving them
//! back hangs every later alloca that needs them.
//!
//! The rule: **a dealloca ends only once every one of its waits has ended, and gives its memory
//! back when it ends.** A wait ends only after the signal it waits for has ended — reached, or
//! failed *and* its operation over ("A wait ends after its signal" in
//! [`causeway_core::semaphore`]) — and the operations before the dealloca on its queue have
//! retired before it reaches the head. So when it gives back, every operation it was ordered
//! after has ended, failed or not: all that a dealloca that ran knows too. Operations end so
//! anyway, except in two places, where a dealloca differs from the rest (`Device::submit`, the
//! queue's `release_waits`):
//!
//! - an operation *doomed at submission* (it waits on a timeline that had already failed, or
//!   signals one) fails without waiting. A dealloca arms its waits all the same, the failed
//!   ones too: a timepoint armed on a failed value that a live signal covers fires only when
//!   that signal's operation ends;
//! - a *cancelled* operation stops waiting where no live signal covers the value (its signal
//!   is not submitted yet). A dealloca keeps those waits: whatever submits that signal later
//!   is ordered before the dealloca and may use the buffer. A cancelled dealloca whose wait is
//!   never signalled holds its queue until shutdown, as an uncancelled one would.
//!
//! The rule is exact, not only conservative: the dealloca waits for nothing it would not have
//! waited for had it run. Reuse needs nothing more: a dead block goes to an alloca only when
//! the alloca knows the dealloca (a death frontier holds the dealloca's own point), so it runs
//! after the dealloca has ended, whichever way it ended. What no rule here can see is a user
//! no semaphore tracks (a host thread that fails a timeline from outside and goes on using the
//! buffer), as for a dealloca that runs.
//!
//! An alloca that does not run (it failed or was cancelled before it committed) holds
//! nothing: its dealloca gives nothing back and succeeds, as after a driver that could not
//! back the block, and the memory a driver kept for a block it took from the reuse table is
//! released. Each record is freed once, by whichever of its alloca and dealloca ends last: a
//! dealloca that nothing ordered after its alloca may end first, and then it fails, and so
//! does the alloca ([`Commit::Released`]).
//!
//! This module is plain data: the device wraps one pool in a lock.

use std::fmt;

use causeway_core::frontier::{Frontier, Point};
use causeway_core::reuse::{Acquire, BlockId, DeathRecord, FreeBlock, ReusePool};

/// Dead blocks kept for reuse; a block released while it is full is forgotten.
const REUSE_BLOCKS: usize = 64;

/// One reservation's handle, from [`MemoryPool::reserve`] until its alloca and its dealloca have
/// both ended ([`MemoryPool::give_back`], [`MemoryPool::end_alloca`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AllocationId(u32);

/// Why a memory operation was refused at submission, or failed when it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryError {
    /// The buffer index is outside the device's buffer table.
    UnknownBuffer(u32),
    /// `alloca` of a buffer whose previous reservation was not released by a `dealloca`.
    BufferLive(u32),
    /// `dealloca` of a buffer with no reservation.
    BufferNotLive(u32),
    /// One request larger than the whole pool can never be served.
    TooLarge {
        /// Requested bytes.
        bytes: u64,
        /// The pool quota.
        quota: u64,
    },
    /// A dealloca ran before its alloca: nothing ordered the two.
    NotCommitted,
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MemoryError::UnknownBuffer(buffer) => write!(f, "buffer {buffer} does not exist"),
            MemoryError::BufferLive(buffer) => {
                write!(f, "buffer {buffer} is already allocated (no dealloca released it)")
            }
            MemoryError::BufferNotLive(buffer) => write!(f, "buffer {buffer} is not allocated"),
            MemoryError::TooLarge { bytes, quota } => {
                write!(f, "{bytes} bytes can never fit a pool of {quota} bytes")
            }
            MemoryError::NotCommitted => {
                f.write_str("dealloca ran before its alloca (nothing orders them)")
            }
        }
    }
}

impl std::error::Error for MemoryError {}

/// What a commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Commit {
    /// The bytes are committed; the owner backs them natively now (`None` only for a record
    /// the submission gave no block, which `Device::submit` never leaves).
    Committed(Option<Backing>),
    /// Committing now would exceed the quota: retry after a decommit.
    OverQuota,
    /// The dealloca already ended (nothing ordered it after the alloca): nothing is
    /// committed, and the alloca fails ([`MemoryPool::end_alloca`] frees the record).
    Released,
}

/// The native side of a committed allocation: which driver backs which block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backing {
    /// The block.
    pub(crate) block: BlockId,
    /// Bytes the alloca asked for.
    pub(crate) bytes: u64,
    /// The owner: the driver (index into the device's backends) of the alloca's queue.
    pub(crate) driver: usize,
    /// A driver other than the owner that kept the block's memory for reuse and must release
    /// it first (the block died on one driver's memory and is reused on another's).
    pub(crate) release_from: Option<usize>,
}

/// What the native side must do when a dealloca gives its memory back, or a record is
/// abandoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unbacking {
    /// The block.
    pub(crate) block: BlockId,
    /// Its owner.
    pub(crate) driver: usize,
    /// Whether the reuse table holds the block, so the owner keeps its memory for a later
    /// commit of the same block (otherwise it frees it).
    pub(crate) kept: bool,
}

/// Totals over a pool's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Allocations committed.
    pub commits: u64,
    /// Reservations that reused a dead block without any wait.
    pub reused: u64,
    /// Reservations that found a fitting dead block the requester could not prove dead and
    /// took fresh memory instead.
    pub reuse_declined: u64,
    /// Times a commit found the quota exhausted and waited for a decommit.
    pub over_quota_waits: u64,
    /// Highest committed byte count.
    pub peak_committed: u64,
}

/// Where a reservation's alloca stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AllocaState {
    /// Submitted, not run.
    Pending,
    /// Ran: its bytes are committed and its owner backs its block.
    Live,
    /// Ended holding nothing: it failed or was cancelled before it ran, or its owner could not
    /// back it (its bytes went back at once). Its dealloca has nothing to give back.
    Ended,
}

#[derive(Clone, Copy, Debug)]
struct Allocation {
    bytes: u64,
    block: Option<BlockId>,
    alloca: AllocaState,
    /// The driver of the alloca's queue.
    driver: usize,
    /// Whether the block went to the reuse table when the dealloca was submitted.
    kept: bool,
    /// Whether the block came from the reuse table: until the alloca commits, the driver it
    /// died on (`release_from`, else the owner) keeps its native memory.
    reused: bool,
    /// See [`Backing::release_from`].
    release_from: Option<usize>,
    /// The dealloca ended while the alloca was pending (nothing ordered the two): the record
    /// is the alloca's to free when it ends.
    dealloca_ended: bool,
}

impl Allocation {
    const EMPTY: Allocation = Allocation {
        bytes: 0,
        block: None,
        alloca: AllocaState::Pending,
        driver: 0,
        kept: false,
        reused: false,
        release_from: None,
        dealloca_ended: false,
    };
}

/// A stream-ordered pool. Every table is sized at creation; no method allocates.
#[derive(Debug)]
pub(crate) struct MemoryPool<const N: usize> {
    quota: u64,
    committed: u64,
    buffers: Vec<Option<AllocationId>>,
    allocations: Vec<Allocation>,
    free_allocations: Vec<AllocationId>,
    reuse: ReusePool<REUSE_BLOCKS, N>,
    /// The owner of each block in the reuse table (a block leaves both together).
    dead_owners: Vec<(BlockId, usize)>,
    next_block: u32,
    stats: MemoryStats,
}

impl<const N: usize> MemoryPool<N> {
    /// A pool of `quota` bytes for `buffers` buffer names, with `records` reservations
    /// outstanding at most (reserved and not yet decommitted).
    pub(crate) fn new(quota: u64, buffers: usize, records: usize) -> MemoryPool<N> {
        MemoryPool {
            quota,
            committed: 0,
            buffers: vec![None; buffers],
            allocations: vec![Allocation::EMPTY; records],
            free_allocations: (0..records).rev().map(|i| AllocationId(i as u32)).collect(),
            reuse: ReusePool::new(),
            dead_owners: Vec::with_capacity(REUSE_BLOCKS),
            next_block: 0,
            stats: MemoryStats::default(),
        }
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        self.stats
    }

    pub(crate) fn committed(&self) -> u64 {
        self.committed
    }

    /// Allocation records the pool has.
    pub(crate) fn records(&self) -> usize {
        self.allocations.len()
    }

    /// Whether a reservation would find a free record.
    pub(crate) fn has_free_record(&self) -> bool {
        !self.free_allocations.is_empty()
    }

    /// Submission of an alloca to a queue of `driver`: checks the request can ever be served
    /// and reserves a record. `Ok(None)` when every record is held (backpressure: retry after a
    /// decommit).
    pub(crate) fn reserve(
        &mut self,
        buffer: u32,
        bytes: u64,
        driver: usize,
    ) -> Result<Option<AllocationId>, MemoryError> {
        let entry = self.buffers.get(buffer as usize).ok_or(MemoryError::UnknownBuffer(buffer))?;
        if entry.is_some() {
            return Err(MemoryError::BufferLive(buffer));
        }
        if bytes > self.quota {
            return Err(MemoryError::TooLarge { bytes, quota: self.quota });
        }
        let Some(id) = self.free_allocations.pop() else { return Ok(None) };
        self.allocations[id.0 as usize] = Allocation { bytes, driver, ..Allocation::EMPTY };
        self.buffers[buffer as usize] = Some(id);
        Ok(Some(id))
    }

    /// Submission of a dealloca: releases the buffer name; the record lives until the
    /// dealloca gives its memory back.
    pub(crate) fn release(&mut self, buffer: u32) -> Result<AllocationId, MemoryError> {
        let entry =
            self.buffers.get_mut(buffer as usize).ok_or(MemoryError::UnknownBuffer(buffer))?;
        entry.take().ok_or(MemoryError::BufferNotLive(buffer))
    }

    /// Undoes [`reserve`](Self::reserve) for a submission that was refused later on.
    pub(crate) fn unreserve(&mut self, buffer: u32, id: AllocationId) {
        self.buffers[buffer as usize] = None;
        self.free_allocations.push(id);
    }

    /// Undoes [`release`](Self::release) for a submission that was refused later on.
    pub(crate) fn unrelease(&mut self, buffer: u32, id: AllocationId) {
        self.buffers[buffer as usize] = Some(id);
    }

    /// Picks the memory of reservation `id` for an alloca that knows `knowledge` on a device
    /// that has completed `completed`: a dead block whose uses are provably over, else a
    /// fresh one. Returns the block and whether it was reused.
    pub(crate) fn assign<const K: usize, const C: usize>(
        &mut self,
        id: AllocationId,
        knowledge: &Frontier<K>,
        completed: &Frontier<C>,
    ) -> (BlockId, bool) {
        let Allocation { bytes, driver, .. } = self.allocations[id.0 as usize];
        let (block, reused) = match self.reuse.acquire(bytes, knowledge, completed) {
            Acquire::Reuse { block, .. } => {
                if let Some(at) = self.dead_owners.iter().position(|&(dead, _)| dead == block) {
                    let (_, owner) = self.dead_owners.swap_remove(at);
                    self.allocations[id.0 as usize].release_from =
                        (owner != driver).then_some(owner);
                }
                (block, true)
            }
            Acquire::NeedsWait { .. } => {
                self.stats.reuse_declined += 1;
                (self.fresh_block(), false)
            }
            _ => (self.fresh_block(), false),
        };
        self.stats.reused += u64::from(reused);
        self.allocations[id.0 as usize].block = Some(block);
        self.allocations[id.0 as usize].reused = reused;
        (block, reused)
    }

    /// Submission of a dealloca `dealloc` with frontier `death`: its block becomes reusable
    /// by whoever provably runs after it.
    pub(crate) fn retire<const M: usize>(
        &mut self,
        id: AllocationId,
        dealloc: Point,
        death: &Frontier<M>,
    ) {
        let allocation = self.allocations[id.0 as usize];
        let Some(block) = allocation.block else { return };
        let record = DeathRecord::new(dealloc, Frontier::from_frontier(death));
        // A full reuse table forgets the block: only a reuse opportunity is lost, and its
        // owner frees the memory when the dealloca gives it back.
        let kept = self.reuse.release(FreeBlock { block, size: allocation.bytes, record }).is_ok();
        if kept {
            // Room is certain: the table and this list hold the same blocks.
            self.dead_owners.push((block, allocation.driver));
        }
        self.allocations[id.0 as usize].kept = kept;
    }

    /// The alloca runs: commit its bytes if the quota allows, and say what its owner backs.
    pub(crate) fn commit(&mut self, id: AllocationId) -> Commit {
        let allocation = &mut self.allocations[id.0 as usize];
        if allocation.dealloca_ended {
            return Commit::Released;
        }
        let bytes = allocation.bytes;
        if self.committed + bytes > self.quota {
            self.stats.over_quota_waits += 1;
            return Commit::OverQuota;
        }
        self.stats.commits += 1;
        self.committed += bytes;
        self.stats.peak_committed = self.stats.peak_committed.max(self.committed);
        allocation.alloca = AllocaState::Live;
        // From here the owner backs the block: nobody else keeps its memory.
        allocation.reused = false;
        let release_from = allocation.release_from.take();
        let driver = allocation.driver;
        Commit::Committed(allocation.block.map(|block| Backing {
            block,
            bytes,
            driver,
            release_from,
        }))
    }

    /// The owner could not back a committed allocation: its bytes return to the quota and its
    /// dealloca will have nothing to give back.
    pub(crate) fn fail_commit(&mut self, id: AllocationId) {
        let allocation = &mut self.allocations[id.0 as usize];
        if allocation.alloca == AllocaState::Live {
            self.committed -= allocation.bytes;
            allocation.alloca = AllocaState::Ended;
        }
    }

    /// The alloca of `id` ended without committing: it failed or was cancelled before it ran,
    /// or found its dealloca already ended ([`Commit::Released`]). Its dealloca will have
    /// nothing to give back; the record is freed now if that dealloca already ended. Returns
    /// the block it took from the reuse table, if any, with the driver that keeps the block's
    /// memory for it: that driver must release it, nobody else will commit it.
    pub(crate) fn end_alloca(&mut self, id: AllocationId) -> Option<(BlockId, usize)> {
        let allocation = &mut self.allocations[id.0 as usize];
        if allocation.alloca != AllocaState::Pending {
            return None;
        }
        let kept = match (allocation.reused, allocation.block) {
            (true, Some(block)) => {
                Some((block, allocation.release_from.unwrap_or(allocation.driver)))
            }
            _ => None,
        };
        allocation.alloca = AllocaState::Ended;
        allocation.reused = false;
        allocation.release_from = None;
        if allocation.dealloca_ended {
            self.free(id);
        }
        kept
    }

    /// What the owner must do natively when the dealloca of `id` gives its memory back;
    /// `None` when nothing is backed (the alloca has not run, or ended holding nothing).
    pub(crate) fn unbacking(&self, id: AllocationId) -> Option<Unbacking> {
        let allocation = self.allocations[id.0 as usize];
        match (allocation.alloca, allocation.block) {
            (AllocaState::Live, Some(block)) => {
                Some(Unbacking { block, driver: allocation.driver, kept: allocation.kept })
            }
            _ => None,
        }
    }

    /// The dealloca of `id` ended — it ran, failed or was cancelled, and in each case only
    /// after everything it was ordered after (see "A dealloca that does not run" in the
    /// module docs): its bytes return to the quota and the record is freed. Nothing to give
    /// back when the alloca ended holding nothing. Fails when the alloca has not run
    /// (nothing ordered the two); the record then stays until the alloca ends, which frees it.
    pub(crate) fn give_back(&mut self, id: AllocationId) -> Result<(), MemoryError> {
        let allocation = &mut self.allocations[id.0 as usize];
        match allocation.alloca {
            AllocaState::Pending => {
                allocation.dealloca_ended = true;
                return Err(MemoryError::NotCommitted);
            }
            AllocaState::Live => self.committed -= allocation.bytes,
            AllocaState::Ended => {}
        }
        self.free(id);
        Ok(())
    }

    /// [`give_back`](Self::give_back) for a dealloca the device cancels at shutdown. Returns
    /// the block its owner must free, if it backs one (not kept: the table may hand it on
    /// only to work that will never run).
    pub(crate) fn abandon(&mut self, id: AllocationId) -> Option<Unbacking> {
        let unbacking = self.unbacking(id).map(|unbacking| Unbacking { kept: false, ..unbacking });
        // An alloca that has not run keeps the record: its own cancellation frees it.
        let _ = self.give_back(id);
        unbacking
    }

    fn free(&mut self, id: AllocationId) {
        self.allocations[id.0 as usize] = Allocation::EMPTY;
        self.free_allocations.push(id);
    }

    fn fresh_block(&mut self) -> BlockId {
        let block = BlockId(self.next_block);
        self.next_block = self.next_block.wrapping_add(1);
        block
    }
}

#[cfg(test)]
mod tests {
    use causeway_core::axis::{Axis, Domain};

    use super::*;
    use crate::FRONTIER_CAPACITY;

    fn point(queue: u64, epoch: u64) -> Point {
        Point::new(Axis::new(0, Domain::Queue, queue), epoch)
    }

    fn knows(points: &[Point]) -> Frontier<FRONTIER_CAPACITY> {
        Frontier::from_points(points.iter().copied())
    }

    #[test]
    fn over_quota_commits_wait_for_a_decommit_instead_of_failing() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(512, 4, 8);
        let a = pool.reserve(0, 400, 0).unwrap().unwrap();
        let b = pool.reserve(1, 400, 0).unwrap().unwrap();
        assert!(matches!(pool.commit(a), Commit::Committed(_)));
        assert_eq!(pool.commit(b), Commit::OverQuota);
        pool.release(0).unwrap();
        pool.give_back(a).unwrap();
        assert!(matches!(pool.commit(b), Commit::Committed(_)));
        assert_eq!(pool.stats().peak_committed, 400);
        assert_eq!(pool.stats().over_quota_waits, 1);
    }

    #[test]
    fn a_request_larger_than_the_pool_is_refused_at_submission() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(100, 1, 2);
        assert_eq!(pool.reserve(0, 101, 0), Err(MemoryError::TooLarge { bytes: 101, quota: 100 }));
        assert_eq!(pool.reserve(3, 1, 0), Err(MemoryError::UnknownBuffer(3)));
    }

    #[test]
    fn buffer_names_follow_reserve_and_release() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(100, 1, 2);
        let first = pool.reserve(0, 10, 0).unwrap().unwrap();
        assert_eq!(pool.reserve(0, 10, 0), Err(MemoryError::BufferLive(0)));
        assert_eq!(pool.release(0), Ok(first));
        assert_eq!(pool.release(0), Err(MemoryError::BufferNotLive(0)));
        // Re-reserving while the first decommit is still queued takes a second record.
        let second = pool.reserve(0, 10, 0).unwrap().unwrap();
        assert_ne!(first, second);
        assert_eq!(pool.give_back(first), Err(MemoryError::NotCommitted));
    }

    /// Allocates `bytes` for `buffer`, assigning memory as `knowledge` allows.
    fn allocate(
        pool: &mut MemoryPool<FRONTIER_CAPACITY>,
        buffer: u32,
        knowledge: &[Point],
    ) -> (AllocationId, BlockId, bool) {
        let id = pool.reserve(buffer, 64, 0).unwrap().unwrap();
        let (block, reused) = pool.assign(id, &knows(knowledge), &knows(&[]));
        (id, block, reused)
    }

    #[test]
    fn reuse_needs_the_dealloc_in_the_requesters_past() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(100, 2, 4);
        let (a, block, _) = allocate(&mut pool, 0, &[]);
        pool.release(0).unwrap();
        pool.retire(a, point(1, 3), &knows(&[point(1, 3), point(2, 5)]));

        // A requester that knows nothing of queue 1 gets fresh memory (no fence is issued).
        let (b, fresh, reused) = allocate(&mut pool, 1, &[point(3, 1)]);
        assert!(!reused);
        assert_ne!(fresh, block);
        assert_eq!(pool.stats().reuse_declined, 1);
        pool.release(1).unwrap();
        pool.retire(b, point(3, 2), &knows(&[point(3, 2)]));

        // One that runs after the dealloc reuses the same block.
        assert_eq!(allocate(&mut pool, 0, &[point(1, 3)]).1, block);
        assert_eq!(pool.stats().reused, 1);
    }

    #[test]
    fn completed_work_counts_as_knowledge() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(100, 2, 4);
        let (a, block, _) = allocate(&mut pool, 0, &[]);
        pool.release(0).unwrap();
        pool.retire(a, point(1, 3), &knows(&[point(1, 3)]));
        let b = pool.reserve(1, 64, 0).unwrap().unwrap();
        assert_eq!(pool.assign(b, &knows(&[point(7, 1)]), &knows(&[point(1, 3)])), (block, true));
    }

    #[test]
    fn records_run_out_before_anything_allocates() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(100, 1, 2);
        let first = pool.reserve(0, 1, 0).unwrap().unwrap();
        pool.release(0).unwrap();
        let _second = pool.reserve(0, 1, 0).unwrap().unwrap();
        pool.release(0).unwrap();
        assert!(!pool.has_free_record());
        assert_eq!(pool.reserve(0, 1, 0), Ok(None), "full records are backpressure, not an error");
        assert!(matches!(pool.commit(first), Commit::Committed(_)));
        pool.give_back(first).unwrap();
        assert!(pool.reserve(0, 1, 0).unwrap().is_some());
    }

    #[test]
    fn a_block_reused_on_another_driver_is_released_by_its_last_owner_first() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(1000, 2, 4);
        let first = pool.reserve(0, 64, 1).unwrap().unwrap();
        let (block, _) = pool.assign(first, &knows(&[]), &knows(&[]));
        let Commit::Committed(Some(backing)) = pool.commit(first) else { panic!("committed") };
        assert_eq!((backing.block, backing.driver, backing.release_from), (block, 1, None));
        pool.release(0).unwrap();
        pool.retire(first, point(1, 2), &knows(&[point(1, 2)]));
        let unbacking = pool.unbacking(first).unwrap();
        assert_eq!(unbacking, Unbacking { block, driver: 1, kept: true });
        pool.give_back(first).unwrap();

        // Driver 0 reuses the block that died on driver 1: driver 1 lets its memory go.
        let second = pool.reserve(1, 32, 0).unwrap().unwrap();
        assert_eq!(pool.assign(second, &knows(&[point(1, 2)]), &knows(&[])), (block, true));
        let Commit::Committed(Some(backing)) = pool.commit(second) else { panic!("committed") };
        assert_eq!((backing.block, backing.driver, backing.release_from), (block, 0, Some(1)));
    }

    #[test]
    fn a_failed_native_commit_frees_the_quota_and_leaves_its_dealloca_nothing_to_give_back() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(100, 1, 2);
        let id = pool.reserve(0, 100, 0).unwrap().unwrap();
        pool.assign(id, &knows(&[]), &knows(&[]));
        assert!(matches!(pool.commit(id), Commit::Committed(Some(_))));
        pool.fail_commit(id);
        assert_eq!(pool.committed(), 0);
        assert_eq!(pool.unbacking(id), None);
        pool.release(0).unwrap();
        assert_eq!(pool.give_back(id), Ok(()));
        assert!(pool.has_free_record());
    }

    #[test]
    fn a_block_the_full_reuse_table_forgets_is_freed_by_its_owner() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(u64::MAX, REUSE_BLOCKS + 1, 64 * 4);
        let mut last = None;
        for buffer in 0..=REUSE_BLOCKS as u32 {
            let id = pool.reserve(buffer, 8, 0).unwrap().unwrap();
            pool.assign(id, &knows(&[]), &knows(&[]));
            assert!(matches!(pool.commit(id), Commit::Committed(Some(_))));
            pool.release(buffer).unwrap();
            let dealloc = point(1, u64::from(buffer) + 1);
            pool.retire(id, dealloc, &knows(&[dealloc]));
            last = Some(id);
        }
        let last = last.unwrap();
        assert!(!pool.unbacking(last).unwrap().kept, "the 65th dead block does not fit the table");
    }

    /// Frees every record it can and says how many are free.
    fn free_records(pool: &mut MemoryPool<FRONTIER_CAPACITY>) -> usize {
        let mut free = 0;
        while let Ok(Some(_)) = pool.reserve(free as u32, 1, 0) {
            free += 1;
        }
        free
    }

    #[test]
    fn an_alloca_that_never_ran_leaves_its_dealloca_nothing_and_its_record_is_freed_once() {
        for dealloca_first in [false, true] {
            let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(100, 4, 2);
            let id = pool.reserve(0, 100, 0).unwrap().unwrap();
            pool.assign(id, &knows(&[]), &knows(&[]));
            pool.release(0).unwrap();
            if dealloca_first {
                // Nothing ordered them: the record waits for the alloca, which cannot commit.
                assert_eq!(pool.give_back(id), Err(MemoryError::NotCommitted));
                assert_eq!(pool.commit(id), Commit::Released);
                assert_eq!(pool.end_alloca(id), None);
            } else {
                assert_eq!(pool.end_alloca(id), None, "a fresh block: no driver keeps it");
                assert_eq!(pool.give_back(id), Ok(()));
            }
            // Ending either side again changes nothing.
            assert_eq!(pool.end_alloca(id), None);
            assert_eq!(pool.committed(), 0);
            assert_eq!(free_records(&mut pool), 2, "dealloca first: {dealloca_first}");
        }
    }

    #[test]
    fn an_alloca_that_reused_a_block_and_never_ran_has_the_kept_memory_released() {
        let mut pool = MemoryPool::<FRONTIER_CAPACITY>::new(1000, 2, 4);
        let first = pool.reserve(0, 64, 1).unwrap().unwrap();
        let (block, _) = pool.assign(first, &knows(&[]), &knows(&[]));
        assert!(matches!(pool.commit(first), Commit::Committed(Some(_))));
        pool.release(0).unwrap();
        pool.retire(first, point(1, 2), &knows(&[point(1, 2)]));
        pool.give_back(first).unwrap();

        // Driver 1 kept the block; an alloca of driver 0 that takes it and fails releases it
        // there.
        let second = pool.reserve(1, 32, 0).unwrap().unwrap();
        assert_eq!(pool.assign(second, &knows(&[point(1, 2)]), &knows(&[])), (block, true));
        assert_eq!(pool.end_alloca(second), Some((block, 1)));
        pool.release(1).unwrap();
        assert_eq!(pool.unbacking(second), None);
        assert_eq!(pool.give_back(second), Ok(()));
        assert_eq!(pool.committed(), 0);
    }
}

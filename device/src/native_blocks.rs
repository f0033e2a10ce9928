//! The native memory a driver keeps for the stream-ordered blocks it owns — what every driver
//! that backs blocks with device memory ([`Backend::memory`](crate::Backend::memory)) does
//! alike, whatever its memory is.
//!
//! Each block is *live* (between its alloca and its dealloca) or *kept* (decommitted with
//! `keep`, for the layer to hand to a later alloca). A commit of a kept block that is large
//! enough makes it live again with no allocation (the layer proved every earlier use over); a
//! commit of a fresh block, or of a kept one too small, allocates anew; a decommit without
//! `keep`, or a release, frees it. The driver only says how to allocate and what a failure to
//! is.

use std::collections::HashMap;

use causeway_core::reuse::BlockId;
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::Mutex;

use crate::backend::MemoryOp;

/// Memory a driver backs a block with.
pub trait NativeMemory: Send {
    /// Its size in bytes.
    fn size(&self) -> u64;
}

struct Owned<M> {
    memory: M,
    /// Between its alloca and its dealloca; otherwise kept for the layer to reuse.
    live: bool,
}

/// The blocks a driver backs, by block (see the [module docs](self)).
pub struct NativeBlocks<M> {
    blocks: Mutex<HashMap<BlockId, Owned<M>>>,
}

impl<M> Default for NativeBlocks<M> {
    fn default() -> NativeBlocks<M> {
        NativeBlocks { blocks: Mutex::new(HashMap::new()) }
    }
}

impl<M: NativeMemory> NativeBlocks<M> {
    /// No block yet.
    pub fn new() -> NativeBlocks<M> {
        NativeBlocks::default()
    }

    /// Does `op`, allocating with `allocate(bytes)` when a block needs new memory (its `Err`
    /// fails the alloca). Memory is allocated and freed outside the lock: the layer never
    /// runs two operations on one block at once.
    pub fn apply(
        &self,
        op: MemoryOp,
        allocate: impl FnOnce(u64) -> Result<M, Failure>,
    ) -> Result<(), Failure> {
        match op {
            MemoryOp::Commit { block, bytes } => {
                let mut blocks = self.blocks.lock();
                match blocks.get_mut(&block) {
                    // The layer hands a block to one alloca at a time: a live one is a broken
                    // contract.
                    Some(owned) if owned.live => return Err(Failure::Aborted),
                    Some(owned) if owned.memory.size() >= bytes.max(1) => {
                        owned.live = true;
                        return Ok(());
                    }
                    // Kept memory too small for the request: freed below, backed anew.
                    _ => {}
                }
                let too_small = blocks.remove(&block);
                drop(blocks);
                drop(too_small);
                let memory = allocate(bytes)?;
                self.blocks.lock().insert(block, Owned { memory, live: true });
                Ok(())
            }
            MemoryOp::Decommit { block, keep: true } => {
                if let Some(owned) = self.blocks.lock().get_mut(&block) {
                    owned.live = false;
                }
                Ok(())
            }
            MemoryOp::Decommit { block, keep: false } | MemoryOp::Release { block } => {
                let freed = self.blocks.lock().remove(&block);
                drop(freed);
                Ok(())
            }
        }
    }

    /// Blocks backed now, live or kept.
    pub fn len(&self) -> usize {
        self.blocks.lock().len()
    }

    /// Whether no block is backed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Bytes(u64);

    impl NativeMemory for Bytes {
        fn size(&self) -> u64 {
            self.0
        }
    }

    fn block(index: u32) -> BlockId {
        BlockId(index)
    }

    #[test]
    fn kept_memory_is_reused_when_large_enough_and_replaced_when_not() {
        let blocks = NativeBlocks::<Bytes>::new();
        let allocations = std::cell::Cell::new(0);
        let allocate = |bytes| {
            allocations.set(allocations.get() + 1);
            Ok(Bytes(bytes))
        };
        let commit = |bytes| MemoryOp::Commit { block: block(0), bytes };
        blocks.apply(commit(64), allocate).unwrap();
        // Live: a second commit is a broken contract.
        assert_eq!(blocks.apply(commit(64), allocate), Err(Failure::Aborted));
        blocks.apply(MemoryOp::Decommit { block: block(0), keep: true }, allocate).unwrap();
        blocks.apply(commit(32), allocate).unwrap();
        assert_eq!((allocations.get(), blocks.len()), (1, 1), "the kept 64 bytes serve 32");
        blocks.apply(MemoryOp::Decommit { block: block(0), keep: true }, allocate).unwrap();
        blocks.apply(commit(128), allocate).unwrap();
        assert_eq!((allocations.get(), blocks.len()), (2, 1), "too small: backed anew");
        blocks.apply(MemoryOp::Decommit { block: block(0), keep: false }, allocate).unwrap();
        assert!(blocks.is_empty());
    }

    #[test]
    fn a_failed_allocation_fails_the_alloca_and_backs_nothing() {
        let blocks = NativeBlocks::<Bytes>::new();
        let commit = MemoryOp::Commit { block: block(3), bytes: 8 };
        assert_eq!(blocks.apply(commit, |_| Err(Failure::OutOfMemory)), Err(Failure::OutOfMemory));
        assert!(blocks.is_empty());
        blocks.apply(commit, |bytes| Ok(Bytes(bytes))).unwrap();
        blocks.apply(MemoryOp::Release { block: block(3) }, |_| unreachable!()).unwrap();
        assert!(blocks.is_empty());
    }
}

//! A device's semaphore table: the semaphores declared when it was built, and a pool of
//! semaphores created and destroyed while it runs.
//!
//! # Identity
//!
//! A [`SemaphoreId`] names a slot and the slot's *generation word*: odd while the slot holds
//! a live semaphore, even while it is free or waiting to be reclaimed, and one higher at every
//! change. An ID is valid only while the slot's word equals the ID's, so the ID of a destroyed
//! semaphore never names whatever the slot holds next.
//!
//! # Destroying while in use
//!
//! Destroying a pooled semaphore makes new submissions that name it fail, but the timeline
//! keeps working for operations already submitted: the slot is reclaimed only once every
//! operation submitted before the destruction has retired — checked by comparing each queue's
//! retired count with its submitted count at the destruction (taken under each queue's submit
//! lock, after the generation changed, so no submission can slip between) — and no host
//! thread is waiting on it. Then it is reset in place ([`Semaphore::reset`]) for its next use.
//! Nothing is allocated after the device is built.

use std::collections::VecDeque;
use std::fmt;
use std::ops::Index;

use causeway_core::semaphore::{HistoryEntry, Semaphore, SlotCountError};
use causeway_core::unpoisoned::{Mutex, MutexGuard};

use crate::config::SemaphoreConfig;
use crate::error::Resource;
use crate::ids::{DeviceTag, SemaphoreId};
use crate::limits::DeviceSemaphore;
use crate::queue::QueueShared;
use crate::sync::atomic::{AtomicU32, Ordering};

/// Why a pooled semaphore could not be created or destroyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SemaphoreError {
    /// No such live semaphore (never created, or destroyed already).
    Unknown(SemaphoreId),
    /// Declared with the device, not taken from its pool: it lives as long as the device.
    NotPooled(SemaphoreId),
    /// Every pooled slot is live or still used by operations in flight (backpressure: retry
    /// once work retires, or use [`Device::create_semaphore_timeout`]).
    ///
    /// [`Device::create_semaphore_timeout`]: crate::Device::create_semaphore_timeout
    Full(Resource),
    /// A waiting creation gave up at its deadline.
    TimedOut(Resource),
}

impl fmt::Display for SemaphoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SemaphoreError::Unknown(id) => write!(f, "{id} does not exist"),
            SemaphoreError::NotPooled(id) => {
                write!(f, "{id} was declared with the device and cannot be destroyed")
            }
            SemaphoreError::Full(resource) => write!(f, "{resource}"),
            SemaphoreError::TimedOut(resource) => write!(f, "gave up waiting: {resource}"),
        }
    }
}

impl std::error::Error for SemaphoreError {}

/// Pool slots not live, and what a destroyed one waits for.
struct PoolState {
    /// Slots ready for `create`.
    free: Vec<u32>,
    /// Destroyed slots in destruction order, waiting for the operations before them.
    retiring: VecDeque<u32>,
    /// Per pool slot, per queue: the queue's submitted count when the slot was destroyed.
    submitted_before: Box<[u64]>,
}

/// What reclaiming a retiring slot still waits for.
pub(crate) enum Blocker {
    /// Queue `queue` must retire up to `submitted` operations.
    Queue {
        /// The queue's index.
        queue: usize,
        /// Its submitted count at the destruction.
        submitted: u64,
    },
    /// A host thread waits on the semaphore.
    HostWaiter,
    /// Nothing: the slot can be reclaimed now (for the oldest retiring slot: it became
    /// reclaimable after a creation looked, so creating again succeeds).
    Reclaimable,
    /// Nothing is retiring: every slot is live, and only a destruction frees one.
    NothingRetiring,
}

/// The table: declared semaphores first, then the pool.
pub(crate) struct SemaphoreTable {
    /// The device's tag, which every id it hands out carries.
    tag: DeviceTag,
    semaphores: Box<[DeviceSemaphore]>,
    generations: Box<[AtomicU32]>,
    /// Index of the first pooled slot.
    pool_start: usize,
    queues: usize,
    pool: Mutex<PoolState>,
}

impl SemaphoreTable {
    /// Builds the declared semaphores and `pool`'s count of slots configured as its config
    /// (the `initial` value is given at each creation). `Err` names the slot whose history
    /// size is unusable.
    pub(crate) fn new(
        tag: DeviceTag,
        declared: &[SemaphoreConfig],
        pool: Option<(usize, SemaphoreConfig)>,
        queues: usize,
    ) -> Result<SemaphoreTable, (usize, SlotCountError)> {
        let pooled = pool.map_or(0, |(count, _)| count);
        let pool_configs =
            pool.into_iter().flat_map(|(count, config)| std::iter::repeat_n(config, count));
        let configs = declared.iter().copied().chain(pool_configs);
        let mut semaphores = Vec::with_capacity(declared.len() + pooled);
        for (index, config) in configs.enumerate() {
            let slots = vec![HistoryEntry::BLANK; config.history].into_boxed_slice();
            let semaphore = Semaphore::with_slots(slots, config.initial, config.scope, config.home)
                .map_err(|error| (index, error))?;
            semaphores.push(semaphore);
        }
        // Declared semaphores are live from the start (odd word); pooled slots start free.
        let generations = (0..declared.len() + pooled)
            .map(|index| AtomicU32::new(u32::from(index < declared.len())))
            .collect();
        let pool_start = declared.len();
        Ok(SemaphoreTable {
            tag,
            semaphores: semaphores.into_boxed_slice(),
            generations,
            pool_start,
            queues,
            pool: Mutex::new(PoolState {
                free: (pool_start as u32..(pool_start + pooled) as u32).rev().collect(),
                retiring: VecDeque::with_capacity(pooled),
                submitted_before: vec![0; pooled * queues].into_boxed_slice(),
            }),
        })
    }

    /// The ID of declared semaphore `index` of the device tagged `tag`.
    pub(crate) fn declared(tag: DeviceTag, index: usize) -> SemaphoreId {
        SemaphoreId::new(tag, index as u32, 1)
    }

    /// Slots in all (declared and pooled).
    pub(crate) fn len(&self) -> usize {
        self.semaphores.len()
    }

    /// Pooled slots.
    pub(crate) fn pooled(&self) -> usize {
        self.semaphores.len() - self.pool_start
    }

    /// Whether `id` names a live semaphore.
    pub(crate) fn is_live(&self, id: SemaphoreId) -> bool {
        // Acquire pairs with the Release increment in `create`: the reset state is visible.
        id.is_of(self.tag)
            && self
                .generations
                .get(id.index())
                .is_some_and(|word| word.load(Ordering::Acquire) == id.generation())
    }

    /// The live semaphore `id` names.
    pub(crate) fn get(&self, id: SemaphoreId) -> Option<&DeviceSemaphore> {
        self.is_live(id).then(|| &self.semaphores[id.index()])
    }

    fn lock_pool(&self) -> MutexGuard<'_, PoolState> {
        // Every update of the pool state is complete before anything that could panic.
        self.pool.lock()
    }

    /// Takes a free or reclaimable pooled slot and starts it at `initial`.
    pub(crate) fn create(
        &self,
        initial: u64,
        queues: &[QueueShared],
    ) -> Result<SemaphoreId, SemaphoreError> {
        let mut pool = self.lock_pool();
        let index = match pool.free.pop() {
            Some(index) => Some(index),
            None => self.reclaim(&mut pool, queues),
        };
        let Some(index) = index else {
            return Err(SemaphoreError::Full(Resource::Semaphores { capacity: self.pooled() }));
        };
        let semaphore = &self.semaphores[index as usize];
        if semaphore.reset(initial).is_err() {
            // A host thread armed a wait through a stale reference since the check: keep the
            // slot for later.
            pool.retiring.push_front(index);
            return Err(SemaphoreError::Full(Resource::Semaphores { capacity: self.pooled() }));
        }
        let word = &self.generations[index as usize];
        // Release pairs with the Acquire load in `is_live`: the reset is visible to whoever
        // sees the new generation.
        let generation = word.fetch_add(1, Ordering::Release) + 1;
        Ok(SemaphoreId::new(self.tag, index, generation))
    }

    /// The first retiring slot every operation before whose destruction has retired, taken
    /// out of the retiring list.
    fn reclaim(&self, pool: &mut PoolState, queues: &[QueueShared]) -> Option<u32> {
        let position = pool
            .retiring
            .iter()
            .position(|&index| matches!(self.blocker(pool, index, queues), Blocker::Reclaimable))?;
        pool.retiring.remove(position)
    }

    fn blocker(&self, pool: &PoolState, index: u32, queues: &[QueueShared]) -> Blocker {
        let base = (index as usize - self.pool_start) * self.queues;
        for (queue, &submitted) in
            pool.submitted_before[base..base + self.queues].iter().enumerate()
        {
            if queues[queue].retired() < submitted {
                return Blocker::Queue { queue, submitted };
            }
        }
        if self.semaphores[index as usize].has_waiters() {
            return Blocker::HostWaiter;
        }
        Blocker::Reclaimable
    }

    /// What the oldest retiring slot waits for (a creation that found the pool full waits
    /// for that, then tries again).
    pub(crate) fn oldest_blocker(&self, queues: &[QueueShared]) -> Blocker {
        let pool = self.lock_pool();
        match pool.retiring.front() {
            Some(&index) => self.blocker(&pool, index, queues),
            None => Blocker::NothingRetiring,
        }
    }

    /// Destroys pooled semaphore `id`: new submissions naming it are refused; its slot is
    /// reclaimed once everything submitted before now has retired.
    pub(crate) fn destroy(
        &self,
        id: SemaphoreId,
        queues: &[QueueShared],
    ) -> Result<(), SemaphoreError> {
        if !id.is_of(self.tag) {
            return Err(SemaphoreError::Unknown(id));
        }
        if id.index() < self.pool_start {
            return Err(SemaphoreError::NotPooled(id));
        }
        let word = self.generations.get(id.index()).ok_or(SemaphoreError::Unknown(id))?;
        // AcqRel: Release orders the death before the snapshots below; a submitter that reads
        // the word under its queue's submit lock after the snapshot took that lock sees it.
        word.compare_exchange(
            id.generation(),
            id.generation() + 1,
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .map_err(|_| SemaphoreError::Unknown(id))?;
        // Each queue's submitted count, read under its submit lock: a submission that checked
        // the generation before the death holds that lock until it has published its
        // operation, so it is counted here. (No path takes the pool lock inside a submit lock.)
        let mut pool = self.lock_pool();
        let base = (id.index() - self.pool_start) * self.queues;
        for (queue, shared) in queues.iter().enumerate() {
            pool.submitted_before[base + queue] = shared.submitted_under_lock();
        }
        pool.retiring.push_back(id.index() as u32);
        Ok(())
    }
}

impl Index<SemaphoreId> for SemaphoreTable {
    type Output = DeviceSemaphore;

    /// The semaphore in `id`'s slot, live or not: for operations that validated the ID when
    /// they were submitted (a destroyed semaphore keeps working for them).
    fn index(&self, id: SemaphoreId) -> &DeviceSemaphore {
        &self.semaphores[id.index()]
    }
}

impl fmt::Debug for SemaphoreTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphoreTable")
            .field("declared", &self.pool_start)
            .field("pooled", &self.pooled())
            .finish_non_exhaustive()
    }
}

// Not under loom: the table's generations and core's semaphores are loom's atomics there, which
// work only inside `loom::model`.
#[cfg(all(test, not(loom)))]
mod tests {
    use causeway_core::scope::{Endpoint, Scope};

    use super::*;

    const HOME: Endpoint =
        Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

    /// A table of one pooled slot and no queues: nothing but host waiters can hold a slot.
    fn one_slot() -> SemaphoreTable {
        let config = SemaphoreConfig::new(0, Scope::DeviceLocal, HOME);
        SemaphoreTable::new(DeviceTag::next(), &[], Some((1, config)), 0).unwrap()
    }

    #[test]
    fn a_full_pool_with_nothing_retiring_says_so() {
        let table = one_slot();
        table.create(0, &[]).unwrap();
        assert!(matches!(table.create(0, &[]), Err(SemaphoreError::Full(_))));
        assert!(matches!(table.oldest_blocker(&[]), Blocker::NothingRetiring));
    }

    /// A creation that found the slot still held looks again at the oldest blocker; if the
    /// slot was freed in between, that look must say so rather than "nothing is retiring".
    #[test]
    fn a_retiring_slot_freed_between_two_looks_is_reclaimable_not_absent() {
        let table = one_slot();
        let id = table.create(0, &[]).unwrap();
        table.destroy(id, &[]).unwrap();
        assert!(matches!(table.oldest_blocker(&[]), Blocker::Reclaimable));
        let again = table.create(5, &[]).unwrap();
        assert_eq!(again.index(), id.index());
        assert!(table.is_live(again) && !table.is_live(id));
    }
}

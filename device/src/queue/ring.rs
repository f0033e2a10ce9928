//! The ring's indices: publication by submitters, freeing a retired slot (`free_head`, the
//! last step of the queue process's `retire` in `device::process`), and a submitter waiting for
//! room (the protocol is in the parent module's docs).
//!
//! # Waiting for a free slot
//!
//! A submitter that finds the ring full ([`QueueShared::wait_for_slot`]) first watches `head`
//! for [`SLOT_WATCH`], about what a sleep and a wake cost: at the ring limit the next
//! retirement is usually microseconds away, and seeing it costs loads only. Sleeping at once
//! cost a sleep, a wake and a barrier per operation. Measured on a 2-core VM with host
//! operations through a ring of 8:
//!
//! | operation | sleeping at once | watching first |
//! |---|---|---|
//! | 200 ns | 4.1–5.0 µs each | 0.36 µs |
//! | 2 µs | 4.9–5.2 µs | 2.2 µs |
//! | 20 µs | 26.1 µs | 22.6–23.2 µs |
//!
//! If no retirement comes, it counts itself in `slot_waiters` and sleeps on a condition
//! variable; `free_head` wakes it. The two sides are a
//! store/load pair on different words — the submitter increments `slot_waiters` then reads
//! `head`, the queue process stores `head` then reads `slot_waiters` — so each side needs a
//! store → load barrier between its two accesses, and then either the submitter sees the freed
//! slot or the queue process sees the waiter. Its wake-up takes the condition variable's
//! mutex, under which the submitter checks before sleeping, so the wake cannot fall between a
//! check and the sleep.
//!
//! The queue process retires every operation and a submitter waits rarely, so the pair is
//! asymmetric (`causeway_runtime::barrier`): the queue process's barrier is a compiler barrier
//! only, the waiter's makes every thread of the process execute a full one (`membarrier` on
//! Linux; both are `SeqCst` fences where that is not available). A locked instruction here
//! cost the signal → dependent start path 7–8 ns of its ~125 (it waits for every store before
//! it to reach the cache). The queue process pays, with nobody waiting, one load.

use std::time::{Duration, Instant};

use super::slot::OpBody;
use super::QueueShared;
use crate::sync::atomic::Ordering;
use crate::sync::barrier;

/// How long a submitter waiting for a retirement watches `head` before it sleeps (see
/// "Waiting for a free slot").
const SLOT_WATCH: Duration = Duration::from_micros(5);

/// Spin hints between two looks at the clock while watching `head`.
const SPINS_PER_LOOK: u32 = 16;

impl QueueShared {
    /// Index of the next slot to fill, if one is free. Called with the submit lock held.
    pub(crate) fn free_slot(&self) -> Option<u64> {
        let tail = self.tail.load(Ordering::Relaxed);
        // Acquire pairs with the Release store of `head` in `free_head`: the queue process is
        // done with the slot being reused.
        let head = self.head.load(Ordering::Acquire);
        (tail - head < self.capacity as u64).then_some(tail)
    }

    /// Blocks until a slot may be free (then the caller tries again) or `deadline` passes
    /// (`false`). Called without the submit lock.
    pub(crate) fn wait_for_slot(&self, deadline: Option<Instant>) -> bool {
        let capacity = self.capacity as u64;
        self.wait_for_retire(|head, tail| tail - head < capacity, deadline)
    }

    /// Blocks until the queue has retired `count` operations or `deadline` passes (`false`).
    pub(crate) fn wait_for_retired(&self, count: u64, deadline: Option<Instant>) -> bool {
        self.wait_for_retire(|head, _| head >= count, deadline)
    }

    /// Blocks until `done(head, tail)` holds — watching for [`SLOT_WATCH`], then re-checking at
    /// every retirement — or until `deadline` passes (`false`).
    fn wait_for_retire(&self, done: impl Fn(u64, u64) -> bool, deadline: Option<Instant>) -> bool {
        // Acquire (here and below) pairs with the Release store of `head` in `free_head`: what the retired
        // operations did is visible to the caller.
        let holds = || done(self.head.load(Ordering::Acquire), self.tail.load(Ordering::Relaxed));
        let watching = Instant::now();
        loop {
            if holds() {
                return true;
            }
            for _ in 0..SPINS_PER_LOOK {
                std::hint::spin_loop();
            }
            if watching.elapsed() >= SLOT_WATCH {
                break;
            }
        }
        self.slot_waiters.fetch_add(1, Ordering::Relaxed);
        // The rare side of the store → load pair with `free_head` (module docs, "Waiting for a
        // free slot"); pairs with its light barrier.
        barrier::heavy();
        let mut guard = self.slot_lock.lock();
        let reached = loop {
            if holds() {
                break true;
            }
            guard = match deadline {
                None => self.slot_freed.wait(guard),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    self.slot_freed.wait_timeout(guard, deadline - now).0
                }
            };
        };
        drop(guard);
        self.slot_waiters.fetch_sub(1, Ordering::Relaxed);
        reached
    }

    /// Operations retired so far.
    pub(crate) fn retired(&self) -> u64 {
        // Acquire pairs with the store in `free_head`: whatever the retired operations did is
        // visible to the caller's decision.
        self.head.load(Ordering::Acquire)
    }

    /// Operations submitted so far, read under the submit lock: a submission in progress is
    /// either counted or has not checked its semaphores yet.
    pub(crate) fn submitted_under_lock(&self) -> u64 {
        let _side = self.lock_submit();
        self.tail.load(Ordering::Relaxed)
    }

    /// Whether operation `epoch` of this queue has been submitted here (see
    /// `DeviceShared::submitter_of`). Relaxed: a submission still being published reads as not
    /// yet, which only holds a wait the layer could have left native.
    pub(crate) fn has_submitted(&self, epoch: u64) -> bool {
        self.tail.load(Ordering::Relaxed) >= epoch
    }

    /// Makes slot `index` (filled under the submit lock) visible to the queue process.
    pub(crate) fn publish(&self, index: u64) {
        // Release pairs with the Acquire load of `tail` in `drain`: the body written before it
        // is visible to the queue process.
        self.tail.store(index + 1, Ordering::Release);
    }

    /// Operations submitted and not yet retired.
    pub(crate) fn in_flight(&self) -> u64 {
        // Acquire pairs with the Release store in `free_head`.
        let head = self.head.load(Ordering::Acquire);
        self.tail.load(Ordering::Acquire) - head
    }

    /// Epoch of the last retired operation.
    pub(crate) fn completed_epoch(&self) -> u64 {
        // Acquire pairs with the Release store in `retire`: effects of the retired operations
        // (their work) happened before whatever the caller decides from this.
        self.completed.load(Ordering::Acquire)
    }

    /// Frees the head's slot once its operation has ended and `completed` reached it (the
    /// queue process's `retire`, in `device::process`): moves the issue cursor past it, clears
    /// the body and hands the slot back to submitters, waking one that waits for room.
    pub(crate) fn free_head(&self, head: u64, body: &mut OpBody) {
        if self.cursor.load(Ordering::Relaxed) == head {
            self.cursor.store(head + 1, Ordering::Relaxed);
        }
        body.allocation = None;
        body.issued = None;
        body.issued_status = None;
        // Release pairs with the Acquire load in `free_slot`: every access to the body above
        // happens before the submitter reuses the slot.
        self.head.store(head + 1, Ordering::Release);
        // The frequent side of the store → load pair with `wait_for_retire` (module docs,
        // "Waiting for a free slot"); pairs with its heavy barrier.
        barrier::light();
        if self.slot_waiters.load(Ordering::Relaxed) != 0 {
            // Under the mutex the waiter checks under, so the wake cannot slip between its
            // check and its sleep.
            let _guard = self.slot_lock.lock();
            self.slot_freed.notify_all();
        }
    }
}

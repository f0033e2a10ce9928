//! The ring's indices: publication by submitters, freeing a retired slot (`free_head`, the
//! last step of the queue process's `retire` in `device::process`), and a submitter waiting for
//! room (the ring protocol is in the parent module's docs, the sleep and wake in
//! `head_waiters`).
//!
//! # Waiting for a free slot
//!
//! A submitter that finds the ring full ([`QueueShared::wait_for_slot`]) waits for a *refill*:
//! until [`QueueShared::refill`] slots (half the ring) are free, not one. Waiting for one slot
//! made a submitter that runs ahead of its queue take its slots one retirement at a time, each
//! paid with a wait — a spin of up to [`SLOT_WATCH`] or a sleep and a wake — on a core the
//! queue's own work could use (400 operations of 20 µs through a ring of 16: 383 sleeps; 47
//! with the refill). Through Task Bench's stencil on two cores the queues' METG fell from 2.35
//! to 2.05 µs. Waiting for half the ring costs one wait per half ring, and the queue still has
//! half a ring queued when the submitter comes back, so it never runs dry for it.
//!
//! The wait first watches `head` for [`SLOT_WATCH`], about what a sleep and a wake cost: a
//! small ring's refill often comes within microseconds, and seeing it costs loads only.
//! Otherwise it sleeps until `head` reaches a *wake point*, woken by the queue process when it
//! does (the protocol is `head_waiters`'):
//!
//! ```text
//!            ring full                      one slot free               refill free
//! watching ────────────▶ sleeping, woken at ─────────────▶ sleeping, woken at ─────────▶ done
//!   │ refill seen          the first free slot             the refill, or after
//!   ▼                                                      SLOT_NAP: done with
//! done                                                     whatever room there is
//! ```
//!
//! The nap bounds the wait for a refill that may never come: the operations behind the first
//! retired one may wait for a signal only this submitter gives, after this submission (a
//! single slot was all it needed). A submitter sleeping with no free slot is woken only by the
//! first one, however long the operations run, so a slow queue costs a sleep per slot at most,
//! as before. [`QueueShared::wait_for_retired`] sleeps the same way, woken at the count it
//! waits for.

use std::time::{Duration, Instant};

use super::head_waiters::Sleep;
use super::slot::OpBody;
use super::QueueShared;
use crate::sync::atomic::Ordering;

/// How long a submitter waiting for a retirement watches `head` before it sleeps (see
/// "Waiting for a free slot").
const SLOT_WATCH: Duration = Duration::from_micros(5);

/// Spin hints between two looks at the clock while watching `head`.
const SPINS_PER_LOOK: u32 = 16;

/// How long a submitter that has a free slot sleeps on for the rest of its refill (see
/// "Waiting for a free slot"): long beside a refill of short operations (a half ring of
/// microsecond operations takes some hundred microseconds), short beside the wait it ends
/// when the refill cannot come.
const SLOT_NAP: Duration = Duration::from_millis(1);

impl QueueShared {
    /// Index of the next slot to fill, if one is free. Called with the submit lock held.
    pub(crate) fn free_slot(&self) -> Option<u64> {
        let tail = self.tail.load(Ordering::Relaxed);
        // Acquire pairs with the Release store of `head` in `free_head`: the queue process is
        // done with the slot being reused.
        let head = self.head.load(Ordering::Acquire);
        (tail - head < self.capacity as u64).then_some(tail)
    }

    /// Slots a submitter that found the ring full waits to see free (see "Waiting for a free
    /// slot"): half the ring, rounded up.
    pub(crate) fn refill(&self) -> u64 {
        (self.capacity as u64).div_ceil(2)
    }

    /// Blocks until a slot may be free (then the caller tries again) or `deadline` passes
    /// (`false`): until [`refill`](Self::refill) slots are, or one is and the refill does not
    /// come within [`SLOT_NAP`]. Called without the submit lock.
    pub(crate) fn wait_for_slot(&self, deadline: Option<Instant>) -> bool {
        let capacity = self.capacity as u64;
        let refill = self.refill();
        // Relaxed `tail`: other submitters may move it at any time, so any reading is as good
        // a hint; the caller's retry under the submit lock decides.
        let refilled = |head: u64, tail: u64| tail - head <= capacity - refill;
        if self.watch(refilled) {
            return true;
        }
        self.room_sleeps.fetch_add(1, Ordering::Relaxed);
        let mut nap_end = None;
        self.head_waiters.sleep(
            || self.indices(),
            |head, tail, now| {
                if refilled(head, tail) {
                    return Sleep::Over(true);
                }
                let room = tail - head < capacity;
                if room && nap_end.is_none() {
                    nap_end = now.checked_add(SLOT_NAP);
                }
                let end = match (deadline, nap_end) {
                    (Some(deadline), Some(nap)) => Some(deadline.min(nap)),
                    (deadline, nap) => deadline.or(nap),
                };
                if end.is_some_and(|end| now >= end) {
                    return Sleep::Over(room);
                }
                // The first free slot, then the refill: `tail + k - capacity` is the head at which
                // `k` slots are free (no underflow: the ring is not refilled, so `tail - head`
                // exceeds `capacity - refill`).
                let wanted = if room { refill } else { 1 };
                Sleep::Until { head: tail + wanted - capacity, at: end }
            },
        )
    }

    /// Blocks until the queue has retired `count` operations or `deadline` passes (`false`).
    pub(crate) fn wait_for_retired(&self, count: u64, deadline: Option<Instant>) -> bool {
        if self.watch(|head, _| head >= count) {
            return true;
        }
        self.head_waiters.sleep(
            || self.indices(),
            |head, _, now| {
                if head >= count {
                    Sleep::Over(true)
                } else if deadline.is_some_and(|deadline| now >= deadline) {
                    Sleep::Over(false)
                } else {
                    Sleep::Until { head: count, at: deadline }
                }
            },
        )
    }

    /// Reads `head` and `tail`.
    fn indices(&self) -> (u64, u64) {
        // Acquire pairs with the Release store of `head` in `free_head`: what the retired
        // operations did is visible to the caller.
        (self.head.load(Ordering::Acquire), self.tail.load(Ordering::Relaxed))
    }

    /// Watches `head` for [`SLOT_WATCH`]: whether `done(head, tail)` came to hold.
    fn watch(&self, done: impl Fn(u64, u64) -> bool) -> bool {
        let watching = Instant::now();
        loop {
            let (head, tail) = self.indices();
            if done(head, tail) {
                return true;
            }
            for _ in 0..SPINS_PER_LOOK {
                std::hint::spin_loop();
            }
            if watching.elapsed() >= SLOT_WATCH {
                return false;
            }
        }
    }

    /// Times a submission slept for room in this queue's ring (see "Waiting for a free slot").
    pub(crate) fn room_sleeps(&self) -> u64 {
        self.room_sleeps.load(Ordering::Relaxed)
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
        self.head_waiters.advanced(head + 1);
    }
}

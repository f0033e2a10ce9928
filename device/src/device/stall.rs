//! Whether a waiting submission would wait forever.
//!
//! [`Device::submit`] waits for room when a bounded resource is full: a queue's ring, or a
//! signalled semaphore's history. Room frees when an operation ends — the ring's head, or the
//! one whose signal is the oldest pending in the history. If that operation cannot end until
//! someone submits more work, and the submitter is the one who would, the wait never ends:
//! the natural first loop of a pipeline, every stage's loads submitted before any consumer,
//! would hang at the first full history or ring once the loads wait for buffers that only the
//! consumers hand back.
//!
//! Once a short wait (a millisecond: room usually frees within microseconds) found no room,
//! `submit` follows what the room waits for through the work already submitted
//! ([`Device::stalled`] runs the same walk for a caller of `try_submit`):
//!
//! - the room's operation, at point `(queue, epoch)`, ends only after every earlier operation
//!   of its queue, so each unretired one up to it is visited (once per walk: a queue is
//!   visited through the highest epoch reached so far);
//! - each of their waits on `S ≥ v` is ended by the first signal recorded at or above `v` in
//!   `S`'s history: a pending one of this device's operations is followed to that operation's
//!   point (a failed or cancelled one too: the wait ends when its operation does); one that
//!   was reached, whose operation has ended, that is external, or that is still reserved
//!   (being submitted right now) ends the wait without more work, as far as this device can
//!   tell;
//! - a wait that no recorded signal covers, on a semaphore only this device signals
//!   ([`Scope::QueueLocal`] or [`Scope::DeviceLocal`]), can only end through a submission not
//!   made yet: the submission stops with [`SubmitError::Stalled`], naming that wait.
//!
//! Operations claimed as cancelled, and those accepted doomed, end without their waits (their
//! recorded waits are empty, or skipped). The walk reads each queue's lineage under its submit
//! lock, as a cancellation does, and each semaphore's history under its own lock, the order a
//! submission takes them in. It runs only when a waiting submission found a resource full
//! and a short wait did not free it, visits each operation in flight at most once, and
//! allocates nothing: its table of how far each queue was visited is the device's, made when
//! it was built. Once it finds no stall, the submission waits without looking again: work
//! already submitted that does not wait for an unsubmitted signal ends (or fails) by itself.
//!
//! What the walk sees is what has been submitted when it runs: a signal another thread is
//! about to submit or give is not seen. A program whose threads feed each other's waits
//! submits with [`Device::submit_timeout`], which waits for room whoever frees it.

use std::ops::Range;

use causeway_core::frontier::Point;
use causeway_core::scope::Scope;

use super::shared::StallCursor;
use super::Device;
use crate::error::{Resource, Stall};
use crate::ids::{QueueId, SemaphoreId};
use crate::op::Op;
use crate::queue::QueueShared;
use crate::sync::atomic::Ordering;
#[cfg(doc)]
use crate::SubmitError;

/// Where one wait's end comes from, as far as the work submitted so far says.
enum WaitEnd {
    /// From this device's operation at the point: it ends when that one does.
    Operation(Point),
    /// From nothing submitted yet: only a new submission (or a host's signal) can end it.
    Unsignalled,
    /// Already decided, or up to someone this device cannot see.
    Elsewhere,
}

impl Device {
    /// The wait that keeps `resource`, full for `op` on `queue`, from ever having room
    /// without another submission; `None` when the work already submitted frees it (or may,
    /// as far as this device can tell). See the [module documentation](self).
    pub(super) fn stall(&self, queue: QueueId, op: &Op<'_>, resource: Resource) -> Option<Stall> {
        let shared = self.shared();
        let room = match resource {
            // The head's retirement frees a slot.
            Resource::QueueSlots { .. } => {
                let queue = shared.queue(queue)?;
                // Acquire pairs with the Release store of `head` in `free_head`, as in
                // `free_slot`; the one of `tail`, with the Release store in `publish`.
                let head = queue.head.load(Ordering::Acquire);
                if head >= queue.tail.load(Ordering::Acquire) {
                    return None;
                }
                Point::new(queue.submit_axis(), head + 1)
            }
            // The oldest pending signal's completion frees a history slot.
            Resource::History { signal, .. } => {
                let &(id, _) = op.signals.get(signal)?;
                let value = shared.semaphores[id].room_at()?;
                match self.wait_end(id, value) {
                    WaitEnd::Operation(point) => point,
                    WaitEnd::Unsignalled | WaitEnd::Elsewhere => return None,
                }
            }
            Resource::AllocationRecords { .. } | Resource::Semaphores { .. } => return None,
        };
        let room_queue = shared.submitter_of(room)?;
        // Per queue, the highest epoch whose operations (and their waits) have been visited,
        // and the highest one they must be: each operation in flight is visited at most once.
        let mut walk = shared.stall_walk.lock();
        walk.fill(StallCursor::default());
        walk[room_queue.index].wanted = room.epoch;
        loop {
            let mut visited_any = false;
            for owner in shared.queues.iter() {
                let StallCursor { visited, wanted } = walk[owner.index];
                if wanted <= visited {
                    continue;
                }
                walk[owner.index].visited = wanted;
                visited_any = true;
                if let Some(stall) = self.visit(owner, visited..wanted, resource, &mut walk[..]) {
                    return Some(stall);
                }
            }
            if !visited_any {
                return None;
            }
        }
    }

    /// Visits the operations of `owner` with epochs in `(epochs.start, epochs.end]` that have
    /// not retired: the wait among theirs that nothing submitted ends, or `None` after marking
    /// in `walk` the operations the others wait for.
    fn visit(
        &self,
        owner: &QueueShared,
        epochs: Range<u64>,
        resource: Resource,
        walk: &mut [StallCursor],
    ) -> Option<Stall> {
        let shared = self.shared();
        // Held for the visit, as a cancellation holds it: no slot from the head on is refilled
        // meanwhile, so each lineage read stays the one published.
        let _side = owner.lock_submit();
        // Acquire pairs with the Release store of `head` in `free_head`: the operations below
        // it have ended.
        let head = owner.head.load(Ordering::Acquire);
        // Written only under the submit lock, which this thread holds.
        let tail = owner.tail.load(Ordering::Relaxed);
        // Operation index `i` has epoch `i + 1`.
        for index in epochs.start.max(head)..epochs.end.min(tail) {
            if owner.claim(index).cancelled().is_some() {
                continue;
            }
            // SAFETY: the submit lock is held and `index` is in [head, tail) (published).
            let waits = unsafe { owner.lineage_waits(index).read() };
            for &(semaphore, value) in &waits.waits {
                match self.wait_end(semaphore, value) {
                    WaitEnd::Operation(origin) => {
                        // Another participant's operation (a host step, a rank) may end
                        // without this device.
                        if let Some(origin_queue) = shared.submitter_of(origin) {
                            let wanted = &mut walk[origin_queue.index].wanted;
                            *wanted = (*wanted).max(origin.epoch);
                        }
                    }
                    WaitEnd::Unsignalled => {
                        return Some(Stall {
                            resource,
                            queue: owner.id,
                            tag: waits.tag,
                            semaphore,
                            value,
                        });
                    }
                    WaitEnd::Elsewhere => {}
                }
            }
        }
        None
    }

    /// What ends a wait on `semaphore ≥ value`, from its history (see [`WaitEnd`]).
    fn wait_end(&self, semaphore: SemaphoreId, value: u64) -> WaitEnd {
        let semaphore = &self.shared().semaphores[semaphore];
        if semaphore.value() >= value {
            return WaitEnd::Elsewhere;
        }
        let local = matches!(semaphore.scope(), Scope::QueueLocal | Scope::DeviceLocal);
        let failed = semaphore.failure().is_some();
        semaphore.with_history(|history| {
            match history.iter().find(|entry| entry.value >= value) {
                // Reached, or ended without reaching it (the wait fails), or being submitted.
                Some(entry) if entry.reached || entry.ended || entry.reserved => WaitEnd::Elsewhere,
                Some(entry) => entry.origin.map_or(WaitEnd::Elsewhere, WaitEnd::Operation),
                // A failed timeline ends every wait no live signal covers.
                None if local && !failed => WaitEnd::Unsignalled,
                None => WaitEnd::Elsewhere,
            }
        })
    }
}

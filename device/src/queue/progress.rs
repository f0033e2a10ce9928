//! A queue's progress as other queues' native device waits see it (`device::process::issue`
//! and `mirror`): the last operation issued to the driver or retired, started, or retired —
//! and the queues waiting for it to move, woken under `issue_waiters` by whoever moves it.

use super::QueueShared;
use crate::ids::QueueId;
use crate::sync::atomic::{AtomicU64, Ordering};

impl QueueShared {
    /// Whether operation `epoch` of this queue has retired; if not, `waiter` is registered to
    /// be woken when more is issued or retired.
    pub(crate) fn has_retired_or_waits(&self, epoch: u64, waiter: QueueId) -> bool {
        // `completed` is stored (Release, in `retire`) before `advance_issued` wakes.
        self.reached_or_waits(&self.completed, epoch, waiter)
    }

    /// Whether operation `epoch` of this queue has been issued to the driver or retired; if
    /// not, `waiter` is registered to be woken when more is.
    pub(crate) fn has_issued_or_waits(&self, epoch: u64, waiter: QueueId) -> bool {
        self.reached_or_waits(&self.issued_through, epoch, waiter)
    }

    /// Whether `progress` (an epoch `advance_issued` wakes waiters after storing) has reached
    /// `epoch`; if not, `waiter` is registered with `issue_waiters`.
    fn reached_or_waits(&self, progress: &AtomicU64, epoch: u64, waiter: QueueId) -> bool {
        // Acquire pairs with the Release store of `progress` (in `advance_issued` or `retire`):
        // an operation issued from what it reads waits on work already handed to the driver.
        if progress.load(Ordering::Acquire) >= epoch {
            return true;
        }
        let mut waiters = self.issue_waiters.lock();
        waiters.register(waiter);
        // Re-read under the lock (see `advance_issued`); a registration that turns out
        // needless costs one spurious wake.
        progress.load(Ordering::Acquire) >= epoch
    }

    /// Whether operation `epoch` of this (mirrored) queue has started or ended; if not,
    /// `waiter` is registered to be woken when it starts, or at the latest when it ends (see
    /// "Issued once the origin has started").
    pub(crate) fn has_started_or_waits(&self, epoch: u64, waiter: QueueId) -> bool {
        let reached = || {
            // Relaxed for `started` (see `claim_run`); Acquire for `completed` pairs with the
            // Release store in `retire`: an origin that ended failed its signals before, and
            // the waiter's issue sees the failure (`issue`).
            self.mirrors.started.load(Ordering::Relaxed) >= epoch
                || self.completed.load(Ordering::Acquire) >= epoch
        };
        if reached() {
            return true;
        }
        let mut waiters = self.issue_waiters.lock();
        waiters.register(waiter);
        // Re-read under the lock (see `wake_started`; a retirement wakes under it after
        // storing `completed`: `move_mirrors`, or `advance_issued` on a native queue).
        reached()
    }
}

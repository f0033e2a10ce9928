//! Mirrors of a queue's progress, written by the host for drivers that wait natively on them
//! (`BackendCapabilities::host_written_waits`).
//!
//! # Host-written waits
//!
//! A driver with host-written waits waits natively on an operation of another driver's queue
//! (the *origin queue*: a CPU queue, say) by waiting on a word of its own that mirrors the
//! origin queue's progress — the epoch of its last ended operation. The layer keeps the word
//! moving: each time an operation of the origin queue ends it has each mirroring driver write
//! it (`Backend::mirror_progress`). A native wait on `mirror ≥ e` is then released exactly when
//! operation `e` of the origin queue has ended, however it ended:
//!
//! - **retired** by the queue process (completed, failed, cancelled by speculation, failed as
//!   lost on a queue whose driver broke the contract): in `retire`, after `completed` passes
//!   it;
//! - **ended at shutdown** (cancelled, or aborted while running): by the device, once it has
//!   taken the ring over (`tear_down`). A queue whose bookkeeping never gives the ring up
//!   (`Teardown::Busy`) ends nothing more, so neither its operations nor its mirrors move; the
//!   device then keeps its state alive, and the waiting driver's `stop` decides for its own
//!   work as for any wait that never ends.
//!
//! Every submitted operation ends in one of these ways, in queue order, so the mirror passes
//! every origin a native wait can name, and a native wait on it cannot hang.
//!
//! # Issued once the origin has started
//!
//! A native wait on another driver's operation is issued once that operation has *started*:
//! claimed as running on its queue (its run claim won, `RunClaim::start`), or ended. Not
//! earlier, though the mirror alone would allow it as soon as the origin is submitted: an
//! origin that has not started may still be cancelled by speculation, and so may the work
//! that depends on it — but not once the dependent is with the driver (it then ends failed
//! with the origin instead of cancelled). Once the origin has started nothing can cancel it,
//! and the waiter goes to the driver while the origin runs, so the driver starts it as soon
//! as the mirror moves, without the host's round trip a held wait takes. An origin that fails or is
//! cancelled before it starts publishes no start: the waiter is issued only after the origin
//! has ended, sees the failure (`finish` fails the signals before `retire`) and ends failed or
//! cancelled without having been issued. Failing counts as starting for the run claim but is
//! not published as one, for that reason.
//!
//! A queue records each start that won in `started` (`claim_run`); a waiter reads `started`
//! and `completed` (`has_started_or_waits`) and, when neither has reached its origin,
//! registers with the queue's `issue_waiters` and reads again under that lock. A queue wakes
//! them after a start only once some driver is registered with it: a store → load pair on two
//! words, as for retirement (see "Registration" below):
//!
//! ```text
//!   registrar (rare)                        queue process, starting operation e (every op)
//!   drivers |= bit            (store A)     claim won; started = e                (store C)
//!   barrier::heavy()                        barrier::light()  (in `claim_run`)
//!   read started              (load C)      drivers != 0?                         (load A)
//!   ...                                     yes: lock issue_waiters; wake all
//!   waiter (submitted after):
//!   lock issue_waiters; register; started ≥ e or completed ≥ e?  no: sleep until woken
//! ```
//!
//! No wake-up is lost. If the queue process sees the bit, it stored `started` before taking
//! the lock the waiter registers and re-reads under, so either the waiter reads `e` or it is
//! registered before the wake. If it does not, the registrar's read after its heavy barrier
//! sees `e`, and the waiter, whose submission came after the registration, reads the word
//! later still and sees `e` too. Either way a waiter whose origin has not started when it
//! looks is woken at the start, or at the latest at the origin's end (retirement wakes
//! `issue_waiters` after storing `completed`; at shutdown no queue waits on anything). No
//! reordering or cycle comes of it: a cycle through such a wait would be a cycle in the
//! program's own order (each queue runs in order), which no layer could run.
//!
//! Only what the mirror word orders is native: whether the origin succeeded reaches the waiter
//! through the layer, which retires a native waiter only after its origins have retired
//! (`completed`, watched through `issue_waiters`) and fails it when one failed.
//!
//! # Registration
//!
//! A queue pays the writes only once some operation waits on it natively: the submission that
//! resolves such a wait first registers the waiting driver (`mirrored_for`). Registration and
//! retirement race; they are a store → load pair on two words:
//!
//! ```text
//!   registrar (rare)                        queue process, retiring operation e (every op)
//!   drivers |= bit            (store A)     completed = e                         (store B)
//!   barrier::heavy()                        barrier::light()  (the one in `retire`)
//!   ended = completed         (load B)      drivers & bit?                        (load A)
//!   write mirror ← ended                    yes: write mirror ← e
//!   ready |= bit (Release)
//! ```
//!
//! With the asymmetric barrier (`crate::sync::barrier`) either the queue process sees the
//! bit and writes `e`, or the registrar's load sees `e` and writes at least `e`: no ending is
//! missed. Both write under `written`, which keeps each driver's writes in increasing order and
//! never concurrent, so the driver's write may be a plain store. Other registrars take the
//! fast path only once `ready` has the bit (Acquire, pairing with the registrar's Release):
//! what the first registrar read of `completed` then happens before their submissions, so a
//! waiter that checks `completed` for an ending the queue process did not wake it for (it had
//! not seen the bit) reads it. A non-native origin queue gets its `issue_waiters` room at
//! registration, so from then on its retirements wake native waiters as a native queue's do.

use causeway_core::speculation::Dependence;
use causeway_runtime::contain::contain;

use crate::backend::QueueWaiters;
use crate::device::DeviceShared;
use crate::error::{DriverCall, DriverFault, Violation};
use crate::queue::run_claim::RunClaim;
use crate::queue::QueueShared;
use crate::sync::atomic::Ordering;
use crate::sync::barrier;

/// Drivers a queue's progress can be mirrored for: one bit each.
const MIRRORED_DRIVERS: usize = u64::BITS as usize;

impl QueueShared {
    /// Whether driver `driver` (with host-written waits) may wait natively on this queue's
    /// operations: registers it on first use (see "Registration"); `false` only when the
    /// driver cannot be told apart here (more drivers than [`MIRRORED_DRIVERS`]).
    pub(crate) fn mirrored_for(&self, device: &'static DeviceShared, driver: usize) -> bool {
        let Some(bit) = 1u64.checked_shl(driver as u32).filter(|_| driver < MIRRORED_DRIVERS)
        else {
            return false;
        };
        // Acquire pairs with the Release in `register_mirror`: the registrar's catch-up read of
        // `completed` happens before this submission.
        if self.mirrors.ready.load(Ordering::Acquire) & bit != 0 {
            return true;
        }
        self.register_mirror(device, driver, bit);
        true
    }

    #[cold]
    fn register_mirror(&self, device: &'static DeviceShared, driver: usize, bit: u64) {
        let mut written = self.mirrors.written.lock();
        // A registrar that held the lock before finished the whole registration under it.
        if self.mirrors.drivers.load(Ordering::Relaxed) & bit != 0 {
            return;
        }
        if !self.native && written.is_empty() {
            // Native waiters now wait for this queue's retirements (`has_retired_or_waits`);
            // none can have registered before (none waited on it), so nothing is dropped.
            *self.issue_waiters.lock() = QueueWaiters::new(device.queues.len());
        }
        self.mirrors.drivers.fetch_or(bit, Ordering::Relaxed);
        // The rare side of the store → load pair with `retire` ("Registration"); pairs with its
        // light barrier.
        barrier::heavy();
        // Acquire pairs with the Release store in `retire`: what the ended operations did
        // happens before the mirror write that releases native waits on them.
        let ended = self.completed.load(Ordering::Acquire);
        // Read for the same pair with `claim_run`: a start whose queue process did not see the
        // bit is seen here, so a waiter submitted after this registration sees it too (a later
        // read of the same word); see "Issued once the origin has started".
        std::hint::black_box(self.mirrors.started.load(Ordering::Relaxed));
        written.push((driver, 0));
        self.write_mirrors(device, &mut written, ended);
        // Release pairs with the Acquire load in `mirrored_for` (see "Registration").
        self.mirrors.ready.fetch_or(bit, Ordering::Release);
    }

    /// Claims operation `epoch` as running (`RunClaim::start`) and records a start that won,
    /// waking native waiters on a mirrored queue (see "Issued once the origin has started").
    /// When nothing mirrors the queue: one Relaxed store, a light barrier (a compiler fence
    /// once the barrier is expedited) and one Relaxed load more than the claim.
    #[inline]
    pub(super) fn claim_run(
        &self,
        device: &'static DeviceShared,
        claim: &RunClaim,
        epoch: u64,
    ) -> Result<(), Dependence> {
        claim.start(&self.cancellers)?;
        // Relaxed: nothing is handed over through it (a waiter only learns that it may go to
        // its driver; what the origin did reaches it through the mirror write at its end).
        // Only this queue's process writes it, in queue order, so it only grows.
        self.mirrors.started.store(epoch, Ordering::Relaxed);
        // The frequent side of the store (`started`) → load (`drivers`) pair with a mirror's
        // registration; pairs with its heavy barrier.
        barrier::light();
        // Relaxed: ordered after the store by the light barrier; the bits only grow.
        if self.mirrors.drivers.load(Ordering::Relaxed) != 0 {
            self.wake_started(device);
        }
        Ok(())
    }

    #[cold]
    fn wake_started(&self, device: &'static DeviceShared) {
        // Taken after the store of `started`: a waiter registers and re-reads under this lock,
        // so either it sees the store or it is registered before this wakes it.
        self.issue_waiters.lock().wake_all(device.context());
    }

    /// Operation `epoch` retired (`retire`, after its light barrier): moves every registered
    /// mirror to it and wakes native waiters watching the queue's retirements. One load when
    /// nothing mirrors the queue.
    #[inline]
    pub(super) fn mirror_retired(&self, device: &'static DeviceShared, epoch: u64) {
        // Relaxed: ordered after the store of `completed` by `retire`'s light barrier
        // ("Registration"); the bits only grow.
        if self.mirrors.drivers.load(Ordering::Relaxed) != 0 {
            self.move_mirrors(device, epoch, true);
        }
    }

    /// The device ended operations through `epoch` at shutdown, after taking the ring over:
    /// moves every registered mirror to it (no queue is woken: the pool has stopped).
    pub(super) fn mirror_torn_down(&self, device: &'static DeviceShared, epoch: u64) {
        // Relaxed: taking the ring over synchronised with the queue process, and nothing
        // registers during shutdown (it holds the device exclusively).
        if self.mirrors.drivers.load(Ordering::Relaxed) != 0 {
            self.move_mirrors(device, epoch, false);
        }
    }

    #[cold]
    fn move_mirrors(&self, device: &'static DeviceShared, epoch: u64, wake: bool) {
        self.write_mirrors(device, &mut self.mirrors.written.lock(), epoch);
        if wake && !self.native {
            // A native queue woke them in `advance_issued` already.
            self.issue_waiters.lock().wake_all(device.context());
        }
    }

    /// Writes every mirror in `written` that is behind `epoch`; with the lock held, so each
    /// driver's writes are in order and never concurrent.
    fn write_mirrors(
        &self,
        device: &'static DeviceShared,
        written: &mut [(usize, u64)],
        epoch: u64,
    ) {
        for (driver, last) in written.iter_mut() {
            if *last >= epoch {
                continue;
            }
            *last = epoch;
            let backend = &device.backends[*driver];
            let origin = self.id;
            if contain(|| backend.mirror_progress(origin, epoch)).is_err() {
                device.record_fault(DriverFault {
                    driver: backend.name(),
                    queue: Some(origin),
                    tag: None,
                    call: DriverCall::MirrorProgress,
                    violation: Violation::Panicked,
                });
                // Its native waits on the mirror may never be released: every queue of the
                // driver fails from here on, and is woken to fail what it has pending.
                for queue in device.queues.iter().filter(|queue| queue.driver == *driver) {
                    // A flag only, as in `driver_fault`.
                    queue.driver_faulted.store(true, Ordering::Relaxed);
                    queue.wake();
                }
            }
        }
    }
}

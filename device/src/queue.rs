//! The queue process: one immediate process per queue that runs the queue's operations in
//! submission order, woken directly by whoever makes the head operation runnable.
//!
//! # Ring protocol
//!
//! Each queue owns a ring of [`OpSlot`]s indexed by two counters: `tail` (next slot to fill,
//! advanced by submitters under the queue's submit lock) and `head` (next operation to run,
//! advanced only by the queue process, which as an immediate process has one drainer at a
//! time). A slot moves through:
//!
//! ```text
//!            submitter (lock held)                queue process
//!  free ──write body, arm waits──► published ──gate open: run, signal──► retired (= free)
//!   ▲        (slot ∉ [head, tail))   tail += 1      (slot ∈ [head, tail))     head += 1  │
//!   └──────────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! Invariants:
//! 1. The body of a slot in `[head, tail)` is touched only by the queue process; outside it,
//!    only by the submitter holding the lock. The Release store of `tail` (submit) pairs with
//!    the queue process's Acquire load, handing the body over; the Release store of `head`
//!    (retire) pairs with the submitter's Acquire load in its full check, handing it back.
//! 2. An operation runs only when its wait gate is open: `pending` counts armed timepoints
//!    plus one *submission hold* that the submitter drops after publishing. Whoever drops
//!    `pending` to zero wakes the queue process, and a wake during a drain turns that drain's
//!    `Sleep` into another drain, so an operation whose gate opens is never left unrun.
//! 3. A retired slot's timepoints have all fired (the gate counted each), but a firing thread
//!    may still be storing DONE; re-arming therefore waits for `is_busy` to clear.
//!
//! Operations run strictly in order: the queue clock's elision of same-queue waits relies on
//! every earlier operation having finished before a later one starts.
//!
//! # Issuing ahead
//!
//! On a queue whose driver orders device waits natively (`BackendCapabilities::native_waits`),
//! a third index, the `cursor`, runs ahead of `head`: operations in `[head, cursor)` are with
//! the driver, and `head` retires them in order as `Backend::poll` reports them done. While the
//! head is with the driver, the queue process issues the operation at the cursor when
//!
//! - it is a kernel (a layer kind — barrier, host function, memory — stops the cursor until it
//!   is the head, so it runs after everything before it, on the host);
//! - its gate is open (its *held* waits are reached; native device waits are not armed) and no
//!   semaphore it waits on has failed (a failed one stops the cursor; the head fails it, once
//!   the origins of its device waits have retired: it imported them, and the operations after
//!   it rely on their having ended);
//! - every device wait's origin — the operation that signals the value, on a queue of the same
//!   driver — has been issued to the driver or retired (`issued_through`). A wait issued before
//!   its origin could block an in-order hardware queue on work queued behind it; the queue
//!   registers with the origin's queue instead, which wakes it when it issues or retires more.
//!
//! `issued_through` has one writer (the queue's process) and is read by other queues'
//! processes: the writer stores it (Release), then locks `issue_waiters` to wake; a reader that
//! finds it too low locks `issue_waiters`, registers and reads again, so it either sees the
//! store or is registered before the writer's wake-up. An operation that retires without
//! reaching the driver is reported to it (`Backend::completed_on_host`) before
//! `issued_through` passes it, so the driver's native progress covers every epoch another
//! queue may wait on. The driver keeps one queue's operations in order on the device (each
//! waits for its predecessor natively), which the queue clock's elision relies on.
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
//! variable; `retire` wakes it. The two sides are a
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

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use causeway_core::axis::Axis;
use causeway_core::executor::{Drain, DrainContext, Drained, Process};
use causeway_core::queue::{QueueClock, ResolutionCounts};
use causeway_core::semaphore::{Cancelled, Failure, Timepoint};
use causeway_core::speculation::{Dependence, Rejection};
use causeway_core::unpoisoned::{Condvar, Mutex, MutexGuard};

use causeway_runtime::barrier;
use causeway_runtime::contain::{contain, Panicked};
use causeway_runtime::FRONTIER_CAPACITY;

use crate::backend::{DeviceContext, Issue, Issued, MemoryOp, QueueWaiters};
use crate::clock;
use crate::device::DeviceShared;
use crate::hand_off::{self, Collector};
use crate::ids::QueueId;
use crate::memory::{AllocationId, Backing, Commit};
use crate::op::{OpEvent, OpStatus, Work};
use crate::phase::{QueuePhase, Running, TakeOver};
use crate::prefetch;
use crate::run_claim::{Cancellers, Claimed, RunClaim};
use crate::slot::{OpBody, OpSlot};
use crate::speculation::{CancelReport, LineageCell, LineageFrontier, LineageSignals};

/// Operations one drain call runs before yielding the worker to other processes.
const OPS_PER_DRAIN: usize = 32;

/// How long a submitter waiting for a retirement watches `head` before it sleeps (see
/// "Waiting for a free slot").
const SLOT_WATCH: Duration = Duration::from_micros(5);

/// Spin hints between two looks at the clock while watching `head`.
const SPINS_PER_LOOK: u32 = 16;

/// What the submit path keeps under the queue's lock.
#[derive(Debug)]
pub(crate) struct SubmitSide {
    pub(crate) clock: QueueClock<FRONTIER_CAPACITY>,
    /// Resolutions of the submitted operations' waits (the clock's own totals also count
    /// attempts refused for room and retried).
    pub(crate) counts: ResolutionCounts,
}

/// One queue: its clock, its ring of operations and its process.
pub(crate) struct QueueShared {
    pub(crate) index: usize,
    /// Its driver's index in the device's backends.
    pub(crate) driver: usize,
    /// Whether its driver orders device waits natively (`BackendCapabilities::native_waits`):
    /// operations are then issued ahead of the head (see "Issuing ahead").
    pub(crate) native: bool,
    /// Index of the first operation not yet issued to the driver (`head ≤ cursor ≤ tail`);
    /// written only by the queue process (or the device after taking the ring over).
    cursor: AtomicU64,
    /// Epoch of the last operation issued to the driver or retired: other native queues'
    /// device waits on this queue may be issued up to it.
    issued_through: AtomicU64,
    /// Native queues waiting for `issued_through` to advance.
    issue_waiters: Mutex<QueueWaiters>,
    axis: Axis,
    pub(crate) submit: Mutex<SubmitSide>,
    head: AtomicU64,
    tail: AtomicU64,
    /// Operations in flight at most (`QueueConfig::capacity`).
    capacity: usize,
    /// The ring position of operation index `i` is `i & ring_mask`: the ring arrays are
    /// `capacity` rounded up to a power of two long, so that finding a slot is a mask rather
    /// than a division (three divisions per operation were a tenth of a signal → start
    /// hand-over's latency). At most `capacity` operations are in flight (`free_slot`), so
    /// those in flight never share a position; the extra positions only take turns.
    ring_mask: u64,
    slots: Box<[OpSlot]>,
    /// Each slot's lineage (see `speculation`), apart from the slots and in two arrays: a
    /// cancellation walks the frontiers in order (small records, no stride over whole slots)
    /// and reads the signals of the operations it cancelled; nothing else reads them.
    frontiers: Box<[LineageCell<LineageFrontier>]>,
    signals: Box<[LineageCell<LineageSignals>]>,
    /// Each slot's run claim (see `speculation`): two bytes each, in order, so the walk that
    /// fails what a cancellation claimed reads a few cache lines per thousand operations.
    claims: Box<[RunClaim]>,
    /// The cancellation walks under way on this queue (see `run_claim`).
    cancellers: Cancellers,
    /// Epoch of the last retired operation (what the device knows is complete).
    completed: AtomicU64,
    /// Submitters waiting for a free slot (see "Waiting for a free slot").
    slot_waiters: AtomicUsize,
    slot_lock: Mutex<()>,
    slot_freed: Condvar,
    /// Whether the queue process or the device owns the ring (see `phase`).
    pub(crate) phase: QueuePhase,
    process: OnceLock<Process<'static>>,
    device: OnceLock<&'static DeviceShared>,
}

/// The outcome of trying to run the head operation.
enum Step {
    Retired,
    /// The head was issued to the driver: poll it once (the backend wakes the queue when it
    /// ends only after a poll found it running).
    Issued,
    Blocked,
    /// The device took the queue over while the operation's work ran: stop, touch nothing.
    Abandoned,
}

/// What issuing a kernel to the driver came to.
enum Issuing {
    /// It ran to its end at the head: retire it now.
    Finished(OpStatus),
    /// The driver has it (running, or finished ahead of operations still running).
    Pending,
    /// Not issued: an origin is not issued yet, or the driver's resource is taken; the queue
    /// is woken when that changes.
    NotYet,
    /// Taken over while the work ran.
    Abandoned,
    /// A cancellation came first (`speculation`): not issued, and never will be.
    Cancelled,
}

/// Where issuing ahead stopped.
enum Ahead {
    /// At an operation that is not ready, or at the tail.
    Stopped,
    /// The queue was taken over while the work ran.
    Abandoned,
}

/// What starting an operation's work came to.
enum Ran {
    Finished(OpStatus),
    /// It cannot start yet (no quota for an alloca, the driver's resource is taken), or the
    /// driver runs it; the queue is woken when that changes.
    Waiting,
    /// A kernel went to the driver, which runs it.
    Issued,
    /// Taken over while the work ran.
    Abandoned,
}

impl QueueShared {
    pub(crate) fn new(
        index: usize,
        driver: usize,
        native: bool,
        clock: QueueClock<FRONTIER_CAPACITY>,
        capacity: usize,
        queues: usize,
    ) -> QueueShared {
        let point = causeway_core::frontier::Point::new(clock.axis(), 0);
        let ring = capacity.checked_next_power_of_two().expect("a queue's ring fits in memory");
        QueueShared {
            index,
            driver,
            native,
            cursor: AtomicU64::new(0),
            issued_through: AtomicU64::new(0),
            issue_waiters: Mutex::new(QueueWaiters::new(if native { queues } else { 0 })),
            axis: clock.axis(),
            submit: Mutex::new(SubmitSide { clock, counts: ResolutionCounts::default() }),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            capacity,
            ring_mask: ring as u64 - 1,
            slots: (0..ring).map(|_| OpSlot::new(point)).collect(),
            frontiers: (0..ring).map(|_| LineageCell::new()).collect(),
            signals: (0..ring).map(|_| LineageCell::new()).collect(),
            claims: (0..ring).map(|_| RunClaim::new()).collect(),
            cancellers: Cancellers::new(),
            completed: AtomicU64::new(0),
            slot_waiters: AtomicUsize::new(0),
            slot_lock: Mutex::new(()),
            slot_freed: Condvar::new(),
            phase: QueuePhase::new(),
            process: OnceLock::new(),
            device: OnceLock::new(),
        }
    }

    /// Second construction phase, once the queue has its final address: points the queue and
    /// its slots' timepoints back at their owners and creates the process.
    pub(crate) fn link(&'static self, device: &'static DeviceShared) -> &'static Process<'static> {
        let _ = self.device.set(device);
        for slot in self.slots.iter() {
            let _ = slot.gate.queue.set(self);
            for timepoint in &slot.timepoints {
                let _ = timepoint.set(Timepoint::new(&slot.gate));
            }
        }
        self.process.get_or_init(|| Process::new(self, causeway_core::executor::Class::Immediate))
    }

    pub(crate) fn submit_axis(&self) -> Axis {
        self.axis
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The ring position of operation index `index`.
    fn position(&self, index: u64) -> usize {
        (index & self.ring_mask) as usize
    }

    pub(crate) fn lock_submit(&self) -> MutexGuard<'_, SubmitSide> {
        // Only this crate's and core's code runs under this lock (no observer, host function
        // or kernel), so no caller's panic can interrupt a submission half-way.
        self.submit.lock()
    }

    fn device(&self) -> &'static DeviceShared {
        self.device.get().copied().expect("linked when the device was built")
    }

    pub(crate) fn slot(&self, index: u64) -> &OpSlot {
        &self.slots[self.position(index)]
    }

    /// The lineage of the operation in slot `index` (see `speculation`): its frontier and its
    /// signals.
    pub(crate) fn lineage(
        &self,
        index: u64,
    ) -> (&LineageCell<LineageFrontier>, &LineageCell<LineageSignals>) {
        let at = self.position(index);
        (&self.frontiers[at], &self.signals[at])
    }

    /// The run claim of the operation in slot `index` (see `speculation`).
    pub(crate) fn claim(&self, index: u64) -> &RunClaim {
        &self.claims[self.position(index)]
    }

    pub(crate) fn timepoint(slot: &OpSlot, wait: usize) -> Pin<&Timepoint<'static>> {
        let timepoint = slot.timepoints[wait].get().expect("linked when the device was built");
        // SAFETY: the slot lives in the device's leaked, never-moved storage until the device
        // is dropped, so the timepoint is pinned for as long as anyone can reach it.
        unsafe { Pin::new_unchecked(timepoint) }
    }

    /// Index of the next slot to fill, if one is free. Called with the submit lock held.
    pub(crate) fn free_slot(&self) -> Option<u64> {
        let tail = self.tail.load(Ordering::Relaxed);
        // Acquire pairs with the Release store of `head` in `retire`: the queue process is
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
        // Acquire (here and below) pairs with the Release store in `retire`: what the retired
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
        // The rare side of the store → load pair with `retire` (module docs, "Waiting for a
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
        // Acquire pairs with the store in `retire`: whatever the retired operations did is
        // visible to the caller's decision.
        self.head.load(Ordering::Acquire)
    }

    /// Operations submitted so far, read under the submit lock: a submission in progress is
    /// either counted or has not checked its semaphores yet.
    pub(crate) fn submitted_under_lock(&self) -> u64 {
        let _side = self.lock_submit();
        self.tail.load(Ordering::Relaxed)
    }

    /// Makes slot `index` (filled under the submit lock) visible to the queue process.
    pub(crate) fn publish(&self, index: u64) {
        // Release pairs with the Acquire load of `tail` in `drain`: the body written before it
        // is visible to the queue process.
        self.tail.store(index + 1, Ordering::Release);
    }

    /// Operations submitted and not yet retired.
    pub(crate) fn in_flight(&self) -> u64 {
        // Acquire pairs with the Release store in `retire`.
        let head = self.head.load(Ordering::Acquire);
        self.tail.load(Ordering::Acquire) - head
    }

    /// Epoch of the last retired operation.
    pub(crate) fn completed_epoch(&self) -> u64 {
        // Acquire pairs with the Release store in `retire`: effects of the retired operations
        // (their work) happened before whatever the caller decides from this.
        self.completed.load(Ordering::Acquire)
    }

    /// Makes the queue process drain again (a no-op if it is already queued or running).
    pub(crate) fn wake(&self) {
        let Some(&device) = self.device.get() else { return };
        // The same queue, borrowed for as long as the device's storage lives.
        let this = &device.queues[self.index];
        if let Some(process) = this.process.get() {
            hand_off::wake(device, process);
        }
    }

    /// Hints into this core's cache what a drain of this queue reads first — its process's
    /// state, its phase, ring pointers, indices and flags, the head operation's gate, body and
    /// run claim — for a thread about to wake it and likely to run it next (see `prefetch`).
    /// One hint per field the drain reads early; the compiler places the fields, so hints that
    /// land on a line already hinted cost an instruction and nothing more. `head` is read
    /// without ordering: a stale value only hints the wrong slot.
    pub(crate) fn prefetch_for_drain(&self) {
        prefetch::first_line(&self.process);
        prefetch::first_line(&self.phase);
        prefetch::first_line(&self.slots);
        prefetch::first_line(&self.device);
        prefetch::first_line(&self.head);
        prefetch::first_line(&self.native);
        let head = self.head.load(Ordering::Relaxed);
        let slot = self.slot(head);
        prefetch::first_line(&slot.gate);
        prefetch::object(&slot.body);
        prefetch::first_line(self.claim(head));
    }

    /// Runs the head operation if it may run.
    fn step(&self, head: u64, worker: usize) -> Step {
        let slot = self.slot(head);
        let claim = self.claim(head);
        if !slot.gate.is_open() && (claim.cancelled().is_none() || !self.release_waits(slot)) {
            return Step::Blocked;
        }
        let device = self.device();
        // Copied out, so no reference into the slot is held while user work runs (phase
        // invariant 3: the device may read the slot then).
        let (issued, issued_status, work, tag, allocation, epoch) = {
            // SAFETY: the slot is in [head, tail) (checked by the caller with an Acquire load
            // of `tail`), so by invariant 1 only this queue process touches its body until
            // `retire`; the shared reference ends with this block.
            let body = unsafe { &*slot.body.get() };
            // What it signals is reached right after its work (see `prefetch`). Hinted once,
            // when the work is about to start: an issued operation's later steps only poll.
            if !body.issued {
                for &(semaphore, _) in &body.signals {
                    prefetch::object(&device.semaphores[semaphore]);
                }
            }
            (
                body.issued,
                body.issued_status,
                body.work,
                body.tag,
                body.allocation,
                body.point.epoch,
            )
        };
        // Failing or cancelling an operation that was not issued ends it without its native
        // device waits reached: it ends only once their origins have (it imported them, and
        // the operations after it rely on that), as it would have had it run.
        let origins_ended =
            |body: &OpBody| !self.native || body.origins_retired(device, QueueId(self.index));
        let status = if issued {
            // Retired only after the operations it waited on natively, so that a failure of
            // theirs is seen (below) before it completes what it signals.
            // SAFETY: as above; shared and short-lived.
            let origins_retired = !self.native
                || unsafe { &*slot.body.get() }.origins_retired(device, QueueId(self.index));
            // The driver runs it: done only when it says so.
            let polled = if origins_retired {
                issued_status
                    .or_else(|| device.backend(self).poll(QueueId(self.index), epoch, work))
            } else {
                None
            };
            match polled {
                // Native device waits let it run without the host seeing its waits reached:
                // a wait whose semaphore failed fails it all the same.
                Some(OpStatus::Ok) => self.failed_wait(slot).map_or(OpStatus::Ok, OpStatus::Failed),
                Some(status) => status,
                None => {
                    return match self.issue_ahead(worker) {
                        Ahead::Stopped => Step::Blocked,
                        Ahead::Abandoned => Step::Abandoned,
                    }
                }
            }
        } else if claim.cancelled().is_some() {
            // SAFETY: as above; shared and short-lived.
            if !origins_ended(unsafe { &*slot.body.get() }) {
                return Step::Blocked;
            }
            OpStatus::Cancelled
        } else {
            // A semaphore that failed after this operation's wait was decided (an elided wait
            // on a signal whose operation then failed) still fails every current waiter.
            if let Some(failure) = self.failed_wait(slot) {
                slot.gate.record_failure(failure);
            }
            let failure = slot.gate.failure();
            // SAFETY: as above; shared and short-lived.
            if failure.is_some() && !origins_ended(unsafe { &*slot.body.get() }) {
                return Step::Blocked;
            }
            match failure {
                // Failing counts as starting: a cancellation either came first or reports it
                // as having run.
                Some(failure) => match claim.start(&self.cancellers) {
                    Ok(()) => OpStatus::Failed(failure),
                    Err(_) => OpStatus::Cancelled,
                },
                None => match self.start(slot, claim, work, tag, allocation, worker) {
                    Ran::Finished(status) => status,
                    Ran::Waiting => return Step::Blocked,
                    Ran::Issued => return Step::Issued,
                    Ran::Abandoned => return Step::Abandoned,
                },
            }
        };
        // SAFETY: as above; the queue process owns the slot again (the work is over and the
        // queue was not taken over), and this is the only reference until `retire` returns.
        let body = unsafe { &mut *slot.body.get() };
        report_speculation(device, self.index, claim, tag);
        device.finish_and_observe(self.index, body, status, worker);
        self.retire(head, body);
        Step::Retired
    }

    /// For a cancelled head whose gate is shut: unlinks the armed timepoints (held waits and
    /// waits armed on the host) that no live signal covers, releasing the gate for each one
    /// unlinked. A wait a live signal covers may have imported it, and the operations after
    /// this one rely on that signal's operation having ended before they start: the cancelled
    /// operation still waits for it (it fires when that operation ends, reached or not). True
    /// when the gate is open afterwards (the submitter may still hold it for a moment; its
    /// release wakes the queue).
    fn release_waits(&self, slot: &OpSlot) -> bool {
        let device = self.device();
        // SAFETY: the slot is the head, in [head, tail): only this queue process touches its
        // body (invariant 1), and no other reference to it is live here.
        let body = unsafe { &mut *slot.body.get() };
        for (wait, &(semaphore, value)) in body.waits.iter().enumerate() {
            if !body.armed[wait] || device.semaphores[semaphore].is_live_at(value) {
                continue;
            }
            body.armed[wait] = false;
            // A timepoint that fired (or is firing) released the gate itself.
            if device.semaphores[semaphore].cancel(&Self::timepoint(slot, wait))
                == Cancelled::Unlinked
            {
                slot.gate.release();
            }
        }
        slot.gate.is_open()
    }

    /// The first walk of [`Device::cancel_speculative`](crate::Device::cancel_speculative)
    /// (see `speculation`): claims the operations that depend on `rejection` and have not
    /// started as cancelled, and marks those that started, and their signals' history entries
    /// (`Semaphore::mark_ran_on_rejected`).
    pub(crate) fn claim_speculative(&self, rejection: Rejection, report: &mut CancelReport) {
        // Held for the walk: no slot from the head on is refilled meanwhile, so each lineage
        // stays the one published, even for operations the queue process retires meanwhile.
        let _side = self.lock_submit();
        let walk = self.cancellers.begin();
        // Acquire pairs with the Release store of `head` in `retire` (as in `free_slot`).
        let head = self.head.load(Ordering::Acquire);
        // Written only under the submit lock, which this thread holds.
        let tail = self.tail.load(Ordering::Relaxed);
        for index in head..tail {
            // SAFETY: the submit lock is held and `index` is below `tail` (published).
            let frontier = unsafe { self.lineage(index).0.read() };
            let dependence = rejection.classify(frontier);
            if !dependence.is_dependent() {
                continue;
            }
            match walk.cancel(self.claim(index), dependence) {
                Claimed::Cancelled => {
                    report.cancelled += 1;
                    report.conservative += usize::from(dependence == Dependence::Conservative);
                }
                Claimed::Running => {
                    report.running += 1;
                    // It runs to its end; its signals carry the mark, so a later waiter (and
                    // the history in a report) sees it consumes rejected work.
                    // SAFETY: as above.
                    let signals = unsafe { self.lineage(index).1.read() };
                    let device = self.device();
                    for &(semaphore, value) in signals {
                        device.semaphores[semaphore].mark_ran_on_rejected(value);
                    }
                }
                Claimed::AlreadyDecided => {}
            }
        }
    }

    /// The second walk of a cancellation: marks the signals of every cancelled operation still
    /// in the ring cancelled now, rather than when the queue reaches it
    /// (`Semaphore::mark_cancelled`): a submission that waits on one fails at once, and
    /// accepted work may complete signals above them on the same timelines. Waits already
    /// armed on them end only when the queue retires the operation (which cancels its signals
    /// for good): such a waiter imported the operation's frontier — this queue's earlier work,
    /// and what the operation's own waits imported — and the operations after the waiter rely
    /// on all of it having ended before they start. True when the ring holds a cancelled
    /// operation: the queue must be woken to retire it.
    pub(crate) fn mark_cancelled(&self, device: &DeviceShared) -> bool {
        // As in `claim_speculative`: the lineages from the head on stay as published.
        let _side = self.lock_submit();
        // Acquire pairs with the Release store of `head` in `retire` (as in `free_slot`).
        let head = self.head.load(Ordering::Acquire);
        // Written only under the submit lock, which this thread holds.
        let tail = self.tail.load(Ordering::Relaxed);
        let mut cancelled = false;
        for index in head..tail {
            if self.claim(index).cancelled().is_none() {
                continue;
            }
            // SAFETY: the submit lock is held and `index` is below `tail` (published).
            let signals = unsafe { self.lineage(index).1.read() };
            for &(semaphore, value) in signals {
                // Refused only where the retirement decides instead: a failed timeline, or a
                // signal reached already (the operation retired meanwhile).
                let _ = device.semaphores[semaphore].mark_cancelled(value);
            }
            cancelled = true;
        }
        cancelled
    }

    /// The failure of a semaphore the operation in `slot` waits on, if one failed before
    /// reaching the waited value (a value reached before the failure stays reached).
    fn failed_wait(&self, slot: &OpSlot) -> Option<Failure> {
        let device = self.device();
        // SAFETY: the slot is in [head, tail), owned by the queue process (see `step`); shared
        // and short-lived.
        let body = unsafe { &*slot.body.get() };
        body.waits
            .iter()
            .find_map(|&(semaphore, minimum)| device.semaphores[semaphore].failure_for(minimum))
    }

    /// Starts the operation's work: the layer's own kinds here, kernels through the driver.
    fn start(
        &self,
        slot: &OpSlot,
        claim: &RunClaim,
        work: Work,
        tag: u64,
        allocation: Option<AllocationId>,
        worker: usize,
    ) -> Ran {
        let device = self.device();
        let started =
            || device.observe(self.index, tag, |at_ns| OpEvent::Started { worker, at_ns });
        // Kernels are claimed in `issue`, once nothing but the driver stands between them and
        // running.
        if !work.is_kernel() && claim.start(&self.cancellers).is_err() {
            return Ran::Finished(OpStatus::Cancelled);
        }
        match work {
            Work::Barrier => {
                started();
                Ran::Finished(OpStatus::Ok)
            }
            Work::Alloca { .. } => {
                let Some(backed) = self.commit(allocation) else { return Ran::Waiting };
                started();
                Ran::Finished(backed)
            }
            Work::Dealloca(_) => {
                started();
                Ran::Finished(match allocation {
                    Some(allocation) => device.decommit(allocation),
                    None => OpStatus::Failed(Failure::Aborted),
                })
            }
            Work::Host(call) => {
                started();
                // A panicking host function fails its operation (and what it signals) instead
                // of taking the worker and the queue process down with it.
                let status = self.run_user_work(tag, worker, || {
                    match contain(&device.host_calls[call.0 as usize]) {
                        Ok(Ok(())) => OpStatus::Ok,
                        Ok(Err(failure)) => OpStatus::Failed(failure),
                        Err(Panicked) => OpStatus::Failed(Failure::Aborted),
                    }
                });
                status.map_or(Ran::Abandoned, Ran::Finished)
            }
            _ => match self.issue(slot, claim, worker) {
                Issuing::Finished(status) => Ran::Finished(status),
                // The head is with the driver: the next step polls it and issues what follows.
                Issuing::Pending => Ran::Issued,
                Issuing::NotYet => Ran::Waiting,
                Issuing::Abandoned => Ran::Abandoned,
                Issuing::Cancelled => Ran::Finished(OpStatus::Cancelled),
            },
        }
    }

    /// Issues the kernel in `slot` (the head, or the cursor on a native queue) to the driver.
    fn issue(&self, slot: &OpSlot, claim: &RunClaim, worker: usize) -> Issuing {
        let device = self.device();
        let (tag, work, epoch, waits, elided_waits) = {
            // SAFETY: the slot is in [head, tail), owned by the queue process (see `step`); the
            // shared reference ends with this block, before any user work runs.
            let body = unsafe { &*slot.body.get() };
            if self.native && !body.origins_issued(device, QueueId(self.index)) {
                // Registered with the origin's queue, which wakes this one when it moves on.
                return Issuing::NotYet;
            }
            (body.tag, body.work, body.point.epoch, body.native_waits(), body.elided_waits())
        };
        // Checked again now that the origins are issued: an origin that failed without being
        // issued failed its signals before its queue moved on (`finish_signals` before
        // `retire`, whose Release store `origins_issued` acquired), so a failure the caller's
        // earlier check missed is visible here, and the operation is never handed over.
        let failed = if self.native { self.failed_wait(slot) } else { None };
        if let Some(failure) = failed {
            // It imported its origins: it fails once they have ended, as if it had run.
            // SAFETY: as above.
            if !unsafe { &*slot.body.get() }.origins_retired(device, QueueId(self.index)) {
                return Issuing::NotYet;
            }
            // Failing counts as starting, as in `step`.
            return match claim.start(&self.cancellers) {
                Ok(()) => Issuing::Finished(OpStatus::Failed(failure)),
                Err(_) => Issuing::Cancelled,
            };
        }
        if claim.start(&self.cancellers).is_err() {
            return Issuing::Cancelled;
        }
        let mut issue = Issue {
            queue: self,
            device,
            tag,
            work,
            waits,
            elided_waits,
            epoch,
            worker,
            started: false,
        };
        let issued = device.backend(self).issue(&mut issue);
        let status = match issued {
            Issued::Finished(status) => Some(status),
            Issued::Pending => None,
            Issued::Busy => return Issuing::NotYet,
            Issued::Abandoned(_) => return Issuing::Abandoned,
        };
        issue.start();
        let head = self.head.load(Ordering::Relaxed);
        // Finished at the head: retired at once, like work run on the worker.
        if let (Some(status), true) = (status, self.cursor.load(Ordering::Relaxed) == head) {
            return Issuing::Finished(status);
        }
        // SAFETY: the queue process owns the slot (see `step`) and holds no other reference
        // to it here.
        let body = unsafe { &mut *slot.body.get() };
        body.issued = true;
        body.issued_status = status;
        body.issued_ns = clock::start_ns();
        self.cursor.fetch_add(1, Ordering::Relaxed);
        if self.native {
            self.advance_issued(epoch);
        }
        Issuing::Pending
    }

    /// On a native queue whose head is with the driver: issues the following kernels whose
    /// held waits are reached and whose device waits' origins are issued, in order, up to the
    /// first that is not ready. Anything else — a layer kind, an operation with a failed wait
    /// — stops the cursor until it is the head, so it runs after everything before it.
    fn issue_ahead(&self, worker: usize) -> Ahead {
        if !self.native {
            return Ahead::Stopped;
        }
        loop {
            let cursor = self.cursor.load(Ordering::Relaxed);
            // Acquire pairs with the Release store in `publish`.
            if cursor == self.tail.load(Ordering::Acquire) {
                return Ahead::Stopped;
            }
            let slot = self.slot(cursor);
            if !slot.gate.is_open() || slot.gate.failure().is_some() {
                return Ahead::Stopped;
            }
            // SAFETY: `cursor` is in [head, tail): the queue process owns the body; shared and
            // short-lived.
            let work = unsafe { &*slot.body.get() }.work;
            if !work.is_kernel() || self.failed_wait(slot).is_some() {
                return Ahead::Stopped;
            }
            match self.issue(slot, self.claim(cursor), worker) {
                Issuing::Pending => {}
                // Not at the head (the head is pending), so never finished in place; a
                // cancelled operation retires on the host once it is the head.
                Issuing::Finished(_) | Issuing::NotYet | Issuing::Cancelled => {
                    return Ahead::Stopped
                }
                Issuing::Abandoned => return Ahead::Abandoned,
            }
        }
    }

    /// Publishes that the operations through `epoch` were issued or retired, and wakes the
    /// native queues waiting for either (`has_issued_or_waits`, `has_retired_or_waits`).
    fn advance_issued(&self, epoch: u64) {
        if self.issued_through.load(Ordering::Relaxed) < epoch {
            // Release pairs with the Acquire loads in `has_issued_or_waits`: an operation
            // issued from what it reads waits natively on work already handed to the driver.
            self.issued_through.store(epoch, Ordering::Release);
        }
        // Taken after the stores (here and of `completed`): a waiter registers and re-reads
        // under this lock, so either it sees them or it is registered before this wakes it.
        let mut waiters = self.issue_waiters.lock();
        waiters.wake_all(DeviceContext { shared: self.device() });
    }

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

    /// Commits an alloca's memory and has its owner back it natively: the alloca's status, or
    /// `None` when the pool is over quota (the queue is registered to be woken by the next
    /// decommit).
    fn commit(&self, allocation: Option<AllocationId>) -> Option<OpStatus> {
        let Some(allocation) = allocation else { return Some(OpStatus::Ok) };
        let device = self.device();
        let mut memory = device.lock_memory();
        let backing = match memory.pool.commit(allocation) {
            Commit::Committed(backing) => backing,
            Commit::OverQuota => {
                // Registered under the same lock a decommit takes before waking, so the wake
                // cannot slip between this check and the registration.
                memory.waiting.register(QueueId(self.index));
                return None;
            }
        };
        drop(memory);
        let Some(Backing { block, bytes, driver, release_from }) = backing else {
            return Some(OpStatus::Ok);
        };
        // Outside the memory lock: native allocation may take a while. The block is this
        // alloca's alone until its dealloca runs, which the alloca's retirement precedes.
        if let Some(previous) = release_from {
            let _ = device.backends[previous].memory(MemoryOp::Release { block });
        }
        match device.backends[driver].memory(MemoryOp::Commit { block, bytes }) {
            Ok(()) => Some(OpStatus::Ok),
            Err(failure) => {
                let mut memory = device.lock_memory();
                memory.pool.fail_commit(allocation);
                // The bytes are back in the quota: queues waiting for it may commit now.
                memory.waiting.wake_all(DeviceContext { shared: device });
                Some(OpStatus::Failed(failure))
            }
        }
    }

    /// Runs user work (a kernel on this worker, a host function) in the Working phase, so a
    /// shutdown can abandon it if it never returns; `None` when it was.
    pub(crate) fn run_user_work(
        &self,
        tag: u64,
        worker: usize,
        work: impl FnOnce() -> OpStatus,
    ) -> Option<OpStatus> {
        self.phase.start_work(Running { tag, worker, since_ns: clock::start_ns() });
        let status = work();
        self.phase.finish_work().then_some(status)
    }

    fn retire(&self, head: u64, body: &mut OpBody) {
        let epoch = body.point.epoch;
        if self.native && !body.issued {
            // Nothing issued after it (the cursor stops at what is not issued), so its epoch is
            // the next on the queue's native progress.
            self.device().backend(self).completed_on_host(QueueId(self.index), epoch);
        }
        // Release pairs with the Acquire load in `completed_epoch` (and `has_retired_or_waits`).
        self.completed.store(epoch, Ordering::Release);
        if self.native {
            self.advance_issued(epoch);
        }
        if self.cursor.load(Ordering::Relaxed) == head {
            self.cursor.store(head + 1, Ordering::Relaxed);
        }
        body.allocation = None;
        body.issued = false;
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

/// What taking a queue over at shutdown found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Teardown {
    /// Operations that had not run were cancelled; `stuck` are those whose work (or command
    /// buffer) was still running, failed as aborted instead.
    Done {
        /// Operations cancelled.
        cancelled: usize,
        /// The operations abandoned while running (the head's, or those its driver had).
        stuck: Vec<Running>,
    },
    /// A drain stayed in its bookkeeping past the deadline (an observer or a waker that
    /// blocks); the queue was left alone, except that it is asked to stop: when the drain
    /// goes on, it starts at most one more operation's work and touches nothing after it.
    Busy,
}

impl QueueShared {
    /// Shutdown, after the pool stopped: takes the ring over from the queue process (see
    /// `phase`), cancels every operation that has not run (its armed timepoints unlinked, its
    /// signals failed as cancelled, its memory released) and fails the one whose work is still
    /// running as aborted. `workers_abandoned` says whether some pool worker was left inside
    /// work (else work that runs on the workers has stopped); the driver decides from it
    /// whether its pending operation may still run.
    pub(crate) fn tear_down(
        &self,
        device: &DeviceShared,
        workers_abandoned: bool,
        deadline: Instant,
    ) -> Teardown {
        let (mut index, stuck) = loop {
            match self.phase.take_over() {
                TakeOver::Idle => break (self.head.load(Ordering::Acquire), None),
                TakeOver::Stuck(running) => {
                    let head = self.head.load(Ordering::Acquire);
                    self.abandon_running(device, head, running);
                    break (head + 1, Some(running));
                }
                TakeOver::Stepping if Instant::now() < deadline => std::thread::yield_now(),
                TakeOver::Stepping => return Teardown::Busy,
                TakeOver::Abandoned => return Teardown::Done { cancelled: 0, stuck: Vec::new() },
            }
        };
        let tail = self.tail.load(Ordering::Acquire);
        let mut stuck: Vec<Running> = stuck.into_iter().collect();
        // Operations the driver has (from the head to the cursor): finished ones retire with
        // their status, running ones are abandoned as aborted, the rest are cancelled below.
        let issued_end = self.cursor.load(Ordering::Relaxed).clamp(index, tail);
        while index < issued_end {
            // SAFETY: the queue is taken over: the device owns the ring from `index` on (phase
            // invariant 2), and nothing else reads this slot.
            let body = unsafe { &*self.slot(index).body.get() };
            if !body.issued {
                break;
            }
            let backend = self.device().backend(self);
            let queue = QueueId(self.index);
            let polled =
                body.issued_status.or_else(|| backend.poll(queue, body.point.epoch, body.work));
            match polled {
                Some(status) => device.finish_and_observe(self.index, body, status, usize::MAX),
                None if backend.is_running(queue, body.work, workers_abandoned) => {
                    let running =
                        Running { tag: body.tag, worker: usize::MAX, since_ns: body.issued_ns };
                    self.abandon_running(device, index, running);
                    stuck.push(running);
                }
                None => break,
            }
            index += 1;
        }
        let cancelled = (tail - index) as usize;
        for index in index..tail {
            let slot = self.slot(index);
            // SAFETY: the device owns the ring from `index` on (the queue was taken over; a
            // stuck head, if any, is below `index`), so nothing else touches the body.
            let body = unsafe { &mut *slot.body.get() };
            for (wait, &(semaphore, _)) in body.waits.iter().enumerate() {
                if body.armed[wait] {
                    device.semaphores[semaphore].cancel(&Self::timepoint(slot, wait));
                }
            }
            report_speculation(device, self.index, self.claim(index), body.tag);
            device.finish_and_observe(self.index, body, OpStatus::Cancelled, usize::MAX);
            if let Some(allocation) = body.allocation.take() {
                device.abandon(allocation);
            }
        }
        Teardown::Done { cancelled, stuck }
    }

    /// Fails the operation at `index`, whose work is running and will be abandoned: its
    /// signals fail as aborted, so nobody waits for it forever. Only reads the slot (the
    /// worker running the work may still hold a view of it; phase invariant 3).
    fn abandon_running(&self, device: &DeviceShared, index: u64, running: Running) {
        // SAFETY: shared access only; the worker running the work reads nothing of the slot
        // it did not copy before starting, and writes nothing once taken over.
        let body = unsafe { &*self.slot(index).body.get() };
        let status = OpStatus::Failed(Failure::Aborted);
        device.finish_and_observe(self.index, body, status, running.worker);
    }
}

impl Drain for QueueShared {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        if !self.phase.enter() {
            // Taken over at shutdown: the ring is the device's now.
            return Drained::Sleep;
        }
        let drained = self.drain_entered(cx);
        if drained.is_some() {
            self.phase.leave();
        }
        drained.unwrap_or(Drained::Sleep)
    }
}

impl QueueShared {
    /// The drain proper, in the Stepping phase; `None` when the queue was taken over (the
    /// phase is Abandoned and must stay so).
    fn drain_entered(&self, cx: &mut DrainContext<'_, '_>) -> Option<Drained> {
        hand_off::collect(self.device(), |collector| self.drain_collecting(cx, collector))
    }

    /// The drain loop, with wakes of other queues held back in `collector`.
    fn drain_collecting(
        &self,
        cx: &mut DrainContext<'_, '_>,
        collector: &Collector,
    ) -> Option<Drained> {
        for _ in 0..OPS_PER_DRAIN {
            let head = self.head.load(Ordering::Relaxed);
            // Acquire pairs with the Release store in `publish`.
            let idle = head == self.tail.load(Ordering::Acquire) || {
                let slot = self.slot(head);
                // A cancelled head runs nothing: its shut gate is released in `step`.
                !slot.gate.is_open() && self.claim(head).cancelled().is_none()
            };
            if let Some(woken) = collector.take() {
                if idle {
                    // This worker is about to be free: the woken queue runs here next.
                    cx.hand_off(woken);
                } else {
                    // Ready work keeps this worker: another one takes the woken queue now.
                    woken.publish();
                }
            }
            if idle {
                return Some(Drained::Sleep);
            }
            match self.step(head, cx.worker()) {
                Step::Retired | Step::Issued => {}
                Step::Blocked => return Some(Drained::Sleep),
                Step::Abandoned => return None,
            }
        }
        Some(Drained::Progress)
    }
}

impl fmt::Debug for QueueShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueShared")
            .field("index", &self.index)
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Reports, just before an operation's `Finished`, that a cancellation found it dependent on
/// rejected speculation: cancelled before it started, or marked while it ran.
fn report_speculation(device: &DeviceShared, queue: usize, claim: &RunClaim, tag: u64) {
    let (dependence, started) = match (claim.cancelled(), claim.ran_on_rejected()) {
        (Some(dependence), _) => (dependence, false),
        (None, Some(dependence)) => (dependence, true),
        (None, None) => return,
    };
    device.observe(queue, tag, |at_ns| OpEvent::Speculative { at_ns, dependence, started });
}

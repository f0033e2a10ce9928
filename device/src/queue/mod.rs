//! A queue: its clock, its ring of operations and their states, run in submission order by one
//! immediate process per queue — woken directly by whoever makes the head operation runnable,
//! draining through the device layer (see "Modules").
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
//! # An operation's life
//!
//! Every operation, whatever its kind and driver, moves through the same states, and every
//! way it can end goes through one place, [`QueueShared::finish`] (`device::process::finish`):
//!
//! ```text
//!          submit: hold, arm waits, publish          last wait released
//!  free ───────────────────────────────────► waiting ──────────────────► ready
//!   ▲                                          │                           │ start / issue
//!   │                                          │ cancel (speculation)      ▼
//!   │                                          ▼                        running ─► with the driver
//!   │                                      cancelled                       │            │
//!   │                                          └──────────► finish ◄───────┴────────────┘
//!   │                                                         │ signals completed or failed,
//!   └──────────────── retire (head += 1) ◄────────────────────┘ observer told
//! ```
//!
//! It ends in one of four ways: **ok**; **failed** (a semaphore it waits on failed, or its
//! work failed); **cancelled** (a rejected speculation claimed it before it started, or the
//! device shut down before it ran); **aborted** (its work panicked, or was still running when
//! the device took the queue over at shutdown). Each fails or completes its signals, tells
//! the observer, and reports a speculation that found it dependent, in that one order.
//!
//! The state lives in four words, each with its own writers, rather than one, so that the
//! common path stays free of compare-and-swaps:
//!
//! | word | records | written by |
//! |---|---|---|
//! | the gate's [`WaitCount`](wait_count::WaitCount) | waiting → ready, the first failed wait | the submitter, the timepoints that fire |
//! | the [`RunClaim`] | ready → running, or → cancelled | the queue process, a cancellation walk |
//! | [`OpBody::issued`](slot::OpBody) | running → with the driver | the queue process |
//! | the queue's [`RingOwnership`] | the ring taken over at shutdown | the queue process, the device once |
//!
//! A single word would take a read-modify-write from each of its writers, where today the
//! count's last release, the claim's uncontended start and the ownership's phase changes are
//! plain stores (see each module).
//!
//! # Modules
//!
//! This module is a queue's state and its own protocols; it knows nothing of the device. What
//! runs the operations — a drain, issuing to the driver, the one ending and retirement,
//! mirrors, cancellation walks, teardown — reaches the whole device and is the device layer's
//! (`device::process`), whose drain object the queue's process runs (`link`).
//!
//! - `slot`: a ring entry — the body submission writes, the wait gate its timepoints count
//!   down; `wait_count`: the gate's count.
//! - `ring`: the ring's indices, publication, freeing a retired slot, and waiting for room;
//!   `head_waiters`: sleeping until the ring's head reaches a point, and the wake.
//! - `progress`: the queue's progress as other queues' native waits see it (issued, started,
//!   retired), and the queues waiting for it; `mirror`: the drivers that mirror it.
//! - `run_claim`: who got to an operation first, its start or a cancellation.
//! - `ownership`: the ring's owner, the queue process or the device taking it over at
//!   shutdown.

// The four protocols the loom models check: their types are `pub` inside these private
// modules so that `crate::loom_models` can re-export them under loom. A `Default` beside their
// constructors would be API for the models alone.
#[allow(clippy::new_without_default)]
pub(crate) mod head_waiters;
mod mirror;
#[allow(clippy::new_without_default)]
pub(crate) mod ownership;
mod progress;
mod ring;
#[allow(clippy::new_without_default)]
pub(crate) mod run_claim;
pub(crate) mod slot;
#[allow(clippy::new_without_default)]
pub(crate) mod wait_count;

use std::fmt;
use std::pin::Pin;
use std::sync::OnceLock;

use causeway_core::axis::Axis;
use causeway_core::executor::{Drain, Process};
use causeway_core::queue::{QueueClock, ResolutionCounts};
use causeway_core::semaphore::Timepoint;
use causeway_core::unpoisoned::{Mutex, MutexGuard};

use causeway_runtime::{HostExecutor, FRONTIER_CAPACITY};

use crate::backend::{BackendCapabilities, DynQueue, QueueWaiters};
use crate::hand_off;
use crate::ids::QueueId;
use crate::prefetch;
use crate::speculation::{LineageCell, LineageFrontier, LineageSignals, LineageWaits};
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use head_waiters::HeadWaiters;
use mirror::Mirrors;
use ownership::RingOwnership;
use run_claim::{Cancellers, RunClaim};
use slot::OpSlot;

/// What the submit path keeps under the queue's lock.
#[derive(Debug)]
pub(crate) struct SubmitSide {
    pub(crate) clock: QueueClock<FRONTIER_CAPACITY>,
    /// Resolutions of the submitted operations' waits (the clock's own totals also count
    /// attempts refused for room and retried).
    pub(crate) counts: ResolutionCounts,
}

/// Which kernels a queue's driver runs, read at submission (kept here rather than asked of the
/// driver on every submission; its command buffers, which may be recorded while the device
/// runs, are asked of it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DriverKernels {
    /// Whether it runs the timed stand-ins, spin and sleep.
    pub(crate) timed: bool,
}

/// One queue: its clock, its ring of operations and its process.
pub(crate) struct QueueShared {
    pub(crate) index: usize,
    /// Its id, as its device hands it out (index and device tag).
    pub(crate) id: QueueId,
    /// Its driver's index in the device's backends.
    pub(crate) driver: usize,
    /// The driver's queue object, bound to its backend (see `backend::erased`); set once when
    /// the device is built.
    driver_queue: OnceLock<Box<dyn DynQueue>>,
    /// Which kernels its driver runs.
    pub(crate) kernels: DriverKernels,
    /// Whether its driver broke the contract (see `device::process::driver`): the queue is
    /// failed.
    pub(crate) driver_faulted: AtomicBool,
    /// Whether its driver orders device waits natively (`BackendCapabilities::native_waits`):
    /// operations are then issued ahead of the head (see "Issuing ahead" in
    /// `device::process::issue`).
    pub(crate) native: bool,
    /// Whether its driver also waits natively on mirrors of other drivers' queues
    /// (`BackendCapabilities::host_written_waits`; see `device::process::mirror`).
    pub(crate) host_written: bool,
    /// Other drivers' mirrors of this queue's progress (see `mirror`; written by
    /// `device::process::mirror`).
    pub(crate) mirrors: Mirrors,
    /// Index of the first operation not yet issued to the driver (`head ≤ cursor ≤ tail`);
    /// written only by the queue process (or the device after taking the ring over).
    pub(crate) cursor: AtomicU64,
    /// Epoch of the last operation issued to the driver or retired: other native queues'
    /// device waits on this queue may be issued up to it.
    pub(crate) issued_through: AtomicU64,
    /// Native queues waiting for `issued_through` to advance.
    pub(crate) issue_waiters: Mutex<QueueWaiters>,
    axis: Axis,
    pub(crate) submit: Mutex<SubmitSide>,
    pub(crate) head: AtomicU64,
    /// Operations published. A queue's epochs count its submissions from 1 (the clock advances
    /// only when a submission commits, and every committed one is published), so the
    /// operation at index `i` has epoch `i + 1`, and `tail` is the last one's epoch.
    pub(crate) tail: AtomicU64,
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
    /// Each slot's waits (see `device::stall`), in an array of their own for the same reason.
    waits: Box<[LineageCell<LineageWaits>]>,
    /// Each slot's run claim (see `speculation`): two bytes each, in order, so the walk that
    /// fails what a cancellation claimed reads a few cache lines per thousand operations.
    claims: Box<[RunClaim]>,
    /// The cancellation walks under way on this queue (see `run_claim`).
    pub(crate) cancellers: Cancellers,
    /// Epoch of the last retired operation (what the device knows is complete).
    pub(crate) completed: AtomicU64,
    /// Who sleeps until `head` reaches a point: submitters waiting for room, waits for
    /// retirements (see `head_waiters`).
    head_waiters: HeadWaiters,
    /// Times a submission slept for room (`QueueStats::room_sleeps`).
    room_sleeps: AtomicU64,
    /// Whether the queue process or the device owns the ring (see `ownership`).
    pub(crate) ownership: RingOwnership,
    process: OnceLock<Process<'static>>,
    /// The executor of the device's pool, which runs the process.
    executor: OnceLock<&'static HostExecutor<'static>>,
}

impl QueueShared {
    pub(crate) fn new(
        id: QueueId,
        driver: usize,
        kernels: DriverKernels,
        capabilities: BackendCapabilities,
        clock: QueueClock<FRONTIER_CAPACITY>,
        capacity: usize,
        queues: usize,
    ) -> QueueShared {
        let point = causeway_core::frontier::Point::new(clock.axis(), 0);
        let ring = capacity.checked_next_power_of_two().expect("a queue's ring fits in memory");
        QueueShared {
            index: id.index(),
            id,
            driver,
            driver_queue: OnceLock::new(),
            kernels,
            driver_faulted: AtomicBool::new(false),
            native: capabilities.native_waits,
            host_written: capabilities.host_written_waits,
            mirrors: Mirrors::default(),
            cursor: AtomicU64::new(0),
            issued_through: AtomicU64::new(0),
            issue_waiters: Mutex::new(QueueWaiters::new(if capabilities.native_waits {
                queues
            } else {
                0
            })),
            axis: clock.axis(),
            submit: Mutex::new(SubmitSide { clock, counts: ResolutionCounts::default() }),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            capacity,
            ring_mask: ring as u64 - 1,
            slots: (0..ring).map(|_| OpSlot::new(point)).collect(),
            frontiers: (0..ring).map(|_| LineageCell::new()).collect(),
            signals: (0..ring).map(|_| LineageCell::new()).collect(),
            waits: (0..ring).map(|_| LineageCell::new()).collect(),
            claims: (0..ring).map(|_| RunClaim::new()).collect(),
            cancellers: Cancellers::new(),
            completed: AtomicU64::new(0),
            head_waiters: HeadWaiters::new(),
            room_sleeps: AtomicU64::new(0),
            ownership: RingOwnership::new(),
            process: OnceLock::new(),
            executor: OnceLock::new(),
        }
    }

    /// Second construction phase, once the queue has its final address: points the queue and
    /// its slots' timepoints back at their owners, keeps the executor and its driver's queue
    /// object, and creates the process, which runs `drain` — the device layer's, which has the
    /// whole device (semaphores, memory, drivers, the other queues) in reach: this layer holds
    /// the queue's state; a drain is the device's.
    pub(crate) fn link(
        &'static self,
        drain: &'static dyn Drain,
        executor: &'static HostExecutor<'static>,
        driver_queue: Box<dyn DynQueue>,
    ) -> &'static Process<'static> {
        let _ = self.executor.set(executor);
        let _ = self.driver_queue.set(driver_queue);
        for slot in self.slots.iter() {
            let _ = slot.gate.queue.set(self);
            for timepoint in &slot.timepoints {
                let _ = timepoint.set(Timepoint::new(&slot.gate));
            }
        }
        self.process.get_or_init(|| Process::new(drain, causeway_core::executor::Class::Immediate))
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

    /// Its driver's queue object (see `backend::erased`), for as long as the device lives.
    pub(crate) fn driver_queue(&'static self) -> &'static dyn DynQueue {
        &**self.driver_queue.get().expect("bound when the device was built")
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

    /// What the operation in slot `index` waits for (see `device::stall`).
    pub(crate) fn lineage_waits(&self, index: u64) -> &LineageCell<LineageWaits> {
        &self.waits[self.position(index)]
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

    /// Makes the queue process drain again (a no-op if it is already queued or running).
    pub(crate) fn wake(&'static self) {
        let Some(&executor) = self.executor.get() else { return };
        if let Some(process) = self.process.get() {
            hand_off::wake(executor, process);
        }
    }

    /// Hints into this core's cache what a drain of this queue reads first — its process's
    /// state, its ring ownership, ring pointers, indices and flags, the head operation's
    /// gate, body and run claim — for a thread about to wake it and likely to run it next (see `prefetch`).
    /// One hint per field the drain reads early; the compiler places the fields, so hints that
    /// land on a line already hinted cost an instruction and nothing more. `head` is read
    /// without ordering: a stale value only hints the wrong slot.
    pub(crate) fn prefetch_for_drain(&self) {
        prefetch::first_line(&self.process);
        prefetch::first_line(&self.ownership);
        prefetch::first_line(&self.slots);
        prefetch::first_line(&self.head);
        prefetch::first_line(&self.native);
        let head = self.head.load(Ordering::Relaxed);
        let slot = self.slot(head);
        prefetch::first_line(&slot.gate);
        prefetch::object(&slot.body);
        prefetch::first_line(self.claim(head));
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

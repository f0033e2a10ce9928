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
//! # Waiting for a free slot
//!
//! A submitter that finds the ring full ([`QueueShared::wait_for_slot`]) counts itself in
//! `slot_waiters` and sleeps on a condition variable; `retire` wakes it. The two sides are a
//! store/load pair on different words — the submitter increments `slot_waiters` then reads
//! `head`, the queue process stores `head` then reads `slot_waiters` — so both use SeqCst:
//! in the single order of SeqCst operations one of the two reads sees the other side's write,
//! so either the submitter sees the freed slot or the queue process sees the waiter. Its
//! wake-up takes the condition variable's mutex, under which the submitter checks before
//! sleeping, so the wake cannot fall between a check and the sleep. The queue process pays
//! one SeqCst store per operation and, with nobody waiting, one load.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use causeway_core::axis::Axis;
use causeway_core::executor::{Drain, DrainContext, Drained, Process};
use causeway_core::queue::QueueClock;
use causeway_core::semaphore::{Failure, Timepoint};

use super::execute::Issue;
use super::hand_off::{self, Collecting};
use super::memory::Commit;
use super::op::{spin_for, OpBody, OpEvent, OpSlot, OpStatus, Work};
use super::DeviceShared;
use crate::contain::{contain, Panicked};

/// Operations one drain call runs before yielding the worker to other processes.
const OPS_PER_DRAIN: usize = 32;

/// What the submit path keeps under the queue's lock.
#[derive(Debug)]
pub(crate) struct SubmitSide {
    pub(crate) clock: QueueClock<8>,
}

/// One queue: its clock, its ring of operations and its process.
pub(crate) struct QueueShared {
    pub(crate) index: usize,
    axis: Axis,
    pub(crate) submit: Mutex<SubmitSide>,
    head: AtomicU64,
    tail: AtomicU64,
    slots: Box<[OpSlot]>,
    /// Epoch of the last retired operation (what the device knows is complete).
    completed: AtomicU64,
    /// Submitters waiting for a free slot (see "Waiting for a free slot").
    slot_waiters: AtomicUsize,
    slot_lock: Mutex<()>,
    slot_freed: Condvar,
    process: OnceLock<Process<'static>>,
    device: OnceLock<&'static DeviceShared>,
}

/// The outcome of trying to run the head operation.
enum Step {
    Retired,
    Blocked,
}

impl QueueShared {
    pub(crate) fn new(index: usize, clock: QueueClock<8>, capacity: usize) -> QueueShared {
        let point = causeway_core::frontier::Point::new(clock.axis(), 0);
        QueueShared {
            index,
            axis: clock.axis(),
            submit: Mutex::new(SubmitSide { clock }),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            slots: (0..capacity).map(|_| OpSlot::new(point)).collect(),
            completed: AtomicU64::new(0),
            slot_waiters: AtomicUsize::new(0),
            slot_lock: Mutex::new(()),
            slot_freed: Condvar::new(),
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
        self.slots.len()
    }

    pub(crate) fn lock_submit(&self) -> MutexGuard<'_, SubmitSide> {
        // The submit side is updated by core code that cannot panic half-way; a poisoned lock
        // only means some unrelated code panicked while holding it.
        self.submit.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn device(&self) -> &'static DeviceShared {
        self.device.get().copied().expect("linked when the device was built")
    }

    pub(crate) fn slot(&self, index: u64) -> &OpSlot {
        &self.slots[(index % self.slots.len() as u64) as usize]
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
        (tail - head < self.slots.len() as u64).then_some(tail)
    }

    /// Blocks until a slot may be free (then the caller tries again) or `deadline` passes
    /// (`false`). Called without the submit lock.
    pub(crate) fn wait_for_slot(&self, deadline: Option<Instant>) -> bool {
        // SeqCst: the Dekker pair with `retire` (module docs, "Waiting for a free slot").
        self.slot_waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.slot_lock.lock().unwrap_or_else(PoisonError::into_inner);
        let free = loop {
            // SeqCst: the other half of the pair; see above.
            let head = self.head.load(Ordering::SeqCst);
            if self.tail.load(Ordering::Relaxed) - head < self.slots.len() as u64 {
                break true;
            }
            guard = match deadline {
                None => self.slot_freed.wait(guard).unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    let waited = self.slot_freed.wait_timeout(guard, deadline - now);
                    waited.unwrap_or_else(PoisonError::into_inner).0
                }
            };
        };
        drop(guard);
        self.slot_waiters.fetch_sub(1, Ordering::Relaxed);
        free
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

    /// Runs the head operation if it may run.
    fn step(&self, head: u64, worker: usize) -> Step {
        let slot = self.slot(head);
        if !slot.gate.is_open() {
            return Step::Blocked;
        }
        // SAFETY: the slot is in [head, tail) (checked by the caller with an Acquire load of
        // `tail`), so by invariant 1 only this queue process touches its body until `retire`.
        let body = unsafe { &mut *slot.body.get() };
        let device = self.device();
        let status = if body.issued {
            // A command buffer is running for this operation: done only when it finished.
            let Work::Execute(id) = body.work else { unreachable!("only executions are issued") };
            match device.executions[id.0 as usize].poll(self.index) {
                Some(status) => status,
                None => return Step::Blocked,
            }
        } else {
            // A semaphore that failed after this operation's wait was decided (an elided wait
            // on a signal whose operation then failed) still fails every current waiter.
            for &(semaphore, _) in &body.waits {
                if let Some(failure) = device.semaphores[semaphore.0 as usize].failure() {
                    slot.gate.record_failure(failure);
                }
            }
            match slot.gate.failure() {
                Some(failure) => OpStatus::Failed(failure),
                None => match self.prepare(body) {
                    Some(()) => {
                        let started = |at_ns| OpEvent::Started { worker, at_ns };
                        device.observe(self.index, body.tag, started);
                        match self.execute(body) {
                            Some(status) => status,
                            None => return Step::Blocked,
                        }
                    }
                    None => return Step::Blocked,
                },
            }
        };
        device.finish_signals(body, status);
        device.observe(self.index, body.tag, |at_ns| OpEvent::Finished { worker, at_ns, status });
        self.retire(head, body);
        Step::Retired
    }

    /// What must be had before the operation may start: committed memory for an alloca, the
    /// command buffer for an execution. `None` when it is not available yet (the pool is over
    /// quota, another queue executes the buffer); the queue is registered to be woken.
    fn prepare(&self, body: &mut OpBody) -> Option<()> {
        if let Work::Execute(id) = body.work {
            let device = self.device();
            return match device.executions[id.0 as usize].issue(self.index) {
                Issue::Issued => {
                    body.issued = true;
                    Some(())
                }
                Issue::Busy => None,
            };
        }
        let (Work::Alloca { .. }, Some(allocation)) = (body.work, body.allocation) else {
            return Some(());
        };
        let mut memory = self.device().lock_memory();
        match memory.pool.commit(allocation) {
            Commit::Committed => Some(()),
            Commit::OverQuota => {
                // Registered under the same lock a decommit takes before waking, so the wake
                // cannot slip between this check and the registration.
                memory.waiting.register(self.index);
                None
            }
        }
    }

    /// Runs the operation's work; `None` for an issued execution, which finishes later.
    fn execute(&self, body: &OpBody) -> Option<OpStatus> {
        let device = self.device();
        Some(match body.work {
            Work::Execute(_) => return None,
            Work::Barrier | Work::Alloca { .. } => OpStatus::Ok,
            Work::Spin(duration) => {
                spin_for(duration);
                OpStatus::Ok
            }
            Work::Sleep(duration) => {
                std::thread::sleep(duration);
                OpStatus::Ok
            }
            Work::Host(call) => {
                // A panicking host function fails its operation (and what it signals) instead
                // of taking the worker and the queue process down with it.
                let call = &device.host_calls[call.0 as usize];
                match contain(call) {
                    Ok(Ok(())) => OpStatus::Ok,
                    Ok(Err(failure)) => OpStatus::Failed(failure),
                    Err(Panicked) => OpStatus::Failed(Failure::Aborted),
                }
            }
            Work::Dealloca(_) => match body.allocation {
                Some(allocation) => device.decommit(allocation),
                None => OpStatus::Failed(Failure::Aborted),
            },
        })
    }

    fn retire(&self, head: u64, body: &mut OpBody) {
        body.allocation = None;
        body.issued = false;
        // Release pairs with the Acquire load in `completed_epoch`.
        self.completed.store(body.point.epoch, Ordering::Release);
        // Release (within SeqCst) pairs with the Acquire load in `free_slot`: every access to
        // the body above happens before the submitter reuses the slot. SeqCst makes this store
        // and the load below the queue's half of the Dekker pair with `wait_for_slot`.
        self.head.store(head + 1, Ordering::SeqCst);
        if self.slot_waiters.load(Ordering::SeqCst) != 0 {
            // Under the mutex the waiter checks under, so the wake cannot slip between its
            // check and its sleep.
            let _guard = self.slot_lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.slot_freed.notify_all();
        }
    }
}

impl QueueShared {
    /// Teardown, after the workers are joined: every operation that has not run is cancelled
    /// (its armed timepoints unlinked, its signals failed as cancelled, its memory released).
    pub(crate) fn cancel_unrun(&self, device: &DeviceShared) {
        let tail = self.tail.load(Ordering::Acquire);
        for index in self.head.load(Ordering::Acquire)..tail {
            let slot = self.slot(index);
            // SAFETY: the workers are joined and the caller has exclusive access to the
            // device, so nothing else touches the body.
            let body = unsafe { &mut *slot.body.get() };
            for (wait, &(semaphore, _)) in body.waits.iter().enumerate() {
                if body.armed[wait] {
                    device.semaphores[semaphore.0 as usize].cancel(&Self::timepoint(slot, wait));
                }
            }
            device.finish_signals(body, OpStatus::Cancelled);
            if let Some(allocation) = body.allocation.take() {
                device.abandon(allocation);
            }
            let cancelled = |at_ns| OpEvent::Finished {
                worker: usize::MAX,
                at_ns,
                status: OpStatus::Cancelled,
            };
            device.observe(self.index, body.tag, cancelled);
        }
        self.head.store(tail, Ordering::Release);
    }
}

impl Drain for QueueShared {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        let collecting = Collecting::start(self.device());
        for _ in 0..OPS_PER_DRAIN {
            let head = self.head.load(Ordering::Relaxed);
            // Acquire pairs with the Release store in `publish`.
            let idle = head == self.tail.load(Ordering::Acquire) || !self.slot(head).gate.is_open();
            if let Some(woken) = collecting.take() {
                if idle {
                    // This worker is about to be free: the woken queue runs here next.
                    cx.hand_off(woken);
                } else {
                    // Ready work keeps this worker: another one takes the woken queue now.
                    woken.publish();
                }
            }
            if idle {
                return Drained::Sleep;
            }
            if let Step::Blocked = self.step(head, cx.worker()) {
                return Drained::Sleep;
            }
        }
        Drained::Progress
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

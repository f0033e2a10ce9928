//! The worker loop: a hand-off, then immediate work (the worker's own run, then its home list,
//! the shared list and other workers' home lists), then compute slots, then spin, then park.

use super::list::Run;
use super::process::state::TransitionToSleeping;
use super::process::{DrainContext, Drained, Process};
use super::scan::{ScanPolicy, SlotHint};
use super::slots;
use super::{Executor, Futex, AWAKE, IDLE_SCANS_PER_YIELD, PARKED};
use crate::semaphore::Failure;
use crate::sync::atomic::Ordering;
use crate::sync::spin_hint;

/// How a worker came to hold the immediate process it is about to run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Taken {
    /// From the list (or a run cut from it): QUEUED, and its drain starts with the swap to
    /// RUNNING that reads every wake that found it queued.
    Queued,
    /// A hand-off: RUNNING already, claimed by this worker's own thread; a wake since the
    /// claim set NOTIFIED, which the drain's end reads.
    Claimed,
}

/// How long a worker with nothing to do keeps scanning before it parks. While it scans, it
/// offers its CPU to other threads every [`IDLE_SCANS_PER_YIELD`] scans
/// ([`Futex::yield_now`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpinPolicy {
    /// Park as soon as a scan finds nothing.
    Park,
    /// Scan this many more times before parking. (`u32::MAX` is minutes of scanning: in
    /// effect a worker that never parks.)
    Fixed(u32),
    /// Scan `min` more times, or `max` while the aggregate wake budget of active compute
    /// processes exceeds the workers awake to serve it (work is likely to appear soon).
    Adaptive {
        /// Scans before parking when demand is low.
        min: u32,
        /// Scans before parking when demand exceeds the awake workers.
        max: u32,
    },
}

impl Default for SpinPolicy {
    fn default() -> SpinPolicy {
        SpinPolicy::Adaptive { min: 64, max: 4096 }
    }
}

/// One worker of an [`Executor`]: owned by one thread (or a bare-metal main loop), holding
/// its private per-slot state. Created by [`Executor::worker`].
pub struct Worker<'e, 'p, F: Futex, P, const SLOTS: usize, const WORKERS: usize> {
    executor: &'e Executor<'p, F, SLOTS, WORKERS>,
    index: usize,
    policy: P,
    spin: SpinPolicy,
    hints: [SlotHint; SLOTS],
    /// Bumped when `hints` change, folded into the scan version.
    hint_changes: u32,
    /// The claim number of each slot's occupant when this worker last drained it.
    seen_claims: [u32; SLOTS],
    /// Private per-slot words handed to drains (`DrainContext::local`).
    local: [u64; SLOTS],
    /// The process handed to this worker by its last completion or by a drain's deferred wake
    /// (see "Hand-off" and "Wake hand-off" in the executor docs): claimed, that is RUNNING and
    /// held by this worker, and run before anything else.
    handed: Option<&'p Process<'p>>,
    /// The immediate processes this worker took from a list in its last turn (see `list`),
    /// run before the lists are looked at again.
    run: Run<'p>,
    /// Turns taken at the immediate lists (see [`Executor::take_immediate`]).
    turns: u32,
}

impl<'e, 'p, F: Futex, P: ScanPolicy<SLOTS>, const SLOTS: usize, const WORKERS: usize>
    Worker<'e, 'p, F, P, SLOTS, WORKERS>
{
    pub(crate) fn new(
        executor: &'e Executor<'p, F, SLOTS, WORKERS>,
        index: usize,
        policy: P,
        spin: SpinPolicy,
    ) -> Self {
        Worker {
            executor,
            index,
            policy,
            spin,
            hints: [SlotHint::UNSEEN; SLOTS],
            hint_changes: 0,
            seen_claims: [u32::MAX; SLOTS],
            local: [0; SLOTS],
            handed: None,
            run: Run::EMPTY,
            turns: 0,
        }
    }

    /// This worker's index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Runs until the executor is shut down and nothing is left to cancel.
    pub fn run(&mut self) {
        let mut idle_scans = 0u32;
        loop {
            if self.step() {
                idle_scans = 0;
                continue;
            }
            if self.executor.is_stopping() && self.executor.is_quiescent() {
                return;
            }
            if idle_scans < self.spin_limit() {
                idle_scans += 1;
                if idle_scans % IDLE_SCANS_PER_YIELD == 0 {
                    self.executor.futex().yield_now();
                } else {
                    spin_hint();
                }
                continue;
            }
            idle_scans = 0;
            self.park();
        }
    }

    /// One unit of work, never blocking: one immediate process, or one compute drain.
    /// Returns whether anything was done (the bare-metal main loop sleeps when it was not).
    pub fn step(&mut self) -> bool {
        let executor = self.executor;
        let next = match self.handed.take() {
            Some(process) => Some((process, Taken::Claimed)),
            None => self
                .run
                .pop()
                .or_else(|| {
                    self.turns = self.turns.wrapping_add(1);
                    self.run = executor.take_immediate(self.index, self.turns);
                    self.run.pop()
                })
                .map(|process| (process, Taken::Queued)),
        };
        if let Some((process, taken)) = next {
            self.run_immediate(process, taken);
            return true;
        }
        if !executor.overflow_looks_empty() {
            executor.drain_overflow();
        }
        let slot_array = executor.slots();
        // The runnable summary: an idle scan ends at this one load, and a revolution only looks
        // at slot words whose bit is set (the word still decides; see `slots`).
        let runnable = slot_array.runnable_hint();
        if runnable == 0 {
            return false;
        }
        let version = u64::from(slot_array.generation()) << 32 | u64::from(self.hint_changes);
        let Worker { policy, hints, local, seen_claims, index, handed, .. } = self;
        let hints: &[SlotHint; SLOTS] = hints;
        // The policy reads the hints during the scan, so what a visit learns is applied after
        // it (hints are allowed to lag by a scan).
        let mut learned = None;
        let did_work = policy.scan(hints, version, runnable, |slot| {
            slots::marked(runnable, slot)
                && slot_array.looks_runnable(slot)
                && drain_slot(
                    executor,
                    *index,
                    slot,
                    &mut seen_claims[slot],
                    &mut local[slot],
                    &mut learned,
                    handed,
                )
        });
        if let Some((slot, seen)) = learned {
            if self.hints[slot] != seen {
                self.hints[slot] = seen;
                self.hint_changes = self.hint_changes.wrapping_add(1);
            }
        }
        did_work
    }

    fn run_immediate(&mut self, process: &'p Process<'p>, taken: Taken) {
        let executor = self.executor;
        let state = process.state();
        if taken == Taken::Queued {
            state.transition_to_running();
        }
        if executor.is_stopping() {
            process.record_failure(Failure::Cancelled);
        }
        // A hand-off must not overtake processes this worker has already taken from the list.
        let may_hand_off = self.run.is_empty();
        if process.failure().is_some() {
            self.handed = executor.complete(process, self.index, may_hand_off);
            return;
        }
        let mut local = 0;
        let mut cx = DrainContext::new(
            self.index,
            &mut local,
            process,
            executor.aggregate_budget(),
            executor,
            !may_hand_off,
        );
        let drained = process.drain_ref().drain(&mut cx);
        let offered = cx.take_offered();
        match drained {
            Drained::Progress => {
                // Still busy, but it yields this worker: what the drain woke runs here next if
                // nothing may go before it (the rule for a free worker, decided before the
                // drained process is queued behind it); otherwise it goes ahead of the drained
                // process on the list, where another worker can take it now.
                match offered {
                    Some(woken) if may_hand_off && executor.may_keep(woken, self.index) => {
                        self.handed = Some(woken);
                    }
                    Some(woken) => executor.give_back(woken),
                    None => {}
                }
                state.transition_to_queued_from_running();
                executor.list_for(process).push(process);
                return;
            }
            Drained::Sleep => {
                // A wake that landed during the drain turns the sleep into a requeue.
                if state.transition_to_sleeping() == TransitionToSleeping::Requeued {
                    executor.list_for(process).push(process);
                }
            }
            Drained::Done(result) => {
                if let Err(failure) = result {
                    process.record_failure(failure);
                }
                self.handed = executor.complete(process, self.index, may_hand_off);
            }
        }
        if let Some(woken) = offered {
            self.keep_or_publish(woken, may_hand_off);
        }
    }

    /// A wake hand-off (see the executor docs): this worker, free now, runs `woken` next if
    /// nothing may go before it; otherwise it is given back (QUEUED) and published like any wake.
    fn keep_or_publish(&mut self, woken: &'p Process<'p>, may_hand_off: bool) {
        let executor = self.executor;
        if may_hand_off && self.handed.is_none() && executor.may_keep(woken, self.index) {
            self.handed = Some(woken);
        } else {
            executor.give_back(woken);
        }
    }

    fn spin_limit(&self) -> u32 {
        match self.spin {
            SpinPolicy::Park => 0,
            SpinPolicy::Fixed(scans) => scans,
            SpinPolicy::Adaptive { min, max } => {
                let executor = self.executor;
                let parked = executor.idle_mask().load(Ordering::Relaxed).count_ones() as usize;
                let awake = executor.workers().saturating_sub(parked) as u32;
                if executor.aggregate_budget().load(Ordering::Relaxed) > awake {
                    max
                } else {
                    min
                }
            }
        }
    }

    /// Parks until notified, unless work or shutdown shows up after announcing idleness.
    fn park(&mut self) {
        let executor = self.executor;
        let word = executor.parking_word(self.index);
        let bit = 1u64 << self.index;
        word.store(PARKED, Ordering::Relaxed);
        // AcqRel RMW: the parking half of the handshake described in the module docs.
        executor.idle_mask().fetch_or(bit, Ordering::AcqRel);
        if executor.has_work() || executor.is_stopping() {
            // Withdraw. If a waker already took the bit it also set NOTIFIED: harmless.
            executor.idle_mask().fetch_and(!bit, Ordering::AcqRel);
            word.store(AWAKE, Ordering::Relaxed);
            // The work seen may not be scannable yet (a waker between making a slot runnable
            // and announcing it in the summary): let the waker run before scanning again.
            spin_hint();
            return;
        }
        // Acquire pairs with the waker's Release store of NOTIFIED.
        while word.load(Ordering::Acquire) == PARKED {
            executor.futex().wait(word, PARKED, None);
        }
        word.store(AWAKE, Ordering::Relaxed);
        executor.spread_wakes();
    }
}

/// Enters `slot`, drains its process once and leaves; returns whether work was done, records
/// what it saw of the occupant in `learned` and a hand-off from finalizing it in `handed`.
fn drain_slot<'p, F: Futex, const SLOTS: usize, const WORKERS: usize>(
    executor: &Executor<'p, F, SLOTS, WORKERS>,
    worker: usize,
    slot: usize,
    seen_claim: &mut u32,
    local: &mut u64,
    learned: &mut Option<(usize, SlotHint)>,
    handed: &mut Option<&'p Process<'p>>,
) -> bool {
    let slots = executor.slots();
    let mut did_work = false;
    if let Some((process, claim)) = slots.enter(slot) {
        if *seen_claim != claim {
            // A new occupant: the private word left by the previous one must not leak in.
            *seen_claim = claim;
            *local = 0;
        }
        if executor.is_stopping() {
            process.record_failure(Failure::Cancelled);
        }
        if process.failure().is_some() {
            slots.close(slot);
            did_work = true;
        } else {
            // A compute drain is made only by a worker that holds nothing taken (`step`).
            let mut cx = DrainContext::new(
                worker,
                local,
                process,
                executor.aggregate_budget(),
                executor,
                false,
            );
            let drained = process.drain_ref().drain(&mut cx);
            // Compute drains are shared: what one woke is published for any worker.
            if let Some(woken) = cx.take_offered() {
                executor.give_back(woken);
            }
            match drained {
                Drained::Progress => did_work = true,
                Drained::Sleep => slots.sleep(slot),
                Drained::Done(result) => {
                    if let Err(failure) = result {
                        process.record_failure(failure);
                    }
                    slots.close(slot);
                    did_work = true;
                }
            }
        }
        let seen = SlotHint { priority: process.priority(), budget: process.wake_budget() };
        *learned = Some((slot, seen));
    }
    if let Some(process) = slots.leave(slot) {
        *handed = executor.finalize_slot(slot, process, worker);
        did_work = true;
    }
    did_work
}

impl<F: Futex, P, const SLOTS: usize, const WORKERS: usize> Drop
    for Worker<'_, '_, F, P, SLOTS, WORKERS>
{
    fn drop(&mut self) {
        // What this worker had taken goes back, oldest first (behind anything pushed since):
        // its claimed hand-off, then its run.
        if let Some(process) = self.handed.take() {
            self.executor.give_back(process);
        }
        while let Some(process) = self.run.pop() {
            self.executor.requeue(process);
        }
        // Give the index back so a new worker may take it (e.g. a restarted thread).
        self.executor.release_worker(self.index);
    }
}

impl<F: Futex, P, const SLOTS: usize, const WORKERS: usize> core::fmt::Debug
    for Worker<'_, '_, F, P, SLOTS, WORKERS>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Worker").field("index", &self.index).field("spin", &self.spin).finish()
    }
}

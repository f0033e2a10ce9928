//! The block processor: a [`TileSchedule`] over a [`CommandBuffer`], drained as a compute
//! process by every worker at once.

use std::fmt;

use causeway_core::executor::{Drain, DrainContext, Drained};
use causeway_core::{CachePadded, Failure};

use super::schedule::{Completion, Cursor, Next, TileSchedule};
use super::{BlockError, CommandBuffer, OnFinish};
use causeway_runtime::contain::{contain, Panicked};
use causeway_runtime::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use causeway_runtime::sync::spin_hint;

/// How many times a drain call that finds every tile claimed pauses and looks again before it
/// returns [`Drained::Progress`]: a region of short tiles opens within this, so the worker claims its
/// first tile without leaving the process, while a long tile still lets the worker come back to
/// the executor (immediate work, shutdown) every few microseconds. Under loom a drain returns after
/// one pause (a yield there): looking again inside the call only repeats what the executor's
/// next drain does, and the model then reaches the return itself — the decision that must never
/// be `Sleep` — with fewer preemptions.
#[cfg(not(loom))]
const WAIT_SPINS: u32 = 256;
#[cfg(loom)]
const WAIT_SPINS: u32 = 0;

/// Tiles a drain call may run before it stops opening regions for itself: a completer below it
/// goes straight on into the region it opened (a transition then costs no round trip through
/// the executor), one at or above it returns [`Drained::Progress`] so the worker reaches a drain
/// boundary (immediate work, shutdown) at least this often. It never splits a claimed batch.
/// Under loom every completer returns, so the model covers the path that depends on the slot
/// staying runnable (going straight on is what the threaded tests cover).
#[cfg(not(loom))]
const DRAIN_TILE_BUDGET: u32 = 64;
#[cfg(loom)]
const DRAIN_TILE_BUDGET: u32 = 1;

/// Fields written once per region or execution, kept on a line away from the read-only ones.
struct Owner {
    /// The wake budget this processor last gave the process (rearm leaves one). Written only by
    /// region openers and completers, which the protocol orders one after the other.
    budget: AtomicU32,
    /// Set by `finish`, cleared by `reset`.
    finished: AtomicBool,
}

/// A [`Class::Compute`](causeway_core::executor::Class::Compute) process body that runs a
/// [`CommandBuffer`]: every worker that drains it claims tiles of the current region, and the
/// worker that completes a region's last tile opens the next one. See the
/// [module docs](super) for the protocol.
///
/// One execution per submission: after [`Drain::finish`] has run (the optional
/// [`OnFinish`] hook is called from it) and the process is completed, the owner calls
/// [`Process::rearm`](causeway_core::executor::Process::rearm) and [`reset`](Self::reset) and
/// submits again. Nothing is allocated per execution.
pub struct BlockProcessor<'k> {
    buffer: &'k CommandBuffer<'k>,
    hook: Option<&'k dyn OnFinish>,
    workers: u32,
    schedule: TileSchedule,
    owner: CachePadded<Owner>,
}

impl<'k> BlockProcessor<'k> {
    /// A processor ready to run `buffer` on an executor of `workers` workers (the wake budget of
    /// a region is its tile count capped at `workers`).
    pub fn new(buffer: &'k CommandBuffer<'k>, workers: usize) -> Result<Self, BlockError> {
        if workers == 0 {
            return Err(BlockError::NoWorkers);
        }
        let workers = u32::try_from(workers).unwrap_or(u32::MAX);
        Ok(BlockProcessor {
            buffer,
            hook: None,
            workers,
            schedule: TileSchedule::new(workers),
            owner: CachePadded::new(Owner {
                budget: AtomicU32::new(1),
                finished: AtomicBool::new(false),
            }),
        })
    }

    /// Calls `hook` with the outcome at the end of every execution (from [`Drain::finish`]).
    pub fn with_finish_hook(mut self, hook: &'k dyn OnFinish) -> Self {
        self.hook = Some(hook);
        self
    }

    /// The buffer this processor runs.
    pub fn buffer(&self) -> &'k CommandBuffer<'k> {
        self.buffer
    }

    /// Whether the last execution has finished (its `finish` has run) and no
    /// [`reset`](Self::reset) has followed.
    pub fn is_finished(&self) -> bool {
        // Acquire pairs with the Release store in `finish`.
        self.owner.finished.load(Ordering::Acquire)
    }

    /// Readies the processor for another execution of its buffer, after the previous one
    /// finished (call it beside `Process::rearm`, before submitting again). A processor
    /// submitted again without it finishes at once, successfully, without running a tile.
    pub fn reset(&self) -> Result<(), BlockError> {
        // Acquire pairs with the Release store in `finish`: every drain call of the finished
        // execution returned before it, so nothing touches the schedule any more.
        self.owner
            .finished
            .compare_exchange(true, false, Ordering::Acquire, Ordering::Relaxed)
            .map_err(|_| BlockError::NotFinished)?;
        self.schedule.reset();
        // `Process::rearm` leaves the process a budget of one.
        self.owner.budget.store(1, Ordering::Relaxed);
        Ok(())
    }

    /// Gives the process a wake budget of `tiles` capped at the worker count, if that changes
    /// it (a change moves the executor's shared aggregate, an RMW other workers feel).
    fn set_budget(&self, cx: &mut DrainContext<'_, '_>, tiles: u32) {
        let budget = tiles.min(self.workers);
        if self.owner.budget.load(Ordering::Relaxed) != budget {
            self.owner.budget.store(budget, Ordering::Relaxed);
            cx.set_wake_budget(budget);
        }
    }
}

impl BlockProcessor<'_> {
    /// The claiming loop of one drain call (see `drain`, which contains its panics).
    fn claim_and_run(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        let mut cursor = Cursor::new(self.buffer);
        let failed = cx.failure_flag();
        let mut waited = 0;
        let mut ran = 0u32;
        loop {
            match self.schedule.claim_with(&mut cursor) {
                Next::Claimed(mut held) => {
                    waited = 0;
                    let Some(recorded) = cursor.region() else {
                        // Unreachable: a successful claim leaves its region in the cursor.
                        return Drained::Done(Ok(()));
                    };
                    if held.opens_region() && held.region() == 0 {
                        self.set_budget(cx, recorded.tiles);
                    }
                    // This worker's claims of the region run back to back and are reported
                    // together once nothing is left to claim: one RMW of the completion count
                    // per worker and region rather than one per claim.
                    let mut tiles = held.tiles();
                    loop {
                        for tile in tiles {
                            if failed.is_set() {
                                // Leaving the claims unreported: the region never completes,
                                // and the process is finishing with its failure anyway.
                                return Drained::Done(Err(Failure::Cancelled));
                            }
                            recorded.kernel.run(tile);
                        }
                        match self.schedule.claim_more(&mut held) {
                            Some(more) => tiles = more,
                            // Every tile of the region is claimed (held reports keep it from
                            // completing, so it is still the current one).
                            None => break,
                        }
                    }
                    ran = ran.saturating_add(held.reported());
                    match self.schedule.complete(self.buffer, held) {
                        Completion::Pending => {}
                        Completion::Advanced { tiles, .. } => {
                            self.set_budget(cx, tiles);
                            if ran >= DRAIN_TILE_BUDGET {
                                // The slot stays runnable: this worker (and every other)
                                // comes straight back after its drain boundary.
                                return Drained::Progress;
                            }
                        }
                        Completion::Finished => return Drained::Done(Ok(())),
                    }
                }
                Next::Waiting => {
                    if cx.is_failed() {
                        return Drained::Done(Err(Failure::Cancelled));
                    }
                    spin_hint();
                    if waited == WAIT_SPINS {
                        // Progress, never Sleep: see "No lost wake-up" in the module docs.
                        return Drained::Progress;
                    }
                    waited += 1;
                }
                Next::Finished => return Drained::Done(Ok(())),
            }
        }
    }
}

impl Drain for BlockProcessor<'_> {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        // One containment per drain call, not per claim: entering it costs nothing until
        // something unwinds, and a kernel's panic ends the call the same way wherever it
        // happens. The panicking claim is left incomplete; the failure is recorded before any
        // other claimer can see one, so the execution fails with `Failure::PANICKED`, and
        // their `Cancelled` comes second and loses (the first failure wins).
        match contain(|| self.claim_and_run(cx)) {
            Ok(drained) => drained,
            Err(Panicked) => Drained::Done(Err(Failure::PANICKED)),
        }
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        // Release: pairs with the Acquire loads in `is_finished` and `reset`.
        self.owner.finished.store(true, Ordering::Release);
        if let Some(hook) = self.hook {
            hook.finished(outcome);
        }
    }
}

impl fmt::Debug for BlockProcessor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockProcessor")
            .field("buffer", self.buffer)
            .field("workers", &self.workers)
            .field("schedule", &self.schedule)
            .field("finished", &self.owner.finished.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

//! Loom models of the block processor's claim and election protocol (run with
//! `RUSTFLAGS="--cfg loom"`; see `scripts/test-all.sh`).
//!
//! - two claimers over two regions of two tiles, claimed one at a time (a claimer holds its
//!   report while it claims more of the region, as the processor does): every tile runs exactly
//!   once, exactly one claimer finishes the execution, and region 1 reads region 0's output
//!   through plain (loom-tracked) cells, so a missing happens-before edge is a reported race;
//! - the same across two executions, with the owner resetting while the other claimer may still
//!   be looking at the finished one (through a cursor whose memo is of the finished execution);
//! - the processor as a compute process on a two-worker executor: every tile once, `finish`
//!   and the hook once, after the last drain call;
//! - cancellation racing the workers: no tile twice, no tile of region 1 after a cancelled
//!   region 0, one `finish` with the failure.
#![cfg(loom)]

#[path = "../../../core/tests/loom_support/mod.rs"]
mod loom_support;

use causeway_core::executor::{
    Class, Drain, DrainContext, Drained, Executor, Process, RoundRobin, SpinPolicy,
};
use causeway_core::Failure;
use causeway_driver_cpu::block::{
    BlockProcessor, CommandBuffer, Completion, Cursor, Kernel, Next, OnFinish, TileSchedule,
};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_support::LoomFutex;

fn bounded(preemptions: usize, body: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.max_branches = 50_000;
    builder.check(body);
}

const TILES: u32 = 2;

/// Region 0's tiles each write their cell; region 1's tiles read both and count runs.
struct Dispatch {
    schedule: TileSchedule,
    cells: [UnsafeCell<u32>; TILES as usize],
    /// Runs per (region, tile), index `region * TILES + tile`.
    runs: [AtomicU32; 2 * TILES as usize],
    /// What region 1 read, summed (each cell holds the execution number).
    read: AtomicU32,
    /// The current execution's number, set by the owner before `reset`: a claim of an
    /// execution must see its own number (the reset's Release, the claim's Acquire).
    execution: AtomicU32,
    finishes: AtomicU32,
}

// SAFETY: `cells` is the data under test: region 0 writes each cell from one tile, region 1
// reads them after the protocol's barrier. If the protocol failed to order them, loom reports
// the race (it tracks every access through `with`/`with_mut`) instead of the test relying on it.
unsafe impl Sync for Dispatch {}

impl Dispatch {
    fn new() -> Dispatch {
        Dispatch {
            schedule: TileSchedule::new(2),
            cells: [UnsafeCell::new(0), UnsafeCell::new(0)],
            runs: [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)],
            read: AtomicU32::new(0),
            execution: AtomicU32::new(1),
            finishes: AtomicU32::new(0),
        }
    }

    fn run(&self, region: usize, tile: u32) {
        let execution = self.execution.load(Ordering::Relaxed);
        self.runs[region * TILES as usize + tile as usize].fetch_add(1, Ordering::Relaxed);
        if region == 0 {
            // SAFETY: see the `Sync` impl: loom checks this write against every other access.
            self.cells[tile as usize].with_mut(|cell| unsafe { *cell = execution });
        } else {
            for cell in &self.cells {
                // SAFETY: as above, for the read.
                let value = cell.with(|cell| unsafe { *cell });
                self.read.fetch_add(value, Ordering::Relaxed);
            }
        }
    }

    /// Claims and runs tiles until this thread has seen `executions` executions finish (its
    /// own completions or, via `finishes`, another thread's).
    fn drive(&self, executions: u32) {
        let nothing = |_: u32| {};
        let buffer = CommandBuffer::builder()
            .dispatch_batched(TILES, 1, &nothing)
            .dispatch_batched(TILES, 1, &nothing)
            .build()
            .unwrap();
        // One cursor for the whole loop, as the processor keeps one per drain call: across a
        // reset, its memo of the finished execution's epochs must simply never match again.
        let mut cursor = Cursor::new(&buffer);
        loop {
            // Acquire pairs with the Release increment below: the finished execution's runs.
            let finished = self.finishes.load(Ordering::Acquire);
            if finished == executions {
                return;
            }
            match self.schedule.claim_with(&mut cursor) {
                Next::Claimed(mut claim) => {
                    // As the block processor does: more of the region while holding the
                    // report, then one completion for all of it.
                    let mut tiles = claim.tiles();
                    loop {
                        for tile in tiles {
                            self.run(claim.region(), tile);
                        }
                        match self.schedule.claim_more(&mut claim) {
                            Some(more) => tiles = more,
                            None => break,
                        }
                    }
                    if self.schedule.complete(&buffer, claim) == Completion::Finished {
                        // Release: the owner resets after seeing this.
                        self.finishes.fetch_add(1, Ordering::Release);
                    }
                }
                Next::Waiting | Next::Finished => thread::yield_now(),
            }
        }
    }

    fn assert_runs(&self, each: u32) {
        for (index, runs) in self.runs.iter().enumerate() {
            assert_eq!(runs.load(Ordering::Relaxed), each, "tile {index} ran");
        }
    }
}

#[test]
fn two_claimers_run_every_tile_once_and_region_one_sees_region_zero() {
    bounded(6, || {
        let dispatch = Arc::new(Dispatch::new());
        let other = Arc::clone(&dispatch);
        let helper = thread::spawn(move || other.drive(1));
        dispatch.drive(1);
        helper.join().unwrap();
        dispatch.assert_runs(1);
        assert_eq!(dispatch.finishes.load(Ordering::Relaxed), 1, "one completer finished it");
        // Both region-1 tiles read both cells, each holding execution number 1.
        assert_eq!(dispatch.read.load(Ordering::Relaxed), 2 * TILES);
    });
}

#[test]
fn a_reset_while_the_other_claimer_still_looks_at_the_finished_execution() {
    bounded(3, || {
        let dispatch = Arc::new(Dispatch::new());
        let other = Arc::clone(&dispatch);
        let helper = thread::spawn(move || other.drive(2));
        dispatch.drive(1);
        // The owner: execution 1 finished (Acquire in `drive`); the helper may still be inside
        // `claim` on its terminal epoch, which the reset must leave harmless.
        dispatch.execution.store(2, Ordering::Relaxed);
        dispatch.schedule.reset();
        dispatch.drive(2);
        helper.join().unwrap();
        dispatch.assert_runs(2);
        // Execution 1's region 1 read 1 from both cells, execution 2's read 2.
        assert_eq!(dispatch.read.load(Ordering::Relaxed), 2 * TILES + 4 * TILES);
    });
}

type ModelExecutor = Executor<'static, LoomFutex, 2, 2>;

/// Everything one executor model needs, leaked for `'static` (one small leak per execution).
struct Fixture {
    executor: &'static ModelExecutor,
    process: &'static Process<'static>,
    runs: &'static [AtomicU32; 2],
    hooks: &'static AtomicU32,
    inside: &'static AtomicU32,
}

/// Counts drain calls in progress around the processor, so `finish` can check it sees none.
/// The count is SeqCst: it is the test's observer, not part of the protocol under test, and the
/// strongest order keeps it from hiding or inventing an overlap.
struct Guarded {
    processor: BlockProcessor<'static>,
    inside: &'static AtomicU32,
}

impl Drain for Guarded {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        self.inside.fetch_add(1, Ordering::SeqCst);
        let drained = self.processor.drain(cx);
        self.inside.fetch_sub(1, Ordering::SeqCst);
        drained
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        assert_eq!(self.inside.load(Ordering::SeqCst), 0, "finish during a drain call");
        self.processor.finish(outcome);
    }
}

/// Two regions of one tile each, run by a processor for two workers.
fn fixture() -> Fixture {
    let leak = |value| &*Box::leak(Box::new(value));
    let runs: &'static [AtomicU32; 2] = Box::leak(Box::new([AtomicU32::new(0), AtomicU32::new(0)]));
    let hooks: &'static AtomicU32 = leak(AtomicU32::new(0));
    let inside: &'static AtomicU32 = leak(AtomicU32::new(0));
    let first: &'static dyn Kernel = Box::leak(Box::new(move |_| {
        runs[0].fetch_add(1, Ordering::Relaxed);
    }));
    let second: &'static dyn Kernel = Box::leak(Box::new(move |_| {
        runs[1].fetch_add(1, Ordering::Relaxed);
    }));
    let hook: &'static dyn OnFinish = Box::leak(Box::new(move |_: Result<(), Failure>| {
        hooks.fetch_add(1, Ordering::Relaxed);
    }));
    let buffer: &'static CommandBuffer<'static> = Box::leak(Box::new(
        CommandBuffer::builder().dispatch(1, first).dispatch(1, second).build().unwrap(),
    ));
    let processor = BlockProcessor::new(buffer, 2).unwrap().with_finish_hook(hook);
    let guarded: &'static Guarded = Box::leak(Box::new(Guarded { processor, inside }));
    let process = Box::leak(Box::new(Process::new(guarded, Class::Compute)));
    let futex = LoomFutex::new();
    let executor = Box::leak(Box::new(ModelExecutor::new(futex, 2).unwrap()));
    Fixture { executor, process, runs, hooks, inside }
}

#[test]
fn the_processor_on_two_workers_runs_each_tile_once_and_finishes_once() {
    bounded(3, || {
        let Fixture { executor, process, runs, hooks, inside } = fixture();
        executor.submit(process).unwrap();
        let helper = thread::spawn(move || {
            let mut worker = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
            while executor.live() != 0 {
                if !worker.step() {
                    thread::yield_now();
                }
            }
        });
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        while !process.is_completed() {
            if !worker.step() {
                thread::yield_now();
            }
        }
        helper.join().unwrap();
        assert_eq!(process.failure(), None);
        assert_eq!([runs[0].load(Ordering::Relaxed), runs[1].load(Ordering::Relaxed)], [1, 1]);
        assert_eq!(hooks.load(Ordering::Relaxed), 1);
        assert_eq!(inside.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn cancellation_racing_the_workers_finishes_once_with_the_failure() {
    bounded(3, || {
        let Fixture { executor, process, runs, hooks, .. } = fixture();
        executor.submit(process).unwrap();
        let canceller = thread::spawn(move || executor.cancel(process));
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        while !process.is_completed() {
            if !worker.step() {
                thread::yield_now();
            }
        }
        canceller.join().unwrap();
        let runs = [runs[0].load(Ordering::Relaxed), runs[1].load(Ordering::Relaxed)];
        assert_eq!(hooks.load(Ordering::Relaxed), 1);
        match process.failure() {
            // The cancellation came after the last tile: nothing was left to stop.
            None => assert_eq!(runs, [1, 1]),
            Some(failure) => {
                assert_eq!(failure, Failure::Cancelled);
                assert!(runs[0] <= 1 && runs[1] <= runs[0], "{runs:?}");
            }
        }
    });
}

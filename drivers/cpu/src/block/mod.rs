//! The block processor: recorded command buffers of tiled dispatches, run by every worker of
//! the pool at once.
//!
//! - [`CommandBuffer`] — recorded once (allocation allowed), then immutable and reusable: a
//!   sequence of *regions*, each a [`Kernel`] called once per tile index `0..tiles`, with a
//!   barrier between every two regions.
//! - [`BlockProcessor`] — the [`Drain`](causeway_core::executor::Drain) of a
//!   [`Class::Compute`](causeway_core::executor::Class::Compute) process that executes a buffer;
//!   re-executed by `Process::rearm` + [`BlockProcessor::reset`] + submit, allocating nothing.
//! - [`TileSchedule`] — the lock-free claim and election protocol on its own (no kernels),
//!   which the processor drives and the loom model checks.
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use causeway_core::executor::{Class, Process};
//! use causeway_driver_cpu::block::{BlockProcessor, CommandBuffer};
//! use causeway_runtime::{CpuPool, PoolConfig};
//!
//! let sum = AtomicU32::new(0);
//! let add = |tile: u32| {
//!     sum.fetch_add(tile, Ordering::Relaxed);
//! };
//! let buffer = CommandBuffer::builder().dispatch(100, &add).dispatch(100, &add).build()?;
//! let processor = BlockProcessor::new(&buffer, 2)?;
//! let process = Process::new(&processor, Class::Compute);
//! CpuPool::scope(PoolConfig::with_workers(2), |executor| {
//!     executor.submit(&process).unwrap();
//!     while !process.is_completed() {
//!         std::thread::yield_now();
//!     }
//! })?;
//! assert_eq!(sum.load(Ordering::Relaxed), 2 * 4950);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Protocol
//!
//! One execution of a buffer of `n` regions uses `n + 1` consecutive *epochs* `b, b+1, …, b+n`:
//! epoch `b+k` is region `k`, epoch `b+n` is terminal. Two words carry all shared state:
//!
//! - the **claim word** `(epoch: u32, next: u32)` — the current region and its next unclaimed
//!   tile, in one 64-bit atomic;
//! - the **completion count** `done: u64` — tiles completed in this execution, over all
//!   regions; region `k` is complete when it reaches `end(k)`, the tiles of regions `0..=k`.
//!
//! ```text
//!  reset ─► (b, 0) ─claim─► (b, t) ─claim─► … ─► (b, T0)        every tile of region 0 claimed
//!                                                   │ its last completion: elected, stores
//!                                                   ▼
//!           (b+1, 0) ─claim─► … ─► (b+1, T1) ─► … ─► (b+n, 0)    terminal: claims see Finished
//!                                                   │ finish, then reset
//!                                                   ▼
//!                                               (b+n+1, 0)       region 0 of the next execution
//! ```
//!
//! A worker's drain call:
//!
//! ```text
//!  claim ─┬─ Claimed(tiles) ─► run each tile ─► claim again in the region until none is left
//!         │                    ─► complete all of them at once ─┬─ Pending ──► claim again
//!         │                                                     ├─ Advanced ─► set budget;
//!         │                                                     │   claim again, or Progress
//!         │                                                     │   once the call ran its
//!         │                                                     │   tile budget
//!         │                                                     └─ Finished ─► Done(Ok)
//!         ├─ Waiting ─► look again up to WAIT_SPINS times, then Progress
//!         └─ Finished ─► Done(Ok)
//!  (a failure seen before any tile or while waiting ─► Done(Err(Cancelled));
//!   a kernel that panics ─► Done(Err(PANICKED)), its claims left unreported)
//! ```
//!
//! - **Claim**: load the word; if its epoch names a region of the buffer and `next` is below the
//!   region's tile count, compare-exchange `(e, next)` → `(e, next + batch)` and run those
//!   tiles. The batch is guided — `ceil(left / 2·workers)`, capped per region — so claims are
//!   few while much is left and single tiles at the end; each tile is still in exactly one
//!   claim.
//!   A claiming loop keeps a [`Cursor`]: a memo of the last epoch it looked up and its region,
//!   so that only the first claim in a region maps the epoch to the region (a `base` load and a
//!   bounds check). Epochs never repeat (I2), so a memo can only be stale by not matching.
//! - **Complete**: add the batch size to `done`. A worker holds back the reports of its claims
//!   in a region while it can still claim there, and adds them in one go once every tile is
//!   claimed: the region cannot complete without them, so no other claim of the worker's can
//!   fall in a later epoch meanwhile, and `done` takes one RMW per worker and region instead of
//!   one per claim. The one caller whose addition makes `done`
//!   reach `end(k)` is the region's *completer*: it stores `(e+1, 0)`, opening region `k+1` (or
//!   the terminal epoch), sets the process's wake budget to `min(tiles(k+1), workers)` and
//!   goes on claiming in the region it opened — unless its drain call has already run a budget
//!   of tiles, in which case it returns `Progress` to give the executor a drain boundary. After
//!   the last region it returns `Done(Ok(()))`.
//!
//! Invariants:
//!
//! - **I1** Within an epoch, `next` only grows, and only by claims. The word leaves an epoch
//!   only by the completer's store, made when `next` has reached the tile count; from then on
//!   no claimer exchanges it, so the plain store races no claim.
//! - **I2** Epochs only grow, across regions and across executions (reset continues after the
//!   last epoch used), and every exchange expects the epoch it read: a worker that read the word
//!   in region `k` can never claim a tile of region `k + 1` or of a later execution, even when
//!   the tile counter has come back to the same value. (An ABA would take 2³² region
//!   transitions between one worker's load and its exchange.)
//! - **I3** (barrier) Every tile of region `k` happens before every tile of region `k + 1`:
//!   kernel writes → `done` increment (Release) → the completer's increment (Acquire, through
//!   the increments' release sequences) → its store of epoch `k + 1` (Release) → a claimer's
//!   load or exchange of that word (Acquire, through the claims' release sequence) → kernel.
//! - **I4** (election) Tiles of region `k + 1` are claimable only after region `k` completed
//!   (I1, I3), so while region `k` is open `done` lies in `end(k−1) ..= end(k)`, and the claims
//!   partition the region, so exactly one addition reaches `end(k)`: one completer per region.
//! - **I5** Each tile of each region of each execution runs exactly once: claims in an epoch
//!   cover `0..tiles` contiguously without overlap (I1), and a claim is only made in the
//!   current epoch (I2).
//!
//! Every ordering above Relaxed, and what it pairs with:
//!
//! | operation | ordering | pairs with |
//! | --- | --- | --- |
//! | claim: load, exchange of the claim word | Acquire | the completer's and `reset`'s Release stores of the word |
//! | complete: `done` increment | AcqRel | other claimers' increments (Release half → the completer's Acquire half) |
//! | complete: store of the next epoch | Release | claim's Acquire load and exchange |
//! | reset: store of the first epoch | Release | claim's Acquire load and exchange |
//! | finish: `finished` flag | Release | Acquire in `is_finished` and `reset` |
//!
//! # No lost wake-up
//!
//! For a compute process, [`Drained::Sleep`](causeway_core::executor::Drained::Sleep) puts the
//! whole slot to sleep — every worker skips it — until someone calls `Executor::wake`, and a
//! drain call has no way to do that. A block processor's events are its own tile completions,
//! so it never returns `Sleep`: its slot stays runnable from activation until the `Done` that
//! closes it. Then nothing can be lost: while the execution runs, either a tile of the current
//! region is unclaimed (any drainer claims it), or claimed tiles run inside drain calls, and
//! the last of them to complete opens the next region itself and either claims in it at once
//! or returns `Progress`, after which its worker scans again and finds the slot runnable. The execution
//! never waits for a parked worker; parked workers only add parallelism.
//!
//! The price is that a worker finding every tile claimed keeps coming back instead of parking
//! while a long tile runs elsewhere. It first looks at the claim word a bounded number of times
//! inside the call (a few microseconds), so a region of short tiles opens without a round trip
//! through the executor, and then returns `Progress` so the executor gets its drain boundary.
//!
//! # Cancellation and re-execution
//!
//! A kernel has no error to return, but it can panic, and the process can be cancelled or
//! inherit a failure. A panic is contained on the worker that ran the tile: its drain call
//! returns `Done(Err(PANICKED))`, the claim stays incomplete (so the region never completes) and
//! the process fails with [`Failure::PANICKED`]. Workers check for a failure before every tile
//! and while waiting, and stop claiming once they see it; kernels already running finish, and
//! the executor runs [`Drain::finish`](causeway_core::executor::Drain)
//! with the failure after the last drain call returned. `finish` marks the processor finished
//! and calls the [`OnFinish`] hook. The owner then rearms the process, calls
//! [`BlockProcessor::reset`] (which moves the epochs past everything the last execution used
//! and zeroes `done`) and submits again.

mod buffer;
mod processor;
mod schedule;

use std::fmt;

use causeway_core::Failure;

pub use buffer::{CommandBuffer, CommandBufferBuilder, MAX_REGIONS};
pub use processor::BlockProcessor;
pub use schedule::{Claim, Completion, Cursor, Next, TileSchedule};

/// The body of a tiled dispatch: called once per tile index, from any worker, concurrently for
/// different tiles. Implemented by every `Fn(u32) + Sync`.
pub trait Kernel: Sync {
    /// Runs tile `tile`. A panic fails the execution with `Failure::PANICKED` (see
    /// [Cancellation and re-execution](self#cancellation-and-re-execution)); the worker lives on.
    fn run(&self, tile: u32);
}

impl<F: Fn(u32) + Sync + ?Sized> Kernel for F {
    fn run(&self, tile: u32) {
        self(tile);
    }
}

/// Learns when an execution of a [`BlockProcessor`] finished, and how. Called from
/// `Drain::finish`, on the worker that finalizes the process, after every drain call of the
/// execution has returned but just before the executor marks the process completed (so
/// `Process::rearm` may still refuse for a moment). Implemented by every
/// `Fn(Result<(), Failure>) + Sync`.
pub trait OnFinish: Sync {
    /// The execution ended with `outcome`: `Ok(())` when every tile ran, the process's failure
    /// (cancellation, an inherited error, `Failure::PANICKED` for a kernel that panicked) otherwise.
    fn finished(&self, outcome: Result<(), Failure>);
}

impl<F: Fn(Result<(), Failure>) + Sync + ?Sized> OnFinish for F {
    fn finished(&self, outcome: Result<(), Failure>) {
        self(outcome);
    }
}

/// Why a command buffer or block processor could not be built or reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockError {
    /// More than [`MAX_REGIONS`] regions were recorded.
    TooManyRegions {
        /// The regions recorded.
        regions: usize,
    },
    /// A processor needs at least one worker.
    NoWorkers,
    /// The processor has not finished an execution since it was built or last reset.
    NotFinished,
    /// A backend has recorded as many command buffers as a 32-bit id names.
    TooManyCommandBuffers,
}

impl fmt::Display for BlockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockError::TooManyRegions { regions } => {
                write!(f, "{regions} regions recorded, at most {MAX_REGIONS} fit")
            }
            BlockError::NoWorkers => f.write_str("a block processor needs at least one worker"),
            BlockError::NotFinished => f.write_str("the block processor has not finished"),
            BlockError::TooManyCommandBuffers => {
                f.write_str("the backend has recorded as many command buffers as an id names")
            }
        }
    }
}

impl std::error::Error for BlockError {}

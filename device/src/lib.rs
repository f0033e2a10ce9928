//! # causeway-device
//!
//! The device layer every driver shares: queues whose operations wait on and signal timeline
//! semaphores, whatever hardware runs them. A driver implements a small [`Backend`] (see
//! [`backend`]); everything else about an operation lives here, once.
//!
//! A [`Device`] owns a [`CpuPool`](causeway_runtime::CpuPool) (its queue processes run there, whatever the driver), its
//! drivers' backends, a fixed set of queues, a fixed table of semaphores, registered host
//! functions and a stream-ordered memory pool, all sized when it is built ([`DeviceBuilder`]).
//! After that, submitting, running and signalling allocate nothing.
//!
//! Submitting an [`Op`] to a queue ([`Device::submit`]) happens on the calling thread and
//! never blocks on other work:
//!
//! 1. each wait is resolved against the queue's clock (`docs/src/architecture.md`, "Causal
//!    model"): **elided** (the queue already knows the signalling operation), **satisfied**
//!    (already reached), or — when the value is still to come — **device** (a semaphore
//!    timepoint armed now on the operation's wait gate; submit-before-signal is fine) or
//!    **held** (for queues without wait-before-signal, by their driver's capabilities or
//!    their configuration: the operation is held on the host until the value is reached, as
//!    binary-event APIs need);
//! 2. the operation gets the next epoch, its frontier becomes the queue's, and its signals
//!    are recorded as pending with that frontier;
//! 3. it enters the queue's ring and the queue process is woken.
//!
//! Each queue's process (see `queue`) takes its operations in order as their waits resolve,
//! woken directly by the timepoint callbacks — no polling — and issues each to its driver's
//! backend (or runs the layer's own work: barriers, host functions, stream-ordered memory).
//! Finishing an operation completes its signals, which wakes the next waiters the same way. A
//! failed wait, or failing work — a host function's error, a host function or kernel that
//! panics (contained on its worker, as [`Failure::Aborted`](causeway_core::semaphore::Failure::Aborted)) — fails the operation and every
//! semaphore it signals; shutting the device down cancels what has not run and fails its
//! signals as cancelled, so no host waiter is left hanging. A driver that breaks the seam's
//! contract fails its queue, not the device ([`DriverFault`]).
//!
//! The host takes part as a timeline of its own ([`HostTimeline`]): its steps wait on the
//! device's semaphores and signal them with what they learned, as queue operations do.
//!
//! Writing a driver: `docs/src/writing-a-driver.md`; the conformance suite every driver passes is
//! the `causeway-device-cts` crate.
//!
//! The guide's chapter on drivers and their set-up: `docs/src/drivers.md` in the repository.

// Under `--cfg loom` the whole crate builds on loom's atomics (see `sync`); its loom models
// (`tests/loom_*.rs`) check the queue protocols' own types through `loom_models`.

// Modules import only from the groups above their own: the crate's imports form a DAG
// (`docs/src/architecture.md`, "Where each piece lives").
//
// Leaves: names, bounds, configuration, errors, the public vocabulary of an operation and of
// its receipt, the plain-data bookkeeping of clocks, stream-ordered memory and speculation's
// lineages, cache hints and the wake hand-off between queue processes.
mod clock;
mod config;
mod error;
mod hand_off;
mod ids;
mod limits;
mod memory;
mod op;
mod prefetch;
mod receipt;
mod speculation;

// Atomics, the asymmetric barrier and spin-wait yields: std's and the runtime's, or loom's.
mod sync;

// The driver seam: the traits and the vocabulary drivers see. The handles it gives a driver
// reach the device through crate-private traits the device layer implements.
pub mod backend;
pub mod native_blocks;
pub mod recorded;

// A queue's state and its own protocols (ring, slots, run claims, wait counts, ownership, in a
// folder of its own), knowing nothing of the device; the semaphore table.
mod queue;
mod semaphores;

// The device: its shared state, the queue process (what runs operations, with the whole device
// in reach), its builder, submission and shutdown.
mod device;

// The host as a participant: a timeline of its own whose steps wait and signal; the host
// functions operations call.
mod host;
mod host_calls;

pub use backend::{
    Backend, BackendCapabilities, DeviceContext, Issue, Issued, MemoryOp, NativeWait, Origin,
    QueueWaiters,
};
pub use causeway_core::reuse::BlockId;
pub use causeway_runtime::blocking::HostWaitError;
pub use causeway_runtime::{HostExecutor, PoolConfig, FRONTIER_CAPACITY};
pub use config::{QueueConfig, SemaphoreConfig};
pub use device::{
    Device, DeviceBuilder, DeviceStats, DriverStats, QueueStats, ShutdownReport, StuckOp,
    BOOKKEEPING_GRACE, DROP_GRACE,
};
pub use error::{
    DeviceError, DriverCall, DriverError, DriverFault, HostCallsFull, Rejected, Resource,
    SemaphoreWaitError, Stall, SubmitError, Violation,
};
pub use host::{CommittedStep, HostStep, HostTimeline, StepTimedOut};
pub use host_calls::{HostCall, DEFAULT_SPARE_HOST_CALLS};
pub use ids::{
    allocate_axis, BufferId, CommandBufferId, DriverId, HostCallId, QueueId, SemaphoreId,
    MAX_SEMAPHORE_SLOTS,
};
pub use limits::{
    DeviceSemaphore, HistorySlots, DEFAULT_SEMAPHORE_HISTORY, MAX_SIGNALS, MAX_WAITS,
};
pub use memory::{MemoryError, MemoryStats};
pub use native_blocks::{NativeBlocks, NativeMemory};
pub use op::{
    Args, Invocation, Kernel, ObservedQueue, Observer, Op, OpEvent, OpStatus, Work, ARG_WORDS,
};
pub use receipt::{Receipt, WaitOutcome};
pub use recorded::Recorded;
pub use semaphores::SemaphoreError;
pub use speculation::CancelReport;

/// The queue protocols' own types, for the loom models (`tests/loom_*.rs`) only: not part of
/// the API, and built only under `--cfg loom`.
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_models {
    pub use crate::queue::head_waiters::{HeadWaiters, Sleep};
    pub use crate::queue::ownership::{RingOwnership, Running, TakeOver};
    pub use crate::queue::run_claim::{CancelWalk, Cancellers, Claimed, RunClaim};
    pub use crate::queue::wait_count::WaitCount;
}

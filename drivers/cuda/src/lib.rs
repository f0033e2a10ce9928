//! causeway's CUDA driver.
//!
//! CUDA has no timeline semaphores: binary events, and on capable devices 64-bit stream
//! memory operations. This crate runs causeway queues as CUDA streams behind the device
//! layer's seam ([`CudaBackend`]) and emulates each queue's timeline one of those two ways
//! ([`Emulation`]); see [`backend`] for the mapping.
//!
//! The CUDA driver library is loaded at run time (cudarc's `dynamic-loading`), so the crate
//! builds on machines with no CUDA installed, and [`CudaBackend::open`] answers
//! [`CudaError::NoDriver`] there without calling CUDA ([`driver_present`]).
//!
//! The emulation's bookkeeping is plain data code, tested on every machine:
//!
//! - [`events`]: the value → event map, the event pool and when an event may be recorded
//!   again;
//! - [`words`]: allocation of the timeline words, never handed out again while in flight;
//! - [`memory`]: the compute kernels' launch shapes and parameters (and the device buffers
//!   `compute` and `copy` work run on).
//!
//! Waits that cannot be issued yet (on a value whose signal is not submitted, or on another
//! driver's queue) are **held** by the device layer, the same logic every driver without
//! wait-before-signal shares; this crate keeps no second copy of it.
//!
//! In the guide: `docs/src/drivers.md` in the repository, "CUDA".

pub mod backend;
mod error;
pub mod events;
pub mod memory;
pub mod words;

pub use backend::{
    driver_present, CudaBackend, CudaCounts, CudaQueue, CudaTally, Emulation, EmulationChoice,
    MAX_QUEUES, SPIN_PTX,
};
/// The cudarc types an application lends its context and streams with
/// ([`CudaBackend::on_context`]), re-exported so both sides use the same cudarc.
pub use cudarc::driver::{CudaContext, CudaStream};
pub use error::{CudaError, NO_DRIVER};
pub use events::{EventError, EventSlot, EventTable, WaitPlan};
pub use memory::{ComputeKernel, DeviceBuffer, COMPUTE_PTX};
pub use words::{TimelineWords, WordError, WordIndex};

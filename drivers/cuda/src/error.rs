//! The CUDA driver's errors.

use std::fmt;

use cudarc::driver::sys::CUresult;

use crate::events::EventError;
use crate::words::WordError;

/// What the driver says when no CUDA driver library can be loaded; tests print it after
/// `skipped: `.
pub const NO_DRIVER: &str = "no CUDA driver (libcuda.so) on this machine";

/// Why the CUDA driver could not open a device, a queue or a command buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaError {
    /// `libcuda.so` (`nvcuda.dll`) is not installed: nothing of CUDA was called.
    NoDriver,
    /// A CUDA call failed.
    Call {
        /// The driver API function.
        call: &'static str,
        /// Its result.
        result: CUresult,
    },
    /// The device has no ordinal this large.
    NoDevice(usize),
    /// More queues than the timeline-word buffer holds.
    Words(WordError),
    /// The event bookkeeping refused a step (a broken invariant of the layer's).
    Events(EventError),
    /// A command buffer with no region, or a region of zero tiles.
    EmptyCommandBuffer,
    /// More command buffers than a 32-bit index names.
    TooManyCommandBuffers,
    /// The shipped kernel text holds a NUL byte.
    KernelText,
    /// Work was issued before the device started the backend.
    NotStarted,
    /// A device wait named queue `queue`, which has no stream or timeline of this driver.
    NotThisDriver {
        /// The queue's index.
        queue: usize,
    },
    /// A device wait named an operation that neither completed nor recorded its event: the
    /// device layer issues a native wait only after its origin, so this is a broken invariant.
    Unrecorded {
        /// The origin's queue index.
        queue: usize,
        /// Its epoch.
        epoch: u64,
    },
    /// A stream lent to [`CudaBackend::on_context`](crate::CudaBackend::on_context) belongs to
    /// another context than the one lent with it.
    ForeignStream,
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::NoDriver => f.write_str(NO_DRIVER),
            CudaError::Call { call, result } => write!(f, "{call} failed: {result:?}"),
            CudaError::NoDevice(ordinal) => write!(f, "no CUDA device {ordinal}"),
            CudaError::Words(error) => write!(f, "timeline words: {error}"),
            CudaError::Events(error) => write!(f, "events: {error}"),
            CudaError::EmptyCommandBuffer => {
                f.write_str("a command buffer needs at least one region of at least one tile")
            }
            CudaError::TooManyCommandBuffers => f.write_str("too many command buffers"),
            CudaError::KernelText => f.write_str("the kernel text holds a NUL byte"),
            CudaError::NotStarted => f.write_str("work issued before the device started"),
            CudaError::NotThisDriver { queue } => {
                write!(f, "queue {queue} is not a queue of the CUDA driver")
            }
            CudaError::Unrecorded { queue, epoch } => {
                write!(f, "operation {epoch} of queue {queue} has no event recorded")
            }
            CudaError::ForeignStream => {
                f.write_str("a lent stream belongs to another context than the one lent with it")
            }
        }
    }
}

impl std::error::Error for CudaError {}

impl From<WordError> for CudaError {
    fn from(error: WordError) -> CudaError {
        CudaError::Words(error)
    }
}

impl From<EventError> for CudaError {
    fn from(error: EventError) -> CudaError {
        CudaError::Events(error)
    }
}

/// `result` of `call` as a [`CudaError`].
pub(crate) fn check(call: &'static str, result: CUresult) -> Result<(), CudaError> {
    match result {
        CUresult::CUDA_SUCCESS => Ok(()),
        result => Err(CudaError::Call { call, result }),
    }
}

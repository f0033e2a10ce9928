//! The plain C types the functions share: handles, points, failures and outcomes.

use causeway_core::axis::Axis;
use causeway_core::frontier::Point;
use causeway_core::semaphore::Outcome;

use crate::status::{failure, Error};

/// A frontier (a small vector clock of at most `CW_FRONTIER_CAPACITY` points). Opaque bits;
/// all zero is the null handle. Made by `cw_frontier_create`, ended by `cw_frontier_destroy`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwFrontier {
    /// The handle's bits; 0 is the null handle.
    pub bits: u64,
}

/// A timeline semaphore with a frontier history (`cw_semaphore_create` / `cw_semaphore_destroy`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwSemaphore {
    /// The handle's bits; 0 is the null handle.
    pub bits: u64,
}

/// A queue clock: one queue's axis, epoch and knowledge (`cw_queue_create` / `cw_queue_destroy`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwQueue {
    /// The handle's bits; 0 is the null handle.
    pub bits: u64,
}

/// A timepoint: a callback to run when a semaphore reaches a value or fails
/// (`cw_timepoint_create` / `cw_timepoint_destroy`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwTimepoint {
    /// The handle's bits; 0 is the null handle.
    pub bits: u64,
}

/// One exact causal position: an epoch on an axis.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwPoint {
    /// The axis's bits (`cw_axis_make`).
    pub axis: u64,
    /// The position on it; 0 means "nothing on this axis".
    pub epoch: u64,
}

impl CwPoint {
    pub(crate) fn from_point(point: Point) -> CwPoint {
        CwPoint { axis: point.axis.to_bits(), epoch: point.epoch }
    }

    /// The point, if its axis bits are an axis.
    pub(crate) fn to_point(self) -> Result<Point, Error> {
        let axis = axis(self.axis)?;
        Ok(Point::new(axis, self.epoch))
    }
}

/// The axis `bits` encode, or an error naming the argument.
pub(crate) fn axis(bits: u64) -> Result<Axis, Error> {
    Axis::from_bits(bits)
        .ok_or(Error::InvalidArgument("the axis bits are not an axis (make one with cw_axis_make)"))
}

/// The code of a `CW_FAILURE_KIND_FAULTED` failure whose work panicked on the host (a host
/// callback, a CPU kernel); no device reports it.
pub const CW_PANIC_CODE: u32 = 0xFFFF_FFFF;
const _: () = assert!(CW_PANIC_CODE == causeway_core::semaphore::Failure::PANIC_CODE);

/// Why a timeline failed. `CW_FAILURE_KIND_NONE` means no failure.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CwFailureKind {
    /// No failure.
    None = 0,
    /// The work that would have signalled was cancelled (a device shut down before it ran).
    Cancelled = 1,
    /// The work that would have signalled was stopped through no fault of its own (its device
    /// shut down while it ran).
    Aborted = 2,
    /// The device executing the signaller was lost.
    DeviceLost = 3,
    /// Signals completed out of value order (a broken timeline contract).
    OutOfOrderSignal = 4,
    /// The signaller's device ran out of memory.
    OutOfMemory = 5,
    /// An application's status code (`code`): a host callback returned it, or a caller failed
    /// the timeline with it.
    Application = 6,
    /// The work ran and failed, on any driver: `code` is the driver's own status code, or
    /// `CW_PANIC_CODE` when the work (a host callback, a CPU kernel) panicked.
    Faulted = 7,
}

/// A failure: its kind (a `cw_failure_kind` value) and, for the application and device
/// kinds, a code. `{CW_FAILURE_KIND_NONE, 0}` is "no failure".
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwFailure {
    /// A `cw_failure_kind` value (an integer, so that any value C passes is defined: unknown
    /// kinds are refused with `CW_STATUS_INVALID_ARGUMENT`).
    pub kind: u32,
    /// The application's or device's code; 0 for the other kinds.
    pub code: u32,
}

/// What a wait learned: the value the timeline had reached, or its failure.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CwOutcome {
    /// The timeline's value when the wait ended (meaningful when `failure.kind` is NONE).
    pub value: u64,
    /// Why the wait failed; kind NONE when the value was reached.
    pub failure: CwFailure,
}

impl CwOutcome {
    pub(crate) fn from_outcome(outcome: Outcome) -> CwOutcome {
        match outcome {
            Ok(value) => CwOutcome { value, failure: failure::to_c(None) },
            Err(failed) => CwOutcome { value: 0, failure: failure::to_c(Some(failed)) },
        }
    }
}

//! Why a device could not be built and why a submission was refused.

use std::fmt;

use causeway_core::axis::AxisError;
use causeway_core::semaphore::{SignalError, SlotCountError};
use causeway_runtime::blocking::HostWaitError;
use causeway_runtime::PoolError;

#[cfg(doc)]
use crate::config::{QueueConfig, SemaphoreConfig};
use crate::ids::DriverId;
use crate::ids::SemaphoreId;
use crate::ids::{CommandBufferId, HostCallId, QueueId};
use crate::limits::{MAX_SIGNALS, MAX_WAITS};
use crate::memory::MemoryError;
use crate::op::Op;
#[cfg(doc)]
use crate::{Backend, Device, DeviceBuilder, Receipt};

/// Why a device could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum DeviceError {
    /// The worker pool could not start.
    Pool(PoolError),
    /// No axis left for a queue.
    Axis(AxisError),
    /// A queue was configured with no room for operations.
    ZeroCapacity(QueueId),
    /// A semaphore was configured with an unusable history size.
    History(SemaphoreId, SlotCountError),
    /// A queue names a driver that was not registered.
    UnknownDriver(QueueId, DriverId),
    /// A driver could not open a queue.
    Driver(QueueId, DriverError),
    /// More semaphore slots (declared and pooled) than a device can name.
    TooManySemaphores {
        /// Slots asked for.
        slots: usize,
        /// The most a device has ([`MAX_SEMAPHORE_SLOTS`](crate::MAX_SEMAPHORE_SLOTS)).
        max: usize,
    },
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::Pool(error) => write!(f, "worker pool: {error}"),
            DeviceError::Axis(error) => write!(f, "queue axis: {error}"),
            DeviceError::ZeroCapacity(queue) => write!(f, "queue {} has capacity 0", queue.index()),
            DeviceError::History(id, error) => write!(f, "{id}: {error}"),
            DeviceError::UnknownDriver(queue, driver) => {
                write!(
                    f,
                    "queue {} names driver {}, which is not registered",
                    queue.index(),
                    driver.0
                )
            }
            DeviceError::Driver(queue, error) => write!(f, "queue {}: {error}", queue.index()),
            DeviceError::TooManySemaphores { slots, max } => {
                write!(f, "{slots} semaphore slots asked for; a device has at most {max}")
            }
        }
    }
}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeviceError::Pool(error) => Some(error),
            DeviceError::Axis(error) => Some(error),
            DeviceError::History(_, error) => Some(error),
            DeviceError::Driver(_, error) => Some(error),
            DeviceError::ZeroCapacity(_)
            | DeviceError::UnknownDriver(..)
            | DeviceError::TooManySemaphores { .. } => None,
        }
    }
}

/// A bounded resource a submission needs and found full. Nothing was changed: the same
/// operation can be submitted again once the resource has room, which happens as earlier
/// work completes (the waiting forms of submit wait for exactly that).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resource {
    /// The queue's ring holds `capacity` operations that have not retired.
    QueueSlots {
        /// The ring size ([`QueueConfig::capacity`]).
        capacity: usize,
    },
    /// Signal number `signal`'s semaphore has every history slot taken by pending signals
    /// (plus the newest reached one, which is kept for late waiters).
    History {
        /// Index into [`Op::signals`].
        signal: usize,
        /// The semaphore's history slots ([`SemaphoreConfig::history`]).
        capacity: usize,
    },
    /// Every pooled semaphore slot is live or still used by operations in flight
    /// ([`Device::create_semaphore`]).
    Semaphores {
        /// Pooled slots ([`DeviceBuilder::semaphore_pool`]).
        capacity: usize,
    },
    /// Every stream-ordered allocation record is held by a reservation whose dealloca has not
    /// run yet.
    AllocationRecords {
        /// Records the device has ([`DeviceBuilder::allocation_records`]).
        capacity: usize,
    },
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Resource::QueueSlots { capacity } => {
                write!(f, "queue full: {capacity} operations in flight")
            }
            Resource::History { signal, capacity } => write!(
                f,
                "signal {signal}: all {capacity} history slots hold pending signals (or the newest reached one)"
            ),
            Resource::Semaphores { capacity } => {
                write!(f, "all {capacity} pooled semaphores are live or still in use")
            }
            Resource::AllocationRecords { capacity } => {
                write!(f, "all {capacity} allocation records are held by pending deallocas")
            }
        }
    }
}

/// Why room for a submission would never come from the work already submitted
/// ([`SubmitError::Stalled`], [`Device::stalled`]): for the full `resource` to free, an
/// operation must end that cannot — it (or one it waits for, transitively) waits for
/// `semaphore` to reach `value`, and no operation submitted so far signals that. Typically a
/// pipeline submitted stage by stage whose first stage waits for a later one (a buffer handed
/// back, say): submit the stages interleaved, so that each signal is submitted before a
/// history or ring fills with its waiters, or size the resource for the whole stage. Where
/// another thread will give the signal, [`Device::submit_timeout`] waits for it.
///
/// Decided from what has been submitted when the wait would begin: a signal another thread is
/// about to submit or give is not seen, and only semaphores no other device or process can
/// signal ([`Scope::QueueLocal`](causeway_core::scope::Scope::QueueLocal) and
/// [`DeviceLocal`](causeway_core::scope::Scope::DeviceLocal)) count as never signalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stall {
    /// The full resource.
    pub resource: Resource,
    /// The queue of the operation whose wait cannot end.
    pub queue: QueueId,
    /// That operation's tag ([`Op::tag`]).
    pub tag: u64,
    /// The semaphore it waits on.
    pub semaphore: SemaphoreId,
    /// The value it waits for, which no submitted operation signals.
    pub value: u64,
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, and no submitted work can free it: operation tagged {} on queue {} waits for \
             {} to reach {}, which no submitted operation signals (submit that signal first, \
             give the resource more room, or wait for another thread's signal with a timeout)",
            self.resource,
            self.tag,
            self.queue.index(),
            self.semaphore,
            self.value
        )
    }
}

/// Why a submission was refused. A refused submission changes nothing, except where noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// No such queue.
    UnknownQueue(QueueId),
    /// No such semaphore.
    UnknownSemaphore(SemaphoreId),
    /// No such host function.
    UnknownHostCall(HostCallId),
    /// No such command buffer.
    UnknownCommandBuffer(CommandBufferId),
    /// The queue's driver has no kernel for this kind of work.
    Unsupported {
        /// The driver ([`Backend::name`]).
        driver: &'static str,
    },
    /// More than [`MAX_WAITS`] waits.
    TooManyWaits(usize),
    /// More than [`MAX_SIGNALS`] signals.
    TooManySignals(usize),
    /// A bounded resource is full (backpressure): nothing changed; submit again once earlier
    /// work has completed, or use a waiting form of submit.
    Full(Resource),
    /// A waiting submission gave up at its deadline; the resource was still full.
    TimedOut(Resource),
    /// [`Device::submit`] found its resource full and did not wait: the room can only be
    /// freed by a signal that no operation submitted so far gives (see [`Stall`]). Nothing
    /// changed.
    Stalled(Stall),
    /// Wait number `wait` names a semaphore whose scope does not reach the queue.
    WaitOutOfScope {
        /// Index into [`Op::waits`].
        wait: usize,
    },
    /// Signal number `signal` was refused (it does not advance its timeline, say); nothing was
    /// submitted. A signal on a timeline that has failed is not refused: the operation is
    /// accepted doomed ([`Receipt::failure`]).
    Signal {
        /// Index into [`Op::signals`].
        signal: usize,
        /// Why.
        error: SignalError,
    },
    /// The stream-ordered pool refused the alloca or dealloca.
    Memory(MemoryError),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SubmitError::UnknownQueue(queue) => write!(f, "no queue {}", queue.index()),
            SubmitError::UnknownSemaphore(semaphore) => write!(f, "no live {semaphore}"),
            SubmitError::UnknownHostCall(call) => write!(f, "no host function {}", call.0),
            SubmitError::UnknownCommandBuffer(id) => write!(f, "no command buffer {}", id.0),
            SubmitError::Unsupported { driver } => {
                write!(f, "the {driver} driver cannot run this kind of work")
            }
            SubmitError::TooManyWaits(n) => write!(f, "{n} waits (at most {MAX_WAITS})"),
            SubmitError::TooManySignals(n) => write!(f, "{n} signals (at most {MAX_SIGNALS})"),
            SubmitError::Full(resource) => write!(f, "{resource}"),
            SubmitError::TimedOut(resource) => write!(f, "gave up waiting for room: {resource}"),
            SubmitError::Stalled(stall) => write!(f, "{stall}"),
            SubmitError::WaitOutOfScope { wait } => {
                write!(f, "wait {wait}: semaphore scope does not reach this queue")
            }
            SubmitError::Signal { signal, error } => write!(f, "signal {signal}: {error}"),
            SubmitError::Memory(error) => write!(f, "stream-ordered memory: {error}"),
        }
    }
}

impl std::error::Error for SubmitError {}

/// An operation [`Device::try_submit`] refused, handed back with the reason.
#[derive(Clone, Copy, Debug)]
pub struct Rejected<'a> {
    /// The operation, unchanged.
    pub op: Op<'a>,
    /// Why it was refused ([`SubmitError::Full`] when only room was missing).
    pub error: SubmitError,
}

impl fmt::Display for Rejected<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "operation tagged {} refused: {}", self.op.tag, self.error)
    }
}

impl std::error::Error for Rejected<'_> {}

/// Why a driver could not open a queue (its own error inside).
#[derive(Debug)]
pub struct DriverError {
    driver: &'static str,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl DriverError {
    /// `driver`'s error `source`.
    pub fn new(
        driver: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        DriverError { driver, source: source.into() }
    }

    /// The driver's name ([`Backend::name`]).
    pub fn driver(&self) -> &'static str {
        self.driver
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} driver: {}", self.driver, self.source)
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// A driver that broke the seam's contract, caught by the layer (see
/// [`Device::driver_faults`](crate::Device::driver_faults)). The layer contains the fault: the
/// queue is failed — its operations from then on fail as [`Failure::DeviceLost`] without
/// reaching the driver, so every waiter ends — and the device goes on.
///
/// [`Failure::DeviceLost`]: causeway_core::semaphore::Failure::DeviceLost
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverFault {
    /// The driver ([`Backend::name`]).
    pub driver: &'static str,
    /// The queue it was called for; `None` for a call about memory, which belongs to no queue.
    pub queue: Option<QueueId>,
    /// The operation it was called about ([`Op::tag`](crate::Op::tag)), if one.
    pub tag: Option<u64>,
    /// The call that broke the contract.
    pub call: DriverCall,
    /// What it did.
    pub violation: Violation,
}

/// The driver call a [`DriverFault`] happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DriverCall {
    /// [`Backend::check`], at submission.
    Check,
    /// [`Backend::issue`] (the work it ran with [`Issue::run_here`](crate::Issue::run_here)
    /// included).
    Issue,
    /// [`Backend::poll`].
    Poll,
    /// [`Backend::completed_on_host`].
    CompletedOnHost,
    /// [`Backend::is_running`], at shutdown.
    IsRunning,
    /// [`Backend::memory`].
    Memory,
    /// [`Backend::mirror_progress`].
    MirrorProgress,
}

/// How a driver broke the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// It panicked (unwound out of the call).
    Panicked,
    /// It ran one operation's work twice ([`Issue::run_here`](crate::Issue::run_here) called
    /// again): the second run was refused.
    RanTwice,
}

impl fmt::Display for DriverFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let violation = match self.violation {
            Violation::Panicked => "panicked",
            Violation::RanTwice => "ran an operation's work twice",
        };
        write!(f, "{} driver {violation} in {:?}", self.driver, self.call)?;
        if let Some(queue) = self.queue {
            write!(f, " on queue {}", queue.index())?;
        }
        if let Some(tag) = self.tag {
            write!(f, " (operation tagged {tag})")?;
        }
        f.write_str("; its queue fails every operation from then on")
    }
}

impl std::error::Error for DriverFault {}

/// [`Device::host_call`](crate::Device::host_call) found the device's host-function table
/// full: the builder sizes it ([`DeviceBuilder::spare_host_calls`](crate::DeviceBuilder::spare_host_calls)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostCallsFull {
    /// How many host functions the device holds.
    pub capacity: usize,
}

impl fmt::Display for HostCallsFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the device's {} host-function slots are all taken (DeviceBuilder::spare_host_calls \
             sizes the table)",
            self.capacity
        )
    }
}

impl std::error::Error for HostCallsFull {}

/// Why [`Device::wait`](crate::Device::wait) returned without the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SemaphoreWaitError {
    /// The device has no semaphore of that id (never declared, destroyed, or another
    /// device's).
    UnknownSemaphore(SemaphoreId),
    /// The wait itself ended first: the semaphore failed (the work that would have signalled
    /// it failed, was cancelled, or the device shut down) or the timeout passed.
    Wait(HostWaitError),
}

impl fmt::Display for SemaphoreWaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SemaphoreWaitError::UnknownSemaphore(id) => {
                write!(f, "no semaphore {id:?} on this device")
            }
            SemaphoreWaitError::Wait(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for SemaphoreWaitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SemaphoreWaitError::Wait(error) => Some(error),
            SemaphoreWaitError::UnknownSemaphore(_) => None,
        }
    }
}

//! The names a device hands out: queues, host functions, command buffers, buffers, and the
//! process-wide axis allocator every queue's name on the frontier comes from.

use std::fmt;

use causeway_core::axis::{Axis, AxisAllocator, AxisError, Domain};
use causeway_core::semaphore::Failure;

use crate::op::Invocation;
#[cfg(doc)]
use crate::Work;

/// Axes are never reused within a process, across devices included.
#[cfg(not(loom))]
static AXES: AxisAllocator = AxisAllocator::new(0);

// Under loom core's allocator is built on loom's atomics, which have no `const` constructor and
// live for one execution of a model: a static built lazily in each execution.
#[cfg(loom)]
loom::lazy_static! {
    static ref AXES: AxisAllocator = AxisAllocator::new(0);
}

/// Allocates a fresh axis on `machine` in `domain` (for host participants and channels that
/// live beside a device's queues).
pub fn allocate_axis(machine: u16, domain: Domain) -> Result<Axis, AxisError> {
    let ordinal = AXES.allocate(domain)?.ordinal();
    Axis::try_new(machine, domain, ordinal).ok_or(AxisError::Exhausted { domain })
}

/// A queue of a device (its index in creation order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueId(pub usize);

/// A registered host function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostCallId(pub u32);

/// A command buffer recorded with a driver (its numbering is the driver's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommandBufferId(pub u32);

/// A stream-ordered buffer name (index below the device's buffer count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferId(pub u32);

/// A host function a [`Work::Host`] operation calls, with the operation's tag and arguments.
pub type HostCall = Box<dyn Fn(&Invocation) -> Result<(), Failure> + Send + Sync>;

/// A driver registered with a device ([`DeviceBuilder::driver`](crate::DeviceBuilder::driver));
/// queues name theirs in [`QueueConfig::driver`](crate::QueueConfig::driver).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DriverId(pub u32);

/// A semaphore of a device: its slot and the slot's generation (see the `semaphores` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SemaphoreId {
    index: u32,
    generation: u32,
}

impl SemaphoreId {
    /// Slot `index` at generation word `generation` (odd while live; see `semaphores`).
    pub(crate) const fn new(index: u32, generation: u32) -> SemaphoreId {
        SemaphoreId { index, generation }
    }

    /// The slot's generation word when this name was handed out.
    pub(crate) const fn generation(self) -> u32 {
        self.generation
    }

    /// The slot (declared semaphores are numbered from 0 in declaration order; the pool's
    /// slots follow them).
    pub fn index(self) -> usize {
        self.index as usize
    }
}

impl fmt::Display for SemaphoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "semaphore {} (generation {})", self.index, self.generation / 2)
    }
}

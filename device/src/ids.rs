//! The names a device hands out: queues, host functions, command buffers, buffers, and the
//! process-wide axis allocator every queue's name on the frontier comes from.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

use causeway_core::axis::{Axis, AxisAllocator, AxisError, Domain};

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

/// A queue of a device: its index in creation order, and the tag of the device that made it,
/// so another device refuses it instead of taking it for one of its own queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueId {
    index: u32,
    device: DeviceTag,
}

impl QueueId {
    /// Queue `index` of the device tagged `device`.
    pub(crate) const fn new(device: DeviceTag, index: usize) -> QueueId {
        QueueId { index: index as u32, device }
    }

    /// Its index in its device's creation order (from 0): what a driver indexes its own
    /// per-queue state by.
    pub const fn index(self) -> usize {
        self.index as usize
    }

    /// Whether the device tagged `device` made it.
    pub(crate) const fn is_of(self, device: DeviceTag) -> bool {
        self.device.0 == device.0
    }
}

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "queue {}", self.index)
    }
}

/// A registered host function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostCallId(pub u32);

/// A command buffer recorded with a driver (its numbering is the driver's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommandBufferId(pub u32);

/// A stream-ordered buffer name (index below the device's buffer count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferId(pub u32);

/// A driver registered with a device ([`DeviceBuilder::driver`](crate::DeviceBuilder::driver));
/// queues name theirs in [`QueueConfig::driver`](crate::QueueConfig::driver).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DriverId(pub u32);

/// Bits of a [`SemaphoreId`]'s slot number; the bits above them hold its device's tag.
const SLOT_BITS: u32 = 20;
/// Semaphore slots a device can have (declared and pooled).
pub const MAX_SEMAPHORE_SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Distinct device tags: a name from one device reads as unknown on every other device built
/// within the next `DEVICE_TAGS - 1` builders of the process.
const DEVICE_TAGS: u32 = 1 << (u32::BITS - SLOT_BITS);

/// Which device builder handed out a name: every id a device gives out carries it, so an id of
/// another device is refused as unknown instead of naming one of this device's semaphores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct DeviceTag(u32);

impl DeviceTag {
    /// The next builder's tag (never 0, so no id that was never handed out carries a live
    /// tag by accident).
    pub(crate) fn next() -> DeviceTag {
        static BUILT: AtomicU32 = AtomicU32::new(0);
        // Relaxed: a counter only; nothing is published through it.
        let built = BUILT.fetch_add(1, Ordering::Relaxed);
        DeviceTag(built % (DEVICE_TAGS - 1) + 1)
    }
}

/// A semaphore of a device: its device, its slot and the slot's generation (see the
/// `semaphores` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SemaphoreId {
    /// The device's tag above [`SLOT_BITS`], the slot below.
    tagged_slot: u32,
    generation: u32,
}

impl SemaphoreId {
    /// Slot `index` (below [`MAX_SEMAPHORE_SLOTS`]) of the device tagged `device`, at
    /// generation word `generation` (odd while live; see `semaphores`).
    pub(crate) const fn new(device: DeviceTag, index: u32, generation: u32) -> SemaphoreId {
        SemaphoreId { tagged_slot: device.0 << SLOT_BITS | (index & SLOT_MASK), generation }
    }

    /// The slot's generation word when this name was handed out.
    pub(crate) const fn generation(self) -> u32 {
        self.generation
    }

    /// Whether the device tagged `device` handed this name out.
    pub(crate) const fn is_of(self, device: DeviceTag) -> bool {
        self.tagged_slot >> SLOT_BITS == device.0
    }

    /// The slot (declared semaphores are numbered from 0 in declaration order; the pool's
    /// slots follow them).
    pub fn index(self) -> usize {
        (self.tagged_slot & SLOT_MASK) as usize
    }
}

impl fmt::Display for SemaphoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "semaphore {} (generation {})", self.index(), self.generation / 2)
    }
}

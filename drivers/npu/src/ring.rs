//! The ring's geometry: where its parts live ([`RingLayout`]) and the free-running index
//! arithmetic of its producer ([`RingIndices`]), as plain data.
//!
//! Indices are free-running 32-bit counters — the tail counts descriptors published, the head
//! descriptors completed — that wrap at 2^32; a descriptor's slot is its index modulo the ring's
//! (power-of-two) size. Differences of indices are taken with wrapping subtraction, which is
//! exact while the ring holds at most 2^31 slots.

use core::fmt;

use crate::descriptor::DESCRIPTOR_BYTES;
use crate::memory::{Window, SEMAPHORE_SLOT_BYTES};
use crate::registers::{Register, RegisterIo};

/// Largest ring order: 2^16 slots (4 MiB of descriptors).
pub const MAX_RING_ORDER: u32 = 16;

/// Where a ring's parts live in the device's memory window, as the host programs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Bus address of slot 0 (64-byte aligned).
    pub ring_base: u32,
    /// log2 of the slot count (at most [`MAX_RING_ORDER`]).
    pub ring_order: u32,
    /// Bus address of the semaphore table (16-byte aligned), shared by the rings of a device.
    pub semaphore_base: u32,
    /// Slots in the semaphore table.
    pub semaphore_count: u32,
    /// Bus address of the ring's completion timeline, a 64-bit count of completed descriptors
    /// (8-byte aligned).
    pub completion_address: u32,
}

impl RingLayout {
    /// Slots in the ring (an order above [`MAX_RING_ORDER`], which [`validate`](Self::validate)
    /// refuses, counts as the maximum here, so nothing overflows on unchecked registers).
    pub const fn capacity(&self) -> u32 {
        let order = if self.ring_order > MAX_RING_ORDER { MAX_RING_ORDER } else { self.ring_order };
        1 << order
    }

    /// Bus address of the slot of descriptor `index` (wrapping, for a layout not validated).
    pub const fn slot_address(&self, index: u32) -> u32 {
        let slot = index & (self.capacity() - 1);
        self.ring_base.wrapping_add(slot * DESCRIPTOR_BYTES)
    }

    /// Checks the layout against `window`: every part inside it and aligned, the ring no larger
    /// than [`MAX_RING_ORDER`]. Once this passes, every slot and semaphore address the layout
    /// produces lies inside the window.
    pub fn validate(&self, window: &Window<'_>) -> Result<(), ConfigFault> {
        if self.ring_order > MAX_RING_ORDER {
            return Err(ConfigFault::RingTooLarge);
        }
        if !window.contains(self.ring_base, self.capacity() * DESCRIPTOR_BYTES, DESCRIPTOR_BYTES) {
            return Err(ConfigFault::RingOutsideWindow);
        }
        let table_bytes = self.semaphore_count.checked_mul(SEMAPHORE_SLOT_BYTES);
        if !table_bytes.is_some_and(|bytes| window.contains(self.semaphore_base, bytes, 16)) {
            return Err(ConfigFault::SemaphoresOutsideWindow);
        }
        if !window.contains(self.completion_address, 8, 8) {
            return Err(ConfigFault::CompletionOutsideWindow);
        }
        Ok(())
    }

    /// Writes the layout to the configuration registers (host side, while the ring is stopped).
    pub fn program(&self, registers: &impl RegisterIo) {
        registers.write(Register::RingBase, self.ring_base);
        registers.write(Register::RingOrder, self.ring_order);
        registers.write(Register::SemaphoreBase, self.semaphore_base);
        registers.write(Register::SemaphoreCount, self.semaphore_count);
        registers.write(Register::CompletionAddress, self.completion_address);
    }

    /// The layout the configuration registers hold (device side).
    pub fn read(registers: &impl RegisterIo) -> RingLayout {
        RingLayout {
            ring_base: registers.read(Register::RingBase),
            ring_order: registers.read(Register::RingOrder),
            semaphore_base: registers.read(Register::SemaphoreBase),
            semaphore_count: registers.read(Register::SemaphoreCount),
            completion_address: registers.read(Register::CompletionAddress),
        }
    }
}

/// Why the device refused a ring's configuration (the [`Fault`](Register::Fault) register).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigFault {
    /// The ring order exceeds [`MAX_RING_ORDER`].
    RingTooLarge,
    /// The ring is unaligned or not inside the memory window.
    RingOutsideWindow,
    /// The semaphore table is unaligned or not inside the memory window.
    SemaphoresOutsideWindow,
    /// The completion timeline is unaligned or not inside the memory window.
    CompletionOutsideWindow,
    /// The host published more descriptors than the ring holds (tail beyond head + size).
    TailOverrun,
}

impl ConfigFault {
    /// The fault register's value for this fault (never 0).
    pub const fn code(self) -> u32 {
        match self {
            ConfigFault::RingTooLarge => 1,
            ConfigFault::RingOutsideWindow => 2,
            ConfigFault::SemaphoresOutsideWindow => 3,
            ConfigFault::CompletionOutsideWindow => 4,
            ConfigFault::TailOverrun => 5,
        }
    }

    /// The fault a fault-register value stands for (`None` for 0 and unknown codes).
    pub const fn from_code(code: u32) -> Option<ConfigFault> {
        Some(match code {
            1 => ConfigFault::RingTooLarge,
            2 => ConfigFault::RingOutsideWindow,
            3 => ConfigFault::SemaphoresOutsideWindow,
            4 => ConfigFault::CompletionOutsideWindow,
            5 => ConfigFault::TailOverrun,
            _ => return None,
        })
    }
}

impl fmt::Display for ConfigFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigFault::RingTooLarge => "ring order too large",
            ConfigFault::RingOutsideWindow => "ring unaligned or outside the memory window",
            ConfigFault::SemaphoresOutsideWindow => {
                "semaphore table unaligned or outside the memory window"
            }
            ConfigFault::CompletionOutsideWindow => {
                "completion timeline unaligned or outside the memory window"
            }
            ConfigFault::TailOverrun => "more descriptors published than the ring holds",
        })
    }
}

impl core::error::Error for ConfigFault {}

/// The producer's indices: descriptors published (the tail) and descriptors whose status it has
/// collected (reaped). Slots from `reaped` to `tail` belong to the device; the rest are free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingIndices {
    order: u32,
    tail: u32,
    reaped: u32,
}

/// The ring has no free slot: reap completed descriptors, or wait for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingFull;

impl fmt::Display for RingFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the descriptor ring is full")
    }
}

impl core::error::Error for RingFull {}

impl RingIndices {
    /// An empty ring of `2^order` slots, both indices at `start` (0 after reset; any value, to
    /// test wrap-around). `order` is at most [`MAX_RING_ORDER`] (larger orders are clamped).
    pub const fn new(order: u32, start: u32) -> RingIndices {
        let order = if order > MAX_RING_ORDER { MAX_RING_ORDER } else { order };
        RingIndices { order, tail: start, reaped: start }
    }

    /// Slots in the ring.
    pub const fn capacity(&self) -> u32 {
        1 << self.order
    }

    /// Descriptors published and not reaped.
    pub const fn in_flight(&self) -> u32 {
        self.tail.wrapping_sub(self.reaped)
    }

    /// Free slots.
    pub const fn free(&self) -> u32 {
        self.capacity() - self.in_flight()
    }

    /// The tail: descriptors published so far (wrapping).
    pub const fn tail(&self) -> u32 {
        self.tail
    }

    /// The oldest descriptor not yet reaped (wrapping).
    pub const fn reaped(&self) -> u32 {
        self.reaped
    }

    /// Takes the next slot; its descriptor's index (the slot is `index % capacity`).
    pub fn push(&mut self) -> Result<u32, RingFull> {
        if self.free() == 0 {
            return Err(RingFull);
        }
        let index = self.tail;
        self.tail = self.tail.wrapping_add(1);
        Ok(index)
    }

    /// How many descriptors the device's `head` says are complete and not yet reaped. A head
    /// that claims more than is in flight (device memory is outside input) is believed only up
    /// to what is in flight.
    pub const fn reapable(&self, head: u32) -> u32 {
        let claimed = head.wrapping_sub(self.reaped);
        if claimed > self.in_flight() {
            self.in_flight()
        } else {
            claimed
        }
    }

    /// Reaps the oldest in-flight descriptor; its index, or `None` when none is in flight.
    pub fn reap(&mut self) -> Option<u32> {
        if self.in_flight() == 0 {
            return None;
        }
        let index = self.reaped;
        self.reaped = self.reaped.wrapping_add(1);
        Some(index)
    }
}

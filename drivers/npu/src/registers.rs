//! The register block of one ring, and the two ways of reaching it.
//!
//! Every register is a 32-bit word at a fixed offset (the [crate-level register
//! map](crate#register-map)). Each has exactly one writer — the host or the device — so no
//! access ever needs a read-modify-write: what one side accumulates (the interrupt count, the
//! doorbell) it keeps in a variable of its own and stores whole.
//!
//! Register accesses carry no ordering of their own; the protocol orders them with explicit
//! fences ([`producer`](crate::producer), [`engine`](crate::engine)), which is what both real
//! MMIO (a volatile access between barriers) and shared memory (a relaxed atomic between fences)
//! can offer.

use core::ptr::NonNull;

use crate::sync::{zeroed_word, AtomicU32, Ordering};

/// A register of the block; its discriminant is its byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Register {
    /// Host: bus address of the ring's first slot (64-byte aligned).
    RingBase = 0x00,
    /// Host: log2 of the ring's slot count.
    RingOrder = 0x04,
    /// Host: bus address of the semaphore table (16-byte aligned).
    SemaphoreBase = 0x08,
    /// Host: slots in the semaphore table.
    SemaphoreCount = 0x0C,
    /// Host: bus address of the ring's 64-bit completion timeline (8-byte aligned).
    CompletionAddress = 0x10,
    /// Host: [`Control::Run`] or [`Control::Stop`].
    Control = 0x14,
    /// Host: free-running count of descriptors published.
    Tail = 0x18,
    /// Host: written with the tail after each publication; the device's wake-up.
    Doorbell = 0x1C,
    /// Device: free-running count of descriptors completed (their slots may be reaped).
    Head = 0x20,
    /// Device: count of interrupts raised.
    InterruptStatus = 0x24,
    /// Host: the interrupt count it has seen; equal to the status, it asks for the next one.
    InterruptAcknowledge = 0x28,
    /// Device: why the ring's configuration was refused ([`ConfigFault`](crate::ConfigFault)
    /// code; 0 while none).
    Fault = 0x2C,
}

impl Register {
    /// Registers in the block.
    pub const COUNT: usize = 12;

    /// The register's byte offset in the block.
    pub const fn offset(self) -> usize {
        self as usize
    }

    /// The register's word index in the block.
    pub const fn index(self) -> usize {
        self.offset() / 4
    }
}

/// What the control register asks of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Control {
    /// Stop consuming (the reset value).
    Stop = 0,
    /// Validate the configuration registers and consume the ring.
    Run = 1,
}

/// Reads and writes of one register block, unordered (the protocol places fences around them).
pub trait RegisterIo {
    /// The register's current value.
    fn read(&self, register: Register) -> u32;

    /// Sets the register.
    fn write(&self, register: Register, value: u32);
}

impl<R: RegisterIo + ?Sized> RegisterIo for &R {
    fn read(&self, register: Register) -> u32 {
        (**self).read(register)
    }

    fn write(&self, register: Register, value: u32) {
        (**self).write(register, value);
    }
}

/// A register block in ordinary memory, shared by two threads or two processors: relaxed
/// atomic loads and stores, one per access. The software model and the loom models use it; so
/// may firmware that talks to its host through shared RAM.
#[derive(Debug)]
pub struct RegisterFile {
    words: [AtomicU32; Register::COUNT],
}

impl RegisterFile {
    /// Every register zero: control stopped, nothing published, nothing raised.
    #[cfg(not(loom))]
    pub const fn new() -> RegisterFile {
        RegisterFile { words: [const { zeroed_word() }; Register::COUNT] }
    }

    /// Every register zero: control stopped, nothing published, nothing raised.
    #[cfg(loom)]
    pub fn new() -> RegisterFile {
        RegisterFile { words: core::array::from_fn(|_| zeroed_word()) }
    }

    /// The word behind `register`, for a waiter that sleeps on it (a futex on the doorbell or
    /// the interrupt status).
    pub fn word(&self, register: Register) -> &AtomicU32 {
        &self.words[register.index()]
    }
}

impl Default for RegisterFile {
    fn default() -> RegisterFile {
        RegisterFile::new()
    }
}

impl RegisterIo for RegisterFile {
    fn read(&self, register: Register) -> u32 {
        self.word(register).load(Ordering::Relaxed)
    }

    fn write(&self, register: Register, value: u32) {
        self.word(register).store(value, Ordering::Relaxed);
    }
}

/// A register block behind a real MMIO window: one volatile access per read or write, never
/// merged, split or elided.
#[derive(Debug)]
pub struct VolatileRegisters {
    base: NonNull<u32>,
}

impl VolatileRegisters {
    /// The register block at `base`.
    ///
    /// # Safety
    ///
    /// `base` is the address of a mapped register block of this layout ([`Register::COUNT`]
    /// 32-bit registers, 4-byte aligned) that stays mapped for as long as the value lives, and
    /// that nothing accesses other than through volatile accesses.
    pub const unsafe fn new(base: NonNull<u32>) -> VolatileRegisters {
        VolatileRegisters { base }
    }

    fn address(&self, register: Register) -> *mut u32 {
        // `index` is below `Register::COUNT`, so this stays inside the block `new` was given
        // (`wrapping_add` keeps even that argument out of the pointer arithmetic's safety).
        self.base.as_ptr().wrapping_add(register.index())
    }
}

impl RegisterIo for VolatileRegisters {
    fn read(&self, register: Register) -> u32 {
        // SAFETY: the address is inside the mapped, aligned block that `new`'s caller vouched
        // for, and every access to it is volatile (`new`'s contract).
        unsafe { self.address(register).read_volatile() }
    }

    fn write(&self, register: Register, value: u32) {
        // SAFETY: as in `read`.
        unsafe { self.address(register).write_volatile(value) }
    }
}

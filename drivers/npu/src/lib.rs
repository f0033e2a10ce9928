//! The causeway NPU queue protocol, and a software model of the device that speaks it.
//!
//! An NPU-style accelerator takes work through a **ring** of fixed 64-byte descriptors in
//! memory it shares with the host, and a small **register block** per ring, reached only by
//! 32-bit MMIO accesses. The host writes descriptors and publishes them; the device's engine
//! consumes them in order — runs kernels (EXEC), stalls until a semaphore slot reaches a value
//! (WAIT: the device's native wait), writes semaphore values with release semantics (SIGNAL) —
//! and raises an interrupt. Everything but `model` is `no_std` without `alloc`, and uses only
//! 32-bit loads, stores and fences (no compare-and-swap), so the same code runs in the hosted
//! driver and on the Cortex-M0 controller; the default `hosted` feature adds the model.
//!
//! | module | side | what |
//! |---|---|---|
//! | [`registers`] | both | the register map, [`RegisterIo`]: [`VolatileRegisters`] (MMIO), [`RegisterFile`] (shared memory) |
//! | [`memory`] | both | the device's memory [`Window`], split 64-bit values, semaphore slots |
//! | [`descriptor`] | both | descriptor encoding and total decoding, completion statuses |
//! | [`ring`] | both | [`RingLayout`], [`RingIndices`] (free-running index arithmetic) |
//! | [`producer`] | host | [`Producer`]: publish, reap, arm the interrupt |
//! | [`engine`] | device | [`Engine`]: consume, stall, signal, complete, raise |
//! | `model` | device (hosted) | `DeviceModel`: engine threads, kernels, futex wake-ups |
//! | `backend` | host (hosted) | `NpuBackend`: the `npu` driver behind the device layer's seam, on the model |
//!
//! # Register map
//!
//! One block per ring; every register 32 bits and written by one side only, so neither side
//! ever needs a read-modify-write. Bus addresses are byte offsets into the device's memory
//! window.
//!
//! | offset | register | writer | meaning |
//! |---|---|---|---|
//! | 0x00 | `RingBase` | host | bus address of slot 0 (64-byte aligned) |
//! | 0x04 | `RingOrder` | host | log2 of the slot count (≤ 16) |
//! | 0x08 | `SemaphoreBase` | host | bus address of the semaphore table (16-byte aligned) |
//! | 0x0C | `SemaphoreCount` | host | slots in the semaphore table |
//! | 0x10 | `CompletionAddress` | host | bus address of the ring's 64-bit completion timeline |
//! | 0x14 | `Control` | host | 0 stop, 1 run (the device checks the layout on run) |
//! | 0x18 | `Tail` | host | descriptors published (free-running) |
//! | 0x1C | `Doorbell` | host | count of doorbell writes; each write wakes the engine |
//! | 0x20 | `Head` | device | descriptors completed (free-running); their slots may be reused |
//! | 0x24 | `InterruptStatus` | device | interrupts raised (free-running) |
//! | 0x28 | `InterruptAcknowledge` | host | the status the host has seen; equal, it asks for the next |
//! | 0x2C | `Fault` | device | [`ConfigFault`] code of a refused configuration, 0 if none |
//!
//! In memory, besides the ring: the **semaphore table**, 16 bytes per slot (value low, value
//! high, failure code, reserved), and per ring a **completion timeline**, the 64-bit count of
//! descriptors completed — the word a driver's queue timeline maps onto. 64-bit values are two
//! words written low half first and read high half first ([`memory`] explains why a torn read is
//! only ever an underestimate).
//!
//! # Descriptor layout
//!
//! | word | EXEC | WAIT | SIGNAL | BARRIER |
//! |---|---|---|---|---|
//! | 0 | header | header | header | header |
//! | 1 | status | status | status | status |
//! | 2 | kernel index | semaphore slot | semaphore slot | — |
//! | 3 | tile count | — | — | — |
//! | 4, 5 | — | value (low, high) | value (low, high) | — |
//! | 6, 7 | reserved | reserved | reserved | reserved |
//! | 8–15 | kernel arguments | — | — | — |
//!
//! Header: bits 0–7 opcode (1 EXEC, 2 WAIT, 3 SIGNAL, 4 BARRIER), bit 8 *chained* (same
//! operation as the previous descriptor: fails with it), bit 9 *interrupt* (raise on
//! completion), bits 10–31 reserved, zero. Status: 0 pending (the host writes it), 1 completed,
//! `0x101..=0x108` a [`CompletionError`] — the device writes it before releasing the head.
//!
//! A descriptor that is malformed (unknown opcode, reserved bits, a slot beyond the table), an
//! EXEC of an unknown kernel, a SIGNAL that does not advance its slot or a WAIT on a failed slot
//! completes with an error status; every descriptor chained after it fails as well, and a failed
//! SIGNAL marks its slot failed so WAITs on it fail rather than stall. Nothing on either side
//! panics or hangs on what the other wrote.
//!
//! # Ordering rules
//!
//! - **Producer:** write the slot → release fence → tail → release fence → doorbell
//!   ([`producer`]). A slot is written only after its previous descriptor was reaped: a full
//!   ring is backpressure ([`RingFull`]), never loss.
//! - **Device:** read the tail → acquire fence → read the slot; consume in order; a WAIT stalls
//!   the ring until its slot's value is reached (acquire); a SIGNAL writes its slot with release;
//!   completing writes the status, the completion timeline (release) and, after a release fence,
//!   the head; then a SeqCst fence, the acknowledge read, and the raise ([`engine`]).
//! - **Doorbell:** the engine goes idle only after reading the doorbell, an acquire fence and
//!   the tail again, and sleeps only while the doorbell still holds what it read
//!   ([`engine`](engine#going-idle-without-losing-a-doorbell)).
//! - **Interrupt:** the host acknowledges what it has seen, issues a SeqCst fence, re-checks,
//!   and sleeps only while the status still holds what it acknowledged
//!   ([`producer`](producer#the-interrupt-wait)).
//!
//! Both wake-up protocols are checked with loom (`tests/loom_ring.rs`).
//!
//! # Mapping causeway onto the ring
//!
//! The `npu` driver ([`backend`]) maps each causeway queue to a ring and one semaphore slot, the
//! queue's **progress**: the epoch of its last finished operation. An operation becomes one
//! WAIT per device wait (origin queue's slot ≥ origin epoch), one EXEC per region, chained so
//! that a failed WAIT skips the work, and a final SIGNAL of its own slot to its epoch. That
//! SIGNAL is not chained: a failed slot stays failed, so chaining it would fail every later
//! operation of the queue; the device layer fails the operation's causeway signals instead. An
//! operation retired on the host moves the slot with a host write. The ring's completion
//! timeline and head tell the driver which operations completed.
//!
//! A semaphore slot has **one writer at a time** — the ring whose SIGNAL advances it, or the
//! host mirroring a value reached elsewhere — because the device checks "does this value
//! advance" and writes the slot without compare-and-swap. The driver's mapping gives it: a
//! progress slot is signalled only by its own queue's ring, and written by the host only when
//! nothing of that queue is on the ring (every earlier operation has retired).
//!
//! In the guide: `docs/src/drivers.md` in the repository, "NPU" (the device model and its
//! firmware).
#![cfg_attr(not(feature = "hosted"), no_std)]

#[cfg(all(feature = "hosted", not(loom)))]
pub mod backend;
pub mod descriptor;
pub mod engine;
pub mod memory;
#[cfg(all(feature = "hosted", not(loom)))]
pub mod model;
pub mod producer;
pub mod registers;
pub mod ring;
mod sync;

#[cfg(all(feature = "hosted", not(loom)))]
pub use backend::{NpuBackend, NpuCounts, NpuError, NpuQueue, NpuTally};
pub use descriptor::{
    Command, CompletionError, CompletionStatus, Descriptor, DescriptorError, Limits, RawDescriptor,
    UnknownStatus, DESCRIPTOR_BYTES, EXEC_ARGUMENTS,
};
pub use engine::{Engine, ExecRequest, Step};
pub use memory::{SemaphoreState, Window};
pub use producer::{ArmedInterrupt, Producer, Reaped};
pub use registers::{Control, Register, RegisterFile, RegisterIo, VolatileRegisters};
pub use ring::{ConfigFault, RingFull, RingIndices, RingLayout};

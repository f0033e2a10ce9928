//! Bare-metal implementations of causeway's executor wait seam, [`Futex`], for
//! microcontrollers and NPU controller cores.
//!
//! On a single-core part the executor's one worker is the firmware's main loop, and whatever
//! wakes it (a semaphore signal that activates a process) runs in an interrupt handler. So
//! parking is "sleep until an interrupt has run", and the only thing to get right is the window
//! between checking the word and sleeping:
//!
//! - `InterruptFutex` (bare-metal Cortex-M and RISC-V) checks the word with interrupts masked and
//!   executes `WFI` inside that critical section. An interrupt arriving after the check stays
//!   pending, a pending interrupt ends `WFI` even while masked, and the handler runs as soon as
//!   the critical section ends, before `wait` returns. Wakes need no instruction at all.
//! - `EventFutex` (bare-metal Cortex-M) sleeps with `WFE` and wakes with `SEV`. The event register
//!   latches a `SEV` issued between the check and the `WFE`, so no wake is lost, and `SEV`
//!   reaches every core: this is the one to use when the waker may be another core.
//! - [`SpinFutex`] (every target) spins on the word: the fallback for cores without a sleep
//!   instruction worth using, and what the host tests of this crate run.
//! - [`BareMetalFutex`] names the best of these for the target being built.
//!
//! Untimed waits are the executor's only kind. A timed wait cannot sleep in `WFI` (nothing
//! would end it at the deadline), so each futex polls the word under an
//! [`embedded_hal::delay::DelayNs`] given with `with_delay`; without one ([`NoDelay`]) a timed
//! wait returns at once, a spurious wake-up the [`Futex`] contract allows.
//!
//! # Interrupt safety
//!
//! On bare-metal targets this crate turns on `causeway-core`'s `isr-safe` feature: every
//! semaphore lock is taken inside a `critical-section` critical section, so interrupt handlers
//! may signal semaphores, fire timepoints and release or wake processes (all lock-free on the
//! executor side).
//!
//! Core also keeps 64-bit atomics (the executor's idle mask, timeline values, failure words)
//! that handlers write. 32-bit cores emulate them through portable-atomic, whose default
//! emulation on cores with 32-bit CAS (Cortex-M3/4/7, RV32IMAC) is a table of spin locks: a
//! handler that interrupts the holder of the same lock spins forever. The
//! `critical-section-single-hart` feature therefore does two things for single-core firmware:
//! it supplies the critical-section implementation (PRIMASK on Cortex-M, `mstatus.MIE` on
//! RISC-V, through the `cortex-m` and `riscv` crates), and on cores with CAS it selects
//! portable-atomic's interrupt-masking emulation (`unsafe-assume-single-core`). Cores without
//! CAS (Cortex-M0/M0+) get CAS and 64-bit atomics from critical sections through core already.
//! Firmware that brings its own critical-section implementation (a multi-core part, an RTOS)
//! leaves the feature off and chooses portable-atomic's `unsafe-assume-privileged` itself.
//!
//! Only thread mode (the main loop) may wait: an interrupt handler that waited would wait for
//! itself.
//!
//! [`Futex`]: causeway_core::executor::Futex
//!
//! Where this crate sits among the layers: `docs/src/architecture.md` in the repository; the
//! firmware images that use it: `docs/src/testing.md`, "Tier 4".

#![no_std]

#[cfg(test)]
extern crate std;

mod delay;
#[cfg(all(target_arch = "arm", target_os = "none"))]
mod event;
#[cfg(any(
    all(target_arch = "arm", target_os = "none"),
    all(any(target_arch = "riscv32", target_arch = "riscv64"), target_os = "none")
))]
mod interrupt;
mod spinning;

pub use delay::{Delay, NoDelay, WaitBound};
#[cfg(all(target_arch = "arm", target_os = "none"))]
pub use event::EventFutex;
#[cfg(any(
    all(target_arch = "arm", target_os = "none"),
    all(any(target_arch = "riscv32", target_arch = "riscv64"), target_os = "none")
))]
pub use interrupt::InterruptFutex;
pub use spinning::SpinFutex;

/// The wait primitive this target should use: [`InterruptFutex`] here (masked check, `WFI`).
#[cfg(any(
    all(target_arch = "arm", target_os = "none"),
    all(any(target_arch = "riscv32", target_arch = "riscv64"), target_os = "none")
))]
pub type BareMetalFutex = InterruptFutex;

/// The wait primitive this target should use: [`SpinFutex`] here, because this crate knows no
/// sleep instruction with interrupt wake-up for it.
#[cfg(not(any(
    all(target_arch = "arm", target_os = "none"),
    all(any(target_arch = "riscv32", target_arch = "riscv64"), target_os = "none")
)))]
pub type BareMetalFutex = SpinFutex;

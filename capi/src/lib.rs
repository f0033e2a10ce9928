//! # causeway-capi
//!
//! causeway's C ABI. The header, `include/causeway.h`, is generated from this crate by cbindgen
//! and checked in (`tests/header.rs` fails when it is out of date); `docs/src/c-api.md` is the
//! guide for C users.
//!
//! Two halves:
//!
//! - **Core** (always; `no_std` without the `hosted` feature, with no allocator): axes and
//!   frontiers ([`frontier`]), timeline semaphores with a frontier history and timepoint
//!   callbacks ([`semaphore`]), queue clocks ([`queue`]). Objects live in fixed-size static
//!   tables; firmware links the static library built for its target.
//! - **Hosted** (the `hosted` feature, on by default): devices with CPU queues, host callbacks,
//!   semaphores, submission with backpressure, host waits, shutdown and statistics
//!   ([`device`]).
//!
//! The rules every function keeps: its name starts with `cw_`; it returns a [`CwStatus`] and,
//! on failure, leaves a message for [`cw_last_error_message`]; objects are opaque handles with
//! explicit create/destroy pairs, checked by generation, so a null, stale or wrong-type handle
//! is an error code, never undefined behaviour; and no panic crosses the boundary ([`status`]).

#![cfg_attr(not(feature = "hosted"), no_std)]

#[cfg(feature = "hosted")]
pub mod device;
mod exclusive;
pub mod frontier;
mod handle;
pub mod queue;
pub mod semaphore;
pub mod status;
pub mod types;

pub use status::{cw_last_error_message, CwStatus};

// The single-core critical-section implementation the semaphores' interrupt-safe locks use
// (linked only if the crate is named).
#[cfg(all(target_arch = "arm", target_os = "none"))]
use cortex_m as _;
#[cfg(all(target_arch = "riscv32", target_os = "none"))]
use riscv as _;

/// Bare metal has nowhere to unwind to: a panic — a bug in causeway, never a caller's input —
/// ends in the firmware's `cw_abort`, which must not return (reset, halt, or report and stop).
#[cfg(all(target_os = "none", not(feature = "hosted")))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    extern "C" {
        fn cw_abort() -> !;
    }
    // SAFETY: `cw_abort` is the firmware's, declared in causeway.h with exactly this signature.
    unsafe { cw_abort() }
}

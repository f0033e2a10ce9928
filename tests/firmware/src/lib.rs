//! Bare-metal test images for causeway, one per qemu machine:
//!
//! | target                         | qemu machine                | board          |
//! | ------------------------------ | --------------------------- | -------------- |
//! | `thumbv7em-none-eabihf`        | `qemu-system-arm mps2-an386`| Cortex-M4      |
//! | `thumbv6m-none-eabi`           | `qemu-system-arm microbit`  | Cortex-M0 (no CAS: portable-atomic over critical sections) |
//! | `riscv32imac-unknown-none-elf` | `qemu-system-riscv32 virt`  | RV32IMAC       |
//!
//! The same test body runs on all three; only [`board`] (timer, interrupt handler, name)
//! differs. Four images:
//!
//! - `selftest`: core's causal cases ([`causal`]), the executor driven by one worker stepping
//!   ([`executor_cases`]), and the interrupt-driven activation test ([`activation`]): a timer
//!   interrupt signals a semaphore whose timepoint releases a process while the main loop is
//!   parked in the platform wait, which must wake and run that process exactly once.
//! - `controller`: a 4-queue controller ([`controller`]), the image whose flash and RAM are
//!   measured against the size budget.
//! - `npu_controller`: the NPU controller ([`npu`]): three descriptor rings consumed by
//!   causeway-core's executor with `causeway-driver-npu`'s engine, WAITs resolved with
//!   frontiers, fed by a host in the image; it has a size budget of its own.
//! - `npu_cost`: the same controller, measuring instructions per descriptor under qemu's
//!   `-icount` and printing them.
//!
//! Each image reports through semihosting and exits with status 0 on success and non-zero on
//! the first failed assertion (the panic handler exits 101), so qemu's own exit status is the
//! verdict. `scripts/firmware.sh` builds and runs them.
//!
//! In the guide: `docs/src/testing.md` in the repository, "Tier 4".

#![no_std]

pub mod activation;
pub mod board;
pub mod causal;
pub mod controller;
pub mod executor_cases;
pub mod harness;
pub mod npu;
pub mod ticks;

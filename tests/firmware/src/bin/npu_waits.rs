//! The NPU controller's WAIT report: the `npu_controller` run (same rings, same pipeline, same
//! faults), then how the controllers disposed of the WAIT descriptors they consumed, printed over
//! semihosting for the script to show. The budget image stays free of formatting code; this one
//! exists to make the controller's counts visible. Exits 0 when the run passed, 1 when it
//! failed, 101 on a panic.

#![no_std]
#![no_main]

use causeway_firmware_tests::board;
use causeway_firmware_tests::npu::scenario::{self, Verdict};
use semihosting::println;

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    board::init();
    let verdict = scenario::run();
    if let Some((waits, errors)) = scenario::totals() {
        println!(
            "npu controller on {}: WAIT descriptors emitted {}: elided {}, satisfied {}, \
             stalled {}, failed {}; descriptors completed with an error {}",
            board::NAME,
            waits.emitted,
            waits.elided,
            waits.satisfied,
            waits.stalled,
            waits.failed,
            errors
        );
    }
    let status = match verdict {
        Verdict::Passed => 0,
        Verdict::Failed => 1,
    };
    semihosting::process::exit(status)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::eprintln!("npu controller FAILED on {}: {info}", board::NAME);
    semihosting::process::exit(101)
}

//! The NPU controller image: the one its size budget is measured on. Reports only through its
//! semihosting exit status (0 passed, 1 failed, 101 panicked), so no formatting code is linked
//! and the image holds what such firmware would: the controller and a host to drive it.

#![no_std]
#![no_main]

use causeway_firmware_tests::board;
use causeway_firmware_tests::npu::scenario::{self, Verdict};

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    board::init();
    let status = match scenario::run() {
        Verdict::Passed => 0,
        Verdict::Failed => 1,
    };
    semihosting::process::exit(status)
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::process::exit(101)
}

//! The self-test image: core's causal cases, the executor stepped by one worker, and the
//! interrupt-driven activation rounds. Exits 0 when every case passes; the first failure
//! prints its message and exits 101.

#![no_std]
#![no_main]

use causeway_firmware_tests::{activation, board, causal, executor_cases, harness};
use semihosting::println;

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    board::init();
    println!("causeway firmware selftest on {}", board::NAME);
    let mut passed = 0;
    passed += harness::run("causal", causal::CASES);
    passed += harness::run("executor", executor_cases::CASES);
    passed += harness::run("activation", activation::CASES);
    println!("selftest: {passed} cases passed on {}", board::NAME);
    semihosting::process::exit(0)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::eprintln!("FAILED on {}: {info}", board::NAME);
    semihosting::process::exit(101)
}

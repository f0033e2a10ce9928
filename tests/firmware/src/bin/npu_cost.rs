//! The NPU cost image: instructions per descriptor of each kind, printed over semihosting. Run
//! it under `qemu -icount shift=6,sleep=off` (see `npu::cost`); exits 0 when every measurement
//! was made, 1 when one could not be, 101 on a panic.

#![no_std]
#![no_main]

use causeway_firmware_tests::board;
use causeway_firmware_tests::npu::cost;

#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
fn main() -> ! {
    board::init();
    let status = match cost::measure() {
        Ok(figures) => {
            cost::report(&figures);
            0
        }
        Err(error) => {
            semihosting::eprintln!("npu cost on {}: {error:?}", board::NAME);
            1
        }
    };
    semihosting::process::exit(status)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::eprintln!("npu cost FAILED on {}: {info}", board::NAME);
    semihosting::process::exit(101)
}

//! The device layer's conformance suite (`causeway-device-cts`) on the CPU driver: spin and
//! sleep kernels on the pool's workers, and a recorded command buffer whose kernel panics as the
//! failing kernel.
#![cfg(not(loom))]

use std::time::Duration;

use causeway_core::semaphore::Failure;
use causeway_device::{Args, Work};
use causeway_device_cts::{
    conformance_suite, Availability, DriverInstance, DriverUnderTest, FailingKernel, Kernels,
};
use causeway_driver_cpu::CpuBackend;

/// The CPU driver, as the suite sees it.
struct Cpu;

impl DriverUnderTest for Cpu {
    type Backend = CpuBackend;

    fn name(&self) -> &'static str {
        "cpu"
    }

    /// The pool's workers are always here.
    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn instance(&self) -> DriverInstance<CpuBackend> {
        let backend = CpuBackend::new();
        // A kernel panicking on its worker is contained there and fails its execution as
        // `Failure::PANICKED`.
        let panics: causeway_driver_cpu::DeviceKernel = Box::new(|_tile: u32, _: &Args| {
            panic!("the conformance suite's failing kernel (expected)")
        });
        let failing = backend.command_buffer(vec![(1, panics)]).expect("a one-tile recording");
        DriverInstance {
            backend,
            kernels: Kernels {
                short: Work::Spin(Duration::ZERO),
                short_copies: Vec::new(),
                long: Work::Sleep(Duration::from_millis(100)),
                failing: Some(FailingKernel {
                    work: Work::Execute(failing),
                    code: Failure::PANIC_CODE,
                }),
            },
            native_waits: None,
            after_case: None,
        }
    }
}

conformance_suite!(Cpu);

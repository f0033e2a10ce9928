//! The device layer's conformance suite (`causeway-device-cts`) on the NPU driver over its
//! software device model: kernels are EXEC descriptors of recorded command buffers, device
//! waits between NPU queues are WAIT descriptors (counted against the layer's device waits),
//! and the ring is the smallest the driver allows, so the backpressure case fills it.
#![cfg(all(feature = "hosted", not(loom)))]

use std::time::Duration;

use causeway_device::{Args, Work};
use causeway_device_cts::{
    conformance_suite, Availability, DriverInstance, DriverUnderTest, FailingKernel, Kernels,
};
use causeway_driver_npu::backend::MIN_RING_ORDER;
use causeway_driver_npu::{CompletionError, NpuBackend};

/// The NPU driver on its device model, as the suite sees it.
struct Npu;

impl DriverUnderTest for Npu {
    type Backend = NpuBackend;

    fn name(&self) -> &'static str {
        "npu"
    }

    /// The device model is software: it is always here.
    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn instance(&self) -> DriverInstance<NpuBackend> {
        let backend = NpuBackend::new().with_ring_order(MIN_RING_ORDER).expect("the smallest ring");
        let short = backend.command_buffer(vec![(1, Box::new(|_tile: u32, _: &Args| {}))]);
        let long = backend.command_buffer(vec![(
            1,
            Box::new(|_tile: u32, _: &Args| std::thread::sleep(Duration::from_millis(100))),
        )]);
        // A kernel that panics on the device model: the device completes its EXEC with the
        // kernel-failed code, which the driver reports as `Failure::Faulted(code)`.
        let failing = backend.command_buffer(vec![(
            1,
            Box::new(|_tile: u32, _: &Args| {
                panic!("the conformance suite's failing NPU kernel (expected)")
            }),
        )]);
        let tally = backend.tally();
        DriverInstance {
            backend,
            kernels: Kernels {
                short: Work::Execute(short.expect("a one-tile recording")),
                short_copies: Vec::new(),
                long: Work::Execute(long.expect("a one-tile recording")),
                failing: Some(FailingKernel {
                    work: Work::Execute(failing.expect("a one-tile recording")),
                    code: CompletionError::KernelFailed.failure_code(),
                }),
            },
            native_waits: Some(Box::new(move || tally.counts().emitted)),
            after_case: None,
        }
    }
}

conformance_suite!(Npu);

//! The device layer's conformance suite (`causeway-device-cts`) on the CUDA driver, once per
//! timeline emulation: streams as queues, `tiles` kernels that busy-run for a set time, native
//! waits counted against the layer's device waits. Without a CUDA driver (`libcuda.so`) every
//! case prints `skipped: no CUDA driver (libcuda.so) on this machine` and passes; the test
//! command's summary repeats the reason.

use std::time::Duration;

use causeway_device::Work;
use causeway_device_cts::{Availability, DriverInstance, DriverUnderTest, Kernels};
use causeway_driver_cuda::{driver_present, CudaBackend, CudaCounts, EmulationChoice, NO_DRIVER};

/// The CUDA driver on device 0 with the emulation `choice`, as the suite sees it.
struct Cuda {
    name: &'static str,
    choice: EmulationChoice,
}

/// Copies of the short kernel: a recorded command buffer runs once at a time, so the
/// throughput cases rotate through these to keep several operations on the device.
const SHORT_COPIES: usize = 7;

impl DriverUnderTest for Cuda {
    type Backend = CudaBackend;

    fn name(&self) -> &'static str {
        self.name
    }

    /// Probes for the vendor library: the one thing that may legitimately be absent.
    fn availability(&self) -> Availability {
        if driver_present() {
            Availability::Available
        } else {
            Availability::Unavailable(NO_DRIVER.to_owned())
        }
    }

    fn instance(&self) -> DriverInstance<CudaBackend> {
        let mut backend =
            CudaBackend::open(0, self.choice).expect("a CUDA driver is present: device 0 opens");
        let mut record = |duration| {
            let recorded = backend.command_buffer(vec![(1, duration)]);
            Work::Execute(recorded.expect("a one-tile recording"))
        };
        let short = record(Duration::from_nanos(100));
        let short_copies = (0..SHORT_COPIES).map(|_| record(Duration::from_nanos(100))).collect();
        let long = record(Duration::from_millis(100));
        let tally = backend.tally();
        DriverInstance {
            backend,
            // A kernel that fails on purpose would need a faulting PTX kernel; the driver's
            // failure paths are its own tests'.
            kernels: Kernels { short, short_copies, long, failing: None },
            // A device wait is one native wait call, or none when its operation had completed
            // by issue (the event emulation): together they are the device waits.
            native_waits: Some(Box::new(move || {
                let CudaCounts { native, completed, .. } = tally.counts();
                native + completed
            })),
            after_case: None,
        }
    }
}

/// Stream memory operations where the device allows them, events otherwise.
mod best_emulation {
    causeway_device_cts::conformance_suite!(super::Cuda {
        name: "cuda",
        choice: super::EmulationChoice::Best
    });
}

/// Events even where stream memory operations are available.
mod event_emulation {
    causeway_device_cts::conformance_suite!(super::Cuda {
        name: "cuda (events)",
        choice: super::EmulationChoice::Events
    });
}

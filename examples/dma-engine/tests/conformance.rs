//! The device layer's conformance suite on the DMA engine driver: every case the layer's own
//! drivers pass, run against a driver written outside the tree. Its kernels are recorded
//! copies: a short one, a long one (a copy the engine's modelled bandwidth stretches to about
//! a tenth of a second) and one the engine refuses (a destination shorter than its source).
#![cfg(not(loom))]

use causeway_device::Work;
use causeway_device_cts::{
    conformance_suite, Availability, DriverInstance, DriverUnderTest, FailingKernel, Kernels,
};
use causeway_example_dma_engine::{DmaBackend, LENGTH_ERROR};

/// Bytes the long copy moves.
const LONG_COPY: usize = 1 << 20;

/// The engine's modelled bandwidth in these tests: the long copy takes about 100 ms.
const BANDWIDTH: u64 = 10 << 20;

/// The DMA engine, as the suite sees it.
struct DmaEngine;

impl DriverUnderTest for DmaEngine {
    type Backend = DmaBackend;

    fn name(&self) -> &'static str {
        "dma"
    }

    /// A software device: always here.
    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn instance(&self) -> DriverInstance<DmaBackend> {
        let mut dma = DmaBackend::new().with_bandwidth(BANDWIDTH);
        let mut buffer = |contents| dma.buffer(contents).expect("a few buffers");
        let (small, small_copy) = (buffer(vec![7; 64]), buffer(vec![0; 64]));
        let (large, large_copy) = (buffer(vec![7; LONG_COPY]), buffer(vec![0; LONG_COPY]));
        let too_small = buffer(vec![0; 8]);
        let mut copy = |source, destination| {
            Work::Execute(dma.copy(source, destination).expect("buffers of this engine"))
        };
        let short = copy(small, small_copy);
        let long = copy(large, large_copy);
        let refused = copy(small, too_small);
        DriverInstance {
            backend: dma,
            kernels: Kernels {
                short,
                short_copies: Vec::new(),
                long,
                failing: Some(FailingKernel { work: refused, code: LENGTH_ERROR }),
            },
            native_waits: None,
            after_case: None,
        }
    }
}

conformance_suite!(DmaEngine);

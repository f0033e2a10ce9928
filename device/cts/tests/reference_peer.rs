//! The suite's reference peer driver passes the suite itself, as the driver under test (a
//! second peer plays the foreign side): the foreign side of every cross-driver case keeps the
//! contract it is checked against.
#![cfg(not(loom))]

use causeway_device_cts::peer::{PeerBackend, PEER_FAULT_CODE};
use causeway_device_cts::{
    conformance_suite, Availability, DriverInstance, DriverUnderTest, FailingKernel, Kernels,
};

/// The reference peer, as the driver under test.
struct ReferencePeer;

impl DriverUnderTest for ReferencePeer {
    type Backend = PeerBackend;

    fn name(&self) -> &'static str {
        "reference peer"
    }

    /// A software engine: always here.
    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn instance(&self) -> DriverInstance<PeerBackend> {
        let (backend, kernels) = PeerBackend::new();
        DriverInstance {
            backend,
            kernels: Kernels {
                short: kernels.short,
                short_copies: Vec::new(),
                long: kernels.long,
                failing: Some(FailingKernel { work: kernels.failing, code: PEER_FAULT_CODE }),
            },
            native_waits: None,
            after_case: None,
        }
    }
}

conformance_suite!(ReferencePeer);

//! The suite catches drivers that break the contract: the reference peer with one deliberate
//! fault each fails the case that checks that part of the contract, with a message naming the
//! case and the driver.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, DeviceContext, DriverError, Issue, Issued, OpStatus, QueueConfig,
    QueueId, SubmitError, Work,
};
use causeway_device_cts::peer::{PeerBackend, PEER_FAILURE};
use causeway_device_cts::{
    cases, run_case, Availability, DriverInstance, DriverUnderTest, FailingKernel, Kernels,
};

/// What a broken driver gets wrong.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Reports its failing kernel's failure as `Aborted`, not the failure it declared.
    MisreportsItsFailure,
    /// Never says its own work has stopped at shutdown.
    NeverStops,
    /// Fails every fiftieth operation it is handed, as a driver dropping work under load would.
    FailsEveryFiftieth,
}

/// The reference peer with `fault`.
struct Broken {
    peer: PeerBackend,
    fault: Fault,
    issued: AtomicU64,
}

impl Backend for Broken {
    fn name(&self) -> &'static str {
        "broken"
    }

    fn capabilities(&self) -> BackendCapabilities {
        self.peer.capabilities()
    }

    fn open_queue(&mut self, queue: QueueId, config: &QueueConfig) -> Result<(), DriverError> {
        self.peer.open_queue(queue, config)
    }

    fn check(&self, queue: QueueId, work: Work) -> Result<(), SubmitError> {
        self.peer.check(queue, work)
    }

    fn start(&'static self, device: DeviceContext) {
        self.peer.start(device);
    }

    fn issue(&'static self, issue: &mut Issue<'_>) -> Issued {
        let issued = self.issued.fetch_add(1, Ordering::Relaxed) + 1;
        if matches!(self.fault, Fault::FailsEveryFiftieth) && issued % 50 == 0 {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        }
        self.peer.issue(issue)
    }

    fn poll(&'static self, queue: QueueId, epoch: u64, work: Work) -> Option<OpStatus> {
        let status = self.peer.poll(queue, epoch, work);
        match (self.fault, status) {
            (Fault::MisreportsItsFailure, Some(OpStatus::Failed(_))) => {
                Some(OpStatus::Failed(Failure::Aborted))
            }
            _ => status,
        }
    }

    fn is_running(&self, queue: QueueId, work: Work, workers_abandoned: bool) -> bool {
        self.peer.is_running(queue, work, workers_abandoned)
    }

    fn stop(&self, deadline: Instant) -> bool {
        let stopped = self.peer.stop(deadline);
        stopped && !matches!(self.fault, Fault::NeverStops)
    }
}

/// The broken driver, described as a correct one would be.
struct BrokenDriver(Fault);

impl DriverUnderTest for BrokenDriver {
    type Backend = Broken;

    fn name(&self) -> &'static str {
        "broken"
    }

    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn instance(&self) -> DriverInstance<Broken> {
        let (peer, kernels) = PeerBackend::new();
        DriverInstance {
            backend: Broken { peer, fault: self.0, issued: AtomicU64::new(0) },
            kernels: Kernels {
                short: kernels.short,
                short_copies: Vec::new(),
                long: kernels.long,
                failing: Some(FailingKernel { work: kernels.failing, failure: PEER_FAILURE }),
            },
            native_waits: None,
            after_case: None,
        }
    }
}

#[test]
#[should_panic(
    expected = "conformance case this_drivers_failure_fails_foreign_waiters failed on the broken driver"
)]
fn a_driver_misreporting_its_failure_fails_the_failure_case() {
    run_case(
        BrokenDriver(Fault::MisreportsItsFailure),
        "this_drivers_failure_fails_foreign_waiters",
        cases::this_drivers_failure_fails_foreign_waiters,
    );
}

#[test]
#[should_panic(
    expected = "conformance case shutdown_with_work_in_flight_ends_every_operation failed on the broken driver"
)]
fn a_driver_that_never_stops_fails_the_shutdown_case() {
    run_case(
        BrokenDriver(Fault::NeverStops),
        "shutdown_with_work_in_flight_ends_every_operation",
        cases::shutdown_with_work_in_flight_ends_every_operation,
    );
}

#[test]
#[should_panic(
    expected = "conformance case native_wait_ping_pong_across_two_queues failed on the broken driver"
)]
fn a_driver_failing_work_under_load_fails_the_ping_pong_case() {
    run_case(
        BrokenDriver(Fault::FailsEveryFiftieth),
        "native_wait_ping_pong_across_two_queues",
        cases::native_wait_ping_pong_across_two_queues,
    );
}

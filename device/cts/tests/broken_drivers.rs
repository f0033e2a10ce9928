//! The suite catches drivers that break the contract: the reference peer with one deliberate
//! fault each fails the case that checks that part of the contract, with a message naming the
//! case and the driver.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, Device, DeviceContext, DriverCall, DriverError, Issue, Issued,
    Kernel, Op, OpStatus, QueueConfig, QueueId, Violation,
};
use causeway_device_cts::peer::{PeerBackend, PEER_FAULT_CODE};
use causeway_device_cts::{
    cases, run_case, Availability, DriverInstance, DriverUnderTest, FailingKernel, Kernels,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

/// What a broken driver gets wrong.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Reports its failing kernel's failure as `Aborted`, not the failure it declared.
    MisreportsItsFailure,
    /// Never says its own work has stopped at shutdown.
    NeverStops,
    /// Fails every fiftieth operation it is handed, as a driver dropping work under load would.
    FailsEveryFiftieth,
    /// Panics in `issue` (the third operation it is handed).
    PanicsInIssue,
}

/// The reference peer with `fault`.
struct Broken {
    peer: PeerBackend,
    fault: Fault,
    issued: AtomicU64,
}

impl Backend for Broken {
    type Queue = QueueId;

    fn name(&self) -> &'static str {
        "broken"
    }

    fn capabilities(&self) -> BackendCapabilities {
        self.peer.capabilities()
    }

    fn command_buffers(&self) -> u32 {
        self.peer.command_buffers()
    }

    fn open_queue(&mut self, queue: QueueId, config: &QueueConfig) -> Result<QueueId, DriverError> {
        self.peer.open_queue(queue, config)
    }

    fn start(&'static self, device: DeviceContext) {
        self.peer.start(device);
    }

    fn issue(&'static self, queue: &'static QueueId, issue: &mut Issue<'_>) -> Issued {
        let issued = self.issued.fetch_add(1, Ordering::Relaxed) + 1;
        match self.fault {
            Fault::FailsEveryFiftieth if issued % 50 == 0 => {
                return Issued::Finished(OpStatus::Failed(Failure::Aborted));
            }
            Fault::PanicsInIssue if issued == 3 => panic!("a broken driver panics in issue"),
            _ => {}
        }
        self.peer.issue(queue, issue)
    }

    fn poll(
        &'static self,
        queue: &'static QueueId,
        epoch: u64,
        kernel: Kernel,
    ) -> Option<OpStatus> {
        let status = self.peer.poll(queue, epoch, kernel);
        match (self.fault, status) {
            (Fault::MisreportsItsFailure, Some(OpStatus::Failed(_))) => {
                Some(OpStatus::Failed(Failure::Aborted))
            }
            _ => status,
        }
    }

    fn is_running(&self, queue: &QueueId, kernel: Kernel, workers_abandoned: bool) -> bool {
        self.peer.is_running(queue, kernel, workers_abandoned)
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
                failing: Some(FailingKernel { work: kernels.failing, code: PEER_FAULT_CODE }),
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

/// The layer catches a driver that panics in `issue` (see `causeway_device::DriverFault`): the
/// operation fails with a typed failure, every waiter ends, and the fault is recorded with the
/// driver, queue and operation; it does not stall the queue until the waiters time out.
#[test]
fn a_panic_in_issue_fails_the_operation_instead_of_stalling_its_queue() {
    let (peer, kernels) = PeerBackend::new();
    let broken = Broken { peer, fault: Fault::PanicsInIssue, issued: AtomicU64::new(0) };
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let driver = builder.driver(broken);
    let queue = builder.queue(QueueConfig::on(driver));
    let home = builder.endpoint(queue).expect("the queue's endpoint");
    let done = builder.semaphore(0, Scope::DeviceLocal, home);
    let device = builder.build().expect("a device with the broken driver");
    for value in 1..=3 {
        let op = Op {
            waits: &[],
            signals: &[(done, value)],
            work: kernels.short,
            tag: value,
            ..Default::default()
        };
        device.submit(queue, &op).expect("accepted");
    }
    let semaphore = device.semaphore(done).expect("the semaphore");
    // The first two operations run; the third's issue panics: its signal must fail, not hang.
    let outcome = wait(semaphore, 3, Some(Duration::from_secs(10)));
    assert_eq!(
        outcome,
        Err(HostWaitError::Failed(Failure::DeviceLost)),
        "the waiter on the operation whose issue panicked"
    );
    let faults = device.driver_faults();
    let [fault] = faults.as_slice() else { panic!("one fault recorded: {faults:?}") };
    assert_eq!(
        (fault.driver, fault.queue, fault.tag, fault.call, fault.violation),
        ("broken", Some(queue), Some(3), DriverCall::Issue, Violation::Panicked)
    );
}

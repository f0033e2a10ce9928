//! A driver that breaks the seam's contract — panics in `issue`, `poll`, `check` or `memory`,
//! lets a panic escape the work it runs, runs an operation's work twice — is caught by the
//! layer: the fault is recorded with the driver, queue, operation and call; the queue is
//! failed (its operations fail as device lost without reaching the driver); every waiter, on
//! the host and on other queues, ends; other queues go on; and the device shuts down.
#![cfg(not(loom))]

use std::time::Duration;

use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, BufferId, Device, DeviceContext, DriverCall, DriverError,
    DriverFault, Issue, Issued, Kernel, MemoryOp, Op, OpStatus, QueueConfig, QueueId, SemaphoreId,
    Violation, Work,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const LONG: Duration = Duration::from_secs(60);

/// The kernel on which the broken driver misbehaves; every other kernel it runs correctly.
const POISON: Duration = Duration::from_micros(13);

/// The alloca size on which its memory call panics.
const POISONED_BYTES: u64 = 13;

/// How the driver breaks the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Breakage {
    PanicInIssue,
    PanicInWork,
    RunTwice,
    PanicInPoll,
    PanicInCheck,
    PanicInMemory,
}

/// A driver that runs spin kernels on the issuing worker (or, for the poll breakage, reports
/// them pending and completes them at the first poll), and breaks the contract as told on
/// [`POISON`].
struct BrokenDriver(Breakage);

fn broken(what: &str) -> ! {
    panic!("deliberately broken driver: {what} (the test expects this)")
}

impl Backend for BrokenDriver {
    type Queue = ();

    fn name(&self) -> &'static str {
        "broken"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(true).with_timed_kernels()
    }

    fn open_queue(&mut self, _: QueueId, _: &QueueConfig) -> Result<(), DriverError> {
        Ok(())
    }

    fn check(&self, _: &(), kernel: Kernel) -> Result<(), causeway_device::SubmitError> {
        if self.0 == Breakage::PanicInCheck && kernel == Kernel::Spin(POISON) {
            broken("check");
        }
        Ok(())
    }

    fn start(&'static self, _: DeviceContext) {}

    fn issue(&'static self, _: &'static (), issue: &mut Issue<'_>) -> Issued {
        let poisoned = issue.kernel() == Kernel::Spin(POISON);
        match self.0 {
            Breakage::PanicInIssue if poisoned => broken("issue"),
            Breakage::PanicInWork if poisoned => issue.run_here(|| broken("work")),
            Breakage::RunTwice if poisoned => {
                let _ = issue.run_here(|| OpStatus::Ok);
                issue.run_here(|| OpStatus::Ok)
            }
            Breakage::PanicInPoll => Issued::Pending,
            _ => issue.run_here(|| OpStatus::Ok),
        }
    }

    fn poll(&'static self, _: &'static (), _: u64, kernel: Kernel) -> Option<OpStatus> {
        if kernel == Kernel::Spin(POISON) {
            broken("poll");
        }
        Some(OpStatus::Ok)
    }

    fn memory(&self, op: MemoryOp) -> Result<(), Failure> {
        match op {
            MemoryOp::Commit { bytes: POISONED_BYTES, .. } => broken("memory"),
            _ => Ok(()),
        }
    }

    fn is_running(&self, _: &(), _: Kernel, _: bool) -> bool {
        false
    }

    fn stop(&self, _: std::time::Instant) -> bool {
        true
    }
}

/// Runs the scenario every breakage shares and returns the faults the device recorded.
///
/// Queue `broken` (on the broken driver) runs the poisoned operation (tag 1, signalling `a`)
/// and then a correct one (tag 2, signalling `b`); queue `other`, on the same driver, waits
/// for `a` (tag 3, signalling `c`) and then runs a correct operation of its own (tag 4,
/// signalling `d`).
fn run(breakage: Breakage) -> (Vec<Fault>, QueueId) {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let driver = builder.driver(BrokenDriver(breakage));
    let broken_queue = builder.queue(QueueConfig::on(driver));
    let other = builder.queue(QueueConfig::on(driver));
    let home = builder.endpoint(broken_queue).unwrap();
    let [a, b, c, d] = [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    builder.memory(1, 1 << 20);
    let device = builder.build().unwrap();

    let poisoned = if breakage == Breakage::PanicInMemory {
        Work::Alloca { buffer: BufferId(0), bytes: POISONED_BYTES }
    } else {
        Work::Spin(POISON)
    };
    let fine = Work::Spin(Duration::from_micros(1));
    let submit =
        |queue, work, waits: &[(SemaphoreId, u64)], signals: &[(SemaphoreId, u64)], tag| {
            device.submit(queue, &Op { waits, signals, work, tag, ..Default::default() }).unwrap();
        };
    submit(broken_queue, poisoned, &[], &[(a, 1)], 1);
    submit(broken_queue, fine, &[], &[(b, 1)], 2);
    submit(other, fine, &[(a, 1)], &[(c, 1)], 3);
    submit(other, fine, &[], &[(d, 1)], 4);

    let value = |semaphore| wait(device.semaphore(semaphore).unwrap(), 1, Some(LONG));
    let lost = Err(HostWaitError::Failed(Failure::DeviceLost));
    // The poisoned operation fails, and with it everything that depends on it, on any queue.
    assert_eq!(value(a), lost, "{breakage:?}: the poisoned operation");
    assert_eq!(value(c), lost, "{breakage:?}: its waiter on another queue");
    if breakage == Breakage::PanicInMemory {
        // Memory belongs to no queue: the alloca fails, the queue goes on.
        assert_eq!(value(b), Ok(1), "{breakage:?}: the queue after a memory fault");
    } else {
        // The failed queue fails what follows without asking the driver.
        assert_eq!(value(b), lost, "{breakage:?}: the failed queue's next operation");
    }
    // Another queue of the same driver goes on.
    assert_eq!(value(d), Ok(1), "{breakage:?}: another queue of the driver");

    let faults = device.driver_faults().iter().map(Fault::of).collect();
    let report = device.shutdown(LONG);
    assert!(report.busy_queues.is_empty(), "{breakage:?}: {report:?}");
    (faults, broken_queue)
}

/// A recorded fault's fields, to compare.
#[derive(Debug, PartialEq, Eq)]
struct Fault(&'static str, Option<QueueId>, Option<u64>, DriverCall, Violation);

impl Fault {
    fn of(fault: &DriverFault) -> Fault {
        Fault(fault.driver, fault.queue, fault.tag, fault.call, fault.violation)
    }
}

fn fault(
    queue: Option<QueueId>,
    tag: Option<u64>,
    call: DriverCall,
    violation: Violation,
) -> Fault {
    Fault("broken", queue, tag, call, violation)
}

#[test]
fn a_panic_in_issue_fails_the_queue_and_every_waiter_ends() {
    let (faults, queue) = run(Breakage::PanicInIssue);
    assert_eq!(faults, [fault(Some(queue), Some(1), DriverCall::Issue, Violation::Panicked)]);
}

#[test]
fn a_panic_escaping_the_work_it_runs_is_the_drivers_fault() {
    let (faults, queue) = run(Breakage::PanicInWork);
    assert_eq!(faults, [fault(Some(queue), Some(1), DriverCall::Issue, Violation::Panicked)]);
}

#[test]
fn running_an_operations_work_twice_is_refused_the_second_time() {
    let (faults, queue) = run(Breakage::RunTwice);
    assert_eq!(faults, [fault(Some(queue), Some(1), DriverCall::Issue, Violation::RanTwice)]);
}

#[test]
fn a_panic_in_poll_fails_the_pending_operation_and_the_queue() {
    let (faults, queue) = run(Breakage::PanicInPoll);
    assert_eq!(faults, [fault(Some(queue), Some(1), DriverCall::Poll, Violation::Panicked)]);
}

#[test]
fn a_panic_in_check_fails_the_queue_at_submission_and_the_operation_at_its_turn() {
    let (faults, queue) = run(Breakage::PanicInCheck);
    assert_eq!(faults, [fault(Some(queue), None, DriverCall::Check, Violation::Panicked)]);
}

#[test]
fn a_panic_backing_memory_fails_the_alloca_only() {
    let (faults, _) = run(Breakage::PanicInMemory);
    assert_eq!(faults, [fault(None, None, DriverCall::Memory, Violation::Panicked)]);
}

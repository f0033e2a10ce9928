//! Semaphores created and destroyed while the device runs: a destroyed semaphore's ID is dead
//! at once, its timeline keeps working for operations already submitted, and its slot is
//! reused only after they have all retired.
#![cfg(not(loom))]

use std::thread;
use std::time::Duration;

use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_device::{
    Device, Op, QueueConfig, QueueId, Resource, SemaphoreConfig, SemaphoreError, SemaphoreId,
    SubmitError, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };
const PATIENCE: Option<Duration> = Some(Duration::from_secs(60));

fn device(pooled: usize) -> (Device, QueueId, SemaphoreId) {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    builder.driver(CpuBackend::new());
    let queue = builder.queue(QueueConfig::default());
    let gate = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let mut config = SemaphoreConfig::new(0, Scope::DeviceLocal, HOME);
    config.history = 2;
    builder.semaphore_pool(pooled, config);
    (builder.build().unwrap(), queue, gate)
}

fn op<'a>(waits: &'a [(SemaphoreId, u64)], signals: &'a [(SemaphoreId, u64)], tag: u64) -> Op<'a> {
    Op { waits, signals, work: Work::Barrier, tag, ..Default::default() }
}

#[test]
fn a_destroyed_semaphore_is_gone_for_new_work_at_once() {
    let (device, q, gate) = device(2);
    let s = device.create_semaphore(3).unwrap();
    assert_eq!(device.semaphore(s).map(|s| s.value()), Some(3));
    device.destroy_semaphore(s).unwrap();
    assert!(device.semaphore(s).is_none());
    assert_eq!(device.destroy_semaphore(s), Err(SemaphoreError::Unknown(s)));
    assert_eq!(device.destroy_semaphore(gate), Err(SemaphoreError::NotPooled(gate)));
    assert_eq!(
        device.submit(q, &op(&[], &[(s, 4)], 1)).unwrap_err(),
        SubmitError::UnknownSemaphore(s)
    );
    assert_eq!(device.in_flight(q), Some(0));
}

#[test]
fn a_slot_is_reused_only_after_the_work_submitted_before_its_destruction_retired() {
    let (device, q, gate) = device(2);
    let a = device.create_semaphore(0).unwrap();
    let b = device.create_semaphore(0).unwrap();
    assert_eq!(
        device.create_semaphore(0),
        Err(SemaphoreError::Full(Resource::Semaphores { capacity: 2 }))
    );
    // Submitted before `a` is destroyed: it still signals `a`, and a waiter still sees it.
    device.submit(q, &op(&[(gate, 1)], &[(a, 1)], 1)).unwrap();
    device.submit(q, &op(&[(a, 1)], &[(b, 1)], 2)).unwrap();
    device.destroy_semaphore(a).unwrap();
    assert_eq!(
        device.create_semaphore_timeout(0, Duration::from_millis(30)),
        Err(SemaphoreError::TimedOut(Resource::Semaphores { capacity: 2 }))
    );
    let fresh = thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(Duration::from_millis(20));
            device.semaphore(gate).unwrap().signal_external(1).unwrap();
        });
        device.create_semaphore_timeout(7, Duration::from_secs(60)).unwrap()
    });
    assert_eq!(wait(device.semaphore(b).unwrap(), 1, PATIENCE), Ok(1));
    assert_eq!(fresh.index(), a.index(), "the destroyed slot came back");
    assert_ne!(fresh, a, "under a new generation");
    assert!(device.semaphore(a).is_none());
    let fresh_semaphore = device.semaphore(fresh).unwrap();
    assert_eq!((fresh_semaphore.value(), fresh_semaphore.failure()), (7, None));
    assert_eq!(fresh_semaphore.with_history(|h| h.submitted()), 7);
}

#[test]
fn a_recycled_slot_forgets_the_failure_of_its_previous_timeline() {
    let (device, q, _) = device(1);
    let s = device.create_semaphore(0).unwrap();
    device.semaphore(s).unwrap().fail(Failure::Application(3));
    let (signal_s, wait_s) = ([(s, 1)], [(s, 1)]);
    // Signalling a failed timeline is accepted doomed: the operation fails in its turn.
    let doomed = device.submit(q, &op(&[], &signal_s, 1)).unwrap();
    assert_eq!(
        (doomed.failure, doomed.failed_signal),
        (Some(Failure::Aborted), Some((0, Failure::Application(3))))
    );
    device.submit(q, &op(&wait_s, &[], 2)).unwrap();
    assert_eq!(
        wait(device.semaphore(s).unwrap(), 1, PATIENCE),
        Err(HostWaitError::Failed(Failure::Application(3)))
    );
    device.destroy_semaphore(s).unwrap();
    let again = device.create_semaphore_timeout(0, Duration::from_secs(60)).unwrap();
    let signal_again = [(again, 1)];
    device.submit(q, &op(&[], &signal_again, 3)).unwrap();
    assert_eq!(wait(device.semaphore(again).unwrap(), 1, PATIENCE), Ok(1));
}

#[test]
fn a_pool_without_destructions_reports_full_without_waiting() {
    let (device, _, _) = device(1);
    device.create_semaphore(0).unwrap();
    assert_eq!(
        device.create_semaphore_timeout(0, Duration::from_secs(60)),
        Err(SemaphoreError::Full(Resource::Semaphores { capacity: 1 }))
    );
}

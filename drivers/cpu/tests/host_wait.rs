//! `Device::wait`, the host's one wait on a device's semaphores: the value once reached, the
//! failure of the work that would have signalled it, a timeout with the value seen, and a
//! semaphore of another device, refused there as unknown by `wait` and by `submit` alike.
#![cfg(not(loom))]

use std::time::Duration;

use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Device, HostWaitError, Invocation, Op, QueueConfig, SemaphoreWaitError, SubmitError, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::PoolConfig;

const PATIENCE: Option<Duration> = Some(Duration::from_secs(60));

#[test]
fn device_wait_reports_the_value_a_failure_a_timeout_or_an_unknown_semaphore() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let queue = builder.queue(QueueConfig::on(cpu));
    let home = builder.endpoint(queue).expect("the queue has an axis");
    let [reached, failing, never] =
        [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let fail = builder.host_call(|_: &Invocation| Err(Failure::Application(9)));
    let device = builder.build().expect("the device starts");

    device.submit(queue, &Op { signals: &[(reached, 5)], ..Op::default() }).expect("submitted");
    assert_eq!(device.wait(reached, 5, PATIENCE), Ok(5));

    let op = Op { signals: &[(failing, 1)], work: Work::Host(fail), ..Op::default() };
    device.submit(queue, &op).expect("submitted");
    assert_eq!(
        device.wait(failing, 1, PATIENCE),
        Err(SemaphoreWaitError::Wait(HostWaitError::Failed(Failure::Application(9))))
    );

    let timed_out = device.wait(never, 1, Some(Duration::from_millis(10)));
    assert_eq!(timed_out, Err(SemaphoreWaitError::Wait(HostWaitError::TimedOut { value: 0 })));

    // Semaphores of another device, slot numbers this device has too: refused, not confused
    // with this device's own.
    let mut other = Device::builder(PoolConfig::with_workers(1));
    let other_cpu = other.driver(CpuBackend::new());
    let other_queue = other.queue(QueueConfig::on(other_cpu));
    let other_home = other.endpoint(other_queue).expect("the queue has an axis");
    let foreign = [(); 4].map(|()| other.semaphore(0, Scope::DeviceLocal, other_home));
    assert_eq!(foreign[0].index(), reached.index(), "the same slot on both devices");
    for id in foreign {
        let unknown = device.wait(id, 1, PATIENCE).expect_err("another device's semaphore");
        assert_eq!(unknown, SemaphoreWaitError::UnknownSemaphore(id));
        assert!(unknown.to_string().contains("no semaphore"), "{unknown}");
        assert!(device.semaphore(id).is_none());
        let signals = [(id, 1)];
        let op = Op { signals: &signals, ..Op::default() };
        assert!(
            matches!(device.submit(queue, &op), Err(SubmitError::UnknownSemaphore(bad)) if bad == id)
        );
    }
    let other = other.build().expect("the other device starts");
    assert!(other.semaphore(reached).is_none(), "and this device's are unknown there");
    other.shutdown(Duration::from_secs(10));
    device.shutdown(Duration::from_secs(10));
}

//! Shutting a device down within a bound: work that never returns is failed and abandoned on
//! its worker, everything that has not run is cancelled (so no operation waiting on them is
//! left hanging), and the abandoned worker touches nothing when its work finally returns.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_device::{Args, Device, Observer, Op, OpEvent, OpStatus, QueueConfig, StuckOp, Work};
use causeway_driver_cpu::{CpuBackend, DeviceKernel};
use causeway_runtime::PoolConfig;

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };
const GRACE: Duration = Duration::from_millis(200);

/// Every finish, in order: (queue, tag, status).
#[derive(Default)]
struct Finishes(Mutex<Vec<(usize, u64, OpStatus)>>);

impl Observer for Finishes {
    fn op_event(&self, observed: causeway_device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let queue = observed.id.index();
        if let OpEvent::Finished { status, .. } = event {
            self.0.lock().unwrap().push((queue, tag, status));
        }
    }
}

impl Finishes {
    fn sorted(&self) -> Vec<(usize, u64, OpStatus)> {
        let mut finishes = self.0.lock().unwrap().clone();
        finishes.sort_by_key(|&(queue, tag, _)| (queue, tag));
        finishes
    }
}

/// Loops until `release` is set, then returns: work that does not end by itself.
fn hang_until(release: &AtomicBool) {
    while !release.load(Ordering::Acquire) {
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_host_function_that_never_returns_is_abandoned_and_everything_else_cancelled() {
    let release = Arc::new(AtomicBool::new(false));
    let entered = Arc::new(AtomicBool::new(false));
    let finishes = Arc::new(Finishes::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    builder.driver(CpuBackend::new());
    let q0 = builder.queue(QueueConfig::default());
    let q1 = builder.queue(QueueConfig::default());
    let s = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let t = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let u = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let hang = {
        let (release, entered) = (Arc::clone(&release), Arc::clone(&entered));
        builder.host_call(move |_| {
            entered.store(true, Ordering::Release);
            hang_until(&release);
            Ok(())
        })
    };
    builder.observer(finishes.clone());
    let device = builder.build().unwrap();
    let (signal_s, signal_t, wait_s, signal_u) = ([(s, 1)], [(t, 1)], [(s, 1)], [(u, 1)]);
    let stuck = Op {
        waits: &[],
        signals: &signal_s,
        work: Work::Host(hang),
        tag: 10,
        ..Default::default()
    };
    device.submit(q0, &stuck).unwrap();
    device
        .submit(
            q0,
            &Op {
                waits: &[],
                signals: &signal_t,
                work: Work::Barrier,
                tag: 11,
                ..Default::default()
            },
        )
        .unwrap();
    device
        .submit(
            q1,
            &Op {
                waits: &wait_s,
                signals: &signal_u,
                work: Work::Barrier,
                tag: 20,
                ..Default::default()
            },
        )
        .unwrap();
    while !entered.load(Ordering::Acquire) {
        thread::yield_now();
    }

    let report = device.shutdown(GRACE);
    assert_eq!(report.cancelled, 2, "{report:?}");
    assert_eq!(report.stuck.len(), 1, "{report:?}");
    let StuckOp { queue, tag, worker, running } = report.stuck[0];
    assert_eq!((queue, tag), (q0, 10));
    assert!(worker.is_some());
    assert!(running >= GRACE, "{running:?}");
    assert_eq!(report.abandoned_workers.len(), 1);
    assert!(report.leaked);
    let expected = vec![
        (q0.index(), 10, OpStatus::Failed(Failure::Aborted)),
        (q0.index(), 11, OpStatus::Cancelled),
        (q1.index(), 20, OpStatus::Cancelled),
    ];
    assert_eq!(finishes.sorted(), expected);

    // When the abandoned work finally returns, its worker touches nothing: no second finish.
    release.store(true, Ordering::Release);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(finishes.sorted(), expected);
}

#[test]
fn a_kernel_that_never_returns_is_reported_with_its_command_buffer_op() {
    let release = Arc::new(AtomicBool::new(false));
    let kernel: DeviceKernel = {
        let release = Arc::clone(&release);
        Box::new(move |tile: u32, _: &Args| {
            if tile == 0 {
                hang_until(&release);
            }
        })
    };
    let cpu = CpuBackend::new();
    let buffer = cpu.command_buffer(vec![(4, kernel)]).unwrap();
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    builder.driver(cpu);
    let q = builder.queue(QueueConfig::default());
    let done = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let device = builder.build().unwrap();
    let signal_done = [(done, 1)];
    device
        .submit(
            q,
            &Op {
                waits: &[],
                signals: &signal_done,
                work: Work::Execute(buffer),
                tag: 5,
                ..Default::default()
            },
        )
        .unwrap();
    thread::sleep(Duration::from_millis(20));
    let report = device.shutdown(GRACE);
    assert_eq!(report.stuck.len(), 1, "{report:?}");
    assert_eq!((report.stuck[0].queue, report.stuck[0].tag, report.stuck[0].worker), (q, 5, None));
    // The worker in the kernel, and any worker closing the processor's slot behind it (the
    // executor's slot protocol waits for every drainer to leave).
    assert!(!report.abandoned_workers.is_empty(), "{report:?}");
    release.store(true, Ordering::Release);
}

#[test]
fn a_device_with_nothing_running_shuts_down_whole() {
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    builder.driver(CpuBackend::new());
    let q = builder.queue(QueueConfig::default());
    let never = builder.semaphore(0, Scope::DeviceLocal, HOME);
    let device = builder.build().unwrap();
    let wait_never = [(never, 1)];
    device
        .submit(
            q,
            &Op {
                waits: &wait_never,
                signals: &[],
                work: Work::Barrier,
                tag: 1,
                ..Default::default()
            },
        )
        .unwrap();
    let report = device.shutdown(GRACE);
    assert_eq!(report.cancelled, 1, "{report:?}");
    let whole = (&report.stuck, &report.abandoned_workers, &report.busy_queues, report.leaked);
    assert_eq!(whole, (&vec![], &vec![], &vec![], false), "nothing stuck or leaked: {report:?}");
}

//! A device built on a runtime's workers (`Runtime::into_device_builder`): one pool runs the
//! processes submitted to the runtime before the handover, those submitted through the
//! device's executor after it, and the device's queues.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use causeway::cpu::CpuBackend;
use causeway::device::{Invocation, Op, QueueConfig, Work};
use causeway::executor::{Class, Drain, DrainContext, Drained, Process};
use causeway::{Runtime, Scope};

/// Counts its drains and completes.
struct Count(AtomicU32);

impl Drain for Count {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.0.fetch_add(1, Ordering::Relaxed);
        Drained::Done(Ok(()))
    }
}

static BEFORE: Count = Count(AtomicU32::new(0));
static AFTER: Count = Count(AtomicU32::new(0));
static BEFORE_PROCESS: Process<'static> = Process::new(&BEFORE, Class::Immediate);
static AFTER_PROCESS: Process<'static> = Process::new(&AFTER, Class::Immediate);

fn completes(process: &Process<'_>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !process.is_completed() {
        assert!(Instant::now() < deadline, "the process never completed");
        std::thread::yield_now();
    }
}

#[test]
fn a_device_on_a_runtimes_workers_runs_its_queues_and_the_runtimes_processes() {
    let runtime = Runtime::builder().workers(2).thread_name("shared-worker").build().unwrap();
    runtime.submit(&BEFORE_PROCESS).unwrap();
    completes(&BEFORE_PROCESS);

    let mut builder = runtime.into_device_builder();
    let cpu = builder.driver(CpuBackend::new());
    let queue = builder.queue(QueueConfig::on(cpu));
    let home = builder.endpoint(queue).unwrap();
    let done = builder.semaphore(0, Scope::DeviceLocal, home);
    let on_worker = builder.host_call(|_: &Invocation| {
        let name = std::thread::current().name().map(str::to_owned);
        // The device made no pool of its own: its work runs on the runtime's threads.
        assert!(name.is_some_and(|name| name.starts_with("shared-worker")), "ran elsewhere");
        Ok(())
    });
    let device = builder.build().unwrap();
    assert_eq!(device.executor().workers(), 2);

    device.executor().submit(&AFTER_PROCESS).unwrap();
    let op = Op { signals: &[(done, 1)], work: Work::Host(on_worker), ..Op::default() };
    device.submit(queue, &op).unwrap();
    assert_eq!(device.wait(done, 1, Some(Duration::from_secs(60))), Ok(1));
    completes(&AFTER_PROCESS);
    assert_eq!((BEFORE.0.load(Ordering::Relaxed), AFTER.0.load(Ordering::Relaxed)), (1, 1));
    let report = device.shutdown(Duration::from_secs(10));
    assert!(!report.leaked && report.abandoned_workers.is_empty(), "{report:?}");
}

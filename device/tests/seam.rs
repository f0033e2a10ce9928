//! The driver seam with a driver that is not the CPU's: a backend whose "hardware" is a thread
//! of its own, which runs each issued kernel asynchronously and reports completion through
//! `DeviceContext::wake` and `Backend::poll` — the shape of a GPU or NPU driver. Two such
//! drivers share one device, one without wait-before-signal: a semaphore crosses them, the
//! layer holds the early wait, frontiers carry both queues, a kernel the driver lacks is refused
//! at submission, and shutdown fails work still running on the driver's thread, cancels what is
//! queued behind it and stops the driver within its bound.
#![cfg(not(loom))]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, Device, DeviceContext, DeviceError, DriverError, DriverId, Issue,
    Issued, Kernel, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId, SemaphoreId,
    SubmitError, WaitOutcome, Work,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const LONG: Duration = Duration::from_secs(30);

/// What the driver's thread shares with the queue processes that issue to it.
#[derive(Default)]
struct Hardware {
    /// Issued kernels not started yet.
    queued: VecDeque<(QueueId, Duration)>,
    /// The queue whose kernel is running.
    running: Option<QueueId>,
    /// Finished kernels, not yet polled.
    finished: HashMap<usize, OpStatus>,
    stopping: bool,
}

/// Every wait a driver was handed with an issued operation, by resolution.
type NativeWaits = Arc<Mutex<Vec<Resolution>>>;

/// A driver that runs `Spin` and `Sleep` kernels on a thread of its own, one at a time.
struct ThreadDriver {
    name: &'static str,
    wait_before_signal: bool,
    native_waits: NativeWaits,
    hardware: Mutex<Hardware>,
    work_ready: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl ThreadDriver {
    fn new(name: &'static str, wait_before_signal: bool) -> ThreadDriver {
        ThreadDriver {
            name,
            wait_before_signal,
            native_waits: NativeWaits::default(),
            hardware: Mutex::new(Hardware::default()),
            work_ready: Condvar::new(),
            thread: Mutex::new(None),
        }
    }

    /// What it will be handed, readable after the driver is registered.
    fn native_waits(&self) -> NativeWaits {
        Arc::clone(&self.native_waits)
    }

    fn run(&self, device: DeviceContext) {
        let mut hardware = self.hardware.lock().unwrap();
        loop {
            if let Some((queue, duration)) = hardware.queued.pop_front() {
                hardware.running = Some(queue);
                drop(hardware);
                thread::sleep(duration);
                hardware = self.hardware.lock().unwrap();
                hardware.running = None;
                hardware.finished.insert(queue.index(), OpStatus::Ok);
                drop(hardware);
                device.wake(queue);
                hardware = self.hardware.lock().unwrap();
            } else if hardware.stopping {
                return;
            } else {
                hardware = self.work_ready.wait(hardware).unwrap();
            }
        }
    }
}

impl Backend for ThreadDriver {
    /// Its id: the hardware thread reports finished work by queue.
    type Queue = QueueId;

    fn name(&self) -> &'static str {
        self.name
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(self.wait_before_signal).with_timed_kernels()
    }

    fn open_queue(&mut self, queue: QueueId, config: &QueueConfig) -> Result<QueueId, DriverError> {
        if config.capacity > 1024 {
            return Err(DriverError::new(self.name, "at most 1024 operations in flight"));
        }
        Ok(queue)
    }

    /// A refusal of its own: its hardware thread sleeps at most a second per kernel.
    fn check(&self, _queue: &QueueId, kernel: Kernel) -> Result<(), SubmitError> {
        match kernel {
            Kernel::Sleep(duration) if duration > Duration::from_secs(1) => {
                Err(SubmitError::Unsupported { driver: self.name })
            }
            _ => Ok(()),
        }
    }

    fn start(&'static self, device: DeviceContext) {
        *self.thread.lock().unwrap() = Some(thread::spawn(move || self.run(device)));
    }

    fn issue(&'static self, &queue: &'static QueueId, issue: &mut Issue<'_>) -> Issued {
        let (Kernel::Spin(duration) | Kernel::Sleep(duration)) = issue.kernel() else {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        };
        let handed = issue.waits().iter().map(|wait| wait.resolution);
        self.native_waits.lock().unwrap().extend(handed);
        self.hardware.lock().unwrap().queued.push_back((queue, duration));
        self.work_ready.notify_one();
        Issued::Pending
    }

    fn poll(&'static self, queue: &'static QueueId, _epoch: u64, _: Kernel) -> Option<OpStatus> {
        self.hardware.lock().unwrap().finished.remove(&queue.index())
    }

    fn is_running(&self, &queue: &QueueId, _: Kernel, _workers_abandoned: bool) -> bool {
        let hardware = self.hardware.lock().unwrap();
        hardware.running == Some(queue) || hardware.queued.iter().any(|&(q, _)| q == queue)
    }

    fn stop(&self, deadline: Instant) -> bool {
        self.hardware.lock().unwrap().stopping = true;
        self.work_ready.notify_all();
        let Some(thread) = self.thread.lock().unwrap().take() else { return true };
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
        thread.join().is_ok()
    }
}

/// Every event, in the order observed.
#[derive(Default)]
struct Events(Mutex<Vec<(usize, u64, OpEvent)>>);

impl Observer for Events {
    fn op_event(&self, observed: causeway_device::ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let queue = observed.id.index();
        self.0.lock().unwrap().push((queue, tag, event));
    }
}

impl Events {
    fn of(&self, tag: u64) -> Vec<OpEvent> {
        let events = self.0.lock().unwrap();
        events.iter().filter(|&&(_, t, _)| t == tag).map(|&(_, _, event)| event).collect()
    }
}

/// A device with one queue of a [`ThreadDriver`] and two semaphores, watched.
fn one_thread_queue() -> (Device, QueueId, [SemaphoreId; 2], Arc<Events>) {
    let events = Arc::new(Events::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let driver = builder.driver(ThreadDriver::new("thread", true));
    let queue = builder.queue(QueueConfig::on(driver));
    let home = builder.endpoint(queue).unwrap();
    let semaphores = [(); 2].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    builder.observer(events.clone());
    (builder.build().unwrap(), queue, semaphores, events)
}

#[test]
fn a_semaphore_crosses_two_drivers_and_the_early_wait_is_held_where_the_driver_needs_it() {
    let events = Arc::new(Events::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let (timeline, binary) =
        (ThreadDriver::new("timeline", true), ThreadDriver::new("binary", false));
    let (timeline_waits, binary_waits) = (timeline.native_waits(), binary.native_waits());
    let timeline = builder.driver(timeline);
    let binary = builder.driver(binary);
    let producer = builder.queue(QueueConfig::on(timeline));
    let consumer = builder.queue(QueueConfig::on(binary));
    let home = builder.endpoint(producer).unwrap();
    let produced = builder.semaphore(0, Scope::DeviceLocal, home);
    let consumed = builder.semaphore(0, Scope::DeviceLocal, home);
    builder.observer(events.clone());
    let device = builder.build().unwrap();

    // The consumer first: its driver cannot wait before the signal exists, so the layer holds
    // it; nothing of it reaches the driver until the producer's value is reached.
    let kernel = Work::Sleep(Duration::from_millis(5));
    let consume = Op {
        waits: &[(produced, 1)],
        signals: &[(consumed, 1)],
        work: kernel,
        tag: 2,
        ..Default::default()
    };
    let receipt = device.submit(consumer, &consume).unwrap();
    let [WaitOutcome::Resolved(resolution)] = receipt.waits[..] else { panic!("one wait") };
    assert_eq!(resolution.resolution, Resolution::Held);
    thread::sleep(Duration::from_millis(20));
    assert!(events.of(2).is_empty(), "a held operation is not issued before its value");

    let produce =
        Op { waits: &[], signals: &[(produced, 1)], work: kernel, tag: 1, ..Default::default() };
    device.submit(producer, &produce).unwrap();
    assert_eq!(wait(device.semaphore(consumed).unwrap(), 1, Some(LONG)), Ok(1));

    // Held before its signal existed, the consumer's wait imported nothing: a requirement,
    // not knowledge. The next wait on the reached value imports the producer's frontier across
    // the drivers, and from then on the consumer's queue knows it: a third wait is elided.
    let (producer_axis, consumer_axis) = (device.axis(producer), device.axis(consumer));
    assert_eq!(receipt.frontier.get(producer_axis.unwrap()), None);
    let again =
        Op { waits: &[(produced, 1)], signals: &[], work: kernel, tag: 3, ..Default::default() };
    let receipt = device.submit(consumer, &again).unwrap();
    let [WaitOutcome::Resolved(resolution)] = receipt.waits[..] else { panic!("one wait") };
    assert_eq!(resolution.resolution, Resolution::Satisfied);
    assert!([producer_axis, consumer_axis]
        .iter()
        .all(|axis| receipt.frontier.get(axis.unwrap()).is_some()));
    let receipt = device.submit(consumer, &Op { tag: 4, ..again }).unwrap();
    let [WaitOutcome::Resolved(resolution)] = receipt.waits[..] else { panic!("one wait") };
    assert_eq!(resolution.resolution, Resolution::Elided);

    // A wait the timeline driver's queue may queue before its signal exists: a device wait,
    // handed to the driver with the operation.
    let after_consumer = Op {
        waits: &[(consumed, 2)],
        signals: &[(produced, 2)],
        work: kernel,
        tag: 5,
        ..Default::default()
    };
    let receipt = device.submit(producer, &after_consumer).unwrap();
    let [WaitOutcome::Resolved(resolution)] = receipt.waits[..] else { panic!("one wait") };
    assert_eq!(resolution.resolution, Resolution::DeviceWait);
    device
        .submit(
            consumer,
            &Op {
                waits: &[],
                signals: &[(consumed, 2)],
                work: kernel,
                tag: 6,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(wait(device.semaphore(produced).unwrap(), 2, Some(LONG)), Ok(2));

    // Each driver was handed exactly the waits its queues resolved as device or held waits.
    let handed = |waits: &NativeWaits, kind| {
        waits.lock().unwrap().iter().filter(|&&r| r == kind).count() as u64
    };
    for (queue, waits) in [(producer, &timeline_waits), (consumer, &binary_waits)] {
        let counts = device.resolution_counts(queue).unwrap();
        assert_eq!(handed(waits, Resolution::DeviceWait), counts.device);
        assert_eq!(handed(waits, Resolution::Held), counts.held);
    }
    assert_eq!(*timeline_waits.lock().unwrap(), [Resolution::DeviceWait]);
    assert_eq!(*binary_waits.lock().unwrap(), [Resolution::Held]);

    let report = device.shutdown(LONG);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
    for tag in [1, 2] {
        let kinds: Vec<bool> =
            events.of(tag).iter().map(|event| matches!(event, OpEvent::Started { .. })).collect();
        assert_eq!(kinds, [true, false], "op {tag}: started, then finished once");
        assert!(matches!(events.of(tag)[1], OpEvent::Finished { status: OpStatus::Ok, .. }));
    }
}

#[test]
fn work_a_driver_has_no_kernel_for_is_refused_at_submission() {
    let mut builder = Device::builder(PoolConfig::with_workers(1));
    let driver = builder.driver(ThreadDriver::new("thread", true));
    let queue = builder.queue(QueueConfig::on(driver));
    let device = builder.build().unwrap();
    let execute = Op {
        waits: &[],
        signals: &[],
        work: Work::Execute(causeway_device::CommandBufferId(0)),
        tag: 0,
        ..Default::default()
    };
    // It recorded no command buffer: the layer refuses, the driver is never asked.
    assert_eq!(
        device.submit(queue, &execute).unwrap_err(),
        SubmitError::UnknownCommandBuffer(causeway_device::CommandBufferId(0))
    );
    // Its own refusal, through `Backend::check`.
    let long = Op { work: Work::Sleep(Duration::from_secs(2)), ..execute };
    assert_eq!(
        device.submit(queue, &long).unwrap_err(),
        SubmitError::Unsupported { driver: "thread" }
    );
    // The layer's own work needs nothing of the driver.
    let barrier =
        Op { waits: &[], signals: &[], work: Work::Barrier, tag: 1, ..Default::default() };
    assert!(device.submit(queue, &barrier).is_ok());
}

#[test]
fn a_queue_of_an_unregistered_driver_or_one_its_driver_refuses_fails_the_build() {
    let mut builder = Device::builder(PoolConfig::with_workers(1));
    builder.driver(ThreadDriver::new("thread", true));
    let queue = builder.queue(QueueConfig::on(DriverId(1)));
    assert!(matches!(
        builder.build(),
        Err(DeviceError::UnknownDriver(refused, DriverId(1))) if refused == queue
    ));

    let mut builder = Device::builder(PoolConfig::with_workers(1));
    let driver = builder.driver(ThreadDriver::new("thread", true));
    let mut config = QueueConfig::on(driver);
    config.capacity = 4096;
    let queue = builder.queue(config);
    let error = builder.build().unwrap_err();
    assert!(
        matches!(&error, DeviceError::Driver(refused, e) if *refused == queue && e.driver() == "thread")
    );
    assert_eq!(error.to_string(), "queue 0: thread driver: at most 1024 operations in flight");
}

#[test]
fn shutdown_fails_work_still_on_the_driver_and_cancels_what_waits_behind_it() {
    let (device, queue, [first, second], events) = one_thread_queue();
    let slow = Work::Sleep(Duration::from_millis(300));
    device
        .submit(
            queue,
            &Op { waits: &[], signals: &[(first, 1)], work: slow, tag: 1, ..Default::default() },
        )
        .unwrap();
    device
        .submit(
            queue,
            &Op { waits: &[], signals: &[(second, 1)], work: slow, tag: 2, ..Default::default() },
        )
        .unwrap();
    // The first kernel was issued (the layer reports it started once the driver took it).
    while events.of(1).is_empty() {
        thread::sleep(Duration::from_millis(1));
    }
    let report = device.shutdown(Duration::from_millis(10));
    assert_eq!(report.cancelled, 1, "{report:?}");
    assert_eq!(report.stuck.len(), 1, "{report:?}");
    assert_eq!(
        (report.stuck[0].queue, report.stuck[0].tag, report.stuck[0].worker),
        (queue, 1, None)
    );
    // The driver finished its kernel and stopped within the bound: nothing was kept alive.
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

#[test]
fn a_failed_wait_fails_the_operation_without_issuing_it_to_the_driver() {
    let (device, queue, [input, output], events) = one_thread_queue();
    let kernel = Work::Spin(Duration::from_millis(1));
    let op = Op {
        waits: &[(input, 1)],
        signals: &[(output, 1)],
        work: kernel,
        tag: 7,
        ..Default::default()
    };
    device.submit(queue, &op).unwrap();
    device.semaphore(input).unwrap().fail(Failure::Application(3));
    assert_eq!(
        wait(device.semaphore(output).unwrap(), 1, Some(LONG)),
        Err(HostWaitError::Failed(Failure::Application(3)))
    );
    drop(device);
    assert!(matches!(
        events.of(7)[..],
        [OpEvent::Finished { status: OpStatus::Failed(Failure::Application(3)), .. }]
    ));
}

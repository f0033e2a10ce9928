//! The seam's native waits with a driver shaped like a GPU API on one hardware queue: every
//! queue of the driver shares one in-order "hardware" thread, each queue has a timeline (the
//! epoch of its last completed operation), and a device wait is a wait on the origin queue's
//! timeline that blocks the whole hardware queue — as on lavapipe, where a wait on work
//! submitted *later* to the same queue deadlocks it. The layer must issue operations ahead of
//! completion (the driver holds several of one queue at once), never issue a wait before its
//! origin, hold waits on other drivers' work, advance a queue's timeline for work it retired
//! on the host, and fail what a failed dependency reached natively.
#![cfg(not(loom))]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, Device, DeviceContext, DriverError, DriverId, Issue, Issued,
    Kernel, Observer, Op, OpEvent, OpStatus, Origin, QueueConfig, QueueId, SemaphoreId,
    WaitOutcome, Work,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const LONG: Duration = Duration::from_secs(30);

/// An issued operation, as the hardware queue holds it.
struct Submitted {
    queue: QueueId,
    epoch: u64,
    duration: Duration,
    waits: Vec<Origin>,
}

#[derive(Default)]
struct Hardware {
    /// Issued operations in issue order: the one hardware queue.
    queued: VecDeque<Submitted>,
    /// Each queue's timeline: the epoch of its last completed operation.
    timelines: HashMap<usize, u64>,
    /// The most operations one queue had issued and not completed at once.
    most_in_flight: usize,
    /// Native waits issued (origins waited on).
    native_waits: u64,
    /// Operations running or queued, per queue.
    in_flight: HashMap<usize, usize>,
    /// Set by a test to keep everything issued pending: the hardware runs nothing meanwhile.
    paused: bool,
    /// Operations (queue, epoch) that end in a device error; the timeline still passes them.
    failing: Vec<(usize, u64)>,
    stopping: bool,
}

/// A driver with native waits and one in-order hardware queue on a thread of its own.
struct OneQueueGpu {
    hardware: Mutex<Hardware>,
    changed: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl OneQueueGpu {
    fn new() -> Arc<OneQueueGpu> {
        Arc::new(OneQueueGpu {
            hardware: Mutex::new(Hardware::default()),
            changed: Condvar::new(),
            thread: Mutex::new(None),
        })
    }

    fn pause(&self) {
        self.hardware.lock().unwrap().paused = true;
    }

    fn resume(&self) {
        self.hardware.lock().unwrap().paused = false;
        self.changed.notify_all();
    }

    /// Waits until the hardware queue holds `count` operations.
    fn wait_queued(&self, count: usize) {
        let mut hardware = self.hardware.lock().unwrap();
        while hardware.queued.len() < count {
            hardware = self.changed.wait(hardware).unwrap();
        }
    }

    fn timeline(hardware: &Hardware, queue: QueueId) -> u64 {
        hardware.timelines.get(&queue.index()).copied().unwrap_or(0)
    }

    /// The hardware queue: runs the front operation once every origin it waits on completed,
    /// blocking everything behind it meanwhile; a wait that never completes hangs it, as a
    /// real queue would (the test then times out).
    fn run(&self, device: DeviceContext) {
        let mut hardware = self.hardware.lock().unwrap();
        loop {
            let ready = hardware.queued.front().filter(|_| !hardware.paused).map(|front| {
                front.waits.iter().all(|o| Self::timeline(&hardware, o.queue) >= o.epoch)
            });
            match ready {
                Some(true) => {
                    let op = hardware.queued.pop_front().unwrap();
                    drop(hardware);
                    thread::sleep(op.duration);
                    hardware = self.hardware.lock().unwrap();
                    hardware.timelines.insert(op.queue.index(), op.epoch);
                    *hardware.in_flight.get_mut(&op.queue.index()).unwrap() -= 1;
                    self.changed.notify_all();
                    drop(hardware);
                    device.wake(op.queue);
                    hardware = self.hardware.lock().unwrap();
                }
                None if hardware.stopping => return,
                _ => hardware = self.changed.wait(hardware).unwrap(),
            }
        }
    }
}

/// The registered half: a `'static` handle on the shared driver state.
struct Driver(Arc<OneQueueGpu>);

impl Backend for Driver {
    /// The queue's id: the hardware keys its timelines by it.
    type Queue = QueueId;

    fn name(&self) -> &'static str {
        "gpu"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(true).with_native_waits().with_timed_kernels()
    }

    fn open_queue(
        &mut self,
        queue: QueueId,
        _config: &QueueConfig,
    ) -> Result<QueueId, DriverError> {
        Ok(queue)
    }

    fn start(&'static self, device: DeviceContext) {
        let gpu = Arc::clone(&self.0);
        *self.0.thread.lock().unwrap() = Some(thread::spawn(move || gpu.run(device)));
    }

    fn issue(&'static self, &queue: &'static QueueId, issue: &mut Issue<'_>) -> Issued {
        let (Kernel::Spin(duration) | Kernel::Sleep(duration)) = issue.kernel() else {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        };
        let mut waits = Vec::new();
        for wait in issue.waits() {
            match (wait.resolution, wait.origin) {
                (Resolution::DeviceWait, Some(origin)) => waits.push(origin),
                // Held waits are reached before issue; nothing native for them.
                (Resolution::Held, None) => {}
                other => panic!("a native driver is handed device waits with origins: {other:?}"),
            }
        }
        let mut hardware = self.0.hardware.lock().unwrap();
        hardware.native_waits += waits.len() as u64;
        let in_flight = hardware.in_flight.entry(queue.index()).or_default();
        *in_flight += 1;
        let in_flight = *in_flight;
        hardware.most_in_flight = hardware.most_in_flight.max(in_flight);
        hardware.queued.push_back(Submitted { queue, epoch: issue.epoch(), duration, waits });
        self.0.changed.notify_all();
        Issued::Pending
    }

    fn poll(&'static self, &queue: &'static QueueId, epoch: u64, _: Kernel) -> Option<OpStatus> {
        let hardware = self.0.hardware.lock().unwrap();
        let failed = hardware.failing.contains(&(queue.index(), epoch));
        (OneQueueGpu::timeline(&hardware, queue) >= epoch).then_some(if failed {
            OpStatus::Failed(Failure::DeviceLost)
        } else {
            OpStatus::Ok
        })
    }

    fn completed_on_host(&'static self, &queue: &'static QueueId, epoch: u64) {
        let mut hardware = self.0.hardware.lock().unwrap();
        assert_eq!(
            hardware.in_flight.get(&queue.index()).copied().unwrap_or(0),
            0,
            "nothing issued"
        );
        assert!(OneQueueGpu::timeline(&hardware, queue) < epoch, "the timeline only advances");
        hardware.timelines.insert(queue.index(), epoch);
        self.0.changed.notify_all();
    }

    fn is_running(&self, queue: &QueueId, _: Kernel, _workers_abandoned: bool) -> bool {
        self.0.hardware.lock().unwrap().in_flight.get(&queue.index()).is_some_and(|&n| n > 0)
    }

    fn stop(&self, deadline: Instant) -> bool {
        self.0.hardware.lock().unwrap().stopping = true;
        self.0.changed.notify_all();
        let Some(thread) = self.0.thread.lock().unwrap().take() else { return true };
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
        thread.join().is_ok()
    }
}

/// A driver without native waits whose kernels run on the issuing worker (as the CPU
/// driver's do): the other side of waits across drivers.
struct OnWorker;

impl Backend for OnWorker {
    type Queue = ();

    fn name(&self) -> &'static str {
        "worker"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(true).with_timed_kernels()
    }

    fn open_queue(&mut self, _queue: QueueId, _config: &QueueConfig) -> Result<(), DriverError> {
        Ok(())
    }

    fn start(&'static self, _device: DeviceContext) {}

    fn issue(&'static self, _: &'static (), issue: &mut Issue<'_>) -> Issued {
        let duration = match issue.kernel() {
            Kernel::Spin(duration) | Kernel::Sleep(duration) => duration,
            Kernel::Execute(_) => Duration::ZERO,
        };
        issue.run_here(|| {
            thread::sleep(duration);
            OpStatus::Ok
        })
    }

    fn poll(&'static self, _: &'static (), _epoch: u64, _: Kernel) -> Option<OpStatus> {
        Some(OpStatus::Failed(Failure::Aborted))
    }

    fn is_running(&self, _: &(), _: Kernel, _workers_abandoned: bool) -> bool {
        false
    }

    fn stop(&self, _deadline: Instant) -> bool {
        true
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
    /// Position of `tag`'s first event matching `started`/finished in the observed order.
    fn position(&self, tag: u64, started: bool) -> Option<usize> {
        self.0.lock().unwrap().iter().position(|&(_, t, event)| {
            t == tag && matches!(event, OpEvent::Started { .. }) == started
        })
    }
}

struct Rig {
    device: Device,
    gpu: Arc<OneQueueGpu>,
    gpu_queues: [QueueId; 2],
    cpu_queue: QueueId,
    semaphores: Vec<SemaphoreId>,
    events: Arc<Events>,
}

/// Two queues of the one-queue GPU driver, one CPU queue, `semaphores` semaphores.
fn rig(semaphores: usize) -> Rig {
    let events = Arc::new(Events::default());
    let gpu = OneQueueGpu::new();
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let gpu_driver = builder.driver(Driver(Arc::clone(&gpu)));
    let cpu_driver = builder.driver(OnWorker);
    let queue = |driver: DriverId| {
        let mut config = QueueConfig::default();
        config.driver = driver;
        config
    };
    let gpu_queues = [builder.queue(queue(gpu_driver)), builder.queue(queue(gpu_driver))];
    let cpu_queue = builder.queue(queue(cpu_driver));
    let home = builder.endpoint(gpu_queues[0]).unwrap();
    let semaphores =
        (0..semaphores).map(|_| builder.semaphore(0, Scope::DeviceLocal, home)).collect();
    builder.observer(events.clone());
    Rig { device: builder.build().unwrap(), gpu, gpu_queues, cpu_queue, semaphores, events }
}

fn resolution_of(waits: &[WaitOutcome]) -> Resolution {
    match waits {
        [WaitOutcome::Resolved(resolved)] => resolved.resolution,
        other => panic!("one resolved wait: {other:?}"),
    }
}

#[test]
fn work_is_issued_ahead_and_device_waits_wait_natively_on_their_origin() {
    let Rig { device, gpu, gpu_queues: [a, b], semaphores, .. } = rig(3);
    let (s, t, u) = (semaphores[0], semaphores[1], semaphores[2]);
    let quick = Work::Spin(Duration::from_micros(100));
    // Nothing completes while paused: everything below is submitted and issued ahead.
    gpu.pause();
    device
        .submit(
            a,
            &Op { waits: &[], signals: &[(s, 1)], work: quick, tag: 1, ..Default::default() },
        )
        .unwrap();
    device
        .submit(
            a,
            &Op { waits: &[], signals: &[(s, 2)], work: quick, tag: 2, ..Default::default() },
        )
        .unwrap();
    let on_b =
        Op { waits: &[(s, 1)], signals: &[(t, 1)], work: quick, tag: 3, ..Default::default() };
    assert_eq!(resolution_of(&device.submit(b, &on_b).unwrap().waits), Resolution::DeviceWait);
    let then =
        Op { waits: &[(s, 2)], signals: &[(u, 1)], work: quick, tag: 4, ..Default::default() };
    assert_eq!(resolution_of(&device.submit(b, &then).unwrap().waits), Resolution::DeviceWait);
    // All four are with the driver before any completed: two of each queue at once, and
    // queue b's waiting on queue a's operations natively.
    gpu.wait_queued(4);
    {
        let hardware = gpu.hardware.lock().unwrap();
        assert_eq!(hardware.most_in_flight, 2);
        // Per queue, in its order: the two queue processes issue independently, so how their
        // operations interleave on the hardware queue is up to the scheduler.
        let waits_of = |queue| -> Vec<&[Origin]> {
            hardware.queued.iter().filter(|op| op.queue == queue).map(|op| &op.waits[..]).collect()
        };
        let origin = |epoch| Origin { queue: a, epoch };
        assert_eq!(waits_of(a), [&[][..], &[]]);
        assert_eq!(waits_of(b), [&[origin(1)][..], &[origin(2)]]);
    }
    gpu.resume();
    assert_eq!(wait(device.semaphore(u).unwrap(), 1, Some(LONG)), Ok(1));
    assert_eq!(wait(device.semaphore(t).unwrap(), 1, Some(LONG)), Ok(1));
    // Every device wait was issued natively, and nothing else was.
    let device_waits: u64 =
        [a, b].iter().map(|&q| device.resolution_counts(q).unwrap().device).sum();
    assert_eq!((gpu.hardware.lock().unwrap().native_waits, device_waits), (2, 2));
}

#[test]
fn a_wait_on_work_not_yet_issued_is_held_back_so_the_hardware_queue_cannot_deadlock() {
    let Rig { device, gpu_queues: [a, b], events, semaphores, .. } = rig(3);
    let (s, gate, done) = (semaphores[0], semaphores[1], semaphores[2]);
    let quick = Work::Spin(Duration::from_micros(100));
    // Queue a's signal of s is behind a host gate, so it is submitted but not issued; queue
    // b's wait on it must not reach the one hardware queue first, or that queue would wait
    // forever for work queued behind it.
    device
        .submit(
            a,
            &Op {
                waits: &[(gate, 1)],
                signals: &[(s, 1)],
                work: quick,
                tag: 1,
                ..Default::default()
            },
        )
        .unwrap();
    let waiting = device.submit(
        b,
        &Op { waits: &[(s, 1)], signals: &[(done, 1)], work: quick, tag: 2, ..Default::default() },
    );
    assert_eq!(resolution_of(&waiting.unwrap().waits), Resolution::DeviceWait);
    thread::sleep(Duration::from_millis(30));
    assert_eq!(events.position(2, true), None, "not issued before its origin");
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(done).unwrap(), 1, Some(LONG)), Ok(1));
    assert!(events.position(1, true).unwrap() < events.position(2, true).unwrap());
}

#[test]
fn waits_across_drivers_are_held_and_knowledge_still_crosses_them_both_ways() {
    let Rig { device, gpu, gpu_queues: [a, _], cpu_queue, semaphores, .. } = rig(4);
    let (host_made, gpu_made, back, gate) =
        (semaphores[0], semaphores[1], semaphores[2], semaphores[3]);
    let quick = Work::Spin(Duration::from_micros(100));
    // CPU → GPU: the GPU driver cannot wait natively on a CPU queue's work: held. (The CPU
    // operation waits for a host gate, so nothing completes before everything is submitted.)
    let cpu_op = Op {
        waits: &[(gate, 1)],
        signals: &[(host_made, 1)],
        work: quick,
        tag: 1,
        ..Default::default()
    };
    device.submit(cpu_queue, &cpu_op).unwrap();
    let on_gpu = Op {
        waits: &[(host_made, 1)],
        signals: &[(gpu_made, 1)],
        work: quick,
        tag: 2,
        ..Default::default()
    };
    assert_eq!(resolution_of(&device.submit(a, &on_gpu).unwrap().waits), Resolution::Held);
    // GPU → CPU: a device wait for the CPU queue (armed on the host, as CPU waits are).
    let on_cpu = Op {
        waits: &[(gpu_made, 1)],
        signals: &[(back, 1)],
        work: quick,
        tag: 3,
        ..Default::default()
    };
    let resolved = resolution_of(&device.submit(cpu_queue, &on_cpu).unwrap().waits);
    assert_eq!(resolved, Resolution::DeviceWait);
    device.semaphore(gate).unwrap().signal_external(1).unwrap();
    assert_eq!(wait(device.semaphore(back).unwrap(), 1, Some(LONG)), Ok(1));
    // The CPU queue learned of its own op 1 through the GPU op's frontier, and of the GPU
    // op: a wait on either is elided there.
    for semaphore in [host_made, gpu_made] {
        let again = Op {
            waits: &[(semaphore, 1)],
            signals: &[],
            work: quick,
            tag: 4,
            ..Default::default()
        };
        let resolved = resolution_of(&device.submit(cpu_queue, &again).unwrap().waits);
        assert_eq!(resolved, Resolution::Elided);
    }
    assert_eq!(gpu.hardware.lock().unwrap().native_waits, 0);
}

#[test]
fn layer_work_on_a_native_queue_advances_its_timeline_and_orders_what_follows() {
    let Rig { device, gpu, gpu_queues: [a, b], semaphores, .. } = rig(3);
    let (s, t, u) = (semaphores[0], semaphores[1], semaphores[2]);
    let quick = Work::Spin(Duration::from_micros(100));
    gpu.pause();
    device
        .submit(a, &Op { waits: &[], signals: &[], work: quick, tag: 1, ..Default::default() })
        .unwrap();
    // A barrier retires on the host once op 1 has; queue b's native wait on it needs a's
    // timeline to pass it, and the kernel behind it must not be issued before it retired.
    device
        .submit(
            a,
            &Op {
                waits: &[],
                signals: &[(s, 1)],
                work: Work::Barrier,
                tag: 2,
                ..Default::default()
            },
        )
        .unwrap();
    device
        .submit(
            a,
            &Op { waits: &[], signals: &[(t, 1)], work: quick, tag: 3, ..Default::default() },
        )
        .unwrap();
    let on_b =
        Op { waits: &[(s, 1)], signals: &[(u, 1)], work: quick, tag: 4, ..Default::default() };
    assert_eq!(resolution_of(&device.submit(b, &on_b).unwrap().waits), Resolution::DeviceWait);
    gpu.wait_queued(1);
    thread::sleep(Duration::from_millis(20));
    assert_eq!(gpu.hardware.lock().unwrap().queued.len(), 1, "only op 1 is issued");
    gpu.resume();
    assert_eq!(wait(device.semaphore(u).unwrap(), 1, Some(LONG)), Ok(1));
    assert_eq!(wait(device.semaphore(t).unwrap(), 1, Some(LONG)), Ok(1));
    let hardware = gpu.hardware.lock().unwrap();
    assert_eq!(OneQueueGpu::timeline(&hardware, a), 3);
    assert_eq!(hardware.native_waits, 1);
}

#[test]
fn layer_work_on_a_native_queue_waits_on_the_host_for_what_it_waits_on() {
    let Rig { device, gpu, gpu_queues: [a, b], semaphores, events, .. } = rig(2);
    let (s, t) = (semaphores[0], semaphores[1]);
    let quick = Work::Spin(Duration::from_micros(100));
    gpu.pause();
    device
        .submit(
            a,
            &Op { waits: &[], signals: &[(s, 1)], work: quick, tag: 1, ..Default::default() },
        )
        .unwrap();
    // A barrier never reaches the driver: its wait is held on the host, not handed over.
    let barrier = Op {
        waits: &[(s, 1)],
        signals: &[(t, 1)],
        work: Work::Barrier,
        tag: 2,
        ..Default::default()
    };
    assert_eq!(resolution_of(&device.submit(b, &barrier).unwrap().waits), Resolution::Held);
    gpu.wait_queued(1);
    thread::sleep(Duration::from_millis(20));
    assert_eq!(events.position(2, true), None, "the barrier waits for op 1");
    gpu.resume();
    assert_eq!(wait(device.semaphore(t).unwrap(), 1, Some(LONG)), Ok(1));
    assert!(events.position(1, false).unwrap() < events.position(2, true).unwrap());
}

#[test]
fn a_failure_before_issue_fails_the_native_waiter_without_issuing_it() {
    let Rig { device, gpu, gpu_queues: [a, b], semaphores, .. } = rig(3);
    let (input, s, out) = (semaphores[0], semaphores[1], semaphores[2]);
    let quick = Work::Spin(Duration::from_micros(100));
    // Op 1 (a barrier) fails when its input fails; op 2 waits on it natively.
    let barrier = Op {
        waits: &[(input, 1)],
        signals: &[(s, 1)],
        work: Work::Barrier,
        tag: 1,
        ..Default::default()
    };
    device.submit(a, &barrier).unwrap();
    let dependent =
        Op { waits: &[(s, 1)], signals: &[(out, 1)], work: quick, tag: 2, ..Default::default() };
    assert_eq!(resolution_of(&device.submit(b, &dependent).unwrap().waits), Resolution::DeviceWait);
    device.semaphore(input).unwrap().fail(Failure::Application(9));
    assert_eq!(
        wait(device.semaphore(out).unwrap(), 1, Some(LONG)),
        Err(HostWaitError::Failed(Failure::Application(9)))
    );
    assert_eq!(gpu.hardware.lock().unwrap().native_waits, 0, "never issued");
}

#[test]
fn a_device_error_reached_natively_fails_the_waiter_though_the_device_ran_it() {
    let Rig { device, gpu, gpu_queues: [a, b], semaphores, .. } = rig(2);
    let (s, out) = (semaphores[0], semaphores[1]);
    let quick = Work::Spin(Duration::from_micros(100));
    gpu.hardware.lock().unwrap().failing.push((a.index(), 1));
    gpu.pause();
    device
        .submit(
            a,
            &Op { waits: &[], signals: &[(s, 1)], work: quick, tag: 1, ..Default::default() },
        )
        .unwrap();
    let dependent =
        Op { waits: &[(s, 1)], signals: &[(out, 1)], work: quick, tag: 2, ..Default::default() };
    assert_eq!(resolution_of(&device.submit(b, &dependent).unwrap().waits), Resolution::DeviceWait);
    // Both are with the driver; the device runs the dependent after its origin's error (its
    // timeline passed), but the layer retires it after the origin and fails it.
    gpu.wait_queued(2);
    gpu.resume();
    assert_eq!(
        wait(device.semaphore(out).unwrap(), 1, Some(LONG)),
        Err(HostWaitError::Failed(Failure::DeviceLost))
    );
    assert_eq!(gpu.hardware.lock().unwrap().native_waits, 1);
}

#[test]
fn shutdown_ends_every_issued_operation_and_cancels_the_rest() {
    let Rig { device, gpu, gpu_queues: [a, _], semaphores, .. } = rig(3);
    let quick = Work::Spin(Duration::from_micros(100));
    gpu.pause();
    for (tag, &s) in semaphores.iter().enumerate() {
        let op = Op {
            waits: &[],
            signals: &[(s, 1)],
            work: quick,
            tag: tag as u64,
            ..Default::default()
        };
        device.submit(a, &op).unwrap();
    }
    device
        .submit(
            a,
            &Op { waits: &[], signals: &[], work: Work::Barrier, tag: 9, ..Default::default() },
        )
        .unwrap();
    gpu.wait_queued(3);
    let report = device.shutdown(Duration::from_millis(10));
    // Three kernels were with the driver (issued ahead): each failed as aborted; the barrier
    // behind them was cancelled.
    assert_eq!((report.stuck.len(), report.cancelled), (3, 1), "{report:?}");
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");
}

#[test]
fn ten_thousand_operations_across_two_native_queues_complete_in_order() {
    let Rig { device, gpu, gpu_queues: [a, b], semaphores, .. } = rig(2);
    let (s, t) = (semaphores[0], semaphores[1]);
    let tiny = Work::Spin(Duration::ZERO);
    const N: u64 = 10_000;
    for value in 1..=N {
        device
            .submit(
                a,
                &Op {
                    waits: &[],
                    signals: &[(s, value)],
                    work: tiny,
                    tag: value,
                    ..Default::default()
                },
            )
            .unwrap();
        let op = Op {
            waits: &[(s, value)],
            signals: &[(t, value)],
            work: tiny,
            tag: N + value,
            ..Default::default()
        };
        device.submit(b, &op).unwrap();
    }
    assert_eq!(wait(device.semaphore(t).unwrap(), N, Some(LONG)), Ok(N));
    let hardware = gpu.hardware.lock().unwrap();
    assert_eq!(hardware.native_waits, device.resolution_counts(b).unwrap().device);
}

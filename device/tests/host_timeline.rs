//! The host as a participant (`HostTimeline`): its steps import what they wait on and carry it
//! on what they signal, elide what they already know, and fail — with the failure they waited
//! on, which every later waiter sees too — when a semaphore they wait on fails, at resolution
//! or while they block.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use causeway_core::axis::Domain;
use causeway_core::queue::Resolution;
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_device::{
    allocate_axis, Backend, BackendCapabilities, Device, DeviceContext, DriverError, HostTimeline,
    Issue, Issued, Kernel, Op, OpStatus, QueueConfig, QueueId, StepTimedOut, Work,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

const LONG: Duration = Duration::from_secs(60);

/// A driver with no kernels: the queues here run the layer's own work only.
struct LayerOnly;

impl Backend for LayerOnly {
    type Queue = ();

    fn name(&self) -> &'static str {
        "layer-only"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(true)
    }

    fn open_queue(&mut self, _: QueueId, _: &QueueConfig) -> Result<(), DriverError> {
        Ok(())
    }

    fn start(&'static self, _: DeviceContext) {}

    fn issue(&'static self, _: &'static (), _: &mut Issue<'_>) -> Issued {
        Issued::Finished(OpStatus::Failed(Failure::Aborted))
    }

    fn poll(&'static self, _: &'static (), _: u64, _: Kernel) -> Option<OpStatus> {
        Some(OpStatus::Failed(Failure::Aborted))
    }

    fn is_running(&self, _: &(), _: Kernel, _: bool) -> bool {
        false
    }

    fn stop(&self, _: Instant) -> bool {
        true
    }
}

fn host_timeline() -> HostTimeline {
    let axis = allocate_axis(0, Domain::Host).expect("a host axis");
    let endpoint = Endpoint {
        machine: 0,
        process: 0,
        device_group: u32::MAX,
        device: u32::MAX,
        queue: axis.to_bits(),
    };
    HostTimeline::new(axis, endpoint)
}

#[test]
fn a_host_step_carries_what_it_waited_on_to_what_waits_on_it() {
    let mut builder = Device::builder(PoolConfig::with_workers(1));
    builder.driver(LayerOnly);
    let queue = builder.queue(QueueConfig::default());
    let home = builder.endpoint(queue).unwrap();
    let [produced, hosted, consumed] =
        [(); 3].map(|()| builder.semaphore(0, Scope::ProcessLocal, home));
    let device = builder.build().unwrap();
    let semaphore = |id| device.semaphore(id).unwrap();

    let produce = Op {
        waits: &[],
        signals: &[(produced, 1)],
        work: Work::Barrier,
        tag: 1,
        ..Default::default()
    };
    device.submit(queue, &produce).unwrap();

    let mut host = host_timeline();
    let mut step = host.step();
    let resolved = step.wait(semaphore(produced), 1).unwrap().expect("not failed");
    assert_ne!(resolved.resolution, Resolution::Elided);
    step.block_until(semaphore(produced), 1, Some(Instant::now() + LONG)).unwrap();
    let signals = [(semaphore(hosted), 1)];
    let committed = step.commit(&signals).unwrap();
    let queue_axis = device.axis(queue).unwrap();
    assert_eq!(committed.frontier.get(queue_axis), Some(1), "it imported the queue's work");
    assert_eq!(committed.frontier.get(host.axis()), Some(1), "and itself");
    assert_eq!(committed.finish(Ok(())), Ok(()));
    assert_eq!(host.frontier().get(host.axis()), Some(1));

    // A queue operation that waits on the host's signal knows the host and what it knew.
    let consume = Op {
        waits: &[(hosted, 1)],
        signals: &[(consumed, 1)],
        work: Work::Barrier,
        tag: 2,
        ..Default::default()
    };
    let receipt = device.submit(queue, &consume).unwrap();
    assert_eq!(receipt.frontier.get(host.axis()), Some(1));
    assert_eq!(wait(semaphore(consumed), 1, Some(LONG)), Ok(1));

    // The host knows the producer already: waiting on it again teaches nothing new.
    let mut step = host.step();
    let again = step.wait(semaphore(produced), 1).unwrap().expect("not failed");
    assert!(matches!(again.resolution, Resolution::Elided | Resolution::Satisfied), "{again:?}");
    let _ = step.commit_untracked();
}

#[test]
fn a_failure_the_host_waits_on_fails_what_it_signals_with_the_same_value() {
    let mut builder = Device::builder(PoolConfig::with_workers(1));
    builder.driver(LayerOnly);
    let queue = builder.queue(QueueConfig::default());
    let home = builder.endpoint(queue).unwrap();
    let [upstream, hosted, downstream] =
        [(); 3].map(|()| builder.semaphore(0, Scope::ProcessLocal, home));
    let device = builder.build().unwrap();
    let semaphore = |id| device.semaphore(id).unwrap();
    let failure = Failure::Application(7);

    // Failed while the host blocks on it.
    let mut host = host_timeline();
    let mut step = host.step();
    step.wait(semaphore(upstream), 1).unwrap();
    let failing = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            semaphore(upstream).fail(failure);
        });
        step.block_until(semaphore(upstream), 1, Some(Instant::now() + LONG))
    });
    assert_eq!(failing, Ok(()), "a failure ends the block; the step goes on, doomed");
    assert_eq!(step.failed(), Some(failure));
    let signals = [(semaphore(hosted), 1)];
    let committed = step.commit(&signals).unwrap();
    assert_eq!(committed.finish(Ok(())), Err(failure));
    assert_eq!(wait(semaphore(hosted), 1, Some(LONG)), Err(HostWaitError::Failed(failure)));

    // A queue operation waiting on the host's signal fails with the same value.
    let after = Op {
        waits: &[(hosted, 1)],
        signals: &[(downstream, 1)],
        work: Work::Barrier,
        tag: 1,
        ..Default::default()
    };
    device.submit(queue, &after).unwrap();
    assert_eq!(wait(semaphore(downstream), 1, Some(LONG)), Err(HostWaitError::Failed(failure)));

    // Failed before the step resolves it: the step is doomed at once, and imports nothing.
    let mut step = host.step();
    assert_eq!(step.wait(semaphore(upstream), 1), Ok(None));
    assert_eq!(step.failed(), Some(failure));
    let (_, frontier, doomed) = step.commit_untracked();
    assert_eq!(doomed, Some(failure));
    assert_eq!(frontier.get(device.axis(queue).unwrap()), None);
}

#[test]
fn a_host_step_blocked_past_its_deadline_says_how_far_the_value_got() {
    let mut builder = Device::builder(PoolConfig::with_workers(1));
    builder.driver(LayerOnly);
    let queue = builder.queue(QueueConfig::default());
    let home = builder.endpoint(queue).unwrap();
    let never = builder.semaphore(3, Scope::ProcessLocal, home);
    let device = builder.build().unwrap();
    let mut host = host_timeline();
    let mut step = host.step();
    step.wait(device.semaphore(never).unwrap(), 5).unwrap();
    let deadline = Some(Instant::now() + Duration::from_millis(10));
    assert_eq!(
        step.block_until(device.semaphore(never).unwrap(), 5, deadline),
        Err(StepTimedOut { value: 3 })
    );
}

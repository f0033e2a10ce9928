//! The device a case builds: the driver under test and the reference peer registered side by
//! side, every operation observed, and submissions and host waits that fail a case instead of
//! hanging it.

use std::sync::Arc;
use std::time::Duration;

use causeway_core::queue::{Resolution, ResolutionCounts};
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, Device, DeviceBuilder, DriverId, HostCallId, Invocation, Op, QueueConfig, QueueId,
    Receipt, SemaphoreConfig, SemaphoreId, ShutdownReport, WaitOutcome, Work,
};
use causeway_runtime::blocking::{wait, HostWaitError};
use causeway_runtime::PoolConfig;

use crate::ledger::Ledger;
use crate::peer::{PeerBackend, PeerKernels};
use crate::{AfterCase, DriverUnderTest, Kernels, NativeWaitCounter};

/// How long a host wait or a submission waiting for room may take before the case fails:
/// well inside [`CASE_BUDGET`](crate::CASE_BUDGET), so the failure names what was waited for.
pub(crate) const WAIT_BUDGET: Duration = Duration::from_secs(60);

/// Where every case's semaphores live: the machine and device all its queues share.
const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

/// Worker threads of every case's device: the test machines have two cores.
const WORKERS: usize = 2;

/// Which driver a queue belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// The driver under test.
    Tested,
    /// The suite's reference driver.
    Peer,
}

/// A device being described, with the driver under test and the peer registered.
pub(crate) struct RigBuilder {
    builder: DeviceBuilder,
    tested: DriverId,
    peer: DriverId,
    kernels: Kernels,
    peer_kernels: PeerKernels,
    native_waits: Option<NativeWaitCounter>,
    native_waits_capable: bool,
    host_written_waits_capable: bool,
    waits_before_signal: bool,
    after_case: Option<AfterCase>,
    driver_name: &'static str,
    ledger: Arc<Ledger>,
}

impl RigBuilder {
    /// A device with a fresh backend of `driver` (its first driver) and a fresh peer.
    pub fn new<D: DriverUnderTest>(driver: &D) -> RigBuilder {
        let instance = driver.instance();
        let capabilities = instance.backend.capabilities();
        let native_waits_capable = capabilities.native_waits;
        let host_written_waits_capable = capabilities.host_written_waits;
        let waits_before_signal = capabilities.wait_before_signal;
        let mut builder = Device::builder(PoolConfig::with_workers(WORKERS));
        let tested = builder.driver(instance.backend);
        let (peer, peer_kernels) = PeerBackend::new();
        let peer = builder.driver(peer);
        let ledger = Arc::new(Ledger::default());
        builder.observer(ledger.clone());
        RigBuilder {
            builder,
            tested,
            peer,
            kernels: instance.kernels,
            peer_kernels,
            native_waits: instance.native_waits,
            native_waits_capable,
            host_written_waits_capable,
            waits_before_signal,
            after_case: instance.after_case,
            driver_name: driver.name(),
            ledger,
        }
    }

    /// A queue of `side`'s driver with room for `capacity` operations, waiting before signal
    /// where its driver can and `wait_before_signal` allows.
    pub fn queue_with(&mut self, side: Side, capacity: usize, wait_before_signal: bool) -> QueueId {
        let mut config = QueueConfig::default();
        config.driver = match side {
            Side::Tested => self.tested,
            Side::Peer => self.peer,
        };
        config.capacity = capacity;
        config.wait_before_signal = wait_before_signal;
        self.builder.queue(config)
    }

    /// A queue of `side`'s driver, configured by default.
    pub fn queue(&mut self, side: Side) -> QueueId {
        let defaults = QueueConfig::default();
        self.queue_with(side, defaults.capacity, defaults.wait_before_signal)
    }

    /// `N` semaphores at 0 with `history` history slots each.
    pub fn semaphores_with_history<const N: usize>(&mut self, history: usize) -> [SemaphoreId; N] {
        let mut config = SemaphoreConfig::new(0, Scope::DeviceLocal, HOME);
        config.history = history;
        [(); N].map(|()| self.builder.semaphore_config(config))
    }

    /// `N` semaphores at 0, with the default history.
    pub fn semaphores<const N: usize>(&mut self) -> [SemaphoreId; N] {
        [(); N].map(|()| self.builder.semaphore(0, Scope::DeviceLocal, HOME))
    }

    /// Gives the device `buffers` stream-ordered buffer names sharing `quota` bytes.
    pub fn memory(&mut self, buffers: usize, quota: u64) {
        self.builder.memory(buffers, quota);
    }

    /// Registers a host function.
    pub fn host_call(
        &mut self,
        call: impl Fn(&Invocation) -> Result<(), Failure> + Send + Sync + 'static,
    ) -> HostCallId {
        self.builder.host_call(call)
    }

    /// Starts the device.
    pub fn build(self) -> Rig {
        let device = self.builder.build().unwrap_or_else(|error| {
            panic!("a device with the {} driver and the peer: {error}", self.driver_name)
        });
        Rig {
            device: Some(device),
            kernels: self.kernels,
            peer_kernels: self.peer_kernels,
            native_waits: self.native_waits,
            native_waits_capable: self.native_waits_capable,
            host_written_waits_capable: self.host_written_waits_capable,
            waits_before_signal: self.waits_before_signal,
            after_case: self.after_case,
            ledger: self.ledger,
            next_tag: 0,
        }
    }
}

/// A running device of a case.
pub(crate) struct Rig {
    device: Option<Device>,
    /// The driver under test's kernels.
    pub kernels: Kernels,
    /// The peer's kernels.
    pub peer_kernels: PeerKernels,
    native_waits: Option<NativeWaitCounter>,
    /// Whether the driver under test orders device waits natively
    /// ([`BackendCapabilities::native_waits`](causeway_device::BackendCapabilities)): its
    /// waits on other drivers' work are then held, and its device waits are native.
    pub native_waits_capable: bool,
    /// Whether the driver under test also waits natively on other drivers' work, on a mirror
    /// of the origin queue's progress that the host writes
    /// ([`BackendCapabilities::host_written_waits`](causeway_device::BackendCapabilities)):
    /// its waits on the peer's pending signals are then device waits, not held.
    pub host_written_waits_capable: bool,
    /// Whether the driver under test's queues may wait for a value whose signal is not
    /// submitted yet ([`BackendCapabilities::wait_before_signal`](causeway_device::BackendCapabilities)):
    /// otherwise the layer holds such a wait, on a queue configured to allow it or not.
    pub waits_before_signal: bool,
    after_case: Option<AfterCase>,
    /// Every operation, as observed.
    pub ledger: Arc<Ledger>,
    next_tag: u64,
}

impl Rig {
    /// The device (until it is shut down or dropped).
    pub fn device(&self) -> &Device {
        self.device.as_ref().expect("the device is still running")
    }

    /// The next tag: every operation of a case has its own.
    pub fn tag(&mut self) -> u64 {
        self.next_tag += 1;
        self.next_tag
    }

    /// Submits an operation (tagged [`tag`](Self::tag)), waiting for room up to
    /// [`WAIT_BUDGET`]; returns its tag and receipt. A refusal fails the case.
    pub fn submit(
        &mut self,
        queue: QueueId,
        waits: &[(SemaphoreId, u64)],
        signals: &[(SemaphoreId, u64)],
        work: Work,
    ) -> (u64, Receipt) {
        let tag = self.tag();
        let op = Op { waits, signals, work, tag, ..Default::default() };
        match self.device().submit_timeout(queue, &op, WAIT_BUDGET) {
            Ok(receipt) => (tag, receipt),
            Err(error) => {
                panic!("submitting {work:?} (tag {tag}) to queue {}: {error}", queue.index())
            }
        }
    }

    /// Waits on the host for `semaphore` to reach `value`, within [`WAIT_BUDGET`].
    pub fn wait(&self, semaphore: SemaphoreId, value: u64) -> Result<u64, HostWaitError> {
        let semaphore = self.device().semaphore(semaphore).expect("a semaphore of the device");
        wait(semaphore, value, Some(WAIT_BUDGET))
    }

    /// Waits for `semaphore` to reach `value`; fails the case naming `what` if it fails or
    /// does not get there within [`WAIT_BUDGET`].
    pub fn expect_reached(&self, semaphore: SemaphoreId, value: u64, what: &str) {
        match self.wait(semaphore, value) {
            Ok(_) => {}
            Err(error) => panic!("{what}: waiting for value {value}: {error}"),
        }
    }

    /// Signals `semaphore` to `value` from the host (opens a gate).
    pub fn signal_from_host(&self, semaphore: SemaphoreId, value: u64) {
        let semaphore = self.device().semaphore(semaphore).expect("a semaphore of the device");
        semaphore.signal_external(value).expect("a host signal on an open gate");
    }

    /// The resolutions of `queues`' waits, summed.
    pub fn resolutions(&self, queues: &[QueueId]) -> ResolutionCounts {
        let mut sum = ResolutionCounts::default();
        for &queue in queues {
            sum += self.device().resolution_counts(queue).expect("a queue of the device");
        }
        sum
    }

    /// The native waits the driver under test reports having emitted, if it counts them.
    pub fn native_waits(&self) -> Option<u64> {
        self.native_waits.as_ref().map(|count| count())
    }

    /// Shuts the device down within `grace`.
    pub fn shutdown(&mut self, grace: Duration) -> ShutdownReport {
        self.device.take().expect("the device is still running").shutdown(grace)
    }

    /// Drops the device (its `Drop` shuts it down within its own grace).
    pub fn drop_device(&mut self) {
        drop(self.device.take());
    }
}

impl Drop for Rig {
    /// Ends the device, then runs the driver's own check, unless the case already failed (a
    /// second panic while unwinding would abort the test process).
    fn drop(&mut self) {
        drop(self.device.take());
        if let Some(check) = self.after_case.take() {
            if !std::thread::panicking() {
                check();
            }
        }
    }
}

/// The resolution of a receipt's only wait.
pub(crate) fn only_resolution(receipt: &Receipt) -> Resolution {
    match receipt.waits[..] {
        [WaitOutcome::Resolved(resolved)] => resolved.resolution,
        ref other => panic!("expected one resolved wait, got {other:?}"),
    }
}

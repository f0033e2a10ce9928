//! Describing a device and starting it.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use causeway_core::axis::{Axis, AxisError, Domain};
use causeway_core::queue::{Capabilities, QueueClock};
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::{Condvar, Mutex};
use causeway_runtime::{CpuPool, PoolConfig};

use super::process::QueueProcess;
use super::shared::{DeviceShared, MemoryState, StallCursor};
use super::Device;
use crate::backend::{Backend, Driver, DynBackend, QueueWaiters};
use crate::config::{QueueConfig, SemaphoreConfig};
use crate::error::DeviceError;
use crate::host_calls::{HostCall, HostCallTable, DEFAULT_SPARE_HOST_CALLS};
use crate::ids::DriverId;
use crate::ids::SemaphoreId;
use crate::ids::{allocate_axis, DeviceTag, HostCallId, QueueId, MAX_SEMAPHORE_SLOTS};
use crate::memory::MemoryPool;
use crate::op::{Invocation, Observer};
use crate::queue::{DriverKernels, QueueShared};
use crate::semaphores::SemaphoreTable;
use crate::sync::barrier;
#[cfg(doc)]
use crate::{Resource, Work, DEFAULT_SEMAPHORE_HISTORY};

/// Collects a device's drivers, queues, semaphores, host functions and memory pool; [`build`]
/// starts it.
///
/// [`build`]: DeviceBuilder::build
pub struct DeviceBuilder {
    workers: Workers,
    queues: Vec<(QueueConfig, Result<Endpoint, AxisError>)>,
    semaphores: Vec<SemaphoreConfig>,
    semaphore_pool: Option<(usize, SemaphoreConfig)>,
    host_calls: Vec<HostCall>,
    spare_host_calls: usize,
    /// What every semaphore id of this device carries (see `ids`).
    tag: DeviceTag,
    backends: Vec<Box<dyn DynBackend>>,
    buffers: usize,
    quota: u64,
    allocation_records: Option<usize>,
    observer: Option<Arc<dyn Observer>>,
}

/// Where a device's workers come from.
enum Workers {
    /// A pool the device starts.
    Start(PoolConfig),
    /// A pool already running, handed over.
    Running(CpuPool),
}

impl DeviceBuilder {
    /// A device run by a pool built from `pool`, with nothing in it yet.
    pub fn new(pool: PoolConfig) -> DeviceBuilder {
        DeviceBuilder::with_workers(Workers::Start(pool))
    }

    /// A device run by `pool`, a pool already running (a runtime's): one set of workers runs
    /// the device's queues and whatever else was submitted to the pool, instead of two pools
    /// on the same cores. The device owns the pool from now on: its shutdown stops the pool,
    /// and the pool's executor stays reachable through [`Device::executor`]. A build that
    /// fails shuts the pool down with the rest of the builder.
    pub fn on_pool(pool: CpuPool) -> DeviceBuilder {
        DeviceBuilder::with_workers(Workers::Running(pool))
    }

    fn with_workers(workers: Workers) -> DeviceBuilder {
        DeviceBuilder {
            workers,
            queues: Vec::new(),
            semaphores: Vec::new(),
            semaphore_pool: None,
            host_calls: Vec::new(),
            spare_host_calls: DEFAULT_SPARE_HOST_CALLS,
            tag: DeviceTag::next(),
            backends: Vec::new(),
            buffers: 0,
            quota: 0,
            allocation_records: None,
            observer: None,
        }
    }

    /// Adds a queue (its axis is allocated now, so its endpoint is known before `build`).
    pub fn queue(&mut self, config: QueueConfig) -> QueueId {
        let endpoint = allocate_axis(config.machine, Domain::Queue).map(|axis| Endpoint {
            machine: config.machine,
            process: 0,
            device_group: config.device_group,
            device: config.device,
            queue: axis.to_bits(),
        });
        self.queues.push((config, endpoint));
        QueueId::new(self.tag, self.queues.len() - 1)
    }

    /// Where queue `id` will sit (for semaphore homes); `None` for an unknown queue or one
    /// that got no axis.
    pub fn endpoint(&self, id: QueueId) -> Option<Endpoint> {
        let (_, endpoint) = self.queues.get(id.index()).filter(|_| id.is_of(self.tag))?;
        endpoint.as_ref().ok().copied()
    }

    /// Adds a semaphore at `initial`, visible within `scope` of `home`, with
    /// [`DEFAULT_SEMAPHORE_HISTORY`] history slots.
    pub fn semaphore(&mut self, initial: u64, scope: Scope, home: Endpoint) -> SemaphoreId {
        self.semaphore_config(SemaphoreConfig::new(initial, scope, home))
    }

    /// Adds a semaphore as `config` describes (its history size included).
    pub fn semaphore_config(&mut self, config: SemaphoreConfig) -> SemaphoreId {
        self.semaphores.push(config);
        SemaphoreTable::declared(self.tag, self.semaphores.len() - 1)
    }

    /// Gives the device `count` more semaphore slots, configured as `config` (scope, home,
    /// history; the initial value is given at creation), for
    /// [`Device::create_semaphore`] and [`Device::destroy_semaphore`] while it runs.
    pub fn semaphore_pool(&mut self, count: usize, config: SemaphoreConfig) {
        self.semaphore_pool = Some((count, config));
    }

    /// Registers a host function for [`Work::Host`]: called on a pool worker, in queue order,
    /// with the operation's [`Invocation`] (its queue, tag and arguments). Functions can also
    /// be registered once the device runs ([`Device::host_call`]).
    pub fn host_call(
        &mut self,
        call: impl Fn(&Invocation) -> Result<(), Failure> + Send + Sync + 'static,
    ) -> HostCallId {
        self.host_calls.push(Box::new(call));
        HostCallId(self.host_calls.len() as u32 - 1)
    }

    /// Room for `count` host functions registered while the device runs
    /// ([`Device::host_call`]); [`DEFAULT_SPARE_HOST_CALLS`] unless set. The table is made
    /// once, so registering later allocates only the function's box, never the table.
    pub fn spare_host_calls(&mut self, count: usize) {
        self.spare_host_calls = count;
    }

    /// Registers a driver; queues name it in [`QueueConfig::driver`]. The first one
    /// registered is [`DriverId(0)`](DriverId), the default.
    pub fn driver(&mut self, backend: impl Backend) -> DriverId {
        self.backends.push(Box::new(Driver(backend)));
        DriverId(self.backends.len() as u32 - 1)
    }

    /// Gives the device `buffers` stream-ordered buffer names sharing a pool of `quota`
    /// bytes.
    pub fn memory(&mut self, buffers: usize, quota: u64) {
        self.buffers = buffers;
        self.quota = quota;
    }

    /// How many allocas may be reserved and not yet decommitted at once (default: two per
    /// buffer name, enough for a buffer re-allocated while its previous dealloca is queued).
    /// When they are all held a submission waits for a dealloca to run
    /// ([`Resource::AllocationRecords`]).
    pub fn allocation_records(&mut self, records: usize) {
        self.allocation_records = Some(records);
    }

    /// Reports every operation's start and finish to `observer`.
    pub fn observer(&mut self, observer: Arc<dyn Observer>) {
        self.observer = Some(observer);
    }

    /// Starts the pool and the queue processes.
    pub fn build(mut self) -> Result<Device, DeviceError> {
        let slots = self.semaphores.len() + self.semaphore_pool.map_or(0, |(count, _)| count);
        if slots > MAX_SEMAPHORE_SLOTS {
            return Err(DeviceError::TooManySemaphores { slots, max: MAX_SEMAPHORE_SLOTS });
        }
        let mut queues = Vec::with_capacity(self.queues.len());
        let mut opened = Vec::with_capacity(self.queues.len());
        let mut endpoints = Vec::with_capacity(self.queues.len());
        let mut queue_names = Vec::with_capacity(self.queues.len());
        for (index, (config, endpoint)) in self.queues.iter().enumerate() {
            let id = QueueId::new(self.tag, index);
            if config.capacity == 0 {
                return Err(DeviceError::ZeroCapacity(id));
            }
            let endpoint = (*endpoint).map_err(DeviceError::Axis)?;
            let axis = Axis::from_bits(endpoint.queue)
                .ok_or(DeviceError::Axis(AxisError::Exhausted { domain: Domain::Queue }))?;
            let driver = config.driver.0 as usize;
            let backend = self
                .backends
                .get_mut(driver)
                .ok_or(DeviceError::UnknownDriver(id, config.driver))?;
            let driver_queue =
                backend.open_queue(id, config).map_err(|error| DeviceError::Driver(id, error))?;
            opened.push(driver_queue);
            queue_names.push(match config.name {
                Some(name) => Box::from(name),
                None => format!("{}:{index}", backend.name()).into_boxed_str(),
            });
            let native = backend.capabilities();
            let capabilities = Capabilities {
                wait_before_signal: config.wait_before_signal && native.wait_before_signal,
            };
            let kernels = DriverKernels { timed: native.timed_kernels };
            queues.push(QueueShared::new(
                id,
                driver,
                kernels,
                native,
                QueueClock::new(axis, endpoint, capabilities),
                config.capacity,
                self.queues.len(),
            ));
            endpoints.push(endpoint);
        }
        // Before any queue process runs: the rings' free-slot handshake uses the asymmetric
        // barrier (see `queue`), which is a fence on both sides until this has registered it.
        barrier::prepare();
        let pool = match self.workers {
            Workers::Start(config) => CpuPool::start(config).map_err(DeviceError::Pool)?,
            Workers::Running(pool) => pool,
        };
        let workers = pool.workers();
        let semaphores =
            SemaphoreTable::new(self.tag, &self.semaphores, self.semaphore_pool, self.queues.len())
                .map_err(|(index, error)| {
                    DeviceError::History(SemaphoreTable::declared(self.tag, index), error)
                })?;
        let shared = Box::new(DeviceShared {
            tag: self.tag,
            queues: queues.into_boxed_slice(),
            endpoints: endpoints.into_boxed_slice(),
            semaphores,
            host_calls: HostCallTable::new(self.host_calls, self.spare_host_calls),
            backends: self.backends.into_boxed_slice(),
            memory: Mutex::new(MemoryState {
                pool: MemoryPool::new(
                    self.quota,
                    self.buffers,
                    self.allocation_records.unwrap_or(self.buffers.saturating_mul(2)),
                ),
                waiting: QueueWaiters::new(self.queues.len()),
                record_waiters: 0,
            }),
            records_freed: Condvar::new(),
            observer: self.observer,
            queue_names: queue_names.into_boxed_slice(),
            faults: Mutex::new(Vec::new()),
            executor: pool.shared_executor(),
            workers,
            start: Instant::now(),
            stall_walk: Mutex::new(vec![StallCursor::default(); self.queues.len()].into()),
            processes: OnceLock::new(),
        });
        let owned = Box::into_raw(shared);
        // SAFETY: `owned` came from `Box::into_raw` just above and is freed only in
        // `Device::drop`, after the pool's workers (the only other holders of references
        // derived from it) have been joined; nothing moves it in between.
        let shared: &'static DeviceShared = unsafe { &*owned };
        let device = Device { pool: Some(pool), owned };
        for backend in shared.backends.iter() {
            backend.start(shared.context());
        }
        let processes = shared.queues.iter().map(|queue| QueueProcess::new(shared, queue));
        let processes = shared.processes.get_or_init(|| processes.collect());
        for ((queue, opened), drain) in shared.queues.iter().zip(opened).zip(processes.iter()) {
            let driver_queue = shared.backends[queue.driver]
                .bind(opened)
                .expect("each queue is bound to the backend that opened it");
            let process = queue.link(drain, &shared.executor, driver_queue);
            // The queue process is fresh and the pool has just started: submission cannot be
            // refused.
            shared.executor.submit(process).expect("a fresh queue process is accepted");
        }
        Ok(device)
    }
}

impl fmt::Debug for DeviceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuilder")
            .field("queues", &self.queues)
            .field("semaphores", &self.semaphores.len())
            .field("host_calls", &self.host_calls.len())
            .field("drivers", &self.backends.iter().map(|b| b.name()).collect::<Vec<_>>())
            .field("buffers", &self.buffers)
            .field("quota", &self.quota)
            .finish_non_exhaustive()
    }
}

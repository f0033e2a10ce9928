//! [`Runtime`]: the hosted executor with its worker threads, configured by a builder.

use causeway_core::executor::{Process, ProcessError, SpinPolicy};
use causeway_runtime::{CpuPool, HostExecutor, PoolConfig, PoolError};

/// Configures a [`Runtime`].
#[derive(Clone, Debug)]
pub struct RuntimeBuilder {
    config: PoolConfig,
}

impl RuntimeBuilder {
    /// Worker threads (1..=64; default: the available parallelism).
    pub fn workers(mut self, workers: usize) -> RuntimeBuilder {
        self.config.workers = workers;
        self
    }

    /// How long idle workers keep scanning before they park (default: adaptive).
    pub fn spin(mut self, spin: SpinPolicy) -> RuntimeBuilder {
        self.config.spin = spin;
        self
    }

    /// Pin worker `i` to CPU `i` (default: off).
    pub fn pin_threads(mut self, pin: bool) -> RuntimeBuilder {
        self.config.pin = pin;
        self
    }

    /// Thread name prefix (default `causeway-worker`).
    pub fn thread_name(mut self, name: impl Into<String>) -> RuntimeBuilder {
        self.config.name = name.into();
        self
    }

    /// Starts the workers; processes must live as long as the runtime (`'static`).
    pub fn build(self) -> Result<Runtime, PoolError> {
        Ok(Runtime { pool: CpuPool::start(self.config)? })
    }

    /// Runs `body` with workers on scoped threads, so processes may borrow from the caller;
    /// shuts down and joins when `body` returns.
    pub fn scope<'p, R>(self, body: impl FnOnce(&HostExecutor<'p>) -> R) -> Result<R, PoolError> {
        CpuPool::scope(self.config, body)
    }
}

/// The hosted runtime: a cooperative executor and its worker threads.
///
/// ```
/// use causeway::executor::{Class, Drain, DrainContext, Drained, Process};
/// use causeway::Runtime;
///
/// struct Hello;
/// impl Drain for Hello {
///     fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
///         Drained::Done(Ok(()))
///     }
/// }
/// static HELLO: Process<'static> = Process::new(&Hello, Class::Immediate);
///
/// let runtime = Runtime::builder().workers(2).build()?;
/// runtime.submit(&HELLO)?;
/// while !HELLO.is_completed() {
///     std::thread::yield_now();
/// }
/// runtime.shutdown();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Runtime {
    pool: CpuPool,
}

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder { config: PoolConfig::default() }
    }

    /// The executor: submit, hold, release, wake and cancel processes from any thread.
    pub fn executor(&self) -> &HostExecutor<'static> {
        self.pool.executor()
    }

    /// Submits a process (see [`Executor::submit`](causeway_core::executor::Executor::submit)).
    pub fn submit(&self, process: &'static Process<'static>) -> Result<(), ProcessError> {
        self.pool.submit(process)
    }

    /// Cancels queued work and joins the workers; returns how many of them panicked.
    pub fn shutdown(self) -> usize {
        self.pool.shutdown()
    }

    /// Hands the runtime's workers to a device: the device's queues run on them beside every
    /// process already submitted, one pool instead of two on the same cores. The device owns
    /// the workers from then on (its shutdown stops them); its
    /// [`executor`](causeway_device::Device::executor) is this runtime's.
    ///
    /// ```
    /// use causeway::device::{Op, QueueConfig};
    /// use causeway::Runtime;
    ///
    /// let runtime = Runtime::builder().workers(2).build()?;
    /// let mut builder = runtime.into_device_builder();
    /// let cpu = builder.driver(causeway::cpu::CpuBackend::new());
    /// let queue = builder.queue(QueueConfig::on(cpu));
    /// let device = builder.build()?;
    /// device.submit(queue, &Op::default())?;
    /// assert_eq!(device.executor().workers(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_device_builder(self) -> causeway_device::DeviceBuilder {
        causeway_device::DeviceBuilder::on_pool(self.pool)
    }
}

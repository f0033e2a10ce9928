//! The hosted CPU worker pool: the threads that run a causeway [`Executor`].
//!
//! A [`CpuPool`] owns an executor (parking on the host's futex) and one named thread per
//! worker, optionally pinned to a CPU each. Any thread may submit, release, wake or cancel
//! processes; activation wakes a parked worker directly. Two shapes:
//!
//! - [`CpuPool::start`] — a long-lived pool for processes that live as long as the program
//!   (`&'static`): statics, or storage leaked once and reused through [`Process::rearm`].
//! - [`CpuPool::scope`] — workers that exist for the duration of a closure, so processes may
//!   borrow from the caller's stack.
//!
//! Shutting down (explicitly, or by dropping the pool) cancels queued work and joins the
//! threads: each worker finishes at most the drain call it is in.
//!
//! On top of the pool: [`block`] runs recorded command buffers of tiled dispatches on every
//! worker ([`BlockProcessor`]); [`device`] is the CPU device (queues, semaphores, memory);
//! [`coroutine`] runs futures as processes, [`wait`](mod@wait) makes semaphores and fences awaitable,
//! [`invoke`] is the invocation model on top of them, and [`stream`] drains a ring of small
//! direct operations.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;

use causeway_core::executor::{
    Executor, ExecutorError, Process, ProcessError, RoundRobin, SpinPolicy,
};

pub mod block;
pub mod blocking;
mod contain;
pub mod coroutine;
// The device is not a loom model (its lock-free parts are core's), and core's axis allocator
// is not `const` under loom.
#[cfg(not(loom))]
pub mod device;
mod host;
pub mod invoke;
pub mod stream;
mod sync;
pub mod wait;

pub use block::{BlockError, BlockProcessor, CommandBuffer, Kernel, OnFinish};
pub use coroutine::{JoinError, JoinHandle, SpawnError, Spawner};
pub use host::HostFutex;
pub use invoke::{Invocation, InvokeError, Invoker};
pub use stream::{DirectOp, Operation, Producer, PushError, Stream, Submitter};
pub use wait::{block_on, wait, wait_fence, FenceExt, FenceWait, SemaphoreExt, SemaphoreWait};

use host::pin_current_thread;

/// The executor a pool drives: 64 compute slots, up to 64 workers, parking on [`HostFutex`].
pub type HostExecutor<'p> = Executor<'p, HostFutex, 64, 64>;

/// How to build a pool.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolConfig {
    /// Worker threads (1..=64).
    pub workers: usize,
    /// How long idle workers scan before parking.
    pub spin: SpinPolicy,
    /// Pin worker `i` to CPU `i` modulo the available parallelism.
    pub pin: bool,
    /// Thread names are `"{name}-{index}"`.
    pub name: String,
}

impl Default for PoolConfig {
    fn default() -> PoolConfig {
        PoolConfig {
            workers: thread::available_parallelism().map_or(1, usize::from).min(64),
            spin: SpinPolicy::default(),
            pin: false,
            name: String::from("causeway-worker"),
        }
    }
}

impl PoolConfig {
    /// The default configuration with `workers` workers.
    pub fn with_workers(workers: usize) -> PoolConfig {
        PoolConfig { workers, ..PoolConfig::default() }
    }
}

/// Why a pool could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum PoolError {
    /// The executor refused the configuration.
    Executor(ExecutorError),
    /// The operating system would not create a worker thread.
    Spawn(std::io::Error),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::Executor(error) => write!(f, "executor configuration: {error}"),
            PoolError::Spawn(error) => write!(f, "cannot spawn a worker thread: {error}"),
        }
    }
}

impl std::error::Error for PoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PoolError::Executor(error) => Some(error),
            PoolError::Spawn(error) => Some(error),
        }
    }
}

impl From<ExecutorError> for PoolError {
    fn from(error: ExecutorError) -> PoolError {
        PoolError::Executor(error)
    }
}

/// A running pool of worker threads for `'static` processes. See the [crate docs](crate).
pub struct CpuPool {
    executor: Arc<HostExecutor<'static>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl CpuPool {
    /// Builds the executor and starts the workers; returns once every worker thread runs.
    pub fn start(config: PoolConfig) -> Result<CpuPool, PoolError> {
        let executor = Arc::new(HostExecutor::new(HostFutex::new(), config.workers)?);
        let mut pool = CpuPool { executor, threads: Vec::with_capacity(config.workers) };
        let started = Arc::new(Started::default());
        for index in 0..config.workers {
            let executor = Arc::clone(&pool.executor);
            let started = Arc::clone(&started);
            let spin = config.spin;
            let pin = config.pin;
            let spawned =
                thread::Builder::new().name(format!("{}-{index}", config.name)).spawn(move || {
                    started.arrive();
                    run_worker(&executor, index, spin, pin);
                });
            match spawned {
                Ok(handle) => pool.threads.push(handle),
                // Dropping the partial pool shuts down and joins the workers already running.
                Err(error) => return Err(PoolError::Spawn(error)),
            }
        }
        started.wait_for(config.workers);
        Ok(pool)
    }

    /// Runs `body` with an executor whose workers run on scoped threads, so processes may
    /// borrow from the caller; `body` starts once every worker thread runs. When `body`
    /// returns, the executor shuts down (cancelling what is still queued) and the workers are
    /// joined.
    pub fn scope<'p, R>(
        config: PoolConfig,
        body: impl FnOnce(&HostExecutor<'p>) -> R,
    ) -> Result<R, PoolError> {
        let executor = HostExecutor::new(HostFutex::new(), config.workers)?;
        let started = Started::default();
        thread::scope(|scope| {
            let (executor, started) = (&executor, &started);
            let mut spawn_error = None;
            for index in 0..config.workers {
                let spawned = thread::Builder::new()
                    .name(format!("{}-{index}", config.name))
                    .spawn_scoped(scope, move || {
                        started.arrive();
                        run_worker(executor, index, config.spin, config.pin);
                    });
                if let Err(error) = spawned {
                    spawn_error = Some(error);
                    break;
                }
            }
            // Shut down on the way out even if `body` panics: the scope joins the workers
            // before it re-raises the panic, and they only return once shut down.
            let _shutdown = ShutdownOnExit(executor);
            match spawn_error {
                None => {
                    started.wait_for(config.workers);
                    Ok(body(executor))
                }
                Some(error) => Err(PoolError::Spawn(error)),
            }
        })
    }

    /// The executor, for submitting, releasing, waking and cancelling processes.
    pub fn executor(&self) -> &HostExecutor<'static> {
        &self.executor
    }

    /// Another handle to the executor, for state that must reach it from worker threads.
    #[cfg(not(loom))]
    pub(crate) fn shared_executor(&self) -> Arc<HostExecutor<'static>> {
        Arc::clone(&self.executor)
    }

    /// Submits a process (see [`Executor::submit`]).
    pub fn submit(&self, process: &'static Process<'static>) -> Result<(), ProcessError> {
        self.executor.submit(process)
    }

    /// Shuts the executor down and joins every worker; returns how many workers panicked.
    pub fn shutdown(mut self) -> usize {
        self.stop()
    }

    fn stop(&mut self) -> usize {
        self.executor.shutdown();
        self.threads.drain(..).map(|handle| handle.join()).filter(Result::is_err).count()
    }
}

impl Drop for CpuPool {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for CpuPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuPool").field("executor", &self.executor).finish_non_exhaustive()
    }
}

/// Worker threads that have begun running. A spawned thread may be scheduled long after
/// `spawn` returns, and its start-up (std's per-thread set-up allocates) would then land in the
/// middle of the caller's first work; the pool waits for every worker instead.
#[derive(Default)]
struct Started {
    count: Mutex<usize>,
    all: Condvar,
}

impl Started {
    /// Called first thing on each worker thread.
    fn arrive(&self) {
        *lock(&self.count) += 1;
        self.all.notify_all();
    }

    fn wait_for(&self, workers: usize) {
        let mut count = lock(&self.count);
        while *count < workers {
            count = self.all.wait(count).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The count is a plain integer, consistent whatever panicked while holding it.
fn lock(count: &Mutex<usize>) -> MutexGuard<'_, usize> {
    count.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Shuts an executor down when dropped, panics included.
struct ShutdownOnExit<'e, 'p>(&'e HostExecutor<'p>);

impl Drop for ShutdownOnExit<'_, '_> {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

fn run_worker(executor: &HostExecutor<'_>, index: usize, spin: SpinPolicy, pin: bool) {
    if pin {
        let cpus = thread::available_parallelism().map_or(1, usize::from);
        // Pinning is an optimisation: a refusal (a restricted cpuset) leaves the thread free.
        let _ = pin_current_thread(index % cpus);
    }
    // The index is below the worker count and taken only here, so this cannot fail; if it
    // somehow did, the thread simply has nothing to run.
    if let Ok(mut worker) = executor.worker::<RoundRobin>(index, spin) {
        worker.run();
    }
}

// Real worker threads: outside any loom model, so not under `cfg(loom)`.
#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    use causeway_core::executor::{Class, Drain, DrainContext, Drained};

    use super::*;

    struct Counter(AtomicU32);

    impl Drain for Counter {
        fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
            self.0.fetch_add(1, Ordering::Relaxed);
            Drained::Done(Ok(()))
        }
    }

    fn wait_until(condition: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !condition() {
            assert!(Instant::now() < deadline, "condition not reached in 30 s");
            thread::yield_now();
        }
    }

    #[test]
    fn a_started_pool_runs_static_processes_and_shuts_down() {
        static COUNTER: Counter = Counter(AtomicU32::new(0));
        static PROCESS: Process<'static> = Process::new(&COUNTER, Class::Immediate);
        let config =
            PoolConfig { spin: SpinPolicy::Park, pin: true, ..PoolConfig::with_workers(2) };
        let pool = CpuPool::start(config).unwrap();
        pool.submit(&PROCESS).unwrap();
        wait_until(|| PROCESS.is_completed());
        assert_eq!(COUNTER.0.load(Ordering::Relaxed), 1);
        assert_eq!(pool.shutdown(), 0);
    }

    #[test]
    fn a_scoped_pool_runs_borrowed_processes() {
        let counters: Vec<Counter> = (0..16).map(|_| Counter(AtomicU32::new(0))).collect();
        let processes: Vec<Process> =
            counters.iter().map(|counter| Process::new(counter, Class::Immediate)).collect();
        CpuPool::scope(PoolConfig::with_workers(2), |executor| {
            for process in &processes {
                executor.submit(process).unwrap();
            }
            wait_until(|| executor.live() == 0);
        })
        .unwrap();
        assert!(counters.iter().all(|counter| counter.0.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn bad_worker_counts_are_refused() {
        assert!(matches!(
            CpuPool::start(PoolConfig::with_workers(0)),
            Err(PoolError::Executor(ExecutorError::WorkerCount { requested: 0, .. }))
        ));
        assert!(matches!(
            CpuPool::scope(PoolConfig::with_workers(65), |_| ()),
            Err(PoolError::Executor(ExecutorError::WorkerCount { requested: 65, .. }))
        ));
    }
}

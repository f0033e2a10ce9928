//! # causeway-runtime
//!
//! The hosted runtime: the worker pool whose threads run a causeway [`Executor`], and what
//! runs on it besides device queues.
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
//! threads: each worker finishes at most the drain call it is in. A drain call that never
//! returns (a kernel stuck in a loop) would make that join wait forever, so
//! [`CpuPool::shutdown_within`] waits a bounded time and abandons the workers still inside a
//! drain: their threads are detached, and everything they can reach (the executor, and the
//! state of the processes they run) must stay alive — it is kept, not freed.
//!
//! On top of the pool: [`coroutine`] runs futures as processes, [`wait`](mod@wait) makes semaphores and fences awaitable,
//! [`invoke`] is the invocation model on top of them, and [`stream`] drains a ring of small
//! direct operations. [`blocking`] makes a host thread wait for a semaphore value, and
//! [`contain`] and [`sync`] are what the layers above share for running user code and for
//! loom-modelled protocols; [`barrier`] is the host's asymmetric store → load barrier for
//! protocols with a frequent and a rare side. The device layer (`causeway-device`) runs its queues on this pool;
//! `docs/src/architecture.md` shows where each layer sits.
//!
//! The guide's chapter on the library: `docs/src/library.md` in the repository.

use std::fmt;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{
    Executor, ExecutorError, Process, ProcessError, RoundRobin, SpinPolicy,
};
use causeway_core::unpoisoned::{Condvar, Mutex};

pub mod blocking;
pub mod contain;
pub mod coroutine;
mod host;
pub mod invoke;
pub mod stream;
pub mod sync;
pub mod wait;

/// The host's asymmetric store → load barrier (see the module's documentation).
pub use causeway_platform_linux::barrier;
pub use coroutine::{JoinError, JoinHandle, SpawnError, Spawner};
pub use host::HostFutex;
pub use invoke::{Invocation, InvokeError, Invoker};
pub use stream::{DirectOp, Operation, Producer, PushError, Stream, Submitter};
pub use wait::{block_on, wait, wait_fence, FenceExt, FenceWait, SemaphoreExt, SemaphoreWait};

use host::pin_current_thread;

/// The executor a pool drives: 64 compute slots, up to 64 workers, parking on [`HostFutex`].
pub type HostExecutor<'p> = Executor<'p, HostFutex, 64, 64>;

/// Axes every frontier of the hosted layers holds: a device's operations, queue clocks and
/// semaphore histories, invocation contexts, the scenario runner's host steps and whatever their
/// callers signal with. One number for all of them, because their frontiers meet: what an
/// operation signals becomes what a waiter on another queue, an invocation or a host step
/// knows. Core takes the capacity as a parameter everywhere and fixes nothing.
pub const FRONTIER_CAPACITY: usize = 8;

/// Busy-runs the calling thread for `duration`: a stand-in kernel or host function that holds
/// its worker, as real compute would. A duration too long to add to now spins on as long as
/// the thread lives (as asked).
pub fn spin_for(duration: Duration) {
    let until = Instant::now().checked_add(duration);
    while until.is_none_or(|until| Instant::now() < until) {
        std::hint::spin_loop();
    }
}

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

// Setters that chain (`PoolConfig::with_workers(2).pin(true)`): the struct is
// `#[non_exhaustive]`, so code outside this crate cannot build it with a literal.
impl PoolConfig {
    /// The default configuration with `workers` workers.
    pub fn with_workers(workers: usize) -> PoolConfig {
        PoolConfig { workers, ..PoolConfig::default() }
    }

    /// With [`workers`](PoolConfig#structfield.workers) set to `workers`.
    #[must_use]
    pub fn workers(mut self, workers: usize) -> PoolConfig {
        self.workers = workers;
        self
    }

    /// With [`spin`](PoolConfig#structfield.spin) set to `spin`.
    #[must_use]
    pub fn spin(mut self, spin: SpinPolicy) -> PoolConfig {
        self.spin = spin;
        self
    }

    /// With [`pin`](PoolConfig#structfield.pin) set to `pin`.
    #[must_use]
    pub fn pin(mut self, pin: bool) -> PoolConfig {
        self.pin = pin;
        self
    }

    /// With [`name`](PoolConfig#structfield.name) set to `name`.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> PoolConfig {
        self.name = name.into();
        self
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
    exits: Arc<Exits>,
}

/// How a bounded shutdown ended ([`CpuPool::shutdown_within`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolShutdown {
    /// Workers that exited by panicking (joined).
    pub panicked: usize,
    /// Indices of the workers still inside a drain call when the grace period ended; their
    /// threads were detached, not joined.
    pub abandoned: Vec<usize>,
}

impl CpuPool {
    /// Builds the executor and starts the workers; returns once every worker thread runs.
    pub fn start(config: PoolConfig) -> Result<CpuPool, PoolError> {
        let executor = Arc::new(HostExecutor::new(HostFutex::new(), config.workers)?);
        let exits = Arc::new(Exits::new(config.workers));
        let mut pool = CpuPool { executor, threads: Vec::with_capacity(config.workers), exits };
        let started = Arc::new(Started::default());
        for index in 0..config.workers {
            let executor = Arc::clone(&pool.executor);
            let started = Arc::clone(&started);
            let exits = Arc::clone(&pool.exits);
            let spin = config.spin;
            let pin = config.pin;
            let spawned =
                thread::Builder::new().name(format!("{}-{index}", config.name)).spawn(move || {
                    // Marks the exit however the thread ends, panics included.
                    let _exit = ExitOnDrop { exits: &exits, index };
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

    /// Its worker threads.
    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    /// Another handle to the executor, for state that must reach it from worker threads (a
    /// device's queues wake each other through it).
    pub fn shared_executor(&self) -> Arc<HostExecutor<'static>> {
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

    /// Shuts the executor down and waits up to `grace` for every worker to finish the drain
    /// call it is in; workers still inside one then are abandoned (detached, never joined),
    /// the others joined. Whatever an abandoned worker can still reach — the executor, which
    /// its thread keeps alive, and the processes it drains — must outlive it: the caller keeps
    /// such process state alive (a device leaks it).
    pub fn shutdown_within(mut self, grace: Duration) -> PoolShutdown {
        self.executor.shutdown();
        let deadline = Instant::now().checked_add(grace);
        let exited = self.exits.wait_until(deadline);
        let mut report = PoolShutdown::default();
        for (index, handle) in self.threads.drain(..).enumerate() {
            if exited[index] {
                report.panicked += usize::from(handle.join().is_err());
            } else {
                // Dropping the handle detaches the thread.
                report.abandoned.push(index);
            }
        }
        report
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
    /// A plain count, consistent whatever panicked while holding it.
    count: Mutex<usize>,
    all: Condvar,
}

impl Started {
    /// Called first thing on each worker thread.
    fn arrive(&self) {
        *self.count.lock() += 1;
        self.all.notify_all();
    }

    fn wait_for(&self, workers: usize) {
        let mut count = self.count.lock();
        while *count < workers {
            count = self.all.wait(count);
        }
    }
}

/// Which worker threads have ended, so a bounded shutdown can tell the stuck ones.
struct Exits {
    /// Plain flags, consistent whatever panicked while holding them.
    exited: Mutex<Vec<bool>>,
    changed: Condvar,
}

impl Exits {
    fn new(workers: usize) -> Exits {
        Exits { exited: Mutex::new(vec![false; workers]), changed: Condvar::new() }
    }

    /// Waits until every worker has exited or `deadline` passes; returns who exited.
    fn wait_until(&self, deadline: Option<Instant>) -> Vec<bool> {
        let mut exited = self.exited.lock();
        while !exited.iter().all(|&done| done) {
            exited = match deadline {
                None => self.changed.wait(exited),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    self.changed.wait_timeout(exited, deadline - now).0
                }
            };
        }
        exited.clone()
    }
}

/// Records its worker's exit when dropped.
struct ExitOnDrop<'e> {
    exits: &'e Exits,
    index: usize,
}

impl Drop for ExitOnDrop<'_> {
    fn drop(&mut self) {
        let mut exited = self.exits.exited.lock();
        exited[self.index] = true;
        self.exits.changed.notify_all();
    }
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

    #[test]
    fn config_setters_set_their_field_only() {
        let config = PoolConfig::with_workers(2).spin(SpinPolicy::Park).pin(true).name("io");
        let expected =
            PoolConfig { workers: 2, spin: SpinPolicy::Park, pin: true, name: String::from("io") };
        assert_eq!(config, expected);
        assert_eq!(config.workers(3), PoolConfig { workers: 3, ..expected });
    }

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

    /// Never returns: a kernel stuck in a loop (it yields, to leave the test machine a core).
    struct Stuck(AtomicU32);

    impl Drain for Stuck {
        fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
            self.0.store(1, Ordering::Release);
            loop {
                thread::sleep(Duration::from_millis(5));
            }
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "abandons a worker thread on purpose; Miri requires every thread to end"
    )]
    fn a_bounded_shutdown_abandons_a_worker_stuck_in_a_drain() {
        static STUCK: Stuck = Stuck(AtomicU32::new(0));
        static PROCESS: Process<'static> = Process::new(&STUCK, Class::Immediate);
        let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
        pool.submit(&PROCESS).unwrap();
        wait_until(|| STUCK.0.load(Ordering::Acquire) == 1);
        // Returns (after the grace period) although one drain never will.
        let report = pool.shutdown_within(Duration::from_millis(100));
        assert_eq!(report.abandoned.len(), 1, "{report:?}");
        assert_eq!(report.panicked, 0);
    }

    #[test]
    fn a_bounded_shutdown_of_idle_workers_joins_them_all() {
        let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
        assert_eq!(pool.shutdown_within(Duration::from_secs(30)), PoolShutdown::default());
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

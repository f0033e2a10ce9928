//! The suite's reference driver: the foreign side of every cross-driver case.
//!
//! A software device with one engine thread of its own, the shape of a GPU or NPU driver behind
//! the seam: [`Backend::issue`] queues the operation for the engine and answers
//! [`Issued::Pending`]; the engine runs it, records how it ended, and wakes the queue through
//! [`DeviceContext::wake`]; the layer then collects the status with [`Backend::poll`]. It keeps
//! the same contract as any driver under test, kept deliberately small:
//!
//! - kernels are [`Work::Execute`] of programs recorded when it is made ([`PeerBackend::new`]):
//!   a short one, a long one (for shutdown with work in flight) and one that fails with
//!   [`PEER_FAILURE`];
//! - its queues wait before signal (timeline semantics) and leave device waits to the layer (no
//!   native waits), so a wait of another driver's queue on it is a host-armed device wait or a
//!   held wait, never a native one;
//! - one engine runs every queue's work, one operation at a time, in the order issued;
//! - [`Backend::stop`] ends the engine by the shutdown's deadline (it finishes what it was
//!   handed first, as hardware would drain its queue).
//!
//! The suite does not use the real CPU driver for this: a driver crate's tests depend on the
//! suite, and the suite depending on a driver crate would make those dependencies circular.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, CommandBufferId, DeviceContext, DriverError, Issue, Issued,
    Kernel, OpStatus, QueueConfig, QueueId, Work,
};

/// The peer's raw code for its failing kernel's fault, as a real device would report one.
pub const PEER_FAULT_CODE: u32 = 0xC75;

/// The failure the peer's failing kernel ends with: its fault, with the peer's code attached.
pub const PEER_FAILURE: Failure = Failure::Faulted(PEER_FAULT_CODE);

/// The peer's driver name, as reports and errors show it.
pub const PEER_NAME: &str = "cts-peer";

/// How long the peer's long kernel occupies its engine: long enough that a shutdown started
/// right after it began finds it running, short enough to keep the suite fast.
const LONG_KERNEL: Duration = Duration::from_millis(100);

/// How often [`Backend::stop`] looks whether the engine thread has ended.
const STOP_POLL: Duration = Duration::from_millis(1);

/// What a recorded program does on the engine.
#[derive(Clone, Copy, Debug)]
enum Program {
    /// Occupies the engine for this long, then succeeds.
    Run(Duration),
    /// Fails at once with this failure.
    Fail(Failure),
}

/// The peer's kernels, recorded when it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerKernels {
    /// Succeeds at once (one round trip through the engine thread).
    pub short: Work,
    /// Occupies the engine for a while, then succeeds.
    pub long: Work,
    /// Fails with [`PEER_FAILURE`].
    pub failing: Work,
}

/// The engine's state, shared by the queue processes that issue to it and its thread.
#[derive(Debug, Default)]
struct Engine {
    /// Issued work not started yet, in issue order.
    queued: VecDeque<(QueueId, Program)>,
    /// The queue whose work runs now.
    running: Option<QueueId>,
    /// By queue index: the status of the queue's ended work, not yet polled. Without native
    /// waits the layer has at most one operation of a queue pending at a time.
    ended: Vec<Option<OpStatus>>,
    /// The device is shutting down: end the thread once the queue is drained.
    stopping: bool,
}

/// The reference driver. See the [module documentation](self).
#[derive(Debug)]
pub struct PeerBackend {
    programs: Vec<Program>,
    engine: Mutex<Engine>,
    work_arrived: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl PeerBackend {
    /// A peer driver with its three kernels recorded.
    pub fn new() -> (PeerBackend, PeerKernels) {
        let peer = PeerBackend {
            programs: vec![
                Program::Run(Duration::ZERO),
                Program::Run(LONG_KERNEL),
                Program::Fail(PEER_FAILURE),
            ],
            engine: Mutex::new(Engine::default()),
            work_arrived: Condvar::new(),
            thread: Mutex::new(None),
        };
        let kernels = PeerKernels {
            short: Work::Execute(CommandBufferId(0)),
            long: Work::Execute(CommandBufferId(1)),
            failing: Work::Execute(CommandBufferId(2)),
        };
        (peer, kernels)
    }

    /// The program `buffer` names: one this backend recorded (the layer hands a driver only
    /// buffers below its [`Backend::command_buffers`]).
    fn program(&self, buffer: CommandBufferId) -> Program {
        self.programs[buffer.0 as usize]
    }

    fn lock_engine(&self) -> MutexGuard<'_, Engine> {
        // The engine's state stays consistent across a panic in a test thread: every update is
        // a single assignment or queue operation.
        self.engine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The engine thread: runs queued programs in order until stopped and drained.
    fn run_engine(&self, device: DeviceContext) {
        let mut engine = self.lock_engine();
        loop {
            if let Some((queue, program)) = engine.queued.pop_front() {
                engine.running = Some(queue);
                drop(engine);
                let status = match program {
                    Program::Run(duration) => {
                        thread::sleep(duration);
                        OpStatus::Ok
                    }
                    Program::Fail(failure) => OpStatus::Failed(failure),
                };
                engine = self.lock_engine();
                engine.running = None;
                if let Some(ended) = engine.ended.get_mut(queue.index()) {
                    *ended = Some(status);
                }
                drop(engine);
                device.wake(queue);
                engine = self.lock_engine();
            } else if engine.stopping {
                return;
            } else {
                engine = self.work_arrived.wait(engine).unwrap_or_else(PoisonError::into_inner);
            }
        }
    }
}

impl Backend for PeerBackend {
    /// The queue's id: the engine records each queue's ended work by it.
    type Queue = QueueId;

    fn name(&self) -> &'static str {
        PEER_NAME
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(true)
    }

    fn command_buffers(&self) -> u32 {
        // Three, recorded in `new`.
        self.programs.len() as u32
    }

    fn open_queue(
        &mut self,
        queue: QueueId,
        _config: &QueueConfig,
    ) -> Result<QueueId, DriverError> {
        let engine = self.engine.get_mut().unwrap_or_else(PoisonError::into_inner);
        if engine.ended.len() <= queue.index() {
            engine.ended.resize(queue.index() + 1, None);
        }
        Ok(queue)
    }

    fn start(&'static self, device: DeviceContext) {
        let engine = thread::Builder::new()
            .name(PEER_NAME.into())
            .spawn(move || self.run_engine(device))
            .expect("the peer driver's engine thread starts");
        *self.thread.lock().unwrap_or_else(PoisonError::into_inner) = Some(engine);
    }

    fn issue(&'static self, &queue: &'static QueueId, issue: &mut Issue<'_>) -> Issued {
        // Command buffers are the only kernels it declares: the layer refuses the others.
        let Kernel::Execute(buffer) = issue.kernel() else {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        };
        self.lock_engine().queued.push_back((queue, self.program(buffer)));
        self.work_arrived.notify_one();
        Issued::Pending
    }

    fn poll(&'static self, queue: &'static QueueId, _epoch: u64, _: Kernel) -> Option<OpStatus> {
        self.lock_engine().ended.get_mut(queue.index()).and_then(Option::take)
    }

    fn is_running(&self, &queue: &QueueId, _: Kernel, _workers_abandoned: bool) -> bool {
        let engine = self.lock_engine();
        engine.running == Some(queue) || engine.queued.iter().any(|&(queued, _)| queued == queue)
    }

    fn stop(&self, deadline: Instant) -> bool {
        self.lock_engine().stopping = true;
        self.work_arrived.notify_all();
        let Some(engine) = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take() else {
            return true;
        };
        while !engine.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(STOP_POLL);
        }
        engine.join().is_ok()
    }
}

//! Executing recorded command buffers from a queue: issuing one hands the buffer's block
//! processor to every worker and reports the operation pending; the processor's finish hook
//! wakes the queue, whose poll then collects the outcome.
//!
//! The backend owns each recorded buffer with one processor and one compute process, reused for
//! every execution (nothing is allocated per execution). One execution runs at a time: a queue
//! that finds the buffer busy (another queue is executing it) registers and sleeps, and the
//! owner wakes it when it collects its outcome.
//!
//! ```text
//!   idle ──issue (owner := queue)──► running ──finish hook: outcome, wake owner──► done
//!    ▲                                                                              │
//!    └──────────── poll by the owner: take outcome, owner := idle, wake waiters ◄───┘
//! ```
//!
//! `owner` changes only under the `waiting` lock, so a queue that registers as waiting cannot
//! miss the release that would have let it in.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use causeway_core::executor::{Class, Process};
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::{Mutex, MutexGuard};
use causeway_device::{Args, DeviceContext, OpStatus, QueueId, QueueWaiters, ARG_WORDS};

use crate::block::{BlockError, BlockProcessor, CommandBuffer, Kernel, OnFinish};

const IDLE: usize = usize::MAX;
/// `outcome` while an execution runs (or before the first).
const PENDING: u64 = 0;
/// `outcome` of a successful execution (failure words are never 1: their tag is in the high
/// half, see [`Failure::to_word`]).
const SUCCEEDED: u64 = 1;

/// The body of a recorded dispatch: called once per tile, from any worker, concurrently for
/// different tiles, with the arguments of the operation executing the buffer ([`Op::args`]).
/// Implemented by every `Fn(u32, &Args) + Send + Sync`.
///
/// [`Op::args`]: causeway_device::Op::args
pub trait DispatchKernel: Send + Sync {
    /// Runs tile `tile` for the execution whose operation carries `args`.
    fn run(&self, tile: u32, args: &Args);
}

impl<F: Fn(u32, &Args) + Send + Sync> DispatchKernel for F {
    fn run(&self, tile: u32, args: &Args) {
        self(tile, args);
    }
}

/// A kernel a recorded command buffer owns.
pub type DeviceKernel = Box<dyn DispatchKernel>;

/// The arguments of the execution under way, word by word: stored by the issuing queue
/// before it submits the processor, read by every tile. Relaxed both ways: the executor's
/// submission of the process (Release) and a worker's claim of it (Acquire) order the stores
/// before the tiles' loads, and no store happens while tiles run (one execution at a time,
/// and the next is issued only after this one's process completed).
#[derive(Default)]
struct ExecutionArgs {
    words: [AtomicU32; ARG_WORDS],
}

impl ExecutionArgs {
    fn store(&self, args: Args) {
        for (word, value) in self.words.iter().zip(args.words()) {
            word.store(value, Ordering::Relaxed);
        }
    }

    fn load(&self) -> Args {
        Args::from_words(self.words.each_ref().map(|word| word.load(Ordering::Relaxed)))
    }
}

/// A recorded kernel bound to its execution's arguments: what the block processor runs.
struct Bound<'a> {
    kernel: &'a dyn DispatchKernel,
    args: &'a ExecutionArgs,
}

impl Kernel for Bound<'_> {
    fn run(&self, tile: u32) {
        self.kernel.run(tile, &self.args.load());
    }
}

/// Whether an issue went through.
pub(crate) enum Issue {
    /// The processor is running for this queue.
    Issued,
    /// Another queue is executing the buffer; this one will be woken.
    Busy,
}

/// One registered command buffer with its processor and process.
pub(crate) struct Execution {
    regions: Box<[(u32, DeviceKernel)]>,
    args: ExecutionArgs,
    /// The regions' kernels bound to `args`, made at the final address.
    bound: OnceLock<Box<[Bound<'static>]>>,
    buffer: OnceLock<CommandBuffer<'static>>,
    processor: OnceLock<BlockProcessor<'static>>,
    process: OnceLock<Process<'static>>,
    owner: AtomicUsize,
    outcome: AtomicU64,
    /// Queues waiting for the buffer; sized for the device's queues when it starts.
    waiting: OnceLock<Mutex<QueueWaiters>>,
    device: OnceLock<DeviceContext>,
}

impl Execution {
    /// A recording of `regions`, checked now.
    pub(crate) fn new(regions: Vec<(u32, DeviceKernel)>) -> Result<Execution, BlockError> {
        Self::validate(&regions)?;
        Ok(Execution {
            regions: regions.into_boxed_slice(),
            args: ExecutionArgs::default(),
            bound: OnceLock::new(),
            buffer: OnceLock::new(),
            processor: OnceLock::new(),
            process: OnceLock::new(),
            owner: AtomicUsize::new(IDLE),
            outcome: AtomicU64::new(PENDING),
            waiting: OnceLock::new(),
            device: OnceLock::new(),
        })
    }

    fn validate(regions: &[(u32, DeviceKernel)]) -> Result<(), BlockError> {
        let args = ExecutionArgs::default();
        let bound: Vec<Bound<'_>> =
            regions.iter().map(|(_, kernel)| Bound { kernel: &**kernel, args: &args }).collect();
        let mut builder = CommandBuffer::builder();
        for ((tiles, _), kernel) in regions.iter().zip(&bound) {
            builder = builder.dispatch(*tiles, kernel);
        }
        builder.build().map(drop)
    }

    /// Second construction phase, at the final address: records the buffer and builds the
    /// processor and its process.
    pub(crate) fn link(&'static self, device: DeviceContext) {
        let _ = self.device.set(device);
        let _ = self.waiting.set(Mutex::new(QueueWaiters::new(device.queues())));
        let workers = device.workers();
        let bound = self.bound.get_or_init(|| {
            self.regions
                .iter()
                .map(|(_, kernel)| Bound { kernel: &**kernel, args: &self.args })
                .collect()
        });
        let buffer = self.buffer.get_or_init(|| {
            let mut builder = CommandBuffer::builder();
            for ((tiles, _), kernel) in self.regions.iter().zip(bound.iter()) {
                builder = builder.dispatch(*tiles, kernel);
            }
            builder.build().expect("validated when the device was built")
        });
        let processor = self.processor.get_or_init(|| {
            BlockProcessor::new(buffer, workers)
                .expect("a device has at least one worker")
                .with_finish_hook(self)
        });
        self.process.get_or_init(|| Process::new(processor, Class::Compute));
    }

    fn lock_waiting(&self) -> MutexGuard<'_, QueueWaiters> {
        // Flags set or cleared one at a time, and a wake only queues a process: nothing under
        // this lock can leave it half-updated.
        self.waiting.get().expect("linked when the device started").lock()
    }

    /// Starts an execution for `queue` with `args`, unless another queue holds the buffer.
    pub(crate) fn issue(&'static self, queue: QueueId, args: Args) -> Issue {
        let mut waiting = self.lock_waiting();
        if self.owner.load(Ordering::Relaxed) != IDLE {
            waiting.register(queue);
            return Issue::Busy;
        }
        self.owner.store(queue.index(), Ordering::Relaxed);
        drop(waiting);
        self.outcome.store(PENDING, Ordering::Relaxed);
        let (Some(processor), Some(process), Some(device)) =
            (self.processor.get(), self.process.get(), self.device.get())
        else {
            self.finished(Err(Failure::Aborted));
            return Issue::Issued;
        };
        if processor.is_finished() {
            // The finish hook runs just before the executor marks the process completed.
            while !process.is_completed() {
                std::hint::spin_loop();
            }
            if process.rearm().is_err() || processor.reset().is_err() {
                self.finished(Err(Failure::Aborted));
                return Issue::Issued;
            }
        }
        // Every tile of an earlier execution has returned (its process completed, above):
        // nothing reads the arguments until the submission below.
        self.args.store(args);
        if !device.submit(process) {
            self.finished(Err(Failure::Cancelled));
        }
        Issue::Issued
    }

    /// Whether an execution was issued and has not finished (its kernels may still run).
    pub(crate) fn is_running(&self) -> bool {
        self.owner.load(Ordering::Relaxed) != IDLE
            && self.outcome.load(Ordering::Acquire) == PENDING
    }

    /// The outcome of `queue`'s execution once it finished (releasing the buffer to the next
    /// queue), or `None` while it runs.
    pub(crate) fn poll(&self, queue: QueueId) -> Option<OpStatus> {
        // Acquire pairs with the Release store in `finished`: the kernels' writes are visible.
        let status = match self.outcome.load(Ordering::Acquire) {
            PENDING => return None,
            SUCCEEDED => OpStatus::Ok,
            word => OpStatus::Failed(Failure::from_word(word).unwrap_or(Failure::Aborted)),
        };
        debug_assert_eq!(self.owner.load(Ordering::Relaxed), queue.index());
        let mut waiting = self.lock_waiting();
        self.owner.store(IDLE, Ordering::Relaxed);
        if let Some(&device) = self.device.get() {
            waiting.wake_all(device);
        }
        Some(status)
    }
}

impl OnFinish for Execution {
    fn finished(&self, outcome: Result<(), Failure>) {
        let word = outcome.map_or_else(Failure::to_word, |()| SUCCEEDED);
        // Release pairs with the Acquire load in `poll`.
        self.outcome.store(word, Ordering::Release);
        let owner = self.owner.load(Ordering::Relaxed);
        if let Some(device) = self.device.get() {
            if let Some(owner) = device.queue(owner) {
                device.wake(owner);
            }
        }
    }
}

impl fmt::Debug for Execution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Execution")
            .field("regions", &self.regions.len())
            .field("owner", &self.owner.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

//! What a queue operation is, as the host describes it and an observer sees it: the public
//! vocabulary every other part of the layer speaks.

use std::time::Duration;

use causeway_core::semaphore::Failure;
use causeway_core::speculation::Dependence;

use crate::ids::SemaphoreId;
use crate::ids::{BufferId, CommandBufferId, HostCallId, QueueId};
#[cfg(doc)]
use crate::limits::{MAX_SIGNALS, MAX_WAITS};

/// The work an operation does once its waits are satisfied. Barriers, host functions and
/// stream-ordered memory are the device layer's own; the kernel kinds (`Spin`, `Sleep`,
/// `Execute`) are issued to the queue's driver ([`Backend`](crate::Backend)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Work {
    /// Nothing: the operation only orders (waits, then signals). On an in-order queue this is
    /// a full barrier.
    Barrier,
    /// A kernel that busy-runs for this long (a stand-in for a short kernel; on the CPU driver
    /// it holds the worker).
    Spin(Duration),
    /// A kernel that blocks for this long (a stand-in for a blocking call; on the CPU driver
    /// it holds a worker, as a real one would).
    Sleep(Duration),
    /// Calls a host function registered with the device, on a pool worker, in queue order.
    Host(HostCallId),
    /// Executes a command buffer recorded with the queue's driver (the queue waits for it).
    Execute(CommandBufferId),
    /// Commits a stream-ordered allocation of `bytes` for `buffer`.
    Alloca {
        /// The buffer name.
        buffer: BufferId,
        /// Its size.
        bytes: u64,
    },
    /// Decommits the buffer's allocation.
    Dealloca(BufferId),
}

impl Work {
    /// Whether it is a kernel kind, issued to the queue's driver (the others are the layer's
    /// own and run on the host).
    pub fn is_kernel(self) -> bool {
        self.kernel().is_some()
    }

    /// The kernel it runs on the queue's driver; `None` for the layer's own kinds.
    pub fn kernel(self) -> Option<Kernel> {
        self.split().ok()
    }

    /// Its kernel, for the driver, or its layer kind, run on the host.
    pub(crate) fn split(self) -> Result<Kernel, LayerWork> {
        match self {
            Work::Spin(duration) => Ok(Kernel::Spin(duration)),
            Work::Sleep(duration) => Ok(Kernel::Sleep(duration)),
            Work::Execute(buffer) => Ok(Kernel::Execute(buffer)),
            Work::Barrier => Err(LayerWork::Barrier),
            Work::Host(call) => Err(LayerWork::Host(call)),
            Work::Alloca { .. } => Err(LayerWork::Alloca),
            Work::Dealloca(_) => Err(LayerWork::Dealloca),
        }
    }
}

/// The layer's own kinds of [`Work`], run by the queue process on the host; a driver never
/// sees one. (An operation's allocation record says which memory its alloca or dealloca is
/// about.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayerWork {
    Barrier,
    Host(HostCallId),
    Alloca,
    Dealloca,
}

/// The work a driver runs: the kernel kinds of [`Work`], the only ones a
/// [`Backend`](crate::Backend) is handed. The layer has checked, before a driver sees one,
/// that the driver runs its kind
/// ([`timed_kernels`](crate::BackendCapabilities::timed_kernels)) and that its command buffer
/// exists ([`Backend::command_buffers`](crate::Backend::command_buffers)). Not
/// `non_exhaustive`, on purpose: a new kind should fail to compile in every driver until it
/// says what it does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Busy-runs for this long ([`Work::Spin`]).
    Spin(Duration),
    /// Blocks for this long ([`Work::Sleep`]).
    Sleep(Duration),
    /// Executes a command buffer recorded with the driver ([`Work::Execute`]).
    Execute(CommandBufferId),
}

impl From<Kernel> for Work {
    fn from(kernel: Kernel) -> Work {
        match kernel {
            Kernel::Spin(duration) => Work::Spin(duration),
            Kernel::Sleep(duration) => Work::Sleep(duration),
            Kernel::Execute(buffer) => Work::Execute(buffer),
        }
    }
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpStatus {
    /// It ran and its signals completed.
    Ok,
    /// A waited semaphore failed or the work failed; its signals were failed with this.
    Failed(Failure),
    /// The device shut down before it ran; its signals were failed as cancelled.
    Cancelled,
}

impl OpStatus {
    /// The outcome its signals retire with: `Ok` completes them, a failure fails them.
    pub fn result(self) -> Result<(), Failure> {
        match self {
            OpStatus::Ok => Ok(()),
            OpStatus::Failed(failure) => Err(failure),
            OpStatus::Cancelled => Err(Failure::Cancelled),
        }
    }
}

/// A queue operation as the host describes it. `Op { signals, work, ..Op::default() }`
/// leaves the rest empty: no waits, tag 0, no arguments.
#[derive(Clone, Copy, Debug)]
pub struct Op<'a> {
    /// `semaphore ≥ value` conditions, at most [`MAX_WAITS`].
    pub waits: &'a [(SemaphoreId, u64)],
    /// `semaphore := value` on completion, at most [`MAX_SIGNALS`].
    pub signals: &'a [(SemaphoreId, u64)],
    /// What runs.
    pub work: Work,
    /// The caller's label, handed back in [`OpEvent`]s and to the work ([`Invocation::tag`]).
    pub tag: u64,
    /// This submission's arguments, handed to its work: a host function's [`Invocation`], a
    /// kernel's tiles, a command buffer's dispatches (see each driver). Copied into the queue's
    /// ring at submission: nothing is allocated for them.
    pub args: Args,
}

impl Default for Op<'_> {
    /// A barrier with no waits, no signals, tag 0 and no arguments.
    fn default() -> Self {
        Op { waits: &[], signals: &[], work: Work::Barrier, tag: 0, args: Args::NONE }
    }
}

/// 32-bit words in an operation's [`Args`]: 32 bytes, the size of an NPU EXEC descriptor's
/// argument block and well inside Vulkan's guaranteed push-constant range.
pub const ARG_WORDS: usize = 8;

/// The arguments a submission hands its work: 32 bytes, read as eight 32-bit words or four
/// 64-bit ones (word `2i` the low half of 64-bit word `i`). A chunk number, an offset, a buffer
/// name, a size — whatever the work needs to differ from one submission to the next. Fixed in
/// size so a submission copies them into its ring slot and allocates nothing.
///
/// ```
/// use causeway_device::Args;
///
/// let args = Args::NONE.with_u64(0, 1_000).with_u32(2, 7);
/// assert_eq!((args.u64(0), args.u32(2), args.u32(3)), (1_000, 7, 0));
/// assert_eq!(Args::from_u64s([5, 6]).u64(1), 6);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Args {
    words: [u32; ARG_WORDS],
}

impl Args {
    /// No arguments: every word zero.
    pub const NONE: Args = Args { words: [0; ARG_WORDS] };

    /// Arguments from eight 32-bit words.
    pub const fn from_words(words: [u32; ARG_WORDS]) -> Args {
        Args { words }
    }

    /// Arguments whose first 64-bit words are `values`, the rest zero: up to four.
    ///
    /// # Panics
    /// With more than four values (a compile-time error in a constant).
    pub const fn from_u64s<const N: usize>(values: [u64; N]) -> Args {
        assert!(N <= ARG_WORDS / 2, "an operation carries at most four 64-bit arguments");
        let mut args = Args::NONE;
        let mut index = 0;
        while index < N {
            args = args.with_u64(index, values[index]);
            index += 1;
        }
        args
    }

    /// These arguments with 32-bit word `index` (below [`ARG_WORDS`]) set to `value`.
    ///
    /// # Panics
    /// When `index` is out of range.
    #[must_use]
    pub const fn with_u32(mut self, index: usize, value: u32) -> Args {
        self.words[index] = value;
        self
    }

    /// These arguments with 64-bit word `index` (below four) set to `value`.
    ///
    /// # Panics
    /// When `index` is out of range.
    #[must_use]
    pub const fn with_u64(mut self, index: usize, value: u64) -> Args {
        self.words[2 * index] = value as u32;
        self.words[2 * index + 1] = (value >> 32) as u32;
        self
    }

    /// 32-bit word `index` (below [`ARG_WORDS`]).
    ///
    /// # Panics
    /// When `index` is out of range.
    pub const fn u32(&self, index: usize) -> u32 {
        self.words[index]
    }

    /// 64-bit word `index` (below four).
    ///
    /// # Panics
    /// When `index` is out of range.
    pub const fn u64(&self, index: usize) -> u64 {
        self.words[2 * index] as u64 | (self.words[2 * index + 1] as u64) << 32
    }

    /// The eight 32-bit words, as a driver copies them into a descriptor or push constants.
    pub const fn words(&self) -> [u32; ARG_WORDS] {
        self.words
    }
}

/// What a host function is called with: the operation it runs for. Built by the queue process
/// on the worker that runs the function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Invocation {
    /// The queue the operation was submitted to.
    pub queue: QueueId,
    /// Its tag ([`Op::tag`]).
    pub tag: u64,
    /// Its arguments ([`Op::args`]).
    pub args: Args,
}

impl Invocation {
    /// An invocation of operation `tag` on `queue` with `args` (for calling a host function
    /// outside a device, in a test).
    pub const fn new(queue: QueueId, tag: u64, args: Args) -> Invocation {
        Invocation { queue, tag, args }
    }
}

/// A point in an operation's execution, as an [`Observer`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpEvent {
    /// The operation's waits were satisfied and a worker started it.
    Started {
        /// Worker index.
        worker: usize,
        /// Nanoseconds since the device started.
        at_ns: u64,
    },
    /// A cancellation ([`Device::cancel_speculative`](crate::Device::cancel_speculative))
    /// found that the operation depended on rejected speculation. Reported by its queue just
    /// before `Finished`: with `started` false it never ran and finishes
    /// [`OpStatus::Cancelled`]; with `started` true it was already running, ran to its end,
    /// and what it signalled depends on rejected work.
    Speculative {
        /// Nanoseconds since the device started.
        at_ns: u64,
        /// Why: its frontier holds a rejected epoch, or it is tainted and might.
        dependence: Dependence,
        /// Whether it had already started when the rejection came.
        started: bool,
    },
    /// The operation finished and its signals were completed or failed.
    Finished {
        /// Worker index.
        worker: usize,
        /// When it ended, in nanoseconds since the device started: read before its signals
        /// were completed or failed, so no operation they release started before it.
        at_ns: u64,
        /// How it ended.
        status: OpStatus,
    },
}

/// The queue an [`Observer`] event is about: its id and its name
/// ([`QueueConfig::name`](crate::QueueConfig::name), or its driver's name and its index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObservedQueue<'a> {
    /// The queue.
    pub id: QueueId,
    /// Its name.
    pub name: &'a str,
}

impl<'a> ObservedQueue<'a> {
    /// Queue `id` named `name` (for calling an observer outside a device, in a test).
    pub const fn new(id: QueueId, name: &'a str) -> ObservedQueue<'a> {
        ObservedQueue { id, name }
    }
}

/// Watches operations run (a report, a trace). Called on worker threads in the middle of the
/// queue's drain: keep it short and never block.
pub trait Observer: Send + Sync {
    /// `queue`'s operation tagged `tag` reached `event`.
    fn op_event(&self, queue: ObservedQueue<'_>, tag: u64, event: OpEvent);
}

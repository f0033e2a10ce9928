//! Streaming processes: small direct operations pushed into a bounded ring from any thread and
//! run by the pool's workers, several at once, as one [`Class::Compute`] process.
//!
//! A [`Stream`] is the alternative to recording a command buffer when the work is a stream of
//! independent little operations (a fill, a copy, a host callback): producers [`push`] an
//! [`Operation`] and return at once; workers drain the ring in batches. The ring's `C` slots
//! live inside the `Stream` value (allocated once, wherever its owner puts it — a `static`, a
//! stack frame), so pushing and running allocate nothing; [`DirectOp`] packs a small closure
//! inline for the same reason.
//!
//! The ring is multi-producer *and* multi-consumer: any thread may push (through a
//! [`Producer`], which is `Copy`), and every worker that scans the stream's compute slot may
//! pop and run operations concurrently. Operations therefore run in no particular order with
//! respect to each other; each runs exactly once.
//!
//! [`push`]: Producer::push
//! [`Class::Compute`]: causeway_core::executor::Class::Compute
//!
//! # Wake-up protocol
//!
//! One word, `state`, holds a *count* (operations accepted and not yet popped, including
//! pushes still writing their slot) and a CLOSED bit. The process sleeps only after a drainer
//! saw the count at zero; the producer whose reservation moves the count from zero wakes it.
//!
//! ```text
//!  producer                                     drainer (any number at once)
//!  ────────                                     ────────────────────────────
//!  reserve: prev = state.fetch_add(1)           pop up to a batch; each pop: state.fetch_sub(1),
//!     │ prev CLOSED → undo ─► Err(Closed)                                    run the op
//!     │ prev count ≥ C → undo ─► Err(Full)      s = state.load()
//!     ▼                                           count(s) > 0 → Progress   (a push is still
//!  ring push ── slot busy → undo, wake ─► Err(Full)                           writing its slot)
//!     │ ok                                        CLOSED       → Done       (nothing can come)
//!     ▼                                           otherwise    → Sleep
//!  prev count == 0 → executor.wake(process) ─► Ok
//!
//!  process:  Running ──Sleep (count seen 0)──► Sleeping ──wake (the 0 → 1 producer, close,
//!               ▲                                 │           or a Full undo)
//!               └─────────────────────────────────┘
//! ```
//!
//! **No lost wake-up.** A drainer returns `Sleep` only after reading count = 0 (and no CLOSED).
//! The count cannot rise from there without some reservation taking it from 0 to 1 (decrements
//! never go below zero, because a value is popped only after its reservation), and that
//! reservation's producer calls [`Executor::wake`] after publishing its value (or, if its slot
//! turned out busy, after undoing, so a later producer's value is not stranded by the undone
//! duty); a close wakes too. The executor's own protocol then makes the process runnable
//! whether that wake lands before the `Sleep` (the drain is repeated) or after it (the sleeping
//! process is rescheduled), and orders the waker's writes before the drain it asks for — also
//! for a stream started while every slot was taken, which waits on the overflow list: a wake
//! that finds it in no slot yet meets the worker's claim on the process's state word (core's
//! state module, invariant 6), so either the claim's publication carries the reservation to
//! the first drain, or the wake sees the slot and wakes it (`tests/loom_stream.rs` models the
//! race). Several drainers may return `Sleep` at once: the executor applies a `Sleep` only
//! from a drainer alone in the slot, so no `Sleep` decided before a wake can cancel it (core's
//! compute-slot protocol; `tests/loom_compute_sleep.rs` models the case). A close sets CLOSED
//! and wakes unconditionally. A reservation that a drainer sees but whose value is not yet in the ring
//! keeps the process in `Progress` (spinning briefly), never asleep.
//!
//! **Exactly once.** The ring gives each pushed value to exactly one pop (see its protocol);
//! a drainer runs what it pops, and the process completes only when CLOSED is set and the
//! count is zero, so every accepted operation has been popped by then. Cancelling the process
//! (or shutting the executor down) stops the drains; [`Drain::finish`] then closes the stream
//! and drops — without running — the operations still queued, and the ring drops anything a
//! racing producer publishes afterwards when the stream itself is dropped.
//!
//! **Orderings.** Operation bytes cross threads only through the ring's sequence numbers
//! (Release/Acquire, see its module) and the executor's wake (whose RMW on the slot word is
//! Release/Acquire with the drainers' entry). The count's logic needs only the coherence order
//! of `state`, so its accesses are Relaxed, except that each pop's decrement is Release and
//! each reservation Acquire: a producer that counts a consumer's pop then also sees
//! that consumer's slot released, and is not refused with a spurious `Full`.
//!
//! **Wake budget.** Every pop, and the end of every drain call, sets the process's budget to
//! `min(count, workers)` (at least one), so the executor keeps as many workers on the stream as
//! there are operations queued for them, also while long operations run.
//!
//! **Panics.** An operation that panics is contained on the worker that ran it, and fails the
//! stream as a whole: that drain call returns `Done(Err(PANICKED))`, so the process completes
//! with [`Failure::PANICKED`] once the other drainers return (they stop at their next pop, on
//! seeing the failure), its dependents inherit the failure, and [`Drain::finish`] closes the
//! stream and drops what is still queued, exactly as for a cancellation. The count stays exact:
//! the panicking operation was counted out when it was popped.
//!
//! A producer stalled between reserving and publishing keeps drainers spinning until it
//! publishes (the ring is not lock-free for consumers); the window is a handful of
//! instructions with no allocation or lock in it.

mod ring;

use std::fmt;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr;

use causeway_core::executor::{
    Drain, DrainContext, Drained, Executor, Futex, Process, ProcessError,
};
use causeway_core::semaphore::Failure;
use causeway_core::CachePadded;

use crate::contain::contain;
use crate::sync::{spin_hint, AtomicU32, AtomicUsize, Ordering};
use ring::Ring;

/// How many operations one drain call runs at most before returning to the worker loop, so
/// other processes get scanned between batches.
const BATCH: usize = 32;

/// The CLOSED bit of `state`; the count is the rest of the word.
const CLOSED: usize = 1;
/// One unit of the count.
const ONE: usize = 2;

/// A small operation a [`Stream`] runs: consumed by running it.
pub trait Operation: Send {
    /// Performs the operation on the worker that popped it. A panic fails the whole stream
    /// (see [Panics](self#panics)); the worker lives on.
    fn run(self);
}

/// The executor operations a stream needs, so that a stream works with any
/// [`Executor`] (any futex, slot count and worker capacity).
pub trait Submitter<'p>: Sync {
    /// Hands the stream's process to the executor ([`Executor::submit`]).
    fn submit(&self, process: &'p Process<'p>) -> Result<(), ProcessError>;
    /// Makes the stream's process runnable again ([`Executor::wake`]).
    fn wake(&self, process: &'p Process<'p>);
    /// The number of workers, the most a stream's wake budget asks for.
    fn workers(&self) -> usize;
}

impl<'p, F: Futex, const SLOTS: usize, const WORKERS: usize> Submitter<'p>
    for Executor<'p, F, SLOTS, WORKERS>
{
    fn submit(&self, process: &'p Process<'p>) -> Result<(), ProcessError> {
        Executor::submit(self, process)
    }

    fn wake(&self, process: &'p Process<'p>) {
        Executor::wake(self, process);
    }

    fn workers(&self) -> usize {
        Executor::workers(self)
    }
}

/// What `Stream::push` did, and whether its caller holds the duty to wake the process.
enum Pushed<T> {
    Queued(bool),
    Refused(PushError<T>, bool),
}

/// Why a push was refused; the operation is handed back.
#[non_exhaustive]
pub enum PushError<T> {
    /// Every slot holds a queued operation (or is still being vacated by a worker).
    Full(T),
    /// The stream was closed, or its process was cancelled.
    Closed(T),
}

impl<T> PushError<T> {
    /// The refused operation.
    pub fn into_inner(self) -> T {
        match self {
            PushError::Full(op) | PushError::Closed(op) => op,
        }
    }
}

impl<T> fmt::Debug for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PushError::Full(_) => "Full(..)",
            PushError::Closed(_) => "Closed(..)",
        })
    }
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PushError::Full(_) => "stream ring is full; operation handed back",
            PushError::Closed(_) => "stream is closed; operation handed back",
        })
    }
}

impl<T> std::error::Error for PushError<T> {}

/// A bounded ring of `C` operations (a power of two) drained as a compute process. See the
/// [module docs](self).
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use causeway_core::executor::{Class, Process};
/// use causeway_runtime::{CpuPool, DirectOp, PoolConfig, Stream};
///
/// let done = AtomicU32::new(0);
/// let stream: Stream<DirectOp<'_>, 64> = Stream::new();
/// let process = Process::new(&stream, Class::Compute);
/// CpuPool::scope(PoolConfig::with_workers(2), |executor| {
///     let producer = stream.start(executor, &process).unwrap();
///     for _ in 0..10 {
///         let count = || {
///             done.fetch_add(1, Ordering::Relaxed);
///         };
///         let Ok(op) = DirectOp::new(count) else { unreachable!("one reference fits inline") };
///         producer.push(op).expect("64 slots hold 10 operations");
///     }
///     producer.close();
///     while !process.is_completed() {
///         std::thread::yield_now();
///     }
/// })
/// .unwrap();
/// assert_eq!(done.load(Ordering::Relaxed), 10);
/// ```
pub struct Stream<T, const C: usize> {
    ring: Ring<T, C>,
    /// `count * ONE | CLOSED`; see the protocol.
    state: CachePadded<AtomicUsize>,
    /// The executor's worker count, recorded at start: the largest useful budget.
    workers: AtomicU32,
    /// The budget last handed to the executor, so unchanged budgets cost no RMW there.
    budget: AtomicU32,
}

impl<T: Operation, const C: usize> Stream<T, C> {
    /// An open, empty stream. Usable in a `static`.
    #[cfg(not(loom))]
    pub const fn new() -> Stream<T, C> {
        Stream {
            ring: Ring::new(),
            state: CachePadded(AtomicUsize::new(0)),
            workers: AtomicU32::new(1),
            budget: AtomicU32::new(1),
        }
    }

    /// An open, empty stream.
    #[cfg(loom)]
    pub fn new() -> Stream<T, C> {
        Stream {
            ring: Ring::new(),
            state: CachePadded(AtomicUsize::new(0)),
            workers: AtomicU32::new(1),
            budget: AtomicU32::new(1),
        }
    }

    /// Submits `process` — which must have been created to drain this stream, e.g.
    /// `Process::new(&stream, Class::Compute)` — and returns the handle producers push through.
    /// A process that is not this stream's would never be woken for its operations.
    pub fn start<'a, 'p>(
        &'p self,
        executor: &'a dyn Submitter<'p>,
        process: &'p Process<'p>,
    ) -> Result<Producer<'a, 'p, T, C>, ProcessError> {
        let workers = u32::try_from(executor.workers()).unwrap_or(u32::MAX).max(1);
        self.workers.store(workers, Ordering::Relaxed);
        executor.submit(process)?;
        Ok(Producer { stream: self, process, executor })
    }

    /// The number of slots.
    pub const fn capacity(&self) -> usize {
        C
    }

    /// Operations accepted and not yet taken by a worker (a snapshot).
    pub fn queued(&self) -> usize {
        self.state.0.load(Ordering::Relaxed) / ONE
    }

    /// Whether the stream accepts no more operations.
    pub fn is_closed(&self) -> bool {
        self.state.0.load(Ordering::Relaxed) & CLOSED != 0
    }

    /// Reserves, then queues `op`; says whether the caller must wake the process.
    fn push(&self, op: T) -> Pushed<T> {
        // Acquire pairs with the Release decrement in `drain`: see "Orderings".
        let previous = self.state.0.fetch_add(ONE, Ordering::Acquire);
        if previous & CLOSED != 0 {
            self.state.0.fetch_sub(ONE, Ordering::Relaxed);
            return Pushed::Refused(PushError::Closed(op), false);
        }
        if previous / ONE >= C {
            // Every slot is spoken for. The wake duty belongs to whoever reserved from zero,
            // which was not this producer.
            self.state.0.fetch_sub(ONE, Ordering::Relaxed);
            return Pushed::Refused(PushError::Full(op), false);
        }
        match self.ring.push(op) {
            Ok(()) => Pushed::Queued(previous / ONE == 0),
            Err(op) => {
                // The slot is still being vacated by a worker. This producer may hold the wake
                // duty for operations others published meanwhile, so it wakes anyway.
                self.state.0.fetch_sub(ONE, Ordering::Relaxed);
                Pushed::Refused(PushError::Full(op), true)
            }
        }
    }

    fn close(&self) {
        // Relaxed: CLOSED carries no data of its own, and the wake that follows a close orders
        // the closer's writes before the drain that reads it (see "No lost wake-up").
        self.state.0.fetch_or(CLOSED, Ordering::Relaxed);
    }

    fn set_budget(&self, cx: &mut DrainContext<'_, '_>, queued: usize) {
        let workers = self.workers.load(Ordering::Relaxed);
        let budget = u32::try_from(queued).unwrap_or(u32::MAX).clamp(1, workers);
        // Concurrent drainers may leave this cache a step behind the process's budget; the
        // budget is a wake hint and the next change repairs it. The load first keeps the
        // common case (unchanged) free of writes to a line every drainer reads.
        if self.budget.load(Ordering::Relaxed) != budget
            && self.budget.swap(budget, Ordering::Relaxed) != budget
        {
            cx.set_wake_budget(budget);
        }
    }
}

impl<T: Operation, const C: usize> Default for Stream<T, C> {
    fn default() -> Self {
        Stream::new()
    }
}

impl<T: Operation, const C: usize> Drain for Stream<T, C> {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        let mut popped = 0;
        while popped < BATCH && !cx.is_failed() {
            let Some(op) = self.ring.pop() else { break };
            // Release pairs with the Acquire reservation in `push`: see "Orderings".
            let before = self.state.0.fetch_sub(ONE, Ordering::Release);
            popped += 1;
            // Before running it: operations may be long, and the budget should follow the
            // queue while they run, not only between batches.
            self.set_budget(cx, (before / ONE).saturating_sub(1));
            if contain(|| op.run()).is_err() {
                // See "Panics" in the module docs.
                return Drained::Done(Err(Failure::PANICKED));
            }
        }
        // A plain load decides, `Sleep` included (see "No lost wake-up").
        let state = self.state.0.load(Ordering::Relaxed);
        let queued = state / ONE;
        self.set_budget(cx, queued);
        if queued > 0 {
            if popped == 0 {
                // Reserved but not yet published: the producer is a few instructions away.
                spin_hint();
            }
            Drained::Progress
        } else if state & CLOSED != 0 {
            Drained::Done(Ok(()))
        } else {
            Drained::Sleep
        }
    }

    fn finish(&self, _outcome: Result<(), Failure>) {
        // Cancelled or closed: refuse new pushes, and drop (not run) whatever is still queued.
        self.close();
        while let Some(op) = self.ring.pop() {
            self.state.0.fetch_sub(ONE, Ordering::Relaxed);
            drop(op);
        }
    }
}

impl<T, const C: usize> fmt::Debug for Stream<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.0.load(Ordering::Relaxed);
        f.debug_struct("Stream")
            .field("capacity", &C)
            .field("queued", &(state / ONE))
            .field("closed", &(state & CLOSED != 0))
            .finish_non_exhaustive()
    }
}

/// The pushing end of a started [`Stream`]: `Copy`, shareable by any number of threads.
pub struct Producer<'a, 'p, T, const C: usize> {
    stream: &'p Stream<T, C>,
    process: &'p Process<'p>,
    executor: &'a dyn Submitter<'p>,
}

impl<T, const C: usize> Clone for Producer<'_, '_, T, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, const C: usize> Copy for Producer<'_, '_, T, C> {}

impl<T: Operation, const C: usize> Producer<'_, '_, T, C> {
    /// Queues `op` to run on a worker; hands it back when the ring is full or the stream is
    /// closed. Never blocks and never allocates.
    pub fn push(&self, op: T) -> Result<(), PushError<T>> {
        let (result, wake) = match self.stream.push(op) {
            Pushed::Queued(wake) => (Ok(()), wake),
            Pushed::Refused(error, wake) => (Err(error), wake),
        };
        if wake {
            self.executor.wake(self.process);
        }
        result
    }

    /// Stops accepting operations. Those already accepted still run; then the process
    /// completes.
    pub fn close(&self) {
        self.stream.close();
        self.executor.wake(self.process);
    }

    /// The stream this producer pushes into.
    pub fn stream(&self) -> &Stream<T, C> {
        self.stream
    }
}

impl<T, const C: usize> fmt::Debug for Producer<'_, '_, T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer").field("stream", self.stream).finish_non_exhaustive()
    }
}

/// Inline storage for a [`DirectOp`]'s closure: three words, word-aligned.
type Payload = MaybeUninit<[usize; 3]>;

/// A closure of at most three machine words (and at most word alignment), stored inline: a
/// stream [`Operation`] that allocates nothing.
///
/// Captures that do not fit — more data, or a `u128` — are refused by [`new`](Self::new) and
/// handed back; capture a reference to them instead.
pub struct DirectOp<'a> {
    call: unsafe fn(*mut Payload),
    discard: unsafe fn(*mut Payload),
    payload: Payload,
    /// Borrows for `'a`, like the closure it holds.
    _captures: PhantomData<&'a ()>,
}

// `DirectOp` is `Send` and `Sync` by its fields (plain words and function pointers), which is
// sound only because `new` accepts nothing but `Send` closures and no `&self` method touches
// the payload.

/// Runs the closure of type `F` stored in `payload`, consuming it.
///
/// # Safety
/// `payload` holds an initialised `F` that nothing else will use or drop.
unsafe fn call_inline<F: FnOnce()>(payload: *mut Payload) {
    // SAFETY: the caller guarantees an initialised, otherwise unused `F` at the start of the
    // payload; `new` checked its size and alignment.
    let f = unsafe { payload.cast::<F>().read() };
    f();
}

/// Drops the closure of type `F` stored in `payload` without running it.
///
/// # Safety
/// As for [`call_inline`].
unsafe fn discard_inline<F>(payload: *mut Payload) {
    // SAFETY: as in `call_inline`.
    unsafe { ptr::drop_in_place(payload.cast::<F>()) };
}

impl<'a> DirectOp<'a> {
    /// Bytes of closure state that fit inline.
    pub const INLINE_BYTES: usize = size_of::<Payload>();

    /// Packs `f`, or hands it back when its captures exceed [`INLINE_BYTES`](Self::INLINE_BYTES)
    /// or word alignment.
    pub fn new<F: FnOnce() + Send + 'a>(f: F) -> Result<DirectOp<'a>, F> {
        if size_of::<F>() > size_of::<Payload>() || align_of::<F>() > align_of::<Payload>() {
            return Err(f);
        }
        let mut payload = Payload::uninit();
        // SAFETY: `F` fits in the payload's size and alignment (checked above); the payload is
        // fresh, so nothing is overwritten.
        unsafe { payload.as_mut_ptr().cast::<F>().write(f) };
        Ok(DirectOp {
            call: call_inline::<F>,
            discard: discard_inline::<F>,
            payload,
            _captures: PhantomData,
        })
    }
}

impl Operation for DirectOp<'_> {
    fn run(self) {
        // Not dropped afterwards: running consumes the closure.
        let mut op = ManuallyDrop::new(self);
        // SAFETY: `call` was made for the closure type `new` stored in this payload, which has
        // not been run or dropped (`run` consumes the op, and `Drop` is suppressed above).
        unsafe { (op.call)(op.payload.as_mut_ptr().cast()) };
    }
}

impl Drop for DirectOp<'_> {
    fn drop(&mut self) {
        // SAFETY: an op that is dropped was never run (`run` suppresses this drop), so its
        // payload still holds the closure `discard` was made for.
        unsafe { (self.discard)(self.payload.as_mut_ptr().cast()) };
    }
}

impl fmt::Debug for DirectOp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectOp").finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;

    use super::*;

    fn inline<'a>(f: impl FnOnce() + Send + 'a) -> DirectOp<'a> {
        match DirectOp::new(f) {
            Ok(op) => op,
            Err(_) => panic!("the test closure fits inline"),
        }
    }

    #[test]
    fn direct_ops_run_once_or_drop_their_captures() {
        let counter = Arc::new(AtomicU32::new(0));
        let witness = Arc::clone(&counter);
        let op = inline(move || {
            witness.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(Arc::strong_count(&counter), 2);
        op.run();
        assert_eq!((counter.load(Ordering::Relaxed), Arc::strong_count(&counter)), (1, 1));

        let witness = Arc::clone(&counter);
        let unrun = inline(move || drop(witness));
        drop(unrun);
        assert_eq!((counter.load(Ordering::Relaxed), Arc::strong_count(&counter)), (1, 1));
    }

    #[test]
    fn oversized_or_overaligned_closures_are_handed_back() {
        let big = [7u64; 4];
        let Err(refused) = DirectOp::new(move || assert_eq!(big[3], 7)) else {
            panic!("32 bytes of captures do not fit in 24")
        };
        refused();
        let wide = 5u128;
        assert!(DirectOp::new(move || assert_eq!(wide, 5)).is_err());
        let fits = [1usize; 3];
        assert!(DirectOp::new(move || assert_eq!(fits[2], 1)).is_ok());
    }
}

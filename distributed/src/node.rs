//! One rank's view of the cluster: its device, the semaphores it shares with other ranks, and
//! the process that moves their values over MPI.
//!
//! ## Values cross ranks as signals, not as round trips
//!
//! A shared semaphore is *exported* by the one rank whose queues signal it and *imported* by
//! the ranks whose queues wait on it; every rank names it by the same [`LinkId`]. Submitting an
//! operation through [`Node::submit`] sends each exported signal to the importing ranks the
//! moment it is submitted ([`Message::Pending`], with the signalling operation's point and
//! frontier). The importer records it in its own semaphore exactly as a local submitted
//! signal, so its operations submitted afterwards import the signaller's whole causal past —
//! including queues on ranks it never exchanged a message with — and are pipelined behind it
//! without asking anyone. When the exporter's timeline reaches the value (or fails), a
//! [`Message::Reached`] (or [`Message::Failed`]) follows and completes (or fails) it on the
//! importer, which wakes the waiting operations there through the usual timepoints.
//!
//! ## Progress is a process, not a thread
//!
//! Open MPI 4.1 makes no progress on its own: someone must call into it. That someone is one
//! process on the device's executor ([`Drain`]): each drain sends what is queued, reports
//! exported values that were reached, and tests the one receive it keeps (a persistent
//! request, `MPI_Recv_init` once, into the reserved inbox, on the links' own duplicate of the
//! world communicator, started again after each message). A poll is one `MPI_Test`, and a
//! message that arrives is matched and copied by Open MPI's progress inside it, as a blocking
//! receive's would be: no probe, no second receive call, no request made or freed per message.
//! A drain delivers at most one message and returns, so the operation it woke runs before
//! anything is tested again — on the same worker, at once: the delivery holds that queue's
//! wake back and hands it to the drain's worker (see "Wake hand-off" in the core executor),
//! which runs it before the progress process, queued again behind it, for any worker.
//!
//! It keeps draining while a result is outstanding — a local operation or host thread waits on
//! an imported value — and otherwise sleeps until a submission, an exported signal's
//! completion or a host wait wakes it. Nothing spins while nothing is expected. While
//! something is, a drain that finds nothing polls again in place, up to `POLLS_PER_DRAIN` (16)
//! times, as long as nothing else needs the process (a message to send, a value reached, a
//! stop) and no other work waits for its worker ([`DrainContext::others_waiting`]): returning
//! to the executor would only bring the worker back, later by the round trip. An answer
//! usually comes within microseconds, sooner than a `sched_yield` returns, so the first
//! `SPIN_POLLS` (128) idle polls follow each other at once; after them the process yields its
//! core between drains, so other threads run. When this machine's ranks outnumber its cores,
//! every drain polls once and yields when it found nothing, as Open MPI's own progress does
//! when oversubscribed: the peer it waits for may need this core.
//! Sends are small (at most [`MAX_MESSAGE_LEN`](crate::MAX_MESSAGE_LEN) bytes), so Open MPI's
//! eager protocol completes them locally without waiting for the receiver.
//!
//! The message that ends a cross-rank wait — an exported value reached — is sent by the
//! thread that reached it, from the watch's callback, when the MPI lock is free (it only
//! tries: a callback must not block); otherwise, and to re-arm the watch, the progress process
//! does it. So a hop costs the sender no hand-off to another process before the message leaves.
//!
//! MPI is initialised with `MPI_THREAD_SERIALIZED`: the drain runs on whichever worker picks
//! it up, and every MPI call is made under one lock.
//!
//! ## Memory is reserved at start
//!
//! A hop allocates nothing once a node has started. Announcements are encoded into buffers the
//! outbox keeps, received messages land in a reserved inbox, reached and failed messages in a
//! reserved scratch buffer, and the queues of announced and pending values reserve what their
//! semaphore's history can hold. The outbox stays bounded however far a submitting thread
//! runs ahead of the progress process: a submitter that finds `OUTBOX_FLUSH` (64) messages
//! queued sends them itself, in order, under the MPI lock (inside [`Node::with_world`], which
//! holds that lock, it leaves them to the progress process). The relay test counts every heap
//! allocation of every rank over 10^5 operations and requires none past its first rounds.
//!
//! Work waiting on imported semaphores is submitted through [`Node::submit`], and host threads
//! wait on them through [`Node::wait`] or [`Node::await_announced`]: these are what wake the
//! progress process when it sleeps (a wait made on the device directly would not).
//!
//! Whoever gives the progress process something to do — a queued message, a host waiter, an
//! exported value reached, a request to stop — writes it and then wakes the process, and the
//! idle drain reads those flags with plain loads. That is enough because the executor orders
//! every wake before the drain call it asks for, even a wake that finds the process already
//! queued (see [`Drained::Sleep`]).
//!
//! ## Bytes from peers are untrusted
//!
//! A message longer than any encoding is truncated into the inbox (one byte longer than
//! [`MAX_MESSAGE_LEN`](crate::MAX_MESSAGE_LEN)): the links' communicator returns MPI errors
//! rather than aborting, and the truncated bytes are still too long to decode. A message that
//! does not decode fails the semaphore it names with
//! [`Failure::DeviceLost`] (its operations and host waiters see it) and keeps the typed
//! reason, [`RemoteError::Malformed`], for [`Node::link_error`]; one too short to name a
//! semaphore fails every semaphore imported from its sender. A message about a semaphore the
//! sender does not export is refused the same way. Nothing panics on peer bytes.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use causeway_core::axis::{Axis, Domain};
use causeway_core::collective::CollectiveChannel;
use causeway_core::executor::{Class, Drain, DrainContext, Drained, Process};
use causeway_core::frontier::{Frontier, Point};
use causeway_core::semaphore::{Arm, Failure, Notify, Outcome, SignalError, Timepoint};
use causeway_core::unpoisoned::{Condvar, Mutex, MutexGuard};
use causeway_device::{
    Device, DeviceSemaphore, HostExecutor, Op, QueueId, Receipt, SemaphoreId, SubmitError,
    FRONTIER_CAPACITY, MAX_SIGNALS,
};
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};
use mpi::Threading;

use crate::message::{LinkId, Message, MessageError};

/// The machine index of axes that belong to the whole cluster rather than one rank (collective
/// channels): ranks use `machine = rank`, so this is never a rank's own.
pub const CLUSTER_MACHINE: u16 = u16::MAX;

/// The MPI tag of semaphore messages.
const LINK_TAG: i32 = 17;

/// Why a node could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeError {
    /// MPI was already initialised, or could not be.
    MpiInit,
    /// MPI cannot serve calls from several threads one at a time (`MPI_THREAD_SERIALIZED`).
    Threading,
    /// Two links share an id, or a link names this rank as its peer.
    BadLink(LinkId),
    /// A link names a rank outside the world.
    NoSuchRank(LinkId, i32),
    /// A link names a semaphore the device does not have.
    NoSuchSemaphore(LinkId),
    /// The progress process could not be started.
    Executor,
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::MpiInit => f.write_str("MPI could not be initialised (or already was)"),
            NodeError::Threading => {
                f.write_str("this MPI cannot serve serialized calls from several threads")
            }
            NodeError::BadLink(link) => {
                write!(f, "semaphore link {} is declared twice or names this rank", link.0)
            }
            NodeError::NoSuchRank(link, rank) => {
                write!(f, "semaphore link {} names rank {rank}, outside the world", link.0)
            }
            NodeError::NoSuchSemaphore(link) => {
                write!(f, "semaphore link {} names a semaphore the device lacks", link.0)
            }
            NodeError::Executor => f.write_str("the MPI progress process could not start"),
        }
    }
}

impl std::error::Error for NodeError {}

/// Why an imported semaphore failed on this rank (beyond a failure its exporter reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteError {
    /// Its exporter sent bytes that are not a message.
    Malformed(MessageError),
    /// A rank other than its exporter sent a message about it.
    WrongSender {
        /// The rank that exports it.
        exporter: i32,
        /// The rank the message came from.
        sender: i32,
    },
    /// The exporter's messages broke the timeline contract (a value not advancing, a
    /// completion never submitted, a full history).
    Timeline(SignalError),
    /// A host wait on it ran out of time: the exporter is presumed gone.
    TimedOut,
    /// Its exporter sent a message about a semaphore this rank does not import, so nothing
    /// it says can be trusted.
    UnknownLink(LinkId),
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::Malformed(error) => {
                write!(f, "malformed message from its exporter: {error}")
            }
            RemoteError::WrongSender { exporter, sender } => {
                write!(f, "rank {sender} sent a message about a semaphore rank {exporter} exports")
            }
            RemoteError::Timeline(error) => write!(f, "its exporter broke the timeline: {error}"),
            RemoteError::TimedOut => {
                f.write_str("a wait on it timed out: its exporter is presumed gone")
            }
            RemoteError::UnknownLink(link) => write!(
                f,
                "its exporter sent a message about link {}, which is not imported here",
                link.0
            ),
        }
    }
}

impl std::error::Error for RemoteError {}

/// Why [`Node::wait`] returned without the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostWaitError {
    /// The link is not one of this node's.
    UnknownLink(LinkId),
    /// The timeline failed.
    Failed(Failure),
    /// The value did not arrive in time; an imported semaphore is failed as
    /// [`Failure::DeviceLost`] ([`RemoteError::TimedOut`]).
    TimedOut,
}

impl fmt::Display for HostWaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostWaitError::UnknownLink(link) => write!(f, "no semaphore link {}", link.0),
            HostWaitError::Failed(failure) => write!(f, "the timeline failed: {failure}"),
            HostWaitError::TimedOut => f.write_str("timed out"),
        }
    }
}

impl std::error::Error for HostWaitError {}

/// What a node was told to share, collected before it starts ([`Node::start`]).
#[derive(Clone, Debug, Default)]
pub struct Links {
    exports: Vec<(LinkId, SemaphoreId, Vec<i32>)>,
    imports: Vec<(LinkId, SemaphoreId, i32)>,
}

impl Links {
    /// No shared semaphores yet.
    pub fn new() -> Links {
        Links::default()
    }

    /// This rank signals `semaphore` as `link`; ranks `to` wait on it.
    pub fn export(&mut self, link: LinkId, semaphore: SemaphoreId, to: &[i32]) -> &mut Links {
        self.exports.push((link, semaphore, to.to_vec()));
        self
    }

    /// This rank waits on `link`, signalled on rank `from`, through its own `semaphore`.
    pub fn import(&mut self, link: LinkId, semaphore: SemaphoreId, from: i32) -> &mut Links {
        self.imports.push((link, semaphore, from));
        self
    }
}

/// What the progress process did, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProgressStats {
    /// Drain calls.
    pub drains: u64,
    /// Drains that ended asleep (nothing outstanding).
    pub sleeps: u64,
    /// Messages sent.
    pub sent: u64,
    /// Messages received (well-formed or not).
    pub received: u64,
}

/// Wakes the progress process from a semaphore callback or a submitting thread.
struct Waker {
    executor: &'static HostExecutor<'static>,
    process: OnceLock<&'static Process<'static>>,
}

impl Waker {
    fn wake(&self) {
        if let Some(process) = self.process.get() {
            self.executor.wake(process);
        }
    }
}

/// The callback of an exported semaphore's watch timepoint.
struct Watch {
    fired: AtomicBool,
    waker: &'static Waker,
    /// The node and the index of the export it watches (set once the node is built).
    export: OnceLock<(&'static Inner, usize)>,
}

impl Notify for Watch {
    fn notify(&self, outcome: Outcome) {
        // Release pairs with the Acquire swap in `Inner::report`: the drain that sees the flag
        // sees the timeline state that fired it.
        self.fired.store(true, Ordering::Release);
        // The importers wait for this: tell them from here, on the thread that reached the
        // value, when MPI is free (a small eager send, done without waiting for the
        // receiver), rather than after a hand-off to the progress process. Only `try_lock`:
        // a callback must not block, and this thread may hold the lock already (a delivery
        // that failed an import, and with it an operation signalling this export).
        if let Some(&(inner, k)) = self.export.get() {
            if let Some(mut mpi) = inner.mpi.try_lock() {
                let export = &inner.exports[k];
                inner.send_reached_locked(&mut mpi, export, &mut export.state.lock(), outcome);
            }
        }
        // The progress process re-arms the watch (a callback must not re-arm its own
        // timepoint), and reports what the send above could not.
        self.waker.wake();
    }

    fn while_firing(&self) {
        std::thread::yield_now();
    }
}

/// An exported semaphore's reporting state (under its lock).
#[derive(Default)]
struct ExportState {
    /// Values announced (their pending message sent) and not yet reported reached, in order.
    announced: VecDeque<u64>,
    /// Whether the failure went out.
    failure_sent: bool,
}

struct Export {
    link: LinkId,
    semaphore: SemaphoreId,
    /// The device's semaphore `semaphore` (looked up once, at start).
    timeline: &'static DeviceSemaphore,
    to: Box<[i32]>,
    watch: &'static Watch,
    timepoint: Timepoint<'static>,
    /// Whether the watch timepoint is linked into the semaphore. Written only by the progress
    /// process's drain, which alone arms the watch and sees it fire, so Relaxed reads there
    /// are current and need no lock.
    watching: AtomicBool,
    state: Mutex<ExportState>,
}

/// An imported semaphore's receiving state (under its lock).
#[derive(Default)]
struct ImportState {
    /// Values recorded as pending and not yet reached, in order.
    pending: VecDeque<u64>,
    /// The newest value announced (recorded as pending).
    announced: u64,
    /// Why it failed here, when the reason is this link's own.
    error: Option<RemoteError>,
}

struct Import {
    link: LinkId,
    semaphore: SemaphoreId,
    /// The device's semaphore `semaphore` (looked up once, at start).
    timeline: &'static DeviceSemaphore,
    from: i32,
    state: Mutex<ImportState>,
    /// Signalled (under `state`) when a value is announced or the link fails.
    announced_signal: Condvar,
}

/// A message waiting for the progress process.
struct Outgoing {
    purpose: Purpose,
    /// A buffer of the outbox's, returned to it once sent.
    bytes: Vec<u8>,
}

/// What a queued message is for, and so whom it goes to.
enum Purpose {
    /// A pending signal of export `export` at `value`, for the export's importers.
    Announces { export: usize, value: u64 },
    /// Bytes for one rank ([`Node::send_raw`]).
    Raw { rank: i32 },
}

/// Messages for the progress process to send, and the buffers of those it sent. The queue
/// and the buffers keep their capacity from one drain to the next, and a submitter that finds
/// [`OUTBOX_FLUSH`] messages queued sends them itself, waiting for the MPI lock if need be,
/// so the queue stays bounded however far the submitting threads
/// run ahead of the progress process: announcing a signal takes a reserved buffer.
struct Outbox {
    queued: VecDeque<Outgoing>,
    free: Vec<Vec<u8>>,
}

/// Queued messages at which a submitting thread sends the queue itself rather than leave it
/// to the progress process (see [`Outbox`]).
const OUTBOX_FLUSH: usize = 64;

thread_local! {
    /// Whether this thread is inside [`Node::with_world`], holding the MPI lock (a submission
    /// made there leaves its backlog to the progress process rather than wait for the lock).
    static IN_WITH_WORLD: Cell<bool> = const { Cell::new(false) };
}

/// Messages one submitting thread can have queued or in the progress process's hands at
/// once: up to a flush's worth plus one operation's signals in the queue, as many being sent.
/// The outbox reserves this many buffers at start; more submitting threads, or
/// [`Node::announce`] and [`Node::send_raw`], can take it past this, and it grows then.
const OUTBOX_BOUND: usize = 2 * (OUTBOX_FLUSH + MAX_SIGNALS);

impl Outbox {
    fn new() -> Outbox {
        Outbox {
            queued: VecDeque::with_capacity(OUTBOX_BOUND),
            free: (0..OUTBOX_BOUND).map(|_| Vec::with_capacity(crate::MAX_MESSAGE_LEN)).collect(),
        }
    }

    /// A buffer for one message, empty.
    fn buffer(&mut self) -> Vec<u8> {
        let mut bytes =
            self.free.pop().unwrap_or_else(|| Vec::with_capacity(crate::MAX_MESSAGE_LEN));
        bytes.clear();
        bytes
    }
}

/// The communicators; every MPI call is made through them under [`Inner::mpi`].
struct Mpi {
    world: SimpleCommunicator,
    /// The semaphore messages' own duplicate of `world`, so an application's traffic beside
    /// the node ([`Node::with_world`]) never matches them. Its errors are returned, not fatal:
    /// a peer's oversized message truncates the posted receive, and that is a malformed
    /// message for the receiver to refuse, not a reason to abort the job.
    links: SimpleCommunicator,
    /// Where the reached and failed messages are encoded (at most [`crate::MAX_MESSAGE_LEN`] bytes,
    /// reserved at start): they are sent on the path that completes a signal, which does not
    /// allocate.
    scratch: Vec<u8>,
    /// Where messages are received: one byte past [`crate::MAX_MESSAGE_LEN`], reserved at start
    /// and never freed, so the receiving side of a hop does not allocate either. A longer
    /// message fills it and is truncated there: still one byte too long to decode, so the
    /// decoder refuses it as it would the whole. Reached only through a raw pointer: MPI
    /// writes it while a receive is posted, whatever the borrows of `Mpi` say.
    inbox: *mut [u8],
    /// The persistent receive into `inbox` on `links` (from any rank, [`LINK_TAG`]): made
    /// once (`MPI_Recv_init`, by the first [`post_receive`](Mpi::post_receive)) and started
    /// again after each message, so a poll is one `MPI_Test` and an arriving message is
    /// matched and copied by Open MPI's progress itself, with no probe, no second receive
    /// call and no request to allocate or free per message. `MPI_REQUEST_NULL` until made and
    /// after [`retire_receive`](Mpi::retire_receive).
    receive: mpi::ffi::MPI_Request,
    /// Whether `receive` is started and not yet completed (MPI writes the inbox meanwhile).
    receiving: bool,
    /// The outbox's queue while the progress process sends it (swapped with the empty one
    /// left from the drain before, so neither gives up its capacity).
    sending: VecDeque<Outgoing>,
    /// Buffers sent in this drain, handed back to the outbox in one go.
    sent: Vec<Vec<u8>>,
}

// SAFETY: MPI was initialised with MPI_THREAD_SERIALIZED (checked in `Node::start`), which
// allows calls from any thread as long as no two overlap; `Mpi` is only reached through the
// `Inner::mpi` mutex, which serialises them. The inbox and the posted request are touched only
// through `Mpi` as well.
unsafe impl Send for Mpi {}

impl Mpi {
    /// Starts the receive into the inbox unless it is under way, making it first if need be.
    fn post_receive(&mut self) {
        if self.receiving {
            return;
        }
        if self.receive == request_null() {
            let len = self.inbox.len() as std::os::raw::c_int;
            // SAFETY: the inbox is leaked at start (never freed or moved) and `len` bytes
            // long; MPI only records the buffer here (a persistent request writes it once
            // started, below). `receive` is written by MPI before it returns.
            unsafe {
                mpi::ffi::MPI_Recv_init(
                    self.inbox.cast::<std::ffi::c_void>(),
                    len,
                    u8::equivalent_datatype().as_raw(),
                    mpi::ffi::RSMPI_ANY_SOURCE,
                    LINK_TAG,
                    self.links.as_raw(),
                    &mut self.receive,
                );
            }
            if self.receive == request_null() {
                // Not made (the links' communicator returns errors): nothing is received, and
                // `receive_one` finds nothing to test.
                return;
            }
        }
        // SAFETY: `receive` is this process's inactive persistent request (made above, not
        // started: `receiving` is false), and no slice of the inbox is alive: slices are made
        // only in `receive_one`, after the receive completed, and end there.
        let code = unsafe { mpi::ffi::MPI_Start(&mut self.receive) };
        // A start refused (errors are returned on the links' communicator) leaves the request
        // inactive: nothing is tested, and the next poll tries again.
        self.receiving = code == mpi::ffi::MPI_SUCCESS as std::os::raw::c_int;
    }

    /// Cancels the receive if it is under way and frees it (before MPI is finalised). A
    /// message it may have matched already is dropped: the node is stopping.
    fn retire_receive(&mut self) {
        if self.receive == request_null() {
            return;
        }
        // SAFETY: `receive` is this process's persistent request (not null). Cancelling a
        // started one and waiting on it is how MPI retires it; an inactive one is freed at
        // once, and the free sets it to null.
        unsafe {
            if self.receiving {
                mpi::ffi::MPI_Cancel(&mut self.receive);
                mpi::ffi::MPI_Wait(&mut self.receive, mpi::ffi::RSMPI_STATUS_IGNORE);
                self.receiving = false;
            }
            mpi::ffi::MPI_Request_free(&mut self.receive);
        }
    }
}

/// `MPI_REQUEST_NULL`: no request.
fn request_null() -> mpi::ffi::MPI_Request {
    // SAFETY: reading an immutable constant that mpi-sys initialises statically.
    unsafe { mpi::ffi::RSMPI_REQUEST_NULL }
}

/// Everything the progress process reaches; leaked when the node starts (the process and the
/// watch timepoints hold `'static` references into it).
struct Inner {
    device: &'static Device,
    rank: i32,
    size: i32,
    mpi: Mutex<Mpi>,
    exports: Box<[Export]>,
    imports: Box<[Import]>,
    export_of: HashMap<usize, usize>,
    outbox: Mutex<Outbox>,
    /// Whether the outbox's queue holds a message: written only under the outbox's lock, so
    /// it equals `!queue.is_empty()` whenever the lock is free. The idle drain reads it
    /// instead of taking the lock. Relaxed: the lock, taken when it reads true, is what
    /// orders the queue; a message queued after a false read is seen by the drain that the
    /// submitter's wake (or its own flush) starts, since the executor orders that wake before
    /// it.
    outbox_queued: AtomicBool,
    host_waiters: AtomicUsize,
    stopping: AtomicBool,
    stopped: Mutex<bool>,
    stopped_signal: Condvar,
    waker: &'static Waker,
    drains: AtomicU64,
    sleeps: AtomicU64,
    sent: AtomicU64,
    received: AtomicU64,
}

/// One rank of a cluster: its device plus the semaphores it shares, with MPI progress running
/// on the device's executor. Dropping it without [`finish`](Node::finish) still finalises MPI.
pub struct Node {
    inner: &'static Inner,
    /// Finalises MPI when dropped; after the progress process has stopped.
    universe: Option<Universe>,
}

impl Node {
    /// Initialises MPI, links `device`'s semaphores as `links` says and starts the progress
    /// process on the device's executor. Queues on this rank should use `machine =`
    /// [`rank`](Self::rank), so their axes are distinct from every other rank's.
    pub fn start(device: &'static Device, links: &Links) -> Result<Node, NodeError> {
        let (universe, threading) =
            mpi::initialize_with_threading(Threading::Serialized).ok_or(NodeError::MpiInit)?;
        if threading < Threading::Serialized {
            return Err(NodeError::Threading);
        }
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        // Ranks sharing this machine (a collective call: every rank is in `start`).
        let local_ranks = usize::try_from(world.split_shared(rank).size()).unwrap_or(usize::MAX);
        // Collective as well. Its errors are returned (see `Mpi::links`); rsmpi's sends on it
        // ignore what they return, as they would abort otherwise, so a send to a dead peer is
        // lost and its importers time out.
        let link_comm = world.duplicate();
        // SAFETY: `link_comm` is a valid communicator of this process, and MPI_ERRORS_RETURN a
        // predefined error handler.
        unsafe {
            mpi::ffi::MPI_Comm_set_errhandler(link_comm.as_raw(), mpi::ffi::RSMPI_ERRORS_RETURN);
        }
        let cores = cores_online();
        let waker: &'static Waker =
            Box::leak(Box::new(Waker { executor: device.executor(), process: OnceLock::new() }));

        let mut seen = std::collections::HashSet::new();
        let mut check = |link: LinkId, semaphore: SemaphoreId, peers: &[i32]| {
            if !seen.insert(link) || peers.contains(&rank) {
                return Err(NodeError::BadLink(link));
            }
            if let Some(&bad) = peers.iter().find(|&&peer| peer < 0 || peer >= size) {
                return Err(NodeError::NoSuchRank(link, bad));
            }
            device.semaphore(semaphore).map(|_| ()).ok_or(NodeError::NoSuchSemaphore(link))
        };
        for (link, semaphore, to) in &links.exports {
            check(*link, *semaphore, to)?;
        }
        for &(link, semaphore, from) in &links.imports {
            check(link, semaphore, &[from])?;
        }

        let timeline = |link: LinkId, semaphore: SemaphoreId| {
            device.semaphore(semaphore).ok_or(NodeError::NoSuchSemaphore(link))
        };
        let mut exports = links
            .exports
            .iter()
            .map(|(link, semaphore, to)| {
                let watch: &'static Watch = Box::leak(Box::new(Watch {
                    fired: AtomicBool::new(false),
                    waker,
                    export: OnceLock::new(),
                }));
                Ok(Export {
                    link: *link,
                    semaphore: *semaphore,
                    timeline: timeline(*link, *semaphore)?,
                    to: to.clone().into_boxed_slice(),
                    watch,
                    timepoint: Timepoint::new(watch),
                    watching: AtomicBool::new(false),
                    state: Mutex::new(ExportState {
                        announced: VecDeque::with_capacity(pending_bound(device, *semaphore)),
                        ..ExportState::default()
                    }),
                })
            })
            .collect::<Result<Vec<Export>, NodeError>>()?;
        exports.sort_by_key(|export| export.link);
        let mut imports = links
            .imports
            .iter()
            .map(|&(link, semaphore, from)| {
                Ok(Import {
                    link,
                    semaphore,
                    timeline: timeline(link, semaphore)?,
                    from,
                    state: Mutex::new(ImportState {
                        pending: VecDeque::with_capacity(pending_bound(device, semaphore)),
                        ..ImportState::default()
                    }),
                    announced_signal: Condvar::new(),
                })
            })
            .collect::<Result<Vec<Import>, NodeError>>()?;
        imports.sort_by_key(|import| import.link);
        let export_of =
            exports.iter().enumerate().map(|(k, export)| (export.semaphore.index(), k)).collect();

        let inner: &'static Inner = Box::leak(Box::new(Inner {
            device,
            rank,
            size,
            mpi: Mutex::new(Mpi {
                world,
                scratch: Vec::with_capacity(crate::MAX_MESSAGE_LEN),
                links: link_comm,
                inbox: Box::into_raw(vec![0; crate::MAX_MESSAGE_LEN + 1].into_boxed_slice()),
                receive: request_null(),
                receiving: false,
                sending: VecDeque::with_capacity(OUTBOX_BOUND),
                sent: Vec::with_capacity(OUTBOX_BOUND),
            }),
            exports: exports.into_boxed_slice(),
            imports: imports.into_boxed_slice(),
            export_of,
            outbox: Mutex::new(Outbox::new()),
            outbox_queued: AtomicBool::new(false),
            host_waiters: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            stopped: Mutex::new(false),
            stopped_signal: Condvar::new(),
            waker,
            drains: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        }));
        for (k, export) in inner.exports.iter().enumerate() {
            let _ = export.watch.export.set((inner, k));
        }
        let progress: &'static Progress = Box::leak(Box::new(Progress {
            inner,
            // As Open MPI does: spin only while every rank here has a core of its own;
            // oversubscribed, every idle drain yields.
            spin_polls: if local_ranks <= cores { SPIN_POLLS } else { 0 },
            idle_polls: AtomicU32::new(0),
        }));
        let process: &'static Process<'static> =
            Box::leak(Box::new(Process::new(progress, Class::Immediate)));
        let _ = waker.process.set(process);
        device.executor().submit(process).map_err(|_| NodeError::Executor)?;
        Ok(Node { inner, universe: Some(universe) })
    }

    /// This rank.
    pub fn rank(&self) -> i32 {
        self.inner.rank
    }

    /// How many ranks there are.
    pub fn size(&self) -> i32 {
        self.inner.size
    }

    /// The device this rank runs.
    pub fn device(&self) -> &'static Device {
        self.inner.device
    }

    /// Submits `op` to `queue` ([`Device::submit`]) and sends each of its signals on an
    /// exported semaphore, with the operation's point and frontier, to the ranks that import
    /// it. When it waits on an imported value not yet reached, the progress process is woken
    /// to receive it.
    pub fn submit(&self, queue: QueueId, op: &Op<'_>) -> Result<Receipt, SubmitError> {
        let receipt = self.inner.device.submit(queue, op)?;
        self.submitted(op, &receipt);
        Ok(receipt)
    }

    /// [`submit`](Self::submit), giving up as [`Device::submit_timeout`] does when the queue's
    /// ring or a signalled history is still full after `timeout` (nothing is sent then).
    pub fn submit_timeout(
        &self,
        queue: QueueId,
        op: &Op<'_>,
        timeout: Duration,
    ) -> Result<Receipt, SubmitError> {
        let receipt = self.inner.device.submit_timeout(queue, op, timeout)?;
        self.submitted(op, &receipt);
        Ok(receipt)
    }

    /// What follows a submission: its exported signals are announced, and the progress
    /// process is woken when the operation waits on an imported value not yet reached.
    fn submitted(&self, op: &Op<'_>, receipt: &Receipt) {
        let mut wake = self.queue_announcements(op.signals, receipt.point, &receipt.frontier);
        wake |= op.waits.iter().any(|&(semaphore, value)| {
            self.inner.imports.iter().any(|import| import.semaphore == semaphore)
                && self.inner.device.semaphore(semaphore).is_some_and(|s| s.value() < value)
        });
        if wake {
            self.inner.waker.wake();
        }
    }

    /// Announces signals this rank made outside [`submit`](Self::submit) — a host thread's
    /// tracked signals, committed on the device's semaphores with `origin` and `frontier` —
    /// to the ranks that import them, exactly as a submission's are. Signals on semaphores
    /// that are not exported are ignored. Call it once the signals are committed (pending or
    /// reached): their completion follows as for any exported value. A host thread takes part
    /// through the device layer's host participant, as the CLI's host steps do: a
    /// [`HostTimeline`](causeway_device::HostTimeline) step's
    /// [`CommittedStep`](causeway_device::CommittedStep) gives `origin` (its `point`) and
    /// `frontier`; announce between its commit and its `finish`.
    pub fn announce(
        &self,
        signals: &[(SemaphoreId, u64)],
        origin: Point,
        frontier: &Frontier<FRONTIER_CAPACITY>,
    ) {
        if self.queue_announcements(signals, origin, frontier) {
            self.inner.waker.wake();
        }
    }

    /// Fails `semaphore` on this device and wakes the progress process, so that ranks
    /// importing it learn the failure without waiting for another message.
    pub fn fail(&self, semaphore: SemaphoreId, failure: Failure) {
        if let Some(semaphore) = self.inner.device.semaphore(semaphore) {
            semaphore.fail(failure);
        }
        self.inner.waker.wake();
    }

    /// Queues one pending-signal message per exported signal; whether any was queued.
    fn queue_announcements(
        &self,
        signals: &[(SemaphoreId, u64)],
        origin: Point,
        frontier: &Frontier<FRONTIER_CAPACITY>,
    ) -> bool {
        let mut queued = false;
        let mut backlog = 0;
        for &(semaphore, value) in signals {
            let Some(&k) = self.inner.export_of.get(&semaphore.index()) else { continue };
            let export = &self.inner.exports[k];
            let message =
                Message::Pending { link: export.link, value, origin, frontier: *frontier };
            let mut outbox = self.inner.outbox.lock();
            let mut bytes = outbox.buffer();
            message.encode(&mut bytes);
            let purpose = Purpose::Announces { export: k, value };
            outbox.queued.push_back(Outgoing { purpose, bytes });
            self.inner.outbox_queued.store(true, Ordering::Relaxed);
            backlog = outbox.queued.len();
            queued = true;
        }
        if backlog >= OUTBOX_FLUSH {
            // The progress process is behind (its worker busy, or this thread submitting in a
            // tight loop): send the backlog from here, in order, exactly as its drain would.
            // Waiting for the lock is safe: a drain or a send holds it briefly and never waits
            // on a submitter. Not inside `with_world`, where this thread holds it already; the
            // progress process sends the queue then.
            if !IN_WITH_WORLD.get() {
                self.inner.send_queued(&mut self.lock_mpi());
            }
        }
        queued
    }

    /// Blocks the calling thread until `link` reaches `value` (`Ok(value seen)`), fails, or
    /// `timeout` passes. A timed-out imported semaphore is failed as [`Failure::DeviceLost`]
    /// (so operations waiting on it fail too) with [`RemoteError::TimedOut`].
    pub fn wait(&self, link: LinkId, value: u64, timeout: Duration) -> Result<u64, HostWaitError> {
        let semaphore = self.inner.semaphore_of(link).ok_or(HostWaitError::UnknownLink(link))?;
        let semaphore =
            self.inner.device.semaphore(semaphore).ok_or(HostWaitError::UnknownLink(link))?;
        let woken = HostWake { outcome: Mutex::new(None), signal: Condvar::new() };
        self.inner.host_waiters.fetch_add(1, Ordering::Relaxed);
        self.inner.waker.wake();
        let deadline = Instant::now() + timeout;
        let outcome = semaphore.wait_scoped(value, &woken, |arm| match arm {
            Arm::Ready(outcome) => Some(outcome),
            Arm::Armed => {
                let mut outcome = woken.outcome.lock();
                loop {
                    if let Some(outcome) = *outcome {
                        break Some(outcome);
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        break None;
                    }
                    outcome = woken.signal.wait_timeout(outcome, deadline - now).0;
                }
            }
        });
        self.inner.host_waiters.fetch_sub(1, Ordering::Relaxed);
        match outcome {
            Some(Ok(seen)) => Ok(seen),
            Some(Err(failure)) => Err(HostWaitError::Failed(failure)),
            None => {
                if let Some(import) = self.inner.import(link) {
                    self.inner.fail_import(import, RemoteError::TimedOut);
                }
                Err(HostWaitError::TimedOut)
            }
        }
    }

    /// Blocks until the exporter of imported `link` has announced a signal to `value` or more
    /// (recorded here as pending, with its frontier), the link fails, or `timeout` passes.
    ///
    /// This is what pipelining needs, and no more: an operation submitted afterwards that
    /// waits on `link ≥ value` imports the signaller's frontier at once and is queued behind
    /// it, while the signalling work may not have started yet. It costs one message from the
    /// exporter, never a round trip. A timeout fails the link as [`Node::wait`]'s does.
    pub fn await_announced(
        &self,
        link: LinkId,
        value: u64,
        timeout: Duration,
    ) -> Result<(), HostWaitError> {
        let import = self.inner.import(link).ok_or(HostWaitError::UnknownLink(link))?;
        let semaphore = self
            .inner
            .device
            .semaphore(import.semaphore)
            .ok_or(HostWaitError::UnknownLink(link))?;
        let deadline = Instant::now() + timeout;
        self.inner.host_waiters.fetch_add(1, Ordering::Relaxed);
        self.inner.waker.wake();
        let mut state = import.state.lock();
        let outcome = loop {
            if let Some(failure) = semaphore.failure() {
                break Err(HostWaitError::Failed(failure));
            }
            if state.announced >= value || semaphore.value() >= value {
                break Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                break Err(HostWaitError::TimedOut);
            }
            state = import.announced_signal.wait_timeout(state, deadline - now).0;
        };
        drop(state);
        self.inner.host_waiters.fetch_sub(1, Ordering::Relaxed);
        if outcome == Err(HostWaitError::TimedOut) {
            self.inner.fail_import(import, RemoteError::TimedOut);
        }
        outcome
    }

    /// Why imported `link` failed on this rank, when the reason is the link's own (malformed
    /// bytes, a wrong sender, a broken timeline, a timeout) rather than a failure its
    /// exporter reported.
    pub fn link_error(&self, link: LinkId) -> Option<RemoteError> {
        self.inner.import(link).and_then(|import| import.state.lock().error)
    }

    /// Sends `bytes` to `rank` as if they were a semaphore message: for fault-injection
    /// tests of a receiver's handling of malformed input.
    pub fn send_raw(&self, rank: i32, bytes: &[u8]) {
        let mut outbox = self.inner.outbox.lock();
        let mut buffer = outbox.buffer();
        buffer.extend_from_slice(bytes);
        outbox.queued.push_back(Outgoing { purpose: Purpose::Raw { rank }, bytes: buffer });
        self.inner.outbox_queued.store(true, Ordering::Relaxed);
        drop(outbox);
        self.inner.waker.wake();
    }

    /// What the progress process has done so far.
    pub fn progress_stats(&self) -> ProgressStats {
        ProgressStats {
            drains: self.inner.drains.load(Ordering::Relaxed),
            sleeps: self.inner.sleeps.load(Ordering::Relaxed),
            sent: self.inner.sent.load(Ordering::Relaxed),
            received: self.inner.received.load(Ordering::Relaxed),
        }
    }

    /// The collective channel `ordinal` of the whole world: an axis of
    /// [`Domain::Collective`] on machine [`CLUSTER_MACHINE`], the same on every rank (no
    /// rank's queues live there), with one participant per rank.
    pub fn collective_channel(&self, ordinal: u64) -> Option<CollectiveChannel> {
        let axis = Axis::try_new(CLUSTER_MACHINE, Domain::Collective, ordinal)?;
        CollectiveChannel::new(axis, u16::try_from(self.inner.size).ok()?).ok()
    }

    /// Runs `f` with the world communicator, under the lock every MPI call of this node takes
    /// (plain MPI beside the node: a peer measurement, an application's own exchange). `f`
    /// must not block on another rank's progress: this rank's progress process waits for it.
    /// `f` may submit through this node; its announcements go out after `f` returns.
    pub fn with_world<R>(&self, f: impl FnOnce(&SimpleCommunicator) -> R) -> R {
        /// Clears the flag however `f` ends.
        struct Leaving;
        impl Drop for Leaving {
            fn drop(&mut self) {
                IN_WITH_WORLD.set(false);
            }
        }
        let mpi = self.lock_mpi();
        IN_WITH_WORLD.set(true);
        let _leaving = Leaving;
        f(&mpi.world)
    }

    /// Sums `data` element-wise across every rank (an `MPI_Allreduce`), as round
    /// `channel.begin_round()` of a collective on `channel`, then signals `done` to `value` on
    /// this rank with that round's point as its origin. The signal's frontier is `knowing`
    /// (what this rank's contribution depended on) plus the one channel entry — not one entry
    /// per rank — so whatever waits on `done` learns the collective with a single entry at any
    /// rank count. Every rank must call it, in the same order, with equally long `data`;
    /// other ranks' semaphore messages keep flowing while it waits.
    pub fn all_reduce_sum(
        &self,
        channel: &mut CollectiveChannel,
        data: &mut [f64],
        knowing: &Frontier<FRONTIER_CAPACITY>,
        done: (SemaphoreId, u64),
    ) -> Result<Point, CollectiveOpError> {
        let round = channel.begin_round().map_err(|_| CollectiveOpError::RoundsExhausted)?;
        let semaphore =
            self.inner.device.semaphore(done.0).ok_or(CollectiveOpError::NoSuchSemaphore)?;
        self.sum_across_ranks(data);
        let mut frontier = *knowing;
        frontier.insert_or_raise(round.point().axis, round.point().epoch);
        semaphore.signal(done.1, round.point(), &frontier).map_err(CollectiveOpError::Signal)?;
        Ok(round.point())
    }

    /// Sums `data` element-wise across every rank, in place (an `MPI_Iallreduce` tested in a
    /// loop, so this rank's progress process keeps delivering semaphore values meanwhile).
    /// Every rank must call it, in the same order, with equally long `data`. The reduction
    /// alone: [`all_reduce_sum`](Self::all_reduce_sum) also signals its completion.
    pub fn sum_across_ranks(&self, data: &mut [f64]) {
        let send = data.to_vec();
        mpi::request::scope(|scope| {
            let request = {
                let mpi = self.lock_mpi();
                mpi.world.immediate_all_reduce_into(scope, &send[..], data, SystemOperation::sum())
            };
            self.complete(request);
        });
    }

    /// Waits until every rank has called it (an `MPI_Ibarrier` tested in a loop, so this
    /// rank's progress process keeps delivering messages meanwhile).
    pub fn barrier(&self) {
        let request = self.lock_mpi().world.immediate_barrier();
        self.complete(request);
    }

    /// Tests `request` until it completes, with the MPI lock released in between, so this
    /// rank's progress process keeps delivering messages other ranks may need before they
    /// reach the same collective.
    fn complete<'a, D: ?Sized, S: mpi::request::Scope<'a>>(
        &self,
        request: mpi::request::Request<'a, D, S>,
    ) {
        let mut request = Some(request);
        while let Some(pending) = request.take() {
            let tested = {
                let _mpi = self.lock_mpi();
                pending.test()
            };
            if let Err(pending) = tested {
                request = Some(pending);
                self.inner.waker.wake();
                std::thread::yield_now();
            }
        }
    }

    /// Stops the progress process (after it has sent what is queued), then finalises MPI.
    pub fn finish(mut self) {
        self.stop();
        drop(self.universe.take());
    }

    /// [`finish`](Self::finish), waiting at most `grace` for the progress process to stop.
    /// When it cannot get a worker in time — every worker of the device is stuck in work that
    /// never returns — MPI is left unfinalised, since a progress process that ran later would
    /// find it gone under it; the caller is about to exit (Open MPI's `mpirun` then reports
    /// the rank as ended without finalising). Returns whether MPI was finalised.
    pub fn finish_within(mut self, grace: Duration) -> bool {
        let stopped = self.stop_within(Some(grace));
        let universe = self.universe.take();
        if stopped {
            drop(universe);
        } else {
            std::mem::forget(universe);
        }
        stopped
    }

    /// Stops the progress process, waiting at most `grace`, and leaves MPI unfinalised: for a
    /// rank about to exit after an end that was not whole ([`Gathered`](crate::gather::Gathered)).
    /// Open MPI's `MPI_Finalize` waits for every rank still alive, and a lost rank that is alive
    /// but stuck would hold it forever; `mpirun` then reports this rank as ended without
    /// finalising.
    pub fn leave_within(mut self, grace: Duration) {
        self.stop_within(Some(grace));
        std::mem::forget(self.universe.take());
    }

    fn stop(&self) {
        self.stop_within(None);
    }

    /// Asks the progress process to stop and waits for it, up to `grace` when given; whether
    /// it stopped.
    fn stop_within(&self, grace: Option<Duration>) -> bool {
        self.inner.stopping.store(true, Ordering::Relaxed);
        self.inner.waker.wake();
        let deadline = grace.and_then(|grace| Instant::now().checked_add(grace));
        let mut stopped = self.inner.stopped.lock();
        while !*stopped {
            match deadline {
                None => stopped = self.inner.stopped_signal.wait(stopped),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    stopped = self.inner.stopped_signal.wait_timeout(stopped, deadline - now).0;
                }
            }
        }
        true
    }

    fn lock_mpi(&self) -> MutexGuard<'_, Mpi> {
        self.inner.mpi.lock()
    }

    /// Wakes the progress process (a collective tested in a loop, [`reduce`](crate::reduce)).
    pub(crate) fn wake_progress(&self) {
        self.inner.waker.wake();
    }

    /// Runs `f` with the links' communicator, under the MPI lock (the end-of-run exchange of
    /// [`gather`](crate::gather), on that communicator's returned errors and its own tags).
    pub(crate) fn with_links<R>(&self, f: impl FnOnce(&SimpleCommunicator) -> R) -> R {
        f(&self.lock_mpi().links)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.universe.is_some() {
            self.stop();
        }
    }
}

/// Why [`Node::all_reduce_sum`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectiveOpError {
    /// The channel has no round left.
    RoundsExhausted,
    /// `done` names a semaphore the device lacks.
    NoSuchSemaphore,
    /// Signalling `done` was refused.
    Signal(SignalError),
}

impl fmt::Display for CollectiveOpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectiveOpError::RoundsExhausted => f.write_str("collective channel exhausted"),
            CollectiveOpError::NoSuchSemaphore => f.write_str("no such completion semaphore"),
            CollectiveOpError::Signal(error) => write!(f, "completion signal refused: {error}"),
        }
    }
}

impl std::error::Error for CollectiveOpError {}

/// A host thread blocked in [`Node::wait`].
struct HostWake {
    outcome: Mutex<Option<Outcome>>,
    signal: Condvar,
}

impl Notify for HostWake {
    fn notify(&self, outcome: Outcome) {
        *self.outcome.lock() = Some(outcome);
        self.signal.notify_all();
    }

    fn while_firing(&self) {
        std::thread::yield_now();
    }
}

impl Inner {
    fn import(&self, link: LinkId) -> Option<&Import> {
        let k = self.imports.binary_search_by_key(&link, |import| import.link).ok()?;
        Some(&self.imports[k])
    }

    fn semaphore_of(&self, link: LinkId) -> Option<SemaphoreId> {
        if let Some(import) = self.import(link) {
            return Some(import.semaphore);
        }
        let k = self.exports.binary_search_by_key(&link, |export| export.link).ok()?;
        Some(self.exports[k].semaphore)
    }

    /// Fails imported semaphore `import` with `Failure::DeviceLost`, keeping `error` as the
    /// reason (the first reason wins, as the first failure does). The exporter is treated as
    /// gone — it died, or its bytes cannot be trusted — so nothing will report its signals
    /// ended: the waits on them end now (`Semaphore::abandon`).
    fn fail_import(&self, import: &Import, error: RemoteError) {
        import.timeline.abandon(Failure::DeviceLost);
        import.state.lock().error.get_or_insert(error);
        import.announced_signal.notify_all();
    }

    /// Applies one received message from `sender`.
    fn deliver(&self, sender: i32, bytes: &[u8]) {
        // Read in place: moving the message out of the result copied the whole of it, a
        // pending message's frontier included, for every reached value too.
        let decoded = Message::decode(bytes);
        let message = match &decoded {
            Ok(message) => message,
            Err(error) => {
                let error = *error;
                match error.link().and_then(|link| self.import(link)) {
                    Some(import) => self.fail_import(import, RemoteError::Malformed(error)),
                    // Not attributable to one semaphore: every one this sender feeds fails.
                    None => {
                        for import in self.imports.iter().filter(|import| import.from == sender) {
                            self.fail_import(import, RemoteError::Malformed(error));
                        }
                    }
                }
                return;
            }
        };
        let Some(import) = self.import(message.link()) else {
            // A link this rank does not import: every semaphore the sender feeds is suspect.
            for import in self.imports.iter().filter(|import| import.from == sender) {
                self.fail_import(import, RemoteError::UnknownLink(message.link()));
            }
            return;
        };
        if import.from != sender {
            self.fail_import(import, RemoteError::WrongSender { exporter: import.from, sender });
            return;
        }
        let semaphore = import.timeline;
        let result = match *message {
            Message::Pending { value, origin, ref frontier, .. } => {
                semaphore.submit_signal(value, origin, frontier).map(|()| {
                    let mut state = import.state.lock();
                    state.pending.push_back(value);
                    state.announced = value;
                    import.announced_signal.notify_all();
                })
            }
            Message::Reached { value, .. } => {
                let mut state = import.state.lock();
                let mut result = Ok(());
                while let Some(&next) = state.pending.front().filter(|&&next| next <= value) {
                    state.pending.pop_front();
                    result = semaphore.complete_signal(next);
                    if result.is_err() {
                        break;
                    }
                }
                result
            }
            // Sent once every signal announced here has ended on the exporter: the waits on
            // them end now.
            Message::Failed { failure, .. } => {
                semaphore.abandon(failure);
                let _state = import.state.lock();
                import.announced_signal.notify_all();
                Ok(())
            }
        };
        match result {
            Ok(()) => {}
            // Failed already: the failure reached its waiters; nothing more to record.
            Err(SignalError::Failed(_)) => {}
            Err(error) => self.fail_import(import, RemoteError::Timeline(error)),
        }
    }

    /// Reports to its importers what exported semaphore `export` reached among the values
    /// already announced to them (or its failure), and arms its watch while announced values
    /// are still pending.
    fn report(&self, mpi: &mut Mpi, export: &'static Export) {
        // A watch armed and not fired says the oldest value announced is not reached and the
        // semaphore has not failed (either would fire it): nothing to report, and the idle
        // drain skips the lock. A firing after this look sets the flag and wakes the progress
        // process, whose next drain reports. Relaxed: the flag is only looked at here; the
        // Acquire swap below is what reads the timeline state behind it.
        if export.watching.load(Ordering::Relaxed) && !export.watch.fired.load(Ordering::Relaxed) {
            return;
        }
        // Acquire pairs with the Release store in `Watch::notify`.
        if export.watch.fired.swap(false, Ordering::Acquire) {
            export.watching.store(false, Ordering::Relaxed);
        }
        let semaphore = export.timeline;
        loop {
            let mut state = export.state.lock();
            if self.send_reached_locked(mpi, export, &mut state, outcome_of(semaphore)) {
                return;
            }
            if export.watching.load(Ordering::Relaxed) {
                return;
            }
            let Some(&next) = state.announced.front() else { return };
            let timepoint = Pin::static_ref(&export.timepoint);
            // SAFETY: the timepoint lives in the leaked `Inner` (never moved or freed), the
            // semaphore in the device the caller of `Node::start` gave as `'static`, so both
            // outlive the arming; it is armed only while `watching` is false, i.e. idle
            // (`watching` is cleared only after it fired), and `arm` refuses a busy one anyway.
            let armed = unsafe { semaphore.arm(timepoint, next) };
            match armed {
                Ok(Arm::Armed) => {
                    export.watching.store(true, Ordering::Relaxed);
                    return;
                }
                // Reached or failed meanwhile: report again.
                Ok(Arm::Ready(_)) => continue,
                // Its callback is still running. It may have set the flag and woken this
                // process already (this very report may be that wake's), so no wake is coming
                // for what the timeline reaches next: wait the callback out, then look again.
                // It takes no lock held here: its send needs the MPI lock, held by the caller,
                // so it is done or skipped. `cancel` waits for a running callback (and would
                // unlink an armed watch, which `watching` says this is not).
                Err(_) => {
                    drop(state);
                    let _ = semaphore.cancel(&export.timepoint);
                }
            }
        }
    }

    /// Sends the importers of `export` the newest value announced to them that its timeline
    /// has reached, then — when it has failed and every signal announced and not reached has
    /// ended — its failure (the watch stays as it is), given what the timeline has come to:
    /// `Ok(reached)` or its failure — read from it, or handed to the watch's callback. Needs
    /// the export's state locked; returns whether its failure has been sent (nothing more is
    /// reported then).
    ///
    /// The failure waits for the announced signals still running: an importer's operation may
    /// have imported one, and its waits must not end before that signal's operation has (see
    /// `Semaphore::fail`). The importer ends them all when the failure arrives
    /// (`Semaphore::abandon`), so it must come after the last of them.
    fn send_reached_locked(
        &self,
        mpi: &mut Mpi,
        export: &Export,
        state: &mut ExportState,
        timeline: Outcome,
    ) -> bool {
        if state.failure_sent {
            return true;
        }
        let reached = match timeline {
            Ok(reached) => reached,
            // Values reached before the failure stay reached: reported first.
            Err(_) => export.timeline.value(),
        };
        self.send_reached_through(mpi, export, state, reached);
        let Err(failure) = timeline else { return false };
        while state.announced.front().is_some_and(|&value| !export.timeline.is_live_at(value)) {
            state.announced.pop_front();
        }
        if !state.announced.is_empty() {
            // The caller arms the watch on the oldest: it fires when that signal ends.
            return false;
        }
        state.failure_sent = true;
        mpi.scratch.clear();
        Message::Failed { link: export.link, failure }.encode(&mut mpi.scratch);
        self.send(&mpi.links, &export.to, &mpi.scratch);
        true
    }

    /// Sends the importers of `export` a reached message for the newest value announced to
    /// them that is at or below `reached`, and forgets every such value.
    fn send_reached_through(
        &self,
        mpi: &mut Mpi,
        export: &Export,
        state: &mut ExportState,
        reached: u64,
    ) {
        let mut newest = None;
        while let Some(&value) = state.announced.front().filter(|&&value| value <= reached) {
            state.announced.pop_front();
            newest = Some(value);
        }
        if let Some(value) = newest {
            mpi.scratch.clear();
            Message::Reached { link: export.link, value }.encode(&mut mpi.scratch);
            #[cfg(feature = "hop-probe")]
            crate::probe::hit(crate::probe::Point::SendingReached);
            self.send(&mpi.links, &export.to, &mpi.scratch);
            #[cfg(feature = "hop-probe")]
            crate::probe::hit(crate::probe::Point::SentReached);
        }
    }

    /// Sends `bytes` to each rank of `to` on the links' communicator. Inlined: a frame of its
    /// own between the reached message and `MPI_Send` cost every cross-rank hop about twenty
    /// instructions.
    #[inline]
    fn send(&self, links: &SimpleCommunicator, to: &[i32], bytes: &[u8]) {
        // Every message this crate encodes is far below `c_int::MAX` bytes.
        let Ok(len) = std::os::raw::c_int::try_from(bytes.len()) else { return };
        for &rank in to {
            // Straight to MPI_Send: rsmpi's `process_at_rank` asks MPI for the communicator's
            // size on every send to check a rank that `Node::start` checked once
            // (`NoSuchRank`). A refused send (the links' communicator returns errors) is lost as
            // rsmpi's would be; the peer's deadline names what never came.
            // SAFETY: `bytes` is valid for reads of `len` bytes for the whole call (a blocking
            // send returns once the buffer may be reused); the datatype is `u8`'s, matching it;
            // `links` is a live communicator (the node's, alive while `Mpi` is), and its calls
            // are serialised by the MPI lock the caller holds (`MPI_THREAD_SERIALIZED`).
            unsafe {
                mpi::ffi::MPI_Send(
                    bytes.as_ptr().cast::<std::ffi::c_void>(),
                    len,
                    u8::equivalent_datatype().as_raw(),
                    rank,
                    LINK_TAG,
                    links.as_raw(),
                );
            }
            // Every send is made under the MPI lock, which orders these writes: no
            // read-modify-write needed.
            self.sent.store(self.sent.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }

    /// Sends what was queued, in order. Before each announcement, the values of its semaphore
    /// reached so far are reported: the timelines are read after the queue was taken, so a
    /// signal that had to wait for a history slot follows the report of the value that freed
    /// it, and an importer never holds more pending values than its exporter did. Returns
    /// whether anything was sent.
    fn send_queued(&'static self, mpi: &mut Mpi) -> bool {
        if !self.outbox_queued.load(Ordering::Relaxed) {
            return false;
        }
        {
            let mut outbox = self.outbox.lock();
            if outbox.queued.is_empty() {
                return false;
            }
            std::mem::swap(&mut outbox.queued, &mut mpi.sending);
            self.outbox_queued.store(false, Ordering::Relaxed);
        }
        // Out of `mpi` while it is sent, since reporting takes `mpi` as well; put back below
        // with its capacity.
        let mut sending = std::mem::take(&mut mpi.sending);
        for outgoing in sending.drain(..) {
            match outgoing.purpose {
                Purpose::Raw { rank } => self.send(&mpi.links, &[rank], &outgoing.bytes),
                Purpose::Announces { export: k, value } => {
                    let export = &self.exports[k];
                    self.report(mpi, export);
                    self.send(&mpi.links, &export.to, &outgoing.bytes);
                    let mut state = export.state.lock();
                    if !state.failure_sent {
                        state.announced.push_back(value);
                    }
                }
            }
            mpi.sent.push(outgoing.bytes);
        }
        mpi.sending = sending;
        self.outbox.lock().free.append(&mut mpi.sent);
        true
    }

    /// Delivers the message the receive got, if it got one; whether it did. One message per
    /// call: the drain then returns, so an operation the message woke starts (on this worker,
    /// handed off through `cx`) before anything else is tested, and the receive is started
    /// again by the next poll.
    fn receive_one(&self, mpi: &mut Mpi, cx: &mut DrainContext<'_, '_>) -> bool {
        mpi.post_receive();
        if !mpi.receiving {
            return false;
        }
        let mut done: std::os::raw::c_int = 0;
        let mut status = std::mem::MaybeUninit::<mpi::ffi::MPI_Status>::uninit();
        // SAFETY: `receive` is the started persistent request `post_receive` left; `done` and
        // `status` are written by MPI_Test.
        let code = unsafe { mpi::ffi::MPI_Test(&mut mpi.receive, &mut done, status.as_mut_ptr()) };
        if done == 0 {
            return false;
        }
        #[cfg(feature = "hop-probe")]
        crate::probe::hit(crate::probe::Point::Received);
        // Complete, in error or not: the request is inactive again, and the next drain
        // starts it.
        mpi.receiving = false;
        // SAFETY: MPI_Test set `done`, and with it wrote the status.
        let status = unsafe { status.assume_init() };
        // Only the progress process receives, under the MPI lock: no read-modify-write.
        self.received.store(self.received.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let capacity = mpi.inbox.len();
        // A truncated (too long) message fills the inbox, one byte past any message this
        // crate encodes, so the decoder refuses it. So does one whose count MPI cannot say.
        let len = if code == mpi::ffi::MPI_SUCCESS as std::os::raw::c_int {
            let mut count: std::os::raw::c_int = 0;
            // SAFETY: `status` is the completed receive's; `count` is written by MPI.
            unsafe {
                mpi::ffi::MPI_Get_count(&status, u8::equivalent_datatype().as_raw(), &mut count)
            };
            usize::try_from(count).ok().filter(|&len| len <= capacity).unwrap_or(capacity)
        } else {
            capacity
        };
        // SAFETY: the receive completed (`done`), so MPI no longer writes the inbox, and none
        // is posted again while this slice lives (only `post_receive` posts, and `mpi` is
        // borrowed here); the inbox is `capacity` initialised bytes, leaked at start.
        let bytes = unsafe { std::slice::from_raw_parts(mpi.inbox.cast::<u8>(), len) };
        // The queue process a reached value wakes runs on this worker as soon as the drain
        // returns, rather than being published for whichever worker looks next.
        let ((), woken) = self.device.holding_wake(|| self.deliver(status.MPI_SOURCE, bytes));
        if let Some(woken) = woken {
            cx.hand_off(woken);
        }
        true
    }

    /// Whether something besides a message needs the progress process: a message queued, an
    /// exported value reached or failed, a request to stop.
    fn has_news(&self) -> bool {
        self.outbox_queued.load(Ordering::Relaxed)
            || self.stopping.load(Ordering::Relaxed)
            || self.exports.iter().any(|export| export.watch.fired.load(Ordering::Relaxed))
    }

    /// Whether a result is awaited from another rank: a host thread or an operation waits on
    /// an imported value, or messages wait to be sent.
    fn outstanding(&self) -> bool {
        // The semaphores' locks last: the flags answer first when they can.
        self.host_waiters.load(Ordering::Relaxed) > 0
            || self.outbox_queued.load(Ordering::Relaxed)
            || self.imports.iter().any(|import| import.timeline.has_waiters())
    }
}

/// What `semaphore`'s timeline has come to: its failure, or the value it reached.
fn outcome_of(semaphore: &DeviceSemaphore) -> Outcome {
    semaphore.failure().map_or_else(|| Ok(semaphore.value()), Err)
}

/// How many values a link's semaphore can have pending at once (its history's slots), and so
/// how many an importer can hold announced and not reached, or an exporter announced and not
/// reported: their queues reserve that much at start.
fn pending_bound(device: &Device, semaphore: SemaphoreId) -> usize {
    device.semaphore(semaphore).map_or(0, |semaphore| semaphore.with_history(|h| h.capacity()))
}

/// Polls in a row that found nothing before the progress process starts yielding its core
/// between drains: a peer's answer usually comes within a few microseconds (one poll takes a
/// small fraction of one), and a `sched_yield` per look would cost more than the wait; past
/// this, the wait is long and other threads — another rank, when ranks outnumber cores — get
/// the core between looks.
const SPIN_POLLS: u32 = 128;

/// Polls one drain makes at most while they find nothing, nothing else needs the progress
/// process and no other work waits for its worker (see [`DrainContext::others_waiting`]):
/// going back to the executor between polls would only bring the worker back here, a few
/// dozen nanoseconds later, and a message arriving meanwhile would wait for them.
const POLLS_PER_DRAIN: u32 = 16;

/// The cores online on this machine (at least 1). Not the calling thread's affinity, which
/// `mpirun` narrows to one core per rank when it binds ranks.
fn cores_online() -> usize {
    // SAFETY: `sysconf` only reads a system parameter; `_SC_NPROCESSORS_ONLN` is a valid name
    // on every platform Open MPI runs on, and an error comes back as -1, handled below.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(online).ok().filter(|&cores| cores > 0).unwrap_or(1)
}

/// The progress process's behaviour: one drain over the leaked [`Inner`].
struct Progress {
    inner: &'static Inner,
    /// Idle polls before yielding: [`SPIN_POLLS`], or 0 when ranks outnumber this machine's
    /// cores (then every drain polls once and yields when it found nothing).
    spin_polls: u32,
    /// Polls in a row that found nothing (only the progress process's drain touches it, one
    /// drain at a time, so Relaxed suffices).
    idle_polls: AtomicU32,
}

impl Progress {
    /// Tests the receive again while nothing arrives, until a message does (delivered:
    /// `true`), or — `false` — as soon as something else needs the progress process or its
    /// worker, after [`POLLS_PER_DRAIN`] polls in all, or at once when spinning is over (see
    /// [`SPIN_POLLS`]). Counts the idle polls.
    fn poll_again(&self, mpi: &mut Mpi, cx: &mut DrainContext<'_, '_>) -> bool {
        let this = self.inner;
        let mut idle = self.idle_polls.load(Ordering::Relaxed).saturating_add(1);
        for _ in 1..POLLS_PER_DRAIN {
            if idle >= self.spin_polls || this.has_news() || cx.others_waiting() {
                break;
            }
            core::hint::spin_loop();
            if this.receive_one(mpi, cx) {
                self.idle_polls.store(0, Ordering::Relaxed);
                return true;
            }
            idle = idle.saturating_add(1);
        }
        self.idle_polls.store(idle, Ordering::Relaxed);
        false
    }
}

impl Drain for Progress {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        let this = self.inner;
        // One drain at a time (the executor's state transitions order them): no
        // read-modify-write.
        this.drains.store(this.drains.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let mut mpi = this.mpi.lock();
        let moved = this.send_queued(&mut mpi);
        for export in this.exports.iter() {
            this.report(&mut mpi, export);
        }
        if this.stopping.load(Ordering::Relaxed) {
            // What has arrived is delivered before the receive is retired and MPI finalised.
            while this.receive_one(&mut mpi, cx) {}
            mpi.retire_receive();
            return Drained::Done(Ok(()));
        }
        // What arrives may fail an export (an operation that waited on it fails): the next
        // drain, which follows at once, reports it.
        if this.receive_one(&mut mpi, cx) {
            // More may have arrived: the next drain looks (after what this message woke).
            self.idle_polls.store(0, Ordering::Relaxed);
            return Drained::Progress;
        }
        if !this.outstanding() {
            self.idle_polls.store(0, Ordering::Relaxed);
            this.sleeps.fetch_add(1, Ordering::Relaxed);
            return Drained::Sleep;
        }
        if moved {
            // More may be queued to send: no polling in place.
            self.idle_polls.store(0, Ordering::Relaxed);
            return Drained::Progress;
        }
        if self.poll_again(&mut mpi, cx) {
            return Drained::Progress;
        }
        drop(mpi);
        if self.idle_polls.load(Ordering::Relaxed) >= self.spin_polls {
            // Waiting on a peer for a while: let other work on this core run before testing
            // again.
            std::thread::yield_now();
        }
        Drained::Progress
    }

    fn finish(&self, _outcome: Result<(), Failure>) {
        *self.inner.stopped.lock() = true;
        self.inner.stopped_signal.notify_all();
    }
}

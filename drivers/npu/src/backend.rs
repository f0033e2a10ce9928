//! The NPU driver behind the device layer's seam: [`NpuBackend`] runs causeway queues on the
//! rings of the software [`DeviceModel`], speaking the protocol through a
//! [`Producer`](crate::Producer) per ring as it would to real MMIO.
//!
//! # Mapping
//!
//! - **Queue → ring + progress slot.** Causeway queue `q` of this driver owns ring `r` and
//!   semaphore slot `r`, the queue's *progress*: the epoch of its last ended operation. It is
//!   the timeline the device layer's native waits are about
//!   ([`BackendCapabilities::native_waits`]).
//! - **Other drivers' queues → mirror slots.** After the rings' progress slots the model has
//!   one slot per queue of the device (`rings + q`), the driver's *mirror* of queue `q`'s
//!   progress when `q` is another driver's (a CPU queue). The device layer has the driver write
//!   it ([`Backend::mirror_progress`], a host write with [`DeviceModel::signal_from_host`]) as
//!   each of `q`'s operations ends, however it ends, once some operation of this driver waits
//!   on `q` ([`BackendCapabilities::host_written_waits`]); the layer keeps the writes to one
//!   slot in order and never concurrent, so the host is its only writer.
//! - **Operation → descriptors.** Operation `e` of queue `q` is, in ring order: one WAIT per
//!   device wait with origin `o` — `slot(o.queue) ≥ o.epoch` on an NPU queue's progress slot,
//!   or on the mirror slot of another driver's queue; one EXEC per region of its command
//!   buffer (the kernels of the CPU driver, run by the model's engine); and the SIGNAL
//!   `slot(q) = e`. Elided and satisfied waits never reach the driver, and held waits were
//!   reached before issue: neither emits anything. So the WAIT descriptors emitted are exactly
//!   the device-wait resolutions of the issued operations, those on mirror slots counted apart
//!   ([`NpuTally`]).
//! - **Chaining.** The WAITs and EXECs of an operation are chained to its first descriptor, so
//!   a failed WAIT or EXEC skips the rest of the operation's work. Its SIGNAL is *not* chained:
//!   the slot is the queue's progress, not its success, and a slot failed once stays failed,
//!   which would fail every later operation of the queue and every wait on it. Failure crosses
//!   to waiters through the device layer instead, which retires a native waiter only after its
//!   origins and fails it when one failed. A mirror slot likewise says that the origin ended,
//!   not that it succeeded.
//! - **Completion.** One interrupt thread per ring sleeps on the ring's interrupt status (the
//!   platform futex). It arms the interrupt, re-reads the head register, and wakes the causeway
//!   queue whenever the head moved (see [the interrupt thread](#the-interrupt-thread)). A poll
//!   reaps every completed descriptor, folds each status into its operation, and answers once
//!   the operation's SIGNAL is reaped: `Ok`, or [`Failure::Faulted`] with the first failed
//!   descriptor's completion code ([`from_code`](crate::CompletionError::from_code) decodes
//!   it: a kernel that faulted is `KernelFailed`, `0x107`).
//! - **Host progress.** An operation that retires on the host (a barrier, a host function, one
//!   failed by its waits) moves its queue's slot with the model's host write
//!   ([`DeviceModel::signal_from_host`]); the layer guarantees nothing of the queue is on the
//!   ring then, so the host is the slot's only writer.
//! - **Backpressure.** An operation whose descriptors do not fit the ring's free slots is
//!   [`Issued::Busy`]; the interrupt thread's wake when the head moves makes the layer poll
//!   (which reaps, freeing slots) and issue it again. Nothing is dropped.
//! - **Lost device.** A model that fails to start or a ring the device refuses marks the
//!   device lost: every operation then fails with [`Failure::DeviceLost`].
//! - **Shutdown.** [`Backend::stop`] stops every ring (an engine finishes the descriptor it
//!   runs and consumes no more) and ends the interrupt threads. The engines end when the model
//!   is dropped with the backend, which joins them — so `stop` first waits, within its
//!   deadline, for every EXEC running a kernel of this backend to return, and answers `false`
//!   (the device keeps its state alive rather than blocking on the join) when one has not: a
//!   kernel that never returns costs memory, never a hung shutdown.
//!
//! # The interrupt thread
//!
//! ```text
//!          ┌─────────────────────────────── wake queue ◄── yes ──┐
//!          ▼                                                     │
//!   arm (acknowledge ← status; SeqCst fence) ──► head moved past what was reported?
//!          ▲                                                     │ no
//!          │                                                     ▼
//!   woken (status ≠ seen) ◄── sleep while status = seen ◄── no ── stopping? ── yes ──► end
//! ```
//!
//! The producer's interrupt protocol ([`producer`](crate::producer#the-interrupt-wait)) makes
//! the re-check after arming see every completion the device did not raise an interrupt for,
//! so no completion goes unreported. The thread reads the **head** (written after the
//! descriptor's status and the completion timeline), so a poll woken by it reaps at least what
//! it saw. Waking is cheap and may be spurious: the layer polls and finds nothing new.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use causeway_core::executor::Futex;
use causeway_core::queue::Resolution;
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::Mutex;
#[cfg(doc)]
use causeway_device::Work;
use causeway_device::{
    Backend, BackendCapabilities, CommandBufferId, DeviceContext, DriverError, Issue, Issued,
    Kernel, OpStatus, QueueConfig, QueueId, Recorded, MAX_WAITS,
};
use causeway_driver_cpu::DeviceKernel;
use causeway_platform_linux::HostFutex;
use heapless::Vec as FixedVec;

use crate::descriptor::{Command, CompletionStatus, Descriptor, RawDescriptor, EXEC_ARGUMENTS};
use crate::model::{
    DeviceModel, ExecKernel, HostRing, KernelTable, ModelConfig, ModelRegisters, TileKernel,
};
use crate::producer::Reaped;
use crate::registers::{Register, RegisterIo};
use crate::ring::MAX_RING_ORDER;

/// The platform futex. On Linux it is the kernel's, keyed by the word's address, so the
/// interrupt thread's waits meet the model's wakes on the same register word.
static FUTEX: HostFutex = HostFutex::new();

/// How long the interrupt thread sleeps at most. Elsewhere the platform futex is an emulation
/// whose wait queues belong to each instance, so the model's wakes (on its own instance) never
/// reach this one: the thread then looks again every millisecond rather than sleep through a
/// completion, until the model exposes a wait on its interrupt line.
const INTERRUPT_WAIT: Option<Duration> =
    if cfg!(target_os = "linux") { None } else { Some(Duration::from_millis(1)) };

/// Ring order of [`NpuBackend::new`]: 256 slots per ring.
pub const DEFAULT_RING_ORDER: u32 = 8;

/// Most EXECs (regions) one command buffer holds: the ring must take an operation's WAITs,
/// EXECs and SIGNAL at once, so this is what the smallest ring leaves after [`MAX_WAITS`] WAITs
/// and one SIGNAL.
pub const MAX_REGIONS: usize = 16;

/// Smallest ring order: a ring that holds the largest operation.
pub const MIN_RING_ORDER: u32 = 5;

/// Descriptors of the largest operation.
const MAX_DESCRIPTORS: usize = MAX_WAITS + MAX_REGIONS + 1;

const _: () = assert!(MAX_DESCRIPTORS <= 1 << MIN_RING_ORDER);

/// The model's name for itself, in reports.
pub const ADAPTER: &str = "causeway software NPU model";

/// Why the NPU driver refused a configuration or a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NpuError {
    /// The ring order is outside [`MIN_RING_ORDER`]`..=`[`MAX_RING_ORDER`].
    RingOrder(u32),
    /// A command buffer with no region, or more than [`MAX_REGIONS`].
    Regions(usize),
    /// More command buffers or kernels than a 32-bit index names.
    TooManyCommandBuffers,
    /// More queues than a 32-bit ring index names.
    TooManyQueues,
}

impl fmt::Display for NpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpuError::RingOrder(order) => {
                write!(f, "ring order {order} is outside {MIN_RING_ORDER}..={MAX_RING_ORDER}")
            }
            NpuError::Regions(regions) => {
                write!(f, "{regions} regions (a command buffer holds 1..={MAX_REGIONS})")
            }
            NpuError::TooManyCommandBuffers => f.write_str("too many command buffers"),
            NpuError::TooManyQueues => f.write_str("too many queues"),
        }
    }
}

impl std::error::Error for NpuError {}

/// A recorded region's kernel, counting the EXECs that run it: `running` is raised before its
/// first tile and lowered after its last (or when a tile panics, which ends the EXEC), so
/// [`Backend::stop`] can tell whether an engine may still be inside a kernel. An EXEC with
/// another tile count (written with [`NpuBackend::raw_command`]) is counted from its tile 0 to
/// the recorded last tile: one with fewer tiles leaves the count raised, and shutdown then
/// keeps the device's state rather than risk joining a running kernel.
struct CountedKernel {
    kernel: TileKernel,
    tiles: u32,
    running: Arc<AtomicUsize>,
}

/// Lowers the running count when the EXEC's last tile returns or any tile unwinds.
struct EndOfExec<'a> {
    running: &'a AtomicUsize,
    last_tile: bool,
}

impl Drop for EndOfExec<'_> {
    fn drop(&mut self) {
        if self.last_tile || std::thread::panicking() {
            // Release: pairs with the acquire load in `stop`, which then knows the kernel has
            // returned.
            self.running.fetch_sub(1, Ordering::Release);
        }
    }
}

impl ExecKernel for CountedKernel {
    fn run(&self, arguments: &[u32; EXEC_ARGUMENTS], tile: u32) {
        if tile == 0 {
            // A count only: `stop` learns nothing else through it on the way up.
            self.running.fetch_add(1, Ordering::Relaxed);
        }
        let _end = EndOfExec { running: &self.running, last_tile: tile + 1 >= self.tiles };
        self.kernel.run(arguments, tile);
    }
}

/// What an operation's EXEC part is.
#[derive(Debug)]
enum Program {
    /// One EXEC per region: `(kernel index, tiles)`.
    Regions(Box<[(u32, u32)]>),
    /// A descriptor as the caller wrote it (fault injection, descriptors built elsewhere).
    Raw(RawDescriptor),
}

/// What the driver emitted for the operations it issued (see [`NpuTally`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NpuCounts {
    /// WAIT descriptors emitted: one per device-wait resolution, on this driver's queues'
    /// progress slots or on mirrors of other drivers' queues.
    pub emitted: u64,
    /// Of [`emitted`](Self::emitted), the WAITs on a mirror slot: a word the host writes as
    /// another driver's queue (a CPU queue) ends its operations
    /// ([`Backend::mirror_progress`]).
    pub host_written: u64,
    /// Waits that emitted nothing because causeway resolved them elided or satisfied.
    pub elided: u64,
    /// Waits that emitted nothing because the device layer held the operation until they were
    /// reached (a wait on a value whose signal was not submitted yet, or on one with no
    /// tracked origin).
    pub held: u64,
    /// Issues answered [`Issued::Busy`] because the ring had no room for the operation's
    /// descriptors (backpressure; the operation was issued again later).
    pub ring_full: u64,
}

#[derive(Debug, Default)]
struct Counters {
    emitted: AtomicU64,
    host_written: AtomicU64,
    elided: AtomicU64,
    held: AtomicU64,
    ring_full: AtomicU64,
}

/// A handle on an [`NpuBackend`]'s wait counts that outlives handing the backend to a device.
#[derive(Clone, Debug, Default)]
pub struct NpuTally(Arc<Counters>);

impl NpuTally {
    /// The counts so far.
    pub fn counts(&self) -> NpuCounts {
        // Counters only: nothing is published through them.
        NpuCounts {
            emitted: self.0.emitted.load(Ordering::Relaxed),
            host_written: self.0.host_written.load(Ordering::Relaxed),
            elided: self.0.elided.load(Ordering::Relaxed),
            held: self.0.held.load(Ordering::Relaxed),
            ring_full: self.0.ring_full.load(Ordering::Relaxed),
        }
    }
}

/// An issued operation whose SIGNAL has not been polled out yet.
#[derive(Debug)]
struct InFlight {
    epoch: u64,
    /// Ring sequence number of its SIGNAL, its last descriptor.
    last: u64,
    /// The completion code of its first failed descriptor.
    failure: Option<u32>,
    /// Every descriptor of it has been reaped.
    ended: bool,
}

/// The host's end of one ring and the operations on it, behind the ring's lock.
#[derive(Debug)]
struct RingState {
    host: HostRing<'static>,
    in_flight: VecDeque<InFlight>,
    /// Operations at the front of `in_flight` that have ended.
    ended: usize,
}

impl RingState {
    /// Reaps every completed descriptor into the operation it belongs to.
    fn reap(&mut self) {
        while let Some(Reaped { sequence, status }) = self.host.producer().reap() {
            let Some(op) = self.in_flight.get_mut(self.ended) else { continue };
            let failure = match status {
                Ok(CompletionStatus::Completed) => None,
                Ok(CompletionStatus::Failed(error)) => Some(error.failure_code()),
                // A pending status below the head, or a word no status stands for: device
                // memory is outside input, and either means the descriptor did not do its work.
                Ok(CompletionStatus::Pending) => Some(CompletionStatus::Pending.to_word()),
                Err(unknown) => Some(unknown.0),
            };
            op.failure = op.failure.or(failure);
            if sequence >= op.last {
                op.ended = true;
                self.ended += 1;
            }
        }
    }
}

/// One ring of the model and the causeway queue it serves.
struct Ring {
    queue: QueueId,
    state: Mutex<RingState>,
    registers: &'static ModelRegisters,
    /// The head register when the ring started, before anything was published: the interrupt
    /// thread reports every move past it.
    started_head: u32,
}

/// An NPU queue: the ring (and engine) of the model that runs it.
#[derive(Debug)]
pub struct NpuQueue {
    ring: u32,
}

/// The NPU driver: register it with [`DeviceBuilder::driver`] after recording its command
/// buffers. The software device starts with the device, with one engine (ring) per queue of
/// this driver.
///
/// [`DeviceBuilder::driver`]: causeway_device::DeviceBuilder::driver
pub struct NpuBackend {
    ring_order: u32,
    programs: Recorded<Program>,
    /// The model's kernel table (EXEC's kernel index selects one), filled as command buffers
    /// are recorded, before the model starts and while it runs.
    kernels: Arc<KernelTable>,
    /// By causeway queue index: its ring, `None` for other drivers' queues.
    ring_of: Vec<Option<u32>>,
    /// By ring: its causeway queue.
    queue_of: Vec<QueueId>,
    /// Queues of the device, every driver's (known at start): one mirror slot each.
    device_queues: OnceLock<usize>,
    rings: OnceLock<Box<[Ring]>>,
    model: OnceLock<DeviceModel>,
    interrupts: Mutex<Vec<JoinHandle<()>>>,
    /// EXECs inside a kernel of this backend (see [`CountedKernel`]).
    running_kernels: Arc<AtomicUsize>,
    stopping: AtomicBool,
    lost: AtomicBool,
    tally: NpuTally,
}

impl NpuBackend {
    /// A backend whose rings hold 2^[`DEFAULT_RING_ORDER`] descriptors, with no command buffers
    /// yet.
    pub fn new() -> NpuBackend {
        NpuBackend {
            ring_order: DEFAULT_RING_ORDER,
            programs: Recorded::new(),
            kernels: Arc::new(KernelTable::new()),
            ring_of: Vec::new(),
            queue_of: Vec::new(),
            device_queues: OnceLock::new(),
            rings: OnceLock::new(),
            model: OnceLock::new(),
            interrupts: Mutex::new(Vec::new()),
            running_kernels: Arc::new(AtomicUsize::new(0)),
            stopping: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            tally: NpuTally::default(),
        }
    }

    /// This backend with rings of 2^`order` descriptors.
    pub fn with_ring_order(self, order: u32) -> Result<NpuBackend, NpuError> {
        if !(MIN_RING_ORDER..=MAX_RING_ORDER).contains(&order) {
            return Err(NpuError::RingOrder(order));
        }
        Ok(NpuBackend { ring_order: order, ..self })
    }

    /// The device's name, for reports.
    pub fn adapter(&self) -> &'static str {
        ADAPTER
    }

    /// A handle on the wait counts, to read after the backend went to a device.
    pub fn tally(&self) -> NpuTally {
        self.tally.clone()
    }

    /// Records a command buffer for [`Work::Execute`] on this driver's queues: one EXEC per
    /// `(tiles, kernel)` region, run in order by the queue's engine (each region's tiles in
    /// order, after the previous region's). The kernels are the CPU driver's.
    ///
    /// Before the device is built or while it runs (through
    /// [`Device::backend`](causeway_device::Device::backend)), from any thread: the kernels are
    /// loaded into the device's table first, so the id is usable as soon as this returns.
    pub fn command_buffer(
        &self,
        regions: Vec<(u32, DeviceKernel)>,
    ) -> Result<CommandBufferId, NpuError> {
        if regions.is_empty() || regions.len() > MAX_REGIONS {
            return Err(NpuError::Regions(regions.len()));
        }
        let tiles: Vec<u32> = regions.iter().map(|&(tiles, _)| tiles).collect();
        let kernels: Vec<Box<dyn ExecKernel>> = regions
            .into_iter()
            .map(|(tiles, kernel)| {
                let running = Arc::clone(&self.running_kernels);
                Box::new(CountedKernel { kernel: TileKernel(kernel), tiles, running })
                    as Box<dyn ExecKernel>
            })
            .collect();
        let loaded = self.kernels.push_all(kernels).map_err(|_| NpuError::TooManyCommandBuffers)?;
        let execs = loaded.zip(tiles).collect();
        self.record(Program::Regions(execs))
    }

    /// Records a command buffer whose work is `raw`, pushed as it is: any bit pattern,
    /// well-formed or not — an EXEC of a kernel the device has not got, a malformed descriptor —
    /// which the device judges. For fault injection and for descriptors built elsewhere.
    pub fn raw_command(&self, raw: RawDescriptor) -> Result<CommandBufferId, NpuError> {
        self.record(Program::Raw(raw))
    }

    fn record(&self, program: Program) -> Result<CommandBufferId, NpuError> {
        self.programs
            .push(program, |_| {})
            .map(CommandBufferId)
            .map_err(|_| NpuError::TooManyCommandBuffers)
    }

    /// The program `buffer` names: one this backend recorded (the layer hands a driver only
    /// buffers below its [`command_buffers`](Backend::command_buffers)).
    fn program(&self, buffer: CommandBufferId) -> Option<&Program> {
        self.programs.get(buffer.0)
    }

    /// `queue`'s ring; `None` when the model did not start (the device is lost).
    fn ring(&self, queue: &NpuQueue) -> Option<&Ring> {
        self.rings.get()?.get(queue.ring as usize)
    }

    /// The semaphore slot mirroring the progress of `queue`, another driver's queue: the
    /// slots after the rings' progress slots, one per queue of the device. `None` for a queue
    /// the device does not have.
    fn mirror_slot(&self, queue: QueueId) -> Option<u32> {
        let queues = *self.device_queues.get()?;
        let rings = self.queue_of.len();
        (queue.index() < queues).then(|| u32::try_from(rings + queue.index()).ok()).flatten()
    }

    fn lose(&self) -> OpStatus {
        // A flag only: what the device did is read back through the ring, not through it.
        self.lost.store(true, Ordering::Relaxed);
        OpStatus::Failed(Failure::DeviceLost)
    }

    /// The descriptors of `issue`'s operation on the ring of slot `slot`; `None` when the
    /// layer handed the driver a wait it cannot order natively (it never does).
    fn descriptors(
        &self,
        issue: &Issue<'_>,
        slot: u32,
        program: &Program,
    ) -> Option<(FixedVec<RawDescriptor, MAX_DESCRIPTORS>, NpuCounts)> {
        let mut descriptors = FixedVec::new();
        let mut counts = NpuCounts { elided: issue.elided_waits() as u64, ..NpuCounts::default() };
        for wait in issue.waits() {
            match (wait.resolution, wait.origin) {
                (Resolution::DeviceWait, Some(origin)) => {
                    let origin_slot =
                        match self.ring_of.get(origin.queue.index()).copied().flatten() {
                            Some(progress) => progress,
                            None => {
                                counts.host_written += 1;
                                self.mirror_slot(origin.queue)?
                            }
                        };
                    let command = Command::Wait { slot: origin_slot, value: origin.epoch };
                    chain(&mut descriptors, Descriptor::new(command))?;
                    counts.emitted += 1;
                }
                (Resolution::Held, _) => counts.held += 1,
                _ => return None,
            }
        }
        match program {
            Program::Regions(execs) => {
                // The submission's arguments ride in every EXEC of the buffer, through the
                // ring, to the kernels (see `TileKernel`).
                let arguments = issue.args().words();
                for &(kernel, tiles) in execs.iter() {
                    chain(
                        &mut descriptors,
                        Descriptor::new(Command::Exec { kernel, tiles, arguments }),
                    )?;
                }
            }
            Program::Raw(raw) => descriptors.push(*raw).ok()?,
        }
        // Unchained: the queue's progress moves whether or not the work succeeded (see the
        // module documentation).
        let signal = Descriptor::new(Command::Signal { slot, value: issue.epoch() });
        descriptors.push(signal.encode()).ok()?;
        Some((descriptors, counts))
    }

    /// Starts the model with one engine per ring and the host's end of each ring, and a
    /// semaphore slot per ring (its progress) and per queue of the device (its mirror).
    fn start_model(&'static self, device_queues: usize) -> Option<&'static [Ring]> {
        let slots = u32::try_from(self.queue_of.len().checked_add(device_queues)?).ok()?;
        let config = ModelConfig {
            engines: self.queue_of.len(),
            ring_order: self.ring_order,
            semaphore_slots: slots,
        };
        let model = DeviceModel::start(config, Arc::clone(&self.kernels)).ok()?;
        let model = self.model.get_or_init(|| model);
        let mut started = Vec::with_capacity(self.queue_of.len());
        for (index, &queue) in self.queue_of.iter().enumerate() {
            let registers = model.registers(index)?;
            let started_head = registers.read(Register::Head);
            let host = model.ring(index).ok()?;
            started.push(Ring {
                queue,
                state: Mutex::new(RingState {
                    host,
                    in_flight: VecDeque::with_capacity(1 << self.ring_order),
                    ended: 0,
                }),
                registers,
                started_head,
            });
        }
        Some(self.rings.get_or_init(|| started.into_boxed_slice()))
    }

    /// The interrupt thread of `ring` (see [the module documentation](self#the-interrupt-thread)).
    fn watch_interrupts(&self, ring: &Ring, device: DeviceContext) {
        let status = ring.registers.word(Register::InterruptStatus);
        // Not the head now: the thread may start after the device completed work, which it
        // must still report.
        let mut reported = ring.started_head;
        loop {
            let (armed, fault) = {
                let mut state = ring.state.lock();
                let producer = state.host.producer();
                (producer.arm_interrupt(), producer.fault())
            };
            if fault.is_some() && !self.lost.swap(true, Ordering::Relaxed) {
                device.wake(ring.queue);
            }
            // Read after the arm's SeqCst fence: a completion the device raised no interrupt for
            // is visible here (the producer's interrupt protocol).
            let head = ring.registers.read(Register::Head);
            if head != reported {
                reported = head;
                device.wake(ring.queue);
                continue;
            }
            // Acquire: pairs with the release store in `stop`.
            if self.stopping.load(Ordering::Acquire) {
                return;
            }
            FUTEX.wait(status, armed.seen(), INTERRUPT_WAIT);
        }
    }
}

/// Appends `descriptor` to an operation's descriptors: the first heads the operation's chain,
/// the rest are chained to it. `None` when they are full.
fn chain(
    descriptors: &mut FixedVec<RawDescriptor, MAX_DESCRIPTORS>,
    descriptor: Descriptor,
) -> Option<()> {
    let descriptor = if descriptors.is_empty() { descriptor } else { descriptor.chained() };
    descriptors.push(descriptor.encode()).ok()
}

impl Default for NpuBackend {
    fn default() -> NpuBackend {
        NpuBackend::new()
    }
}

impl fmt::Debug for NpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NpuBackend")
            .field("ring_order", &self.ring_order)
            .field("command_buffers", &self.programs.len())
            .field("queues", &self.queue_of.len())
            .finish_non_exhaustive()
    }
}

impl Backend for NpuBackend {
    type Queue = NpuQueue;

    fn name(&self) -> &'static str {
        "npu"
    }

    /// WAIT descriptors stall the queue's whole ring: a wait whose signal is not submitted yet
    /// would hold up everything behind it, so the layer holds such waits instead. A WAIT may
    /// be on any semaphore slot, the host writes slots too ([`DeviceModel::signal_from_host`]),
    /// so waits on other drivers' queues are WAITs on mirror slots.
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(false).with_host_written_waits()
    }

    fn command_buffers(&self) -> u32 {
        // `record` refuses a buffer past `u32::MAX`.
        self.programs.len()
    }

    /// The [`NpuCounts`], by field name.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let counts = self.tally.counts();
        vec![
            ("waits_emitted", counts.emitted),
            ("waits_host_written", counts.host_written),
            ("waits_elided", counts.elided),
            ("waits_held", counts.held),
            ("ring_full", counts.ring_full),
        ]
    }

    fn open_queue(
        &mut self,
        queue: QueueId,
        _config: &QueueConfig,
    ) -> Result<NpuQueue, DriverError> {
        let ring = u32::try_from(self.queue_of.len())
            .map_err(|_| DriverError::new("npu", NpuError::TooManyQueues))?;
        if self.ring_of.len() <= queue.index() {
            self.ring_of.resize(queue.index() + 1, None);
        }
        self.ring_of[queue.index()] = Some(ring);
        self.queue_of.push(queue);
        Ok(NpuQueue { ring })
    }

    fn start(&'static self, device: DeviceContext) {
        if self.queue_of.is_empty() {
            return;
        }
        let _ = self.device_queues.set(device.queues());
        let Some(rings) = self.start_model(device.queues()) else {
            self.lost.store(true, Ordering::Relaxed);
            return;
        };
        let mut interrupts = self.interrupts.lock();
        for (index, ring) in rings.iter().enumerate() {
            let spawned = std::thread::Builder::new()
                .name(format!("npu-interrupt-{index}"))
                .spawn(move || self.watch_interrupts(ring, device));
            match spawned {
                Ok(thread) => interrupts.push(thread),
                // Nothing would report this ring's completions.
                Err(_) => self.lost.store(true, Ordering::Relaxed),
            }
        }
    }

    fn issue(&'static self, queue: &'static NpuQueue, issue: &mut Issue<'_>) -> Issued {
        // Command buffers are the only kernels it declares (no timed kernels): the layer
        // refuses the others at submission.
        let Kernel::Execute(buffer) = issue.kernel() else {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        };
        let Some(ring) = self.ring(queue).filter(|_| !self.lost.load(Ordering::Relaxed)) else {
            return Issued::Finished(OpStatus::Failed(Failure::DeviceLost));
        };
        // The layer counted the buffer, so it is recorded (see `Recorded`); should that ever not
        // hold, the operation fails rather than the worker.
        let Some(program) = self.program(buffer) else {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        };
        let Some((descriptors, counts)) = self.descriptors(issue, queue.ring, program) else {
            // A wait the ring cannot order (the layer never hands one over). The operation's
            // SIGNAL would never move the queue's progress slot, stalling every later WAIT on
            // it, so the device is lost rather than left to hang.
            return Issued::Finished(self.lose());
        };
        let mut state = ring.state.lock();
        state.reap();
        if (state.host.producer().indices().free() as usize) < descriptors.len() {
            // The interrupt thread wakes the queue when the head moves; its next issue reaps.
            self.tally.0.ring_full.fetch_add(1, Ordering::Relaxed);
            return Issued::Busy;
        }
        let mut last = 0;
        for raw in &descriptors {
            match state.host.producer().try_push_raw(raw) {
                Ok(sequence) => last = sequence,
                // Room was checked under the same lock.
                Err(_) => return Issued::Finished(self.lose()),
            }
        }
        state.host.producer().publish();
        state.in_flight.push_back(InFlight {
            epoch: issue.epoch(),
            last,
            failure: None,
            ended: false,
        });
        drop(state);
        let tally = &self.tally.0;
        tally.emitted.fetch_add(counts.emitted, Ordering::Relaxed);
        tally.host_written.fetch_add(counts.host_written, Ordering::Relaxed);
        tally.elided.fetch_add(counts.elided, Ordering::Relaxed);
        tally.held.fetch_add(counts.held, Ordering::Relaxed);
        Issued::Pending
    }

    fn poll(
        &'static self,
        queue: &'static NpuQueue,
        epoch: u64,
        _kernel: Kernel,
    ) -> Option<OpStatus> {
        let Some(ring) = self.ring(queue).filter(|_| !self.lost.load(Ordering::Relaxed)) else {
            return Some(OpStatus::Failed(Failure::DeviceLost));
        };
        let mut state = ring.state.lock();
        state.reap();
        match state.in_flight.front() {
            Some(op) if op.epoch == epoch && op.ended => {}
            Some(op) if op.epoch == epoch => return None,
            // The layer polls in issue order: anything else is a broken contract.
            _ => return Some(OpStatus::Failed(Failure::Aborted)),
        }
        let op = state.in_flight.pop_front()?;
        state.ended -= 1;
        Some(op.failure.map_or(OpStatus::Ok, |code| OpStatus::Failed(Failure::Faulted(code))))
    }

    fn completed_on_host(&'static self, queue: &'static NpuQueue, epoch: u64) {
        let Some(model) = self.model.get() else { return };
        if !model.signal_from_host(queue.ring, epoch) {
            self.lost.store(true, Ordering::Relaxed);
        }
    }

    /// The host write of `origin`'s mirror slot. The layer calls it for one origin in
    /// increasing order and never concurrently, so the host is the slot's only writer, as
    /// [`DeviceModel::signal_from_host`] asks.
    fn mirror_progress(&'static self, origin: QueueId, epoch: u64) {
        let (Some(model), Some(slot)) = (self.model.get(), self.mirror_slot(origin)) else {
            return;
        };
        if !model.signal_from_host(slot, epoch) {
            self.lost.store(true, Ordering::Relaxed);
        }
    }

    fn is_running(&self, queue: &NpuQueue, _kernel: Kernel, _workers_abandoned: bool) -> bool {
        self.ring(queue).is_some_and(|ring| {
            let mut state = ring.state.lock();
            state.reap();
            state.host.producer().indices().in_flight() > 0
        })
    }

    /// Stops every ring (each engine finishes the descriptor it runs and consumes no more),
    /// ends the interrupt threads and waits for kernels still running (see [the module
    /// documentation](self)): `false` when one has not returned by `deadline`.
    fn stop(&self, deadline: Instant) -> bool {
        // Release: pairs with the interrupt threads' acquire load.
        self.stopping.store(true, Ordering::Release);
        for ring in self.rings.get().into_iter().flatten() {
            ring.state.lock().host.producer().stop();
        }
        let mut interrupts = self.interrupts.lock();
        while let Some(thread) = interrupts.pop() {
            // A thread may have checked `stopping` just before it was set and be about to
            // sleep: wake its word until it has ended.
            while !thread.is_finished() {
                for ring in self.rings.get().into_iter().flatten() {
                    FUTEX.wake_all(ring.registers.word(Register::InterruptStatus));
                }
                if Instant::now() >= deadline {
                    interrupts.push(thread);
                    return false;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            // It returned (it contains no user code that could panic).
            let _ = thread.join();
        }
        // Acquire: pairs with `EndOfExec`'s release decrement.
        while self.running_kernels.load(Ordering::Acquire) > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }
}

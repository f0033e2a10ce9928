//! An example causeway driver, written the way an accelerator team would write theirs: outside
//! the tree, against the device layer's published seam (`causeway_device::Backend`) and
//! nothing else, and checked by the conformance suite (`tests/conformance.rs`). The walk-through
//! is `docs/src/writing-a-driver.md`.
//!
//! The device is a software **DMA copy engine**: each causeway queue of this driver is one
//! *channel* of the engine, a FIFO of copy descriptors served by a thread of its own (the
//! engine's "hardware"), which copies bytes between buffers of device memory at a modelled
//! bandwidth, writes a completion record and raises its "interrupt" — a wake of the queue.
//! Everything else an operation needs (its waits, its signals and their frontiers, failure
//! propagation, cancellation, stream-ordered memory, shutdown) is the layer's.
//!
//! ```text
//!  layer: issue ──► channel FIFO ──► engine thread: copy, record status ──► wake(queue)
//!                                                                              │
//!  layer: poll(epoch) ◄── completion record (epoch → Ok / Device(code)) ◄──────┘
//! ```
//!
//! What the driver declares ([`BackendCapabilities`]): no wait before signal (a channel's FIFO
//! is in order, so a wait whose signal is not yet submitted would stall it: the layer holds
//! such waits), no native waits (the engine cannot wait on another channel; the layer holds
//! every wait and issues an operation once its waits are reached), command buffers only (no
//! timed kernels).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, CommandBufferId, DeviceContext, DriverError, Issue, Issued,
    Kernel, OpStatus, QueueConfig, QueueId,
};

/// The engine's completion code for a copy whose destination is shorter than its source: the
/// descriptor is refused and nothing is written.
pub const LENGTH_ERROR: u32 = 0x2;

/// The failure an operation whose copy the engine refused ends with: the engine's code, as
/// every driver reports a device's own status.
pub const COPY_REFUSED: Failure = Failure::Faulted(LENGTH_ERROR);

/// Bytes per second the engine copies at, unless [`DmaBackend::with_bandwidth`] says otherwise.
pub const DEFAULT_BANDWIDTH: u64 = 1 << 30;

/// The shortest copy time the engine models by waiting: a copy the bandwidth says takes less
/// runs at memory speed.
pub const SHORTEST_MODELLED: Duration = Duration::from_millis(1);

/// A buffer of the engine's device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaBuffer(usize);

/// One recorded copy: the whole of `source` into the start of `destination`.
#[derive(Clone, Copy, Debug)]
struct Copy {
    source: DmaBuffer,
    destination: DmaBuffer,
}

/// Why a recording was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DmaError {
    /// No such buffer.
    UnknownBuffer(DmaBuffer),
    /// More buffers or command buffers than a 32-bit index names.
    TooMany,
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DmaError::UnknownBuffer(buffer) => write!(f, "no DMA buffer {}", buffer.0),
            DmaError::TooMany => f.write_str("more than 2^32 buffers or command buffers"),
        }
    }
}

impl std::error::Error for DmaError {}

/// The engine's device memory: every buffer, each behind its own lock (a channel copies
/// between two at once, locking them in index order).
#[derive(Debug, Default)]
struct Memory {
    buffers: Mutex<Vec<Arc<Mutex<Vec<u8>>>>>,
}

impl Memory {
    fn get(&self, buffer: DmaBuffer) -> Option<Arc<Mutex<Vec<u8>>>> {
        lock(&self.buffers).get(buffer.0).cloned()
    }
}

/// Locks `mutex`; the engine runs no user code under a lock, so a poisoned one still holds
/// consistent data.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A descriptor in a channel's FIFO.
#[derive(Clone, Copy, Debug)]
struct Descriptor {
    epoch: u64,
    copy: Copy,
}

/// What a channel's engine thread and the driver share.
#[derive(Debug, Default)]
struct ChannelState {
    fifo: VecDeque<Descriptor>,
    /// Completion records the driver has not yet reported: epoch → the engine's status.
    completed: BTreeMap<u64, Result<(), u32>>,
    /// The last epoch handed to the engine.
    issued: u64,
    /// The last epoch the engine finished.
    finished: u64,
    stopping: bool,
    /// The channel's thread could not be started: nothing will complete its operations.
    engine_lost: bool,
}

/// One channel of the engine: its FIFO, its completion records and its thread.
#[derive(Debug)]
struct Channel {
    queue: QueueId,
    state: Mutex<ChannelState>,
    /// Signalled when a descriptor arrives or the channel stops.
    doorbell: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Channel {
    fn lock(&self) -> MutexGuard<'_, ChannelState> {
        lock(&self.state)
    }

    /// The engine's "hardware": takes descriptors in order, copies, records the status and
    /// raises the interrupt (a wake of the queue) until the channel stops.
    fn run(&self, memory: &Memory, bandwidth: u64, device: DeviceContext) {
        let mut state = self.lock();
        loop {
            let Some(descriptor) = state.fifo.pop_front() else {
                if state.stopping {
                    return;
                }
                state = self.doorbell.wait(state).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            drop(state);
            let status = copy(memory, descriptor.copy, bandwidth);
            // The completion record first, then the interrupt: the layer's poll after the wake
            // finds it.
            state = self.lock();
            state.completed.insert(descriptor.epoch, status);
            state.finished = descriptor.epoch;
            drop(state);
            device.wake(self.queue);
            state = self.lock();
        }
    }
}

/// Runs one copy at the modelled bandwidth: the engine's status.
fn copy(memory: &Memory, copy: Copy, bandwidth: u64) -> Result<(), u32> {
    let started = Instant::now();
    // Recorded copies name buffers that exist (`DmaBackend::copy` checks), and buffers are
    // never freed.
    let (Some(source), Some(destination)) = (memory.get(copy.source), memory.get(copy.destination))
    else {
        return Err(LENGTH_ERROR);
    };
    let bytes = if Arc::ptr_eq(&source, &destination) {
        lock(&source).len()
    } else {
        // In index order, so two channels copying in opposite directions cannot deadlock.
        let (from, mut to) = if copy.source.0 < copy.destination.0 {
            let from = lock(&source);
            (from, lock(&destination))
        } else {
            let to = lock(&destination);
            (lock(&source), to)
        };
        if to.len() < from.len() {
            return Err(LENGTH_ERROR);
        }
        let length = from.len();
        to[..length].copy_from_slice(&from);
        length
    };
    let modelled = Duration::from_secs_f64(bytes as f64 / bandwidth as f64);
    // A sleep under `SHORTEST_MODELLED` costs more than it models (the timer's slack alone is
    // tens of microseconds): a short copy runs at memory speed.
    let left = modelled.checked_sub(started.elapsed());
    if let Some(left) = left.filter(|&left| left >= SHORTEST_MODELLED) {
        thread::sleep(left);
    }
    Ok(())
}

/// A queue of this driver: its channel of the engine.
#[derive(Debug)]
pub struct DmaQueue {
    channel: Arc<Channel>,
}

/// The DMA engine driver: allocate its buffers, record its copies, register it with
/// `DeviceBuilder::driver`.
pub struct DmaBackend {
    memory: Arc<Memory>,
    copies: Vec<Copy>,
    bandwidth: u64,
    channels: Vec<Arc<Channel>>,
}

impl DmaBackend {
    /// An engine with no buffers and no copies, copying at [`DEFAULT_BANDWIDTH`].
    pub fn new() -> DmaBackend {
        DmaBackend {
            memory: Arc::new(Memory::default()),
            copies: Vec::new(),
            bandwidth: DEFAULT_BANDWIDTH,
            channels: Vec::new(),
        }
    }

    /// This engine, copying at `bytes_per_second` (at least one).
    pub fn with_bandwidth(self, bytes_per_second: u64) -> DmaBackend {
        DmaBackend { bandwidth: bytes_per_second.max(1), ..self }
    }

    /// A buffer of device memory holding `contents`.
    pub fn buffer(&mut self, contents: Vec<u8>) -> Result<DmaBuffer, DmaError> {
        let mut buffers = lock(&self.memory.buffers);
        u32::try_from(buffers.len()).map_err(|_| DmaError::TooMany)?;
        buffers.push(Arc::new(Mutex::new(contents)));
        Ok(DmaBuffer(buffers.len() - 1))
    }

    /// Records a command buffer that copies the whole of `source` into the start of
    /// `destination`. A destination shorter than its source is recorded: the engine refuses
    /// it when it runs, and the operation fails with [`COPY_REFUSED`].
    pub fn copy(
        &mut self,
        source: DmaBuffer,
        destination: DmaBuffer,
    ) -> Result<CommandBufferId, DmaError> {
        for buffer in [source, destination] {
            if self.memory.get(buffer).is_none() {
                return Err(DmaError::UnknownBuffer(buffer));
            }
        }
        let id = u32::try_from(self.copies.len()).map_err(|_| DmaError::TooMany)?;
        self.copies.push(Copy { source, destination });
        Ok(CommandBufferId(id))
    }

    /// A handle on the engine's memory, to read buffers back from the host once the backend
    /// went to a device.
    pub fn memory(&self) -> DmaMemory {
        DmaMemory(Arc::clone(&self.memory))
    }
}

impl Default for DmaBackend {
    fn default() -> DmaBackend {
        DmaBackend::new()
    }
}

impl fmt::Debug for DmaBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmaBackend")
            .field("copies", &self.copies.len())
            .field("channels", &self.channels.len())
            .field("bandwidth", &self.bandwidth)
            .finish_non_exhaustive()
    }
}

/// The engine's device memory, readable from the host.
#[derive(Clone, Debug)]
pub struct DmaMemory(Arc<Memory>);

impl DmaMemory {
    /// A copy of `buffer`'s bytes; `None` for an unknown buffer.
    pub fn read(&self, buffer: DmaBuffer) -> Option<Vec<u8>> {
        let bytes = self.0.get(buffer)?;
        let contents = lock(&bytes).clone();
        Some(contents)
    }
}

impl Backend for DmaBackend {
    type Queue = DmaQueue;

    fn name(&self) -> &'static str {
        "dma"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(false)
    }

    fn command_buffers(&self) -> u32 {
        // `copy` numbers them with `u32`s.
        self.copies.len() as u32
    }

    fn open_queue(&mut self, queue: QueueId, _: &QueueConfig) -> Result<DmaQueue, DriverError> {
        let channel = Arc::new(Channel {
            queue,
            state: Mutex::new(ChannelState::default()),
            doorbell: Condvar::new(),
            thread: Mutex::new(None),
        });
        self.channels.push(Arc::clone(&channel));
        Ok(DmaQueue { channel })
    }

    /// Starts one engine thread per channel.
    fn start(&'static self, device: DeviceContext) {
        for channel in &self.channels {
            let (engine, memory) = (Arc::clone(channel), Arc::clone(&self.memory));
            let bandwidth = self.bandwidth;
            let spawned = thread::Builder::new()
                .name(format!("dma-channel-{}", channel.queue.index()))
                .spawn(move || engine.run(&memory, bandwidth, device));
            match spawned {
                Ok(thread) => *lock(&channel.thread) = Some(thread),
                // Nothing will complete this channel's operations: they fail when polled.
                Err(_) => channel.lock().engine_lost = true,
            }
        }
    }

    fn issue(&'static self, queue: &'static DmaQueue, issue: &mut Issue<'_>) -> Issued {
        // Command buffers are the only kernels it declares: the layer refuses the others.
        let Kernel::Execute(buffer) = issue.kernel() else {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        };
        let copy = self.copies[buffer.0 as usize];
        let channel = &queue.channel;
        let mut state = channel.lock();
        state.fifo.push_back(Descriptor { epoch: issue.epoch(), copy });
        state.issued = issue.epoch();
        drop(state);
        channel.doorbell.notify_one();
        Issued::Pending
    }

    fn poll(&'static self, queue: &'static DmaQueue, epoch: u64, _: Kernel) -> Option<OpStatus> {
        let channel = &queue.channel;
        let mut state = channel.lock();
        match state.completed.remove(&epoch) {
            Some(Ok(())) => Some(OpStatus::Ok),
            // The engine's own code, as the device reported it.
            Some(Err(code)) => Some(OpStatus::Failed(Failure::Faulted(code))),
            // Without its thread nothing will complete it: the device is lost for it.
            None => state.engine_lost.then_some(OpStatus::Failed(Failure::DeviceLost)),
        }
    }

    fn is_running(&self, queue: &DmaQueue, _: Kernel, _: bool) -> bool {
        let state = queue.channel.lock();
        state.finished < state.issued
    }

    /// Stops every channel once its FIFO is empty and joins its thread, within `deadline`.
    fn stop(&self, deadline: Instant) -> bool {
        for channel in &self.channels {
            channel.lock().stopping = true;
            channel.doorbell.notify_all();
        }
        self.channels.iter().all(|channel| {
            let mut thread = lock(&channel.thread);
            let Some(running) = thread.take() else { return true };
            while !running.is_finished() {
                if Instant::now() >= deadline {
                    *thread = Some(running);
                    return false;
                }
                thread::sleep(Duration::from_millis(1));
            }
            running.join().is_ok()
        })
    }
}

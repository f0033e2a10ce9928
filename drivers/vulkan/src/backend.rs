//! The Vulkan driver's [`Backend`]: causeway queues as timelines on VkQueues, device waits as
//! native timeline waits in `vkQueueSubmit2`, completion through the one watcher thread.
//!
//! Each causeway queue of this driver has a [`Timeline`] whose value is the epoch of its last
//! completed operation, and is mapped onto one VkQueue (round robin over the device's queues;
//! lavapipe has one, so they all share it). Issuing operation `e` of queue `q` is one
//! [`submit`](crate::submit()): the command buffer, a native wait `(timeline of o.queue) ≥ o.epoch` for each
//! device wait's origin `o`, and the signal `(timeline of q) = e`. The device layer issues
//! operations ahead of completion ([`BackendCapabilities::native_waits`]) but never before
//! their origins, so no batch on a shared in-order VkQueue waits for one queued behind it.
//! Elided and satisfied waits emit nothing; held waits (on other drivers' work, or on values
//! not yet submitted) are reached before issue and emit nothing either. So the native waits
//! [`Gpu::native_waits`] counts are exactly the device-wait resolutions of the issued
//! operations.
//!
//! Each command buffer begins with a barrier after every compute and copy write submitted
//! before it on its VkQueue, so one causeway queue's operations run in order on the device
//! (the queue clock's elision of same-queue waits relies on it).
//!
//! Completion: every submission goes through the [`Watcher`], which follows it until it
//! completes. When the layer polls a queue whose head has not completed, the backend registers
//! `(timeline, epoch)` with it (at most one registration per queue), and its thread wakes the
//! queue when the timeline gets there — not at once, but when the watcher next wakes: it lets
//! completions batch unless a value is needed. A queue that finds the command buffer it must
//! submit still pending ([`Issued::Busy`]) records that buffer's pending signal as needed
//! ([`Watcher::need`]), so the watcher wakes when it completes, and the release of the buffer
//! wakes the queue. An operation that retires on the host (a
//! barrier, a host function, one failed by its waits) moves the queue's timeline with a host
//! signal ([`Backend::completed_on_host`]): nothing later of that queue is on the device then.
//!
//! Stream-ordered memory ([`Backend::memory`]): an alloca that runs on one of this driver's
//! queues gets real device memory — a storage buffer bound to `VkDeviceMemory` of its own. The
//! layer decides which block an alloca gets; the backend keeps a block's memory across its
//! dealloca while the layer may hand the block on (so an alloca the layer lets reuse a dead
//! block gets the same memory, with no new allocation), and frees it when the layer lets the
//! block go. Memory Vulkan cannot give (`VK_ERROR_OUT_OF_DEVICE_MEMORY`, or a request larger
//! than the heap) fails the alloca with [`Failure::OutOfMemory`]; the device stays usable.
//!
//! Errors: a failed submission, a failed wait of the watcher or a failed timeline query marks
//! the device lost. The operation whose submission failed fails with what Vulkan said
//! ([`Failure::OutOfMemory`] for running out of memory, [`Failure::DeviceLost`] otherwise);
//! from then on every operation — pending or issued later — fails with
//! [`Failure::DeviceLost`], and the layer fails what waits on them on every driver. A failed
//! submission leaves its queue's timeline expecting a signal the device will never make, so the
//! driver cannot go on even where Vulkan could. Work already on a lost device is not waited for
//! past the shutdown's bound.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use causeway_core::queue::Resolution;
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::Mutex;
#[cfg(doc)]
use causeway_device::Work;
use causeway_device::{
    Backend, BackendCapabilities, CommandBufferId, DeviceContext, DriverError, Issue, Issued,
    Kernel, MemoryOp, NativeBlocks, OpStatus, QueueConfig, QueueId, QueueWaiters, Recorded,
};

use crate::memory::DeviceBlock;
use crate::{
    CommandBuffer, Gpu, Registration, Step, Timeline, VulkanError, Watcher, MAX_NATIVE_WAITS,
};

/// A causeway queue of this driver: its timeline and the VkQueue it submits to, shared with
/// the backend, which reaches every queue's timeline (device waits name other queues of the
/// driver; shutdown waits for each).
#[derive(Debug)]
pub struct VulkanQueue {
    id: QueueId,
    state: Arc<QueueState>,
}

/// One causeway queue of this driver.
#[derive(Debug)]
struct QueueState {
    timeline: Timeline,
    /// The VkQueue it submits to.
    vk_queue: usize,
    /// The epoch of its last operation handed to the device.
    issued: AtomicU64,
    /// Whether a watcher registration of this queue is outstanding (one at a time: its report
    /// wakes the queue, whose next poll registers again if need be).
    watching: AtomicBool,
}

/// A recorded command buffer and the queues waiting for its pending submission to end.
struct Recording {
    commands: CommandBuffer,
    waiting: OnceLock<Mutex<QueueWaiters>>,
}

/// The Vulkan driver: register it with [`DeviceBuilder::driver`] after recording its command
/// buffers.
///
/// [`DeviceBuilder::driver`]: causeway_device::DeviceBuilder::driver
pub struct VulkanBackend {
    gpu: Gpu,
    recorded: Recorded<Recording>,
    /// By causeway queue index: `None` for other drivers' queues.
    queues: Vec<Option<Arc<QueueState>>>,
    opened: usize,
    watcher: OnceLock<Watcher>,
    device: OnceLock<DeviceContext>,
    lost: AtomicBool,
    /// Device memory of stream-ordered blocks, live or kept for reuse.
    blocks: NativeBlocks<DeviceBlock>,
}

impl VulkanBackend {
    /// A backend on `gpu`, with no command buffers yet.
    pub fn new(gpu: Gpu) -> VulkanBackend {
        VulkanBackend {
            gpu,
            recorded: Recorded::new(),
            queues: Vec::new(),
            opened: 0,
            watcher: OnceLock::new(),
            device: OnceLock::new(),
            lost: AtomicBool::new(false),
            blocks: NativeBlocks::new(),
        }
    }

    /// The device it drives (to create buffers and kernels for its command buffers).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The adapter's name, as Vulkan reports it.
    pub fn adapter(&self) -> &str {
        self.gpu.adapter_name()
    }

    /// Records a command buffer for [`Work::Execute`] on this driver's queues: `regions` of
    /// steps, in order, with a barrier between consecutive regions.
    ///
    /// Before the device is built or while it runs (through
    /// [`Device::backend`](causeway_device::Device::backend)), from any thread: the id is
    /// usable as soon as this returns.
    pub fn command_buffer(&self, regions: Vec<Vec<Step>>) -> Result<CommandBufferId, VulkanError> {
        let commands = CommandBuffer::record(&self.gpu, regions)?;
        let recording = Recording { commands, waiting: OnceLock::new() };
        // Once started, the queues' waiting list is made before the buffer is counted (before
        // that, `start` makes it).
        let ready = |new: &Recording| {
            if let Some(device) = self.device.get() {
                let _ = new.waiting.set(Mutex::new(QueueWaiters::new(device.queues())));
            }
        };
        self.recorded
            .push(recording, ready)
            .map(CommandBufferId)
            .map_err(|_| VulkanError::InvalidLaunch("more command buffers than an id names"))
    }

    /// The state of queue `queue`, when it is one of this driver's (a device wait's origin).
    fn queue(&self, queue: QueueId) -> Option<&QueueState> {
        self.queues.get(queue.index()).and_then(Option::as_deref)
    }

    /// The command buffer `buffer` names: one this backend recorded (the layer hands a driver
    /// only buffers below its [`command_buffers`](Backend::command_buffers)).
    fn recorded(&self, buffer: CommandBufferId) -> Option<&Recording> {
        self.recorded.get(buffer.0)
    }

    /// Marks the device lost after `error` (see the module documentation) and returns the
    /// failure of the operation it struck.
    fn lose(&self, error: &VulkanError) -> OpStatus {
        self.lost.store(true, Ordering::Relaxed);
        OpStatus::Failed(failure_of(error))
    }

    /// Backs `block` with at least `bytes` of device memory: the memory kept for it, or new.
    /// New device memory for a block of `bytes`: an allocation failure fails the alloca.
    fn allocate(&self, bytes: u64) -> Result<DeviceBlock, Failure> {
        DeviceBlock::new(&self.gpu, bytes).map_err(|error| {
            if error.is_out_of_memory() {
                Failure::OutOfMemory
            } else if error.is_device_lost() {
                self.lost.store(true, Ordering::Relaxed);
                Failure::DeviceLost
            } else {
                // The allocation ran and failed: Vulkan's own code is the fault's.
                Failure::Faulted(error.vk_result().map_or(0, |result| result.as_raw() as u32))
            }
        })
    }

    /// Submits `issue`'s operation: `Busy` when its command buffer is still pending.
    fn submit(&self, issue: &Issue<'_>, state: &QueueState, recorded: &Recording) -> Issued {
        let mut waits: heapless::Vec<(&Timeline, u64), MAX_NATIVE_WAITS> = heapless::Vec::new();
        for wait in issue.waits() {
            match (wait.resolution, wait.origin) {
                (Resolution::DeviceWait, Some(origin)) => {
                    // An origin is on a queue of the same driver (the layer's guarantee).
                    let Some(signaller) = self.queue(origin.queue) else {
                        return Issued::Finished(OpStatus::Failed(Failure::Aborted));
                    };
                    // The layer allows at most MAX_WAITS (< MAX_NATIVE_WAITS) waits.
                    let _ = waits.push((&signaller.timeline, origin.epoch));
                }
                // Reached before the operation was issued: nothing native.
                (Resolution::Held, _) => {}
                // The layer hands a native driver device waits with origins only.
                _ => return Issued::Finished(OpStatus::Failed(Failure::Aborted)),
            }
        }
        let signal = (&state.timeline, issue.epoch());
        let Some(watcher) = self.watcher.get() else {
            // Without a watcher nothing would report its completion.
            return Issued::Finished(self.lose(&VulkanError::WatcherStopped));
        };
        let commands = Some((&recorded.commands, issue.args()));
        match watcher.submit_with_arguments(state.vk_queue, commands, &waits, signal) {
            Ok(()) => {
                state.issued.store(issue.epoch(), Ordering::Relaxed);
                Issued::Pending
            }
            Err(VulkanError::CommandBufferPending) => Issued::Busy,
            Err(error) => Issued::Finished(self.lose(&error)),
        }
    }

    /// A queue waits for `recorded` to be released: its pending submission's completion is
    /// needed now, not when the batch in flight completes (see the watcher's wake policy).
    fn need_released(&self, recorded: &Recording) {
        if let (Some(watcher), Some((timeline, value))) =
            (self.watcher.get(), recorded.commands.last_signal())
        {
            watcher.need(&timeline, value);
        }
    }

    /// Wakes the queues waiting for command buffer `buffer`.
    fn release(&self, buffer: CommandBufferId) {
        let Some(device) = self.device.get() else { return };
        if let Some(waiting) = self.recorded(buffer).and_then(|recorded| recorded.waiting.get()) {
            waiting.lock().wake_all(*device);
        }
    }
}

impl std::fmt::Debug for VulkanBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VulkanBackend")
            .field("adapter", &self.adapter())
            .field("command_buffers", &self.recorded.len())
            .field("queues", &self.opened)
            .finish_non_exhaustive()
    }
}

impl Backend for VulkanBackend {
    type Queue = VulkanQueue;

    fn name(&self) -> &'static str {
        "vulkan"
    }

    /// Timeline semaphores, but one in-order VkQueue may serve several causeway queues: a wait
    /// whose signal is not submitted yet is held by the layer, never handed to Vulkan.
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(false).with_native_waits()
    }

    fn command_buffers(&self) -> u32 {
        // `command_buffer` numbers them with `u32`s.
        self.recorded.len()
    }

    /// Native timeline waits submitted ([`Gpu::native_waits`]) and validation messages kept
    /// ([`Gpu::validation_message_count`]).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("native_waits", self.gpu.native_waits()),
            ("validation_messages", self.gpu.validation_message_count()),
        ]
    }

    fn open_queue(
        &mut self,
        queue: QueueId,
        _config: &QueueConfig,
    ) -> Result<VulkanQueue, DriverError> {
        let timeline = Timeline::new(&self.gpu, 0).map_err(|e| DriverError::new("vulkan", e))?;
        if self.queues.len() <= queue.index() {
            self.queues.resize_with(queue.index() + 1, || None);
        }
        let vk_queue = self.opened % self.gpu.queue_count();
        self.opened += 1;
        let state = Arc::new(QueueState {
            timeline,
            vk_queue,
            issued: AtomicU64::new(0),
            watching: AtomicBool::new(false),
        });
        self.queues[queue.index()] = Some(Arc::clone(&state));
        Ok(VulkanQueue { id: queue, state })
    }

    fn start(&'static self, device: DeviceContext) {
        let _ = self.device.set(device);
        for recorded in self.recorded.iter() {
            let _ = recorded.waiting.set(Mutex::new(QueueWaiters::new(device.queues())));
        }
        // One registration per queue at a time (see `poll`), and as many again for those
        // reported but not yet taken out when the next one arrives.
        let capacity = 2 * self.queues.len().max(1);
        let wake = move |token: u64, reported: Result<(), VulkanError>| {
            let Some(queue) = usize::try_from(token).ok().and_then(|index| device.queue(index))
            else {
                return;
            };
            // A device error fails what the queue has pending (its poll sees the loss). A stop
            // only ends the watch: whatever still runs is the shutdown's.
            if let Err(error) = reported {
                if error != VulkanError::WatcherStopped {
                    self.lost.store(true, Ordering::Relaxed);
                }
            }
            if let Some(state) = self.queue(queue) {
                // The flag orders nothing else; the wake after it makes the queue poll (and
                // register) again even if a poll running now still saw it set.
                state.watching.store(false, Ordering::Relaxed);
            }
            device.wake(queue);
        };
        // Without a watcher nothing reports completions: `poll` then fails the work.
        if let Ok(watcher) = Watcher::start(&self.gpu, capacity, wake) {
            let _ = self.watcher.set(watcher);
        }
    }

    fn issue(&'static self, queue: &'static VulkanQueue, issue: &mut Issue<'_>) -> Issued {
        // Command buffers are the only kernels it declares (no timed kernels): the layer
        // refuses the others at submission.
        let Kernel::Execute(buffer) = issue.kernel() else {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        };
        let state = &*queue.state;
        // The layer counted the buffer, so it is recorded (see `Recorded`); should that ever
        // not hold, the operation fails rather than the worker.
        let Some(recorded) = self.recorded(buffer) else {
            return Issued::Finished(OpStatus::Failed(Failure::Aborted));
        };
        if self.lost.load(Ordering::Relaxed) {
            return Issued::Finished(OpStatus::Failed(Failure::DeviceLost));
        }
        match self.submit(issue, state, recorded) {
            Issued::Busy => {
                // Registered under the same lock `release` wakes under, then tried again: the
                // submission that held the command buffer cannot end unseen between the two.
                let Some(waiting) = recorded.waiting.get() else { return Issued::Busy };
                let mut waiting = waiting.lock();
                waiting.register(queue.id);
                let issued = self.submit(issue, state, recorded);
                drop(waiting);
                if matches!(issued, Issued::Busy) {
                    self.need_released(recorded);
                }
                issued
            }
            issued => issued,
        }
    }

    fn poll(
        &'static self,
        queue: &'static VulkanQueue,
        epoch: u64,
        kernel: Kernel,
    ) -> Option<OpStatus> {
        let state = &*queue.state;
        // Only command buffers are issued (see `issue`).
        let buffer = match kernel {
            Kernel::Execute(buffer) => Some(buffer),
            _ => None,
        };
        let release = || {
            if let Some(buffer) = buffer {
                self.release(buffer);
            }
        };
        if self.lost.load(Ordering::Relaxed) {
            return Some(OpStatus::Failed(Failure::DeviceLost));
        }
        match state.timeline.value() {
            Ok(reached) if reached >= epoch => {
                release();
                return Some(OpStatus::Ok);
            }
            Ok(_) => {}
            Err(error) => return Some(self.lose(&error)),
        }
        if !state.watching.swap(true, Ordering::Relaxed) {
            let registered =
                self.watcher.get().ok_or(VulkanError::WatcherStopped).and_then(|watcher| {
                    watcher.register(&state.timeline, epoch, queue.id.index() as u64)
                });
            match registered {
                Ok(Registration::Watching) => {}
                // Reached since the look above: nothing was registered.
                Ok(Registration::Reached) => {
                    state.watching.store(false, Ordering::Relaxed);
                    release();
                    return Some(OpStatus::Ok);
                }
                // Nothing would wake the queue: the device cannot be driven any more.
                Err(error) => return Some(self.lose(&error)),
            }
        }
        None
    }

    fn completed_on_host(&'static self, queue: &'static VulkanQueue, epoch: u64) {
        let state = &queue.state;
        // Nothing of this queue is on the device (the layer's guarantee), so the host signal is
        // valid; it fails only on a lost device, which fails everything waiting on it anyway.
        if state.timeline.signal_host(epoch).is_err() {
            self.lost.store(true, Ordering::Relaxed);
        }
    }

    /// Device memory for the blocks the layer assigns to allocas on this driver's queues (see
    /// the module documentation).
    fn memory(&self, op: MemoryOp) -> Result<(), Failure> {
        self.blocks.apply(op, |bytes| self.allocate(bytes))
    }

    fn is_running(&self, queue: &VulkanQueue, _kernel: Kernel, _workers_abandoned: bool) -> bool {
        let state = &queue.state;
        let issued = state.issued.load(Ordering::Relaxed);
        !matches!(state.timeline.value(), Ok(reached) if reached >= issued)
    }

    /// Stops the watcher, then waits (within `deadline`) for every queue's device work.
    fn stop(&self, deadline: Instant) -> bool {
        let watcher_stopped = self.watcher.get().is_none_or(|watcher| watcher.stop(deadline));
        let idle = self.queues.iter().flatten().all(|state| {
            let issued = state.issued.load(Ordering::Relaxed);
            let left = deadline.saturating_duration_since(Instant::now());
            matches!(state.timeline.wait_host(issued, left), Ok(true))
        });
        watcher_stopped && idle
    }
}

/// The failure of an operation struck by `error`.
fn failure_of(error: &VulkanError) -> Failure {
    if error.is_out_of_memory() {
        Failure::OutOfMemory
    } else {
        Failure::DeviceLost
    }
}

//! The CUDA driver behind the device layer's seam: [`CudaBackend`].
//!
//! # Mapping
//!
//! - **Queue → stream.** Each causeway queue of this driver owns a non-blocking `CUstream`.
//! - **Operation → stream commands.** Operation `e` of queue `q` is, in stream order: one
//!   native wait per device wait with origin `o`; its work (the spin kernel for `tiles`,
//!   `spin` and `sleep`; the add or saxpy kernel of [`COMPUTE_PTX`] once per region for
//!   `compute`; `cuMemcpyDtoDAsync` for `copy`, on [`DeviceBuffer`]s recorded with the
//!   command buffer); its signal; and a host function
//!   (`cuLaunchHostFunc`) that records `e` as the queue's completed epoch and wakes the queue.
//!   Elided and satisfied waits never reach the driver, and held waits were reached before
//!   issue (the layer holds them: a wait on another driver's queue, or on a value whose signal
//!   is not submitted yet); neither makes a CUDA call.
//! - **Timelines, two ways** ([`Emulation`], chosen per device):
//!   - *stream memory operations*, when the device reports
//!     `CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS`: a 64-bit timeline word per queue
//!     ([`TimelineWords`]); the signal is `cuStreamWriteValue64_v2(word(q), e)`, a wait on
//!     `o` is `cuStreamWaitValue64_v2(word(o.queue) ≥ o.epoch)`;
//!   - *events* otherwise: the signal records a pooled `CU_EVENT_DISABLE_TIMING` event, a wait
//!     on `o` is `cuStreamWaitEvent` on `o`'s event, or nothing when `o` already completed
//!     ([`EventTable`]: the value → event map, the pool and its recycling).
//! - **Completion.** The host function runs on CUDA's own callback thread when the stream
//!   reaches it; it only stores the epoch and wakes the queue (no CUDA call, no busy thread).
//!   [`Backend::poll`] answers from the stored epoch and, under events, gives the completed
//!   operations' events back to the pool.
//! - **Host progress.** An operation retired on the host moves its queue's timeline from the
//!   host (the word written with a synchronous copy; the event table told it completed).
//! - **Failure.** A CUDA call that fails while issuing marks the device lost: that operation
//!   and every later one fail with [`Failure::DeviceLost`].

use std::collections::VecDeque;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use causeway_core::queue::Resolution;
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::Mutex;
#[cfg(doc)]
use causeway_device::Work;
use causeway_device::{
    Backend, BackendCapabilities, CommandBufferId, DeviceContext, DriverError, Issue, Issued,
    Kernel, MemoryOp, NativeBlocks, OpStatus, QueueConfig, QueueId,
};
use cudarc::driver::{sys, CudaContext, CudaStream};

use crate::error::{check, CudaError};
use crate::events::{EventTable, WaitPlan};
use crate::memory::THREADS_PER_BLOCK;
use crate::memory::{compute_launches, ComputeKernel, DeviceBuffer, Launch, COMPUTE_PTX};
use crate::words::{TimelineWords, WordIndex};

/// The PTX of the `tiles` kernel (source: `kernels/spin.cu`).
pub const SPIN_PTX: &str = include_str!("../kernels/spin.ptx");

/// The kernel's entry point in [`SPIN_PTX`].
const SPIN_ENTRY: &str = "causeway_spin";

/// Timeline words in a device's buffer: the most queues one CUDA device serves.
pub const MAX_QUEUES: u32 = 256;

/// Whether the CUDA driver library can be loaded here. Ask before any other CUDA call:
/// cudarc panics on its first call when the library is missing.
pub fn driver_present() -> bool {
    // SAFETY: `is_culib_present` only tries to open the library by its usual names and drops
    // what it opened; loading libcuda runs the vendor's initialisers, which is what using the
    // driver means anyway.
    unsafe { sys::is_culib_present() }
}

/// How a device's queues emulate timeline semaphores (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Emulation {
    /// 64-bit stream memory operations on a timeline word per queue.
    StreamMemOps,
    /// An event per signalled value.
    Events,
}

/// Which emulation [`CudaBackend::open`] uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmulationChoice {
    /// Stream memory operations where the device allows them, events otherwise.
    #[default]
    Best,
    /// Events even where stream memory operations are available (to test that path).
    Events,
}

/// Native waits issued, and waits that needed no CUDA call (see [`CudaTally`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CudaCounts {
    /// `cuStreamWaitValue64_v2` or `cuStreamWaitEvent` calls made for device waits.
    pub native: u64,
    /// Device waits whose operation had completed by issue: no call (event emulation).
    pub completed: u64,
    /// Waits the layer resolved elided or satisfied: no call.
    pub elided: u64,
    /// Waits the layer held until reached: no call.
    pub held: u64,
}

#[derive(Debug, Default)]
struct Counters {
    native: AtomicU64,
    completed: AtomicU64,
    elided: AtomicU64,
    held: AtomicU64,
}

/// A handle on a [`CudaBackend`]'s wait counts that outlives handing it to a device.
#[derive(Clone, Debug, Default)]
pub struct CudaTally(Arc<Counters>);

impl CudaTally {
    /// The counts so far.
    pub fn counts(&self) -> CudaCounts {
        // Counters only: nothing is published through them.
        CudaCounts {
            native: self.0.native.load(Ordering::Relaxed),
            completed: self.0.completed.load(Ordering::Relaxed),
            elided: self.0.elided.load(Ordering::Relaxed),
            held: self.0.held.load(Ordering::Relaxed),
        }
    }
}

/// A CUDA handle (context, stream, event, module, function): an opaque pointer.
#[derive(Clone, Copy, Debug)]
struct Handle<T>(T);

// SAFETY: the driver API is thread-safe; its handles name driver objects, not thread-local
// state, and every call through them first makes the device's context current on the calling
// thread (`CudaBackend::current`).
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as for `Send`: the handles are only passed to the (thread-safe) driver API.
unsafe impl<T> Sync for Handle<T> {}

/// A causeway queue of this driver: its stream and timeline, shared with the backend, which
/// reaches every queue's timeline word (device waits name other queues of the driver) and
/// destroys the streams when it is dropped.
#[derive(Debug)]
pub struct CudaQueue {
    state: Arc<QueueState>,
}

/// What the host function of a queue's operations reaches.
#[derive(Debug)]
struct QueueState {
    queue: QueueId,
    stream: Handle<sys::CUstream>,
    /// The application's stream when it lent one ([`CudaBackend::on_context`]): kept alive
    /// here and never destroyed by the backend; `None` for a stream the backend created.
    lent_stream: Option<Arc<CudaStream>>,
    /// Its timeline word (stream memory operations only).
    word: Option<WordIndex>,
    /// Epochs whose host function has been enqueued and has not run, in stream order.
    launched: Mutex<VecDeque<u64>>,
    /// The last epoch whose host function ran (or that retired on the host).
    completed: AtomicU64,
    /// The last epoch issued.
    issued: AtomicU64,
    device: OnceLock<DeviceContext>,
}

/// A recorded command buffer.
enum Recorded {
    /// `tiles` work: its regions, `(tiles, duration of each)`, each a grid of the spin kernel.
    Tiles(Box<[(u32, Duration)]>),
    /// `compute` work: its launches, in order, and the buffers they name (kept alive here).
    Compute { launches: Box<[Launch]>, _buffers: [DeviceBuffer; 3] },
    /// `copy` work: one device-to-device copy of the whole source.
    Copy { source: DeviceBuffer, destination: DeviceBuffer },
}

/// The CUDA driver: open it on a device, record its command buffers, register it with
/// [`DeviceBuilder::driver`](causeway_device::DeviceBuilder::driver).
pub struct CudaBackend {
    context: Handle<sys::CUcontext>,
    /// The application's context when it lent one ([`CudaBackend::on_context`]): kept alive
    /// here, never released by the backend; `None` when `open` retained the primary context.
    lent_context: Option<Arc<CudaContext>>,
    /// Streams the application lent for this driver's queues, taken in queue order by
    /// `open_queue`.
    lent_streams: VecDeque<Arc<CudaStream>>,
    device: sys::CUdevice,
    emulation: Emulation,
    module: Handle<sys::CUmodule>,
    spin: Handle<sys::CUfunction>,
    /// The module of [`COMPUTE_PTX`] and its kernels: add, saxpy.
    compute_module: Handle<sys::CUmodule>,
    compute: [Handle<sys::CUfunction>; 2],
    /// The timeline words' device buffer (stream memory operations only).
    words_buffer: Option<sys::CUdeviceptr>,
    words: Mutex<TimelineWords>,
    /// By causeway queue index; `None` for other drivers' queues.
    queues: Vec<Option<Arc<QueueState>>>,
    events: OnceLock<Mutex<EventTable<Handle<sys::CUevent>>>>,
    command_buffers: Vec<Recorded>,
    /// Device memory of stream-ordered blocks, live or kept for reuse.
    blocks: NativeBlocks<DeviceBuffer>,
    lost: AtomicBool,
    tally: CudaTally,
}

impl CudaBackend {
    /// Opens device `ordinal`: [`CudaError::NoDriver`] when no CUDA driver is installed
    /// (nothing of CUDA is called then), a typed error for any call that fails.
    pub fn open(ordinal: usize, choice: EmulationChoice) -> Result<CudaBackend, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let ordinal_c = i32::try_from(ordinal).map_err(|_| CudaError::NoDevice(ordinal))?;
        let mut device: sys::CUdevice = 0;
        let mut context: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the library is present (checked above); every out-pointer is a live local.
        unsafe {
            check("cuInit", sys::cuInit(0))?;
            check("cuDeviceGet", sys::cuDeviceGet(&mut device, ordinal_c))?;
            check("cuDevicePrimaryCtxRetain", sys::cuDevicePrimaryCtxRetain(&mut context, device))?;
        }
        let backend = CudaBackend::on_raw_context(Handle(context), device, choice);
        if backend.is_err() {
            // SAFETY: retained just above, and nothing else holds this retain.
            unsafe {
                let _ = sys::cuDevicePrimaryCtxRelease_v2(device);
            }
        }
        backend
    }

    /// Builds the backend on the context the application made with cudarc, for an
    /// application that already owns its CUDA device: causeway's queues run on `streams`, in
    /// the order this driver's queues are created (a queue beyond them gets a stream the
    /// backend creates), beside the application's own work on the same context.
    ///
    /// Ownership: the backend keeps `context` and the streams alive while it lives and never
    /// destroys them (the application does, after dropping the device that holds the
    /// backend); it creates and destroys only what it makes — its modules, events, timeline
    /// words, memory blocks and the streams it creates. Work the application puts on a lent
    /// stream is ordered with causeway's operations on that queue, and causeway knows nothing
    /// of it: signal a causeway semaphore from the host (`signal_external`) for causeway work
    /// that must wait for it.
    pub fn on_context(
        context: &Arc<CudaContext>,
        streams: Vec<Arc<CudaStream>>,
        choice: EmulationChoice,
    ) -> Result<CudaBackend, CudaError> {
        if streams.iter().any(|stream| stream.context().cu_ctx() != context.cu_ctx()) {
            return Err(CudaError::ForeignStream);
        }
        let mut backend =
            CudaBackend::on_raw_context(Handle(context.cu_ctx()), context.cu_device(), choice)?;
        backend.lent_context = Some(Arc::clone(context));
        backend.lent_streams = streams.into();
        Ok(backend)
    }

    /// Loads the kernels and the timeline words on `context`, a context of `device` that the
    /// caller keeps alive for the backend's life.
    fn on_raw_context(
        context: Handle<sys::CUcontext>,
        device: sys::CUdevice,
        choice: EmulationChoice,
    ) -> Result<CudaBackend, CudaError> {
        let mut can_mem_ops = 0;
        // SAFETY: the context is live (the caller's contract); the out-pointer is a live local.
        unsafe {
            check("cuCtxSetCurrent", sys::cuCtxSetCurrent(context.0))?;
            check(
                "cuDeviceGetAttribute",
                sys::cuDeviceGetAttribute(
                    &mut can_mem_ops,
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                    device,
                ),
            )?;
        }
        let emulation = match choice {
            EmulationChoice::Best if can_mem_ops != 0 => Emulation::StreamMemOps,
            _ => Emulation::Events,
        };
        let ptx = CString::new(SPIN_PTX).map_err(|_| CudaError::KernelText)?;
        let entry = CString::new(SPIN_ENTRY).map_err(|_| CudaError::KernelText)?;
        let compute_ptx = CString::new(COMPUTE_PTX).map_err(|_| CudaError::KernelText)?;
        let entries = [ComputeKernel::Add, ComputeKernel::Saxpy]
            .map(|kernel| CString::new(kernel.entry()).map_err(|_| CudaError::KernelText));
        let [add_entry, saxpy_entry] = entries;
        let (add_entry, saxpy_entry) = (add_entry?, saxpy_entry?);
        let mut module: sys::CUmodule = std::ptr::null_mut();
        let mut spin: sys::CUfunction = std::ptr::null_mut();
        let mut compute_module: sys::CUmodule = std::ptr::null_mut();
        let mut add: sys::CUfunction = std::ptr::null_mut();
        let mut saxpy: sys::CUfunction = std::ptr::null_mut();
        let mut words_buffer = None;
        // SAFETY: the context is current (above); `ptx` and `entry` are NUL-terminated and
        // outlive the calls; out-pointers are live locals.
        unsafe {
            check("cuModuleLoadData", sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast()))?;
            check(
                "cuModuleGetFunction",
                sys::cuModuleGetFunction(&mut spin, module, entry.as_ptr()),
            )?;
            check(
                "cuModuleLoadData",
                sys::cuModuleLoadData(&mut compute_module, compute_ptx.as_ptr().cast()),
            )?;
            check(
                "cuModuleGetFunction",
                sys::cuModuleGetFunction(&mut add, compute_module, add_entry.as_ptr()),
            )?;
            check(
                "cuModuleGetFunction",
                sys::cuModuleGetFunction(&mut saxpy, compute_module, saxpy_entry.as_ptr()),
            )?;
            if emulation == Emulation::StreamMemOps {
                let bytes = 8 * MAX_QUEUES as usize;
                let mut buffer: sys::CUdeviceptr = 0;
                check("cuMemAlloc", sys::cuMemAlloc_v2(&mut buffer, bytes))?;
                check("cuMemsetD8", sys::cuMemsetD8_v2(buffer, 0, bytes))?;
                words_buffer = Some(buffer);
            }
        }
        Ok(CudaBackend {
            context,
            lent_context: None,
            lent_streams: VecDeque::new(),
            device,
            emulation,
            module: Handle(module),
            spin: Handle(spin),
            compute_module: Handle(compute_module),
            compute: [Handle(add), Handle(saxpy)],
            words_buffer,
            words: Mutex::new(TimelineWords::new(MAX_QUEUES)),
            queues: Vec::new(),
            events: OnceLock::new(),
            command_buffers: Vec::new(),
            blocks: NativeBlocks::new(),
            lost: AtomicBool::new(false),
            tally: CudaTally::default(),
        })
    }

    /// How this device's queues emulate timelines.
    pub fn emulation(&self) -> Emulation {
        self.emulation
    }

    /// A handle on the wait counts, to read after the backend went to a device.
    pub fn tally(&self) -> CudaTally {
        self.tally.clone()
    }

    /// Records a command buffer for [`Work::Execute`]: its regions run in order, each a grid
    /// of `tiles` blocks that each busy-run for its duration (the `tiles` kernel).
    pub fn command_buffer(
        &mut self,
        regions: Vec<(u32, Duration)>,
    ) -> Result<CommandBufferId, CudaError> {
        if regions.is_empty() || regions.iter().any(|(tiles, _)| *tiles == 0) {
            return Err(CudaError::EmptyCommandBuffer);
        }
        self.push(Recorded::Tiles(regions.into_boxed_slice()))
    }

    /// Records a command buffer of `compute` work: `regions` launches of `kernel` over the
    /// `x.len()` floats of device copies of `x` and `y`, each a grid of `tiles` blocks. Add
    /// writes `x + y` to a buffer of its own (the same sums each region); saxpy adds
    /// `scale * x` into the copy of `y` once per region. Returns the command buffer and the
    /// buffer the results land in (read it back once the work completed).
    pub fn record_compute(
        &mut self,
        kernel: ComputeKernel,
        (x, y): (&[f32], &[f32]),
        tiles: u32,
        regions: u32,
        scale: f32,
    ) -> Result<(CommandBufferId, DeviceBuffer), CudaError> {
        let elements = u32::try_from(x.len()).map_err(|_| CudaError::EmptyCommandBuffer)?;
        if elements == 0 || tiles == 0 || regions == 0 || y.len() != x.len() {
            return Err(CudaError::EmptyCommandBuffer);
        }
        let bytes = |values: &[f32]| -> Vec<u8> {
            values.iter().flat_map(|value| value.to_ne_bytes()).collect()
        };
        self.current()?;
        let x = DeviceBuffer::upload(self.device, &bytes(x))?;
        let y = DeviceBuffer::upload(self.device, &bytes(y))?;
        let out = match kernel {
            ComputeKernel::Add => DeviceBuffer::upload(self.device, &vec![0; x.len()])?,
            ComputeKernel::Saxpy => y.clone(),
        };
        let addresses = (x.address(), y.address(), out.address());
        let launches = compute_launches(kernel, addresses, elements, tiles, regions, scale);
        let id = self.push(Recorded::Compute {
            launches: launches.into_boxed_slice(),
            _buffers: [x, y, out.clone()],
        })?;
        Ok((id, out))
    }

    /// Records a command buffer of `copy` work: one device-to-device copy of `words` (placed
    /// in a device buffer of their own) into another. Returns the command buffer and the
    /// destination (read it back once the work completed).
    pub fn record_copy(
        &mut self,
        words: &[u32],
    ) -> Result<(CommandBufferId, DeviceBuffer), CudaError> {
        if words.is_empty() {
            return Err(CudaError::EmptyCommandBuffer);
        }
        let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_ne_bytes()).collect();
        self.current()?;
        let source = DeviceBuffer::upload(self.device, &bytes)?;
        let destination = DeviceBuffer::upload(self.device, &vec![0; bytes.len()])?;
        let id = self.push(Recorded::Copy { source, destination: destination.clone() })?;
        Ok((id, destination))
    }

    fn push(&mut self, recorded: Recorded) -> Result<CommandBufferId, CudaError> {
        let id = u32::try_from(self.command_buffers.len())
            .map_err(|_| CudaError::TooManyCommandBuffers)?;
        self.command_buffers.push(recorded);
        Ok(CommandBufferId(id))
    }

    /// The state of queue `queue`, when it is one of this driver's (a device wait's origin).
    fn queue(&self, queue: QueueId) -> Option<&QueueState> {
        self.queues.get(queue.index())?.as_deref()
    }

    /// Makes the device's context current on the calling thread.
    fn current(&self) -> Result<(), CudaError> {
        // SAFETY: the context was retained in `open` and is released only in `drop`, or the
        // application lent it and `lent_context` keeps it alive.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.context.0) })
    }

    /// The device address of `state`'s timeline word (stream memory operations only).
    fn word_address(&self, state: &QueueState) -> Option<sys::CUdeviceptr> {
        Some(self.words_buffer? + state.word?.offset())
    }

    fn lose(&self) -> OpStatus {
        // A flag only: it orders nothing else.
        self.lost.store(true, Ordering::Relaxed);
        OpStatus::Failed(Failure::DeviceLost)
    }

    /// Enqueues operation `issue` on `state`'s stream.
    fn enqueue(
        &'static self,
        issue: &Issue<'_>,
        state: &'static QueueState,
    ) -> Result<(), CudaError> {
        self.current()?;
        let stream = state.stream.0;
        let counters = &self.tally.0;
        counters.elided.fetch_add(issue.elided_waits() as u64, Ordering::Relaxed);
        for wait in issue.waits() {
            let origin = match (wait.resolution, wait.origin) {
                (Resolution::DeviceWait, Some(origin)) => origin,
                _ => {
                    counters.held.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            match self.emulation {
                Emulation::StreamMemOps => {
                    let address = self
                        .queue(origin.queue)
                        .and_then(|origin| self.word_address(origin))
                        .ok_or(CudaError::NotThisDriver { queue: origin.queue.index() })?;
                    // SAFETY: the stream and the word buffer live as long as the backend; the
                    // word is the origin queue's, allocated in `open_queue`.
                    check("cuStreamWaitValue64_v2", unsafe {
                        sys::cuStreamWaitValue64_v2(
                            stream,
                            address,
                            origin.epoch,
                            sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
                        )
                    })?;
                    counters.native.fetch_add(1, Ordering::Relaxed);
                }
                Emulation::Events => {
                    let events = self.events.get().ok_or(CudaError::NotStarted)?;
                    let plan = events.lock().wait(origin.queue.index(), origin.epoch)?;
                    match plan {
                        WaitPlan::Satisfied => {
                            counters.completed.fetch_add(1, Ordering::Relaxed);
                        }
                        WaitPlan::Event { slot, event } => {
                            // SAFETY: the event is pinned, so it is neither destroyed nor
                            // recorded again until the unpin below.
                            let waited = check("cuStreamWaitEvent", unsafe {
                                sys::cuStreamWaitEvent(stream, event.0, 0)
                            });
                            events.lock().unpin(slot)?;
                            waited?;
                            counters.native.fetch_add(1, Ordering::Relaxed);
                        }
                        // The layer issues a native wait only after its origin was issued,
                        // which recorded its event: this is a broken invariant, not a wait.
                        WaitPlan::Unrecorded => {
                            return Err(CudaError::Unrecorded {
                                queue: origin.queue.index(),
                                epoch: origin.epoch,
                            })
                        }
                    }
                }
            }
        }
        match issue.kernel() {
            Kernel::Spin(duration) | Kernel::Sleep(duration) => {
                self.launch_spin(stream, 1, duration)?
            }
            // One this backend recorded (the layer hands a driver only buffers below its
            // `command_buffers`).
            Kernel::Execute(buffer) => {
                match &self.command_buffers[buffer.0 as usize] {
                    Recorded::Tiles(regions) => {
                        for &(tiles, duration) in regions.iter() {
                            self.launch_spin(stream, tiles, duration)?;
                        }
                    }
                    Recorded::Compute { launches, .. } => {
                        for launch in launches.iter() {
                            self.launch_compute(stream, launch)?;
                        }
                    }
                    Recorded::Copy { source, destination } => {
                        // SAFETY: both buffers are kept alive by this command buffer, which
                        // lives as long as the backend; they are equally long; the stream
                        // lives with the backend.
                        check("cuMemcpyDtoDAsync", unsafe {
                            sys::cuMemcpyDtoDAsync_v2(
                                destination.address(),
                                source.address(),
                                source.len(),
                                stream,
                            )
                        })?;
                    }
                }
            }
        }
        let epoch = issue.epoch();
        match self.emulation {
            Emulation::StreamMemOps => {
                let address = self
                    .word_address(state)
                    .ok_or(CudaError::NotThisDriver { queue: issue.queue().index() })?;
                // SAFETY: as for the wait above; the word is this queue's.
                check("cuStreamWriteValue64_v2", unsafe {
                    sys::cuStreamWriteValue64_v2(stream, address, epoch, 0)
                })?;
            }
            Emulation::Events => {
                let events = self.events.get().ok_or(CudaError::NotStarted)?;
                let mut table = events.lock();
                let (slot, event) = match table.take_free() {
                    Some(free) => free,
                    None => {
                        let mut event: sys::CUevent = std::ptr::null_mut();
                        // SAFETY: the context is current; the out-pointer is a live local.
                        check("cuEventCreate", unsafe {
                            sys::cuEventCreate(
                                &mut event,
                                sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
                            )
                        })?;
                        let slot = table.add(Handle(event))?;
                        (slot, Handle(event))
                    }
                };
                // SAFETY: the slot is free (not recorded, no pins), so no waiter names it; the
                // stream lives as long as the backend.
                check("cuEventRecord", unsafe { sys::cuEventRecord(event.0, stream) })?;
                table.record(issue.queue().index(), epoch, slot)?;
            }
        }
        state.launched.lock().push_back(epoch);
        let data = std::ptr::from_ref::<QueueState>(state).cast_mut().cast::<c_void>();
        // SAFETY: `data` points to a `QueueState` boxed inside a `'static` backend, so it
        // outlives the callback; `completion` only reads through it.
        let launched = check("cuLaunchHostFunc", unsafe {
            sys::cuLaunchHostFunc(stream, Some(completion), data)
        });
        if launched.is_err() {
            state.launched.lock().pop_back();
        }
        launched?;
        // Read by `is_running` only.
        state.issued.store(epoch, Ordering::Relaxed);
        Ok(())
    }

    fn launch_compute(&self, stream: sys::CUstream, launch: &Launch) -> Result<(), CudaError> {
        let function = match launch.kernel {
            ComputeKernel::Add => self.compute[0].0,
            ComputeKernel::Saxpy => self.compute[1].0,
        };
        let mut parameters = launch.parameters();
        let mut pointers = parameters.pointers(launch.kernel);
        // SAFETY: `pointers` points at values of the types and order the kernel declares
        // (`Parameters::pointers`), alive for the call (the driver copies them at launch);
        // the buffers they name live with the recorded command buffer; the stream lives with
        // the backend.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                function,
                launch.blocks,
                1,
                1,
                THREADS_PER_BLOCK,
                1,
                1,
                0,
                stream,
                pointers.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    fn launch_spin(
        &self,
        stream: sys::CUstream,
        tiles: u32,
        duration: Duration,
    ) -> Result<(), CudaError> {
        let mut nanoseconds = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let mut parameters = [std::ptr::from_mut(&mut nanoseconds).cast::<c_void>()];
        // SAFETY: the function takes one u64 parameter, which `parameters` points to for the
        // call (the driver copies parameters at launch); the stream lives with the backend.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.spin.0,
                tiles,
                1,
                1,
                1,
                1,
                1,
                0,
                stream,
                parameters.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}

/// The host function after each operation: stores its epoch as completed and wakes the queue.
/// Runs on CUDA's callback thread; calls no CUDA function (which a host function must not).
unsafe extern "C" fn completion(data: *mut c_void) {
    // SAFETY: `data` is the `QueueState` `enqueue` passed, which lives as long as the backend
    // (`'static` once registered with a device).
    let state = unsafe { &*data.cast::<QueueState>() };
    let Some(epoch) = state.launched.lock().pop_front() else { return };
    // Release: pairs with the acquire load in `poll`, which then sees the operation's end.
    state.completed.fetch_max(epoch, Ordering::Release);
    if let Some(device) = state.device.get() {
        device.wake(state.queue);
    }
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.device)
            .field("emulation", &self.emulation)
            .field("command_buffers", &self.command_buffers.len())
            .finish_non_exhaustive()
    }
}

impl Backend for CudaBackend {
    type Queue = CudaQueue;

    fn name(&self) -> &'static str {
        "cuda"
    }

    /// No wait before signal (the layer holds waits whose signal is not submitted: an event
    /// cannot be waited on before it is recorded), native waits between this driver's streams.
    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(false).with_native_waits().with_timed_kernels()
    }

    fn command_buffers(&self) -> u32 {
        // `record` numbers them with `u32`s.
        self.command_buffers.len() as u32
    }

    fn open_queue(
        &mut self,
        queue: QueueId,
        _config: &QueueConfig,
    ) -> Result<CudaQueue, DriverError> {
        let error = |e: CudaError| DriverError::new("cuda", e);
        self.current().map_err(error)?;
        let word = match self.emulation {
            Emulation::StreamMemOps => {
                Some(self.words.lock().allocate().map_err(|e| error(e.into()))?)
            }
            Emulation::Events => None,
        };
        let lent_stream = self.lent_streams.pop_front();
        let stream = match &lent_stream {
            Some(lent) => lent.cu_stream(),
            None => {
                let mut stream: sys::CUstream = std::ptr::null_mut();
                // SAFETY: the context is current; the out-pointer is a live local.
                check("cuStreamCreate", unsafe {
                    sys::cuStreamCreate(
                        &mut stream,
                        sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                    )
                })
                .map_err(error)?;
                stream
            }
        };
        if self.queues.len() <= queue.index() {
            self.queues.resize_with(queue.index() + 1, || None);
        }
        let state = Arc::new(QueueState {
            queue,
            stream: Handle(stream),
            lent_stream,
            word,
            launched: Mutex::new(VecDeque::new()),
            completed: AtomicU64::new(0),
            issued: AtomicU64::new(0),
            device: OnceLock::new(),
        });
        self.queues[queue.index()] = Some(Arc::clone(&state));
        Ok(CudaQueue { state })
    }

    fn start(&'static self, device: DeviceContext) {
        let _ = self.events.set(Mutex::new(EventTable::new(device.queues())));
        for state in self.queues.iter().flatten() {
            let _ = state.device.set(device);
        }
    }

    fn issue(&'static self, queue: &'static CudaQueue, issue: &mut Issue<'_>) -> Issued {
        let state = &*queue.state;
        if self.lost.load(Ordering::Relaxed) {
            return Issued::Finished(OpStatus::Failed(Failure::DeviceLost));
        }
        match self.enqueue(issue, state) {
            Ok(()) => Issued::Pending,
            Err(_) => Issued::Finished(self.lose()),
        }
    }

    fn poll(
        &'static self,
        queue: &'static CudaQueue,
        epoch: u64,
        _kernel: Kernel,
    ) -> Option<OpStatus> {
        let state = &*queue.state;
        // Acquire: pairs with the release in `completion`.
        if state.completed.load(Ordering::Acquire) >= epoch {
            if let Some(events) = self.events.get() {
                if events.lock().complete(state.queue.index(), epoch).is_err() {
                    return Some(self.lose());
                }
            }
            return Some(OpStatus::Ok);
        }
        if self.lost.load(Ordering::Relaxed) {
            return Some(OpStatus::Failed(Failure::DeviceLost));
        }
        None
    }

    fn completed_on_host(&'static self, queue: &'static CudaQueue, epoch: u64) {
        let state = &*queue.state;
        if let Some(address) = self.word_address(state) {
            // Every earlier operation of the queue retired (the layer's guarantee), so its
            // stream's last write to the word has landed and the host is its only writer now;
            // other streams only wait on it, and the value only grows.
            let written = self.current().and_then(|()| {
                // SAFETY: the word lies in the buffer allocated in `open`, alive until `drop`;
                // the source is a live local of 8 bytes.
                check("cuMemcpyHtoD", unsafe {
                    sys::cuMemcpyHtoD_v2(address, std::ptr::from_ref(&epoch).cast(), 8)
                })
            });
            if written.is_err() {
                self.lost.store(true, Ordering::Relaxed);
            }
        }
        if let Some(events) = self.events.get() {
            if events.lock().complete(state.queue.index(), epoch).is_err() {
                self.lost.store(true, Ordering::Relaxed);
            }
        }
        // Release: pairs with the acquire load in `poll`.
        state.completed.fetch_max(epoch, Ordering::Release);
    }

    /// Device memory (`cuMemAlloc`) for the blocks the layer assigns to allocas on this
    /// driver's queues: kept for reuse or freed as the layer says ([`NativeBlocks`]).
    fn memory(&self, op: MemoryOp) -> Result<(), Failure> {
        self.blocks.apply(op, |bytes| {
            let bytes = usize::try_from(bytes).map_err(|_| Failure::OutOfMemory)?;
            DeviceBuffer::allocate(self.device, bytes).map_err(|error| match error {
                CudaError::Call { result: sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY, .. } => {
                    Failure::OutOfMemory
                }
                // The allocation ran and failed: the driver API's own code is the fault's.
                CudaError::Call { result, .. } => Failure::Faulted(result as u32),
                _ => Failure::Faulted(sys::CUresult::CUDA_ERROR_UNKNOWN as u32),
            })
        })
    }

    fn is_running(&self, queue: &CudaQueue, _kernel: Kernel, _workers_abandoned: bool) -> bool {
        let state = &queue.state;
        // Acquire: pairs with the release in `completion`.
        state.completed.load(Ordering::Acquire) < state.issued.load(Ordering::Relaxed)
    }

    /// Waits, within `deadline`, for every stream to drain (`cuStreamQuery`, a millisecond
    /// apart: a kernel may run long and nothing else wakes the host).
    fn stop(&self, deadline: Instant) -> bool {
        if self.current().is_err() {
            return false;
        }
        self.queues.iter().flatten().all(|state| loop {
            // SAFETY: the stream lives as long as the backend.
            match unsafe { sys::cuStreamQuery(state.stream.0) } {
                sys::CUresult::CUDA_ERROR_NOT_READY if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                sys::CUresult::CUDA_SUCCESS => break true,
                _ => break false,
            }
        })
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if self.current().is_err() {
            return;
        }
        // SAFETY: every handle below was created in `open`, `on_raw_context`, `open_queue` or
        // `enqueue` and is destroyed once, here; the driver defers destroying a stream or event
        // still in use. What the application lent (its context, its streams) is left alone.
        // Results are ignored: nothing more can be done about a failed teardown.
        unsafe {
            for state in self.queues.iter().flatten() {
                if state.lent_stream.is_none() {
                    let _ = sys::cuStreamDestroy_v2(state.stream.0);
                }
            }
            if let Some(events) = self.events.get() {
                for event in events.lock().all_events() {
                    let _ = sys::cuEventDestroy_v2(event.0);
                }
            }
            if let Some(buffer) = self.words_buffer {
                let _ = sys::cuMemFree_v2(buffer);
            }
            let _ = sys::cuModuleUnload(self.module.0);
            let _ = sys::cuModuleUnload(self.compute_module.0);
            if self.lent_context.is_none() {
                let _ = sys::cuDevicePrimaryCtxRelease_v2(self.device);
            }
        }
    }
}

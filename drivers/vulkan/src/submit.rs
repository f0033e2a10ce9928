//! Recording command buffers ([`CommandBuffer::record`]) and submitting work with native
//! timeline waits and one timeline signal ([`submit`]).

use std::fmt;
use std::time::Duration;

use ash::vk;
use causeway_core::unpoisoned::Mutex;
use causeway_device::{Args, ARG_WORDS};

use crate::{Buffer, Gpu, Launch, Timeline, VulkanError};

/// The most native waits one [`submit`] takes (the device layer's `MAX_WAITS`, with room).
pub const MAX_NATIVE_WAITS: usize = 16;

/// The bytes of an operation's arguments ([`Args`]) a [`Step::Arguments`] copies.
const ARGUMENT_BYTES: u64 = (ARG_WORDS * 4) as u64;

/// One piece of work in a region of a [`CommandBuffer`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Step {
    /// A kernel's tiled dispatches.
    Dispatch(Launch),
    /// The arguments of the operation executing the command buffer (`Op::args`: 32 bytes,
    /// eight 32-bit words) into `destination` at byte `offset`, for later regions' kernels and
    /// copies to read: the one way per-submission values reach recorded work, whose launches
    /// and push constants are fixed when recorded. Each submission writes its words into a
    /// small host-visible buffer of the command buffer's own before it is submitted (one
    /// submission of a command buffer is pending at a time, so the words are stable while it
    /// runs), and this step copies them on the device. A submission made with [`submit`]
    /// itself, not through a causeway queue, carries zeros.
    Arguments {
        /// Written to.
        destination: Buffer,
        /// Where in `destination` the 32 bytes go.
        offset: u64,
    },
    /// `bytes` bytes from the start of `source` to the start of `destination`.
    Copy {
        /// Read from.
        source: Buffer,
        /// Written to.
        destination: Buffer,
        /// How many bytes.
        bytes: u64,
    },
}

/// What every region may have written, and how: the first scope of the barrier after it.
const REGION_WRITE_STAGES: vk::PipelineStageFlags2 = vk::PipelineStageFlags2::from_raw(
    vk::PipelineStageFlags2::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags2::COPY.as_raw(),
);
const REGION_WRITES: vk::AccessFlags2 = vk::AccessFlags2::from_raw(
    vk::AccessFlags2::SHADER_STORAGE_WRITE.as_raw() | vk::AccessFlags2::TRANSFER_WRITE.as_raw(),
);
/// What every region may access: the second scope of the barrier before it.
const REGION_ACCESSES: vk::AccessFlags2 = vk::AccessFlags2::from_raw(
    vk::AccessFlags2::SHADER_STORAGE_READ.as_raw()
        | vk::AccessFlags2::SHADER_STORAGE_WRITE.as_raw()
        | vk::AccessFlags2::TRANSFER_READ.as_raw()
        | vk::AccessFlags2::TRANSFER_WRITE.as_raw(),
);

/// A recorded command buffer: regions of steps, a pipeline barrier before each region (every
/// compute or copy write before it — of the earlier region, or for the first region of
/// everything submitted earlier to the same VkQueue — before every compute or copy access of
/// the region), and at the end a barrier making all writes visible to host reads. Steps of
/// one region run unordered: they must not touch overlapping ranges.
///
/// It is recorded once and submitted any number of times, one pending submission at a time
/// ([`submit`] refuses it while pending). It holds its launches and buffers; dropping it waits
/// for its last submission to complete.
pub struct CommandBuffer {
    gpu: Gpu,
    pool: vk::CommandPool,
    buffer: vk::CommandBuffer,
    /// Kept alive for the device: the launches' descriptor sets and pipelines, the buffers.
    _regions: Vec<Vec<Step>>,
    /// Where each submission's arguments are written before it is submitted, when a step
    /// copies them ([`Step::Arguments`]).
    arguments: Option<Buffer>,
    /// The signal of its last submission: it is pending until that timeline reaches the value.
    last_submission: Mutex<Option<(Timeline, u64)>>,
}

impl CommandBuffer {
    /// Records `regions` (at least one, none empty) on `gpu`.
    pub fn record(gpu: &Gpu, regions: Vec<Vec<Step>>) -> Result<CommandBuffer, VulkanError> {
        if regions.is_empty() || regions.iter().any(Vec::is_empty) {
            return Err(VulkanError::InvalidLaunch(
                "a recording with no regions or an empty region",
            ));
        }
        for step in regions.iter().flatten() {
            if let Step::Arguments { destination, offset } = step {
                if offset.checked_add(ARGUMENT_BYTES).is_none_or(|end| end > destination.size()) {
                    return Err(VulkanError::InvalidLaunch("arguments copied past a buffer's end"));
                }
            }
            if let Step::Copy { source, destination, bytes } = step {
                if *bytes == 0 || source.size() < *bytes || destination.size() < *bytes {
                    return Err(VulkanError::InvalidLaunch(
                        "a copy of 0 bytes or past a buffer's end",
                    ));
                }
                // Both ranges start at byte 0: within one buffer they always overlap, which
                // vkCmdCopyBuffer forbids (VUID-vkCmdCopyBuffer-pRegions-00117).
                if source.raw() == destination.raw() {
                    return Err(VulkanError::InvalidLaunch("a copy from a buffer to itself"));
                }
            }
        }
        let takes_arguments =
            regions.iter().flatten().any(|step| matches!(step, Step::Arguments { .. }));
        let arguments =
            if takes_arguments { Some(Buffer::new(gpu, ARGUMENT_BYTES)?) } else { None };
        let device = gpu.device();
        let pool_info =
            vk::CommandPoolCreateInfo::default().queue_family_index(gpu.shared.queue_family);
        // SAFETY: the device is alive (`gpu` is a handle); the info lives across the call.
        let pool = unsafe { device.create_command_pool(&pool_info, None) }
            .map_err(VulkanError::vk("vkCreateCommandPool"))?;
        // From here on, dropping `recorded` destroys the pool (nothing was submitted yet).
        let mut recorded = CommandBuffer {
            gpu: gpu.clone(),
            pool,
            buffer: vk::CommandBuffer::null(),
            _regions: Vec::new(),
            arguments,
            last_submission: Mutex::new(None),
        };
        let allocate_info = vk::CommandBufferAllocateInfo::default()
            .command_pool(pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: a live pool of this device, used by this thread only.
        recorded.buffer = unsafe { device.allocate_command_buffers(&allocate_info) }
            .map_err(VulkanError::vk("vkAllocateCommandBuffers"))?[0];
        let buffer = recorded.buffer;
        // SAFETY: a fresh command buffer in the initial state, its pool used by this thread only.
        unsafe { device.begin_command_buffer(buffer, &vk::CommandBufferBeginInfo::default()) }
            .map_err(VulkanError::vk("vkBeginCommandBuffer"))?;
        for region in &regions {
            // Before the first region, the barrier's first scope is every command submitted
            // earlier to the VkQueue: one causeway queue's operations run in order.
            recorded.barrier(
                REGION_WRITE_STAGES,
                REGION_WRITES,
                REGION_WRITE_STAGES,
                REGION_ACCESSES,
            );
            for step in region {
                match step {
                    Step::Dispatch(launch) => launch.record(device, buffer),
                    Step::Arguments { destination, offset } => {
                        let copy =
                            [vk::BufferCopy::default().dst_offset(*offset).size(ARGUMENT_BYTES)];
                        // The buffer exists: a step asked for it above.
                        let Some(source) = &recorded.arguments else { continue };
                        // SAFETY: recording; both buffers are live, held by `recorded`, and the
                        // copy is inside both (checked above; the source is exactly its size).
                        unsafe {
                            device.cmd_copy_buffer(buffer, source.raw(), destination.raw(), &copy)
                        };
                    }
                    Step::Copy { source, destination, bytes } => {
                        let copy = [vk::BufferCopy::default().size(*bytes)];
                        // SAFETY: recording; both buffers are live, held by `recorded` with the
                        // regions, and the copy is inside both (checked above).
                        unsafe {
                            device.cmd_copy_buffer(buffer, source.raw(), destination.raw(), &copy)
                        };
                    }
                }
            }
        }
        recorded.barrier(
            REGION_WRITE_STAGES,
            REGION_WRITES,
            vk::PipelineStageFlags2::HOST,
            vk::AccessFlags2::HOST_READ,
        );
        // SAFETY: the command buffer is recording.
        unsafe { device.end_command_buffer(buffer) }
            .map_err(VulkanError::vk("vkEndCommandBuffer"))?;
        recorded._regions = regions;
        Ok(recorded)
    }

    /// The native command buffer.
    pub fn raw(&self) -> vk::CommandBuffer {
        self.buffer
    }

    /// Records a global memory barrier (the command buffer is recording).
    fn barrier(
        &self,
        source_stages: vk::PipelineStageFlags2,
        source_accesses: vk::AccessFlags2,
        destination_stages: vk::PipelineStageFlags2,
        destination_accesses: vk::AccessFlags2,
    ) {
        let barriers = [vk::MemoryBarrier2::default()
            .src_stage_mask(source_stages)
            .src_access_mask(source_accesses)
            .dst_stage_mask(destination_stages)
            .dst_access_mask(destination_accesses)];
        let dependency = vk::DependencyInfo::default().memory_barriers(&barriers);
        // SAFETY: the command buffer is recording (only `record` calls this, between begin and
        // end); the pointer is the device's vkCmdPipelineBarrier2 (core or KHR, `Gpu::open`)
        // and `dependency` lives across the call.
        unsafe {
            (self.gpu.shared.synchronization2.cmd_pipeline_barrier2)(self.buffer, &dependency)
        };
    }
}

impl fmt::Debug for CommandBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandBuffer").field("buffer", &self.buffer).finish_non_exhaustive()
    }
}

impl CommandBuffer {
    /// The signal of its last submission, `(timeline, value)`: until the timeline reaches the
    /// value the command buffer is pending and cannot be submitted again.
    pub(crate) fn last_signal(&self) -> Option<(Timeline, u64)> {
        self.last_submission.lock().clone()
    }
}

impl Drop for CommandBuffer {
    fn drop(&mut self) {
        let last = self.last_submission.lock().take();
        if let Some((timeline, value)) = last {
            // Wait for the last submission; on a device error (lost: nothing runs any more)
            // fall back to waiting until every queue causeway submits to is idle.
            while let Ok(false) = timeline.wait_host(value, Duration::from_secs(1)) {}
            if !matches!(timeline.value(), Ok(reached) if reached >= value) {
                let _ = self.gpu.wait_idle();
            }
        }
        // SAFETY: its last submission completed (or causeway's queues, the only ones it is
        // submitted to, are idle): the command buffer is not pending. Destroying the pool frees
        // it.
        unsafe { self.gpu.device().destroy_command_pool(self.pool, None) };
    }
}

/// Submits one batch to VkQueue `queue` of `gpu` (`vkQueueSubmit2`, under that queue's lock):
/// waits for each `(timeline, value)` of `waits` (a native timeline wait, counted in
/// [`Gpu::native_waits`]), runs `commands` if any (none: a barrier operation that only orders
/// the signal after the waits), then signals `signal`'s timeline to its value. Waits and the
/// signal cover all commands (`ALL_COMMANDS`): kernels and copies alike.
///
/// The signal value must be above the timeline's value and every device signal of it submitted
/// before (its epochs rise), or the submission is refused
/// ([`VulkanError::InvalidDeviceSignal`]); a refused or failed submission leaves nothing
/// pending but may leave the timeline refusing host signals (the driver never signals one
/// timeline from both). A wait may be for a value no submission signals yet
/// (wait-before-signal), provided one will.
pub fn submit(
    gpu: &Gpu,
    queue: usize,
    commands: Option<&CommandBuffer>,
    waits: &[(&Timeline, u64)],
    signal: (&Timeline, u64),
) -> Result<(), VulkanError> {
    let commands = commands.map(|commands| (commands, Args::NONE));
    submit_then(gpu, queue, commands, waits, signal, || {})
}

/// [`submit`] with the command buffer's arguments (see [`Step::Arguments`]), calling
/// `submitted` after a successful `vkQueueSubmit2` with the VkQueue's lock still held: what
/// `submitted` records is in the VkQueue's submission order.
pub(crate) fn submit_then(
    gpu: &Gpu,
    queue: usize,
    commands: Option<(&CommandBuffer, Args)>,
    waits: &[(&Timeline, u64)],
    signal: (&Timeline, u64),
    submitted: impl FnOnce(),
) -> Result<(), VulkanError> {
    if waits.len() > MAX_NATIVE_WAITS {
        return Err(VulkanError::TooManyWaits(waits.len()));
    }
    let queue_lock = gpu.queue(queue)?;
    let mut wait_infos = [vk::SemaphoreSubmitInfo::default(); MAX_NATIVE_WAITS];
    for (info, (timeline, value)) in wait_infos.iter_mut().zip(waits) {
        *info = vk::SemaphoreSubmitInfo::default()
            .semaphore(timeline.raw())
            .value(*value)
            .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS);
    }
    let signal_infos = [vk::SemaphoreSubmitInfo::default()
        .semaphore(signal.0.raw())
        .value(signal.1)
        .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
    let command_infos = commands.map(|(commands, _)| {
        [vk::CommandBufferSubmitInfo::default().command_buffer(commands.buffer)]
    });
    let mut submit_info = vk::SubmitInfo2::default()
        .wait_semaphore_infos(&wait_infos[..waits.len()])
        .signal_semaphore_infos(&signal_infos);
    if let Some(command_infos) = &command_infos {
        submit_info = submit_info.command_buffer_infos(command_infos);
    }
    // Held across the submission: two submissions of one command buffer cannot race past the
    // pending check. Taken before the queue lock, the only order both are taken in.
    let mut last_submission = match commands {
        Some((commands, args)) => {
            let last = commands.last_submission.lock();
            if let Some((timeline, value)) = &*last {
                if timeline.value()? < *value {
                    return Err(VulkanError::CommandBufferPending);
                }
            }
            // Not pending (checked above, under the lock every submission of it takes): no
            // execution reads the words while they are written. The memory is host-coherent,
            // and `vkQueueSubmit2` makes host writes before it visible to the work it submits.
            if let Some(arguments) = &commands.arguments {
                let mut bytes = [0; ARG_WORDS * 4];
                for (chunk, word) in bytes.chunks_exact_mut(4).zip(args.words()) {
                    chunk.copy_from_slice(&word.to_ne_bytes());
                }
                arguments.write(0, &bytes)?;
            }
            Some(last)
        }
        None => None,
    };
    signal.0.note_device_signal(signal.1)?;
    let vk_queue = queue_lock.lock();
    let result = match injected_submit_fault(gpu) {
        Some(injected) => Err(injected),
        // SAFETY: the queue is this device's and its lock is held (external synchronization); the
        // pointer is the device's vkQueueSubmit2 (`Gpu::open`); every semaphore and the command
        // buffer are live (their handles are borrowed for the call, and the command buffer waits
        // for this submission before it is destroyed); the command buffer is executable and not
        // pending (checked above); `submit_info` and its arrays live across the call.
        None => unsafe {
            (gpu.shared.synchronization2.queue_submit2)(
                *vk_queue,
                1,
                &submit_info,
                vk::Fence::null(),
            )
        }
        .result(),
    };
    if result.is_ok() {
        submitted();
    }
    drop(vk_queue);
    result.map_err(VulkanError::vk("vkQueueSubmit2"))?;
    gpu.count_native_waits(waits.len());
    if let Some(last) = &mut last_submission {
        **last = Some((signal.0.clone(), signal.1));
    }
    Ok(())
}

/// The error a test made this submission return instead of reaching Vulkan
/// ([`Gpu::inject_fault`]).
#[cfg(feature = "fault-injection")]
fn injected_submit_fault(gpu: &Gpu) -> Option<vk::Result> {
    gpu.injected_fault(crate::FaultPoint::QueueSubmit)
}

/// Without the `fault-injection` feature every submission reaches Vulkan.
#[cfg(not(feature = "fault-injection"))]
fn injected_submit_fault(_: &Gpu) -> Option<vk::Result> {
    None
}

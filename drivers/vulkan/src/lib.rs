//! # causeway-driver-vulkan
//!
//! causeway's Vulkan driver. [`VulkanBackend`] is its `Backend` (the device layer's seam,
//! `causeway_device::Backend`): register it with a device, and queues naming it run command
//! buffers on Vulkan, sharing semaphores and frontiers with every other driver's queues. Beneath
//! it lies the Vulkan plumbing it issues operations through, which knows nothing of causeway's
//! semaphores, frontiers or queues (the backend maps them):
//!
//! - [`Gpu`] opens a device (`ash`, loading libvulkan at run time): Vulkan ≥ 1.2 with timeline
//!   semaphores and synchronization2, every queue of a compute-capable family, each behind its
//!   own lock; optionally the Khronos validation layer with synchronization validation, whose
//!   warnings and errors are kept ([`Gpu::validation_messages`]). An application that already
//!   owns a device (its own `ash` set-up) lends it instead, with [`Gpu::from_raw_handles`] and a
//!   [`GpuHandles`]: causeway then creates and destroys only what it makes from the device
//!   (timelines, buffers, pipelines, command pools, memory), never the instance or the device,
//!   adds no validation messenger, and the application submits to the queues it lent only
//!   inside [`Gpu::with_queue`], under causeway's lock for that queue. The `unsafe` contract (the
//!   handles belong together, the features were enabled, the instance and device outlive every
//!   `Gpu` clone) is in its `# Safety` section and in `docs/src/caller-owned-devices.md`;
//!   `examples/wgpu_interop.rs` lends a wgpu device this way, through wgpu-hal.
//! - [`Timeline`] is a timeline semaphore. The driver keeps **one per causeway queue**: its
//!   value is the epoch (1, 2, 3 …) of the queue's last completed operation, so a causeway wait
//!   resolved as a device wait becomes a native wait on the signalling queue's timeline
//!   reaching that operation's epoch. Several causeway queues may share one VkQueue (lavapipe
//!   has one).
//! - [`Kernel`] and [`Launch`]: compute pipelines built from the GLSL in `shaders/` (the
//!   compiled SPIR-V ships beside each source) and their tiled launches.
//! - [`Buffer`]: host-visible storage buffers, mapped for upload and readback.
//! - [`CommandBuffer`] records regions of [`Step`]s (dispatches, copies, and
//!   [`Step::Arguments`]) separated by pipeline barriers. Launches and push constants are fixed
//!   when recorded; what varies per submission arrives through `Step::Arguments`, which copies
//!   the executing operation's arguments (`Op::args`, written by the driver into a small buffer
//!   of the command buffer's own before each submission) into a buffer later regions read.
//!   [`submit`](submit()) sends one batch — native timeline waits, optional commands, one
//!   timeline signal — through `vkQueueSubmit2`, counting the native waits
//!   ([`Gpu::native_waits`]).
//! - [`Watcher`]: one thread per device that follows the submissions made through it, one
//!   semaphore wait at a time per VkQueue, and reports each registered `(timeline, value)`,
//!   by token, to a callback once reached (the backend wakes the causeway queue from it). It
//!   wakes when a value somebody needs ([`Watcher::need`]) is reached, and otherwise when the
//!   newest submission in flight completes, reporting everything reached in one pass.
//! - [`ImportedTimeline`] and [`ExportedTimeline`]: timeline semaphores shared with the
//!   application (see below).
//! - Device memory for stream-ordered allocations: a storage buffer bound to `VkDeviceMemory` of
//!   its own per block the device layer assigns to an alloca on a Vulkan queue, kept across its
//!   dealloca while the layer may reuse the block ([`Gpu::memory_blocks`] counts them).
//!
//! How a backend drives it: each causeway queue has a [`Timeline`] and its operations epochs
//! 1, 2, 3 …; issuing an operation is one [`Watcher::submit`] on the VkQueue the causeway
//! queue uses, with its device waits as `(signalling queue's timeline, that operation's
//! epoch)` and its own `(timeline, epoch)` as the signal (no command buffer for a barrier
//! operation), then a [`Watcher::register`] of `(timeline, epoch, token)` whose callback wakes
//! the causeway queue;
//! polling asks [`Timeline::value`]. One constraint of lavapipe, checked by
//! `tests/submit.rs`: its one VkQueue runs batches in order, so a batch waiting for a value
//! whose signal is not yet submitted holds up every later batch of every causeway queue. Such
//! waits must be held by the device layer until their signal is submitted (a queue without
//! wait-before-signal), never handed to Vulkan.
//!
//! Sharing timelines with an application that lent its device: an [`ImportedTimeline`] follows
//! the application's own timeline `VkSemaphore` and signals a causeway semaphore externally
//! (`signal_external`) each time it advances, so causeway waits on it import no frontier and are
//! never elided (reported tainted); an [`ExportedTimeline`] mirrors a causeway semaphore into a
//! timeline `VkSemaphore` causeway creates, signalled from the host to each value reached, for
//! the application to wait on — when the causeway semaphore fails, it stops at the last value
//! reached and the export reports the failure. Both are host-mediated, with a thread each, not
//! native device waits. Ownership, taint, failure and latency are in
//! `docs/src/caller-owned-devices.md`.
//!
//! Every fallible call returns a [`VulkanError`]; driver errors never panic. Where the cure is
//! a missing package (the loader, an ICD, the validation layer), the error names it.
//!
//! The cargo feature `fault-injection` (off by default; the crate's own tests turn it on) adds
//! `Gpu::inject_fault`, a test hook that makes the next `vkQueueSubmit2`, watcher
//! `vkWaitSemaphores` or `vkAllocateMemory` of the driver return a chosen `vk::Result` without
//! reaching Vulkan, as a broken device would: the error paths a working device never takes.
//!
//! ```
//! use std::time::Duration;
//!
//! use causeway_driver_vulkan::{submit, Buffer, CommandBuffer, Gpu, GpuOptions, Kernel, Step, Timeline};
//!
//! let gpu = Gpu::open(&GpuOptions::from_env()?)?;
//! let (a, b, c) = (Buffer::new(&gpu, 4096)?, Buffer::new(&gpu, 4096)?, Buffer::new(&gpu, 4096)?);
//! a.write_f32(0, &[1.0; 1024])?;
//! b.write_f32(0, &[2.0; 1024])?;
//! let launch = Kernel::add(&gpu)?.launch(&[&a, &b, &c], 1024, 4, 0.0)?;
//! let commands = CommandBuffer::record(&gpu, vec![vec![Step::Dispatch(launch)]])?;
//! let queue_timeline = Timeline::new(&gpu, 0)?;
//! submit(&gpu, 0, Some(&commands), &[], (&queue_timeline, 1))?;
//! assert!(queue_timeline.wait_host(1, Duration::from_secs(30))?);
//! assert_eq!(c.read_f32(0, 1024)?, vec![3.0; 1024]);
//! # Ok::<(), causeway_driver_vulkan::VulkanError>(())
//! ```
//!
//! In the guide: `docs/src/drivers.md` in the repository, "Vulkan" (lavapipe, validation, the
//! environment variables).

mod backend;
mod buffers;
mod error;
mod gpu;
mod kernels;
mod memory;
mod shared_timelines;
mod submit;
mod timeline;
mod watcher;

pub use backend::{VulkanBackend, VulkanQueue};
pub use buffers::Buffer;
pub use error::VulkanError;
#[cfg(feature = "fault-injection")]
pub use gpu::FaultPoint;
pub use gpu::{Gpu, GpuHandles, GpuOptions, MemoryBlocks};
pub use kernels::{Kernel, Launch};
pub use shared_timelines::{ExportedTimeline, ImportedTimeline};
pub use submit::{submit, CommandBuffer, Step, MAX_NATIVE_WAITS};
pub use timeline::Timeline;
pub use watcher::{OnComplete, Registration, Wakes, Watcher, POLL_INTERVAL};

//! [`VulkanError`]: every way the driver's native half can fail, each naming what to do about it.

use std::error::Error;
use std::fmt;

use ash::vk;
use causeway_core::semaphore::{Failure, SignalError};
use causeway_device::SemaphoreId;

/// Why a Vulkan call or a driver precondition failed. Driver errors are returned, never panicked
/// on; where the cure is a missing Debian package, the message names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VulkanError {
    /// The Vulkan loader (`libvulkan.so.1`) could not be opened.
    Loader {
        /// What the dynamic loader said.
        detail: String,
    },
    /// The loader found no physical device: no installable client driver (ICD) is present.
    NoDevice,
    /// Validation was asked for and `VK_LAYER_KHRONOS_validation` (or an extension it provides)
    /// is not installed.
    ValidationLayerMissing {
        /// The layer or extension that is missing.
        missing: &'static str,
    },
    /// No physical device matches the requested adapter.
    AdapterNotFound {
        /// The request: a case-insensitive substring of the device name, or an index.
        requested: String,
        /// The devices there are, in enumeration order.
        available: Vec<String>,
    },
    /// The chosen physical device lacks something the driver needs.
    AdapterUnsuitable {
        /// The device's name.
        adapter: String,
        /// What it lacks.
        missing: &'static str,
    },
    /// The queue family lent with an application's handles ([`Gpu::from_raw_handles`]) cannot
    /// serve causeway.
    ///
    /// [`Gpu::from_raw_handles`]: crate::Gpu::from_raw_handles
    QueueFamilyUnsuitable {
        /// The family's index.
        family: u32,
        /// How many queue families the physical device has.
        families: u32,
        /// Why it cannot serve.
        why: &'static str,
    },
    /// An option (an environment variable) has a value the driver cannot read.
    InvalidOption {
        /// The option's name.
        name: &'static str,
        /// Its value.
        value: String,
        /// The values it accepts, and what each means.
        accepted: &'static str,
    },
    /// No memory type of the device allows a buffer to be host-visible and host-coherent.
    NoHostVisibleMemory {
        /// The memory types the buffer could live in (`VkMemoryRequirements::memoryTypeBits`).
        type_bits: u32,
    },
    /// An allocation is larger than the memory heap it would come from (or no memory type can
    /// hold it): Vulkan forbids asking (VUID-vkAllocateMemory-pAllocateInfo-01713), so the
    /// driver refuses it as the device would refuse memory it does not have.
    OutOfDeviceMemory {
        /// Bytes asked for.
        bytes: u64,
        /// The heap's size.
        heap: u64,
    },
    /// A host access to a buffer fell outside it.
    OutOfBounds {
        /// The first byte accessed.
        offset: u64,
        /// Bytes accessed.
        len: u64,
        /// The buffer's size.
        size: u64,
    },
    /// A host signal of a timeline would break the signal rules: the value is not above the
    /// current one (VUID-VkSemaphoreSignalInfo-value-03258), a device signal of the timeline is
    /// still pending (VUID-VkSemaphoreSignalInfo-value-03259), or the value is too far above the
    /// current one (VUID-VkSemaphoreSignalInfo-value-03260).
    InvalidHostSignal {
        /// The value asked for.
        value: u64,
        /// The timeline's value when refused.
        current: u64,
        /// The highest value a submitted device signal will set.
        pending_device_signal: u64,
    },
    /// A device signal of a timeline does not rise above its value or a device signal submitted
    /// before (VUID-VkSubmitInfo2-semaphore-03882).
    InvalidDeviceSignal {
        /// The value asked for.
        value: u64,
        /// The value it must exceed.
        current: u64,
    },
    /// A kernel launch or a recording is malformed (the text says how).
    InvalidLaunch(&'static str),
    /// A submission has more waits than [`MAX_NATIVE_WAITS`](crate::MAX_NATIVE_WAITS).
    TooManyWaits(usize),
    /// A command buffer was submitted again before its previous submission completed (it is
    /// recorded for one pending submission at a time).
    CommandBufferPending,
    /// There is no queue with this index.
    NoSuchQueue(usize),
    /// A compiled shader is not valid SPIR-V.
    Shader {
        /// The shader's name.
        name: &'static str,
    },
    /// The watcher holds as many registrations as it has room for: retry once some completed.
    WatcherFull {
        /// Its capacity.
        capacity: usize,
    },
    /// The watcher has stopped (asked to, or after a device error): nothing is watched any more.
    WatcherStopped,
    /// The watcher thread could not be started.
    WatcherThread {
        /// What the operating system said.
        detail: String,
    },
    /// The device has no such semaphore (a shared timeline was asked to follow it).
    NoSuchSemaphore(SemaphoreId),
    /// The causeway semaphore a shared timeline follows or mirrors failed: the import or
    /// export stopped ([`ImportedTimeline`](crate::ImportedTimeline),
    /// [`ExportedTimeline`](crate::ExportedTimeline)).
    SemaphoreFailed(Failure),
    /// The causeway semaphore refused an imported value for another reason than its failure
    /// (a tracked signal of it pending at or below the value): the import stopped.
    ExternalSignalRefused(SignalError),
    /// The thread of an imported or exported timeline could not be started.
    FollowerThread {
        /// What the operating system said.
        detail: String,
    },
    /// A Vulkan call returned an error (`VK_ERROR_DEVICE_LOST` among them).
    Vk {
        /// The Vulkan command.
        call: &'static str,
        /// What it returned.
        result: vk::Result,
    },
}

impl VulkanError {
    /// Wraps `result` of the Vulkan command `call`.
    pub(crate) fn vk(call: &'static str) -> impl FnOnce(vk::Result) -> VulkanError {
        move |result| VulkanError::Vk { call, result }
    }

    /// The raw `VkResult` a Vulkan command returned, for errors that come from one.
    pub fn vk_result(&self) -> Option<vk::Result> {
        match self {
            VulkanError::Vk { result, .. } => Some(*result),
            _ => None,
        }
    }

    /// Whether the device is lost: nothing submitted to it will complete.
    pub fn is_device_lost(&self) -> bool {
        matches!(self, VulkanError::Vk { result: vk::Result::ERROR_DEVICE_LOST, .. })
    }

    /// Whether memory ran out: the device's (`VK_ERROR_OUT_OF_DEVICE_MEMORY`, or a request
    /// larger than its heap) or the host's (`VK_ERROR_OUT_OF_HOST_MEMORY`).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(
            self,
            VulkanError::OutOfDeviceMemory { .. }
                | VulkanError::Vk {
                    result: vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
                        | vk::Result::ERROR_OUT_OF_HOST_MEMORY,
                    ..
                }
        )
    }
}

impl fmt::Display for VulkanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VulkanError::Loader { detail } => write!(
                f,
                "cannot load the Vulkan loader libvulkan.so.1 ({detail}); install the Debian \
                 package libvulkan1 (and mesa-vulkan-drivers for the lavapipe CPU device)"
            ),
            VulkanError::NoDevice => write!(
                f,
                "the Vulkan loader found no physical device (no ICD installed); install the Debian \
                 package mesa-vulkan-drivers for the lavapipe CPU device"
            ),
            VulkanError::ValidationLayerMissing { missing } => write!(
                f,
                "validation was requested but {missing} is not available; install the Debian \
                 package vulkan-validationlayers (or set CAUSEWAY_VULKAN_VALIDATION=0)"
            ),
            VulkanError::AdapterNotFound { requested, available } => write!(
                f,
                "no Vulkan adapter matches {requested:?} (a case-insensitive substring of the name, \
                 or an index); available: [{}]",
                available
                    .iter()
                    .enumerate()
                    .map(|(index, name)| format!("{index}: {name}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            VulkanError::AdapterUnsuitable { adapter, missing } => {
                write!(f, "Vulkan adapter {adapter:?} cannot run causeway: it lacks {missing}")
            }
            VulkanError::QueueFamilyUnsuitable { family, families, why } => write!(
                f,
                "queue family {family} cannot run causeway's work: {why} (the physical device \
                 has {families} queue families)"
            ),
            VulkanError::InvalidOption { name, value, accepted } => {
                write!(f, "{name}={value:?} is not one of its values: {accepted}")
            }
            VulkanError::NoHostVisibleMemory { type_bits } => write!(
                f,
                "no host-visible, host-coherent memory type among the buffer's types \
                 (bits {type_bits:#x})"
            ),
            VulkanError::OutOfDeviceMemory { bytes, heap } => write!(
                f,
                "cannot allocate {bytes} bytes of device memory: the memory heap holds {heap} bytes"
            ),
            VulkanError::OutOfBounds { offset, len, size } => write!(
                f,
                "host access of {len} bytes at {offset} is outside a buffer of {size} bytes"
            ),
            VulkanError::InvalidHostSignal { value, current, pending_device_signal } => write!(
                f,
                "cannot signal a timeline to {value} from the host: its value is {current} and a \
                 device signal up to {pending_device_signal} was submitted (a host signal must be \
                 above the current value, below every pending device signal, and within the device's \
                 maxTimelineSemaphoreValueDifference of the current value)"
            ),
            VulkanError::InvalidDeviceSignal { value, current } => write!(
                f,
                "cannot submit a signal of a timeline to {value}: it must rise above {current}"
            ),
            VulkanError::InvalidLaunch(why) => write!(f, "invalid kernel launch: {why}"),
            VulkanError::TooManyWaits(n) => write!(
                f,
                "{n} waits in one submission (at most {})",
                crate::submit::MAX_NATIVE_WAITS
            ),
            VulkanError::CommandBufferPending => {
                write!(f, "a command buffer was submitted again while its last submission runs")
            }
            VulkanError::NoSuchQueue(index) => write!(f, "no Vulkan queue {index}"),
            VulkanError::Shader { name } => write!(f, "shader {name} is not valid SPIR-V"),
            VulkanError::WatcherFull { capacity } => {
                write!(f, "the completion watcher is full ({capacity} registrations)")
            }
            VulkanError::WatcherStopped => write!(f, "the completion watcher has stopped"),
            VulkanError::WatcherThread { detail } => {
                write!(f, "cannot start the completion watcher thread: {detail}")
            }
            VulkanError::NoSuchSemaphore(id) => write!(f, "the device has no semaphore {id:?}"),
            VulkanError::SemaphoreFailed(failure) => {
                write!(f, "the shared causeway semaphore failed ({failure}): it is followed no more")
            }
            VulkanError::ExternalSignalRefused(refused) => write!(
                f,
                "the causeway semaphore refused a value of the imported timeline: {refused}"
            ),
            VulkanError::FollowerThread { detail } => {
                write!(f, "cannot start the thread of a shared timeline: {detail}")
            }
            VulkanError::Vk { call, result } => write!(f, "{call} failed: {result}"),
        }
    }
}

impl Error for VulkanError {}

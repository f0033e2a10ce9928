//! [`Gpu`]: the Vulkan instance, the chosen physical device, the logical device and its queues,
//! and (with validation on) the Khronos validation layer with synchronization validation, whose
//! warnings and errors are kept for tests to assert on. Either causeway creates them all
//! ([`Gpu::open`]) or the application lends the ones it owns ([`Gpu::from_raw_handles`]).

use std::ffi::{c_void, CStr};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ash::vk;
use causeway_core::unpoisoned::{Mutex, MutexGuard};

use crate::VulkanError;

/// The Khronos validation layer.
const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";
/// The validation-layer messages kept verbatim; later ones are only counted.
const KEPT_MESSAGES: usize = 32;

/// How to open a [`Gpu`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuOptions {
    /// The physical device: a case-insensitive substring of its name, or its index in
    /// enumeration order. `None`: the first device that can run causeway.
    pub adapter: Option<String>,
    /// Whether to enable `VK_LAYER_KHRONOS_validation`, with synchronization validation.
    pub validation: bool,
}

/// What `CAUSEWAY_VULKAN_VALIDATION` accepts, as its error lists it.
const VALIDATION_VALUES: &str = "1 (on), 0 or empty (off)";

impl GpuOptions {
    /// Options from the environment: `CAUSEWAY_VULKAN_ADAPTER` (unset or empty: the first
    /// suitable device) and `CAUSEWAY_VULKAN_VALIDATION` (`1` or `0`; unset: off).
    pub fn from_env() -> Result<GpuOptions, VulkanError> {
        GpuOptions::from_variables(|name| std::env::var(name).ok())
    }

    /// Options from variables looked up by `variable` (the environment, or a test's table).
    fn from_variables(
        variable: impl Fn(&str) -> Option<String>,
    ) -> Result<GpuOptions, VulkanError> {
        let adapter = variable("CAUSEWAY_VULKAN_ADAPTER").filter(|name| !name.is_empty());
        let validation = match variable("CAUSEWAY_VULKAN_VALIDATION") {
            None => false,
            Some(value) => match value.trim() {
                "" | "0" => false,
                "1" => true,
                _ => {
                    return Err(VulkanError::InvalidOption {
                        name: "CAUSEWAY_VULKAN_VALIDATION",
                        value,
                        accepted: VALIDATION_VALUES,
                    })
                }
            },
        };
        Ok(GpuOptions { adapter, validation })
    }
}

/// Vulkan handles an application already owns, lent to causeway by [`Gpu::from_raw_handles`].
/// They must come from `ash` 0.38, the version this crate is built with.
pub struct GpuHandles {
    /// The loaded Vulkan library the instance was created from.
    pub entry: ash::Entry,
    /// The instance.
    pub instance: ash::Instance,
    /// The physical device `device` was created on.
    pub physical_device: vk::PhysicalDevice,
    /// The logical device, created with the `timelineSemaphore` and `synchronization2` features
    /// enabled.
    pub device: ash::Device,
    /// The queue family of `queues`; it must support compute.
    pub queue_family: u32,
    /// The VkQueues of `queue_family` that causeway may submit to (at least one); causeway
    /// queue `i` uses `queues[i % queues.len()]`, as with its own device.
    pub queues: Vec<vk::Queue>,
}

/// Who destroys the device and the instance when the last [`Gpu`] handle goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ownership {
    /// [`Gpu::open`] created them: causeway destroys them.
    Created,
    /// The application lent them ([`Gpu::from_raw_handles`]): it destroys them, after the last
    /// handle is gone.
    Borrowed,
}

/// One VkQueue, behind the lock that `vkQueueSubmit2` needs: host access to a queue must be
/// externally synchronized, and several causeway queues may share one VkQueue.
pub(crate) type QueueLock = Mutex<vk::Queue>;

/// An opened Vulkan device. Cheap to clone (a shared handle); every object made from it holds a
/// clone, so the device is destroyed only after all of them, once it is idle.
#[derive(Clone)]
pub struct Gpu {
    pub(crate) shared: Arc<GpuShared>,
}

/// `vkQueueSubmit2` and `vkCmdPipelineBarrier2`: core on a Vulkan 1.3 device, from
/// `VK_KHR_synchronization2` on 1.2 (same signatures).
pub(crate) struct Synchronization2 {
    pub(crate) queue_submit2: vk::PFN_vkQueueSubmit2,
    pub(crate) cmd_pipeline_barrier2: vk::PFN_vkCmdPipelineBarrier2,
}

pub(crate) struct GpuShared {
    // `Drop` destroys the device, the messenger and the instance (those causeway created)
    // before any field drops, so the loaded library (`_entry`) and the log the messenger writes
    // to outlive them.
    _entry: ash::Entry,
    ownership: Ownership,
    instance: ash::Instance,
    messenger: Messenger,
    log: Box<ValidationLog>,
    adapter_name: String,
    limits: vk::PhysicalDeviceLimits,
    max_timeline_difference: u64,
    memory_properties: vk::PhysicalDeviceMemoryProperties,
    pub(crate) device: ash::Device,
    pub(crate) queue_family: u32,
    queues: Vec<QueueLock>,
    pub(crate) synchronization2: Synchronization2,
    native_waits: AtomicU64,
    /// Device memory blocks of stream-ordered allocations made so far, and alive now.
    memory_blocks_made: AtomicU64,
    memory_blocks_alive: AtomicU64,
    /// Results the next calls at each [`FaultPoint`] return instead of reaching Vulkan.
    #[cfg(feature = "fault-injection")]
    faults: Mutex<[Option<vk::Result>; FaultPoint::COUNT]>,
}

/// Device memory blocks of stream-ordered allocations ([`Gpu::memory_blocks`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryBlocks {
    /// Blocks allocated so far (`vkAllocateMemory` calls that succeeded).
    pub allocated: u64,
    /// Blocks alive now: backing a live allocation, or kept for reuse.
    pub alive: u64,
}

/// A Vulkan call of the driver that tests can make fail ([`Gpu::inject_fault`], with the cargo
/// feature `fault-injection`, which only the driver's own tests turn on): the failures a
/// working device never gives, such as `VK_ERROR_DEVICE_LOST` from a submission or from the
/// watcher's wait, or that lavapipe never gives, such as `VK_ERROR_OUT_OF_DEVICE_MEMORY` from
/// an allocation within its heap (it allocates lazily).
#[cfg(feature = "fault-injection")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultPoint {
    /// `vkQueueSubmit2` in [`submit`](crate::submit()).
    QueueSubmit,
    /// The [`Watcher`](crate::Watcher) thread's `vkWaitSemaphores`.
    WatcherWait,
    /// `vkAllocateMemory` of the device memory behind a stream-ordered allocation.
    AllocateMemory,
}

#[cfg(feature = "fault-injection")]
impl FaultPoint {
    const COUNT: usize = 3;

    fn index(self) -> usize {
        match self {
            FaultPoint::QueueSubmit => 0,
            FaultPoint::WatcherWait => 1,
            FaultPoint::AllocateMemory => 2,
        }
    }
}

/// What the debug messenger has seen (warnings and errors only).
#[derive(Default)]
struct ValidationLog {
    count: AtomicU64,
    messages: Mutex<Vec<String>>,
}

impl ValidationLog {
    fn messages(&self) -> MutexGuard<'_, Vec<String>> {
        self.messages.lock()
    }
}

/// The debug messenger's callback: counts warnings and errors and keeps the first
/// [`KEPT_MESSAGES`] of them.
///
/// # Safety
/// `user_data` is the `ValidationLog` given at messenger creation, which outlives the instance;
/// `data` is null or valid for the call (the Vulkan contract for this callback).
unsafe extern "system" fn on_validation_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user_data: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: `user_data` is the boxed log that `GpuShared` owns and drops only after the
    // instance (and so every messenger) is destroyed (see the function's contract).
    let log = unsafe { &*(user_data as *const ValidationLog) };
    log.count.fetch_add(1, Ordering::Relaxed);
    let mut kept = log.messages();
    if kept.len() < KEPT_MESSAGES {
        // SAFETY: `data` is null or points at callback data valid for this call (Vulkan's
        // contract for the callback), whose strings are null or NUL-terminated.
        let text = unsafe { data.as_ref() }.map_or_else(String::new, |data| {
            // SAFETY: as above, the strings of `data` are valid for the call.
            let (id, message) =
                unsafe { (data.message_id_name_as_c_str(), data.message_as_c_str()) };
            format!(
                "{severity:?}: [{}] {}",
                id.map_or_else(String::new, |id| id.to_string_lossy().into_owned()),
                message.map_or_else(String::new, |text| text.to_string_lossy().into_owned())
            )
        });
        kept.push(text);
    }
    vk::FALSE
}

impl Gpu {
    /// Opens the device `options` asks for: loads the Vulkan loader, creates an instance
    /// (API 1.3) with validation if asked, chooses a physical device with Vulkan ≥ 1.2,
    /// timeline semaphores and synchronization2, and creates a logical device with every queue
    /// of a compute-capable family.
    pub fn open(options: &GpuOptions) -> Result<Gpu, VulkanError> {
        // SAFETY: loading libvulkan runs its initialisers; the system loader is trusted to be a
        // well-behaved library (the premise of using Vulkan at all).
        let entry = unsafe { ash::Entry::load() }
            .map_err(|error| VulkanError::Loader { detail: error.to_string() })?;
        let log = Box::<ValidationLog>::default();
        let (instance, messenger) = create_instance(&entry, options.validation, &log)?;
        match open_device(&instance, options.adapter.as_deref()) {
            Ok(opened) => Ok(Gpu {
                shared: Arc::new(GpuShared {
                    _entry: entry,
                    ownership: Ownership::Created,
                    instance,
                    messenger,
                    log,
                    adapter_name: opened.adapter_name,
                    limits: opened.limits,
                    max_timeline_difference: opened.max_timeline_difference,
                    memory_properties: opened.memory_properties,
                    device: opened.device,
                    queue_family: opened.queue_family,
                    queues: opened.queues.into_iter().map(Mutex::new).collect(),
                    synchronization2: opened.synchronization2,
                    native_waits: AtomicU64::new(0),
                    memory_blocks_made: AtomicU64::new(0),
                    memory_blocks_alive: AtomicU64::new(0),
                    #[cfg(feature = "fault-injection")]
                    faults: Mutex::new([None; FaultPoint::COUNT]),
                }),
            }),
            Err(error) => {
                // SAFETY: nothing was made from the instance but the messenger (`open_device`
                // destroys what it made before failing); both are destroyed once, here.
                unsafe { destroy_instance(&instance, messenger) };
                Err(error)
            }
        }
    }

    /// A `Gpu` on Vulkan handles the application already owns: builds what [`Gpu::open`] builds
    /// around them without creating a device, an instance or a queue (and no validation
    /// messenger: [`validation_messages`](Gpu::validation_messages) stays empty; the application's
    /// own messenger hears the layer). Causeway still creates, and destroys, the objects it makes
    /// from the device (timelines, buffers, pipelines, command pools, memory). The last handle
    /// going waits for causeway's queues to be idle and destroys nothing of the application's.
    ///
    /// Checked, with a typed error: the physical device has Vulkan ≥ 1.2, supports the
    /// `timelineSemaphore` and `synchronization2` features (core on 1.3, `VK_KHR_synchronization2`
    /// on 1.2) and the device resolves their commands (a Vulkan 1.2 instance at least);
    /// `queue_family` is one of its families and supports compute; `queues` is not empty.
    ///
    /// # Safety
    /// What Vulkan gives no way to check, the caller guarantees:
    /// - the handles are valid and belong together: `physical_device` is one of `instance`'s,
    ///   `device` was created on it from `instance`, which `entry` loaded, and `queues` were got
    ///   from `device` in family `queue_family`;
    /// - `device` was created with the `timelineSemaphore` and `synchronization2` features enabled
    ///   (and, on a Vulkan 1.2 device, the `VK_KHR_synchronization2` extension);
    /// - the instance and the device stay alive until every clone of the returned `Gpu` and
    ///   everything made from it (backends, devices built on them, buffers, kernels, command
    ///   buffers, timelines, the watcher) is dropped;
    /// - while any of those lives, the application submits to (or otherwise uses, as Vulkan's
    ///   external-synchronization rule for `VkQueue` demands) one of `queues` only inside
    ///   [`Gpu::with_queue`] for it, which holds causeway's lock for that queue, or not at all;
    /// - work the application submits itself, on queues of its own, that uses a causeway object's
    ///   raw handle ([`Timeline::raw`](crate::Timeline::raw), [`Buffer::raw`](crate::Buffer::raw))
    ///   completes before that object is dropped: causeway waits only for its own queues.
    pub unsafe fn from_raw_handles(handles: GpuHandles) -> Result<Gpu, VulkanError> {
        let GpuHandles { entry, instance, physical_device, device, queue_family, queues } = handles;
        let candidate = examine(&instance, physical_device)?;
        if let Some(missing) = candidate.unsuitable {
            return Err(VulkanError::AdapterUnsuitable { adapter: candidate.name, missing });
        }
        // SAFETY: `physical_device` is one of the live `instance`'s (the caller's contract).
        let families =
            unsafe { instance.get_physical_device_queue_family_properties(physical_device) };
        check_queue_family(&families, queue_family)?;
        if queues.is_empty() {
            return Err(VulkanError::NoSuchQueue(0));
        }
        // The commands are looked up by name, not through `ash::Device`'s tables, whose missing
        // entries are stubs that panic: a device made from an instance created for an API
        // version older than 1.2 need not resolve them, whatever its physical device reports.
        // SAFETY: `device` was created from `instance` (the caller's contract); the names are
        // NUL-terminated.
        let resolves = |name: &CStr| unsafe {
            instance.get_device_proc_addr(device.handle(), name.as_ptr()).is_some()
        };
        // The Vulkan 1.2 commands of timeline semaphores, which `Timeline` and the watcher call
        // through `ash::Device`.
        if ![c"vkWaitSemaphores", c"vkSignalSemaphore", c"vkGetSemaphoreCounterValue"]
            .into_iter()
            .all(resolves)
        {
            return Err(VulkanError::AdapterUnsuitable {
                adapter: candidate.name,
                missing: "the Vulkan 1.2 commands (an instance created for API 1.2 or later)",
            });
        }
        let synchronization2 = load_synchronization2(&instance, &device, &candidate)?;
        // SAFETY: as above.
        let (max_timeline_difference, memory_properties) =
            unsafe { query_device_properties(&instance, physical_device) };
        Ok(Gpu {
            shared: Arc::new(GpuShared {
                _entry: entry,
                ownership: Ownership::Borrowed,
                instance,
                messenger: None,
                log: Box::default(),
                adapter_name: candidate.name,
                limits: candidate.properties.limits,
                max_timeline_difference,
                memory_properties,
                device,
                queue_family,
                queues: queues.into_iter().map(Mutex::new).collect(),
                synchronization2,
                native_waits: AtomicU64::new(0),
                memory_blocks_made: AtomicU64::new(0),
                memory_blocks_alive: AtomicU64::new(0),
                #[cfg(feature = "fault-injection")]
                faults: Mutex::new([None; FaultPoint::COUNT]),
            }),
        })
    }

    /// Runs `use_queue` with VkQueue `index` while holding causeway's lock for it: Vulkan requires
    /// host access to a queue (`vkQueueSubmit`, `vkQueueSubmit2`, `vkQueueWaitIdle`,
    /// `vkQueueBindSparse`, `vkQueuePresentKHR` …) to be externally synchronized, and causeway
    /// submits to it from several threads. An application that lent its queues
    /// ([`Gpu::from_raw_handles`]) uses them only through here while causeway holds them.
    ///
    /// `use_queue` must not call into causeway on this `Gpu` (submit, or drop a timeline or a
    /// command buffer, which may wait for the queue): the lock is not re-entrant.
    pub fn with_queue<R>(
        &self,
        index: usize,
        use_queue: impl FnOnce(vk::Queue) -> R,
    ) -> Result<R, VulkanError> {
        let queue = self.queue(index)?.lock();
        Ok(use_queue(*queue))
    }

    /// The physical device's name (lavapipe: `llvmpipe (LLVM …)`).
    pub fn adapter_name(&self) -> &str {
        &self.shared.adapter_name
    }

    /// How many VkQueues the device has (lavapipe: 1).
    pub fn queue_count(&self) -> usize {
        self.shared.queues.len()
    }

    /// The validation layer's warnings and errors so far (the first 32 verbatim); empty when
    /// validation is off or all was well, and always for a `Gpu` on the application's handles
    /// ([`Gpu::from_raw_handles`]), whose instance's messengers are the application's.
    pub fn validation_messages(&self) -> Vec<String> {
        self.shared.log.messages().clone()
    }

    /// How many warnings and errors the validation layer reported (all, not only those kept).
    pub fn validation_message_count(&self) -> u64 {
        self.shared.log.count.load(Ordering::Relaxed)
    }

    /// How many native semaphore waits were passed to `vkQueueSubmit2` so far (one per
    /// `(timeline, value)` wait of every successful [`submit`](crate::submit())).
    pub fn native_waits(&self) -> u64 {
        self.shared.native_waits.load(Ordering::Relaxed)
    }

    /// Device memory blocks that back stream-ordered allocations: how many were allocated so
    /// far, and how many are alive now (live, or kept for reuse by a later alloca).
    pub fn memory_blocks(&self) -> MemoryBlocks {
        MemoryBlocks {
            // Statistics read after the allocations they count are joined: no ordering needed.
            allocated: self.shared.memory_blocks_made.load(Ordering::Relaxed),
            alive: self.shared.memory_blocks_alive.load(Ordering::Relaxed),
        }
    }

    /// Counts a device memory block made (`made`) or freed.
    pub(crate) fn count_memory_block(&self, made: bool) {
        // Statistics, as above.
        if made {
            self.shared.memory_blocks_made.fetch_add(1, Ordering::Relaxed);
            self.shared.memory_blocks_alive.fetch_add(1, Ordering::Relaxed);
        } else {
            self.shared.memory_blocks_alive.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn count_native_waits(&self, waits: usize) {
        // A statistic read after the submissions it counts are joined: no ordering needed.
        self.shared.native_waits.fetch_add(waits as u64, Ordering::Relaxed);
    }

    /// The VkQueue `index` and its lock.
    pub(crate) fn queue(&self, index: usize) -> Result<&QueueLock, VulkanError> {
        self.shared.queues.get(index).ok_or(VulkanError::NoSuchQueue(index))
    }

    pub(crate) fn device(&self) -> &ash::Device {
        &self.shared.device
    }

    pub(crate) fn limits(&self) -> &vk::PhysicalDeviceLimits {
        &self.shared.limits
    }

    /// How far a timeline's value may be from any pending wait or signal of it
    /// (`maxTimelineSemaphoreValueDifference`).
    pub(crate) fn max_timeline_difference(&self) -> u64 {
        self.shared.max_timeline_difference
    }

    /// A memory type allowed by `type_bits` with all of `flags`.
    pub(crate) fn memory_type(
        &self,
        type_bits: u32,
        flags: vk::MemoryPropertyFlags,
    ) -> Option<u32> {
        let properties = &self.shared.memory_properties;
        (0..properties.memory_type_count).find(|&index| {
            type_bits & (1 << index) != 0
                && properties.memory_types[index as usize].property_flags.contains(flags)
        })
    }

    /// The size of the largest memory heap: no allocation can be larger.
    pub(crate) fn largest_heap(&self) -> u64 {
        let properties = &self.shared.memory_properties;
        let heaps = &properties.memory_heaps[..properties.memory_heap_count as usize];
        heaps.iter().map(|heap| heap.size).max().unwrap_or(0)
    }

    /// The size of the heap memory type `memory_type` allocates from.
    pub(crate) fn heap_of(&self, memory_type: u32) -> u64 {
        let properties = &self.shared.memory_properties;
        let heap = properties.memory_types[memory_type as usize].heap_index;
        properties.memory_heaps[heap as usize].size
    }

    /// Makes the next call at `point` return `result` (an error code that call may return)
    /// without reaching Vulkan, as if the device had answered it: a test hook for the error
    /// paths a working device never takes. Only with the `fault-injection` feature.
    #[cfg(feature = "fault-injection")]
    pub fn inject_fault(&self, point: FaultPoint, result: vk::Result) {
        self.shared.faults.lock()[point.index()] = Some(result);
    }

    /// The result injected for the next call at `point`, taken (see `inject_fault`).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn injected_fault(&self, point: FaultPoint) -> Option<vk::Result> {
        self.shared.faults.lock()[point.index()].take()
    }

    /// Waits until every queue causeway submits to is idle. Destroying an object the device may
    /// still use needs it. It is `vkQueueWaitIdle` on each, under its lock, not
    /// `vkDeviceWaitIdle`: that one needs every queue of the device externally synchronized,
    /// and of a device the application lent, it may use queues causeway knows nothing of. On a
    /// device causeway created, its queues are all the device's, so the two wait alike.
    pub(crate) fn wait_idle(&self) -> Result<(), VulkanError> {
        wait_queues_idle(&self.shared.device, &self.shared.queues)
    }
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("adapter", &self.shared.adapter_name)
            .field("queues", &self.shared.queues.len())
            .field("validation", &self.shared.messenger.is_some())
            .field("ownership", &self.shared.ownership)
            .finish_non_exhaustive()
    }
}

impl Drop for GpuShared {
    fn drop(&mut self) {
        match self.ownership {
            // SAFETY: this is the last handle: every object made from the device held one and
            // is gone, so after waiting for idle nothing uses the device; causeway created it
            // and the instance (`open`), and destroys them once, children first.
            Ownership::Created => unsafe {
                // A lost device is idle enough to destroy: the error changes nothing here.
                let _ = self.device.device_wait_idle();
                self.device.destroy_device(None);
                destroy_instance(&self.instance, self.messenger.take());
            },
            // The application's device and instance are its own to destroy. Every object
            // causeway made from them is gone already; what is left is to return only once
            // nothing causeway submitted still runs, so that the application may destroy the
            // device as soon as the last handle is gone (after its own work is idle). Its other
            // queues are not causeway's to wait on (see `wait_idle`). A lost device is idle
            // enough: the error changes nothing here.
            Ownership::Borrowed => {
                let _ = wait_queues_idle(&self.device, &self.queues);
            }
        }
    }
}

/// `vkQueueWaitIdle` on each of `queues`, with every queue's lock held, taken in index order
/// (the only place that takes more than one), so nothing is submitted to one while waiting for
/// another; the first error, after waiting on all.
fn wait_queues_idle(device: &ash::Device, queues: &[QueueLock]) -> Result<(), VulkanError> {
    let locked: Vec<_> = queues.iter().map(|queue| queue.lock()).collect();
    let mut result = Ok(());
    for queue in &locked {
        // SAFETY: the queue is the device's and the device is alive (the caller holds it);
        // holding the queue's lock is the external synchronization vkQueueWaitIdle requires.
        let waited = unsafe { device.queue_wait_idle(**queue) };
        if result.is_ok() {
            result = waited.map_err(VulkanError::vk("vkQueueWaitIdle"));
        }
    }
    result
}

/// Destroys the messenger, then the instance.
///
/// # Safety
/// Nothing else made from `instance` is alive, and neither is used again.
unsafe fn destroy_instance(instance: &ash::Instance, messenger: Messenger) {
    if let Some((debug_utils, messenger)) = messenger {
        // SAFETY: the messenger was made from this instance and is destroyed once (contract).
        unsafe { debug_utils.destroy_debug_utils_messenger(messenger, None) };
    }
    // SAFETY: all its children are gone (contract).
    unsafe { instance.destroy_instance(None) };
}

/// The debug messenger of an instance with validation on, and the functions to destroy it.
type Messenger = Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>;

fn create_instance(
    entry: &ash::Entry,
    validation: bool,
    log: &ValidationLog,
) -> Result<(ash::Instance, Messenger), VulkanError> {
    let application = vk::ApplicationInfo::default()
        .application_name(c"causeway")
        .engine_name(c"causeway")
        .api_version(vk::API_VERSION_1_3);
    let layers = [VALIDATION_LAYER.as_ptr()];
    let extensions =
        [ash::ext::debug_utils::NAME.as_ptr(), ash::ext::validation_features::NAME.as_ptr()];
    let synchronization_validation = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
    let mut features = vk::ValidationFeaturesEXT::default()
        .enabled_validation_features(&synchronization_validation);
    let messenger_info = || {
        vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_validation_message))
            .user_data(log as *const ValidationLog as *mut c_void)
    };
    // Two copies: the one chained into the instance's create info gets a `pNext` there, and
    // the messenger's own create info must have none.
    let mut instance_messenger_info = messenger_info();
    let mut info = vk::InstanceCreateInfo::default().application_info(&application);
    if validation {
        check_validation_layer(entry)?;
        // The messenger in the instance's chain also hears instance creation and destruction.
        info = info
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions)
            .push_next(&mut features)
            .push_next(&mut instance_messenger_info);
    }
    // SAFETY: `info` and everything it points at live across the call; the messenger's
    // `user_data` outlives the instance (the caller keeps the log until after destroying it).
    let instance =
        unsafe { entry.create_instance(&info, None) }.map_err(|result| match result {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => VulkanError::NoDevice,
            vk::Result::ERROR_LAYER_NOT_PRESENT => {
                VulkanError::ValidationLayerMissing { missing: "VK_LAYER_KHRONOS_validation" }
            }
            result => VulkanError::Vk { call: "vkCreateInstance", result },
        })?;
    if !validation {
        return Ok((instance, None));
    }
    let debug_utils = ash::ext::debug_utils::Instance::new(entry, &instance);
    // SAFETY: the instance is alive and has VK_EXT_debug_utils enabled; `messenger_info` is
    // valid, its `user_data` outliving the messenger (as above).
    match unsafe { debug_utils.create_debug_utils_messenger(&messenger_info(), None) } {
        Ok(messenger) => Ok((instance, Some((debug_utils, messenger)))),
        Err(result) => {
            // SAFETY: the instance has no children yet and is not used again.
            unsafe { instance.destroy_instance(None) };
            Err(VulkanError::Vk { call: "vkCreateDebugUtilsMessengerEXT", result })
        }
    }
}

/// Checks the validation layer is installed and provides the extensions validation needs.
fn check_validation_layer(entry: &ash::Entry) -> Result<(), VulkanError> {
    // SAFETY: a plain query of the loaded entry.
    let layers = unsafe { entry.enumerate_instance_layer_properties() }
        .map_err(VulkanError::vk("vkEnumerateInstanceLayerProperties"))?;
    if !layers.iter().any(|layer| layer.layer_name_as_c_str() == Ok(VALIDATION_LAYER)) {
        return Err(VulkanError::ValidationLayerMissing { missing: "VK_LAYER_KHRONOS_validation" });
    }
    // SAFETY: as above; the layer name is NUL-terminated.
    let layer_extensions =
        unsafe { entry.enumerate_instance_extension_properties(Some(VALIDATION_LAYER)) }
            .map_err(VulkanError::vk("vkEnumerateInstanceExtensionProperties"))?;
    // SAFETY: as above.
    let global_extensions = unsafe { entry.enumerate_instance_extension_properties(None) }
        .map_err(VulkanError::vk("vkEnumerateInstanceExtensionProperties"))?;
    let has = |name: &CStr| {
        layer_extensions
            .iter()
            .chain(&global_extensions)
            .any(|extension| extension.extension_name_as_c_str() == Ok(name))
    };
    if !has(ash::ext::validation_features::NAME) {
        return Err(VulkanError::ValidationLayerMissing { missing: "VK_EXT_validation_features" });
    }
    if !has(ash::ext::debug_utils::NAME) {
        return Err(VulkanError::ValidationLayerMissing { missing: "VK_EXT_debug_utils" });
    }
    Ok(())
}

struct OpenedDevice {
    adapter_name: String,
    limits: vk::PhysicalDeviceLimits,
    max_timeline_difference: u64,
    memory_properties: vk::PhysicalDeviceMemoryProperties,
    device: ash::Device,
    queue_family: u32,
    queues: Vec<vk::Queue>,
    synchronization2: Synchronization2,
}

/// What a physical device is, and why it cannot run causeway if it cannot.
struct Candidate {
    physical_device: vk::PhysicalDevice,
    name: String,
    properties: vk::PhysicalDeviceProperties,
    unsuitable: Option<&'static str>,
    needs_synchronization2_extension: bool,
    compute_family: Option<(u32, u32)>,
}

fn examine(
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
) -> Result<Candidate, VulkanError> {
    // SAFETY: `physical_device` was enumerated from this live instance.
    let properties = unsafe { instance.get_physical_device_properties(physical_device) };
    let name = properties
        .device_name_as_c_str()
        .map_or_else(|_| "(unnamed)".to_owned(), |name| name.to_string_lossy().into_owned());
    // SAFETY: as above.
    let extensions = unsafe { instance.enumerate_device_extension_properties(physical_device) }
        .map_err(VulkanError::vk("vkEnumerateDeviceExtensionProperties"))?;
    let has_synchronization2_extension = extensions.iter().any(|extension| {
        extension.extension_name_as_c_str() == Ok(ash::khr::synchronization2::NAME)
    });
    let version = properties.api_version;
    let core_synchronization2 = version >= vk::API_VERSION_1_3;
    // SAFETY: as above.
    let families = unsafe { instance.get_physical_device_queue_family_properties(physical_device) };
    let compute_family = families
        .iter()
        .position(|family| {
            family.queue_flags.contains(vk::QueueFlags::COMPUTE) && family.queue_count > 0
        })
        .map(|index| (index as u32, families[index].queue_count));
    let mut candidate = Candidate {
        physical_device,
        name,
        properties,
        unsuitable: None,
        needs_synchronization2_extension: !core_synchronization2,
        compute_family,
    };
    if let Some(missing) = missing_for_version(version, has_synchronization2_extension) {
        candidate.unsuitable = Some(missing);
        return Ok(candidate);
    }
    let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
    let mut synchronization2 = vk::PhysicalDeviceSynchronization2Features::default();
    let mut features = vk::PhysicalDeviceFeatures2::default()
        .push_next(&mut timeline)
        .push_next(&mut synchronization2);
    // SAFETY: as above; both chained structures are known to the device (core 1.2 timeline
    // semaphores; synchronization2 core or its extension present, checked above).
    unsafe { instance.get_physical_device_features2(physical_device, &mut features) };
    candidate.unsuitable = if timeline.timeline_semaphore == vk::FALSE {
        Some("the timelineSemaphore feature")
    } else if synchronization2.synchronization2 == vk::FALSE {
        Some("the synchronization2 feature")
    } else if candidate.compute_family.is_none() {
        Some("a compute-capable queue family")
    } else {
        None
    };
    Ok(candidate)
}

/// Chooses the physical device `adapter` names (or the first suitable one) and opens it.
fn open_device(
    instance: &ash::Instance,
    adapter: Option<&str>,
) -> Result<OpenedDevice, VulkanError> {
    // SAFETY: a plain query of the live instance.
    let physical_devices = unsafe { instance.enumerate_physical_devices() }
        .map_err(VulkanError::vk("vkEnumeratePhysicalDevices"))?;
    if physical_devices.is_empty() {
        return Err(VulkanError::NoDevice);
    }
    let candidates = physical_devices
        .into_iter()
        .map(|physical_device| examine(instance, physical_device))
        .collect::<Result<Vec<_>, _>>()?;
    let chosen = match adapter {
        Some(requested) => {
            let wanted = requested.to_lowercase();
            let by_index =
                requested.trim().parse::<usize>().ok().and_then(|index| candidates.get(index));
            let chosen = by_index.or_else(|| {
                candidates.iter().find(|candidate| candidate.name.to_lowercase().contains(&wanted))
            });
            chosen.ok_or_else(|| VulkanError::AdapterNotFound {
                requested: requested.to_owned(),
                available: candidates.iter().map(|candidate| candidate.name.clone()).collect(),
            })?
        }
        None => candidates
            .iter()
            .find(|candidate| candidate.unsuitable.is_none())
            .unwrap_or(&candidates[0]),
    };
    if let Some(missing) = chosen.unsuitable {
        return Err(VulkanError::AdapterUnsuitable { adapter: chosen.name.clone(), missing });
    }
    let Some((queue_family, queue_count)) = chosen.compute_family else {
        return Err(VulkanError::AdapterUnsuitable {
            adapter: chosen.name.clone(),
            missing: "a compute-capable queue family",
        });
    };
    let priorities = vec![1.0_f32; queue_count as usize];
    let queue_infos = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(queue_family)
        .queue_priorities(&priorities)];
    let extensions = [ash::khr::synchronization2::NAME.as_ptr()];
    let mut timeline =
        vk::PhysicalDeviceTimelineSemaphoreFeatures::default().timeline_semaphore(true);
    let mut synchronization2 =
        vk::PhysicalDeviceSynchronization2Features::default().synchronization2(true);
    let mut info = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queue_infos)
        .push_next(&mut timeline)
        .push_next(&mut synchronization2);
    if chosen.needs_synchronization2_extension {
        info = info.enabled_extension_names(&extensions);
    }
    // SAFETY: the physical device is the instance's; `info` and what it points at live across
    // the call; the features enabled were found supported by `examine`.
    let device = unsafe { instance.create_device(chosen.physical_device, &info, None) }
        .map_err(VulkanError::vk("vkCreateDevice"))?;
    let queues = (0..queue_count)
        // SAFETY: the family and indices are those the device was created with.
        .map(|index| unsafe { device.get_device_queue(queue_family, index) })
        .collect();
    let synchronization2 = match load_synchronization2(instance, &device, chosen) {
        Ok(synchronization2) => synchronization2,
        Err(error) => {
            // SAFETY: nothing was made from the device yet; it is not used again.
            unsafe { device.destroy_device(None) };
            return Err(error);
        }
    };
    // SAFETY: the physical device is the live instance's.
    let (max_timeline_difference, memory_properties) =
        unsafe { query_device_properties(instance, chosen.physical_device) };
    Ok(OpenedDevice {
        adapter_name: chosen.name.clone(),
        limits: chosen.properties.limits,
        max_timeline_difference,
        memory_properties,
        device,
        queue_family,
        queues,
        synchronization2,
    })
}

/// What a physical device of API `version` lacks that its version decides: Vulkan 1.2 itself,
/// and synchronization2 (core on 1.3, else its extension).
fn missing_for_version(version: u32, has_synchronization2_extension: bool) -> Option<&'static str> {
    if version < vk::API_VERSION_1_2 {
        Some("Vulkan 1.2")
    } else if version < vk::API_VERSION_1_3 && !has_synchronization2_extension {
        Some("synchronization2 (Vulkan 1.3 or VK_KHR_synchronization2)")
    } else {
        None
    }
}

/// Checks that queue family `family` of a physical device with `families` exists and runs
/// compute work.
fn check_queue_family(
    families: &[vk::QueueFamilyProperties],
    family: u32,
) -> Result<(), VulkanError> {
    let unsuitable =
        |why| VulkanError::QueueFamilyUnsuitable { family, families: families.len() as u32, why };
    let properties = families
        .get(family as usize)
        .ok_or(unsuitable("the physical device has no such family"))?;
    if !properties.queue_flags.contains(vk::QueueFlags::COMPUTE) {
        return Err(unsuitable("it does not support compute"));
    }
    Ok(())
}

/// `vkQueueSubmit2` and `vkCmdPipelineBarrier2` of `device`: the core commands on a Vulkan 1.3
/// device, else those of `VK_KHR_synchronization2` (`chosen` tells which the device has). They
/// are looked up by name so that a command the device does not resolve is an error, not
/// `ash`'s stub that panics when called.
fn load_synchronization2(
    instance: &ash::Instance,
    device: &ash::Device,
    chosen: &Candidate,
) -> Result<Synchronization2, VulkanError> {
    // A Vulkan 1.3 device made from an instance created for API 1.2 resolves no core 1.3
    // command, but the extension's, if the application enabled it: try both there.
    let core = !chosen.needs_synchronization2_extension;
    let lookup = |core_name: &CStr, extension_name: &CStr| {
        let names = if core {
            [Some(core_name), Some(extension_name)]
        } else {
            [Some(extension_name), None]
        };
        names
            .into_iter()
            .flatten()
            // SAFETY: `device` was created from the live `instance`; the names are
            // NUL-terminated.
            .find_map(|name| unsafe {
                instance.get_device_proc_addr(device.handle(), name.as_ptr())
            })
            .ok_or(VulkanError::AdapterUnsuitable {
                adapter: chosen.name.clone(),
                missing: "synchronization2 (Vulkan 1.3, or VK_KHR_synchronization2 enabled)",
            })
    };
    let submit = lookup(c"vkQueueSubmit2", c"vkQueueSubmit2KHR")?;
    let barrier = lookup(c"vkCmdPipelineBarrier2", c"vkCmdPipelineBarrier2KHR")?;
    // SAFETY: each pointer is the device's command of that name, whose signature is the one
    // transmuted to (the KHR commands are aliases of the core ones, same signature).
    Ok(unsafe {
        Synchronization2 {
            queue_submit2: std::mem::transmute::<unsafe extern "system" fn(), vk::PFN_vkQueueSubmit2>(
                submit,
            ),
            cmd_pipeline_barrier2: std::mem::transmute::<
                unsafe extern "system" fn(),
                vk::PFN_vkCmdPipelineBarrier2,
            >(barrier),
        }
    })
}

/// The physical device's `maxTimelineSemaphoreValueDifference` and memory properties.
///
/// # Safety
/// `physical_device` is one of the live `instance`'s, a Vulkan 1.2 one (where timeline
/// semaphore properties are core; `examine` checks it).
unsafe fn query_device_properties(
    instance: &ash::Instance,
    physical_device: vk::PhysicalDevice,
) -> (u64, vk::PhysicalDeviceMemoryProperties) {
    let mut timeline_properties = vk::PhysicalDeviceTimelineSemaphoreProperties::default();
    let mut properties =
        vk::PhysicalDeviceProperties2::default().push_next(&mut timeline_properties);
    // SAFETY: plain queries of the instance's physical device, whose version allows the
    // chained structure (the function's contract).
    let memory_properties = unsafe {
        instance.get_physical_device_properties2(physical_device, &mut properties);
        instance.get_physical_device_memory_properties(physical_device)
    };
    (timeline_properties.max_timeline_semaphore_value_difference, memory_properties)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(variables: &[(&str, &str)]) -> Result<GpuOptions, VulkanError> {
        GpuOptions::from_variables(|name| {
            variables.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn options_from_the_environment() {
        assert_eq!(options(&[]), Ok(GpuOptions { adapter: None, validation: false }));
        assert_eq!(
            options(&[
                ("CAUSEWAY_VULKAN_ADAPTER", "llvmpipe"),
                ("CAUSEWAY_VULKAN_VALIDATION", "1")
            ]),
            Ok(GpuOptions { adapter: Some("llvmpipe".into()), validation: true })
        );
        assert_eq!(
            options(&[("CAUSEWAY_VULKAN_ADAPTER", ""), ("CAUSEWAY_VULKAN_VALIDATION", "0")]),
            Ok(GpuOptions { adapter: None, validation: false })
        );
        let refused = options(&[("CAUSEWAY_VULKAN_VALIDATION", "yes")]).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "CAUSEWAY_VULKAN_VALIDATION=\"yes\" is not one of its values: 1 (on), 0 or empty (off)"
        );
    }

    #[test]
    fn a_device_older_than_vulkan_1_2_or_without_synchronization2_is_refused() {
        assert_eq!(missing_for_version(vk::API_VERSION_1_1, true), Some("Vulkan 1.2"));
        assert_eq!(missing_for_version(vk::API_VERSION_1_0, false), Some("Vulkan 1.2"));
        assert_eq!(
            missing_for_version(vk::API_VERSION_1_2, false),
            Some("synchronization2 (Vulkan 1.3 or VK_KHR_synchronization2)")
        );
        assert_eq!(missing_for_version(vk::API_VERSION_1_2, true), None);
        assert_eq!(missing_for_version(vk::API_VERSION_1_3, false), None);
    }

    #[test]
    fn a_lent_queue_family_must_exist_and_run_compute() {
        let family = |flags| vk::QueueFamilyProperties {
            queue_flags: flags,
            queue_count: 1,
            ..Default::default()
        };
        let families = [family(vk::QueueFlags::TRANSFER), family(vk::QueueFlags::COMPUTE)];
        assert_eq!(check_queue_family(&families, 1), Ok(()));
        assert_eq!(
            check_queue_family(&families, 0),
            Err(VulkanError::QueueFamilyUnsuitable {
                family: 0,
                families: 2,
                why: "it does not support compute"
            })
        );
        assert_eq!(
            check_queue_family(&families, 2),
            Err(VulkanError::QueueFamilyUnsuitable {
                family: 2,
                families: 2,
                why: "the physical device has no such family"
            })
        );
    }
}

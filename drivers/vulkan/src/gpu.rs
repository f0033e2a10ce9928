//! [`Gpu`]: the Vulkan instance, the chosen physical device, the logical device and its queues,
//! and (with validation on) the Khronos validation layer with synchronization validation, whose
//! warnings and errors are kept for tests to assert on.

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
    // `Drop` destroys the device, the messenger and the instance before any field drops, so
    // the loaded library (`_entry`) and the log the messenger writes to outlive them.
    _entry: ash::Entry,
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

    /// The physical device's name (lavapipe: `llvmpipe (LLVM …)`).
    pub fn adapter_name(&self) -> &str {
        &self.shared.adapter_name
    }

    /// How many VkQueues the device has (lavapipe: 1).
    pub fn queue_count(&self) -> usize {
        self.shared.queues.len()
    }

    /// The validation layer's warnings and errors so far (the first 32 verbatim); empty when
    /// validation is off or all was well.
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

    /// Waits until the device is idle. Destroying an object the device may still use needs it;
    /// `vkDeviceWaitIdle` needs every queue's lock, taken in index order (the only place that
    /// takes more than one).
    pub(crate) fn wait_idle(&self) -> Result<(), VulkanError> {
        let _queues: Vec<_> = self.shared.queues.iter().map(|queue| queue.lock()).collect();
        // SAFETY: the device is alive (we hold a handle) and every queue's lock is held, the
        // external synchronization vkDeviceWaitIdle requires.
        unsafe { self.shared.device.device_wait_idle() }
            .map_err(VulkanError::vk("vkDeviceWaitIdle"))
    }
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("adapter", &self.shared.adapter_name)
            .field("queues", &self.shared.queues.len())
            .field("validation", &self.shared.messenger.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for GpuShared {
    fn drop(&mut self) {
        // SAFETY: this is the last handle: every object made from the device held one and is
        // gone, so after waiting for idle nothing uses the device; it and then the instance are
        // destroyed once, children first.
        unsafe {
            // A lost device is idle enough to destroy: the error changes nothing here.
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
            destroy_instance(&self.instance, self.messenger.take());
        }
    }
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
    if version < vk::API_VERSION_1_2 {
        candidate.unsuitable = Some("Vulkan 1.2");
        return Ok(candidate);
    }
    if !core_synchronization2 && !has_synchronization2_extension {
        candidate.unsuitable = Some("synchronization2 (Vulkan 1.3 or VK_KHR_synchronization2)");
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
    let synchronization2 = if chosen.needs_synchronization2_extension {
        let extension = ash::khr::synchronization2::Device::new(instance, &device);
        Synchronization2 {
            queue_submit2: extension.fp().queue_submit2_khr,
            cmd_pipeline_barrier2: extension.fp().cmd_pipeline_barrier2_khr,
        }
    } else {
        Synchronization2 {
            queue_submit2: device.fp_v1_3().queue_submit2,
            cmd_pipeline_barrier2: device.fp_v1_3().cmd_pipeline_barrier2,
        }
    };
    let mut timeline_properties = vk::PhysicalDeviceTimelineSemaphoreProperties::default();
    let mut properties =
        vk::PhysicalDeviceProperties2::default().push_next(&mut timeline_properties);
    // SAFETY: a plain query of the instance's physical device, a Vulkan 1.2 one (checked by
    // `examine`), where timeline semaphore properties are core.
    unsafe { instance.get_physical_device_properties2(chosen.physical_device, &mut properties) };
    // SAFETY: a plain query of the instance's physical device.
    let memory_properties =
        unsafe { instance.get_physical_device_memory_properties(chosen.physical_device) };
    Ok(OpenedDevice {
        adapter_name: chosen.name.clone(),
        limits: chosen.properties.limits,
        max_timeline_difference: timeline_properties.max_timeline_semaphore_value_difference,
        memory_properties,
        device,
        queue_family,
        queues,
        synchronization2,
    })
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
}

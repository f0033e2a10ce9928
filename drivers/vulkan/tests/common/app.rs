//! The application's own Vulkan, as an application with its own `ash` set-up would make it to
//! lend causeway (`Gpu::from_raw_handles`): an instance with the Khronos validation layer
//! (synchronization validation on) and a debug messenger of its own, the adapter
//! `CAUSEWAY_VULKAN_ADAPTER` names, a device with timeline semaphores and synchronization2 and
//! one compute queue, all destroyed by the test itself: `caller_owned.rs` and
//! `shared_timelines.rs` share it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ash::vk;
use causeway_driver_vulkan::{Gpu, GpuHandles};

/// What the application's debug messenger heard: warnings and errors.
#[derive(Default)]
struct Log {
    count: AtomicU64,
    messages: Mutex<Vec<String>>,
}

/// The test's messenger callback: counts and keeps every warning and error.
///
/// # Safety
/// `user_data` is the `Log` given at messenger creation, alive until the instance is destroyed;
/// `data` is null or valid for the call (the Vulkan contract for this callback).
unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user_data: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: `user_data` is the boxed `Log` of an `AppVulkan`, dropped only after its instance
    // (see the function's contract).
    let log = unsafe { &*(user_data as *const Log) };
    log.count.fetch_add(1, Ordering::Relaxed);
    // SAFETY: `data` is null or valid for the call, its message null or NUL-terminated.
    let message = unsafe { data.as_ref().and_then(|data| data.message_as_c_str()) };
    let text = message.map_or_else(String::new, |text| text.to_string_lossy().into_owned());
    log.messages
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(format!("{severity:?}: {text}"));
    vk::FALSE
}

/// The application's own Vulkan: what it created, and destroys, itself.
pub struct AppVulkan {
    entry: ash::Entry,
    instance: ash::Instance,
    debug_utils: ash::ext::debug_utils::Instance,
    messenger: vk::DebugUtilsMessengerEXT,
    log: Box<Log>,
    physical_device: vk::PhysicalDevice,
    /// The device, for the application's own calls.
    pub device: ash::Device,
    /// The compute queue family of `queue`.
    pub family: u32,
    /// How many queue families the physical device has.
    pub families: u32,
    /// The device's one queue.
    pub queue: vk::Queue,
}

impl AppVulkan {
    /// An instance created for `api_version`, with validation (synchronization validation on)
    /// when `validation`, and a messenger for warnings and errors either way; the physical
    /// device `CAUSEWAY_VULKAN_ADAPTER` names by substring (lavapipe, `llvmpipe`, when unset);
    /// a device with timeline semaphores and synchronization2 (from their extensions where the
    /// version is below the one that made them core) and one queue of its first compute family.
    pub fn create(api_version: u32, validation: bool) -> AppVulkan {
        // SAFETY: loading the system's Vulkan loader, trusted as `Gpu::open` trusts it.
        let entry = unsafe { ash::Entry::load() }.expect("the Vulkan loader (libvulkan1)");
        let log = Box::<Log>::default();
        let application = vk::ApplicationInfo::default()
            .application_name(c"application-owned Vulkan test")
            .api_version(api_version);
        let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
        // The loader itself provides VK_EXT_debug_utils; the layer provides the other.
        let extensions =
            [ash::ext::debug_utils::NAME.as_ptr(), ash::ext::validation_features::NAME.as_ptr()];
        let enables = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features =
            vk::ValidationFeaturesEXT::default().enabled_validation_features(&enables);
        let mut info = vk::InstanceCreateInfo::default().application_info(&application);
        info = if validation {
            info.enabled_layer_names(&layers)
                .enabled_extension_names(&extensions)
                .push_next(&mut features)
        } else {
            info.enabled_extension_names(&extensions[..1])
        };
        // SAFETY: `info` and what it points at live across the call.
        let instance = unsafe { entry.create_instance(&info, None) }
            .expect("an instance with VK_LAYER_KHRONOS_validation (vulkan-validationlayers)");
        let debug_utils = ash::ext::debug_utils::Instance::new(&entry, &instance);
        let messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_message))
            .user_data(&*log as *const Log as *mut c_void);
        // SAFETY: the instance has VK_EXT_debug_utils; the log outlives the messenger (both are
        // this `AppVulkan`'s, and `destroy` destroys the messenger first).
        let messenger = unsafe { debug_utils.create_debug_utils_messenger(&messenger_info, None) }
            .expect("a debug messenger");

        let wanted = std::env::var("CAUSEWAY_VULKAN_ADAPTER")
            .ok()
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "llvmpipe".to_owned())
            .to_lowercase();
        // SAFETY: a plain query of the live instance.
        let physical_devices =
            unsafe { instance.enumerate_physical_devices() }.expect("physical devices");
        let (physical_device, properties) = physical_devices
            .into_iter()
            .map(|physical_device| {
                // SAFETY: the physical device is the live instance's.
                (physical_device, unsafe {
                    instance.get_physical_device_properties(physical_device)
                })
            })
            .find(|(_, properties)| {
                properties
                    .device_name_as_c_str()
                    .is_ok_and(|name| name.to_string_lossy().to_lowercase().contains(&wanted))
            })
            .unwrap_or_else(|| panic!("no physical device named like {wanted:?}"));
        // SAFETY: as above.
        let family_properties =
            unsafe { instance.get_physical_device_queue_family_properties(physical_device) };
        let family = family_properties
            .iter()
            .position(|family| family.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .expect("a compute queue family") as u32;

        let priorities = [1.0_f32];
        let queue_infos = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let synchronization2_extension = [ash::khr::synchronization2::NAME.as_ptr()];
        let both_extensions = [
            ash::khr::synchronization2::NAME.as_ptr(),
            ash::khr::timeline_semaphore::NAME.as_ptr(),
        ];
        let mut timeline =
            vk::PhysicalDeviceTimelineSemaphoreFeatures::default().timeline_semaphore(true);
        let mut synchronization2 =
            vk::PhysicalDeviceSynchronization2Features::default().synchronization2(true);
        let mut device_info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queue_infos)
            .push_next(&mut timeline)
            .push_next(&mut synchronization2);
        // Timeline semaphores are core from Vulkan 1.2 and synchronization2 from 1.3 (for a
        // device, the lower of its own version and the instance's); before, their extensions.
        let version = properties.api_version.min(api_version);
        if version < vk::API_VERSION_1_2 {
            device_info = device_info.enabled_extension_names(&both_extensions);
        } else if version < vk::API_VERSION_1_3 {
            device_info = device_info.enabled_extension_names(&synchronization2_extension);
        }
        // SAFETY: the physical device is the instance's; `device_info` lives across the call.
        let device = unsafe { instance.create_device(physical_device, &device_info, None) }
            .expect("a device with timeline semaphores and synchronization2");
        // SAFETY: family and index are those the device was created with.
        let queue = unsafe { device.get_device_queue(family, 0) };
        AppVulkan {
            entry,
            instance,
            debug_utils,
            messenger,
            log,
            physical_device,
            device,
            family,
            families: family_properties.len() as u32,
            queue,
        }
    }

    /// The handles to lend causeway: the same objects, the application keeping its own copies
    /// (an `ash` handle is a table of functions; copying it creates nothing).
    pub fn handles(&self, queue_family: u32, queues: Vec<vk::Queue>) -> GpuHandles {
        GpuHandles {
            entry: self.entry.clone(),
            instance: self.instance.clone(),
            physical_device: self.physical_device,
            device: self.device.clone(),
            queue_family,
            queues,
        }
    }

    /// Lends causeway the device and its one queue ([`handles`](Self::handles)).
    pub fn lend(&self) -> Gpu {
        // SAFETY: the handles are the ones `create` made from one another, the device with
        // timeline semaphores and synchronization2; every test drops the `Gpu` and what it made
        // before `destroy`, and touches the queue only through `with_queue` meanwhile.
        unsafe { Gpu::from_raw_handles(self.handles(self.family, vec![self.queue])) }
            .unwrap_or_else(|error| panic!("cannot lend the device: {error}"))
    }

    /// Destroys the device, the messenger and the instance, returning the warnings and errors
    /// the validation layer reported (the device's destruction included: leaked objects).
    ///
    /// Everything causeway made from the device must be gone by now.
    pub fn destroy(self) -> Vec<String> {
        // SAFETY: causeway let go of the device (every `Gpu` and what it made is dropped), so
        // the application's own wait needs no lock of causeway's; then each object is
        // destroyed once, children before parents.
        unsafe {
            self.device.device_wait_idle().expect("vkDeviceWaitIdle");
            self.device.destroy_device(None);
            self.debug_utils.destroy_debug_utils_messenger(self.messenger, None);
            self.instance.destroy_instance(None);
        }
        let messages =
            std::mem::take(&mut *self.log.messages.lock().unwrap_or_else(|e| e.into_inner()));
        assert_eq!(self.log.count.load(Ordering::Relaxed), messages.len() as u64);
        messages
    }

    /// [`destroy`](Self::destroy), failing the test on any validation message.
    pub fn destroy_clean(self) {
        let messages = self.destroy();
        assert!(
            messages.is_empty(),
            "{} validation messages:\n{}",
            messages.len(),
            messages.join("\n")
        );
    }
}

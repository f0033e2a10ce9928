//! A `Gpu` on Vulkan handles the application owns (`Gpu::from_raw_handles`), as an application
//! with its own `ash` set-up would lend them: the test creates the instance (with the Khronos
//! validation layer, synchronization validation and its own debug messenger), picks lavapipe,
//! creates the device and destroys both itself. CPU → Vulkan → CPU work on it is right and the
//! validation layer reports nothing, not even a leaked object when the test destroys the device
//! after causeway let go of it. Handles causeway cannot use (a queue family that does not exist,
//! no queue, an instance created for Vulkan 1.1) are typed errors.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ash::vk;
use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use causeway_core::semaphore::Failure;
use causeway_device::{Device, Op, QueueConfig, WaitOutcome, Work};
use causeway_driver_cpu::CpuBackend;
use causeway_driver_vulkan::{Buffer, Gpu, GpuHandles, Kernel, Step, VulkanBackend, VulkanError};
use causeway_runtime::blocking::wait;
use causeway_runtime::PoolConfig;

const ELEMENTS: usize = 4096;
const BYTES: u64 = ELEMENTS as u64 * 4;
/// The hang guard of every host wait, as generous as the other tests' (`HANG_GUARD`,
/// whose module this test does not use: it opens no device through `Gpu::open`).
const HANG_GUARD: Duration = Duration::from_secs(120);

/// What the test's own debug messenger heard: warnings and errors.
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
struct AppVulkan {
    entry: ash::Entry,
    instance: ash::Instance,
    debug_utils: ash::ext::debug_utils::Instance,
    messenger: vk::DebugUtilsMessengerEXT,
    log: Box<Log>,
    physical_device: vk::PhysicalDevice,
    device: ash::Device,
    family: u32,
    families: u32,
    queue: vk::Queue,
}

impl AppVulkan {
    /// An instance with validation (synchronization validation on) and a messenger for
    /// warnings and errors; the physical device `CAUSEWAY_VULKAN_ADAPTER` names by substring
    /// (lavapipe, `llvmpipe`, when unset); a device with timeline semaphores and
    /// synchronization2 and one queue of its first compute family. The instance is created for
    /// `api_version`; below 1.2 the device gets the two features from their extensions.
    fn create(api_version: u32) -> AppVulkan {
        // SAFETY: loading the system's Vulkan loader, trusted as `Gpu::open` trusts it.
        let entry = unsafe { ash::Entry::load() }.expect("the Vulkan loader (libvulkan1)");
        let log = Box::<Log>::default();
        let application = vk::ApplicationInfo::default()
            .application_name(c"caller-owned test")
            .api_version(api_version);
        let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
        let extensions =
            [ash::ext::debug_utils::NAME.as_ptr(), ash::ext::validation_features::NAME.as_ptr()];
        let enables = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features =
            vk::ValidationFeaturesEXT::default().enabled_validation_features(&enables);
        let info = vk::InstanceCreateInfo::default()
            .application_info(&application)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions)
            .push_next(&mut features);
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
    fn handles(&self, queue_family: u32, queues: Vec<vk::Queue>) -> GpuHandles {
        GpuHandles {
            entry: self.entry.clone(),
            instance: self.instance.clone(),
            physical_device: self.physical_device,
            device: self.device.clone(),
            queue_family,
            queues,
        }
    }

    /// Destroys the device, the messenger and the instance, returning the warnings and errors
    /// the validation layer reported (the device's destruction included: leaked objects).
    ///
    /// Everything causeway made from the device must be gone by now.
    fn destroy(self) -> Vec<String> {
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
}

#[test]
fn cpu_to_vulkan_to_cpu_on_the_applications_own_device_is_right_and_validation_clean() {
    let app = AppVulkan::create(vk::API_VERSION_1_3);
    // SAFETY: the handles are the ones `app` just created from one another, the device with
    // timeline semaphores and synchronization2; `app` destroys them only after every causeway
    // object below is dropped, and touches the queue only through `with_queue` meanwhile.
    let gpu = unsafe { Gpu::from_raw_handles(app.handles(app.family, vec![app.queue])) }
        .unwrap_or_else(|error| panic!("cannot lend the device: {error}"));
    assert_eq!(gpu.queue_count(), 1);
    assert!(!gpu.adapter_name().is_empty());

    let mut backend = VulkanBackend::new(gpu.clone());
    let buffers = [(); 3].map(|()| Buffer::new(&gpu, BYTES).expect("buffer"));
    let [a, b, c] = buffers.clone();
    let add = Kernel::add(&gpu).expect("add").launch(&[&a, &b, &c], ELEMENTS as u32, 4, 0.0);
    let add = backend.command_buffer(vec![vec![Step::Dispatch(add.expect("launch"))]]);
    let add = Work::Execute(add.expect("record"));

    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let vulkan = builder.driver(backend);
    let cpu = builder.driver(CpuBackend::new());
    let (producer, gpu_queue, consumer) = (
        builder.queue(QueueConfig::on(cpu)),
        builder.queue(QueueConfig::on(vulkan)),
        builder.queue(QueueConfig::on(cpu)),
    );
    let home = builder.endpoint(producer).unwrap();
    let [inputs, sums, checked] = [(); 3].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    let write = builder.host_call(move || {
        let a_values: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
        let b_values: Vec<f32> = (0..ELEMENTS).map(|i| (2 * i) as f32 + 0.5).collect();
        a.write_f32(0, &a_values).map_err(|_| Failure::Application(1))?;
        b.write_f32(0, &b_values).map_err(|_| Failure::Application(1))
    });
    let wrong = Arc::new(AtomicU32::new(u32::MAX));
    let wrong_seen = Arc::clone(&wrong);
    let check = builder.host_call(move || {
        let sums = c.read_f32(0, ELEMENTS).map_err(|_| Failure::Application(2))?;
        let wrong = (0..ELEMENTS).filter(|&i| sums[i] != (3 * i) as f32 + 0.5).count();
        wrong_seen.store(wrong as u32, Ordering::Relaxed);
        Ok(())
    });
    let device = builder.build().unwrap();

    let write_op = Op { waits: &[], signals: &[(inputs, 1)], work: Work::Host(write), tag: 1 };
    assert_eq!(device.submit(producer, &write_op).unwrap().failure, None);
    let add_op = Op { waits: &[(inputs, 1)], signals: &[(sums, 1)], work: add, tag: 2 };
    assert_eq!(device.submit(gpu_queue, &add_op).unwrap().failure, None);
    let check_op =
        Op { waits: &[(sums, 1)], signals: &[(checked, 1)], work: Work::Host(check), tag: 3 };
    // The layer resolves the check's wait on the Vulkan operation as timing has it (a device
    // wait while the add runs, satisfied once it ended); never held, as the signal is already
    // submitted. Whichever, the check runs after the sums.
    let receipt = device.submit(consumer, &check_op).unwrap();
    match receipt.waits.as_slice() {
        [WaitOutcome::Resolved(resolved)] => {
            assert_ne!(resolved.resolution, Resolution::Held);
            println!("the check's wait: {:?}", resolved.resolution);
        }
        other => panic!("one resolved wait: {other:?}"),
    }
    assert_eq!(receipt.failure, None);
    // Every operation ended ok: each signal reached its value, none failed.
    for semaphore in [inputs, sums, checked] {
        assert_eq!(wait(device.semaphore(semaphore).unwrap(), 1, Some(HANG_GUARD)), Ok(1));
    }
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "every sum right");
    let report = device.shutdown(HANG_GUARD);
    assert!(!report.leaked && report.busy_drivers.is_empty(), "{report:?}");

    // The application may use the queue it lent, under causeway's lock for it.
    // SAFETY: the queue is the device's, and `with_queue` holds its lock across the call.
    let idle = gpu.with_queue(0, |queue| unsafe { app.device.queue_wait_idle(queue) });
    assert_eq!(idle, Ok(Ok(())));
    assert_eq!(gpu.with_queue(1, |_| ()), Err(VulkanError::NoSuchQueue(1)));
    assert!(
        gpu.validation_messages().is_empty(),
        "a lent instance gets no messenger of causeway's"
    );

    drop(buffers);
    drop(gpu);
    let messages = app.destroy();
    assert!(
        messages.is_empty(),
        "{} validation messages:\n{}",
        messages.len(),
        messages.join("\n")
    );
}

#[test]
fn a_queue_family_that_does_not_exist_and_no_queues_are_typed_errors() {
    let app = AppVulkan::create(vk::API_VERSION_1_3);
    // SAFETY: the handles are `app`'s, from one another, its device with the features causeway
    // needs; no queue is lent (the family is checked before any would be used), and `app`
    // outlives the call, whose `Gpu` is never made.
    let refused = unsafe { Gpu::from_raw_handles(app.handles(app.families, Vec::new())) };
    match refused {
        Err(VulkanError::QueueFamilyUnsuitable { family, families, .. }) => {
            assert_eq!((family, families), (app.families, app.families));
        }
        other => panic!("expected QueueFamilyUnsuitable, got {other:?}"),
    }
    // SAFETY: as above, with the device's own compute family.
    let refused = unsafe { Gpu::from_raw_handles(app.handles(app.family, Vec::new())) };
    assert_eq!(refused.unwrap_err(), VulkanError::NoSuchQueue(0));
    let messages = app.destroy();
    assert!(
        messages.is_empty(),
        "{} validation messages:\n{}",
        messages.len(),
        messages.join("\n")
    );
}

#[test]
fn an_instance_created_for_vulkan_1_1_is_a_typed_error() {
    // The physical device reports 1.2 or later, but a device made from an instance created for
    // 1.1 has none of the core 1.2 commands causeway's timelines call.
    let app = AppVulkan::create(vk::API_VERSION_1_1);
    // SAFETY: the handles are `app`'s, from one another, its device with both features (from
    // their extensions); `app` outlives the call.
    let refused = unsafe { Gpu::from_raw_handles(app.handles(app.family, vec![app.queue])) };
    match refused {
        Err(VulkanError::AdapterUnsuitable { missing, .. }) => {
            assert!(missing.contains("Vulkan 1.2 commands"), "{missing}");
        }
        other => panic!("expected AdapterUnsuitable, got {other:?}"),
    }
    let messages = app.destroy();
    assert!(
        messages.is_empty(),
        "{} validation messages:\n{}",
        messages.len(),
        messages.join("\n")
    );
}

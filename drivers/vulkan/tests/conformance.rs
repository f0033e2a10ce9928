//! The device layer's conformance suite (`causeway-device-cts`) on the Vulkan driver, on
//! lavapipe with validation and synchronization validation on (`common::open`): kernels are
//! recorded compute dispatches, device waits between Vulkan queues are timeline waits (counted
//! against the layer's device waits), and every case ends by checking that the validation
//! layer reported nothing. A missing loader, lavapipe or validation layer fails every case:
//! nothing is skipped.

mod common;

use causeway_device::Work;
use causeway_device_cts::{
    conformance_suite, Availability, DriverInstance, DriverUnderTest, Kernels,
};
use causeway_driver_vulkan::{Buffer, Kernel, Step, VulkanBackend};

/// Elements of the short kernel's buffers: one small dispatch.
const SHORT_ELEMENTS: u32 = 64;
/// Copies of the short kernel: a recorded command buffer runs once at a time, so the
/// throughput case rotates through these to keep several operations on the device.
const SHORT_COPIES: usize = 7;
/// Elements of the long kernel's buffers, and its regions (each a dispatch over all of them,
/// a barrier between): enough for lavapipe to be busy for a while.
const LONG_ELEMENTS: u32 = 1 << 20;
const LONG_REGIONS: usize = 16;

/// The Vulkan driver on the adapter `CAUSEWAY_VULKAN_ADAPTER` names, as the suite sees it.
struct Vulkan;

/// `c = a + b` over `elements` `f32`s, in `regions` dispatches one after the other.
fn add(backend: &mut VulkanBackend, elements: u32, regions: usize) -> Work {
    let gpu = backend.gpu().clone();
    let bytes = u64::from(elements) * 4;
    let [a, b, c] = [(); 3].map(|()| Buffer::new(&gpu, bytes).expect("a buffer"));
    let kernel = Kernel::add(&gpu).expect("the add kernel");
    let launch = || Step::Dispatch(kernel.launch(&[&a, &b, &c], elements, 4, 0.0).expect("launch"));
    let recorded = backend.command_buffer((0..regions).map(|_| vec![launch()]).collect());
    Work::Execute(recorded.expect("a recording"))
}

impl DriverUnderTest for Vulkan {
    type Backend = VulkanBackend;

    fn name(&self) -> &'static str {
        "vulkan"
    }

    /// lavapipe is part of the test machines' set-up (`scripts/vulkan.sh`): its absence is a
    /// failure of `instance`, never a skip.
    fn availability(&self) -> Availability {
        Availability::Available
    }

    fn instance(&self) -> DriverInstance<VulkanBackend> {
        let gpu = common::open();
        let mut backend = VulkanBackend::new(gpu.clone());
        let short = add(&mut backend, SHORT_ELEMENTS, 1);
        let short_copies =
            (0..SHORT_COPIES).map(|_| add(&mut backend, SHORT_ELEMENTS, 1)).collect();
        let long = add(&mut backend, LONG_ELEMENTS, LONG_REGIONS);
        let counted = gpu.clone();
        DriverInstance {
            backend,
            // A failing dispatch is not something Vulkan can express without losing the
            // device; the driver's fault paths are `tests/faults.rs`'.
            kernels: Kernels { short, short_copies, long, failing: None },
            native_waits: Some(Box::new(move || counted.native_waits())),
            after_case: Some(Box::new(move || common::assert_validation_clean(&gpu))),
        }
    }
}

conformance_suite!(Vulkan);

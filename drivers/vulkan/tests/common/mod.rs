//! What every test of the Vulkan driver shares: opening lavapipe with validation on, and the
//! closing check that the validation layer reported nothing; and (`app`) the application's own
//! Vulkan set-up that the tests of lent devices and shared timelines make.

use std::time::Duration;

use causeway_driver_vulkan::{Gpu, GpuOptions};

#[allow(dead_code, reason = "used by the test binaries of devices the application lends")]
pub mod app;

// Each test binary compiles this module; the one that only opens devices never waits.
#[allow(dead_code, reason = "unused by the test binary that never waits")]
/// The hang guard of every host wait: generous, since lavapipe shares 2 cores with other builds.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

#[allow(dead_code, reason = "unused by the test binaries on devices the application lends")]
/// Opens the device `CAUSEWAY_VULKAN_ADAPTER` names (lavapipe on the test machines) with
/// validation and synchronization validation on. A missing loader, ICD or layer fails the test
/// with the error, which names the package to install: these tests never skip.
pub fn open() -> Gpu {
    let mut options = GpuOptions::from_env().unwrap_or_else(|error| panic!("{error}"));
    options.validation = true;
    Gpu::open(&options).unwrap_or_else(|error| panic!("cannot open a Vulkan device: {error}"))
}

/// The same device with validation off, for the few tests that pin behaviour the validation
/// layer 1.3.239 cannot follow: a host wait or a device signal that meets a host signal of the
/// same timeline whose call has not yet returned at times stalls the layer's tracking for
/// seconds and ends in `UNASSIGNED-VkSemaphore-state-timeout` ("most likely a validation bug",
/// KhronosGroup/Vulkan-ValidationLayers#4649). The driver itself never waits on the host for a
/// value a host signal of its own reaches (see `Timeline`), so its own paths stay under
/// validation (an imported application semaphore is the application's to signal:
/// `shared_timelines.rs`).
#[allow(dead_code, reason = "unused by the test binaries whose tests all run under validation")]
pub fn open_without_validation() -> Gpu {
    let mut options = GpuOptions::from_env().unwrap_or_else(|error| panic!("{error}"));
    options.validation = false;
    Gpu::open(&options).unwrap_or_else(|error| panic!("cannot open a Vulkan device: {error}"))
}

#[allow(dead_code, reason = "unused by the test binaries on devices the application lends")]
/// Asserts the validation layer reported no warning or error.
pub fn assert_validation_clean(gpu: &Gpu) {
    let messages = gpu.validation_messages();
    assert!(
        messages.is_empty() && gpu.validation_message_count() == 0,
        "{} validation messages, the first:\n{}",
        gpu.validation_message_count(),
        messages.join("\n")
    );
}

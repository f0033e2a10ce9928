//! Opening the device: lavapipe (or the adapter named) with validation, and the typed error
//! for an adapter that matches nothing.

mod common;

use causeway_driver_vulkan::{Gpu, GpuOptions, VulkanError};

#[test]
fn opens_a_device_with_validation_and_reports_its_name() {
    let gpu = common::open();
    println!("adapter: {} ({} queues)", gpu.adapter_name(), gpu.queue_count());
    assert!(!gpu.adapter_name().is_empty());
    assert!(gpu.queue_count() >= 1);
    if std::env::var("CAUSEWAY_VULKAN_ADAPTER").is_err() {
        // The test machines have lavapipe only; its device is llvmpipe.
        assert!(gpu.adapter_name().contains("llvmpipe"), "{}", gpu.adapter_name());
    }
    common::assert_validation_clean(&gpu);
}

#[test]
fn an_adapter_that_matches_nothing_is_a_typed_error_listing_the_adapters() {
    let options = GpuOptions { adapter: Some("no such adapter, surely".into()), validation: true };
    match Gpu::open(&options) {
        Err(VulkanError::AdapterNotFound { requested, available }) => {
            assert_eq!(requested, "no such adapter, surely");
            assert!(!available.is_empty());
            let message = VulkanError::AdapterNotFound { requested, available: available.clone() }
                .to_string();
            for name in &available {
                assert!(message.contains(name.as_str()), "{message}");
            }
        }
        other => panic!("expected AdapterNotFound, got {other:?}"),
    }
}

#[test]
fn an_adapter_index_past_the_end_is_not_found() {
    let options = GpuOptions { adapter: Some("4096".into()), validation: false };
    assert!(matches!(Gpu::open(&options), Err(VulkanError::AdapterNotFound { .. })));
}

#[test]
fn the_adapter_named_by_index_zero_opens() {
    let gpu = Gpu::open(&GpuOptions { adapter: Some("0".into()), validation: true })
        .unwrap_or_else(|error| panic!("cannot open adapter 0: {error}"));
    assert!(!gpu.adapter_name().is_empty());
    common::assert_validation_clean(&gpu);
}

#[test]
fn missing_packages_are_named_in_errors() {
    assert!(VulkanError::Loader { detail: "gone".into() }.to_string().contains("libvulkan1"));
    assert!(VulkanError::NoDevice.to_string().contains("mesa-vulkan-drivers"));
    let layer = VulkanError::ValidationLayerMissing { missing: "VK_LAYER_KHRONOS_validation" };
    assert!(layer.to_string().contains("vulkan-validationlayers"));
}

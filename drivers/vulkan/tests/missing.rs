//! What a machine without lavapipe or without the validation layer gets: a typed error naming
//! the package to install. Checked in child processes of this test binary whose Vulkan loader
//! is pointed at an empty driver or layer path (the parent's environment is left alone).

use std::process::Command;

use causeway_driver_vulkan::{Gpu, GpuOptions};

/// Set in a child: it reports what opening a device with validation came to.
const CHILD: &str = "CAUSEWAY_VULKAN_TEST_CHILD";

/// In a child, prints what opening came to; run as a test of its own, opens the machine's
/// device with validation (and fails, naming the package, if it cannot).
#[test]
fn open_with_validation() {
    let opened = Gpu::open(&GpuOptions { adapter: None, validation: true });
    if std::env::var_os(CHILD).is_some() {
        match opened {
            Ok(gpu) => println!("child opened: {}", gpu.adapter_name()),
            Err(error) => println!("child error: {error}"),
        }
    } else {
        let gpu = opened.unwrap_or_else(|error| panic!("cannot open a Vulkan device: {error}"));
        assert!(!gpu.adapter_name().is_empty());
    }
}

/// Runs `open_with_validation` in a child with `variables` set; returns the error it printed.
fn error_in_child(variables: &[(&str, &str)]) -> String {
    let output = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "open_with_validation", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .envs(variables.iter().copied())
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The test harness prints the test's name on the same line, before the child's output.
    match stdout.split_once("child error: ") {
        Some((_, rest)) => rest.lines().next().unwrap_or_default().to_owned(),
        None => panic!(
            "the child opened a device or failed otherwise:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

#[test]
fn no_vulkan_driver_names_mesa_vulkan_drivers() {
    let error = error_in_child(&[
        ("VK_ICD_FILENAMES", "/nonexistent/causeway/icd.json"),
        ("VK_DRIVER_FILES", "/nonexistent/causeway/icd.json"),
    ]);
    assert!(error.contains("mesa-vulkan-drivers"), "{error}");
}

#[test]
fn no_validation_layer_names_vulkan_validationlayers() {
    let error = error_in_child(&[
        ("VK_LAYER_PATH", "/nonexistent/causeway"),
        ("XDG_DATA_DIRS", "/nonexistent/causeway"),
    ]);
    assert!(error.contains("vulkan-validationlayers"), "{error}");
}

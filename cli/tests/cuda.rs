//! The bundled scenarios with CUDA queues through the `causeway` binary: where no CUDA driver
//! is installed each exits 2 naming the missing driver (and nothing panics); with `--all-cpu` the
//! same file runs on the CPU driver; where a driver is installed it runs its CUDA queues on it.

// Linux only: the scenario is found by its path in the source tree, which the Windows build
// under wine would not see the same way (and wine has no CUDA driver either).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use causeway_driver_cuda::{driver_present, NO_DRIVER};

/// Every bundled CUDA scenario, so one added later is covered too.
fn cuda_scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/cuda");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenario in {}", dir.display());
    files
}

fn causeway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

#[test]
fn every_cuda_scenario_runs_on_cuda_or_exits_2_naming_the_missing_driver() {
    for scenario in cuda_scenarios() {
        let scenario = scenario.to_str().expect("the source tree's paths are UTF-8");
        let output = causeway(&["run", scenario, "--quiet"]);
        let message = String::from_utf8_lossy(&output.stderr);
        if driver_present() {
            assert!(output.status.success(), "{scenario}: {message}");
        } else {
            assert_eq!(output.status.code(), Some(2), "{scenario}: {message}");
            assert!(message.contains("names the cuda driver"), "{scenario}: {message}");
            assert!(message.contains(NO_DRIVER), "{scenario}: {message}");
            assert!(message.contains("--all-cpu"), "{scenario}: {message}");
            assert!(!message.contains("panicked"), "{scenario}: {message}");
            println!("{scenario}: skipped: {NO_DRIVER}");
        }
        let output = causeway(&["run", scenario, "--quiet", "--all-cpu"]);
        assert!(output.status.success(), "{scenario}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

/// Every bundled scenario with Vulkan queues, their `driver` changed to `cuda` and nothing
/// else: accepted at load (CUDA runs compute and copy work too); where no CUDA driver is
/// installed it exits 2 naming it, and runs with `--all-cpu`; where one is, it runs to the end
/// with every compute and copy result right (its expectations, written for Vulkan's
/// wait-before-signal, are reported but not required: CUDA holds waits Vulkan issues).
#[test]
fn vulkan_scenarios_run_on_cuda_unchanged_but_for_the_driver() {
    let dir = std::env::temp_dir().join(format!("causeway-cli-cuda-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut converted = 0;
    for entry in std::fs::read_dir(&scenarios).unwrap() {
        let path = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        if !text.contains("driver = \"vulkan\"") {
            continue;
        }
        let copy = dir.join(path.file_name().unwrap());
        std::fs::write(&copy, text.replace("driver = \"vulkan\"", "driver = \"cuda\"")).unwrap();
        let copy = copy.to_str().unwrap();
        let output = causeway(&["run", copy]);
        let (stdout, stderr) =
            (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        if driver_present() {
            assert!(matches!(output.status.code(), Some(0 | 1)), "{copy}: {stderr}");
            assert!(stdout.contains(", 0 wrong"), "{copy}: {stdout}");
        } else {
            assert_eq!(output.status.code(), Some(2), "{copy}: {stderr}");
            assert!(stderr.contains(NO_DRIVER), "{copy}: {stderr}");
            assert!(!stderr.contains("cannot run this work"), "{copy}: {stderr}");
        }
        let output = causeway(&["run", copy, "--quiet", "--all-cpu"]);
        assert!(output.status.success(), "{copy}: {}", String::from_utf8_lossy(&output.stderr));
        converted += 1;
    }
    assert!(converted >= 5, "only {converted} Vulkan scenarios found");
    if !driver_present() {
        println!("{converted} scenarios on CUDA: skipped: {NO_DRIVER}");
    }
}

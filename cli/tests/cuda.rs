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

#[test]
fn compute_on_a_cuda_queue_is_refused_at_load_naming_queue_and_driver() {
    let dir = std::env::temp_dir().join(format!("causeway-cli-cuda-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("compute-on-cuda.toml");
    let text = "name = \"x\"\n[[queue]]\nname = \"gpu\"\ndriver = \"cuda\"\n[[op]]\nname = \"a\"\n\
                queue = \"gpu\"\nwork = { kind = \"compute\", kernel = \"add\", elements = 64, \
                tiles = 1, regions = 1 }\n";
    std::fs::write(&path, text).unwrap();
    let output = causeway(&["run", path.to_str().unwrap()]);
    let message = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("queue `gpu` (driver cuda) cannot run this work"), "{message}");
    assert!(message.contains("CUDA queues run spin, sleep, tiles"), "{message}");
}

//! A scenario with CUDA queues through the `causeway` binary: where no CUDA driver is
//! installed it exits 2 naming the missing driver (and nothing panics); with `--all-cpu` the
//! same file runs on the CPU driver; where a driver is installed it runs its CUDA queues on it.

// Linux only: the scenario is found by its path in the source tree, which the Windows build
// under wine would not see the same way (and wine has no CUDA driver either).
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use causeway_driver_cuda::{driver_present, NO_DRIVER};

const SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/cuda/cuda-tiles.toml");

fn causeway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

#[test]
fn a_cuda_scenario_runs_on_cuda_or_exits_2_naming_the_missing_driver() {
    assert!(Path::new(SCENARIO).exists(), "{SCENARIO}");
    let output = causeway(&["run", SCENARIO, "--quiet"]);
    let message = String::from_utf8_lossy(&output.stderr);
    if driver_present() {
        assert!(output.status.success(), "{message}");
    } else {
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(message.contains("queue `gpu-a` names the cuda driver"), "{message}");
        assert!(message.contains(NO_DRIVER), "{message}");
        assert!(message.contains("--all-cpu"), "{message}");
        assert!(!message.contains("panicked"), "{message}");
        println!("skipped: {NO_DRIVER}");
    }
    let output = causeway(&["run", SCENARIO, "--quiet", "--all-cpu"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
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

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

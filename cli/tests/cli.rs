//! The `causeway` binary end to end: bundled scenarios, reports, traces and bad input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn causeway(args: &[&str]) -> Output {
    causeway_with(args, &[])
}

/// `causeway args` with `variables` added to its environment.
fn causeway_with(args: &[&str], variables: &[(&str, &str)]) -> Output {
    causeway_in(&std::env::current_dir().unwrap(), args, variables)
}

/// `causeway args` run in `dir`, with `variables` added to its environment.
fn causeway_in(dir: &Path, args: &[&str], variables: &[(&str, &str)]) -> Output {
    // Under wine, CreateProcess fails with ERROR_INTERNAL_ERROR whenever the new process dies in
    // wine's own start-up, before any of its code runs: wine reports every such early death with
    // that code, whatever ended the process. The CLI never started, so spawning it again is safe.
    // The retry is bounded and written to the real stderr, past the harness's capture of
    // `eprintln!`, so the log shows every time it fires.
    const ERROR_INTERNAL_ERROR: i32 = 1359;
    const ATTEMPTS: u32 = 3;
    let mut command = Command::new(env!("CARGO_BIN_EXE_causeway"));
    command.args(args).envs(variables.iter().copied()).current_dir(dir);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut attempt = 1;
    let child = loop {
        match command.spawn() {
            Err(error)
                if cfg!(windows)
                    && error.raw_os_error() == Some(ERROR_INTERNAL_ERROR)
                    && attempt < ATTEMPTS =>
            {
                let _ = writeln!(
                    std::io::stderr(),
                    "cli test: spawning causeway {args:?} failed on attempt {attempt} of \
                     {ATTEMPTS} with {error} (a process that died in wine's start-up); retrying"
                );
                attempt += 1;
            }
            spawned => break spawned.expect("the binary runs"),
        }
    };
    child.wait_with_output().expect("the binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn write_scenario(name: &str, text: &str) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Whether this platform has a Vulkan device for the tests: Linux, where the test command
/// installs lavapipe. Windows (under wine) has none: its Vulkan queues run on the CPU driver
/// there (`--all-cpu`), which the test says as it does so.
const VULKAN: bool = cfg!(target_os = "linux");

#[test]
fn every_bundled_scenario_meets_its_expectations() {
    let listing = causeway(&["scenarios"]);
    assert!(listing.status.success());
    let listing = String::from_utf8(listing.stdout).unwrap();
    let names: Vec<&str> =
        listing.lines().map(|line| line.split_whitespace().next().unwrap()).collect();
    assert_eq!(names.len(), 22, "{listing}");
    let (mut on_vulkan, mut on_npu) = (0, 0);
    for name in names {
        let file =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(format!("{name}.toml"));
        let report = scratch(&format!("{name}-report.json"));
        let mut args = vec!["run", file.to_str().unwrap(), "--report", report.to_str().unwrap()];
        if !VULKAN {
            args.push("--all-cpu");
        }
        let output = causeway(&args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{name}: {stdout}\n{}", stderr(&output));
        assert!(stdout.contains("all met"), "{name}: {stdout}");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let npu_queues =
            report["queues"].as_array().unwrap().iter().filter(|q| q["driver"] == "npu").count();
        // Device waits of operations on `driver`'s queues that a rejection of speculation
        // cancelled: never issued, so they reached no driver.
        let cancelled_device_waits = |driver: &str| -> u64 {
            let queues: Vec<&Value> = (report["queues"].as_array().unwrap().iter())
                .filter(|q| q["driver"] == driver)
                .map(|q| &q["name"])
                .collect();
            let ops = report["ops"].as_array().unwrap().iter();
            let cancelled =
                ops.filter(|op| op["status"] == "cancelled" && queues.contains(&&op["queue"]));
            let waits = cancelled.flat_map(|op| op["waits"].as_array().unwrap().iter());
            waits.filter(|wait| wait["resolution"] == "device").count() as u64
        };
        if npu_queues == 0 {
            assert!(report["npu"].is_null(), "{name}: {}", report["npu"]);
        } else {
            on_npu += 1;
            // WAIT-descriptor accounting: every device wait on an NPU queue is one WAIT
            // descriptor, and nothing else is (but those of cancelled operations, never issued).
            let npu = &report["npu"];
            let emitted = npu["wait_descriptors"].as_u64().unwrap() + cancelled_device_waits("npu");
            assert_eq!(Some(emitted), npu["device_waits"].as_u64(), "{name}: {npu}");
            assert!(npu["waits"].as_u64() >= npu["device_waits"].as_u64(), "{name}: {npu}");
        }
        let vulkan_queues =
            report["queues"].as_array().unwrap().iter().filter(|q| q["driver"] == "vulkan").count();
        if vulkan_queues == 0 {
            assert!(report["vulkan"].is_null(), "{name}: {}", report["vulkan"]);
            continue;
        }
        on_vulkan += 1;
        if name == "cross-driver" {
            // A Vulkan queue's wait on a CPU queue's work is held by the layer.
            let compute =
                report["ops"].as_array().unwrap().iter().find(|op| op["name"] == "compute");
            assert_eq!(compute.unwrap()["waits"][0]["resolution"], "held", "{name}");
        }
        if name == "remote-pipeline" {
            // In one process the GPUs share the Vulkan driver: task1 waits natively (held only
            // across ranks, where its values come from another machine; cli/tests/ranks.rs).
            let task1 = report["ops"].as_array().unwrap().iter().find(|op| op["name"] == "task1");
            for wait in task1.unwrap()["waits"].as_array().unwrap() {
                let resolution = wait["resolution"].as_str().unwrap();
                assert!(["device", "satisfied"].contains(&resolution), "{name}: {wait}");
            }
        }
        // Native-wait accounting: every device wait on a Vulkan queue is one native wait in
        // vkQueueSubmit2, and nothing else is (but those of cancelled operations, never issued).
        let vulkan = &report["vulkan"];
        let native = vulkan["native_waits"].as_u64().unwrap() + cancelled_device_waits("vulkan");
        assert_eq!(Some(native), vulkan["device_waits"].as_u64(), "{name}: {vulkan}");
        assert!(vulkan["waits"].as_u64() >= vulkan["device_waits"].as_u64(), "{name}: {vulkan}");
    }
    if VULKAN {
        assert_eq!(on_vulkan, 8, "the bundled scenarios whose queues model GPUs run on Vulkan");
        assert_eq!(
            on_npu, 3,
            "multi-domain, cpu-npu-vulkan and speculation-cascade run NPU queues"
        );
    } else {
        println!(
            "no Vulkan device on this platform: every queue ran on the CPU driver (--all-cpu)"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_vulkan_scenario_without_a_vulkan_driver_exits_2_naming_the_package() {
    // The loader pointed at a driver manifest that does not exist: no Vulkan device at all.
    let no_driver = [
        ("VK_ICD_FILENAMES", "/nonexistent/causeway/icd.json"),
        ("VK_DRIVER_FILES", "/nonexistent/causeway/icd.json"),
    ];
    let output = causeway_with(&["run", "cross-driver", "--quiet"], &no_driver);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("queue `gpu` names the vulkan driver"), "{message}");
    assert!(message.contains("mesa-vulkan-drivers"), "{message}");
    assert!(message.contains("--all-cpu"), "{message}");
    // A bundled scenario is named as it was given, not by a path that may not exist here.
    assert!(message.starts_with("error: cross-driver: "), "{message}");
    // The same scenario on the CPU driver alone runs, and says where its queues ran.
    let report = scratch("cross-driver-cpu.json");
    let all_cpu =
        ["run", "cross-driver", "--quiet", "--all-cpu", "--report", report.to_str().unwrap()];
    let output = causeway_with(&all_cpu, &no_driver);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(report["queues"].as_array().unwrap().iter().all(|q| q["driver"] == "cpu"));
}

#[test]
fn work_a_queue_s_driver_cannot_run_is_refused_at_load_naming_queue_and_driver() {
    let path = write_scenario(
        "spin-on-vulkan.toml",
        "name = \"x\"\n[[queue]]\nname = \"gpu\"\ndriver = \"vulkan\"\n[[op]]\nname = \"a\"\nqueue = \"gpu\"\nwork = { kind = \"spin\", us = 5 }\n",
    );
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("spin-on-vulkan.toml:8"), "{message}");
    assert!(message.contains("queue `gpu` (driver vulkan) cannot run this work"), "{message}");
}

#[cfg(target_os = "linux")]
#[test]
fn cpu_npu_vulkan_frontiers_span_three_drivers_and_the_npu_counts_its_wait_descriptors() {
    let report = scratch("cpu-npu-vulkan-report.json");
    let output =
        causeway(&["run", "cpu-npu-vulkan", "--quiet", "--report", report.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let queue = |name: &str| {
        let queues = report["queues"].as_array().unwrap();
        queues.iter().find(|q| q["name"] == name).unwrap().clone()
    };
    assert_eq!(queue("upload")["driver"], "cpu");
    for npu in ["encoder", "refiner"] {
        assert_eq!(queue(npu)["driver"], "npu");
        assert_eq!(queue(npu)["adapter"], "causeway software NPU model");
    }
    assert_eq!(queue("gpu")["driver"], "vulkan");
    let op = |name: &str| {
        let ops = report["ops"].as_array().unwrap();
        ops.iter().find(|op| op["name"] == name).unwrap().clone()
    };
    let resolutions = |name: &str| -> Vec<String> {
        let waits = op(name)["waits"].as_array().unwrap().clone();
        waits.iter().map(|wait| wait["resolution"].as_str().unwrap().to_string()).collect()
    };
    // CPU → NPU is a device wait on the NPU driver's mirror of the CPU queue (host-written
    // waits); NPU → NPU is a device wait; NPU → Vulkan is held; what the GPU and the refiner
    // learned transitively is elided.
    assert_eq!(resolutions("encode"), ["device"]);
    assert_eq!(resolutions("refine"), ["device"]);
    assert_eq!(resolutions("refine-needs-inputs"), ["elided"]);
    assert_eq!(resolutions("score"), ["held"]);
    assert_eq!(resolutions("score-needs-inputs"), ["elided", "elided"]);
    let axes = |name: &str| -> Vec<String> {
        let frontier = op(name)["frontier"].as_array().unwrap().clone();
        frontier.iter().map(|point| point["axis"].as_str().unwrap().to_string()).collect()
    };
    for axis in ["upload", "encoder", "refiner", "gpu", "host"] {
        assert!(axes("done").iter().any(|a| a == axis), "{axis} in {:?}", axes("done"));
    }
    // Two WAIT descriptors (encode's on the upload queue's mirror, refine's on the encoder's
    // progress), none for the elided wait.
    let npu = &report["npu"];
    assert_eq!(npu["adapter"], "causeway software NPU model");
    assert_eq!(npu["wait_descriptors"], 2, "{npu}");
    assert_eq!(npu["device_waits"], 2, "{npu}");
    assert_eq!(npu["elided"], 1, "{npu}");
    assert_eq!(npu["held"], 0, "{npu}");
    assert_eq!(npu["waits"], 3, "{npu}");
    assert!(report["ops"].as_array().unwrap().iter().all(|op| op["status"] == "ok"));
}

#[test]
fn a_rejection_cancels_exactly_the_dependent_work_across_drivers_with_reasons_in_the_report() {
    let report = scratch("speculation-cascade-report.json");
    let output =
        causeway(&["run", "speculation-cascade", "--quiet", "--report", report.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let drivers: Vec<&str> = (report["queues"].as_array().unwrap().iter())
        .map(|queue| queue["driver"].as_str().unwrap())
        .collect();
    assert_eq!(drivers, ["cpu", "npu", "npu", "cpu"]);
    let dependent = ["draft3", "refine3", "rank3", "emit3"];
    for op in report["ops"].as_array().unwrap() {
        let name = op["name"].as_str().unwrap();
        if dependent.contains(&name) {
            assert_eq!(op["status"], "cancelled", "{op}");
            assert_eq!(op["cancelled"], "speculation", "{op}");
        } else {
            assert_eq!(op["status"], "ok", "{op}");
            assert!(op.get("cancelled").is_none(), "{op}");
        }
        assert!(op.get("ran_on_rejected").is_none(), "{op}");
    }
    // The cancelled operations' signals stay in the histories, marked; nothing ran on
    // rejected work.
    let history = (report["semaphores"].as_array().unwrap().iter())
        .flat_map(|semaphore| semaphore["history"].as_array().unwrap());
    let cancelled = history.clone().filter(|entry| entry.get("cancelled").is_some());
    assert!(cancelled.clone().count() > 0, "{}", report["semaphores"]);
    assert!(cancelled.clone().all(|entry| entry["cancelled"] == true));
    assert!(history.clone().all(|entry| entry.get("ran_on_rejected").is_none()));
    // A cancel names a queue, on the host only.
    let unknown = refused(
        "cancel-unknown-queue.toml",
        "[[op]]\nname = \"r\"\nqueue = \"host\"\ncancel = { axis = \"q9\", after = 1 }\n",
        2,
    );
    assert!(unknown.contains("cancel: unknown queue `q9`"), "{unknown}");
    let on_queue = refused(
        "cancel-on-queue.toml",
        "[[op]]\nname = \"r\"\nqueue = \"q0\"\ncancel = { axis = \"q0\", after = 1 }\n",
        2,
    );
    assert!(on_queue.contains("are host steps"), "{on_queue}");
}

#[test]
fn work_an_npu_queue_cannot_run_is_refused_at_load_naming_queue_and_driver() {
    let path = write_scenario(
        "tiles-on-npu.toml",
        "name = \"x\"\n[[queue]]\nname = \"npu\"\ndriver = \"npu\"\n[[op]]\nname = \"a\"\nqueue = \"npu\"\nwork = { kind = \"tiles\", tiles = 4, us = 5 }\n",
    );
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("tiles-on-npu.toml:8"), "{message}");
    assert!(message.contains("queue `npu` (driver npu) cannot run this work"), "{message}");
    assert!(message.contains("NPU queues run compute"), "{message}");
    // An operation's descriptors must fit one ring at once: at most 16 EXECs.
    let path = write_scenario(
        "regions-on-npu.toml",
        "name = \"x\"\n[[queue]]\nname = \"npu\"\ndriver = \"npu\"\n[[op]]\nname = \"a\"\nqueue = \"npu\"\nwork = { kind = \"compute\", kernel = \"add\", elements = 64, tiles = 2, regions = 17 }\n",
    );
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("queue `npu` (driver npu) cannot run this work"), "{message}");
    assert!(message.contains("at most 16 regions"), "{message}");
    // The NPU model has no copy engine: copies are refused too.
    let path = write_scenario(
        "copy-on-npu.toml",
        "name = \"x\"\n[[queue]]\nname = \"npu\"\ndriver = \"npu\"\n[[op]]\nname = \"a\"\nqueue = \"npu\"\nwork = { kind = \"copy\", bytes = 64 }\n",
    );
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("queue `npu` (driver npu) cannot run this work"), "{message}");
}

#[test]
fn copy_work_runs_and_is_checked_on_both_drivers_and_a_bad_size_is_refused_at_load() {
    let scenario = |bytes: u64| {
        format!(
            "name = \"copies\"\n[[queue]]\nname = \"gpu\"\ndriver = \"vulkan\"\n\
             [[queue]]\nname = \"cpu\"\n\
             [[op]]\nname = \"on-gpu\"\nqueue = \"gpu\"\nwork = {{ kind = \"copy\", bytes = {bytes} }}\n\
             expect_status = \"ok\"\n\
             [[op]]\nname = \"on-cpu\"\nqueue = \"cpu\"\nwork = {{ kind = \"copy\", bytes = {bytes} }}\n\
             expect_status = \"ok\"\n"
        )
    };
    // Large enough for several tiles on the block processor.
    let path = write_scenario("copies.toml", &scenario(1 << 20));
    let mut args = vec!["run", path.to_str().unwrap()];
    if !VULKAN {
        args.push("--all-cpu");
    }
    let output = causeway(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", stderr(&output));
    assert!(stdout.contains("compute and copy results: 2 checked, 0 wrong"), "{stdout}");

    let path = write_scenario("copy-odd-size.toml", &scenario(6));
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("copy-odd-size.toml:10"), "{message}");
    assert!(message.contains("whole 4-byte words"), "{message}");
}

#[test]
fn the_report_follows_the_documented_contract() {
    let report = scratch("late-waiter-report.json");
    let output = causeway(&["run", "late-waiter", "--quiet", "--report", report.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["scenario"], "late-waiter");
    let late = report["ops"].as_array().unwrap().iter().find(|op| op["name"] == "late").unwrap();
    for key in
        ["name", "queue", "epoch", "frontier", "tainted", "waits", "start_ns", "end_ns", "status"]
    {
        assert!(late.get(key).is_some(), "op lacks {key}: {late}");
    }
    assert_eq!(late["queue"], "q1");
    assert_eq!(late["status"], "ok");
    assert_eq!(
        late["frontier"],
        serde_json::json!([{"axis": "q0", "epoch": 1}, {"axis": "q1", "epoch": 1}])
    );
    assert_eq!(late["waits"][0]["semaphore"], "s");
    assert_eq!(late["waits"][0]["resolution"], "satisfied");
    let host = report["ops"].as_array().unwrap().iter().find(|op| op["name"] == "settle").unwrap();
    assert_eq!(host["queue"], "host");
    let s = &report["semaphores"][0];
    assert_eq!(
        (s["name"].as_str(), s["value"].as_u64(), s["failed"].as_bool()),
        (Some("s"), Some(2), Some(false))
    );
    assert_eq!(s["history"][0]["value"], 1);
    assert_eq!(s["history"][0]["tainted"], false);
    assert!(report["stats"]["waits"]["elided"].as_u64().is_some());
}

#[test]
fn the_trace_has_a_track_per_queue_and_worker_and_flows_from_signal_to_wait() {
    let trace = scratch("fork-join-trace.json");
    let output = causeway(&["run", "fork-join", "--quiet", "--trace", trace.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let named = |name: &str| events.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == name);
    for track in ["main", "b1", "b2", "b3", "tail", "host", "worker 0", "worker 1"] {
        assert!(named(track), "no track {track}");
    }
    let starts = events.iter().filter(|e| e["ph"] == "s").count();
    let finishes = events.iter().filter(|e| e["ph"] == "f").count();
    assert!(starts >= 7 && starts == finishes, "{starts} flow starts, {finishes} ends");
    assert_eq!(events.iter().filter(|e| e["ph"] == "X" && e["pid"] == 1).count(), 7);
}

const HEADER: &str = "name = \"bad\"\n[[queue]]\nname = \"q0\"\n[[semaphore]]\nname = \"s\"\n";

/// Runs a scenario that must be refused; returns its stderr.
fn refused(file: &str, body: &str, code: i32) -> String {
    let path = write_scenario(file, &format!("{HEADER}{body}"));
    let output = causeway(&["run", path.to_str().unwrap()]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(code), "{message}");
    assert!(message.contains(path.to_str().unwrap()), "no file name in: {message}");
    message
}

#[test]
fn unknown_names_are_reported_with_file_and_line() {
    let queue = refused("unknown-queue.toml", "[[op]]\nname = \"a\"\nqueue = \"q9\"\n", 2);
    assert!(queue.contains(":8: unknown queue `q9`"), "{queue}");
    let semaphore = refused(
        "unknown-semaphore.toml",
        "[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"t>=1\"]\n",
        2,
    );
    assert!(semaphore.contains(":9: unknown semaphore `t`"), "{semaphore}");
}

#[test]
fn malformed_waits_and_signals_are_reported() {
    let wait = refused(
        "malformed-wait.toml",
        "[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s=>1\"]\n",
        2,
    );
    assert!(wait.contains(":9: malformed wait `s=>1`"), "{wait}");
    let signal = refused(
        "malformed-signal.toml",
        "[[op]]\nname = \"a\"\nqueue = \"q0\"\nsignal = [\"s>=1\"]\n",
        2,
    );
    assert!(signal.contains("malformed signal `s>=1`"), "{signal}");
    let syntax = refused("syntax.toml", "[[op]\nname = \"a\"\n", 2);
    assert!(syntax.contains(":6:"), "{syntax}");
    let field = refused(
        "unknown-field.toml",
        "[[op]]\nname = \"a\"\nqueue = \"q0\"\nwaits = [\"s>=1\"]\n",
        2,
    );
    assert!(field.contains("unknown field `waits`"), "{field}");
}

#[test]
fn a_signal_that_does_not_advance_is_refused() {
    let body = "[[op]]\nname = \"a\"\nqueue = \"q0\"\nsignal = [\"s=2\"]\n[[op]]\nname = \"b\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\n";
    let message = refused("not-advancing.toml", body, 2);
    assert!(
        message.contains(":10: op `b` signals s=1, which does not advance past 2"),
        "{message}"
    );
}

#[test]
fn deadlocks_are_reported_naming_the_stuck_waits() {
    let never =
        refused("never.toml", "[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n", 3);
    assert!(
        never.contains("deadlock") && never.contains("op `a` (line 6) on queue q0 waits for s>=1"),
        "{never}"
    );
    let cycle = refused(
        "cycle.toml",
        "[[queue]]\nname = \"q1\"\n[[semaphore]]\nname = \"t\"\n\
         [[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\nsignal = [\"t=1\"]\n\
         [[op]]\nname = \"b\"\nqueue = \"q1\"\nwait = [\"t>=1\"]\nsignal = [\"s=1\"]\n",
        3,
    );
    assert!(
        cycle.contains("cycle") && cycle.contains("op `a`") && cycle.contains("op `b`"),
        "{cycle}"
    );
    let host = refused("host-first.toml", "[[op]]\nname = \"h\"\nqueue = \"host\"\nwait = [\"s>=1\"]\n[[op]]\nname = \"a\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\n", 3);
    assert!(host.contains("op `h` (line 6) on the host"), "{host}");
}

#[test]
fn unmet_expectations_fail_the_run() {
    let path = write_scenario(
        "unmet.toml",
        &format!("{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\nexpect_frontier = {{ q0 = 2 }}\n"),
    );
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("op `a` (line 6): frontier {q0:1} expected {q0:2}"), "{stdout}");
}

#[test]
fn a_missing_file_is_an_input_error() {
    let output = causeway(&["run", "/nonexistent/scenario.toml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("/nonexistent/scenario.toml: no such file"));
}

#[test]
fn scope_violations_name_the_semaphore() {
    let body = "[[semaphore]]\nname = \"local\"\nscope = \"device-local\"\n[[op]]\nname = \"h\"\nqueue = \"host\"\nsignal = [\"local=1\"]\n";
    let message = refused("scope.toml", body, 2);
    assert!(message.contains("op `h`") && message.contains("local"), "{message}");
}

#[test]
fn a_hung_kernel_ends_the_run_at_the_timeout_naming_it() {
    let body = "[[op]]\nname = \"hang\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\nwork = { kind = \"spin\", us = 99999999999 }\n\
                [[op]]\nname = \"later\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n\
                [[op]]\nname = \"forever\"\nqueue = \"host\"\nwork = { kind = \"sleep\", us = 99999999999 }\n";
    let path = write_scenario("hung.toml", &format!("{HEADER}{body}"));
    let output = causeway(&["run", path.to_str().unwrap(), "--timeout", "1"]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert!(
        message.contains("op `forever` (line 15) on the host was still running its work"),
        "{message}"
    );
    assert!(
        message.contains("op `hang` (line 6) on queue q0 was still running at the deadline"),
        "{message}"
    );
    assert!(
        message.contains("op `later` (line 11) on queue q0 waits for s>=1 (at 0)"),
        "{message}"
    );
}

/// A run stopped at its deadline still writes its report, trace and view — what ran, what was
/// still running (a long sleep is named for that, not as a deadlock), what had not started and
/// every wait not reached — marked as timed out, and `causeway view` takes the report. Exit 3.
#[test]
fn a_run_stopped_at_the_timeout_writes_what_is_known_marked_timed_out() {
    let body = "[[queue]]\nname = \"q1\"\n\
                [[op]]\nname = \"done\"\nqueue = \"q1\"\n\
                [[op]]\nname = \"hang\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\nwork = { kind = \"spin\", us = 99999999999 }\n\
                [[op]]\nname = \"later\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n\
                [[op]]\nname = \"forever\"\nqueue = \"host\"\nwork = { kind = \"sleep\", us = 99999999999 }\n\
                [[op]]\nname = \"after\"\nqueue = \"q1\"\nwait = [\"s>=1\"]\n";
    let path = write_scenario("timed-out.toml", &format!("{HEADER}{body}"));
    let (saved, trace, html) =
        (scratch("timed-out.json"), scratch("timed-out-trace.json"), scratch("timed-out.html"));
    let output = causeway(&[
        "run",
        path.to_str().unwrap(),
        "--timeout",
        "1",
        "--report",
        saved.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert!(message.contains("timed out after 1s"), "{message}");
    assert!(message.contains("op `hang` (line 11) on queue q0 was still running at the deadline"));
    assert!(!message.contains("deadlock"), "a long sleep is not a deadlock: {message}");

    let report: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let timed_out = &report["timed_out"];
    assert_eq!(timed_out["timeout_ns"], 1_000_000_000_u64, "{timed_out}");
    let at_ns = timed_out["at_ns"].as_u64().unwrap();
    assert!(at_ns >= 1_000_000_000, "{timed_out}");
    assert!(timed_out["reason"].as_str().unwrap().contains("op `forever`"), "{timed_out}");
    let op = |name: &str| {
        let ops = report["ops"].as_array().unwrap();
        ops.iter().find(|op| op["name"] == name).unwrap().clone()
    };
    let statuses: Vec<(&str, String)> = ["done", "hang", "later", "forever", "after"]
        .into_iter()
        .map(|name| (name, op(name)["status"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("done", "ok".to_string()),
            ("hang", "running".to_string()),
            ("later", "not_started".to_string()),
            ("forever", "running".to_string()),
            ("after", "not_started".to_string())
        ]
    );
    for running in ["hang", "forever"] {
        let running = op(running);
        assert!(running["start_ns"].as_u64().unwrap() > 0, "{running}");
        assert_eq!(running["end_ns"], at_ns, "ran partly: until the run was stopped");
    }
    assert_eq!(
        timed_out["pending_waits"],
        serde_json::json!([
            {"at": 0, "op": "later", "semaphore": "s", "value": 1},
            {"at": 0, "op": "after", "semaphore": "s", "value": 1}
        ])
    );

    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let marker = events.iter().find(|event| event["ph"] == "i").expect("a timed-out marker");
    assert_eq!(marker["name"], "timed out after 1s", "{marker}");
    let slice = |name: &str| events.iter().find(|e| e["ph"] == "X" && e["name"] == name);
    assert_eq!(slice("hang").unwrap()["args"]["status"], "running");
    assert!(slice("after").is_none(), "what never started has no slice");

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("\"timed_out\":{"), "the view carries the marker");
    let viewed = scratch("timed-out-view.html");
    let output = causeway(&["view", saved.to_str().unwrap(), "-o", viewed.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// 10^5 operations stopped at the deadline behind one that sleeps: every one of them is in
/// the report (one running, the rest not started, each with its wait) and in its view.
#[test]
fn a_timed_out_run_of_ten_to_the_fifth_ops_reports_every_one() {
    const OPS: usize = 100_000;
    let pipeline = causeway_scenario::generate::pipeline(OPS);
    let first = "name = \"op1\"\nqueue = \"q0\"\n";
    assert!(pipeline.contains(first));
    let sleeping = format!("{first}work = {{ kind = \"sleep\", us = 99999999999 }}\n");
    let path = write_scenario("timed-out-pipeline.toml", &pipeline.replacen(first, &sleeping, 1));
    let (report, html) = (scratch("timed-out-pipeline.json"), scratch("timed-out-pipeline.html"));
    let started = std::time::Instant::now();
    let output = causeway(&[
        "run",
        path.to_str().unwrap(),
        "--quiet",
        "--timeout",
        "1",
        "--report",
        report.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let took = started.elapsed();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let ops = report["ops"].as_array().unwrap();
    assert_eq!(ops.len(), OPS);
    assert_eq!(ops[0]["status"], "running");
    assert!(ops[1..].iter().all(|op| op["status"] == "not_started"));
    let pending = report["timed_out"]["pending_waits"].as_array().unwrap();
    assert_eq!(pending.len(), OPS - 1, "every op but the first waits for the one before");
    assert_eq!(
        pending[OPS - 2],
        serde_json::json!({"at": 0, "op": format!("op{OPS}"), "semaphore": "step", "value": OPS - 1})
    );
    assert!(std::fs::metadata(&html).unwrap().len() > 0);
    println!("10^5 ops stopped at a 1 s deadline, report and view written: {took:?}");
}

/// A long submit-ahead pipeline meets full rings and histories: the submitter waits for room
/// and the run completes (this once failed with "all 64 history slots hold pending signals").
#[test]
fn long_pipelines_wait_for_room_instead_of_failing() {
    let mut round_robin = String::from("name = \"round-robin\"\n");
    for queue in 0..4 {
        round_robin +=
            &format!("[[queue]]\nname = \"q{queue}\"\n[[semaphore]]\nname = \"s{queue}\"\n");
    }
    for op in 0..10_000 {
        let queue = op % 4;
        round_robin += &format!(
            "[[op]]\nname = \"o{op}\"\nqueue = \"q{queue}\"\nsignal = [\"s{queue}={}\"]\n",
            op / 4 + 1
        );
    }
    let single = causeway_scenario::generate::pipeline(100_000);
    for (file, text) in [("round-robin.toml", round_robin), ("single-queue.toml", single)] {
        let path = write_scenario(file, &text);
        let output = causeway(&["run", path.to_str().unwrap(), "--quiet"]);
        assert_eq!(output.status.code(), Some(0), "{file}: {}", stderr(&output));
    }
}

#[test]
fn a_generated_scenario_runs_with_its_report_and_trace() {
    use causeway_scenario::generate;

    let ops = 2_000;
    let path = write_scenario("many-semaphores.toml", &generate::many_semaphores(ops));
    let (report, trace) = (scratch("many-report.json"), scratch("many-trace.json"));
    let output = causeway(&[
        "run",
        path.to_str().unwrap(),
        "--quiet",
        "--report",
        report.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["stats"]["ops"], ops);
    assert_eq!(report["stats"]["ok"], ops);
    assert_eq!(report["semaphores"].as_array().unwrap().len(), ops);
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    // Every operation but the first waits once, on a signal some earlier operation makes.
    assert_eq!(events.iter().filter(|e| e["ph"] == "s").count(), ops - 1);
    assert_eq!(events.iter().filter(|e| e["ph"] == "f").count(), ops - 1);
}

/// `--html` beside `--report` and `--trace`, and `causeway view` of the saved report: the same
/// page (the view is built from the report), linking to the trace; a truncated, foreign or
/// non-JSON report is refused with exit 2 naming the problem. The browser tier
/// (`cli/browser`) opens these pages in Chromium.
#[test]
fn the_html_view_is_written_by_run_and_view_and_bad_reports_exit_2() {
    let (report, trace, html) =
        (scratch("view-report.json"), scratch("view-trace.json"), scratch("view-run.html"));
    let output = causeway(&[
        "run",
        "late-waiter",
        "--quiet",
        "--report",
        report.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let from_run = std::fs::read_to_string(&html).unwrap();
    assert!(from_run.contains(r#"href="view-trace.json""#), "the page links to the trace");
    let viewed = scratch("view-view.html");
    let output = causeway(&[
        "view",
        report.to_str().unwrap(),
        "-o",
        viewed.to_str().unwrap(),
        "--trace",
        "view-trace.json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(said, format!("view written to {}\n", viewed.display()), "it says where");
    assert_eq!(std::fs::read_to_string(&viewed).unwrap(), from_run);

    let text = std::fs::read_to_string(&report).unwrap();
    let cut = write_scenario("view-cut.json", &text[..text.len() / 2]);
    let not_json = write_scenario("view-text.json", "scenario = 'no'\n");
    for (input, problem) in [
        (&cut, "the report is truncated"),
        (&trace, "not a causeway report: missing field `scenario`"),
        (&not_json, "the report is not JSON"),
    ] {
        let output = causeway(&["view", input.to_str().unwrap(), "-o", html.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert!(stderr(&output).contains(problem), "{}: {}", input.display(), stderr(&output));
    }
}

/// `causeway args` with its standard output a pipe whose reader has gone, as under
/// `causeway scenarios | head -1` once `head` has exited. The reader is closed as soon as the
/// child has started, well before it has read and checked its first scenario: every write
/// finds the pipe closed.
fn causeway_into_a_closed_pipe(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_causeway"));
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("the binary runs");
    drop(child.stdout.take());
    child.wait_with_output().expect("the binary runs")
}

/// A reader that stops reading is no error: the command ends quietly, finishes the files it
/// was asked for and exits with the status its work earned.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let listing = causeway_into_a_closed_pipe(&["scenarios"]);
    assert_eq!((listing.status.code(), stderr(&listing).as_str()), (Some(0), ""));
    let report = scratch("closed-pipe-report.json");
    let _ = std::fs::remove_file(&report);
    let run =
        causeway_into_a_closed_pipe(&["run", "late-waiter", "--report", report.to_str().unwrap()]);
    assert_eq!((run.status.code(), stderr(&run).as_str()), (Some(0), ""));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["scenario"], "late-waiter");
    let unmet = write_scenario(
        "closed-pipe-unmet.toml",
        &format!("{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nexpect_status = \"failed\"\n"),
    );
    let unmet = causeway_into_a_closed_pipe(&["run", unmet.to_str().unwrap()]);
    assert_eq!((unmet.status.code(), stderr(&unmet).as_str()), (Some(1), ""));
    let graph = Path::new(env!("CARGO_MANIFEST_DIR")).join("../graphs/while-refine.toml");
    let schedule = causeway_into_a_closed_pipe(&["schedule", graph.to_str().unwrap(), "--run"]);
    assert_eq!((schedule.status.code(), stderr(&schedule).as_str()), (Some(0), ""));
    // `causeway run missing.toml 2>&1 | head -0`: the error has nowhere to go, and the status
    // still says what happened.
    let mut command = Command::new(env!("CARGO_BIN_EXE_causeway"));
    command.args(["run", "/nonexistent/scenario.toml"]).stdin(Stdio::null());
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stderr.take());
    assert_eq!(child.wait().unwrap().code(), Some(2));
}

/// Output that fails otherwise than by its reader leaving (a full disk) is an error: exit 2,
/// saying so.
#[cfg(target_os = "linux")]
#[test]
fn output_that_cannot_be_written_is_an_error() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let mut command = Command::new(env!("CARGO_BIN_EXE_causeway"));
    command.arg("scenarios").stdin(Stdio::null()).stdout(full).stderr(Stdio::piped());
    let output = command.spawn().unwrap().wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("cannot write to standard output"), "{}", stderr(&output));
}

/// A path that exists is a file; a bare name (no folder, no extension) is a bundled scenario
/// or graph; anything else is an error that says what was tried.
#[test]
fn a_path_names_a_file_and_a_bare_name_a_bundled_scenario_or_graph() {
    let elsewhere = scratch("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let refused = |args: &[&str]| {
        let output = causeway_in(&elsewhere, args, &[]);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        stderr(&output)
    };
    // Not the bundled one: there is no such file here.
    let message = refused(&["run", "scenarios/late-waiter.toml"]);
    assert!(message.contains("scenarios/late-waiter.toml: no such file"), "{message}");
    // Separators as the platform writes them (Windows turns the given `/` into `\`).
    let looked_for = elsewhere.join("scenarios").join("late-waiter.toml");
    assert!(message.contains(looked_for.to_str().unwrap()), "{message}");
    assert!(message.contains("`causeway run late-waiter`"), "{message}");
    let message = refused(&["run", "./late-waiter"]);
    assert!(message.contains("./late-waiter: no such file"), "{message}");
    assert!(message.contains("`causeway run late-waiter`"), "{message}");
    let message = refused(&["run", "no-such-scenario"]);
    assert!(message.contains("no-such-scenario: no such file"), "{message}");
    assert!(message.contains("no bundled scenario of that name"), "{message}");
    assert!(message.contains("late-waiter"), "the bundled names are listed: {message}");
    let message = refused(&["schedule", "no-such-graph"]);
    assert!(message.contains("no bundled graph of that name"), "{message}");
    assert!(message.contains("fork-join"), "the bundled names are listed: {message}");

    // Bare names: the bundled scenario and graph, from any directory.
    let output = causeway_in(&elsewhere, &["run", "late-waiter", "--quiet"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = causeway_in(&elsewhere, &["schedule", "fork-join"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("fork-join"));
    // A file that exists wins over a bundled name.
    let own = format!("{HEADER}[[op]]\nname = \"mine\"\nqueue = \"q0\"\n");
    std::fs::write(elsewhere.join("late-waiter"), own).unwrap();
    let output = causeway_in(&elsewhere, &["run", "late-waiter"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("scenario bad"));
    std::fs::remove_file(elsewhere.join("late-waiter")).unwrap();
}

/// A scenario file without `name` is named after its file, as graph files are.
#[test]
fn a_scenario_without_a_name_is_named_after_its_file() {
    let path = write_scenario(
        "unnamed-pipeline.toml",
        "[[queue]]\nname = \"q0\"\n[[op]]\nname = \"a\"\nqueue = \"q0\"\n",
    );
    let report = scratch("unnamed-report.json");
    let output = causeway(&["run", path.to_str().unwrap(), "--report", report.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.starts_with("scenario unnamed-pipeline "), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["scenario"], "unnamed-pipeline");
}

/// Every problem of a file is reported, in line order, each with its file and line: the first
/// one found does not hide the others.
#[test]
fn every_problem_of_a_file_is_reported_in_line_order() {
    let path = write_scenario(
        "three-mistakes.toml",
        "[[queue]]\nname = \"q0\"\n[[semaphore]]\nname = \"s\"\n\
         [[op]]\nname = \"a\"\nqueue = \"q9\"\n\
         [[op]]\nname = \"b\"\nqueue = \"q0\"\nwaits = [\"s>=1\"]\n\
         [[op]]\nname = \"c\"\nqueue = \"q0\"\nwait = [\"s=>1\"]\n\
         [[queue]]\nname = \"q1\"\ndriver = \"tpu\"\n",
    );
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let file = path.to_str().unwrap();
    let lines: Vec<String> = stderr(&output).lines().map(str::to_owned).collect();
    let expected = [
        format!("error: {file}:7: unknown queue `q9`"),
        format!("error: {file}:11: unknown field `waits`"),
        format!("error: {file}:15: malformed wait `s=>1`"),
        format!("error: {file}:18: driver `tpu` is not available"),
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for (line, expected) in lines.iter().zip(&expected) {
        assert!(line.starts_with(expected.as_str()), "{line}\nexpected {expected}");
    }
    // Signals that do not advance are whole-file problems: every one is reported too.
    let body = "[[op]]\nname = \"a\"\nqueue = \"q0\"\nsignal = [\"s=2\"]\n\
                [[op]]\nname = \"b\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\n\
                [[op]]\nname = \"c\"\nqueue = \"q0\"\nsignal = [\"s=2\"]\n";
    let message = refused("two-not-advancing.toml", body, 2);
    assert!(
        message.contains(":10: op `b` signals s=1, which does not advance past 2"),
        "{message}"
    );
    assert!(
        message.contains(":14: op `c` signals s=2, which does not advance past 2"),
        "{message}"
    );
}

/// A semaphore's history is bounded: what the run did not keep is counted where the history
/// is shown, in the report (`history_truncated`), the text and the view.
#[test]
fn a_truncated_history_says_how_much_was_left_out() {
    let mut text = String::from("[[queue]]\nname = \"q0\"\n[[semaphore]]\nname = \"s\"\n");
    for value in 1..=100 {
        text += &format!("[[op]]\nname = \"o{value}\"\nqueue = \"q0\"\nsignal = [\"s={value}\"]\n");
    }
    let path = write_scenario("long-history.toml", &text);
    let (report, html) = (scratch("long-history.json"), scratch("long-history.html"));
    let output = causeway(&[
        "run",
        path.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let semaphore = &report["semaphores"][0];
    let kept = semaphore["history"].as_array().unwrap().len() as u64;
    let left_out = semaphore["history_truncated"].as_u64().expect("history_truncated");
    assert!(kept < 100, "the history is bounded: {kept}");
    assert_eq!(kept + left_out, 100, "{semaphore}");
    assert_eq!(semaphore["history"][0]["value"], left_out + 1, "the oldest entries are left out");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find(|line| line.trim_start().starts_with("s ")).unwrap();
    assert!(
        line.contains(&format!("history: {left_out} earlier not kept, {} ", left_out + 1)),
        "{line}"
    );
    // The page reads the count from the embedded report.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&format!("\"history_truncated\":{left_out}")), "the report is embedded");
    assert!(page.contains("semaphore.history_truncated"), "the page shows the count");
}

/// `--all-cpu` says in the text which queues it moved off the driver they name.
#[test]
fn all_cpu_says_which_queues_it_moved() {
    let output = causeway(&["run", "cpu-npu-vulkan", "--all-cpu"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "--all-cpu: queues encoder (npu), refiner (npu), gpu (vulkan) ran on the CPU driver"
        ),
        "{stdout}"
    );
    let output = causeway(&["run", "late-waiter", "--all-cpu"]);
    assert!(!String::from_utf8_lossy(&output.stdout).contains("--all-cpu"), "nothing was moved");
}

/// The text agrees in number ("1 op", "2 ops") and sizes its columns to what they hold.
#[test]
fn the_text_agrees_in_number_and_aligns_its_columns() {
    let path = write_scenario(
        "one-of-each.toml",
        "workers = 1\n[[queue]]\nname = \"a-queue-named-at-length\"\n\
         [[semaphore]]\nname = \"a-semaphore-named-at-great-length\"\n\
         [[semaphore]]\nname = \"s\"\n\
         [[op]]\nname = \"an-operation-named-at-great-length\"\nqueue = \"a-queue-named-at-length\"\n\
         signal = [\"a-semaphore-named-at-great-length=1\", \"s=1\"]\n",
    );
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(" — 1 op on 1 queue, 2 semaphores, 1 worker, "), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    // Where each column of the ops table starts and ends, in characters (µ is one): the
    // header's labels, and the row's values (none of which holds a space here).
    let header = lines.iter().find(|line| line.trim_start().starts_with("op ")).unwrap();
    let row = lines.iter().find(|line| line.contains("an-operation-named")).unwrap();
    let mut from = 0;
    let labels = ["op", "queue", "epoch", "status", "start µs", "end µs", "frontier", "waits"];
    let labels = labels.map(|label| {
        let rest: String = header.chars().skip(from).collect();
        let start = from + rest[..rest.find(label).unwrap()].chars().count();
        from = start + label.chars().count();
        (start, from)
    });
    let mut values = Vec::new();
    let mut start = None;
    for (at, c) in row.chars().chain([' ']).enumerate() {
        match (c == ' ', start) {
            (false, None) => start = Some(at),
            (true, Some(begun)) => {
                values.push((begun, at));
                start = None;
            }
            _ => {}
        }
    }
    assert_eq!(values.len(), labels.len(), "{row}");
    let right_aligned = [false, false, true, false, true, true, false, false];
    for ((label, value), right) in labels.iter().zip(&values).zip(right_aligned) {
        let (label, value) = if right { (label.1, value.1) } else { (label.0, value.0) };
        assert_eq!(label, value, "columns misaligned:\n{header}\n{row}");
    }
    let at = |line: &str, text: &str| line.find(text).map(|bytes| line[..bytes].chars().count());
    let values: Vec<Option<usize>> = lines
        .iter()
        .filter(|line| line.contains(" value 1"))
        .map(|line| at(line, " value 1"))
        .collect();
    assert_eq!(values.len(), 2, "{stdout}");
    assert_eq!(values[0], values[1], "the semaphores' values line up:\n{stdout}");
}

/// The drivers' lines agree in number too.
#[cfg(target_os = "linux")]
#[test]
fn the_drivers_lines_agree_in_number() {
    let output = causeway(&["run", "multi-domain"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("1 native wait for 1 device wait;"), "{stdout}");
    // The NPU queue's wait on the CPU queue: one WAIT on the CPU queue's mirror.
    assert!(stdout.contains("1 WAIT descriptor for 1 device wait;"), "{stdout}");
    let output = causeway(&["schedule", "fork-join"]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("4 edges, 1 device\n"));
}

/// Latencies of a run where no queue operation ran say so, rather than "0.0 µs".
#[test]
fn latencies_of_a_run_where_nothing_ran_say_so() {
    let body = "[[op]]\nname = \"h\"\nqueue = \"host\"\nfail = \"s\"\n\
                [[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n";
    let path = write_scenario("nothing-ran.toml", &format!("{HEADER}{body}"));
    let output = causeway(&["run", path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let latency = stdout.lines().filter(|line| line.contains("→")).collect::<Vec<_>>();
    assert_eq!(latency.len(), 2, "{stdout}");
    for line in latency {
        assert!(line.ends_with("— (no queue operation ran)"), "{line}");
    }
}

/// A Vulkan option the driver cannot read is named with the values it accepts, not taken for
/// a missing device.
#[test]
fn an_unreadable_vulkan_option_lists_the_accepted_values() {
    let output = causeway_with(
        &["run", "cross-driver", "--quiet"],
        &[("CAUSEWAY_VULKAN_VALIDATION", "yes")],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains(
            "CAUSEWAY_VULKAN_VALIDATION=\"yes\" is not one of its values: 1 (on), 0 or empty (off)"
        ),
        "{message}"
    );
    assert!(!message.contains("no Vulkan device opens"), "{message}");
}

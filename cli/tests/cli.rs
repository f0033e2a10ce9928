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
    // Under wine, CreateProcess fails with ERROR_INTERNAL_ERROR whenever the new process dies in
    // wine's own start-up, before any of its code runs: wine reports every such early death with
    // that code, whatever ended the process. The CLI never started, so spawning it again is safe.
    // The retry is bounded and written to the real stderr, past the harness's capture of
    // `eprintln!`, so the log shows every time it fires.
    const ERROR_INTERNAL_ERROR: i32 = 1359;
    const ATTEMPTS: u32 = 3;
    let mut command = Command::new(env!("CARGO_BIN_EXE_causeway"));
    command.args(args).envs(variables.iter().copied());
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
    // CPU → NPU and NPU → Vulkan are held; NPU → NPU is a device wait; what the GPU and the
    // refiner learned transitively is elided.
    assert_eq!(resolutions("encode"), ["held"]);
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
    // One WAIT descriptor (refine's), none for the elided or the held waits.
    let npu = &report["npu"];
    assert_eq!(npu["adapter"], "causeway software NPU model");
    assert_eq!(npu["wait_descriptors"], 1, "{npu}");
    assert_eq!(npu["device_waits"], 1, "{npu}");
    assert_eq!(npu["elided"], 1, "{npu}");
    assert_eq!(npu["held"], 1, "{npu}");
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
    assert!(stderr(&output).contains("/nonexistent/scenario.toml: cannot read"));
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
    assert!(message.contains("op `hang` (line 6) on queue q0 has been running for "), "{message}");
    assert!(
        message.contains("op `later` (line 11) on queue q0 waits for s>=1 (at 0)"),
        "{message}"
    );
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
    let single = causeway_cli::scenario::generate::pipeline(100_000);
    for (file, text) in [("round-robin.toml", round_robin), ("single-queue.toml", single)] {
        let path = write_scenario(file, &text);
        let output = causeway(&["run", path.to_str().unwrap(), "--quiet"]);
        assert_eq!(output.status.code(), Some(0), "{file}: {}", stderr(&output));
    }
}

#[test]
fn a_generated_scenario_runs_with_its_report_and_trace() {
    use causeway_cli::scenario::generate;

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

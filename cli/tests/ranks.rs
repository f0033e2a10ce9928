//! `mpirun -n N causeway run FILE` on real Open MPI ranks over loopback (the CLI built with its
//! `mpi` feature; the test command and `scripts/mpi.sh` run this). Every launch runs under
//! `timeout`, so a rank that hangs fails the test instead of the tier. One `mpirun` runs at a
//! time, whatever the test harness's thread count: a launch's ranks already oversubscribe a small
//! machine, and two launches side by side would race their `--timeout` deadlines.
#![cfg(feature = "mpi")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use causeway_scenario::model::DriverKind;
use causeway_scenario::mpi_run::END_GRACE;
use causeway_scenario::{bundled, generate, parse};

/// Seconds `timeout` gives one `mpirun` before killing it (a kill fails the test as a hang).
const LAUNCH_LIMIT: &str = "180";

/// The limit for a run whose `--timeout` is a few seconds: past it, a rank hung.
const SHORT_LAUNCH_LIMIT: &str = "60";

/// Held for the whole of each `mpirun`, so launches never overlap.
static ONE_LAUNCH_AT_A_TIME: Mutex<()> = Mutex::new(());

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-cli-ranks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir.join(name)
}

/// `timeout LAUNCH_LIMIT mpirun --oversubscribe -n ranks causeway args…`.
fn mpirun(ranks: usize, args: &[&str]) -> Output {
    mpirun_within(LAUNCH_LIMIT, ranks, args)
}

/// [`mpirun`] under `timeout limit`.
fn mpirun_within(limit: &str, ranks: usize, args: &[&str]) -> Output {
    mpirun_with(&[], limit, ranks, args)
}

/// [`mpirun_within`] with `options` for mpirun.
fn mpirun_with(options: &[&str], limit: &str, ranks: usize, args: &[&str]) -> Output {
    launch(options, &[], limit, ranks, &[env!("CARGO_BIN_EXE_causeway")], args).0
}

/// [`mpirun_within`] with `env` set for every rank (mpirun passes its environment on to the
/// ranks it starts on this machine).
fn mpirun_with_env(env: &[(&str, &str)], limit: &str, ranks: usize, args: &[&str]) -> Output {
    launch(&[], env, limit, ranks, &[env!("CARGO_BIN_EXE_causeway")], args).0
}

/// `timeout limit mpirun --oversubscribe -n ranks options… program… args…`, with `env`, and
/// how long `mpirun` ran (not counting the wait for another test's launch).
fn launch(
    options: &[&str],
    env: &[(&str, &str)],
    limit: &str,
    ranks: usize,
    program: &[&str],
    args: &[&str],
) -> (Output, Duration) {
    // A test that failed while holding the lock poisons it; the next launch is still sound.
    let _only_launch = ONE_LAUNCH_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let started = Instant::now();
    let output = Command::new("timeout")
        .args([limit, "mpirun", "--oversubscribe", "-n", &ranks.to_string()])
        .args(options)
        .args(program)
        .args(args)
        .envs(env.iter().copied())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun starts (scripts/mpi.sh installs Open MPI)");
    let elapsed = started.elapsed();
    assert_ne!(output.status.code(), Some(124), "mpirun -n {ranks} {args:?} hung: {output:?}");
    (output, elapsed)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("rank 0 wrote the report"))
        .expect("the report is JSON")
}

fn ops(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report["ops"].as_array().expect("the report lists ops")
}

fn machines(report: &serde_json::Value) -> BTreeSet<u64> {
    ops(report).iter().map(|op| op["machine"].as_u64().expect("every op has a machine")).collect()
}

#[test]
fn remote_pipeline_runs_across_two_ranks_and_rank_0_reports_every_machine() {
    let json = scratch("remote-pipeline.json");
    let json_arg = json.to_str().expect("utf-8 path");
    let output = mpirun(
        2,
        &["run", "remote-pipeline", "--all-cpu", "--timeout", "60", "--report", json_arg],
    );
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    // Rank 0 alone prints the summary and the expectations (the frontiers cross ranks).
    assert_eq!(stdout.matches("expectations: 10 checked, all met").count(), 1, "{stdout}");
    assert_eq!(stdout.matches("scenario remote-pipeline").count(), 1, "{stdout}");
    let report = report(&json);
    assert_eq!(machines(&report), BTreeSet::from([0, 1]));
    assert!(ops(&report).iter().all(|op| op["status"] == "ok"), "{report}");
}

/// Every bundled scenario whose queues live on more than one machine, across as many ranks as
/// it has machines, on the drivers it names — Vulkan on lavapipe under the validation layer,
/// the NPU model — not `--all-cpu`: every expectation met, every queue on its own driver, rank
/// 0's report holding every machine. On a Vulkan queue, a wait whose value comes from another
/// rank is held by the layer (or satisfied, had the value arrived already), never a native
/// wait: the queue's driver has no timeline of that rank's queues to wait on.
#[test]
fn every_bundled_multi_rank_scenario_meets_its_expectations_on_its_own_drivers() {
    let mut ran = Vec::new();
    for bundled in bundled::ALL {
        let scenario = parse::parse(Path::new(bundled.file), bundled.source).expect("it parses");
        let ranks = scenario.queues.iter().map(|queue| queue.machine).max().unwrap_or(0) + 1;
        if ranks < 2 {
            continue;
        }
        let json = scratch(&format!("{}-own-drivers.json", bundled.name));
        let args = ["run", bundled.name, "--timeout", "90", "--report", json.to_str().unwrap()];
        let output = mpirun_with_env(
            &[("CAUSEWAY_VULKAN_VALIDATION", "1")],
            LAUNCH_LIMIT,
            usize::from(ranks),
            &args,
        );
        let stdout = text(&output.stdout);
        let name = bundled.name;
        assert!(output.status.success(), "{name} on {ranks} ranks: {output:?}");
        assert!(stdout.contains("checked, all met"), "{name}: {stdout}");
        let report = report(&json);
        assert_eq!(machines(&report), (0..u64::from(ranks)).collect(), "{name}");
        for queue in &scenario.queues {
            let reported =
                report["queues"].as_array().unwrap().iter().find(|q| q["name"] == *queue.name);
            assert_eq!(reported.unwrap()["driver"], queue.driver.name(), "{name}: {}", queue.name);
        }
        let vulkan_queues: Vec<&str> = (scenario.queues.iter())
            .filter(|queue| queue.driver == DriverKind::Vulkan)
            .map(|queue| queue.name.as_str())
            .collect();
        for op in
            ops(&report).iter().filter(|op| vulkan_queues.contains(&op["queue"].as_str().unwrap()))
        {
            let machine = op["machine"].as_u64().unwrap();
            for wait in op["waits"].as_array().unwrap() {
                let semaphore = wait["semaphore"].as_str().unwrap();
                let from_another_rank = ops(&report).iter().any(|signaller| {
                    signaller["machine"].as_u64() != Some(machine)
                        && signaller["signals"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|s| s["semaphore"] == semaphore)
                });
                if from_another_rank {
                    let resolution = wait["resolution"].as_str().unwrap();
                    assert!(
                        ["held", "satisfied"].contains(&resolution),
                        "{name}: op {} waits natively on another rank's value: {wait}",
                        op["name"]
                    );
                }
            }
        }
        ran.push(name);
    }
    assert_eq!(ran, ["remote-pipeline", "multi-domain", "tensor-parallel"]);
}

#[test]
fn ten_to_the_five_operations_take_turns_between_two_ranks() {
    const OPS: usize = 100_000;
    let file = scratch("ping-pong.toml");
    std::fs::write(&file, generate::ping_pong(OPS)).expect("write the scenario");
    let json = scratch("ping-pong.json");
    let args = [
        "run",
        file.to_str().expect("utf-8 path"),
        "--quiet",
        "--timeout",
        // A hang guard, not a speed check: the debug build takes about 140 s alone on the
        // two-core test machine, and other rank tests of this binary share the cores with it.
        "300",
        "--report",
        json.to_str().expect("utf-8 path"),
    ];
    // Each rank free to use every core, as the guide advises (docs/src/mpi.md): the two host threads take
    // turns across ranks, and bound to one core each they wait behind any other program
    // busy there (one `yes` beside it stretched the run past its deadline).
    // Past the run's own deadline, so that a hang ends in the CLI's report of it.
    let output = mpirun_with(&["--bind-to", "none"], "330", 2, &args);
    assert!(output.status.success(), "{output:?}");
    let report = report(&json);
    let ops = ops(&report);
    assert_eq!(ops.len(), OPS);
    assert!(ops.iter().all(|op| op["status"] == "ok"));
    assert_eq!(machines(&report), BTreeSet::from([0, 1]));
    // The last turn (on m1) knows the one before it on the other rank, through the frontier
    // that came with its value.
    let last = &ops[OPS - 1]["frontier"];
    let epoch = |axis: &str| {
        let entries = last.as_array().expect("a frontier lists its entries");
        entries.iter().find(|entry| entry["axis"] == axis).map(|entry| entry["epoch"].clone())
    };
    assert_eq!(epoch("m1"), Some((OPS as u64 / 2).into()), "{last}");
    assert_eq!(epoch("m0"), Some((OPS as u64 / 2).into()), "{last}");
}

/// A failing operation on rank 1 fails the queue operation waiting for it on rank 0, and the
/// host step there, and what they signal: no rank hangs, and the run's expectations (written
/// to hold with the failure) are met.
#[test]
fn a_failure_on_one_rank_fails_its_waiters_on_the_other() {
    let file = scratch("failure.toml");
    std::fs::write(
        &file,
        r#"name = "failure-across-ranks"
description = "an op on machine 1 fails; its waiters on machine 0 fail too"

[[queue]]
name = "q0"

[[queue]]
name = "q1"
machine = 1

[[semaphore]]
name = "s"
scope = "system-wide"
expect_failed = true

[[semaphore]]
name = "t"
scope = "system-wide"
expect_failed = true

[[op]]
name = "boom"
queue = "q1"
signal = ["s=1"]
work = { kind = "host", us = 10, fail = 7 }
expect_status = "failed"

[[op]]
name = "after"
queue = "q0"
wait = ["s>=1"]
signal = ["t=1"]
expect_status = "failed"

[[op]]
name = "client"
queue = "host"
wait = ["t>=1"]
expect_status = "failed"
"#,
    )
    .expect("write the scenario");
    let output = mpirun(2, &["run", file.to_str().expect("utf-8 path"), "--timeout", "60"]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout.contains("expectations: 5 checked, all met"), "{stdout}");
}

/// Work stuck on rank 1 past `--timeout`: rank 1 reports what is stuck, and rank 0 prints it
/// beside what became of its own `client`, exiting 3. `client` waits for rank 1's value: rank
/// 0 gives up on it at the same deadline, or, when rank 1's failure (sent at its own deadline)
/// arrives first, `client` fails and rank 0 ran to the end; either way rank 0 names it. With one
/// worker, the stuck work also holds rank 1's progress process, which can then never stop:
/// rank 1 exits without finalising MPI once rank 0 has printed both errors, and `mpirun`,
/// seeing a rank end without finalising, exits 1 instead of 3. Neither hangs.
#[test]
fn a_stuck_rank_ends_the_run_at_the_deadline_naming_the_stuck_operation() {
    for (workers, exit) in [(2, 3), (1, 1)] {
        let file = scratch(&format!("stuck-{workers}.toml"));
        std::fs::write(
            &file,
            format!(
                r#"name = "stuck-across-ranks"
description = "an op on machine 1 outlives the deadline"
workers = {workers}

[[queue]]
name = "q1"
machine = 1

[[semaphore]]
name = "s"
scope = "system-wide"

[[op]]
name = "forever"
queue = "q1"
signal = ["s=1"]
work = {{ kind = "sleep", us = 600000000 }}

[[op]]
name = "client"
queue = "host"
wait = ["s>=1"]
"#
            ),
        )
        .expect("write the scenario");
        let args = ["run", file.to_str().expect("utf-8 path"), "--timeout", "3"];
        let output = mpirun_within(SHORT_LAUNCH_LIMIT, 2, &args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(exit), "{workers} workers: {output:?}");
        assert!(stderr.contains("rank 1:") && stderr.contains("op `forever`"), "{stderr}");
        assert!(stderr.contains("rank 0:") && stderr.contains("`client`"), "{stderr}");
    }
}

/// A run that fails on one rank (work stuck past `--timeout` on rank 1) while another ran its
/// share to the end: rank 0 prints rank 1's error and, for itself, the operations of its own
/// that failed (here one that fails by itself, with nothing to wait for).
#[test]
fn a_failed_run_names_what_failed_on_the_ranks_that_ran_to_the_end() {
    let file = scratch("stuck-and-failed.toml");
    std::fs::write(
        &file,
        r#"name = "stuck-and-failed"
description = "machine 1 is stuck; an op on machine 0 fails by itself"
workers = 2

[[queue]]
name = "q0"

[[queue]]
name = "q1"
machine = 1

[[op]]
name = "forever"
queue = "q1"
work = { kind = "sleep", us = 600000000 }

[[op]]
name = "own"
queue = "q0"
work = { kind = "host", us = 10, fail = 7 }
"#,
    )
    .expect("write the scenario");
    let args = ["run", file.to_str().expect("utf-8 path"), "--timeout", "3"];
    let output = mpirun_within(SHORT_LAUNCH_LIMIT, 2, &args);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(stderr.contains("rank 1:") && stderr.contains("op `forever`"), "{stderr}");
    assert!(
        stderr
            .contains("error: rank 0: ran to the end, but not all of it: `own` (line 17, failed)"),
        "{stderr}"
    );
}

#[test]
fn too_few_ranks_and_steps_that_cannot_cross_ranks_are_refused_with_exit_2() {
    let file = scratch("three-machines.toml");
    std::fs::write(
        &file,
        "name = \"three\"\ndescription = \"machines 0 to 2\"\n\n[[queue]]\nname = \"q2\"\n\
         machine = 2\n\n[[op]]\nname = \"a\"\nqueue = \"q2\"\n",
    )
    .expect("write the scenario");
    let output = mpirun(2, &["run", file.to_str().expect("utf-8 path")]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(stderr.contains("start at least 3 with mpirun -n"), "{stderr}");
    // Printed once, by rank 0.
    assert_eq!(stderr.matches("start at least 3").count(), 1, "{stderr}");

    let output = mpirun(2, &["run", "speculation", "--all-cpu"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(stderr.contains("cannot run across 2 ranks"), "{stderr}");
}

/// The bundled tensor-parallel scenario at 4 and 8 ranks (ranks 4 to 7 host no queue but take
/// part in every all-reduce): the same expectations hold, one `collective` entry included,
/// and each step after an all-reduce knows two entries, its own queue's and the collective's.
#[test]
fn tensor_parallel_meets_the_same_expectations_at_4_and_8_ranks() {
    for ranks in [4, 8] {
        let json = scratch(&format!("tensor-parallel-{ranks}.json"));
        let json_arg = json.to_str().expect("utf-8 path");
        let args = ["run", "tensor-parallel", "--all-cpu", "--timeout", "90", "--report", json_arg];
        let output = mpirun(ranks, &args);
        let stdout = text(&output.stdout);
        assert!(output.status.success(), "{ranks} ranks: {output:?}");
        assert!(stdout.contains("expectations: 54 checked, all met"), "{stdout}");
        assert!(stdout.contains("compute and copy results: 19 checked, 0 wrong"), "{stdout}");
        let report = report(&json);
        assert_eq!(machines(&report), BTreeSet::from([0, 1, 2, 3]));
        for op in ops(&report).iter().filter(|op| op["name"].as_str().unwrap().starts_with("row")) {
            assert_eq!(op["frontier"].as_array().map(Vec::len), Some(2), "{op}");
        }
    }
}

/// Rank 1 is killed (SIGKILL) while it runs its share, under `mpirun --enable-recovery`, which
/// lets the survivor run on. Rank 0 must end by the deadline plus the time the end of the run
/// allows (exit 3), naming the rank it lost and what it still waited on — whether its own share
/// ran to the end (`own` only), waited for the dead rank's value (`client`), or waited for it
/// to join an all-reduce (`reduce`, which rank 1 would join once `s` is reached). `mpirun` itself
/// exits 0 under `--enable-recovery` whatever its ranks exit with (Open MPI 4.1), so rank 0
/// runs under a shell that prints its exit status.
#[test]
fn a_rank_killed_under_enable_recovery_ends_the_survivor_at_the_deadline() {
    /// The run's `--timeout`, in seconds; rank 1 dies well before it.
    const TIMEOUT: u64 = 4;
    /// When rank 1 is killed: long after the ranks have joined (half a second here), well
    /// before the deadline.
    const KILL_AFTER: &str = "2";
    // Rank 1 becomes causeway (exec keeps its process id for the kill); rank 0 reports how
    // causeway exited.
    let wrapper = format!(
        r#"if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (sleep {KILL_AFTER}; kill -KILL $$) & exec "$@"; fi
"$@"; status=$?; echo "rank 0 exited with status $status"; exit $status"#
    );
    let own = "[[op]]\nname = \"own\"\nqueue = \"q0\"\nwork = { kind = \"host\", us = 10 }\n";
    let client = "[[op]]\nname = \"client\"\nqueue = \"host\"\nwait = [\"s>=1\"]\n";
    let reduce =
        "[[semaphore]]\nname = \"r\"\nscope = \"system-wide\"\n\n[[op]]\nname = \"reduce\"\n\
                  queue = \"host\"\nwait = [\"s>=1\"]\nsignal = [\"r=1\"]\n\
                  work = { kind = \"all_reduce\", elements = 4 }\n";
    for (case, rank_0_op, waited) in [
        ("own-share", own, "still waited for its records"),
        ("waiting", client, "`client`"),
        ("all-reduce", reduce, "all_reduce step `reduce`"),
    ] {
        let file = scratch(&format!("killed-{case}.toml"));
        std::fs::write(
            &file,
            format!(
                "name = \"killed-{case}\"\ndescription = \"rank 1 is killed during its share\"\n\n\
                 [[queue]]\nname = \"q0\"\n\n[[queue]]\nname = \"q1\"\nmachine = 1\n\n\
                 [[semaphore]]\nname = \"s\"\nscope = \"system-wide\"\n\n\
                 [[op]]\nname = \"long\"\nqueue = \"q1\"\nsignal = [\"s=1\"]\n\
                 work = {{ kind = \"sleep\", us = 600000000 }}\n\n{rank_0_op}"
            ),
        )
        .expect("write the scenario");
        let timeout = TIMEOUT.to_string();
        let args = ["run", file.to_str().expect("utf-8 path"), "--timeout", &timeout];
        let program = ["sh", "-c", &wrapper, "sh", env!("CARGO_BIN_EXE_causeway")];
        let (output, elapsed) = launch(&["--enable-recovery"], &[], "60", 2, &program, &args);
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert!(stdout.contains("rank 0 exited with status 3"), "{case}: {output:?}");
        // The deadline, the end's grace to gather the records, and start-up.
        let limit = Duration::from_secs(TIMEOUT) + END_GRACE + Duration::from_secs(5);
        assert!(elapsed < limit, "{case}: ended after {elapsed:?}, past {limit:?}");
        assert!(stderr.contains("error: rank 1: lost"), "{case}: {stderr}");
        assert!(stderr.contains("still waited for its records"), "{case}: {stderr}");
        assert!(stderr.contains(waited), "{case}: {stderr}");
    }
}

/// A value reached on a rank that then has nothing to wait for from other ranks (its progress
/// process asleep) reaches the rank waiting for it at once, not when the signalling rank's
/// share ends. Here `second` reaches `s=2` on rank 1 while `nap` keeps rank 1's share going
/// for seconds; `client` on rank 0 waits for it. The exported semaphore's watch fires on one
/// worker while the progress process, on another, may be reporting the value before it: the
/// watch is still firing then and cannot be armed again, and the firing's wake has come
/// already — the progress process must not wait for another.
#[test]
fn a_value_reached_on_an_otherwise_idle_rank_reaches_its_importer_at_once() {
    /// How long rank 1's share goes on after `second` (milliseconds).
    const NAP_MS: u64 = 4000;
    let file = scratch("idle-exporter.toml");
    std::fs::write(
        &file,
        format!(
            r#"name = "idle-exporter"
description = "rank 1 reaches s=2, then only naps; rank 0 waits for s>=2"
workers = 3

[[queue]]
name = "feed0"

[[queue]]
name = "feed2"

[[queue]]
name = "stage"
machine = 1

[[queue]]
name = "idle"
machine = 1

[[semaphore]]
name = "a"
scope = "system-wide"

[[semaphore]]
name = "b"
scope = "system-wide"

[[semaphore]]
name = "s"
scope = "system-wide"

[[op]]
name = "fed0"
queue = "feed0"
signal = ["a=1"]
work = {{ kind = "compute", kernel = "saxpy", elements = 51200, tiles = 4 }}

[[op]]
name = "fed2"
queue = "feed2"
signal = ["b=1"]
work = {{ kind = "compute", kernel = "saxpy", elements = 38400, tiles = 4 }}

[[op]]
name = "first"
queue = "stage"
wait = ["a>=1", "b>=1"]
signal = ["s=1"]
work = {{ kind = "compute", kernel = "saxpy", elements = 12800, tiles = 4 }}

[[op]]
name = "second"
queue = "stage"
wait = ["s>=1"]
signal = ["s=2"]
work = {{ kind = "compute", kernel = "saxpy", elements = 12800, tiles = 4 }}

[[op]]
name = "nap"
queue = "idle"
work = {{ kind = "sleep", us = {nap_us} }}

[[op]]
name = "client"
queue = "host"
wait = ["s>=2"]
"#,
            nap_us = NAP_MS * 1000
        ),
    )
    .expect("write the scenario");
    let json = scratch("idle-exporter.json");
    let args = [
        "run",
        file.to_str().expect("utf-8 path"),
        "--timeout",
        "30",
        "--report",
        json.to_str().expect("utf-8 path"),
    ];
    let output = mpirun_within(SHORT_LAUNCH_LIMIT, 2, &args);
    assert!(output.status.success(), "{output:?}");
    let report = report(&json);
    let client = ops(&report).iter().find(|op| op["name"] == "client").expect("client ran");
    // Each rank's times count from its own start, and the ranks start together; `nap` ends
    // NAP_MS after it.
    let client_end_ms = client["end_ns"].as_u64().expect("an end time") / 1_000_000;
    assert!(client_end_ms < NAP_MS / 2, "client waited for rank 1's nap: {client}");
}

/// Issue 42's reproduction across ranks: `A` on machine 0 (half a second of work) signals `s`
/// and `t`; `W` on machine 1 waits on `s`, so its queue learns `A`'s point from the announced
/// signal; the host (rank 0) fails `s` while `A` still runs (once `mark`, the op before `W`, has
/// signalled `u`); `Z`, next on `W`'s queue, waits on
/// `t`, which only `A` signals, and is elided by what `W` imported. The exporter reports the
/// failure only once `A` has ended, so `W` ends — and `Z` starts — about half a second after
/// `mark`, the op before them on that queue, not at once. (Rank 1's own clock measures both, so
/// no clocks are compared across ranks; were rank 1 late to start, the gap would only be
/// shorter, by that lateness.)
#[test]
fn a_waiter_whose_imported_signal_failed_across_ranks_ends_after_its_signaller() {
    let file = scratch("failed-waiter.toml");
    std::fs::write(
        &file,
        r#"name = "failed-waiter-across-ranks"

[[queue]]
name = "a"

[[queue]]
name = "b"
machine = 1

[[semaphore]]
name = "s"
scope = "system-wide"

[[semaphore]]
name = "t"
scope = "system-wide"

[[semaphore]]
name = "u"
scope = "system-wide"

[[op]]
name = "A"
queue = "a"
signal = ["s=1", "t=1"]
work = { kind = "spin", us = 500000 }

[[op]]
name = "mark"
queue = "b"
signal = ["u=1"]

[[op]]
name = "W"
queue = "b"
wait = ["s>=1"]
expect_status = "failed"

[[op]]
name = "fail-s"
queue = "host"
wait = ["u>=1"]
fail = "s"

[[op]]
name = "Z"
queue = "b"
wait = ["t>=1"]
expect_status = "ok"
"#,
    )
    .expect("write the scenario");
    let json = scratch("failed-waiter.json");
    let args = ["run", file.to_str().expect("utf-8 path"), "--timeout", "60"];
    let output =
        mpirun(2, &[&args[..], &["--report", json.to_str().expect("utf-8 path")]].concat());
    assert!(output.status.success(), "{output:?}");
    let report = report(&json);
    let op = |name: &str| {
        ops(&report).iter().find(|op| op["name"] == name).expect("every op is reported").clone()
    };
    let (mark, z) = (op("mark"), op("Z"));
    let start = |op: &serde_json::Value| op["start_ns"].as_u64().expect("times are numbers");
    // Elided when `W` imported `A`'s signal before the failure reached rank 1 (what `fail-s`
    // waiting for `mark` makes likely), a device wait when `W` was submitted after it (then it
    // imported nothing): `Z` starts after `A` either way.
    let resolution = z["waits"][0]["resolution"].as_str().expect("a resolution").to_owned();
    assert!(["elided", "device"].contains(&resolution.as_str()), "{z}");
    let gap = Duration::from_nanos(start(&z).saturating_sub(start(&mark)));
    assert!(
        gap >= Duration::from_millis(200),
        "Z ({resolution}) started {gap:?} after rank 1 began: {report}"
    );
}

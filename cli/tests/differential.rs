//! The differential test of issue 42: random valid scenarios over CPU, NPU and Vulkan queues
//! with failures at every moment, run in-process through the scenario runner, every operation's
//! outcome checked against what the file alone allows and against the run's own timestamps.
//!
//! For each operation of a run:
//!
//! 1. **Timing truth.** Every point of its reported frontier but its own names operations that
//!    had ended when it started (its `start_ns`; for one that never ran, when it was failed or
//!    cancelled): each operation of that axis up to that epoch has `end_ns ≤ start_ns`. So has
//!    the signaller of each of its waits (the first operation in file order that signals the
//!    semaphore to the value or beyond): of a satisfied wait always, of any other (elided,
//!    held, a CPU queue's device wait, a wait that failed, which ends only once its signal has)
//!    when the operation imported it — an operation accepted doomed forgets what its waits
//!    imported and waits for none of them. Host timestamps cannot show the order of a native
//!    device wait: a kernel (`compute`, `copy`) on a Vulkan or NPU queue is issued to the
//!    driver ahead of the kernels of the same driver that it waits for, or knows of, and is
//!    recorded as started then, so neither check applies between two kernels of one native
//!    driver. An NPU kernel also waits natively on other drivers' work (host-written waits: a
//!    WAIT on the driver's mirror of the origin queue), so it is issued once what it waits on
//!    has started — before that has ended, and before what it knows of through a native
//!    wait of its own driver has (an NPU kernel issued ahead may itself wait on a CPU
//!    operation that has only started): neither check applies to an NPU kernel's start.
//! 2. **Algebra.** Its frontier lies within its maximal causal past from the file: its own
//!    point, its queue predecessor's past, and for each wait the past of the wait's signaller.
//!    Its epoch is its place on its queue (or the host).
//! 3. **Failure.** An operation with a wait on a value that failed (the run ended with the
//!    semaphore below the value, or the value in a cancelled signal's range) is reported failed
//!    or cancelled, however the wait resolved; one whose host function fails never ends ok;
//!    one reported failed has a cause (a failing host function, a failed waited value, a
//!    signalled semaphore that failed, a rejection of speculation) and one cancelled was
//!    found by a rejection. A semaphore that did not fail ends at its last value in the file.
//!    Compute and copy results are right, and the Vulkan validation layer says nothing.
//! 4. **Liveness.** The run ends within [`TIMEOUT`].
//!
//! A scenario that breaks any of these is saved in the temporary directory (as TOML, which
//! `causeway run` runs as it is) and printed with its seed, its violations and — for the first
//! [`SHOWN_IN_FULL`] — its outcome and text; the test fails once all have run.
//!
//! The default run is [`DEFAULT_SCENARIOS`] scenarios from seed [`DEFAULT_SEED`]. Environment:
//!
//! - `CAUSEWAY_DIFFERENTIAL_SCENARIOS=10000`: how many scenarios;
//! - `CAUSEWAY_DIFFERENTIAL_SEED=N`: the first seed (scenario `k` has seed `N + k`; a failure
//!   is rerun alone with its seed and `CAUSEWAY_DIFFERENTIAL_SCENARIOS=1`);
//! - `CAUSEWAY_DIFFERENTIAL_FILE=path`: run that scenario file instead, as many times, with the
//!   same checks (a saved failure, or a smaller reproduction of one).
//!
//! ```sh
//! CAUSEWAY_VULKAN_VALIDATION=1 CAUSEWAY_DIFFERENTIAL_SCENARIOS=10000 \
//!     cargo test -p causeway-cli --release --test differential
//! ```
//!
//! One scenario in four opens a Vulkan device (lavapipe, with validation where
//! `CAUSEWAY_VULKAN_VALIDATION=1` asks for it): opening it costs more than running most
//! scenarios. Three in four have NPU queues. On Linux a Vulkan device must open — the test
//! tiers install lavapipe — so a missing one fails the test rather than skipping it.
//!
//! The other tests here are issue 42's acceptance cases, deterministic in what they assert,
//! and a case the differential test found (an operation overtaking a signaller's later signal).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use causeway_core::queue::Resolution;
use causeway_scenario::check::check;
use causeway_scenario::model::{DriverKind, Scenario, Target, WorkSpec};
use causeway_scenario::parse::{parse, HOST};
use causeway_scenario::random::{self, Mix};
use causeway_scenario::report;
use causeway_scenario::run::{run, OpRecord, Outcome, RunOptions, Status};

/// Scenarios of the default run: about half a minute on a 2-core machine.
const DEFAULT_SCENARIOS: u64 = 2000;
/// The first seed of the default run.
const DEFAULT_SEED: u64 = 42;
/// A run that has not ended by then is stuck (scenarios take milliseconds).
const TIMEOUT: Duration = Duration::from_secs(60);
/// Most operations of a random scenario.
const MAX_OPS: usize = 20;
/// Whether Vulkan queues run on a Vulkan device here: on Linux, where the test tiers install
/// lavapipe. Elsewhere (Windows under wine) the scenarios have none.
const VULKAN: bool = cfg!(target_os = "linux");

const OPTIONS: RunOptions = RunOptions { timeout: TIMEOUT, progress: false, all_cpu: false };

/// What a random scenario of `seed` contains: Vulkan queues one time in four, NPU queues three
/// times in four (chosen by different bits of the seed, so every pairing occurs).
fn mix(seed: u64) -> Mix {
    Mix {
        npu: !(seed / 4).is_multiple_of(4),
        vulkan: VULKAN && seed.is_multiple_of(4),
        cancel: true,
        max_ops: MAX_OPS,
    }
}

fn variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

fn number(name: &str, default: u64) -> u64 {
    variable(name).map_or(default, |value| {
        value.parse().unwrap_or_else(|_| panic!("{name}={value} is not a whole number"))
    })
}

/// What the file alone says of every operation.
struct Model {
    /// The host's axis: queue axes are the queues' indices, the host's comes after them.
    host_axis: usize,
    /// Per operation, its axis and its epoch on it.
    placed: Vec<(usize, u64)>,
    /// Per axis, its operations in epoch order.
    on_axis: Vec<Vec<usize>>,
    /// Per operation, per wait: the first operation in file order that signals the semaphore
    /// to the value or beyond (none for a value the semaphore starts at).
    signallers: Vec<Vec<Option<usize>>>,
    /// Per operation, per axis: the greatest epoch of its maximal causal past.
    past: Vec<Vec<u64>>,
    /// Per semaphore, the last value the file signals it to (its initial value if none).
    last_value: Vec<u64>,
}

impl Model {
    fn of(scenario: &Scenario) -> Model {
        let host_axis = scenario.queues.len();
        let mut on_axis: Vec<Vec<usize>> = vec![Vec::new(); host_axis + 1];
        let mut signals: Vec<Vec<(usize, u64)>> = vec![Vec::new(); scenario.semaphores.len()];
        let mut model = Model {
            host_axis,
            placed: Vec::new(),
            on_axis: Vec::new(),
            signallers: Vec::new(),
            past: Vec::new(),
            last_value: scenario.semaphores.iter().map(|s| s.initial).collect(),
        };
        for (index, op) in scenario.ops.iter().enumerate() {
            let axis = match op.target {
                Target::Queue(queue) => queue,
                Target::Host => host_axis,
            };
            let mut past = match on_axis[axis].last() {
                Some(&predecessor) => model.past[predecessor].clone(),
                None => vec![0; host_axis + 1],
            };
            on_axis[axis].push(index);
            let epoch = on_axis[axis].len() as u64;
            past[axis] = epoch;
            let signallers: Vec<Option<usize>> = (scenario.waits(op).iter())
                .map(|&(semaphore, value)| {
                    if value <= scenario.semaphores[semaphore].initial {
                        return None;
                    }
                    signals[semaphore].iter().find(|&&(_, to)| to >= value).map(|&(op, _)| op)
                })
                .collect();
            for &signaller in signallers.iter().flatten() {
                for (known, &theirs) in past.iter_mut().zip(&model.past[signaller]) {
                    *known = (*known).max(theirs);
                }
            }
            for &(semaphore, value) in scenario.signals(op) {
                signals[semaphore].push((index, value));
                model.last_value[semaphore] = value;
            }
            model.placed.push((axis, epoch));
            model.signallers.push(signallers);
            model.past.push(past);
        }
        model.on_axis = on_axis;
        model
    }
}

/// The driver of `op`'s queue when `op` is a kernel that driver issues ahead and orders with
/// native waits (compute or copy work on a Vulkan or NPU queue).
fn native_kernel(outcome: &Outcome<'_>, op: usize) -> Option<DriverKind> {
    let spec = &outcome.scenario.ops[op];
    let Target::Queue(queue) = spec.target else { return None };
    let driver = outcome.queues[queue].driver;
    let native = matches!(driver, DriverKind::Vulkan | DriverKind::Npu);
    let kernel = matches!(spec.work, WorkSpec::Compute { .. } | WorkSpec::Copy { .. });
    (native && kernel).then_some(driver)
}

/// Tallies over a run of many scenarios, printed at its end.
#[derive(Debug, Default)]
struct Tally {
    scenarios: u64,
    with_vulkan: u64,
    with_npu: u64,
    skipped: u64,
    ops: u64,
    status: BTreeMap<&'static str, u64>,
    resolutions: BTreeMap<&'static str, u64>,
    /// Timing comparisons made, and those skipped between two kernels of one native driver or
    /// before an NPU kernel.
    timed: u64,
    native_exempt: u64,
}

/// What checking one outcome found.
#[derive(Default)]
struct Findings {
    violations: Vec<String>,
    timed: u64,
    native_exempt: u64,
}

impl Findings {
    /// Compares `earlier`'s end with `later`'s start: `what` says why `earlier` must have ended.
    fn ended_before(&mut self, outcome: &Outcome<'_>, earlier: usize, later: usize, what: &str) {
        let later_native = native_kernel(outcome, later);
        if later_native == Some(DriverKind::Npu)
            || later_native.is_some() && native_kernel(outcome, earlier) == later_native
        {
            self.native_exempt += 1;
            return;
        }
        self.timed += 1;
        let (before, after) = (&outcome.ops[earlier], &outcome.ops[later]);
        if before.end_ns > after.start_ns {
            let scenario = outcome.scenario;
            self.violations.push(format!(
                "timing: op `{}` started at {} ns, but {what} — op `{}` — ended at {} ns, \
                 {} ns later",
                scenario.op_name(&scenario.ops[later]),
                after.start_ns,
                scenario.op_name(&scenario.ops[earlier]),
                before.end_ns,
                before.end_ns - after.start_ns
            ));
        }
    }
}

fn resolution_name(resolution: Option<Resolution>) -> &'static str {
    resolution.map_or("failed at submission", Resolution::name)
}

/// Whether a wait on `semaphore ≥ value` failed, by how the run ended: the semaphore stayed
/// below the value (every operation has ended, so the value was never reached), or the value
/// lies in the range of a cancelled signal.
fn value_failed(outcome: &Outcome<'_>, semaphore: usize, value: u64) -> bool {
    let record = &outcome.semaphores[semaphore];
    if record.value < value {
        return true;
    }
    let mut below = outcome.scenario.semaphores[semaphore].initial;
    for entry in outcome.history_of(record) {
        if entry.cancelled && below < value && value <= entry.value {
            return true;
        }
        below = entry.value;
    }
    false
}

/// The epoch `record`'s frontier knows on `axis` (0 when none).
fn known(outcome: &Outcome<'_>, record: &OpRecord, axis: usize, model: &Model) -> u64 {
    let name = if axis == model.host_axis { HOST } else { &outcome.scenario.queues[axis].name };
    let points = outcome.points_of(record.frontier).iter();
    points
        .filter(|&&point| outcome.axis_name(point) == name)
        .map(|point| point.epoch)
        .max()
        .unwrap_or(0)
}

/// Every way `outcome` breaks the checks of the module documentation.
fn examine(model: &Model, outcome: &Outcome<'_>) -> Findings {
    let scenario = outcome.scenario;
    let mut findings = Findings::default();
    let axis_of = |name: &str| -> Option<usize> {
        if name == HOST {
            return Some(model.host_axis);
        }
        scenario.queues.iter().position(|queue| queue.name == name)
    };
    let any_cancel_step = scenario.ops.iter().any(|op| op.cancel.is_some());
    for (index, (spec, record)) in scenario.ops.iter().zip(&outcome.ops).enumerate() {
        let name = scenario.op_name(spec);
        let (own_axis, own_epoch) = model.placed[index];
        if !matches!(record.status, Status::Ok | Status::Failed | Status::Cancelled) {
            findings.violations.push(format!("op `{name}` ended {}", record.status.name()));
            continue;
        }
        if record.epoch != own_epoch {
            findings.violations.push(format!(
                "op `{name}` has epoch {}, its place on its queue is {own_epoch}",
                record.epoch
            ));
        }
        // 2. The frontier lies within the causal past, and holds the operation's own point.
        let mut own_point = false;
        for &point in outcome.points_of(record.frontier) {
            let axis_name = outcome.axis_name(point);
            let Some(axis) = axis_of(axis_name) else {
                findings.violations.push(format!("op `{name}` knows unknown axis `{axis_name}`"));
                continue;
            };
            if axis == own_axis {
                own_point = point.epoch == own_epoch;
                continue;
            }
            if point.epoch > model.past[index][axis] {
                findings.violations.push(format!(
                    "algebra: op `{name}` knows {axis_name}:{}, beyond its causal past \
                     ({axis_name}:{})",
                    point.epoch, model.past[index][axis]
                ));
                continue;
            }
            // 1. Whatever it knows had ended when it started.
            let known = &model.on_axis[axis][..point.epoch as usize];
            for &earlier in known {
                let what = format!("its frontier's {axis_name}:{}", point.epoch);
                findings.ended_before(outcome, earlier, index, &what);
            }
        }
        if !own_point {
            findings.violations.push(format!("op `{name}`'s frontier lacks its own point"));
        }
        let waits = outcome.waits_of(record);
        for (wait, (&(semaphore, value), signaller)) in
            waits.iter().zip(scenario.waits(spec).iter().zip(&model.signallers[index]))
        {
            let semaphore_name = &scenario.semaphores[semaphore].name;
            let (Some(resolution), Some(signaller)) = (wait.resolution, *signaller) else {
                continue;
            };
            // A satisfied wait's signaller had ended by the submission. Any other wait imported
            // its signaller — from the queue's knowledge, from an earlier wait of the same
            // operation, or by waiting — unless the operation was accepted doomed (another wait
            // or a signal on a failed timeline): it then forgets what its waits imported and
            // waits for nothing, and its frontier does not know the signaller.
            let (signaller_axis, signaller_epoch) = model.placed[signaller];
            let imported = known(outcome, record, signaller_axis, model) >= signaller_epoch;
            if resolution != Resolution::Satisfied && !imported {
                continue;
            }
            let what = format!(
                "the signaller of its {} wait {semaphore_name}>={value}",
                resolution_name(wait.resolution)
            );
            findings.ended_before(outcome, signaller, index, &what);
        }
        // 3. Failure flows along the waits, and only where it has a cause.
        let failed_wait =
            scenario.waits(spec).iter().zip(waits).find(|(&(s, v), _)| value_failed(outcome, s, v));
        let host_fails = matches!(spec.work, WorkSpec::Host { fail: Some(_), .. });
        let signals_failed =
            scenario.signals(spec).iter().any(|&(s, _)| outcome.semaphores[s].failed);
        match record.status {
            Status::Ok => {
                if let Some((&(semaphore, value), wait)) = failed_wait {
                    findings.violations.push(format!(
                        "failure: op `{name}` ended ok, but its {} wait {}>={value} is on a \
                         value that failed",
                        resolution_name(wait.resolution),
                        scenario.semaphores[semaphore].name
                    ));
                }
                if host_fails {
                    findings
                        .violations
                        .push(format!("failure: op `{name}` ended ok, but its host work fails"));
                }
            }
            Status::Failed => {
                let speculation = record.speculation.is_some();
                if failed_wait.is_none() && !host_fails && !signals_failed && !speculation {
                    findings.violations.push(format!("failure: op `{name}` failed without cause"));
                }
            }
            _ => {
                if !any_cancel_step || record.speculation.is_none() {
                    findings.violations.push(format!(
                        "failure: op `{name}` was cancelled, but no rejection found it"
                    ));
                }
            }
        }
    }
    for ((spec, record), &last) in
        scenario.semaphores.iter().zip(&outcome.semaphores).zip(&model.last_value)
    {
        if !record.failed && record.value != last {
            findings.violations.push(format!(
                "semaphore `{}` did not fail but ended at {}, not at {last}",
                spec.name, record.value
            ));
        }
    }
    for computed in &outcome.compute {
        if let Some(Err(error)) = &computed.result {
            let op = scenario.op_name(&scenario.ops[computed.op]);
            findings.violations.push(format!("op `{op}` computed a wrong result: {error}"));
        }
    }
    if let Some(vulkan) = &outcome.vulkan {
        for message in &vulkan.validation_messages {
            findings.violations.push(format!("Vulkan validation: {message}"));
        }
    }
    findings
}

/// How one scenario text fared.
enum Verdict {
    Passed,
    /// The checker refused it (the generator should never write such a file).
    Refused(String),
    /// What went wrong, and the outcome, when there was one ([`describe`]).
    Failed(Vec<String>, String),
}

/// Every operation of `outcome`, one a line: status, times, frontier and waits.
fn describe(outcome: &Outcome<'_>) -> String {
    let scenario = outcome.scenario;
    let mut text = String::new();
    for (spec, record) in scenario.ops.iter().zip(&outcome.ops) {
        let frontier: Vec<String> = (outcome.points_of(record.frontier).iter())
            .map(|&point| format!("{}:{}", outcome.axis_name(point), point.epoch))
            .collect();
        let waits: Vec<String> = (scenario.waits(spec).iter().zip(outcome.waits_of(record)))
            .map(|(&(s, v), wait)| {
                let name = &scenario.semaphores[s].name;
                format!("{name}>={v} {}", resolution_name(wait.resolution))
            })
            .collect();
        let _ = writeln!(
            text,
            "  {:<6} {:<6} #{:<2} {:<9} {:>10}..{:<10} {{{}}} [{}]",
            scenario.op_name(spec),
            report::queue_name(outcome, spec.target),
            record.epoch,
            record.status.name(),
            record.start_ns,
            record.end_ns,
            frontier.join(", "),
            waits.join(", ")
        );
    }
    for (spec, record) in scenario.semaphores.iter().zip(&outcome.semaphores) {
        let history: Vec<String> = (outcome.history_of(record).iter())
            .map(|entry| {
                format!("{}{}", entry.value, if entry.cancelled { " cancelled" } else { "" })
            })
            .collect();
        let failed = if record.failed { " failed" } else { "" };
        let _ =
            writeln!(text, "  {} = {}{failed} [{}]", spec.name, record.value, history.join(", "));
    }
    text
}

/// Loads, checks and runs `text`, then examines the outcome, adding to `tally`.
fn verdict(name: &str, text: &str, tally: &mut Tally) -> Verdict {
    let path = PathBuf::from(format!("{name}.toml"));
    let scenario = match parse(&path, text) {
        Ok(scenario) => scenario,
        Err(error) => {
            return Verdict::Failed(vec![format!("the file does not load: {error}")], String::new())
        }
    };
    let plan = match check(&scenario) {
        Ok(plan) => plan,
        Err(error) => return Verdict::Refused(error.to_string()),
    };
    let outcome = match run(&scenario, &plan, OPTIONS) {
        Ok(outcome) => outcome,
        Err(error) => {
            let refusal = format!("the run refused the file: {error}");
            return Verdict::Failed(vec![refusal], String::new());
        }
    };
    if let Some(stuck) = &outcome.timed_out {
        return Verdict::Failed(vec![format!("liveness: {}", stuck.error)], describe(&outcome));
    }
    let findings = examine(&Model::of(&scenario), &outcome);
    tally.scenarios += 1;
    tally.with_vulkan += u64::from(outcome.vulkan.is_some());
    tally.with_npu += u64::from(outcome.npu.is_some());
    tally.ops += outcome.ops.len() as u64;
    for record in &outcome.ops {
        *tally.status.entry(record.status.name()).or_default() += 1;
    }
    for wait in &outcome.waits {
        *tally.resolutions.entry(resolution_name(wait.resolution)).or_default() += 1;
    }
    tally.timed += findings.timed;
    tally.native_exempt += findings.native_exempt;
    if findings.violations.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Failed(findings.violations, describe(&outcome))
    }
}

/// Failed scenarios of a run printed whole; the others get a line each (all are saved).
const SHOWN_IN_FULL: usize = 10;

/// Prints a failed scenario — its violations, and `in_full` its outcome and text — and saves
/// it; returns its one-line summary.
fn report_failure(
    label: &str,
    rerun: &str,
    text: &str,
    violations: &[String],
    outcome: &str,
    in_full: bool,
) -> String {
    let saved = std::env::temp_dir().join(format!("causeway-{label}.toml"));
    let saved_note = match std::fs::write(&saved, text) {
        Ok(()) => format!("saved as {}", saved.display()),
        Err(error) => format!("not saved: {error}"),
    };
    let mut shown =
        format!("=== {label} ({rerun}; {saved_note}): {} violation(s)\n", violations.len());
    if in_full {
        for violation in violations {
            let _ = writeln!(shown, "  {violation}");
        }
        let _ = write!(
            shown,
            "--- outcome ---\n{outcome}--- scenario ---\n{text}--- end of {label} ---\n"
        );
    } else {
        let _ = writeln!(shown, "  {}", violations[0]);
    }
    eprintln!("{shown}");
    format!("{label}: {}", violations[0])
}

#[test]
fn random_scenarios_with_failures_keep_every_frontier_true() {
    let count = number("CAUSEWAY_DIFFERENTIAL_SCENARIOS", DEFAULT_SCENARIOS);
    let file = variable("CAUSEWAY_DIFFERENTIAL_FILE");
    let first_seed = number("CAUSEWAY_DIFFERENTIAL_SEED", DEFAULT_SEED);
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    let mut refused = Vec::new();
    for k in 0..count {
        let (label, rerun, text) = match &file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .unwrap_or_else(|error| panic!("cannot read {path}: {error}"));
                let stem = Path::new(path).file_stem().map(|s| s.to_string_lossy().into_owned());
                let label = format!("{}-run{k}", stem.unwrap_or_default());
                (label, format!("CAUSEWAY_DIFFERENTIAL_FILE={path}"), text)
            }
            None => {
                let seed = first_seed.wrapping_add(k);
                let rerun = format!(
                    "seed {seed}: CAUSEWAY_DIFFERENTIAL_SEED={seed} CAUSEWAY_DIFFERENTIAL_SCENARIOS=1"
                );
                (format!("differential-{seed}"), rerun, random::scenario(seed, mix(seed)))
            }
        };
        match verdict(&label, &text, &mut tally) {
            Verdict::Passed => {}
            Verdict::Refused(error) => {
                tally.skipped += 1;
                refused.push(format!("{label}: {error}"));
            }
            Verdict::Failed(violations, outcome) => {
                let in_full = failures.len() < SHOWN_IN_FULL;
                let summary = report_failure(&label, &rerun, &text, &violations, &outcome, in_full);
                failures.push(summary);
            }
        }
    }
    println!(
        "differential: {count} scenarios in {:.1} s, {} failed, {} refused by the checker \
         (skipped); {tally:?}",
        started.elapsed().as_secs_f64(),
        failures.len(),
        tally.skipped
    );
    // The generator writes valid files only: a refusal is worth knowing, but it is not a run.
    assert!(refused.len() as u64 * 100 <= count, "the checker refused many files: {refused:#?}");
    assert!(failures.is_empty(), "{} scenario(s) failed:\n{}", failures.len(), failures.join("\n"));
}

/// Runs `text` and examines it as the random scenarios are; panics naming every violation.
fn run_checked<T>(label: &str, text: &str, inspect: impl FnOnce(&Outcome<'_>) -> T) -> T {
    let path = PathBuf::from(format!("{label}.toml"));
    let scenario = parse(&path, text).unwrap_or_else(|error| panic!("{label}: {error}"));
    let plan = check(&scenario).unwrap_or_else(|error| panic!("{label}: {error}"));
    let outcome = run(&scenario, &plan, OPTIONS).unwrap_or_else(|error| panic!("{label}: {error}"));
    assert!(outcome.timed_out.is_none(), "{label}: {:?}", outcome.timed_out);
    let findings = examine(&Model::of(&scenario), &outcome);
    if !findings.violations.is_empty() {
        let shown = describe(&outcome);
        let summary =
            report_failure(label, "a fixed case", text, &findings.violations, &shown, true);
        panic!("{summary}");
    }
    inspect(&outcome)
}

/// The record of the operation named `name`.
fn op<'o>(outcome: &'o Outcome<'_>, name: &str) -> &'o OpRecord {
    let scenario = outcome.scenario;
    let index = (scenario.ops.iter().position(|op| scenario.op_name(op) == name))
        .unwrap_or_else(|| panic!("no op `{name}`"));
    &outcome.ops[index]
}

/// The drivers queue `b` of the fixed cases runs on.
fn drivers() -> Vec<&'static str> {
    if VULKAN {
        vec!["cpu", "npu", "vulkan"]
    } else {
        vec!["cpu", "npu"]
    }
}

/// Issue 42's reproduction: `W` imports `A`'s point through its wait on `s`, then `s` fails
/// from outside `A` (a host step, or an operation on a third queue failing its signal of
/// `s = 2`). `W` fails, but not before `A` has ended, so `Z`, behind `W` on queue `b`, may elide
/// its wait on `t` (which only `A` signals) and still starts after `A` ends.
#[test]
fn issue_42_z_starts_after_a_ends_on_every_driver_whoever_fails_s() {
    let failures = [
        ("host", "queue = \"host\"\nfail = \"s\""),
        (
            "queue-op",
            "queue = \"c\"\nsignal = [\"s=2\"]\nwork = { kind = \"host\", us = 0, fail = 1 }",
        ),
    ];
    for driver in drivers() {
        for (by, failure) in failures {
            let label = format!("issue-42-b-on-{driver}-failed-by-{by}");
            let text = format!(
                "name = \"elide-through-failed-waiter\"\n\
                 [[queue]]\nname = \"a\"\n[[queue]]\nname = \"b\"\ndriver = \"{driver}\"\n\
                 [[queue]]\nname = \"c\"\n\
                 [[semaphore]]\nname = \"s\"\n[[semaphore]]\nname = \"t\"\n\
                 [[op]]\nname = \"A\"\nqueue = \"a\"\nsignal = [\"s=1\", \"t=1\"]\n\
                 work = {{ kind = \"spin\", us = 100000 }}\n\
                 [[op]]\nname = \"W\"\nqueue = \"b\"\nwait = [\"s>=1\"]\n\
                 [[op]]\nname = \"fail-s\"\n{failure}\n\
                 [[op]]\nname = \"Z\"\nqueue = \"b\"\nwait = [\"t>=1\"]\n"
            );
            run_checked(&label, &text, |outcome| {
                let (a, w, z) = (op(outcome, "A"), op(outcome, "W"), op(outcome, "Z"));
                assert_eq!(
                    (a.status, w.status, z.status),
                    (Status::Ok, Status::Failed, Status::Ok)
                );
                assert!(
                    z.start_ns >= a.end_ns,
                    "{label}: Z started at {} ns, A ended at {} ns",
                    z.start_ns,
                    a.end_ns
                );
            });
        }
    }
}

/// A wait elided on a value whose only signaller failed fails its operation, every time: the
/// signaller `A` fails after its host function's 0–2000 µs, so the failure lands before or
/// after the waiter is submitted. Elided by the queue's order (`B` behind `A`) and by
/// knowledge carried from another queue (`Q` on `b` knows `A` through `P`'s wait on `C`,
/// which ran after `A` on queue `a`), with `b` on every driver.
#[test]
fn an_elided_wait_on_a_failed_value_fails_its_op_in_every_run() {
    for run in 0..50 {
        let us = [0, 200, 2000][run % 3];
        for driver in drivers() {
            let label = format!("elided-on-failed-{driver}-{run}");
            let text = format!(
                "name = \"elided-on-failed\"\n\
                 [[queue]]\nname = \"a\"\n[[queue]]\nname = \"b\"\ndriver = \"{driver}\"\n\
                 [[semaphore]]\nname = \"s\"\n[[semaphore]]\nname = \"u\"\n\
                 [[op]]\nname = \"A\"\nqueue = \"a\"\nsignal = [\"s=1\"]\n\
                 work = {{ kind = \"host\", us = {us}, fail = 3 }}\n\
                 [[op]]\nname = \"B\"\nqueue = \"a\"\nwait = [\"s>=1\"]\n\
                 [[op]]\nname = \"C\"\nqueue = \"a\"\nsignal = [\"u=1\"]\n\
                 [[op]]\nname = \"P\"\nqueue = \"b\"\nwait = [\"u>=1\"]\n\
                 [[op]]\nname = \"Q\"\nqueue = \"b\"\nwait = [\"s>=1\"]\n"
            );
            run_checked(&label, &text, |outcome| {
                for (name, status) in [
                    ("A", Status::Failed),
                    ("B", Status::Failed),
                    ("C", Status::Ok),
                    ("P", Status::Ok),
                    ("Q", Status::Failed),
                ] {
                    assert_eq!(op(outcome, name).status, status, "{label}: op {name}");
                }
                for name in ["B", "Q"] {
                    let wait = outcome.waits_of(op(outcome, name))[0];
                    assert!(
                        matches!(wait.resolution, Some(Resolution::Elided) | None),
                        "{label}: {name}'s wait resolved {:?}",
                        wait.resolution
                    );
                }
            });
        }
    }
}

/// An operation signalling a semaphore that has already failed is accepted doomed and fails at
/// retire: the run goes on and its report is whole (no input error, no exit 2), whether it is
/// submitted to an idle queue or behind work, after a host step's failure or after one of a
/// queue operation that the host waited out.
#[test]
fn signalling_an_already_failed_semaphore_fails_at_retire_with_a_full_report() {
    let failures = [
        ("host", "[[op]]\nname = \"fail-s\"\nqueue = \"host\"\nfail = \"s\"\n"),
        (
            "queue-op",
            "[[op]]\nname = \"F\"\nqueue = \"c\"\nsignal = [\"s=1\"]\n\
             work = { kind = \"host\", us = 300, fail = 4 }\n\
             [[op]]\nname = \"see-s-fail\"\nqueue = \"host\"\nwait = [\"s>=1\"]\n",
        ),
    ];
    for driver in drivers() {
        for (by, failure) in failures {
            for ahead_us in [0, 3000] {
                let label = format!("signal-failed-{driver}-by-{by}-behind-{ahead_us}us");
                let ahead = if ahead_us == 0 {
                    "{ kind = \"noop\" }".to_string()
                } else {
                    format!("{{ kind = \"host\", us = {ahead_us} }}")
                };
                let text = format!(
                    "name = \"signal-failed\"\n\
                     [[queue]]\nname = \"a\"\ndriver = \"{driver}\"\n[[queue]]\nname = \"c\"\n\
                     [[semaphore]]\nname = \"s\"\n[[semaphore]]\nname = \"after\"\n\
                     {failure}\
                     [[op]]\nname = \"ahead\"\nqueue = \"a\"\nwork = {ahead}\n\
                     [[op]]\nname = \"Y\"\nqueue = \"a\"\nsignal = [\"s=2\", \"after=1\"]\n\
                     [[op]]\nname = \"next\"\nqueue = \"a\"\n\
                     [[op]]\nname = \"later\"\nqueue = \"c\"\nwait = [\"after>=1\"]\n"
                );
                let document = run_checked(&label, &text, |outcome| {
                    assert_eq!(op(outcome, "Y").status, Status::Failed, "{label}");
                    assert_eq!(op(outcome, "next").status, Status::Ok, "{label}");
                    assert_eq!(op(outcome, "later").status, Status::Failed, "{label}");
                    let mut bytes = Vec::new();
                    report::write(outcome, &mut bytes).unwrap();
                    serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
                });
                let ops = document["ops"].as_array().unwrap();
                assert_eq!(ops.len(), text.matches("[[op]]").count(), "{label}");
                let y = ops.iter().find(|op| op["name"] == "Y").unwrap();
                assert_eq!(y["status"], "failed", "{label}: {y}");
            }
        }
    }
}

/// An operation that knows a signaller through one of its signals must not overtake the
/// signaller's later signals. `A` signals `t = 1`, then `s = 1`; `B` waits on `t` (importing
/// `A`'s point), so its wait on `s ≥ 1` is elided, and it signals `s = 2`. Retiring `A`
/// completes its signals one at a time, waking `t`'s waiters between the two: `B` may run and
/// complete `s = 2` while `s = 1` is still pending, which breaks the timeline's order and fails
/// `s`, although the file is valid and nothing failed. The waiters `C`, `D` and `H` widen that
/// window (on a 2-core machine, 2–3 runs in 100 fail `s` on every driver of `b`).
#[test]
fn an_op_that_elides_through_a_retiring_signaller_never_overtakes_its_later_signal() {
    for driver in drivers() {
        let label = format!("half-retired-b-on-{driver}");
        let text = format!(
            "name = \"{label}\"\nworkers = 3\n\
             [[queue]]\nname = \"a\"\n[[queue]]\nname = \"b\"\ndriver = \"{driver}\"\n\
             [[queue]]\nname = \"c\"\n[[queue]]\nname = \"d\"\n\
             [[semaphore]]\nname = \"s\"\n[[semaphore]]\nname = \"t\"\n\
             [[op]]\nname = \"A\"\nqueue = \"a\"\nsignal = [\"t=1\", \"s=1\"]\n\
             work = {{ kind = \"spin\", us = 300 }}\n\
             [[op]]\nname = \"C\"\nqueue = \"c\"\nwait = [\"t>=1\"]\n\
             [[op]]\nname = \"D\"\nqueue = \"d\"\nwait = [\"t>=1\"]\n\
             [[op]]\nname = \"B\"\nqueue = \"b\"\nwait = [\"t>=1\", \"s>=1\"]\nsignal = [\"s=2\"]\n\
             [[op]]\nname = \"H\"\nqueue = \"host\"\nwait = [\"t>=1\"]\n"
        );
        let runs = 300;
        let mut failed = Vec::new();
        for run in 0..runs {
            let mut tally = Tally::default();
            if let Verdict::Failed(violations, outcome) = verdict(&label, &text, &mut tally) {
                failed.push(format!("run {run}: {}\n{outcome}", violations.join("; ")));
            }
        }
        assert!(
            failed.is_empty(),
            "{label}: {} of {runs} runs failed, the first:\n{}\n{text}",
            failed.len(),
            failed[0]
        );
    }
}

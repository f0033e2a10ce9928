//! `causeway schedule` end to end: every bundled graph scheduled, its scenario emitted and run
//! with `causeway run` (every dependency honoured, as the emitted expectations check), the
//! seed's preferred assignment for the fork-join graph, graphs with `while` and `case` run as
//! coroutines (their iterations decided at run time, every edge of every iteration honoured),
//! and bad graph files refused with exit 2 naming the file, the line and the problem.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use std::collections::HashMap;
use std::time::Duration;

use causeway_cli::schedule::{parse, GraphFile};
use causeway_schedule::control::ControlKind;
use causeway_schedule::run::{run_graph, run_graph_in_order, ControlError, GraphRun, Place, Ran};

fn causeway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causeway")).args(args).output().expect("the binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-schedule-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Schedules `graph`, emits its scenario, runs it, and returns the schedule's printout.
fn schedule_and_run(graph: &str) -> String {
    let path = repository().join("graphs").join(format!("{graph}.toml"));
    let scenario = scratch(&format!("{graph}.scenario.toml"));
    let scheduled =
        causeway(&["schedule", path.to_str().unwrap(), "--emit", scenario.to_str().unwrap()]);
    let printed = text(&scheduled.stdout);
    assert!(scheduled.status.success(), "{graph}: {printed}{}", text(&scheduled.stderr));
    let emitted = std::fs::read_to_string(&scenario).unwrap();
    assert!(emitted.contains("expect_frontier"), "{graph}: no frontier expectations");
    let ran = causeway(&["run", scenario.to_str().unwrap(), "--quiet"]);
    let verdict = text(&ran.stdout);
    assert!(
        ran.status.success() && verdict.contains("all met"),
        "{graph}: {verdict}{}\n{emitted}",
        text(&ran.stderr)
    );
    printed
}

#[test]
fn every_bundled_graph_schedules_and_runs() {
    let mut graphs: Vec<String> = std::fs::read_dir(repository().join("graphs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    graphs.sort();
    assert!(graphs.len() >= 4, "graphs/ holds {graphs:?}");
    for graph in graphs {
        let path = repository().join("graphs").join(format!("{graph}.toml"));
        let source = std::fs::read_to_string(&path).unwrap();
        if source.contains("[[while]]") || source.contains("[[case]]") {
            // A loop decided at run time cannot be a scenario: it runs as coroutines.
            let ran = causeway(&["schedule", path.to_str().unwrap(), "--run"]);
            let printed = text(&ran.stdout);
            assert!(ran.status.success(), "{graph}: {printed}{}", text(&ran.stderr));
            assert!(printed.contains("dependency edges honoured"), "{graph}: {printed}");
        } else {
            schedule_and_run(&graph);
        }
    }
}

#[test]
fn fork_join_gets_the_seeds_preferred_assignment() {
    let printed = schedule_and_run("fork-join");
    assert!(printed.contains("gpu.s0 N1 N2 N4\n"), "{printed}");
    assert!(printed.contains("gpu.s1 N3\n"), "{printed}");
}

#[test]
fn transformer_block_signals_fewer_than_an_event_per_crossing_edge() {
    // Six streams (the six projections run side by side); the layer norm's one signal serves
    // the five projections that wait on it, where a naive schedule records an event per edge.
    let printed = schedule_and_run("transformer-block");
    let row = |name: &str| -> (u64, u64) {
        let line = printed.lines().find(|l| l.starts_with(&format!("{name} "))).expect("a row");
        let numbers: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        (numbers[0], numbers[1])
    };
    let (scheduled, naive) = row("signals");
    assert!(scheduled < naive, "{printed}");
    let (waits, naive_waits) = row("waits");
    assert!(waits <= naive_waits, "{printed}");
    assert!(printed.contains("streams: 6 "), "{printed}");
}

fn refused(name: &str, graph: &str, line: usize, problem: &str) {
    let path = scratch(name);
    std::fs::write(&path, graph).unwrap();
    let output = causeway(&["schedule", path.to_str().unwrap()]);
    let message = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{message}");
    let at = format!("{}:{line}", path.display());
    assert!(message.contains(&at), "{message} does not name {at}");
    assert!(message.contains(problem), "{message} does not say {problem}");
}

const DEVICE: &str = "[[device]]\nname = \"gpu\"\n";

#[test]
fn cycles_are_refused_naming_their_nodes() {
    let graph = format!(
        "{DEVICE}\n[[node]]\nname = \"a\"\ndevice = \"gpu\"\nafter = [\"c\"]\n\n\
         [[node]]\nname = \"b\"\ndevice = \"gpu\"\nafter = [\"a\"]\n\n\
         [[node]]\nname = \"c\"\ndevice = \"gpu\"\nafter = [\"b\"]\n"
    );
    refused("cycle.toml", &graph, 4, "dependency cycle: a -> b -> c -> a");
}

#[test]
fn unknown_dependencies_are_refused() {
    let graph = format!(
        "{DEVICE}\n[[node]]\nname = \"a\"\ndevice = \"gpu\"\n\n\
         [[node]]\nname = \"b\"\ndevice = \"gpu\"\nafter = [\"a\", \"z\"]\n"
    );
    refused("dependency.toml", &graph, 11, "node `b` depends on unknown node `z`");
}

#[test]
fn unknown_devices_are_refused() {
    let graph = format!("{DEVICE}\n[[node]]\nname = \"a\"\ndevice = \"tpu\"\n");
    refused("device.toml", &graph, 6, "node `a` is on unknown device `tpu`");
}

#[test]
fn toml_errors_are_refused_at_their_line() {
    let graph = format!("{DEVICE}\n[[node]]\nname = \"a\"\ndevice = \"gpu\"\nus = \"x\"\n");
    refused("toml.toml", &graph, 7, "invalid type");
}

/// A file with nothing to schedule is refused as `causeway run` refuses the same file: exit 2,
/// naming the file and the problem, whether it is printed, emitted or run.
#[test]
fn a_graph_without_nodes_is_refused_like_an_empty_scenario() {
    for (name, graph) in [("empty.toml", ""), ("devices-only.toml", DEVICE)] {
        let path = scratch(name);
        std::fs::write(&path, graph).unwrap();
        let file = path.to_str().unwrap();
        let emitted = scratch(&format!("{name}.scenario.toml"));
        let emit = ["schedule", file, "--emit", emitted.to_str().unwrap()];
        for args in [&["schedule", file][..], &["schedule", file, "--run"], &emit] {
            let output = causeway(args);
            let message = text(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {message}");
            assert!(
                message
                    .contains(&format!("{file}: the graph has no [[node]], [[while]] or [[case]]")),
                "{args:?}: {message}"
            );
        }
        assert!(!emitted.exists(), "{name}: a scenario was emitted");
        let run = causeway(&["run", file]);
        assert_eq!(run.status.code(), Some(2), "`causeway run {name}` refuses it too");
    }
}

/// A generated graph of 10^3 nodes — fork-join blocks with edges between branches — emitted
/// and run: every operation's frontier, as the schedule computed it, is what the run reports.
#[test]
fn a_thousand_node_graph_runs_with_every_edge_honoured() {
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    let mut deps: Vec<Vec<usize>> = vec![Vec::new()];
    let mut head = 0;
    while deps.len() < 1000 {
        let block_start = deps.len();
        let mut ends = Vec::new();
        for _ in 0..2 + next(4) {
            let mut at = head;
            for _ in 0..1 + next(3) {
                let mut these = vec![at];
                if deps.len() > block_start && next(3) == 0 {
                    let other = block_start + next(deps.len() - block_start);
                    if other != at {
                        these.push(other);
                    }
                }
                deps.push(these);
                at = deps.len() - 1;
            }
            ends.push(at);
        }
        deps.push(ends);
        head = deps.len() - 1;
    }
    let mut graph = String::from(DEVICE);
    for (node, after) in deps.iter().enumerate() {
        let after: Vec<String> = after.iter().map(|d| format!("\"n{d}\"")).collect();
        graph += &format!(
            "\n[[node]]\nname = \"n{node}\"\ncommand = \"c{}\"\ndevice = \"gpu\"\nafter = [{}]\n",
            node % 5,
            after.join(", ")
        );
    }
    let path = scratch("generated.toml");
    std::fs::write(&path, graph).unwrap();
    let scenario = scratch("generated.scenario.toml");
    let scheduled =
        causeway(&["schedule", path.to_str().unwrap(), "--emit", scenario.to_str().unwrap()]);
    assert!(scheduled.status.success(), "{}", text(&scheduled.stderr));
    let emitted = std::fs::read_to_string(&scenario).unwrap();
    let frontiers = emitted.matches("expect_frontier").count();
    assert!(frontiers > 900, "only {frontiers} operations carry their frontier");
    let ran = causeway(&["run", scenario.to_str().unwrap(), "--quiet"]);
    let verdict = text(&ran.stdout);
    assert!(ran.status.success() && verdict.contains("all met"), "{verdict}{}", text(&ran.stderr));
}

/// Far more than any loop here needs.
const LIMIT: Duration = Duration::from_secs(60);

/// Loads `graphs/while-refine.toml` with the residual starting at `initial`.
fn while_refine(initial: i64) -> GraphFile {
    let path = repository().join("graphs").join("while-refine.toml");
    let source = std::fs::read_to_string(&path).unwrap();
    assert!(source.contains("initial = 1000\n"));
    let source = source.replace("initial = 1000\n", &format!("initial = {initial}\n"));
    parse(&path, &source).expect("the bundled graph loads")
}

/// Checks `run` against `file` without the library's own check: every instance of a node
/// (outer nodes once, body nodes once per iteration of the branch taken) ran exactly once, and
/// each ran after everything it depends on — within an iteration its body dependencies, every
/// instance of an earlier iteration (the condition is read between), and for a loop or branch
/// as a whole: after the control's dependencies, before the control's dependents.
fn check_every_edge(file: &GraphFile, run: &GraphRun, order: &[Ran]) -> usize {
    let mut ran_at: HashMap<(Place, u64), Vec<usize>> = HashMap::new();
    for (at, ran) in order.iter().enumerate() {
        ran_at.entry((ran.place, ran.iteration)).or_default().push(at);
    }
    let position = |place: Place, iteration: u64| {
        let found = ran_at.get(&(place, iteration)).map_or(&[][..], Vec::as_slice);
        assert_eq!(found.len(), 1, "{place:?} in iteration {iteration}: {found:?}");
        found[0]
    };
    // Each outer node's (first, last) position; a control's spans its body's instances.
    let nodes = file.program.graph.nodes();
    let mut span: Vec<Option<(usize, usize)>> = vec![None; nodes.len()];
    let mut checked = 0;
    let mut instances = 0;
    for (control_index, control) in file.program.controls.iter().enumerate() {
        let (branch, block) = match &control.kind {
            ControlKind::While { body, .. } => (0, body),
            ControlKind::Case { branches } => match run.branches[control_index] {
                Some(branch) => (branch, &branches[branch].1),
                None => continue,
            },
        };
        let mut previous: Vec<usize> = Vec::new();
        for iteration in 0..run.iterations[control_index] {
            let at =
                |node| position(Place::Block { control: control_index, branch, node }, iteration);
            let this: Vec<usize> = (0..block.graph.nodes().len()).map(at).collect();
            instances += this.len();
            for (node, spec) in block.graph.nodes().iter().enumerate() {
                for &dep in &spec.deps {
                    assert!(this[dep] < this[node], "iteration {iteration}: {dep} -> {node}");
                    checked += 1;
                }
            }
            let first = *this.iter().min().unwrap();
            assert!(previous.iter().all(|&p| p < first), "iteration {iteration} overlapped");
            previous = this;
            let (low, high) = span[control.node].unwrap_or((usize::MAX, 0));
            span[control.node] = Some((low.min(first), high.max(*previous.iter().max().unwrap())));
        }
    }
    for &node in file.program.graph.order() {
        if !file.program.controls.iter().any(|c| c.node == node) {
            let at = position(Place::Graph(node), 0);
            span[node] = Some((at, at));
            instances += 1;
        }
        let Some((first, _)) = span[node] else { continue };
        for &dep in &nodes[node].deps {
            if let Some((_, last)) = span[dep] {
                assert!(last < first, "{} -> {}", nodes[dep].name, nodes[node].name);
                checked += 1;
            }
        }
    }
    assert_eq!(instances, order.len(), "something ran that should not have");
    assert_eq!(run.nodes_ran, order.len() as u64);
    checked
}

#[test]
fn while_loops_until_the_condition_its_body_computes_fails() {
    let file = while_refine(1000);
    let (run, order) = run_graph_in_order(&file.program, 2, LIMIT).expect("the graph runs");
    // 1000 / 3 / 3 ... : 333, 111, 37, 12, 4 — five iterations, then 4 < 5 takes branch 0.
    assert_eq!(run.iterations, [5, 1]);
    assert_eq!(run.branches, [None, Some(0)]);
    assert_eq!(run.counters, [4, 5]);
    // 4 body edges × 5 iterations, plus load -> refine -> finish -> store, prefetch -> store.
    let checked = check_every_edge(&file, &run, &order);
    assert_eq!(checked, 20 + 5, "{run:?}");
    assert_eq!(run.checked, Ok(25));
    // One worker is enough: the coroutine yields while the streams work, so that worker runs
    // both it and every node — no thread waits on the loop's behalf.
    let (run, order) =
        run_graph_in_order(&file.program, 1, LIMIT).expect("the graph runs on one worker");
    assert_eq!(run.iterations, [5, 1]);
    assert_eq!(check_every_edge(&file, &run, &order), 25);
    assert_eq!(run.checked, Ok(25));
    // The command line says the same.
    let ran = causeway(&["schedule", path_of("while-refine").to_str().unwrap(), "--run"]);
    let printed = text(&ran.stdout);
    assert!(ran.status.success(), "{printed}{}", text(&ran.stderr));
    for line in [
        "while `refine`: 5 iterations",
        "case `finish`: branch 0",
        "counter `residual` = 4",
        "ran 24 nodes; all 25 dependency edges honoured",
    ] {
        assert!(printed.contains(line), "{printed}");
    }
}

fn path_of(graph: &str) -> PathBuf {
    repository().join("graphs").join(format!("{graph}.toml"))
}

#[test]
fn the_trip_count_and_the_branch_follow_the_run_time_values() {
    let file = while_refine(100_000);
    let (run, order) = run_graph_in_order(&file.program, 2, LIMIT).expect("the graph runs");
    // 33333, 11111, 3703, 1234, 411, 137, 45, 15, 5: nine iterations; 5 is not < 5, so the
    // default branch (smooth, then polish) runs.
    assert_eq!(run.iterations, [9, 1]);
    assert_eq!(run.branches, [None, Some(1)]);
    assert_eq!(run.counters, [5, 9]);
    assert_eq!(check_every_edge(&file, &run, &order), 4 * 9 + 1 + 5);
    assert_eq!(run.checked, Ok(4 * 9 + 1 + 5));
    // A residual already small never enters the loop.
    let file = while_refine(7);
    let (run, order) = run_graph_in_order(&file.program, 2, LIMIT).expect("the graph runs");
    assert_eq!(run.iterations, [0, 1]);
    assert_eq!(run.counters, [7, 0]);
    assert_eq!(check_every_edge(&file, &run, &order), 1 + 3);
    // The library's check also counts the two edges of the loop that never ran (load ->
    // refine -> finish) as honoured: nothing ran to break them.
    assert_eq!(run.checked, Ok(1 + 3 + 2));
}

#[test]
fn a_loop_repeated_many_times_keeps_every_edge() {
    // 10^4 iterations of the four-node body (4·10^4 operations): the coroutine and the
    // streams' timelines keep going, every edge of every iteration held. The residual ends
    // below 5, so the case takes branch 0 (one node, no edge).
    let path = repository().join("graphs").join("while-refine.toml");
    let source = std::fs::read_to_string(&path).unwrap();
    let source = source
        .replace("condition = \"residual > 10\"", "condition = \"passes < 10000\"")
        .replace("us = ", "us = 0 # ")
        .replace("update = \"residual /= 3\"", "update = \"residual -= 1\"");
    let file = parse(&path, &source).expect("loads");
    let (run, order) = run_graph_in_order(&file.program, 2, LIMIT).expect("the graph runs");
    assert_eq!(run.iterations, [10_000, 1]);
    assert_eq!(run.counters, [1000 - 10_000, 10_000]);
    assert_eq!(check_every_edge(&file, &run, &order), 4 * 10_000 + 5);
    assert_eq!(run.checked, Ok(4 * 10_000 + 5));
}

#[test]
fn a_loop_that_never_ends_stops_at_the_time_limit() {
    // This copy drops the body's `passes += 1`, so the condition never fails.
    let path = repository().join("graphs").join("while-refine.toml");
    let source = std::fs::read_to_string(&path).unwrap();
    let source = source
        .replace("condition = \"residual > 10\"", "condition = \"passes < 1\"")
        .replace("update = \"passes += 1\"", "");
    let file = parse(&path, &source).expect("loads");
    let error = run_graph(&file.program, 2, Duration::from_millis(200)).unwrap_err();
    let ControlError::TimedOut(overrun) = error else { panic!("not a time-out: {error}") };
    let at = overrun.control.expect("the run was in the loop");
    assert_eq!(at.control, 0);
    // The deadline finds it deciding its condition, or in the middle of an iteration.
    assert!(at.iterations > 0, "{overrun:?}");
}

/// `causeway args…`, killed (and the test failed as a hang) if it runs past `limit`; returns
/// its output and how long it ran.
fn causeway_within(limit: Duration, args: &[&str]) -> (Output, Duration) {
    use std::process::Stdio;
    let started = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    while child.try_wait().expect("the child can be waited for").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().expect("the killed child's output");
            panic!("causeway {args:?} ran past {limit:?}: {}", text(&output.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("the child's output");
    (output, started.elapsed())
}

/// `--timeout` ends `schedule --run` as it ends `causeway run`: exit 3 at the deadline, naming
/// what was still going — a loop whose condition still held, work still running — and the
/// process gone within about a second of it, even when a node's work would run for an hour.
#[test]
fn schedule_run_ends_at_its_timeout_naming_what_was_still_going() {
    let source = std::fs::read_to_string(path_of("while-refine")).unwrap();
    let endless = source
        .replace("condition = \"residual > 10\"", "condition = \"passes < 1\"")
        .replace("update = \"passes += 1\"", "");
    let path = scratch("endless.toml");
    std::fs::write(&path, endless).unwrap();
    let args = ["schedule", path.to_str().unwrap(), "--run", "--timeout", "0.5"];
    let (output, took) = causeway_within(Duration::from_secs(20), &args);
    let message = text(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert!(message.contains("timed out after 500ms"), "{message}");
    assert!(
        message.contains("while `refine` still held its condition after ")
            || message.contains("while `refine` was running iteration "),
        "{message}"
    );
    assert!(took < Duration::from_millis(500 + 1500), "exited {took:?} after the start");

    // An hour-long node: cut short at the deadline and named.
    let hour = source.replace("us = 30\n", "us = 3600000000\n");
    let path = scratch("hour.toml");
    std::fs::write(&path, hour).unwrap();
    let args = ["schedule", path.to_str().unwrap(), "--run", "--timeout", "1"];
    let (output, took) = causeway_within(Duration::from_secs(20), &args);
    let message = text(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{message}");
    assert!(message.contains("timed out after 1s"), "{message}");
    assert!(
        message.contains(
            "node `estimate` (iteration 0 of while `refine`) was still running at the deadline"
        ),
        "{message}"
    );
    assert!(took < Duration::from_millis(1000 + 1500), "exited {took:?} after the start");

    for bad in ["0", "-1", "x", "NaN"] {
        let args = ["schedule", path.to_str().unwrap(), "--run", "--timeout", bad];
        let (output, _) = causeway_within(Duration::from_secs(20), &args);
        assert_eq!(output.status.code(), Some(2), "--timeout {bad}: {}", text(&output.stderr));
    }
}

#[test]
fn graphs_with_loops_cannot_be_emitted_as_scenarios() {
    let path = repository().join("graphs").join("while-refine.toml");
    let scenario = scratch("while.scenario.toml");
    let output =
        causeway(&["schedule", path.to_str().unwrap(), "--emit", scenario.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let message = text(&output.stderr);
    assert!(message.contains("while-refine.toml:29: a scenario cannot carry"), "{message}");
}

const COUNTER: &str = "[[counter]]\nname = \"n\"\n";

#[test]
fn bad_loops_are_refused_at_their_line() {
    let looping = |condition: &str, body: &str| {
        format!(
            "{DEVICE}{COUNTER}\n[[while]]\nname = \"w\"\ndevice = \"gpu\"\ncondition = \"{condition}\"\n{body}"
        )
    };
    let node = "\n[[while.node]]\nname = \"a\"\ndevice = \"gpu\"\n";
    refused("unknown-counter.toml", &looping("m < 3", node), 9, "reads unknown counter `m`");
    refused("operator.toml", &looping("n << 3", node), 9, "compares with `<<`");
    refused("shape.toml", &looping("n < three", node), 9, "must read `COUNTER OP INTEGER`");
    let divide = format!("{node}update = \"n /= 0\"\n");
    refused("divide.toml", &looping("n < 3", &divide), 14, "divides by zero");
    let unknown = format!("{node}after = [\"z\"]\n");
    refused("body-dependency.toml", &looping("n < 3", &unknown), 14, "depends on unknown node `z`");
    let cycle = "\n[[while.node]]\nname = \"a\"\ndevice = \"gpu\"\nafter = [\"b\"]\n\n\
                 [[while.node]]\nname = \"b\"\ndevice = \"gpu\"\nafter = [\"a\"]\n";
    refused("body-cycle.toml", &looping("n < 3", cycle), 11, "dependency cycle: a -> b -> a");
    let device = "\n[[while.node]]\nname = \"a\"\ndevice = \"tpu\"\n";
    refused("body-device.toml", &looping("n < 3", device), 13, "unknown device `tpu`");
    let case = format!("{DEVICE}\n[[case]]\nname = \"c\"\ndevice = \"gpu\"\n");
    refused("no-branch.toml", &case, 4, "case `c` has no `[[case.branch]]`");
    let when = format!(
        "{DEVICE}{COUNTER}\n[[case]]\nname = \"c\"\ndevice = \"gpu\"\n\n[[case.branch]]\nwhen = \"n ~ 1\"\n"
    );
    refused("when.toml", &when, 11, "compares with `~`");
}

//! `causeway schedule` end to end: every bundled graph scheduled, its scenario emitted and run
//! with `causeway run` (every dependency honoured, as the emitted expectations check), the
//! seed's preferred assignment for the fork-join graph, and bad graph files refused with exit
//! 2 naming the file, the line and the problem.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
    assert!(graphs.len() >= 3, "graphs/ holds {graphs:?}");
    for graph in graphs {
        schedule_and_run(&graph);
    }
}

#[test]
fn fork_join_gets_the_seeds_preferred_assignment() {
    let printed = schedule_and_run("fork-join");
    assert!(printed.contains("gpu.s0       N1 N2 N4\n"), "{printed}");
    assert!(printed.contains("gpu.s1       N3\n"), "{printed}");
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

//! `causeway schedule`: graph files, their schedules, and the scenarios that run them.
//!
//! A graph file (TOML, see the README) declares devices and nodes; [`load`] reads it into a
//! [`causeway_schedule::Graph`] with every problem — a TOML error, an unknown device or
//! dependency, a duplicate name, a cycle (its nodes named) — reported with its file and line.
//! [`render`] prints a schedule beside what a naive one (an event per cross-stream edge)
//! needs, and [`emit`] writes it as a scenario `causeway run` executes: a queue per stream, a
//! semaphore per stream that anything waits on, an operation per node in topological order,
//! and expectations that every dependency was honoured — each operation's frontier, exactly
//! as the schedule computed it, which covers every predecessor's point.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use causeway_schedule::{Graph, GraphError, NodeSpec, Schedule};
use serde::Deserialize;
use toml::Spanned;

use crate::scenario::ScenarioError;

/// The frontier capacity of the device `causeway run` uses: frontiers of at most this many
/// streams are exact at run time, so only those are expected exactly.
const RUN_FRONTIER_CAPACITY: usize = causeway::FRONTIER_CAPACITY;

/// A loaded graph file.
#[derive(Debug)]
pub struct GraphFile {
    /// The graph's name (the file stem when the file gives none).
    pub name: String,
    /// Its one-line description.
    pub description: String,
    /// The driver each device's queues run on, by device index.
    pub drivers: Vec<String>,
    /// The checked graph.
    pub graph: Graph,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGraph {
    name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(rename = "device", default)]
    devices: Vec<Spanned<RawDevice>>,
    #[serde(rename = "node", default)]
    nodes: Vec<Spanned<RawNode>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: Spanned<String>,
    #[serde(default = "cpu")]
    driver: Spanned<String>,
}

fn cpu() -> Spanned<String> {
    Spanned::new(0..0, "cpu".to_string())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    command: Option<String>,
    device: Option<Spanned<String>>,
    devices: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    after: Vec<Spanned<String>>,
    #[serde(default)]
    us: u32,
}

/// Reads and checks the graph file at `path`.
pub fn load(path: &Path) -> Result<GraphFile, ScenarioError> {
    let source = std::fs::read_to_string(path)
        .map_err(|error| ScenarioError::in_file(path, format!("cannot read: {error}")))?;
    parse(path, &source)
}

/// Checks graph file `source`, reporting problems against `path`.
pub fn parse(path: &Path, source: &str) -> Result<GraphFile, ScenarioError> {
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(source.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(at, _)| at + 1))
        .collect();
    let line = |offset: usize| line_starts.partition_point(|&start| start <= offset);
    let at = |span: std::ops::Range<usize>, message: String| {
        ScenarioError::at(path, line(span.start), message)
    };
    let raw: RawGraph = toml::from_str(source).map_err(|error| {
        let offset = error.span().map_or(0, |span| span.start);
        ScenarioError::at(path, line(offset), error.message().trim().to_string())
    })?;
    let mut device_ids: HashMap<&str, usize> = HashMap::new();
    let mut drivers = Vec::new();
    for device in &raw.devices {
        let table = device.get_ref();
        let name = table.name.get_ref();
        if device_ids.insert(name, drivers.len()).is_some() {
            return Err(at(device.span(), format!("device `{name}` is declared twice")));
        }
        let driver = table.driver.get_ref();
        if !matches!(driver.as_str(), "cpu" | "vulkan" | "npu") {
            let message = format!("unknown driver `{driver}` (cpu, vulkan or npu)");
            return Err(at(table.driver.span(), message));
        }
        drivers.push(driver.clone());
    }
    let mut node_ids: HashMap<&str, usize> = HashMap::new();
    for (index, node) in raw.nodes.iter().enumerate() {
        let name = node.get_ref().name.get_ref();
        if name.is_empty() || name.contains('@') {
            let message = format!("node name `{name}` must be non-empty and without `@`");
            return Err(at(node.get_ref().name.span(), message));
        }
        if node_ids.insert(name, index).is_some() {
            return Err(at(node.span(), format!("node `{name}` is declared twice")));
        }
    }
    let mut specs = Vec::with_capacity(raw.nodes.len());
    for node in &raw.nodes {
        let table = node.get_ref();
        let name = table.name.get_ref();
        let devices: Vec<(std::ops::Range<usize>, &str)> = match (&table.device, &table.devices) {
            (Some(device), None) => vec![(device.span(), device.get_ref().as_str())],
            (None, Some(devices)) if !devices.get_ref().is_empty() => {
                devices.get_ref().iter().map(|d| (devices.span(), d.as_str())).collect()
            }
            _ => {
                let message = format!("node `{name}` needs `device` or a non-empty `devices`");
                return Err(at(node.span(), message));
            }
        };
        let mut on = Vec::new();
        for (span, device) in devices {
            let Some(&id) = device_ids.get(device) else {
                return Err(at(span, format!("node `{name}` is on unknown device `{device}`")));
            };
            if on.contains(&id) {
                return Err(at(span, format!("node `{name}` names device `{device}` twice")));
            }
            on.push(id);
        }
        let mut deps = Vec::new();
        for dep in &table.after {
            let Some(&id) = node_ids.get(dep.get_ref().as_str()) else {
                let message = format!("node `{name}` depends on unknown node `{}`", dep.get_ref());
                return Err(at(dep.span(), message));
            };
            if !deps.contains(&id) {
                deps.push(id);
            }
        }
        specs.push(NodeSpec {
            name: name.clone(),
            command: table.command.clone().unwrap_or_else(|| name.clone()),
            devices: on,
            deps,
            work_us: table.us,
        });
    }
    let device_names = raw.devices.iter().map(|d| d.get_ref().name.get_ref().clone()).collect();
    let graph = Graph::new(device_names, specs).map_err(|error| match error {
        GraphError::Cycle(cycle) => {
            let names: Vec<&str> =
                cycle.iter().map(|&n| raw.nodes[n].get_ref().name.get_ref().as_str()).collect();
            let first = raw.nodes[cycle[0]].span();
            at(first, format!("dependency cycle: {} -> {}", names.join(" -> "), names[0]))
        }
        other => ScenarioError::in_file(path, other.to_string()),
    })?;
    let stem =
        path.file_stem().map_or_else(|| "graph".into(), |s| s.to_string_lossy().into_owned());
    Ok(GraphFile { name: raw.name.unwrap_or(stem), description: raw.description, drivers, graph })
}

/// The name of stream `stream` of `schedule`: its device and its index.
fn stream_name(file: &GraphFile, schedule: &Schedule, stream: usize) -> String {
    let device = schedule.assignment.streams[stream].device;
    format!("{}.s{stream}", file.graph.devices()[device])
}

/// The schedule as text: the streams and their nodes, the waits, and the totals beside a
/// naive schedule's.
pub fn render(file: &GraphFile, schedule: &Schedule) -> String {
    let graph = &file.graph;
    let nodes = graph.nodes();
    let assignment = &schedule.assignment;
    let signals = &schedule.signals;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "graph `{}`: {} nodes, {} edges, {} devices",
        file.name,
        nodes.len(),
        graph.edge_count(),
        graph.devices().len()
    );
    let _ = writeln!(
        out,
        "streams: {} ({} chains started on a recycled stream)",
        assignment.streams.len(),
        assignment.recycled
    );
    for (id, stream) in assignment.streams.iter().enumerate() {
        let names: Vec<&str> = stream.nodes.iter().map(|&n| nodes[n].name.as_str()).collect();
        let _ = writeln!(out, "  {:<12} {}", stream_name(file, schedule, id), names.join(" "));
    }
    let _ = writeln!(out, "waits:");
    for &node in graph.order() {
        for &dep in &signals.waits[node] {
            let _ = writeln!(
                out,
                "  {} waits {} >= {} (signalled by {})",
                nodes[node].name,
                stream_name(file, schedule, assignment.stream_of[dep]),
                assignment.epoch_of[dep],
                nodes[dep].name
            );
        }
    }
    let cross = signals.cross_stream();
    let _ = writeln!(out, "{:<44}{:>10}{:>10}", "", "scheduled", "naive");
    let _ = writeln!(out, "{:<44}{:>10}{:>10}", "signals", signals.signal_count(), cross);
    let _ = writeln!(out, "{:<44}{:>10}{:>10}", "waits", signals.waited, cross);
    let _ = writeln!(
        out,
        "edges: {} on one stream (FIFO), {} implied by other waits, {} waited",
        signals.fifo, signals.implied, signals.waited
    );
    out
}

/// A TOML string literal.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// The schedule as a scenario file (see the module documentation).
pub fn emit(file: &GraphFile, schedule: &Schedule) -> String {
    let graph = &file.graph;
    let nodes = graph.nodes();
    let assignment = &schedule.assignment;
    let signals = &schedule.signals;
    let semaphore = |stream: usize| format!("s{stream}");
    let mut out = String::new();
    let _ = writeln!(out, "name = {}", quoted(&format!("{}-schedule", file.name)));
    let description = format!(
        "The static schedule of graph `{}`: {} streams, {} waits where an event per \
         cross-stream edge needs {}.",
        file.name,
        assignment.streams.len(),
        signals.waited,
        signals.cross_stream()
    );
    let _ = writeln!(out, "description = {}", quoted(&description));
    for (id, stream) in assignment.streams.iter().enumerate() {
        let _ = writeln!(out, "\n[[queue]]");
        let _ = writeln!(out, "name = {}", quoted(&stream_name(file, schedule, id)));
        let _ = writeln!(out, "driver = {}", quoted(&file.drivers[stream.device]));
        let _ = writeln!(out, "device = {}", stream.device);
    }
    let mut signalling = vec![false; assignment.streams.len()];
    for (node, &signals) in signals.signals.iter().enumerate() {
        signalling[assignment.stream_of[node]] |= signals;
    }
    for (id, _) in signalling.iter().enumerate().filter(|(_, &s)| s) {
        let _ = writeln!(out, "\n[[semaphore]]\nname = {}", quoted(&semaphore(id)));
    }
    for &node in graph.order() {
        let spec = &nodes[node];
        let stream = assignment.stream_of[node];
        let _ = writeln!(out, "\n[[op]]");
        let _ = writeln!(out, "name = {}", quoted(&spec.name));
        let _ = writeln!(out, "queue = {}", quoted(&stream_name(file, schedule, stream)));
        let waits: Vec<String> = signals.waits[node]
            .iter()
            .map(|&dep| {
                let condition = format!(
                    "{}>={}",
                    semaphore(assignment.stream_of[dep]),
                    assignment.epoch_of[dep]
                );
                quoted(&condition)
            })
            .collect();
        if !waits.is_empty() {
            let _ = writeln!(out, "wait = [{}]", waits.join(", "));
        }
        if signals.signals[node] {
            let condition = format!("{}={}", semaphore(stream), assignment.epoch_of[node]);
            let _ = writeln!(out, "signal = [{}]", quoted(&condition));
        }
        if spec.work_us > 0 {
            let _ = writeln!(out, "work = {{ kind = \"spin\", us = {} }}", spec.work_us);
        }
        let frontier = signals.frontier(node);
        if signals.exact && frontier.len() <= RUN_FRONTIER_CAPACITY {
            let entries: Vec<String> = frontier
                .iter()
                .map(|&(s, epoch)| format!("{} = {epoch}", quoted(&stream_name(file, schedule, s))))
                .collect();
            let _ = writeln!(out, "expect_frontier = {{ {} }}", entries.join(", "));
        }
        let _ = writeln!(out, "expect_status = \"ok\"");
    }
    out
}

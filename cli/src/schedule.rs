//! `causeway schedule`: graph files, their schedules, and the scenarios that run them.
//!
//! A graph file (TOML, see `docs/src/scheduling.md`) declares devices and nodes; [`load`] reads it into a
//! [`causeway_schedule::Graph`] with every problem — a TOML error, an unknown device or
//! dependency, a duplicate name, a cycle (its nodes named) — reported with its file and line.
//! [`render`] prints a schedule beside what a naive one (an event per cross-stream edge)
//! needs, and [`emit`] writes it as a scenario `causeway run` executes: a queue per stream, a
//! semaphore per stream that anything waits on, an operation per node in topological order,
//! and expectations that every dependency was honoured — each operation's frontier, exactly
//! as the schedule computed it, which covers every predecessor's point.
//!
//! A graph file may also hold counters and `while` and `case` blocks: [`parse`] builds them
//! into a [`Program`] (the model lives in [`causeway_schedule::control`]), each block one node
//! of the file's graph with a body of its own nodes scheduled separately;
//! [`run_graph`] runs such a file, since a scenario cannot carry a loop decided while it runs,
//! and [`run_and_check`] is `causeway schedule --run`: that run, printed and checked.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use causeway_scenario::summary::count;
use causeway_scenario::ScenarioError;
use causeway_schedule::control::{
    is_identifier, Block, Condition, Control, ControlKind, Counter, Update,
};
use causeway_schedule::run::{run_graph, ControlError, Overrun, Place};
use causeway_schedule::{Graph, GraphError, NodeSpec, Program, Schedule};
use serde::Deserialize;
use toml::Spanned;

use crate::output::{self, Stdout};

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
    /// What the file describes: its graph — every `[[node]]`, then every `[[while]]` and
    /// `[[case]]` as one node standing for the whole loop or branch — with the nodes' counter
    /// updates, the counters and the `while` and `case` blocks.
    pub program: Program,
    /// Where the file was read from.
    path: PathBuf,
    /// The line of the first `while` or `case`, if any.
    control_line: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGraph {
    name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(rename = "device", default)]
    devices: Vec<Spanned<RawDevice>>,
    #[serde(rename = "counter", default)]
    counters: Vec<Spanned<RawCounter>>,
    #[serde(rename = "node", default)]
    nodes: Vec<Spanned<RawNode>>,
    #[serde(rename = "while", default)]
    whiles: Vec<Spanned<RawWhile>>,
    #[serde(rename = "case", default)]
    cases: Vec<Spanned<RawCase>>,
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
struct RawCounter {
    name: Spanned<String>,
    #[serde(default)]
    initial: i64,
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
    update: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWhile {
    name: Spanned<String>,
    device: Spanned<String>,
    #[serde(default)]
    after: Vec<Spanned<String>>,
    condition: Spanned<String>,
    #[serde(rename = "node", default)]
    nodes: Vec<Spanned<RawNode>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: Spanned<String>,
    device: Spanned<String>,
    #[serde(default)]
    after: Vec<Spanned<String>>,
    #[serde(rename = "branch", default)]
    branches: Vec<Spanned<RawBranch>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBranch {
    when: Option<Spanned<String>>,
    #[serde(rename = "node", default)]
    nodes: Vec<Spanned<RawNode>>,
}

/// One node as the file gives it, whichever table it came from.
struct Entry<'a> {
    name: &'a Spanned<String>,
    table: Range<usize>,
    command: Option<&'a str>,
    device: Option<&'a Spanned<String>>,
    devices: Option<&'a Spanned<Vec<String>>>,
    after: &'a [Spanned<String>],
    us: u32,
    update: Option<&'a Spanned<String>>,
}

impl<'a> Entry<'a> {
    fn node(node: &'a Spanned<RawNode>) -> Entry<'a> {
        let table = node.get_ref();
        Entry {
            name: &table.name,
            table: node.span(),
            command: table.command.as_deref(),
            device: table.device.as_ref(),
            devices: table.devices.as_ref(),
            after: &table.after,
            us: table.us,
            update: table.update.as_ref(),
        }
    }

    /// A `while` or `case`: one node of the graph around it, running its own name.
    fn control(
        name: &'a Spanned<String>,
        table: Range<usize>,
        device: &'a Spanned<String>,
        after: &'a [Spanned<String>],
    ) -> Entry<'a> {
        Entry {
            name,
            table,
            command: None,
            device: Some(device),
            devices: None,
            after,
            us: 0,
            update: None,
        }
    }
}

/// What building the graphs of one file needs: where to report, and the names in scope.
struct Context<'a> {
    path: &'a Path,
    line_starts: Vec<usize>,
    device_ids: HashMap<&'a str, usize>,
    device_names: Vec<String>,
    counter_ids: HashMap<&'a str, usize>,
}

impl Context<'_> {
    fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    fn at(&self, span: Range<usize>, message: String) -> ScenarioError {
        ScenarioError::at(self.path, self.line(span.start), message)
    }

    fn expression<T>(
        &self,
        text: &Spanned<String>,
        read: impl Fn(&str, &HashMap<&str, usize>) -> Result<T, String>,
    ) -> Result<T, ScenarioError> {
        read(text.get_ref(), &self.counter_ids).map_err(|message| self.at(text.span(), message))
    }

    /// The graph of `entries` (names local to them), with each node's counter update.
    fn block(&self, entries: &[Entry<'_>]) -> Result<(Graph, Vec<Option<Update>>), ScenarioError> {
        let mut node_ids: HashMap<&str, usize> = HashMap::new();
        for (index, entry) in entries.iter().enumerate() {
            let name = entry.name.get_ref();
            if name.is_empty() || name.contains('@') || name.contains('/') {
                let message =
                    format!("node name `{name}` must be non-empty and without `@` or `/`");
                return Err(self.at(entry.name.span(), message));
            }
            if node_ids.insert(name, index).is_some() {
                return Err(
                    self.at(entry.table.clone(), format!("node `{name}` is declared twice"))
                );
            }
        }
        let mut specs = Vec::with_capacity(entries.len());
        let mut updates = Vec::with_capacity(entries.len());
        for entry in entries {
            let name = entry.name.get_ref();
            let devices: Vec<(Range<usize>, &str)> = match (entry.device, entry.devices) {
                (Some(device), None) => vec![(device.span(), device.get_ref().as_str())],
                (None, Some(devices)) if !devices.get_ref().is_empty() => {
                    devices.get_ref().iter().map(|d| (devices.span(), d.as_str())).collect()
                }
                _ => {
                    let message = format!("node `{name}` needs `device` or a non-empty `devices`");
                    return Err(self.at(entry.table.clone(), message));
                }
            };
            let mut on = Vec::new();
            for (span, device) in devices {
                let Some(&id) = self.device_ids.get(device) else {
                    let message = format!("node `{name}` is on unknown device `{device}`");
                    return Err(self.at(span, message));
                };
                if on.contains(&id) {
                    let message = format!("node `{name}` names device `{device}` twice");
                    return Err(self.at(span, message));
                }
                on.push(id);
            }
            let mut deps = Vec::new();
            for dep in entry.after {
                let Some(&id) = node_ids.get(dep.get_ref().as_str()) else {
                    let message =
                        format!("node `{name}` depends on unknown node `{}`", dep.get_ref());
                    return Err(self.at(dep.span(), message));
                };
                if !deps.contains(&id) {
                    deps.push(id);
                }
            }
            updates.push(entry.update.map(|u| self.expression(u, Update::parse)).transpose()?);
            specs.push(NodeSpec {
                name: name.clone(),
                command: entry.command.map_or_else(|| name.clone(), str::to_string),
                devices: on,
                deps,
                work_us: entry.us,
            });
        }
        let graph = Graph::new(self.device_names.clone(), specs).map_err(|error| match error {
            GraphError::Cycle(cycle) => {
                let names: Vec<&str> =
                    cycle.iter().map(|&n| entries[n].name.get_ref().as_str()).collect();
                let first = entries[cycle[0]].table.clone();
                self.at(first, format!("dependency cycle: {} -> {}", names.join(" -> "), names[0]))
            }
            other => ScenarioError::in_file(self.path, other.to_string()),
        })?;
        // Parts (a node's share on a further device) only order: they update nothing.
        updates.resize_with(graph.nodes().len(), || None);
        Ok((graph, updates))
    }

    fn body(&self, nodes: &[Spanned<RawNode>]) -> Result<Block, ScenarioError> {
        let entries: Vec<Entry<'_>> = nodes.iter().map(Entry::node).collect();
        let (graph, updates) = self.block(&entries)?;
        Ok(Block { graph, updates })
    }
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
    let raw: RawGraph = toml::from_str(source).map_err(|error| {
        let offset = error.span().map_or(0, |span| span.start);
        ScenarioError::at(path, line(offset), error.message().trim().to_string())
    })?;
    let mut context = Context {
        path,
        line_starts: line_starts.clone(),
        device_ids: HashMap::new(),
        device_names: Vec::new(),
        counter_ids: HashMap::new(),
    };
    let mut drivers = Vec::new();
    for device in &raw.devices {
        let table = device.get_ref();
        let name = table.name.get_ref();
        if context.device_ids.insert(name, drivers.len()).is_some() {
            return Err(context.at(device.span(), format!("device `{name}` is declared twice")));
        }
        let driver = table.driver.get_ref();
        if !matches!(driver.as_str(), "cpu" | "vulkan" | "npu") {
            let message = format!("unknown driver `{driver}` (cpu, vulkan or npu)");
            return Err(context.at(table.driver.span(), message));
        }
        drivers.push(driver.clone());
        context.device_names.push(name.clone());
    }
    let mut counters = Vec::new();
    for counter in &raw.counters {
        let table = counter.get_ref();
        let name = table.name.get_ref();
        if !is_identifier(name) {
            let message = format!("counter name `{name}` must be letters, digits and `_`");
            return Err(context.at(table.name.span(), message));
        }
        if context.counter_ids.insert(name, counters.len()).is_some() {
            return Err(context.at(counter.span(), format!("counter `{name}` is declared twice")));
        }
        counters.push(Counter { name: name.clone(), initial: table.initial });
    }
    if raw.nodes.is_empty() && raw.whiles.is_empty() && raw.cases.is_empty() {
        // As `causeway run` refuses a scenario without operations: nothing would be scheduled.
        return Err(ScenarioError::in_file(
            path,
            "the graph has no [[node]], [[while]] or [[case]]",
        ));
    }
    let mut entries: Vec<Entry<'_>> = raw.nodes.iter().map(Entry::node).collect();
    for looping in &raw.whiles {
        let table = looping.get_ref();
        entries.push(Entry::control(&table.name, looping.span(), &table.device, &table.after));
    }
    for case in &raw.cases {
        let table = case.get_ref();
        entries.push(Entry::control(&table.name, case.span(), &table.device, &table.after));
    }
    let (graph, updates) = context.block(&entries)?;
    let mut controls = Vec::new();
    let mut node = raw.nodes.len();
    for looping in &raw.whiles {
        let table = looping.get_ref();
        let condition = context.expression(&table.condition, Condition::parse)?;
        let body = context.body(&table.nodes)?;
        controls.push(Control { node, kind: ControlKind::While { condition, body } });
        node += 1;
    }
    for case in &raw.cases {
        let table = case.get_ref();
        if table.branches.is_empty() {
            let name = table.name.get_ref();
            return Err(context.at(case.span(), format!("case `{name}` has no `[[case.branch]]`")));
        }
        let mut branches = Vec::new();
        for branch in &table.branches {
            let branch = branch.get_ref();
            let when = branch.when.as_ref().map(|w| context.expression(w, Condition::parse));
            branches.push((when.transpose()?, context.body(&branch.nodes)?));
        }
        controls.push(Control { node, kind: ControlKind::Case { branches } });
        node += 1;
    }
    let control_line = raw
        .whiles
        .iter()
        .map(|w| w.span().start)
        .chain(raw.cases.iter().map(|c| c.span().start))
        .min()
        .map(line);
    let stem =
        path.file_stem().map_or_else(|| "graph".into(), |s| s.to_string_lossy().into_owned());
    Ok(GraphFile {
        name: raw.name.unwrap_or(stem),
        description: raw.description,
        drivers,
        program: Program { graph, updates, counters, controls },
        path: path.to_path_buf(),
        control_line,
    })
}

/// The name of stream `stream` of `schedule`: its device and its index.
fn stream_name(file: &GraphFile, schedule: &Schedule, stream: usize) -> String {
    let device = schedule.assignment.streams[stream].device;
    format!("{}.s{stream}", file.program.graph.devices()[device])
}

/// The schedule as text: the streams and their nodes, the waits, and the totals beside a
/// naive schedule's.
pub fn render(file: &GraphFile, schedule: &Schedule) -> String {
    let graph = &file.program.graph;
    let nodes = graph.nodes();
    let assignment = &schedule.assignment;
    let signals = &schedule.signals;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "graph `{}`: {}, {}, {}",
        file.name,
        count(nodes.len(), "node", "nodes"),
        count(graph.edge_count(), "edge", "edges"),
        count(graph.devices().len(), "device", "devices")
    );
    let _ = writeln!(
        out,
        "streams: {} ({} started on a recycled stream)",
        assignment.streams.len(),
        count(assignment.recycled, "chain", "chains")
    );
    let names: Vec<String> =
        (0..assignment.streams.len()).map(|id| stream_name(file, schedule, id)).collect();
    let width = names.iter().map(|name| name.chars().count()).max().unwrap_or(0);
    for (stream, name) in assignment.streams.iter().zip(&names) {
        let nodes: Vec<&str> = stream.nodes.iter().map(|&n| nodes[n].name.as_str()).collect();
        let _ = writeln!(out, "  {name:<width$} {}", nodes.join(" "));
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
    for control in &file.program.controls {
        let name = &nodes[control.node].name;
        match &control.kind {
            ControlKind::While { condition, body } => {
                let condition = condition.describe(&file.program.counters);
                let _ = writeln!(out, "while `{name}` ({condition}), its body scheduled once:");
                render_block(&mut out, graph.devices(), name, body);
            }
            ControlKind::Case { branches } => {
                for (index, (when, branch)) in branches.iter().enumerate() {
                    let when = when.as_ref().map_or("always".into(), |c| {
                        format!("when {}", c.describe(&file.program.counters))
                    });
                    let _ = writeln!(out, "case `{name}` branch {index} ({when}):");
                    render_block(&mut out, graph.devices(), &format!("{name}[{index}]"), branch);
                }
            }
        }
    }
    out
}

/// The streams and waits of `block`, its streams named `device.label.sN`.
fn render_block(out: &mut String, devices: &[String], label: &str, block: &Block) {
    let schedule = causeway_schedule::schedule(&block.graph);
    let nodes = block.graph.nodes();
    let assignment = &schedule.assignment;
    let name =
        |stream: usize| format!("{}.{label}.s{stream}", devices[assignment.streams[stream].device]);
    let width = (0..assignment.streams.len()).map(|id| name(id).chars().count()).max();
    let width = width.unwrap_or(0);
    for (id, stream) in assignment.streams.iter().enumerate() {
        let names: Vec<&str> = stream.nodes.iter().map(|&n| nodes[n].name.as_str()).collect();
        let _ = writeln!(out, "  {:<width$} {}", name(id), names.join(" "));
    }
    for &node in block.graph.order() {
        for &dep in &schedule.signals.waits[node] {
            let _ = writeln!(
                out,
                "  {} waits {} >= {} (signalled by {})",
                nodes[node].name,
                name(assignment.stream_of[dep]),
                assignment.epoch_of[dep],
                nodes[dep].name
            );
        }
    }
}

/// A TOML string literal.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// The schedule as a scenario file (see the module documentation). A graph with `while` or
/// `case` blocks is refused: a scenario is a fixed list of operations and cannot carry a loop
/// whose trip count is decided while it runs ([`run_graph`] runs those).
pub fn emit(file: &GraphFile, schedule: &Schedule) -> Result<String, ScenarioError> {
    if let Some(line) = file.control_line {
        let message = "a scenario cannot carry `while` or `case` (decided while it runs): \
                       run the graph with `causeway schedule --run`";
        return Err(ScenarioError::at(&file.path, line, message.to_string()));
    }
    let graph = &file.program.graph;
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
    Ok(out)
}

/// `causeway schedule GRAPH --run --timeout SECONDS`: runs `file` ([`run_graph`], two
/// workers, ending at `timeout`), prints what each loop and branch did and the counters to
/// `out`, and checks every dependency
/// ([`GraphRun::checked`](causeway_schedule::run::GraphRun::checked)): exit 0 when all held, 1
/// when not (or the run failed), 3 when the run was still going at the timeout (naming what
/// was).
pub fn run_and_check(file: &GraphFile, timeout: Duration, out: &mut Stdout) -> ExitCode {
    let run = match run_graph(&file.program, 2, timeout) {
        Ok(run) => run,
        Err(ControlError::TimedOut(overrun)) => {
            output::error(describe_overrun(&file.program, &overrun));
            return ExitCode::from(3);
        }
        Err(error) => {
            output::error(format_args!("the run failed: {error}"));
            return ExitCode::from(1);
        }
    };
    let nodes = file.program.graph.nodes();
    for (index, control) in file.program.controls.iter().enumerate() {
        let name = &nodes[control.node].name;
        match control.kind {
            ControlKind::While { .. } => {
                let iterations = count(run.iterations[index], "iteration", "iterations");
                out.line(format_args!("while `{name}`: {iterations}"));
            }
            ControlKind::Case { .. } => match run.branches[index] {
                Some(branch) => out.line(format_args!("case `{name}`: branch {branch}")),
                None => out.line(format_args!("case `{name}`: no branch held")),
            },
        }
    }
    for (counter, value) in file.program.counters.iter().zip(&run.counters) {
        out.line(format_args!("counter `{}` = {value}", counter.name));
    }
    match &run.checked {
        Ok(edges) => {
            let nodes = count(run.nodes_ran, "node", "nodes");
            let edges = count(*edges, "dependency edge", "dependency edges");
            out.line(format_args!("ran {nodes}; all {edges} honoured"));
            ExitCode::SUCCESS
        }
        Err(problem) => {
            out.line(format_args!("dependency not honoured: {problem}"));
            ExitCode::from(1)
        }
    }
}

/// What `overrun` says, with the names `program` gives its controls and nodes: the loop or
/// branch the run was in, then each node still running at the limit.
fn describe_overrun(program: &Program, overrun: &Overrun) -> String {
    let nodes = program.graph.nodes();
    let control_name = |control: usize| {
        let name = &nodes[program.controls[control].node].name;
        match program.controls[control].kind {
            ControlKind::While { .. } => format!("while `{name}`"),
            ControlKind::Case { .. } => format!("case `{name}`"),
        }
    };
    let mut lines = vec![format!("timed out after {:?}", overrun.limit)];
    if let Some(at) = overrun.control {
        let control = control_name(at.control);
        lines.push(match program.controls[at.control].kind {
            ControlKind::While { .. } if at.condition_held => {
                format!("  {control} still held its condition after {} iterations", at.iterations)
            }
            ControlKind::While { .. } => {
                format!("  {control} was running iteration {}", at.iterations)
            }
            ControlKind::Case { .. } => format!("  {control} was running its branch"),
        });
    }
    for ran in &overrun.running {
        let node = match ran.place {
            Place::Graph(node) => format!("node `{}`", nodes[node].name),
            Place::Block { control, branch, node } => {
                let block = match &program.controls[control].kind {
                    ControlKind::While { body, .. } => body,
                    ControlKind::Case { branches } => &branches[branch].1,
                };
                let name = &block.graph.nodes()[node].name;
                match program.controls[control].kind {
                    ControlKind::While { .. } => format!(
                        "node `{name}` (iteration {} of {})",
                        ran.iteration,
                        control_name(control)
                    ),
                    ControlKind::Case { .. } => {
                        format!("node `{name}` (branch {branch} of {})", control_name(control))
                    }
                }
            }
        };
        lines.push(format!("  {node} was still running at the deadline"));
    }
    if overrun.running_total > overrun.running.len() {
        let more = overrun.running_total - overrun.running.len();
        lines.push(format!("  … and {more} more nodes still running"));
    }
    lines.join("\n")
}

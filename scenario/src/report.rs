//! The `--report` JSON: a stable contract for tools (the schema is in the guide,
//! `docs/src/cli.md`).
//!
//! The report is streamed to its writer as it is serialized: every array is produced by an
//! iterator over the outcome, so memory follows the outcome, not a document tree of the
//! output. Object keys are written in sorted order, as earlier versions (which built a
//! `serde_json::Value` first) printed them, so reports stay byte-comparable across versions.

use std::io;

use serde::{Serialize, Serializer};

use super::model::Target;
use super::outcome::{FrontierRecord, HistoryRecord, OpRecord, Outcome, WaitRecord};
use super::stats::{self, CudaStats, NpuStats, Stats, VulkanStats};

/// Writes the report of `outcome` to `out` as pretty-printed JSON.
pub fn write(outcome: &Outcome<'_>, out: impl io::Write) -> io::Result<()> {
    let scenario = outcome.scenario;
    let history_truncated = stats::history_truncated(outcome);
    let report = Report {
        ops: LazyArray(|| {
            scenario.ops.iter().zip(&outcome.ops).map(|(spec, record)| {
                let signals = scenario.signals(spec);
                let machine = match spec.target {
                    Target::Queue(queue) => scenario.queues[queue].machine,
                    Target::Host => 0,
                };
                op(
                    outcome,
                    scenario.op_name(spec),
                    queue_name(outcome, spec.target),
                    machine,
                    record,
                    signals,
                )
            })
        }),
        queues: LazyArray(|| {
            scenario.queues.iter().zip(&outcome.queues).map(|(spec, record)| QueueJson {
                adapter: &record.adapter,
                driver: record.driver.name(),
                name: &spec.name,
            })
        }),
        scenario: &scenario.name,
        semaphores: LazyArray(|| {
            let semaphores = scenario.semaphores.iter().zip(&outcome.semaphores);
            semaphores.zip(&history_truncated).map(|((spec, record), &history_truncated)| {
                SemaphoreJson {
                    failed: record.failed,
                    history: LazyArray(|| {
                        outcome.history_of(record).iter().map(|entry| history_entry(outcome, entry))
                    }),
                    history_truncated,
                    name: &spec.name,
                    value: record.value,
                }
            })
        }),
        stats: Stats::of(outcome),
        timed_out: outcome.timed_out.as_ref().map(|timed_out| TimedOutJson {
            at_ns: timed_out.at_ns,
            pending_waits: LazyArray(move || {
                timed_out.pending_waits.iter().map(|wait| PendingWaitJson {
                    at: wait.at,
                    op: scenario.op_name(&scenario.ops[wait.op as usize]),
                    semaphore: &scenario.semaphores[wait.semaphore as usize].name,
                    value: wait.value,
                })
            }),
            reason: &timed_out.reason,
            timeout_ns: u64::try_from(timed_out.timeout.as_nanos()).unwrap_or(u64::MAX),
        }),
        vulkan: VulkanStats::of(outcome),
        npu: NpuStats::of(outcome),
        cuda: CudaStats::of(outcome),
    };
    serde_json::to_writer_pretty(out, &report).map_err(io::Error::from)
}

/// The queue column of an operation: its queue's name, or `host`.
pub fn queue_name<'s>(outcome: &Outcome<'s>, target: Target) -> &'s str {
    match target {
        Target::Queue(queue) => &outcome.scenario.queues[queue].name,
        Target::Host => super::parse::HOST,
    }
}

/// A JSON array of what the iterator `F` makes yields, written item by item.
pub(crate) struct LazyArray<F>(pub(crate) F);

impl<F, I> Serialize for LazyArray<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq((self.0)())
    }
}

#[derive(Serialize)]
struct Report<'a, Ops, Queues, Semaphores, Pending> {
    cuda: Option<CudaStats>,
    npu: Option<NpuStats>,
    ops: Ops,
    queues: Queues,
    scenario: &'a str,
    semaphores: Semaphores,
    stats: Stats,
    /// Only in a run stopped at its deadline: when, why, and every wait not reached then.
    #[serde(skip_serializing_if = "Option::is_none")]
    timed_out: Option<TimedOutJson<'a, Pending>>,
    vulkan: Option<VulkanStats>,
}

#[derive(Serialize)]
struct TimedOutJson<'a, Pending> {
    /// When the run was stopped, in nanoseconds since the device started.
    at_ns: u64,
    pending_waits: Pending,
    /// What the runner itself was waiting for at the deadline.
    reason: &'a str,
    timeout_ns: u64,
}

/// A wait of an operation that had not started, not reached when the run was stopped.
#[derive(Serialize)]
struct PendingWaitJson<'a> {
    /// The semaphore's value then.
    at: u64,
    op: &'a str,
    semaphore: &'a str,
    value: u64,
}

#[derive(Serialize)]
struct OpJson<'a, Points, Signals, Waits> {
    /// Why a `cancel` step cancelled it: "speculation" or "conservative". (Fields in key
    /// order: the report is streamed sorted.)
    #[serde(skip_serializing_if = "Option::is_none")]
    cancelled: Option<&'static str>,
    end_ns: u64,
    epoch: u64,
    frontier: Points,
    /// The machine (MPI rank, when run across ranks) that ran it; host steps run on 0.
    machine: u16,
    name: &'a str,
    queue: &'a str,
    /// Why a `cancel` step found it running on rejected work (it ran to its end).
    #[serde(skip_serializing_if = "Option::is_none")]
    ran_on_rejected: Option<&'static str>,
    signals: Signals,
    start_ns: u64,
    status: &'static str,
    tainted: bool,
    waits: Waits,
}

/// What an operation signals: the view draws an edge from it to each wait its signal was the
/// first to reach.
#[derive(Serialize)]
struct SignalJson<'a> {
    semaphore: &'a str,
    value: u64,
}

#[derive(Serialize)]
struct QueueJson<'a> {
    adapter: &'a str,
    driver: &'static str,
    name: &'a str,
}

#[derive(Serialize)]
struct WaitJson<'a> {
    resolution: &'static str,
    semaphore: &'a str,
    tainted: bool,
    value: u64,
}

#[derive(Serialize)]
struct SemaphoreJson<'a, History> {
    failed: bool,
    history: History,
    /// The oldest history entries the bounded history did not keep (before `history`).
    history_truncated: u64,
    name: &'a str,
    value: u64,
}

#[derive(Serialize)]
struct HistoryJson<Points> {
    /// The signal was cancelled (shown only when it was).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cancelled: bool,
    frontier: Points,
    /// Its operation ran on rejected speculation (shown only when it did).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    ran_on_rejected: bool,
    tainted: bool,
    value: u64,
}

#[derive(Serialize)]
struct PointJson<'a> {
    axis: &'a str,
    epoch: u64,
}

fn op<'a>(
    outcome: &'a Outcome<'_>,
    name: &'a str,
    queue: &'a str,
    machine: u16,
    record: &'a OpRecord,
    signals: &'a [(usize, u64)],
) -> OpJson<'a, impl Serialize + 'a, impl Serialize + 'a, impl Serialize + 'a> {
    OpJson {
        cancelled: record.speculation.filter(|s| !s.started).map(|s| s.reason()),
        end_ns: record.end_ns,
        epoch: record.epoch,
        frontier: frontier(outcome, record.frontier),
        machine,
        name,
        queue,
        ran_on_rejected: record.speculation.filter(|s| s.started).map(|s| s.reason()),
        signals: LazyArray(move || {
            signals.iter().map(|&(semaphore, value)| SignalJson {
                semaphore: &outcome.scenario.semaphores[semaphore].name,
                value,
            })
        }),
        start_ns: record.start_ns,
        status: record.status.name(),
        tainted: record.frontier.tainted,
        waits: LazyArray(move || {
            outcome.waits_of(record).iter().map(|wait| wait_json(outcome, wait))
        }),
    }
}

fn wait_json<'a>(outcome: &'a Outcome<'_>, wait: &WaitRecord) -> WaitJson<'a> {
    WaitJson {
        // A wait on a value that had already failed is decided on the spot, as failed (the
        // stats count it apart from the four resolutions, and so does the view).
        resolution: wait.resolution.map_or("failed", |r| r.name()),
        semaphore: &outcome.scenario.semaphores[wait.semaphore as usize].name,
        tainted: wait.tainted,
        value: wait.value,
    }
}

fn history_entry<'a>(
    outcome: &'a Outcome<'_>,
    entry: &'a HistoryRecord,
) -> HistoryJson<impl Serialize + 'a> {
    HistoryJson {
        cancelled: entry.cancelled,
        frontier: frontier(outcome, entry.frontier),
        ran_on_rejected: entry.ran_on_rejected,
        tainted: entry.tainted,
        value: entry.value,
    }
}

fn frontier<'a>(outcome: &'a Outcome<'_>, frontier: FrontierRecord) -> impl Serialize + 'a {
    LazyArray(move || {
        outcome
            .points_of(frontier)
            .iter()
            .map(|&point| PointJson { axis: outcome.axis_name(point), epoch: point.epoch })
    })
}

#[cfg(test)]
pub(super) mod tests {
    use std::path::Path;
    use std::time::Duration;

    use serde_json::Value;

    use super::*;
    use crate::check::check;
    use crate::model::DriverKind;
    use crate::outcome::{CudaRecord, NpuRecord, Speculation, Status, VulkanRecord};
    use crate::run::{run, RunOptions};
    use crate::{bundled, parse};
    use causeway_core::queue::Resolution;

    /// `document` of a real run of bundled scenario `name`, streamed, and the same bytes read
    /// back as a tree.
    pub(crate) fn streamed(
        name: &str,
        document: fn(&Outcome<'_>, &mut Vec<u8>) -> io::Result<()>,
    ) -> (String, Value) {
        let found = bundled::find(name).unwrap();
        let scenario = parse::parse(Path::new(found.file), found.source).unwrap();
        let plan = check(&scenario).unwrap();
        let options =
            RunOptions { timeout: Duration::from_secs(30), progress: false, all_cpu: false };
        let outcome = run(&scenario, &plan, options).unwrap();
        let mut bytes = Vec::new();
        document(&outcome, &mut bytes).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let tree = serde_json::from_str(&text).unwrap();
        (text, tree)
    }

    #[test]
    fn the_streamed_report_is_the_sorted_pretty_print_of_its_own_tree() {
        for name in ["late-waiter", "buffer-reuse", "speculation"] {
            let (text, tree) = streamed(name, |outcome, out| write(outcome, out));
            assert_eq!(serde_json::to_string_pretty(&tree).unwrap(), text, "{name}");
        }
    }

    /// A line of the guide's report schema: its keys, their type, and the lines that
    /// describe what is inside them.
    #[derive(Debug)]
    struct SchemaLine {
        /// Each key and whether it holds an array (`key[]`) of the type.
        keys: Vec<(String, bool)>,
        kind: Kind,
        optional: bool,
        children: Vec<SchemaLine>,
    }

    /// A type as the schema spells it.
    #[derive(Debug)]
    enum Kind {
        String,
        Number,
        Bool,
        Object,
        NullOrObject,
        True,
        OneOf(Vec<String>),
    }

    /// The schema block of the guide's "Report" section (the CLI chapter), as a tree.
    fn guide_schema() -> Vec<SchemaLine> {
        let guide = include_str!("../../docs/src/cli.md");
        let section = &guide[guide.find("### Report (`--report`)").expect("the section")..];
        let block = &section[section.find("```text\n").expect("its block") + "```text\n".len()..];
        let block = &block[..block.find("\n```").expect("the block's end")];
        // (depth, line) pairs, then nested by depth.
        let mut lines = Vec::new();
        for text in block.lines() {
            let depth = text.len() - text.trim_start().len();
            assert_eq!(depth % 2, 0, "guide schema: indent by two: {text}");
            lines.push((depth / 2, schema_line(text.trim_start())));
        }
        let mut lines = lines.into_iter().peekable();
        let tree = nest(&mut lines, 0);
        assert!(lines.next().is_none(), "guide schema: a line indented past its parent");
        tree
    }

    fn nest(
        lines: &mut std::iter::Peekable<impl Iterator<Item = (usize, SchemaLine)>>,
        depth: usize,
    ) -> Vec<SchemaLine> {
        let mut level = Vec::new();
        while let Some((at, _)) = lines.peek() {
            if *at < depth {
                break;
            }
            let (at, mut line) = lines.next().unwrap();
            assert_eq!(at, depth, "guide schema: {:?} indented past its parent", line.keys);
            line.children = nest(lines, depth + 1);
            level.push(line);
        }
        level
    }

    /// `keys… type[: what it means]`.
    fn schema_line(text: &str) -> SchemaLine {
        let (head, _meaning) = match text.find(": ") {
            Some(at) => (&text[..at], &text[at + 2..]),
            None => (text, ""),
        };
        let mut words = head.split_whitespace().peekable();
        let mut keys = Vec::new();
        while let Some(word) = words.next_if(|word| {
            word.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_[]".contains(c))
                && !["string", "number", "bool", "object", "null", "optional", "true"]
                    .contains(word)
        }) {
            keys.push(match word.strip_suffix("[]") {
                Some(key) => (key.to_owned(), true),
                None => (word.to_owned(), false),
            });
        }
        assert!(!keys.is_empty(), "guide schema: no key in {text:?}");
        let optional = words.next_if_eq(&"optional").is_some();
        let kind: Vec<&str> = words.collect();
        let kind = match kind.as_slice() {
            ["string"] => Kind::String,
            ["number"] => Kind::Number,
            ["bool"] => Kind::Bool,
            ["object"] => Kind::Object,
            ["null", "|", "object"] => Kind::NullOrObject,
            ["true"] => Kind::True,
            alternatives => Kind::OneOf(
                alternatives
                    .split(|word| *word == "|")
                    .map(|alternative| match alternative {
                        [quoted] if quoted.len() > 2 && quoted.starts_with('"') => {
                            quoted.trim_matches('"').to_owned()
                        }
                        _ => panic!("guide schema: unknown type in {text:?}"),
                    })
                    .collect(),
            ),
        };
        SchemaLine { keys, kind, optional, children: Vec::new() }
    }

    /// What the reports showed of the schema: each key present (not null) in some report,
    /// and each alternative of a string taken.
    #[derive(Default)]
    struct Seen {
        keys: std::collections::HashSet<String>,
        alternatives: std::collections::HashSet<(String, String)>,
        problems: Vec<String>,
    }

    impl Seen {
        fn object(&mut self, value: &Value, lines: &[SchemaLine], path: &str) {
            let Some(object) = value.as_object() else {
                return self.problems.push(format!("{path}: not an object: {value}"));
            };
            for (key, value) in object {
                let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                let line = lines.iter().find(|line| line.keys.iter().any(|(k, _)| k == key));
                let Some(line) = line else {
                    self.problems.push(format!("the report has {at}, which the guide omits"));
                    continue;
                };
                let array = line.keys.iter().any(|(k, array)| k == key && *array);
                if array {
                    let Some(items) = value.as_array() else {
                        self.problems.push(format!("{at}: not an array: {value}"));
                        continue;
                    };
                    for item in items {
                        self.value(item, line, &format!("{at}[]"));
                    }
                    self.keys.insert(at);
                } else {
                    self.value(value, line, &at);
                }
            }
            for line in lines.iter().filter(|line| !line.optional) {
                for (key, _) in &line.keys {
                    if !object.contains_key(key) {
                        self.problems.push(format!("the guide has {path}.{key}, the report not"));
                    }
                }
            }
        }

        fn value(&mut self, value: &Value, line: &SchemaLine, at: &str) {
            let fits = match &line.kind {
                Kind::String => value.is_string(),
                Kind::Number => value.is_number(),
                Kind::Bool => value.is_boolean(),
                Kind::True => value == &Value::Bool(true),
                Kind::Object => {
                    self.object(value, &line.children, at);
                    true
                }
                Kind::NullOrObject => {
                    if !value.is_null() {
                        self.object(value, &line.children, at);
                    }
                    true
                }
                Kind::OneOf(alternatives) => match value.as_str() {
                    Some(taken) if alternatives.iter().any(|a| a == taken) => {
                        self.alternatives.insert((at.to_owned(), taken.to_owned()));
                        true
                    }
                    _ => false,
                },
            };
            if !fits {
                self.problems.push(format!("{at}: {value} is not the guide's {:?}", line.kind));
            }
            if !value.is_null() {
                self.keys.insert(at.trim_end_matches("[]").to_owned());
            }
        }

        /// Each documented key and alternative that no report showed.
        fn unseen(&self, lines: &[SchemaLine], path: &str, out: &mut Vec<String>) {
            for line in lines {
                for (key, array) in &line.keys {
                    let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                    if !self.keys.contains(&at) {
                        out.push(format!("the guide has {at}, no report shows it"));
                    }
                    let inner = if *array { format!("{at}[]") } else { at.clone() };
                    if let Kind::OneOf(alternatives) = &line.kind {
                        for alternative in alternatives {
                            if !self.alternatives.contains(&(inner.clone(), alternative.clone())) {
                                out.push(format!(
                                    "the guide has {at} = {alternative:?}, no report"
                                ));
                            }
                        }
                    }
                    self.unseen(&line.children, &inner, out);
                }
            }
        }
    }

    fn report_of(outcome: &Outcome<'_>) -> Value {
        let mut bytes = Vec::new();
        write(outcome, &mut bytes).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    /// Reports of every bundled scenario (on the CPU driver, as on any machine), and of one
    /// run given, record by record, every value each field of the report can take — every
    /// driver, resolution, status and reason, each driver's entry — so that the guide is
    /// held to what the report can say, not only to what these runs happened to do.
    fn every_kind_of_report() -> Vec<Value> {
        let options =
            RunOptions { timeout: Duration::from_secs(30), progress: false, all_cpu: true };
        let mut reports = Vec::new();
        for found in bundled::ALL {
            let scenario = found.scenario().unwrap();
            let outcome = run(&scenario, &check(&scenario).unwrap(), options).unwrap();
            reports.push(report_of(&outcome));
        }
        let scenario = bundled::find("speculation").unwrap().scenario().unwrap();
        let mut outcome = run(&scenario, &check(&scenario).unwrap(), options).unwrap();
        for &driver in DriverKind::ALL {
            outcome.queues[0].driver = driver;
            reports.push(report_of(&outcome));
        }
        for resolution in Resolution::ALL.iter().copied().map(Some).chain([None]) {
            outcome.waits[0].resolution = resolution;
            reports.push(report_of(&outcome));
        }
        for status in [Status::Ok, Status::Failed, Status::Cancelled] {
            outcome.ops[0].status = status;
            for conservative in [false, true] {
                for started in [false, true] {
                    outcome.ops[0].speculation = Some(Speculation { conservative, started });
                    reports.push(report_of(&outcome));
                }
            }
        }
        outcome.history[0].cancelled = true;
        outcome.history[0].ran_on_rejected = true;
        outcome.vulkan = Some(VulkanRecord {
            adapter: "a Vulkan device".into(),
            native_waits: 0,
            validation_messages: Vec::new(),
        });
        outcome.npu = Some(NpuRecord {
            adapter: "an NPU",
            wait_descriptors: 0,
            elided: 0,
            held: 0,
            ring_full: 0,
        });
        outcome.cuda = Some(CudaRecord {
            adapter: "a CUDA device".into(),
            native_waits: 0,
            completed: 0,
            elided: 0,
            held: 0,
        });
        reports.push(report_of(&outcome));
        // A run stopped at its deadline: one op still running then, one not started, waiting.
        let stopped = parse::parse(
            Path::new("stopped.toml"),
            "[[queue]]\nname = \"q\"\n[[semaphore]]\nname = \"s\"\n\
             [[op]]\nname = \"long\"\nqueue = \"q\"\nsignal = [\"s=1\"]\n\
             work = { kind = \"sleep\", us = 5000000 }\n\
             [[op]]\nname = \"after\"\nqueue = \"q\"\nwait = [\"s>=1\"]\n",
        )
        .unwrap();
        let short = RunOptions { timeout: Duration::from_millis(200), ..options };
        let outcome = run(&stopped, &check(&stopped).unwrap(), short).unwrap();
        assert!(outcome.timed_out.is_some(), "stopped at its deadline");
        reports.push(report_of(&outcome));
        reports
    }

    /// The guide's report schema says what reports hold, no more and no less: every key of
    /// every report, its type and each string it takes are in it, and everything in it shows
    /// in some report.
    #[test]
    fn the_guide_describes_the_report_exactly() {
        let schema = guide_schema();
        let mut seen = Seen::default();
        for report in every_kind_of_report() {
            seen.object(&report, &schema, "");
        }
        let mut problems = std::mem::take(&mut seen.problems);
        problems.sort();
        problems.dedup();
        seen.unseen(&schema, "", &mut problems);
        assert!(
            problems.is_empty(),
            "the guide's report schema (docs/src/cli.md) is wrong:\n{}",
            problems.join("\n")
        );
    }
}

//! The `--report` JSON: a stable contract for tools (see the README for the schema).
//!
//! The report is streamed to its writer as it is serialized: every array is produced by an
//! iterator over the outcome, so memory follows the outcome, not a document tree of the
//! output. Object keys are written in sorted order, as earlier versions (which built a
//! `serde_json::Value` first) printed them, so reports stay byte-comparable across versions.

use std::io;

use serde::{Serialize, Serializer};

use super::model::Target;
use super::run::{FrontierRecord, HistoryRecord, OpRecord, Outcome, WaitRecord};
use super::stats::{CudaStats, NpuStats, Stats, VulkanStats};

/// Writes the report of `outcome` to `out` as pretty-printed JSON.
pub fn write(outcome: &Outcome<'_>, out: impl io::Write) -> io::Result<()> {
    let scenario = outcome.scenario;
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
            scenario.semaphores.iter().zip(&outcome.semaphores).map(|(spec, record)| {
                SemaphoreJson {
                    failed: record.failed,
                    history: LazyArray(|| {
                        outcome.history_of(record).iter().map(|entry| history_entry(outcome, entry))
                    }),
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
    use crate::scenario::check::check;
    use crate::scenario::run::{run, RunOptions};
    use crate::scenario::{bundled, parse};

    /// `document` of a real run of bundled scenario `name`, streamed, and the same bytes read
    /// back as a tree.
    pub(in crate::scenario) fn streamed(
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

    #[test]
    fn the_report_carries_every_documented_key() {
        let (_, report) = streamed("late-waiter", |outcome, out| write(outcome, out));
        let keys =
            |value: &Value| -> Vec<String> { value.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(
            keys(&report),
            ["cuda", "npu", "ops", "queues", "scenario", "semaphores", "stats", "vulkan"]
        );
        assert_eq!(
            keys(&report["queues"][0]),
            ["adapter", "driver", "name"],
            "{}",
            report["queues"]
        );
        assert_eq!(report["queues"][0]["driver"], "cpu");
        assert!(report["vulkan"].is_null(), "no Vulkan queue: {}", report["vulkan"]);
        assert!(report["npu"].is_null(), "no NPU queue: {}", report["npu"]);
        assert!(report["cuda"].is_null(), "no CUDA queue: {}", report["cuda"]);
        let late = report["ops"].as_array().unwrap().iter().find(|op| op["name"] == "late");
        let late = late.unwrap();
        assert_eq!(
            keys(late),
            [
                "end_ns", "epoch", "frontier", "machine", "name", "queue", "signals", "start_ns",
                "status", "tainted", "waits"
            ]
        );
        let p2 = report["ops"].as_array().unwrap().iter().find(|op| op["name"] == "p2");
        assert_eq!(p2.unwrap()["signals"], serde_json::json!([{"semaphore": "s", "value": 2}]));
        assert_eq!(
            late["waits"],
            serde_json::json!([{"resolution": "satisfied", "semaphore": "s", "tainted": false, "value": 1}])
        );
        assert_eq!(keys(&report["semaphores"][0]), ["failed", "history", "name", "value"]);
        assert_eq!(keys(&report["semaphores"][0]["history"][0]), ["frontier", "tainted", "value"]);
        let stats = &report["stats"];
        assert_eq!(
            keys(stats),
            [
                "cancelled",
                "failed",
                "frontier",
                "latency_ns",
                "memory",
                "ok",
                "ops",
                "waits",
                "wall_ns"
            ]
        );
        assert_eq!(keys(&stats["frontier"]), ["max_entries", "mean_entries", "tainted"]);
        assert_eq!(keys(&stats["latency_ns"]["run"]), ["max", "p50", "p90", "p99"]);
        assert_eq!(
            keys(&stats["memory"]),
            ["over_quota_waits", "peak_bytes", "reuse_declined", "reused"]
        );
        assert_eq!(
            keys(&stats["waits"]),
            ["device", "elided", "failed", "held", "satisfied", "tainted"]
        );
        assert_eq!(stats["ops"], report["ops"].as_array().unwrap().len());
    }
}

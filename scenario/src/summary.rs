//! The readable stdout summary of a run, and [`count`], the number-and-noun it is written
//! with (the command line's other text uses it too).

use std::fmt::{self, Write};

use super::outcome::{FrontierRecord, Outcome, Status};
use super::report::queue_name;
use super::stats::{self, CudaStats, NpuStats, Percentiles, Stats, VulkanStats};

/// The summary text of `outcome`.
pub fn summary(outcome: &Outcome<'_>) -> String {
    let scenario = outcome.scenario;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {} — {} on {}, {}, {}, {:.3} ms",
        scenario.name,
        count(scenario.ops.len(), "op", "ops"),
        count(scenario.queues.len(), "queue", "queues"),
        count(scenario.semaphores.len(), "semaphore", "semaphores"),
        count(scenario.workers, "worker", "workers"),
        outcome.wall.as_secs_f64() * 1e3
    );
    if !scenario.description.is_empty() {
        let _ = writeln!(out, "  {}", scenario.description);
    }
    // Only `--all-cpu` runs a queue on another driver than the one it names.
    let moved: Vec<String> = (scenario.queues.iter().zip(&outcome.queues))
        .filter(|(spec, record)| spec.driver != record.driver)
        .map(|(spec, _)| format!("{} ({})", spec.name, spec.driver.name()))
        .collect();
    if !moved.is_empty() {
        let queues = if moved.len() == 1 { "queue" } else { "queues" };
        let _ = writeln!(out, "  --all-cpu: {queues} {} ran on the CPU driver", moved.join(", "));
    }
    if let Some(timed_out) = &outcome.timed_out {
        let _ = writeln!(
            out,
            "  TIMED OUT after {:?}: {} (what follows is the run as the deadline found it)",
            timed_out.timeout, timed_out.reason
        );
    }
    let _ = writeln!(out, "\nops (file order)");
    ops_table(outcome, &mut out);
    let _ = writeln!(out, "\nsemaphores");
    let name_width = column_width("", scenario.semaphores.iter().map(|s| s.name.as_str()));
    let history_truncated = stats::history_truncated(outcome);
    let semaphores = scenario.semaphores.iter().zip(&outcome.semaphores);
    for ((spec, record), &truncated) in semaphores.zip(&history_truncated) {
        let state = if record.failed { " FAILED" } else { "" };
        let left_out = (truncated > 0).then(|| format!("{truncated} earlier not kept"));
        let history: Vec<String> = left_out
            .into_iter()
            .chain(outcome.history_of(record).iter().map(|e| {
                if e.tainted {
                    format!("{} external", e.value)
                } else {
                    format!("{} {}", e.value, frontier(outcome, e.frontier))
                }
            }))
            .collect();
        let _ = writeln!(
            out,
            "  {:<name_width$} value {}{state}  history: {}",
            spec.name,
            record.value,
            history.join(", ")
        );
    }
    let stats = Stats::of(outcome);
    let _ = writeln!(out, "\ntotals");
    let _ = writeln!(
        out,
        "  waits {}: elided {}, satisfied {}, device {}, held {}, on failed semaphores {}; tainted {}",
        stats.elided + stats.satisfied + stats.device + stats.held + stats.failed_waits,
        stats.elided,
        stats.satisfied,
        stats.device,
        stats.held,
        stats.failed_waits,
        stats.tainted_waits
    );
    let at_deadline = match outcome.timed_out {
        Some(_) => format!(
            ", {} still running and {} not started at the deadline",
            stats.status[Status::Running as usize],
            stats.status[Status::NotStarted as usize]
        ),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "  ops: {} ok, {} failed, {} cancelled{at_deadline}; frontier entries mean {:.2}, max {}, tainted {}",
        stats.status[0],
        stats.status[1],
        stats.status[2],
        stats.frontier_mean,
        stats.frontier_max,
        stats.tainted_frontiers
    );
    // With no sample the percentiles are zeros, which would read as instant operations.
    let latency = |percentiles| match stats.timed {
        0 => "— (no queue operation ran)".to_string(),
        _ => latency(percentiles),
    };
    let _ = writeln!(out, "  queue wait (submit → start) {}", latency(stats.queue_wait));
    let _ = writeln!(out, "  run (start → end)           {}", latency(stats.run));
    if let Some(vulkan) = VulkanStats::of(outcome) {
        let _ = writeln!(
            out,
            "  vulkan ({}): {} for {}; one wait per dependency edge would issue {}",
            vulkan.adapter,
            count(vulkan.native_waits, "native wait", "native waits"),
            count(vulkan.device_waits, "device wait", "device waits"),
            vulkan.waits
        );
    }
    if let Some(npu) = NpuStats::of(outcome) {
        let _ = writeln!(
            out,
            "  npu ({}): {} for {}; {} emitted nothing (elided or satisfied), {} held; one WAIT per dependency edge would emit {}; full ring {}",
            npu.adapter,
            count(npu.wait_descriptors, "WAIT descriptor", "WAIT descriptors"),
            count(npu.device_waits, "device wait", "device waits"),
            count(npu.elided, "wait", "waits"),
            count(npu.held, "was", "were"),
            npu.waits,
            count(npu.ring_full, "time", "times")
        );
    }
    if let Some(cuda) = CudaStats::of(outcome) {
        let _ = writeln!(
            out,
            "  cuda ({}): {} for {} ({} already complete at issue); {} made no call (elided or satisfied), {} held; one stream wait per dependency edge would issue {}",
            cuda.adapter,
            count(cuda.native_waits, "stream wait", "stream waits"),
            count(cuda.device_waits, "device wait", "device waits"),
            cuda.completed,
            count(cuda.elided, "wait", "waits"),
            count(cuda.held, "was", "were"),
            cuda.waits
        );
    }
    let checked = outcome.compute.iter().filter(|check| check.result.is_some()).count();
    if !outcome.compute.is_empty() {
        let wrong = outcome.compute.iter().filter(|c| matches!(c.result, Some(Err(_)))).count();
        let _ = writeln!(out, "  compute and copy results: {checked} checked, {wrong} wrong");
    }
    if !scenario.buffers.is_empty() {
        let _ = writeln!(
            out,
            "  memory: peak {} B of {} B, reused {} without a fence, {} fresh where reuse was unproven, {}",
            stats.peak_memory,
            scenario.memory_quota,
            stats.memory_reused,
            stats.memory_reuse_declined,
            count(stats.memory_over_quota_waits, "quota wait", "quota waits")
        );
    }
    out
}

/// The ops table: a row per operation, each column as wide as its widest cell.
fn ops_table(outcome: &Outcome<'_>, out: &mut String) {
    let scenario = outcome.scenario;
    struct Row<'a> {
        op: &'a str,
        queue: &'a str,
        epoch: String,
        status: &'static str,
        start: String,
        end: String,
        frontier: String,
        waits: String,
    }
    let rows: Vec<Row<'_>> = (scenario.ops.iter().zip(&outcome.ops))
        .map(|(spec, record)| {
            let waits: Vec<String> = (outcome.waits_of(record).iter())
                .map(|w| {
                    let resolution = w.resolution.map_or("failed", |r| r.name());
                    let taint = if w.tainted { ", tainted" } else { "" };
                    let semaphore = &scenario.semaphores[w.semaphore as usize].name;
                    format!("{semaphore}>={} {resolution}{taint}", w.value)
                })
                .collect();
            Row {
                op: scenario.op_name(spec),
                queue: queue_name(outcome, spec.target),
                epoch: record.epoch.to_string(),
                status: record.status.name(),
                start: format!("{:.1}", record.start_ns as f64 / 1e3),
                end: format!("{:.1}", record.end_ns as f64 / 1e3),
                frontier: frontier(outcome, record.frontier),
                waits: if waits.is_empty() { "—".to_string() } else { waits.join("; ") },
            }
        })
        .collect();
    let op = column_width("op", rows.iter().map(|row| row.op));
    let queue = column_width("queue", rows.iter().map(|row| row.queue));
    let epoch = column_width("epoch", rows.iter().map(|row| row.epoch.as_str()));
    let status = column_width("status", rows.iter().map(|row| row.status));
    let start = column_width("start µs", rows.iter().map(|row| row.start.as_str()));
    let end = column_width("end µs", rows.iter().map(|row| row.end.as_str()));
    let frontier = column_width("frontier", rows.iter().map(|row| row.frontier.as_str()));
    let _ = writeln!(
        out,
        "  {:<op$} {:<queue$} {:>epoch$}  {:<status$} {:>start$} {:>end$}  {:<frontier$} waits",
        "op", "queue", "epoch", "status", "start µs", "end µs", "frontier"
    );
    for row in &rows {
        let _ = writeln!(
            out,
            "  {:<op$} {:<queue$} {:>epoch$}  {:<status$} {:>start$} {:>end$}  {:<frontier$} {}",
            row.op, row.queue, row.epoch, row.status, row.start, row.end, row.frontier, row.waits
        );
    }
}

/// The width of a column headed `label` holding `cells`, in characters (as `format!` pads).
fn column_width<'a>(label: &str, cells: impl Iterator<Item = &'a str>) -> usize {
    cells.map(|cell| cell.chars().count()).fold(label.chars().count(), usize::max)
}

fn latency(p: Percentiles) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    format!(
        "p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        us(p.p50),
        us(p.p90),
        us(p.p99),
        us(p.max)
    )
}

fn frontier(outcome: &Outcome<'_>, frontier: FrontierRecord) -> String {
    let points = outcome.points_of(frontier).iter();
    let entries: Vec<String> =
        points.map(|&p| format!("{}:{}", outcome.axis_name(p), p.epoch)).collect();
    let taint = if frontier.tainted { "!" } else { "" };
    format!("{{{}}}{taint}", entries.join(", "))
}

/// `n` with the noun that agrees with it: `count(1, "op", "ops")` shows as `1 op`, with `0` or
/// `2` as `0 ops`, `2 ops`.
pub fn count(n: impl TryInto<u64>, one: &'static str, many: &'static str) -> Count {
    // Counts of things in memory fit a u64; the fallback only keeps this total.
    let n = n.try_into().unwrap_or(u64::MAX);
    Count { n, noun: if n == 1 { one } else { many } }
}

/// A number and its noun ([`count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count {
    n: u64,
    noun: &'static str,
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.n, self.noun)
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn a_count_agrees_with_its_noun() {
        let shown = [0_usize, 1, 2].map(|n| count(n, "op", "ops").to_string());
        assert_eq!(shown, ["0 ops", "1 op", "2 ops"]);
        assert_eq!(count(1_u64, "was", "were").to_string(), "1 was");
    }
}

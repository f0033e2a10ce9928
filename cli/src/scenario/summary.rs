//! The readable stdout summary of a run.

use std::fmt::Write;

use super::report::queue_name;
use super::run::{FrontierRecord, Outcome, Status};
use super::stats::{CudaStats, NpuStats, Percentiles, Stats, VulkanStats};

/// The summary text of `outcome`.
pub fn summary(outcome: &Outcome<'_>) -> String {
    let scenario = outcome.scenario;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {} — {} ops on {} queues, {} semaphores, {} workers, {:.3} ms",
        scenario.name,
        scenario.ops.len(),
        scenario.queues.len(),
        scenario.semaphores.len(),
        scenario.workers,
        outcome.wall.as_secs_f64() * 1e3
    );
    if !scenario.description.is_empty() {
        let _ = writeln!(out, "  {}", scenario.description);
    }
    if let Some(timed_out) = &outcome.timed_out {
        let _ = writeln!(
            out,
            "  TIMED OUT after {:?}: {} (what follows is the run as the deadline found it)",
            timed_out.timeout, timed_out.reason
        );
    }
    let _ = writeln!(out, "\nops (file order)");
    let _ = writeln!(
        out,
        "  {:<18} {:<8} {:>5}  {:<9} {:>10} {:>10}  {:<28} waits",
        "op", "queue", "epoch", "status", "start µs", "end µs", "frontier"
    );
    for (spec, record) in scenario.ops.iter().zip(&outcome.ops) {
        let waits: Vec<String> = outcome
            .waits_of(record)
            .iter()
            .map(|w| {
                let resolution = w.resolution.map_or("failed", |r| r.name());
                let taint = if w.tainted { ", tainted" } else { "" };
                format!(
                    "{}>={} {resolution}{taint}",
                    scenario.semaphores[w.semaphore as usize].name, w.value
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  {:<18} {:<8} {:>5}  {:<9} {:>10.1} {:>10.1}  {:<28} {}",
            scenario.op_name(spec),
            queue_name(outcome, spec.target),
            record.epoch,
            record.status.name(),
            record.start_ns as f64 / 1e3,
            record.end_ns as f64 / 1e3,
            frontier(outcome, record.frontier),
            if waits.is_empty() { "—".to_string() } else { waits.join("; ") }
        );
    }
    let _ = writeln!(out, "\nsemaphores");
    for (spec, record) in scenario.semaphores.iter().zip(&outcome.semaphores) {
        let state = if record.failed { " FAILED" } else { "" };
        let history: Vec<String> = outcome
            .history_of(record)
            .iter()
            .map(|e| {
                if e.tainted {
                    format!("{} external", e.value)
                } else {
                    format!("{} {}", e.value, frontier(outcome, e.frontier))
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  {:<18} value {}{state}  history: {}",
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
    let _ = writeln!(out, "  queue wait (submit → start) {}", latency(stats.queue_wait));
    let _ = writeln!(out, "  run (start → end)           {}", latency(stats.run));
    if let Some(vulkan) = VulkanStats::of(outcome) {
        let _ = writeln!(
            out,
            "  vulkan ({}): {} native waits for {} device waits; one wait per dependency edge would issue {}",
            vulkan.adapter, vulkan.native_waits, vulkan.device_waits, vulkan.waits
        );
    }
    if let Some(npu) = NpuStats::of(outcome) {
        let _ = writeln!(
            out,
            "  npu ({}): {} WAIT descriptors for {} device waits; {} waits emitted nothing (elided or satisfied), {} were held; one WAIT per dependency edge would emit {}; full ring {} times",
            npu.adapter, npu.wait_descriptors, npu.device_waits, npu.elided, npu.held, npu.waits, npu.ring_full
        );
    }
    if let Some(cuda) = CudaStats::of(outcome) {
        let _ = writeln!(
            out,
            "  cuda ({}): {} stream waits for {} device waits ({} already complete at issue); {} waits made no call (elided or satisfied), {} were held; one stream wait per dependency edge would issue {}",
            cuda.adapter, cuda.native_waits, cuda.device_waits, cuda.completed, cuda.elided, cuda.held, cuda.waits
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
            "  memory: peak {} B of {} B, reused {} without a fence, {} fresh where reuse was unproven, {} quota waits",
            stats.peak_memory, scenario.memory_quota, stats.memory_reused, stats.memory_reuse_declined, stats.memory_over_quota_waits
        );
    }
    out
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

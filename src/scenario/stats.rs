//! Whole-run totals: wait resolutions, frontier sizes, taint, latencies, memory.

use causeway_core::queue::Resolution;
use serde_json::{json, Value};

use super::model::Target;
use super::run::{Outcome, Status};

/// 50th, 90th and 99th percentile and maximum, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Maximum.
    pub max: u64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `samples` (all zero when empty).
    pub fn of(mut samples: Vec<u64>) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_unstable();
        let rank = |p: usize| samples[(p * samples.len()).div_ceil(100).saturating_sub(1)];
        Percentiles { p50: rank(50), p90: rank(90), p99: rank(99), max: samples[samples.len() - 1] }
    }

    fn to_json(self) -> Value {
        json!({ "p50": self.p50, "p90": self.p90, "p99": self.p99, "max": self.max })
    }
}

/// The totals of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Operations (queue and host).
    pub ops: usize,
    /// Operations that ended ok / failed / cancelled.
    pub status: [usize; 3],
    /// Waits elided, satisfied, device, held.
    pub elided: u64,
    /// See `elided`.
    pub satisfied: u64,
    /// See `elided`.
    pub device: u64,
    /// See `elided`.
    pub held: u64,
    /// Waits on semaphores that had already failed.
    pub failed_waits: u64,
    /// Waits in an external taint window.
    pub tainted_waits: u64,
    /// Mean frontier entries per operation.
    pub frontier_mean: f64,
    /// Largest frontier.
    pub frontier_max: usize,
    /// Operations whose frontier overflowed (tainted).
    pub tainted_frontiers: usize,
    /// Submission to start, for queue operations that ran.
    pub queue_wait: Percentiles,
    /// Start to end, for queue operations that ran.
    pub run: Percentiles,
    /// Memory reuse without a fence.
    pub memory_reused: u64,
    /// Memory fresh because reuse could not be proven.
    pub memory_reuse_declined: u64,
    /// Times an alloca waited for quota.
    pub memory_over_quota_waits: u64,
    /// Peak committed bytes.
    pub peak_memory: u64,
    /// Wall time.
    pub wall_ns: u64,
}

impl Stats {
    /// Totals of `outcome`.
    pub fn of(outcome: &Outcome<'_>) -> Stats {
        let mut stats = Stats { ops: outcome.ops.len(), ..Stats::default() };
        let mut waited = Vec::new();
        let mut ran = Vec::new();
        let mut entries = 0;
        for (spec, record) in outcome.scenario.ops.iter().zip(&outcome.ops) {
            stats.status[record.status as usize] += 1;
            for wait in &record.waits {
                match wait.resolution {
                    Some(Resolution::Elided) => stats.elided += 1,
                    Some(Resolution::Satisfied) => stats.satisfied += 1,
                    Some(Resolution::DeviceWait) => stats.device += 1,
                    Some(_) => stats.held += 1,
                    None => stats.failed_waits += 1,
                }
                stats.tainted_waits += u64::from(wait.tainted);
            }
            entries += record.frontier.len();
            stats.frontier_max = stats.frontier_max.max(record.frontier.len());
            stats.tainted_frontiers += usize::from(record.frontier.is_tainted());
            if matches!(spec.target, Target::Queue(_)) && record.status == Status::Ok {
                waited.push(record.start_ns.saturating_sub(record.submit_ns));
                ran.push(record.end_ns.saturating_sub(record.start_ns));
            }
        }
        stats.frontier_mean = entries as f64 / stats.ops.max(1) as f64;
        stats.queue_wait = Percentiles::of(waited);
        stats.run = Percentiles::of(ran);
        stats.memory_reused = outcome.memory.reused;
        stats.memory_reuse_declined = outcome.memory.reuse_declined;
        stats.memory_over_quota_waits = outcome.memory.over_quota_waits;
        stats.peak_memory = outcome.memory.peak_committed;
        stats.wall_ns = u64::try_from(outcome.wall.as_nanos()).unwrap_or(u64::MAX);
        stats
    }

    /// The `stats` object of the report.
    pub fn to_json(&self) -> Value {
        json!({
            "ops": self.ops,
            "ok": self.status[Status::Ok as usize],
            "failed": self.status[Status::Failed as usize],
            "cancelled": self.status[Status::Cancelled as usize],
            "waits": {
                "elided": self.elided,
                "satisfied": self.satisfied,
                "device": self.device,
                "held": self.held,
                "failed": self.failed_waits,
                "tainted": self.tainted_waits,
            },
            "frontier": {
                "mean_entries": self.frontier_mean,
                "max_entries": self.frontier_max,
                "tainted": self.tainted_frontiers,
            },
            "latency_ns": {
                "queue_wait": self.queue_wait.to_json(),
                "run": self.run.to_json(),
            },
            "memory": {
                "reused": self.memory_reused,
                "reuse_declined": self.memory_reuse_declined,
                "over_quota_waits": self.memory_over_quota_waits,
                "peak_bytes": self.peak_memory,
            },
            "wall_ns": self.wall_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let p = Percentiles::of((1..=100).collect());
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50, 90, 99, 100));
        let one = Percentiles::of(vec![7]);
        assert_eq!((one.p50, one.p99, one.max), (7, 7, 7));
        assert_eq!(Percentiles::of(Vec::new()), Percentiles::default());
    }
}

//! Whole-run totals: wait resolutions, frontier sizes, taint, latencies, memory.

use causeway_core::queue::Resolution;
use serde::{Serialize, Serializer};

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
}

impl Serialize for Percentiles {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Sorted {
            max: u64,
            p50: u64,
            p90: u64,
            p99: u64,
        }
        Sorted { max: self.max, p50: self.p50, p90: self.p90, p99: self.p99 }.serialize(serializer)
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
}

/// The `stats` object of the report (keys in sorted order, see [`report`](super::report)).
impl Serialize for Stats {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Document {
            cancelled: usize,
            failed: usize,
            frontier: Frontiers,
            latency_ns: Latencies,
            memory: Memory,
            ok: usize,
            ops: usize,
            waits: Waits,
            wall_ns: u64,
        }
        #[derive(Serialize)]
        struct Frontiers {
            max_entries: usize,
            mean_entries: f64,
            tainted: usize,
        }
        #[derive(Serialize)]
        struct Latencies {
            queue_wait: Percentiles,
            run: Percentiles,
        }
        #[derive(Serialize)]
        struct Memory {
            over_quota_waits: u64,
            peak_bytes: u64,
            reuse_declined: u64,
            reused: u64,
        }
        #[derive(Serialize)]
        struct Waits {
            device: u64,
            elided: u64,
            failed: u64,
            held: u64,
            satisfied: u64,
            tainted: u64,
        }
        Document {
            cancelled: self.status[Status::Cancelled as usize],
            failed: self.status[Status::Failed as usize],
            frontier: Frontiers {
                max_entries: self.frontier_max,
                mean_entries: self.frontier_mean,
                tainted: self.tainted_frontiers,
            },
            latency_ns: Latencies { queue_wait: self.queue_wait, run: self.run },
            memory: Memory {
                over_quota_waits: self.memory_over_quota_waits,
                peak_bytes: self.peak_memory,
                reuse_declined: self.memory_reuse_declined,
                reused: self.memory_reused,
            },
            ok: self.status[Status::Ok as usize],
            ops: self.ops,
            waits: Waits {
                device: self.device,
                elided: self.elided,
                failed: self.failed_waits,
                held: self.held,
                satisfied: self.satisfied,
                tainted: self.tainted_waits,
            },
            wall_ns: self.wall_ns,
        }
        .serialize(serializer)
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

//! Whole-run totals: wait resolutions, frontier sizes, taint, latencies, memory.

use causeway_core::queue::Resolution;
use serde::{Serialize, Serializer};

use super::outcome::{Outcome, Status};

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
    /// Nearest-rank percentiles of `samples` (all zero when empty), which it reorders.
    ///
    /// Each rank is selected, not sorted for: O(n) in all, each selection within the part of
    /// `samples` above the one before.
    pub fn of(samples: &mut [u64]) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        let len = samples.len();
        let index = |p: usize| (p * len).div_ceil(100).saturating_sub(1);
        let mut below = 0;
        let mut rank = |p: usize| {
            let at = index(p);
            let (_, &mut value, _) = samples[below..].select_nth_unstable(at - below);
            below = at;
            value
        };
        let (p50, p90, p99, max) = (rank(50), rank(90), rank(99), rank(100));
        Percentiles { p50, p90, p99, max }
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
    /// Operations by [`Status`]: ended ok / failed / cancelled, and in a run stopped at its
    /// deadline, still running / not started then.
    pub status: [usize; 5],
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
    /// Queue operations that ran to the end: what the latencies are over (none: they are
    /// all 0).
    pub timed: usize,
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
        let mut waited = Vec::with_capacity(outcome.ops.len());
        let mut ran = Vec::with_capacity(outcome.ops.len());
        let mut entries = 0;
        for record in &outcome.ops {
            stats.status[record.status as usize] += 1;
            let frontier = record.frontier.points.len();
            entries += frontier;
            stats.frontier_max = stats.frontier_max.max(frontier);
            stats.tainted_frontiers += usize::from(record.frontier.tainted);
            if record.queued && record.status == Status::Ok {
                waited.push(record.start_ns.saturating_sub(record.submit_ns));
                ran.push(record.end_ns.saturating_sub(record.start_ns));
            }
        }
        // All operations' waits lie in one array: one pass over it, in order.
        for wait in &outcome.waits {
            match wait.resolution {
                Some(Resolution::Elided) => stats.elided += 1,
                Some(Resolution::Satisfied) => stats.satisfied += 1,
                Some(Resolution::DeviceWait) => stats.device += 1,
                Some(_) => stats.held += 1,
                None => stats.failed_waits += 1,
            }
            stats.tainted_waits += u64::from(wait.tainted);
        }
        stats.frontier_mean = entries as f64 / stats.ops.max(1) as f64;
        stats.timed = ran.len();
        stats.queue_wait = Percentiles::of(&mut waited);
        stats.run = Percentiles::of(&mut ran);
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
        let p = Percentiles::of(&mut (1..=100).rev().collect::<Vec<_>>());
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50, 90, 99, 100));
        let one = Percentiles::of(&mut [7]);
        assert_eq!((one.p50, one.p99, one.max), (7, 7, 7));
        assert_eq!(Percentiles::of(&mut []), Percentiles::default());
    }

    /// In a run that submitted everything, what the histories kept and what they left out
    /// are every signal of the file.
    #[test]
    fn kept_and_left_out_history_entries_are_every_signal() {
        use std::path::Path;
        use std::time::Duration;

        use crate::run::{run, RunOptions};
        use crate::{bundled, check, generate, parse};

        let options =
            RunOptions { timeout: Duration::from_secs(30), progress: false, all_cpu: true };
        let pipeline = generate::pipeline(300);
        let sources = bundled::ALL.iter().map(|found| (found.name, found.source));
        let mut truncated_somewhere = false;
        for (name, source) in sources.chain([("pipeline", pipeline.as_str())]) {
            let scenario = parse::parse(Path::new(name), source).unwrap();
            let outcome = run(&scenario, &check::check(&scenario).unwrap(), options).unwrap();
            let mut signals = vec![0; scenario.semaphores.len()];
            for op in &scenario.ops {
                for &(semaphore, _) in scenario.signals(op) {
                    signals[semaphore] += 1;
                }
            }
            let left_out = history_truncated(&outcome);
            for ((record, signals), left_out) in
                outcome.semaphores.iter().zip(signals).zip(left_out)
            {
                let kept = outcome.history_of(record).len() as u64;
                assert_eq!(kept + left_out, signals, "{name}");
                truncated_somewhere |= left_out > 0;
            }
        }
        assert!(truncated_somewhere, "a 300-signal semaphore outgrows its history");
    }

    #[test]
    fn selected_ranks_are_the_sorted_ones() {
        // Duplicates and an order far from sorted.
        let mut samples: Vec<u64> = (0..1_000).map(|i| (i * 7_919) % 613).collect();
        let mut sorted = samples.clone();
        sorted.sort_unstable();
        let rank = |p: usize| sorted[(p * sorted.len()).div_ceil(100) - 1];
        let expected =
            Percentiles { p50: rank(50), p90: rank(90), p99: rank(99), max: sorted[999] };
        assert_eq!(Percentiles::of(&mut samples), expected);
    }
}

/// Per semaphore, how many of its oldest history entries the run did not keep.
///
/// A history is bounded (the run gives each semaphore room for its signals up to the device's
/// default of 64, more only where the workload needs it) and, when full, evicts its oldest
/// entry, so what it keeps is its newest entries. Operations are submitted in file order and
/// the values a semaphore is signalled to advance in file order (the check refuses any
/// other file), so every signal the file makes below the oldest value kept was recorded before
/// it, and has been evicted since: their number is what the history left out. A signal never
/// recorded (its operation not yet submitted when a run ended) comes later in the file, above
/// every value kept.
pub fn history_truncated(outcome: &Outcome<'_>) -> Vec<u64> {
    let scenario = outcome.scenario;
    let oldest_kept: Vec<u64> = (outcome.semaphores.iter())
        .map(|semaphore| outcome.history_of(semaphore).first().map_or(0, |entry| entry.value))
        .collect();
    let mut left_out = vec![0; oldest_kept.len()];
    for op in &scenario.ops {
        for &(semaphore, value) in scenario.signals(op) {
            left_out[semaphore] += u64::from(value < oldest_kept[semaphore]);
        }
    }
    left_out
}

/// What the NPU driver did in a run, beside what its queues' waits resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NpuStats {
    /// The device's name.
    pub adapter: &'static str,
    /// Device waits of operations on NPU queues: what causeway's resolution asked of the
    /// device.
    pub device_waits: u64,
    /// WAIT descriptors the driver emitted (equal to `device_waits` when every operation was
    /// issued).
    pub wait_descriptors: u64,
    /// Waits of the operations it issued that emitted no descriptor because causeway resolved
    /// them elided or satisfied.
    pub elided: u64,
    /// Waits of the operations it issued that emitted no descriptor because the device layer
    /// held the operation until they were reached (waits on other drivers' work).
    pub held: u64,
    /// Every wait of operations on NPU queues: what one WAIT descriptor per dependency edge
    /// would have emitted.
    pub waits: u64,
    /// Issues a full ring answered busy (backpressure: issued again once it had room).
    pub ring_full: u64,
}

impl NpuStats {
    /// The NPU totals of `outcome`, when it ran NPU queues.
    pub fn of(outcome: &Outcome<'_>) -> Option<NpuStats> {
        let npu = outcome.npu?;
        let (waits, device_waits) = waits_on(outcome, super::model::DriverKind::Npu);
        Some(NpuStats {
            adapter: npu.adapter,
            device_waits,
            wait_descriptors: npu.wait_descriptors,
            elided: npu.elided,
            held: npu.held,
            waits,
            ring_full: npu.ring_full,
        })
    }
}

/// Every wait of operations on queues of `driver`, and how many of them resolved as device
/// waits.
fn waits_on(outcome: &Outcome<'_>, driver: super::model::DriverKind) -> (u64, u64) {
    let on_driver = |spec: &super::model::OpSpec| match spec.target {
        super::model::Target::Queue(queue) => outcome.queues[queue].driver == driver,
        super::model::Target::Host => false,
    };
    let (mut waits, mut device_waits) = (0, 0);
    for (spec, record) in outcome.scenario.ops.iter().zip(&outcome.ops) {
        if on_driver(spec) {
            for wait in outcome.waits_of(record) {
                waits += 1;
                device_waits += u64::from(wait.resolution == Some(Resolution::DeviceWait));
            }
        }
    }
    (waits, device_waits)
}

/// What the CUDA driver did in a run, beside what its queues' waits resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CudaStats {
    /// The device and the timeline emulation it ran.
    pub adapter: String,
    /// Device waits of operations on CUDA queues: what causeway's resolution asked of the
    /// device.
    pub device_waits: u64,
    /// Stream waits the driver issued (`cuStreamWaitValue64_v2` or `cuStreamWaitEvent`).
    pub native_waits: u64,
    /// Device waits that issued no call because their signalling operation had completed by
    /// then (the event emulation).
    pub completed: u64,
    /// Waits of the operations it issued that made no call because causeway resolved them
    /// elided or satisfied: the calls elision saved.
    pub elided: u64,
    /// Waits of the operations it issued that made no call because the device layer held the
    /// operation until they were reached (waits on other drivers' work).
    pub held: u64,
    /// Every wait of operations on CUDA queues: what one stream wait per dependency edge would
    /// have issued.
    pub waits: u64,
}

impl CudaStats {
    /// The CUDA totals of `outcome`, when it ran CUDA queues.
    pub fn of(outcome: &Outcome<'_>) -> Option<CudaStats> {
        let cuda = outcome.cuda.as_ref()?;
        let (waits, device_waits) = waits_on(outcome, super::model::DriverKind::Cuda);
        Some(CudaStats {
            adapter: cuda.adapter.clone(),
            device_waits,
            native_waits: cuda.native_waits,
            completed: cuda.completed,
            elided: cuda.elided,
            held: cuda.held,
            waits,
        })
    }
}

/// What the Vulkan driver did in a run, beside what its queues' waits resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VulkanStats {
    /// The adapter's name.
    pub adapter: String,
    /// Device waits of operations on Vulkan queues: what causeway's resolution asked of the
    /// device.
    pub device_waits: u64,
    /// Native timeline waits the driver passed to `vkQueueSubmit2`: `device_waits` but those of
    /// operations cancelled before they were issued.
    pub native_waits: u64,
    /// Every wait of operations on Vulkan queues: what one wait per dependency edge would
    /// have issued.
    pub waits: u64,
}

impl VulkanStats {
    /// The Vulkan totals of `outcome`, when it ran Vulkan queues.
    pub fn of(outcome: &Outcome<'_>) -> Option<VulkanStats> {
        let vulkan = outcome.vulkan.as_ref()?;
        let (waits, device_waits) = waits_on(outcome, super::model::DriverKind::Vulkan);
        Some(VulkanStats {
            adapter: vulkan.adapter.clone(),
            device_waits,
            native_waits: vulkan.native_waits,
            waits,
        })
    }
}

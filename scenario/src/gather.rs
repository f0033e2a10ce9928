//! One outcome of a scenario run across MPI ranks, made on rank 0 of the records every rank
//! kept (sent to it as bytes by [`rank_records`](super::rank_records)): each operation's from
//! the rank that ran it, each semaphore's from the rank that signals it, frontiers with their
//! axes named alike whichever rank recorded them — by the [`Placement`] every rank derived
//! alike ([`ranks`](super::ranks)).
//!
//! Plain data over the ranks' outcomes: nothing here calls MPI.

use std::collections::HashMap;
use std::fmt;

use super::model::Scenario;
use super::outcome::{FrontierRecord, HistoryRecord, NpuRecord, Outcome, PointRecord, Span};
use super::ranks::Placement;

/// Why the ranks' records cannot be gathered into one outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatherError {
    /// Not one outcome per rank.
    Ranks {
        /// The number of ranks.
        expected: u16,
        /// The number of outcomes.
        got: usize,
    },
    /// A rank's outcome does not have one record per operation, semaphore and queue of the
    /// scenario.
    Shape {
        /// The rank.
        rank: u16,
    },
}

impl fmt::Display for GatherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatherError::Ranks { expected, got } => {
                write!(f, "{got} outcome(s) gathered from a world of {expected} ranks")
            }
            GatherError::Shape { rank } => {
                write!(f, "rank {rank}'s records do not match the scenario")
            }
        }
    }
}

impl std::error::Error for GatherError {}

/// Frontier points copied from the ranks' outcomes into the gathered one, their axes renamed
/// to the gathered list of names (each rank numbers the axes it met in its own order).
#[derive(Default)]
struct Points {
    points: Vec<PointRecord>,
    axis_names: Vec<String>,
    axis_of: HashMap<String, u32>,
}

impl Points {
    fn copy(&mut self, part: &Outcome<'_>, frontier: FrontierRecord) -> FrontierRecord {
        let start = self.points.len();
        for &point in part.points_of(frontier) {
            let name = part.axis_name(point);
            let axis = match self.axis_of.get(name) {
                Some(&axis) => axis,
                None => {
                    let axis = u32::try_from(self.axis_names.len())
                        .expect("an outcome names under 2^32 axes");
                    self.axis_names.push(name.to_string());
                    self.axis_of.insert(name.to_string(), axis);
                    axis
                }
            };
            self.points.push(PointRecord { axis, epoch: point.epoch });
        }
        FrontierRecord { points: Span::since(&self.points, start), tainted: frontier.tainted }
    }
}

/// Gathers the outcomes of one run made by every rank (`parts[r]` from rank `r`) into the
/// whole run's: each operation's record (its waits and frontier) from the rank that ran it,
/// each semaphore's (its history) from the rank that signals it, each queue's from its rank,
/// result checks from the ranks that ran the operations. Counts are summed, the memory peak
/// is the highest rank's (each rank has its own pool), the wall time the longest rank's.
/// Linear in the records.
pub fn gather<'s>(
    placement: &Placement,
    scenario: &'s Scenario,
    parts: &[Outcome<'s>],
) -> Result<Outcome<'s>, GatherError> {
    if parts.len() != usize::from(placement.size) {
        return Err(GatherError::Ranks { expected: placement.size, got: parts.len() });
    }
    for (rank, part) in (0..).zip(parts) {
        if part.ops.len() != scenario.ops.len()
            || part.semaphores.len() != scenario.semaphores.len()
            || part.queues.len() != scenario.queues.len()
            || part.compute.iter().any(|check| check.op >= scenario.ops.len())
        {
            return Err(GatherError::Shape { rank });
        }
    }
    let part = |rank: u16| &parts[usize::from(rank)];
    let mut points = Points::default();

    let mut ops = Vec::with_capacity(scenario.ops.len());
    let mut waits = Vec::new();
    for (k, op) in scenario.ops.iter().enumerate() {
        let from = part(placement.rank_of(op.target));
        let mut record = from.ops[k];
        let start = waits.len();
        waits.extend_from_slice(from.waits_of(&record));
        record.waits = Span::since(&waits, start);
        record.frontier = points.copy(from, record.frontier);
        ops.push(record);
    }

    let mut semaphores = Vec::with_capacity(scenario.semaphores.len());
    let mut history = Vec::new();
    for (k, &rank) in placement.semaphore_ranks.iter().enumerate() {
        let from = part(rank);
        let mut record = from.semaphores[k];
        let start = history.len();
        for &entry in from.history_of(&record) {
            let frontier = points.copy(from, entry.frontier);
            history.push(HistoryRecord { frontier, ..entry });
        }
        record.history = Span::since(&history, start);
        semaphores.push(record);
    }

    let queues =
        placement.queue_ranks.iter().enumerate().map(|(q, &r)| part(r).queues[q].clone()).collect();
    let mut compute: Vec<_> = (0..)
        .zip(parts)
        .flat_map(|(rank, from)| {
            from.compute
                .iter()
                .filter(move |check| placement.rank_of(scenario.ops[check.op].target) == rank)
        })
        .cloned()
        .collect();
    compute.sort_by_key(|check| check.op);

    let mut memory = causeway::device::MemoryStats::default();
    for from in parts {
        memory.commits += from.memory.commits;
        memory.reused += from.memory.reused;
        memory.reuse_declined += from.memory.reuse_declined;
        memory.over_quota_waits += from.memory.over_quota_waits;
        memory.peak_committed = memory.peak_committed.max(from.memory.peak_committed);
    }
    let vulkan = sum_ranks(parts.iter().filter_map(|from| from.vulkan.as_ref()), |sum, rank| {
        sum.native_waits += rank.native_waits;
        sum.validation_messages.extend_from_slice(&rank.validation_messages);
    });
    let npu = parts.iter().filter_map(|from| from.npu).reduce(|sum, rank| NpuRecord {
        adapter: sum.adapter,
        wait_descriptors: sum.wait_descriptors + rank.wait_descriptors,
        elided: sum.elided + rank.elided,
        held: sum.held + rank.held,
        ring_full: sum.ring_full + rank.ring_full,
    });
    let cuda = sum_ranks(parts.iter().filter_map(|from| from.cuda.as_ref()), |sum, rank| {
        sum.native_waits += rank.native_waits;
        sum.completed += rank.completed;
        sum.elided += rank.elided;
        sum.held += rank.held;
    });
    let wall = parts.iter().map(|from| from.wall).max().unwrap_or_default();
    Ok(Outcome {
        scenario,
        ops,
        waits,
        semaphores,
        history,
        points: points.points,
        axis_names: points.axis_names,
        memory,
        wall,
        queues,
        compute,
        vulkan,
        npu,
        cuda,
        // Every share gathered ran to its end: one stopped at its deadline is an error instead.
        timed_out: None,
    })
}

/// One driver's record for the whole run from the ranks that ran its queues: the first rank's,
/// with every later rank's added by `add`; `None` when no rank ran the driver.
fn sum_ranks<'r, T: Clone + 'r>(
    ranks: impl Iterator<Item = &'r T>,
    add: impl Fn(&mut T, &T),
) -> Option<T> {
    let mut sum: Option<T> = None;
    for rank in ranks {
        match &mut sum {
            None => sum = Some(rank.clone()),
            Some(sum) => add(sum, rank),
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{OpRecord, Status};
    use crate::ranks::tests::{bundled, ping_pong};
    use crate::run::RunOptions;
    use crate::{check, expect, rank_records, run};

    fn run_all_cpu(scenario: &Scenario) -> Outcome<'_> {
        let plan = check::check(scenario).expect("checked");
        let options = RunOptions {
            timeout: std::time::Duration::from_secs(60),
            progress: false,
            all_cpu: true,
        };
        run::run(scenario, &plan, options).expect("ran")
    }

    /// Spoils what `rank` did not run, as a rank's records of others' work would be: its
    /// operations cancelled with empty frontiers, its semaphores failed without history.
    fn spoil_others(placement: &Placement, outcome: &mut Outcome<'_>, rank: u16) {
        let scenario = outcome.scenario;
        for (record, op) in outcome.ops.iter_mut().zip(&scenario.ops) {
            if placement.rank_of(op.target) != rank {
                record.status = Status::Cancelled;
                record.frontier.points = Span::default();
                record.waits = Span::default();
            }
        }
        for (k, record) in outcome.semaphores.iter_mut().enumerate() {
            if placement.semaphore_ranks[k] != rank {
                record.failed = true;
                record.history = Span::default();
            }
        }
        outcome.compute.retain(|check| placement.rank_of(scenario.ops[check.op].target) == rank);
        // Each rank numbers its axes as it meets them.
        if rank == 1 {
            outcome.axis_names.reverse();
            let last = outcome.axis_names.len() as u32 - 1;
            for point in &mut outcome.points {
                point.axis = last - point.axis;
            }
        }
    }

    #[test]
    fn gathered_records_are_each_taken_from_the_rank_that_ran_them() {
        let scenario = bundled("remote-pipeline");
        let placement = Placement::new(&scenario, 2).unwrap();
        let whole = run_all_cpu(&scenario);
        assert!(
            expect::unmet(&whole).0.is_empty(),
            "the single-process run meets its expectations"
        );
        let parts: Vec<Outcome<'_>> = (0..2)
            .map(|rank| {
                let mut part = run_all_cpu(&scenario);
                spoil_others(&placement, &mut part, rank);
                // As rank 0 receives it.
                let bytes = rank_records::encode(&part).expect("encoded");
                rank_records::decode(&scenario, &bytes).expect("decoded")
            })
            .collect();
        let gathered = gather(&placement, &scenario, &parts).expect("gathered");
        let (unmet, checked) = expect::unmet(&gathered);
        assert!(unmet.is_empty(), "{unmet:?}");
        assert!(checked > 0);
        for (k, (gathered_op, whole_op)) in gathered.ops.iter().zip(&whole.ops).enumerate() {
            assert_eq!(gathered_op.status, whole_op.status, "op {k}");
            let named = |outcome: &Outcome<'_>, op: &OpRecord| {
                let mut points: Vec<(String, u64)> = outcome
                    .points_of(op.frontier)
                    .iter()
                    .map(|&point| (outcome.axis_name(point).to_string(), point.epoch))
                    .collect();
                points.sort();
                points
            };
            assert_eq!(named(&gathered, gathered_op), named(&whole, whole_op), "op {k}");
            // How a wait resolved depends on timing: compare with the run that ran it.
            let ran = &parts[usize::from(placement.rank_of(scenario.ops[k].target))];
            assert_eq!(gathered.waits_of(gathered_op), ran.waits_of(&ran.ops[k]), "op {k}");
            assert_eq!(gathered_op.start_ns, ran.ops[k].start_ns, "op {k}");
        }
        assert_eq!(gathered.compute.len(), whole.compute.len());
        assert!(gathered.semaphores.iter().all(|semaphore| !semaphore.failed));
        // The whole run's report tags each operation with the machine that ran it.
        let mut bytes = Vec::new();
        crate::report::write(&gathered, &mut bytes).expect("report written");
        let report: serde_json::Value = serde_json::from_slice(&bytes).expect("report is JSON");
        let machines: Vec<(&str, u64)> = report["ops"]
            .as_array()
            .expect("ops")
            .iter()
            .map(|op| (op["name"].as_str().unwrap(), op["machine"].as_u64().unwrap()))
            .collect();
        assert_eq!(
            machines,
            [("feed0", 0), ("feed2", 0), ("task1", 1), ("task2", 1), ("client-sync", 0)]
        );

        assert_eq!(
            gather(&placement, &scenario, &parts[..1]).err(),
            Some(GatherError::Ranks { expected: 2, got: 1 })
        );
        let mut short = parts;
        short[1].ops.pop();
        assert_eq!(
            gather(&placement, &scenario, &short).err(),
            Some(GatherError::Shape { rank: 1 })
        );
    }

    #[test]
    fn gathering_is_linear_at_scale() {
        // Run in one process, each rank's records through the bytes, gathered: the same.
        let scenario = ping_pong(50_000);
        let placement = Placement::new(&scenario, 2).unwrap();
        let whole = run_all_cpu(&scenario);
        let parts: Vec<Outcome<'_>> = (0..2)
            .map(|_| {
                let bytes = rank_records::encode(&whole).expect("encoded");
                rank_records::decode(&scenario, &bytes).expect("decoded")
            })
            .collect();
        let gathered = gather(&placement, &scenario, &parts).expect("gathered");
        assert!(expect::unmet(&gathered).0.is_empty());
        assert_eq!(gathered.ops, whole.ops);
        assert_eq!(gathered.waits, whole.waits);
        assert_eq!(gathered.points.len(), whole.points.len());
    }
}

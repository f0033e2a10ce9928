//! One scenario across MPI ranks: which rank this process is, and which rank runs what.
//!
//! Under `mpirun -n N`, every rank is one machine: a queue runs on the rank equal to its
//! `machine`, and host steps run on rank 0 (where the summary, report and trace are written).
//! A semaphore whose signals and waits fall on different ranks becomes a cross-rank link of
//! `causeway-distributed`: *exported* by the one rank that signals it (or fails it) and
//! *imported* by the ranks that wait on it, which receive each value with its frontier. This
//! module decides all of that from the scenario alone, before anything runs, so that every
//! rank derives the same plan without exchanging a message about it.
//!
//! Outside `mpirun` (no rank in the environment) the CLI runs every machine's queues in one
//! process, as it always has; [`World::from_env`] returns `None` then.
//!
//! The runner takes this rank's [`Share`]; at the end, rank 0 [`gather`](super::gather)s the
//! records every rank kept into one outcome by the same [`Placement`].
//!
//! All of it is plain data over the [`Scenario`]: nothing here calls MPI, and nothing here
//! depends on how a run is performed or recorded.

use std::fmt;

use super::model::{OpSpec, Scenario, ScenarioError, Target, WorkSpec};

/// The environment variable in which Open MPI's `mpirun` gives each process its rank.
pub const RANK_VAR: &str = "OMPI_COMM_WORLD_RANK";
/// The environment variable in which Open MPI's `mpirun` gives the number of ranks.
pub const SIZE_VAR: &str = "OMPI_COMM_WORLD_SIZE";

/// The rank host steps run on, and that writes the summary, report and trace.
pub const HOST_RANK: u16 = 0;

/// This process's place among the ranks `mpirun` started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct World {
    /// This process's rank.
    pub rank: u16,
    /// How many ranks there are (at least 1, more than `rank`).
    pub size: u16,
}

/// Why the rank in the environment cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorldError {
    /// One of [`RANK_VAR`] and [`SIZE_VAR`] is set without the other.
    Incomplete {
        /// The variable that is missing.
        missing: &'static str,
    },
    /// A variable is not a number a machine index can hold.
    NotARank {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// The rank is not below the number of ranks (or there are none).
    Outside {
        /// The rank.
        rank: u16,
        /// The number of ranks.
        size: u16,
    },
}

impl fmt::Display for WorldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorldError::Incomplete { missing } => {
                write!(f, "an MPI rank is in the environment but {missing} is not")
            }
            WorldError::NotARank { var, value } => {
                write!(f, "{var}={value:?} is not a rank (0 to {})", u16::MAX - 1)
            }
            WorldError::Outside { rank, size } => {
                write!(f, "rank {rank} is outside a world of {size} ranks")
            }
        }
    }
}

impl std::error::Error for WorldError {}

impl World {
    /// The world `mpirun` put this process in, read through `var` (the process environment:
    /// `|name| std::env::var(name).ok()`); `None` when no rank is set, i.e. a plain
    /// single-process run.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<World>, WorldError> {
        let number = |name: &'static str, value: String| {
            // `u16::MAX` is the cluster's own machine index, never a rank's.
            value
                .trim()
                .parse::<u16>()
                .ok()
                .filter(|&n| n < u16::MAX)
                .ok_or(WorldError::NotARank { var: name, value })
        };
        match (var(RANK_VAR), var(SIZE_VAR)) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(WorldError::Incomplete { missing: SIZE_VAR }),
            (None, Some(_)) => Err(WorldError::Incomplete { missing: RANK_VAR }),
            (Some(rank), Some(size)) => {
                let (rank, size) = (number(RANK_VAR, rank)?, number(SIZE_VAR, size)?);
                if rank >= size {
                    return Err(WorldError::Outside { rank, size });
                }
                Ok(Some(World { rank, size }))
            }
        }
    }
}

/// A semaphore that crosses ranks: signalled on one, waited on by others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The semaphore (its index in [`Scenario::semaphores`]; also its link id on every rank).
    pub semaphore: usize,
    /// The rank that signals (and fails) it.
    pub exporter: u16,
    /// The other ranks that wait on it, ascending.
    pub importers: Vec<u16>,
}

/// Which rank runs each queue and operation of a scenario, and the semaphores that cross.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The number of ranks.
    pub size: u16,
    /// Each queue's rank (its machine), by queue index.
    pub queue_ranks: Vec<u16>,
    /// Each semaphore's rank, by semaphore index: the one that signals (or fails) it, or
    /// [`HOST_RANK`] when nothing does (then every rank holds its initial value alike) or
    /// collective steps do (then every rank signals its own copy alike).
    pub semaphore_ranks: Vec<u16>,
    /// The cross-rank semaphores, by ascending semaphore index.
    pub links: Vec<Link>,
}

impl Placement {
    /// Places `scenario` on `size` ranks: each queue on the rank of its machine, host steps on
    /// [`HOST_RANK`]. Refused, naming the line, when a queue's machine has no rank, or when a
    /// semaphore is signalled (or failed) on more than one rank: a cross-rank semaphore's
    /// values come from one exporter, whose timeline orders them.
    pub fn new(scenario: &Scenario, size: u16) -> Result<Placement, ScenarioError> {
        let mut queue_ranks = Vec::with_capacity(scenario.queues.len());
        for queue in &scenario.queues {
            if queue.machine >= size {
                return Err(ScenarioError::at(
                    &scenario.path,
                    queue.line,
                    format!(
                        "queue '{}' is on machine {}, but only {size} rank(s) run: start at \
                         least {} with mpirun -n",
                        queue.name,
                        queue.machine,
                        u32::from(queue.machine) + 1
                    ),
                ));
            }
            queue_ranks.push(queue.machine);
        }
        let rank_of = |target: Target| match target {
            Target::Queue(queue) => queue_ranks[queue],
            Target::Host => HOST_RANK,
        };

        // Per semaphore: its signalling rank (with the line that made it so) and its waiters.
        let mut exporter: Vec<Option<(u16, usize)>> = vec![None; scenario.semaphores.len()];
        let mut waiters: Vec<Vec<u16>> = vec![Vec::new(); scenario.semaphores.len()];
        // The semaphores collective steps signal, with the first such step's line.
        let mut collective: Vec<Option<usize>> = vec![None; scenario.semaphores.len()];
        for op in scenario.ops.iter().filter(|op| is_collective(op)) {
            for &(semaphore, _) in scenario.signals(op) {
                collective[semaphore].get_or_insert(op.line);
            }
        }
        for op in &scenario.ops {
            if is_collective(op) {
                continue;
            }
            let rank = rank_of(op.target);
            let failed = op.fail.map(|(semaphore, _)| semaphore);
            let signalled = scenario.signals(op).iter().map(|&(semaphore, _)| semaphore);
            for semaphore in signalled.chain(failed) {
                if let Some(line) = collective[semaphore] {
                    return Err(ScenarioError::at(
                        &scenario.path,
                        op.line,
                        format!(
                            "semaphore '{}' is signalled by the all_reduce step of line {line}: \
                             every rank holds its own copy of a collective's result, which \
                             nothing else may signal",
                            scenario.semaphores[semaphore].name
                        ),
                    ));
                }
                match exporter[semaphore] {
                    None => exporter[semaphore] = Some((rank, op.line)),
                    Some((first, _)) if first == rank => {}
                    Some((first, first_line)) => {
                        return Err(ScenarioError::at(
                            &scenario.path,
                            op.line,
                            format!(
                                "semaphore '{}' is signalled on rank {first} (line {first_line}) \
                                 and on rank {rank} here: across ranks, a semaphore's values \
                                 come from one rank",
                                scenario.semaphores[semaphore].name
                            ),
                        ));
                    }
                }
            }
            for &(semaphore, _) in scenario.waits(op) {
                // A collective's result is signalled on every rank: waits on it stay local.
                if collective[semaphore].is_none() {
                    waiters[semaphore].push(rank);
                }
            }
        }

        let semaphore_ranks =
            exporter.iter().map(|exporter| exporter.map_or(HOST_RANK, |(rank, _)| rank)).collect();
        let links = exporter
            .into_iter()
            .zip(waiters)
            .enumerate()
            .filter_map(|(semaphore, (exporter, mut importers))| {
                // Never signalled: every rank holds its initial value, nothing crosses.
                let (exporter, _) = exporter?;
                importers.sort_unstable();
                importers.dedup();
                importers.retain(|&rank| rank != exporter);
                (!importers.is_empty()).then_some(Link { semaphore, exporter, importers })
            })
            .collect();
        Ok(Placement { size, queue_ranks, semaphore_ranks, links })
    }

    /// The rank that runs an operation with this target.
    pub fn rank_of(&self, target: Target) -> u16 {
        match target {
            Target::Queue(queue) => self.queue_ranks[queue],
            Target::Host => HOST_RANK,
        }
    }

    /// The queues `rank` hosts, ascending.
    pub fn queues_on(&self, rank: u16) -> impl Iterator<Item = usize> + '_ {
        self.queue_ranks.iter().enumerate().filter(move |&(_, &r)| r == rank).map(|(q, _)| q)
    }

    /// The link of `semaphore`, when it crosses ranks.
    pub fn link(&self, semaphore: usize) -> Option<&Link> {
        let k = self.links.binary_search_by_key(&semaphore, |link| link.semaphore).ok()?;
        Some(&self.links[k])
    }
}

/// Whether `op` is a collective step, performed by every rank.
pub fn is_collective(op: &OpSpec) -> bool {
    matches!(op.work, WorkSpec::AllReduce { .. })
}

/// One rank's share of a scenario run across ranks: the placement every rank derives alike,
/// and which rank this is. The runner asks it what this process hosts and which semaphores
/// it imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// This process's rank.
    pub rank: u16,
    /// Where everything runs.
    pub placement: Placement,
}

impl Share {
    /// `world`'s share of `scenario`: [`Placement::new`], then refusals (naming the line) of
    /// what does not cross ranks yet — a `cancel` step (it rejects speculation on the one
    /// device it runs on, while dependent work may sit on others) and an untracked (`external`)
    /// signal on a semaphore other ranks wait on (a cross-rank value travels with the frontier
    /// of the operation that signalled it; an untracked one has none).
    pub fn new(scenario: &Scenario, world: World) -> Result<Share, ScenarioError> {
        let placement = Placement::new(scenario, world.size)?;
        for op in &scenario.ops {
            let refuse = |why: String| Err(ScenarioError::at(&scenario.path, op.line, why));
            if op.cancel.is_some() {
                return refuse(format!(
                    "op `{}`: a cancel step cannot run across {} ranks (it rejects speculation \
                     on one rank's device only); run this scenario in one process",
                    scenario.op_name(op),
                    world.size
                ));
            }
            if op.external {
                let linked =
                    scenario.signals(op).iter().find(|&&(s, _)| placement.link(s).is_some());
                if let Some(&(semaphore, _)) = linked {
                    return refuse(format!(
                        "op `{}`: an external signal of semaphore '{}' cannot reach other ranks \
                         (a value crosses ranks with the frontier of a tracked signal)",
                        scenario.op_name(op),
                        scenario.semaphores[semaphore].name
                    ));
                }
            }
        }
        Ok(Share { rank: world.rank, placement })
    }

    /// Whether this rank runs operations with `target`: its own queues', and host steps on
    /// [`HOST_RANK`].
    pub fn hosts(&self, target: Target) -> bool {
        self.placement.rank_of(target) == self.rank
    }

    /// Whether this rank performs `op`: when it [`hosts`](Self::hosts) its target, and every
    /// collective (`all_reduce`) step, which every rank performs.
    pub fn performs(&self, op: &OpSpec) -> bool {
        is_collective(op) || self.hosts(op.target)
    }

    /// Whether this rank's contribution to a collective step waits on `semaphore`: when its
    /// values come from this rank (the collective itself orders the other ranks' waits).
    pub fn contributes(&self, semaphore: usize) -> bool {
        self.placement.semaphore_ranks[semaphore] == self.rank
    }

    /// Whether this rank runs queue `queue`.
    pub fn hosts_queue(&self, queue: usize) -> bool {
        self.placement.queue_ranks[queue] == self.rank
    }

    /// The rank `semaphore`'s values come from, when this rank imports it (waits on it while
    /// another rank signals it).
    pub fn exporter_of(&self, semaphore: usize) -> Option<u16> {
        let link = self.placement.link(semaphore)?;
        link.importers.binary_search(&self.rank).is_ok().then_some(link.exporter)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use super::*;
    use crate::{bundled, parse};

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    /// Bundled scenario `name`, parsed.
    pub(crate) fn bundled(name: &str) -> Scenario {
        let found = bundled::find(name).expect("bundled scenario");
        parse::parse(Path::new(found.file), found.source).expect("valid bundled scenario")
    }

    fn scenario(source: &str) -> Scenario {
        parse::parse(Path::new("test.toml"), source).expect("valid scenario")
    }

    #[test]
    fn no_rank_in_the_environment_is_a_single_process_run() {
        assert_eq!(World::from_env(env(&[])), Ok(None));
    }

    #[test]
    fn open_mpi_rank_and_size_are_read() {
        let world = World::from_env(env(&[(RANK_VAR, "3"), (SIZE_VAR, "4")]));
        assert_eq!(world, Ok(Some(World { rank: 3, size: 4 })));
    }

    #[test]
    fn bad_ranks_are_typed_errors() {
        assert_eq!(
            World::from_env(env(&[(RANK_VAR, "0")])),
            Err(WorldError::Incomplete { missing: SIZE_VAR })
        );
        assert_eq!(
            World::from_env(env(&[(SIZE_VAR, "2")])),
            Err(WorldError::Incomplete { missing: RANK_VAR })
        );
        for bad in ["", "-1", "x", "65535", "99999999999"] {
            assert_eq!(
                World::from_env(env(&[(RANK_VAR, bad), (SIZE_VAR, "2")])),
                Err(WorldError::NotARank { var: RANK_VAR, value: bad.to_string() }),
                "rank {bad:?}"
            );
        }
        assert_eq!(
            World::from_env(env(&[(RANK_VAR, "2"), (SIZE_VAR, "2")])),
            Err(WorldError::Outside { rank: 2, size: 2 })
        );
        assert_eq!(
            World::from_env(env(&[(RANK_VAR, "0"), (SIZE_VAR, "0")])),
            Err(WorldError::Outside { rank: 0, size: 0 })
        );
    }

    #[test]
    fn remote_pipeline_places_gpu1_on_rank_1_and_links_what_crosses() {
        let scenario = bundled("remote-pipeline");
        let placement = Placement::new(&scenario, 2).expect("fits two ranks");
        let queue = |name: &str| scenario.queues.iter().position(|q| q.name == name).unwrap();
        let semaphore =
            |name: &str| scenario.semaphores.iter().position(|s| s.name == name).unwrap();
        assert_eq!(placement.queues_on(0).collect::<Vec<_>>(), [queue("gpu0"), queue("gpu2")]);
        assert_eq!(placement.queues_on(1).collect::<Vec<_>>(), [queue("gpu1")]);
        // `a` and `b` go from rank 0 to gpu1; `s` comes back to the host step on rank 0.
        assert_eq!(
            placement.links,
            [
                Link { semaphore: semaphore("a"), exporter: 0, importers: vec![1] },
                Link { semaphore: semaphore("b"), exporter: 0, importers: vec![1] },
                Link { semaphore: semaphore("s"), exporter: 1, importers: vec![0] },
            ]
        );
        assert_eq!(placement.link(semaphore("s")).map(|link| link.exporter), Some(1));
    }

    #[test]
    fn a_machine_without_a_rank_is_refused_with_its_line() {
        let scenario = bundled("remote-pipeline");
        let error = Placement::new(&scenario, 1).expect_err("machine 1 needs two ranks");
        assert_eq!(error.line, Some(scenario.queues[2].line));
        assert!(error.message.contains("mpirun -n"), "{}", error.message);
    }

    #[test]
    fn a_semaphore_signalled_on_two_ranks_is_refused() {
        let scenario = scenario(
            r#"
name = "two-signallers"
description = "s is signalled on both machines"
[[queue]]
name = "q0"
[[queue]]
name = "q1"
machine = 1
[[semaphore]]
name = "s"
scope = "system-wide"
[[op]]
name = "first"
queue = "q0"
signal = ["s=1"]
[[op]]
name = "second"
queue = "q1"
wait = ["s>=1"]
signal = ["s=2"]
"#,
        );
        let error = Placement::new(&scenario, 2).expect_err("two signalling ranks");
        assert_eq!(error.line, Some(scenario.ops[1].line));
        assert!(error.message.contains("rank 0") && error.message.contains("rank 1"));
        // On one machine nothing crosses.
        let single = Placement::new(&scenario, 1);
        assert!(single.is_err(), "machine 1 needs a second rank");
    }

    #[test]
    fn a_host_failure_is_a_signal_from_the_host_rank() {
        let signalled = scenario(
            r#"
name = "failed-remotely"
description = "the host fails what machine 1 signals"
[[queue]]
name = "q1"
machine = 1
[[semaphore]]
name = "s"
scope = "system-wide"
[[op]]
name = "signaller"
queue = "q1"
signal = ["s=1"]
[[op]]
name = "abort"
queue = "host"
fail = "s"
"#,
        );
        let error = Placement::new(&signalled, 2).expect_err("failed on rank 0, signalled on 1");
        assert_eq!(error.line, Some(signalled.ops[1].line));
        // Failed alone, from the host, and waited on machine 1: exported by rank 0.
        let waited = scenario(
            r#"
name = "failed-for-a-waiter"
description = "the host fails what machine 1 waits on"
[[queue]]
name = "q1"
machine = 1
[[semaphore]]
name = "s"
scope = "system-wide"
[[op]]
name = "abort"
queue = "host"
fail = "s"
[[op]]
name = "waiter"
queue = "q1"
wait = ["s>=1"]
"#,
        );
        let placement = Placement::new(&waited, 2).unwrap();
        assert_eq!(placement.links, [Link { semaphore: 0, exporter: 0, importers: vec![1] }]);
    }

    #[test]
    fn a_collective_result_is_every_ranks_own_and_nothing_else_signals_it() {
        let scenario = bundled("tensor-parallel");
        let share = Share::new(&scenario, World { rank: 2, size: 4 }).unwrap();
        let reduced = scenario.semaphores.iter().position(|s| s.name == "reduced").unwrap();
        let partial2 = scenario.semaphores.iter().position(|s| s.name == "partial2").unwrap();
        let partial0 = scenario.semaphores.iter().position(|s| s.name == "partial0").unwrap();
        // Waited on every rank, signalled on every rank: no link.
        assert!(share.placement.link(reduced).is_none());
        // Each all-reduce step is performed by every rank; rank 2 contributes what its own
        // queue signals and leaves the others' to the collective.
        let steps: Vec<&OpSpec> = scenario.ops.iter().filter(|op| is_collective(op)).collect();
        assert_eq!(steps.len(), 2);
        assert!(steps.iter().all(|op| share.performs(op) && !share.hosts(op.target)));
        assert!(share.contributes(partial2) && !share.contributes(partial0));
        // Partial results cross no rank: each is waited on only by the collective.
        assert!(share.placement.links.iter().all(|link| link.semaphore != partial0));

        // The last row-parallel step signalling the collective's result too is refused.
        let source = bundled::find("tensor-parallel").unwrap().source;
        let mixed = source.replace(r#"signal = ["activations=1"]"#, r#"signal = ["reduced=3"]"#);
        let mixed = parse::parse(Path::new("mixed.toml"), &mixed).unwrap();
        let error = Placement::new(&mixed, 4).expect_err("reduced is a collective's result");
        assert!(error.message.contains("all_reduce step"), "{}", error.message);
    }

    #[test]
    fn cancel_steps_and_external_signals_on_links_do_not_cross_ranks() {
        let speculation = bundled("speculation");
        let error = Share::new(&speculation, World { rank: 0, size: 2 }).expect_err("cancel");
        assert!(error.message.contains("cannot run across 2 ranks"), "{}", error.message);
        let external = scenario(
            r#"
name = "external-across"
description = "an untracked value waited on machine 1"
[[queue]]
name = "q1"
machine = 1
[[semaphore]]
name = "s"
scope = "system-wide"
[[op]]
name = "outside"
queue = "host"
signal = ["s=1"]
external = true
[[op]]
name = "waiter"
queue = "q1"
wait = ["s>=1"]
"#,
        );
        let error = Share::new(&external, World { rank: 1, size: 2 }).expect_err("external");
        assert_eq!(error.line, Some(external.ops[0].line));
    }

    #[test]
    fn single_machine_scenarios_need_no_link() {
        for found in bundled::ALL {
            let scenario = parse::parse(Path::new(found.file), found.source).unwrap();
            if scenario.queues.iter().all(|queue| queue.machine == 0) {
                let placement = Placement::new(&scenario, 1).unwrap();
                assert!(placement.links.is_empty(), "{}", found.name);
                assert_eq!(placement.queues_on(0).count(), scenario.queues.len());
            }
        }
    }

    /// `rounds` rounds of ping-pong between two machines: an operation on each, each waiting
    /// for the other's last.
    pub(crate) fn ping_pong(rounds: u64) -> Scenario {
        let mut source = String::from(
            "name = \"ping-pong\"\ndescription = \"two machines in turn\"\n\
             [[queue]]\nname = \"q0\"\n[[queue]]\nname = \"q1\"\nmachine = 1\n\
             [[semaphore]]\nname = \"a\"\nscope = \"system-wide\"\n\
             [[semaphore]]\nname = \"b\"\nscope = \"system-wide\"\n",
        );
        for round in 1..=rounds {
            let previous = round - 1;
            source.push_str(&format!(
                "[[op]]\nname = \"ping{round}\"\nqueue = \"q0\"\nwait = [\"b>={previous}\"]\n\
                 signal = [\"a={round}\"]\n\
                 [[op]]\nname = \"pong{round}\"\nqueue = \"q1\"\nwait = [\"a>={round}\"]\n\
                 signal = [\"b={round}\"]\n"
            ));
        }
        parse::parse(Path::new("ping-pong.toml"), &source).unwrap()
    }

    #[test]
    fn placement_is_linear_at_scale() {
        // 10^5 operations ping-ponging between two machines: two links, one each way.
        let scenario = ping_pong(50_000);
        assert_eq!(scenario.ops.len(), 100_000);
        let placement = Placement::new(&scenario, 2).unwrap();
        assert_eq!(
            placement.links,
            [
                Link { semaphore: 0, exporter: 0, importers: vec![1] },
                Link { semaphore: 1, exporter: 1, importers: vec![0] },
            ]
        );
        assert_eq!(placement.rank_of(scenario.ops[1].target), 1);
    }
}

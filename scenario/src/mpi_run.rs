//! `mpirun -n N causeway run FILE`: one scenario across MPI ranks, over
//! [`causeway-distributed`](causeway_distributed) (built with this crate's `mpi` feature,
//! which the CLI's `mpi` feature turns on).
//!
//! Every rank loads and checks the same file and derives the same [`Share`] of it, so nothing
//! about the plan is exchanged. Each runs its own queues' operations (and rank 0 the host
//! steps) on its own device; a semaphore whose signals and waits fall on different ranks is a
//! link of a [`Node`]: each signal is sent to the waiting ranks when it is *submitted*, with
//! the signalling operation's frontier, and a waiting rank queues its work behind it at once
//! (one message, no round trip); the value's completion or failure follows.
//!
//! At the end every rank sends rank 0 its records as bytes ([`rank_records`]) — or, when its
//! share could not run, why — while its progress process keeps delivering values to ranks
//! still running, and waits for rank 0's answer that every rank's arrived (the end's barrier).
//! Rank 0 [`gather`]s one outcome of the whole run, which the CLI reports as it reports a
//! single-process run. Every step of the end is bounded by the run's deadline
//! ([`causeway_distributed::gather`]): a rank whose records do not come — killed under `mpirun
//! --enable-recovery`, say — is named as lost, and the run ends as a deadline does (exit 3). A
//! rank that cannot start its device or join the others prints its own error and exits: Open
//! MPI's `mpirun` then ends the whole job.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use causeway::device::{Device, Op, QueueId, Receipt, SemaphoreId, SubmitError};
use causeway::FRONTIER_CAPACITY;
use causeway_core::frontier::{Frontier, Point};
use causeway_core::semaphore::Failure;
use causeway_distributed::{Gathered, HostWaitError, LinkId, Links, Node, ReduceError};
use mpi::Count;

use super::check::Plan;
use super::gather::gather;
use super::model::{Scenario, ScenarioError};
use super::outcome::{Outcome, Status};
use super::rank_records;
use super::ranks::{self, Share};
use super::run::{self, PeerWaitError, Peers, RunOptions};

/// The first byte of what a rank sends rank 0 (a byte of its own, before the records' version
/// byte): its records follow.
const RECORDS: u8 = 0;
/// The first byte of what a rank sends rank 0: its share failed; the message follows.
const FAILED: u8 = 1;
/// As [`FAILED`], for a share that could never finish (a deadlock, a deadline).
const DEADLOCKED: u8 = 2;

/// How long past the run's deadline rank 0 waits for every rank's records: a rank that gave up
/// at its deadline still encodes and sends them.
pub const END_GRACE: Duration = Duration::from_secs(5);

/// How long a rank waits for its progress process to stop before it exits without finalising
/// MPI.
const FINISH_GRACE: Duration = Duration::from_secs(1);

/// What one rank could not do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankError {
    /// The rank.
    pub rank: u16,
    /// What went wrong there, as that rank words it.
    pub message: String,
    /// It could never finish (a deadlock or a deadline), as opposed to bad input.
    pub deadlock: bool,
}

/// How a run across ranks ended on this process.
#[derive(Debug)]
pub enum Ended<'s> {
    /// On rank 0: the whole run's outcome, gathered from every rank.
    Gathered(Box<Outcome<'s>>),
    /// On any other rank: its records went to rank 0, which reports the run.
    Sent,
}

/// This rank's hold on MPI after its run: dropping it finalises MPI — after the caller has
/// printed and written what it must, since Open MPI's finalisation waits for every rank, and a
/// rank that cannot finalise (see [`Node::finish_within`]) ends the job for all of them. When
/// the run's end was not whole (a rank lost), MPI is not finalised at all: finalising would
/// wait for the lost rank, forever if it is alive but stuck ([`Node::leave_within`]).
pub struct Session {
    node: Option<Node>,
    whole: bool,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            // Bounded: when every worker is stuck in work that never returns (a share that
            // ran past its deadline), the progress process cannot stop, and this rank exits
            // without finalising MPI rather than hanging.
            if self.whole {
                node.finish_within(FINISH_GRACE);
            } else {
                node.leave_within(FINISH_GRACE);
            }
        }
    }
}

/// Runs this process's `share` of `scenario` (checked into `plan`) with the other ranks and
/// ends as [`Ended`] says; keep the [`Session`] until the run is reported. `Err` lists what
/// failed: on rank 0 every rank's failure, a rank lost included; on another rank its own, when
/// it could not reach rank 0 with it (its device did not start, joining the ranks failed, or
/// rank 0 was lost).
///
/// Every step of the run's end is bounded by the run's deadline (`--timeout` after the ranks
/// joined): rank 0 waits for every rank's records until [`END_GRACE`] after it, and names each
/// rank whose records had not come by then as lost — killed, say, under `mpirun
/// --enable-recovery` — and the others wait for rank 0's answer
/// [`ANSWER_GRACE`](causeway_distributed::ANSWER_GRACE) longer.
pub fn run<'s>(
    scenario: &'s Scenario,
    plan: &Plan,
    options: RunOptions,
    share: &Share,
) -> (Result<Ended<'s>, Vec<RankError>>, Session) {
    let peers = MpiPeers { share, joined: OnceLock::new() };
    let part = run::run_share(scenario, plan, options, share, &peers);
    let own_error = |error: &ScenarioError| RankError {
        rank: share.rank,
        message: error.to_string(),
        deadlock: error.deadlock,
    };
    let Some(Joined { node, semaphores, at }) = peers.joined.into_inner() else {
        // Never joined the others: nothing can be sent; `mpirun` ends the job when this
        // process exits with an error.
        let error = part.err().map(|error| own_error(&error));
        return (Err(error.into_iter().collect()), Session { node: None, whole: false });
    };
    if part.is_err() {
        // What this rank would have signalled for others never will be: they learn it now,
        // instead of at their own deadline.
        for shared in share.placement.links.iter().filter(|link| link.exporter == share.rank) {
            node.fail(semaphores[shared.semaphore], Failure::Aborted);
        }
    }
    let mut bytes = match &part {
        Ok(outcome) => match rank_records::encode(outcome) {
            Ok(encoded) => [&[RECORDS][..], &encoded].concat(),
            Err(error) => failure_bytes(FAILED, &error.to_string()),
        },
        Err(error) => {
            failure_bytes(if error.deadlock { DEADLOCKED } else { FAILED }, &error.to_string())
        }
    };
    // Records are a few hundred bytes per operation; a share too large to count in an MPI
    // message is sent as a failure instead.
    if Count::try_from(bytes.len()).is_err() {
        bytes = failure_bytes(FAILED, "this rank's records exceed one MPI message");
    }
    // The progress process goes on delivering values while the records move, so a rank whose
    // share is done still serves those whose shares are not; none of them is past the run's
    // deadline by more than it takes to give up there and send its records.
    let deadline = options.timeout.checked_add(END_GRACE).and_then(|wait| at.checked_add(wait));
    let gathered = node.gather_until(bytes, deadline);
    let whole = matches!(
        gathered,
        Ok(Gathered::Root { whole: true, .. } | Gathered::Delivered { whole: true })
    );
    let session = Session { node: Some(node), whole };
    let ended = match gathered {
        Ok(Gathered::Root { parts, .. }) => collect(scenario, share, options, parts),
        Ok(_) => Ok(Ended::Sent),
        Err(error) => Err(vec![RankError {
            rank: share.rank,
            message: format!("lost rank 0, which gathers the run's records: {error}"),
            deadlock: true,
        }]),
    };
    (ended, session)
}

/// The bytes of a failed share: `kind`, then the message.
fn failure_bytes(kind: u8, message: &str) -> Vec<u8> {
    let mut bytes = vec![kind];
    bytes.extend_from_slice(message.as_bytes());
    bytes
}

/// Rank 0: the whole run's outcome from every rank's bytes (`None` for a rank lost), or every
/// rank's failure.
fn collect<'s>(
    scenario: &'s Scenario,
    share: &Share,
    options: RunOptions,
    parts: Vec<Option<Vec<u8>>>,
) -> Result<Ended<'s>, Vec<RankError>> {
    let mut outcomes = Vec::with_capacity(parts.len());
    let mut errors = Vec::new();
    for (rank, part) in (0..).zip(&parts) {
        let failed = |message: String, deadlock| RankError { rank, message, deadlock };
        let Some(part) = part else {
            errors.push(failed(
                format!(
                    "lost: rank 0 still waited for its records at the run's deadline ({:?} after \
                     the ranks joined) and {END_GRACE:?} past it",
                    options.timeout
                ),
                true,
            ));
            continue;
        };
        match part.split_first() {
            Some((&RECORDS, records)) => match rank_records::decode(scenario, records) {
                Ok(outcome) => outcomes.push((rank, outcome)),
                Err(error) => errors.push(failed(error.to_string(), false)),
            },
            Some((&kind @ (FAILED | DEADLOCKED), message)) => errors
                .push(failed(String::from_utf8_lossy(message).into_owned(), kind == DEADLOCKED)),
            _ => errors.push(failed("sent no records".to_string(), false)),
        }
    }
    if !errors.is_empty() {
        // The run is not reported, so a rank that ran to the end tells here what of its own
        // did not complete: often what waited on the ranks that failed (whose failure reached
        // it before its own deadline would have).
        for (rank, outcome) in &outcomes {
            if let Some(message) = incomplete_ops(scenario, &share.placement, *rank, outcome) {
                errors.push(RankError { rank: *rank, message, deadlock: false });
            }
        }
        errors.sort_by_key(|error| error.rank);
        return Err(errors);
    }
    let outcomes: Vec<Outcome<'s>> = outcomes.into_iter().map(|(_, outcome)| outcome).collect();
    gather(&share.placement, scenario, &outcomes)
        .map(|outcome| Ended::Gathered(Box::new(outcome)))
        .map_err(|error| {
            vec![RankError { rank: share.rank, message: error.to_string(), deadlock: false }]
        })
}

/// Operations listed by name at most in [`incomplete_ops`]'s message; the rest are counted.
const INCOMPLETE_NAMED: usize = 8;

/// What `rank`'s operations that failed or never ran were, from its `outcome`, for a run that
/// failed elsewhere: `None` when every one of them ran and succeeded.
fn incomplete_ops(
    scenario: &Scenario,
    placement: &ranks::Placement,
    rank: u16,
    outcome: &Outcome<'_>,
) -> Option<String> {
    let mut incomplete =
        scenario.ops.iter().zip(&outcome.ops).filter(|(op, record)| {
            placement.rank_of(op.target) == rank && record.status != Status::Ok
        });
    let named: Vec<String> = incomplete
        .by_ref()
        .take(INCOMPLETE_NAMED)
        .map(|(op, record)| {
            format!("`{}` (line {}, {})", scenario.op_name(op), op.line, record.status.name())
        })
        .collect();
    if named.is_empty() {
        return None;
    }
    let mut message = format!("ran to the end, but not all of it: {}", named.join(", "));
    let more = incomplete.count();
    if more > 0 {
        message.push_str(&format!(" and {more} more"));
    }
    Some(message)
}

/// The other ranks, through this rank's [`Node`] (started by [`Peers::connect`]).
struct MpiPeers<'a> {
    share: &'a Share,
    joined: OnceLock<Joined>,
}

/// This rank once it has joined the others.
struct Joined {
    node: Node,
    /// The device's semaphore of each of the scenario's, by index.
    semaphores: Vec<SemaphoreId>,
    /// When it joined: the run's deadline is `--timeout` after it, nearly the same instant on
    /// every rank (joining is collective).
    at: Instant,
}

impl MpiPeers<'_> {
    fn node(&self) -> &Node {
        &self.joined.get().expect("the runner connects before it submits or waits").node
    }
}

/// A semaphore's link: the same number on every rank (its index in the scenario).
fn link(semaphore: usize) -> LinkId {
    LinkId(u32::try_from(semaphore).expect("a scenario declares under 2^32 semaphores"))
}

fn peer_wait(error: HostWaitError) -> PeerWaitError {
    match error {
        HostWaitError::TimedOut => PeerWaitError::TimedOut,
        _ => PeerWaitError::Failed,
    }
}

impl Peers for MpiPeers<'_> {
    fn connect(&self, device: &'static Device, semaphores: &[SemaphoreId]) -> Result<(), String> {
        let mut links = Links::new();
        let rank = self.share.rank;
        for shared in &self.share.placement.links {
            let id = semaphores[shared.semaphore];
            if shared.exporter == rank {
                let to: Vec<i32> = shared.importers.iter().map(|&r| i32::from(r)).collect();
                links.export(link(shared.semaphore), id, &to);
            } else if shared.importers.binary_search(&rank).is_ok() {
                links.import(link(shared.semaphore), id, i32::from(shared.exporter));
            }
        }
        let node = Node::start(device, &links)
            .map_err(|error| format!("rank {rank} cannot join the other ranks: {error}"))?;
        if node.size() != i32::from(self.share.placement.size) {
            return Err(format!(
                "MPI started {} ranks, but the environment said {}",
                node.size(),
                self.share.placement.size
            ));
        }
        let _ =
            self.joined.set(Joined { node, semaphores: semaphores.to_vec(), at: Instant::now() });
        Ok(())
    }

    fn submit(
        &self,
        queue: QueueId,
        op: &Op<'_>,
        timeout: Duration,
    ) -> Result<Receipt, SubmitError> {
        self.node().submit_timeout(queue, op, timeout)
    }

    fn await_announced(
        &self,
        semaphore: usize,
        value: u64,
        timeout: Duration,
    ) -> Result<(), PeerWaitError> {
        self.node().await_announced(link(semaphore), value, timeout).map_err(peer_wait)
    }

    fn wait(&self, semaphore: usize, value: u64, timeout: Duration) -> Result<(), PeerWaitError> {
        self.node().wait(link(semaphore), value, timeout).map(|_| ()).map_err(peer_wait)
    }

    fn announce(
        &self,
        signals: &[(SemaphoreId, u64)],
        origin: Point,
        frontier: &Frontier<FRONTIER_CAPACITY>,
    ) {
        self.node().announce(signals, origin, frontier);
    }

    fn fail(&self, semaphore: SemaphoreId, failure: Failure) {
        self.node().fail(semaphore, failure);
    }

    fn sum_across_ranks(&self, data: &mut [f64], timeout: Duration) -> Result<(), PeerWaitError> {
        let deadline = Instant::now().checked_add(timeout);
        self.node().sum_across_ranks_until(data, deadline).map_err(|error| match error {
            ReduceError::TimedOut => PeerWaitError::TimedOut,
            _ => PeerWaitError::Failed,
        })
    }
}

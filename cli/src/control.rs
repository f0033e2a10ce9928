//! Loops and branches over scheduled graphs, run as coroutine processes on the device's pool.
//!
//! A `while` or `case` body is a graph scheduled once ([`causeway_schedule::schedule`]) and
//! declared on a device as a [`Body`]: a queue per stream and a timeline semaphore per stream.
//! Each time the body runs, every node is submitted to its stream's queue with the waits the
//! schedule chose, and the last node of each stream signals, so one wait per stream tells
//! when the body is done. Values never repeat: the `r`-th run of a stream of `k` nodes signals
//! `r·k + epoch`.
//!
//! [`run_while`] and [`run_case`] are `async`: spawned as coroutines
//! ([`causeway::runtime::Spawner`]) they evaluate their condition on a pool worker at run
//! time, submit the body's operations, and yield while the streams work — the worker runs
//! other processes meanwhile and the semaphore's waker brings the coroutine back. No thread is
//! created for them. Scenario files describe a fixed list of operations, so they cannot carry
//! a loop whose trip count is decided while it runs; these are library entry points.

use causeway::device::Device;
use causeway::device::{DeviceBuilder, Op, QueueConfig, QueueId, SemaphoreId, SubmitError, Work};
use causeway::runtime::wait;
use causeway::scope::Scope;
use causeway::semaphore::Failure;
use causeway_schedule::{Graph, Schedule};

/// One node of a body: where it runs, what it waits on and signals (epochs within one run).
#[derive(Clone, Debug)]
struct BodyOp {
    stream: usize,
    waits: Vec<(usize, u64)>,
    signal: Option<u64>,
    work: Work,
    tag: u64,
}

/// A scheduled graph declared on a device, ready to run any number of times.
#[derive(Debug)]
pub struct Body {
    /// Per stream: its queue, its semaphore, and its node count.
    streams: Vec<(QueueId, SemaphoreId, u64)>,
    /// The nodes in topological order.
    ops: Vec<BodyOp>,
    /// How many times the body has been submitted.
    runs: u64,
}

/// Why a body could not run.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlError {
    /// The device refused an operation.
    Submit(SubmitError),
    /// An operation of the body failed (its stream's semaphore carries the failure).
    Failed(Failure),
    /// A `case` chose a branch that does not exist.
    NoSuchBranch(usize),
}

impl Body {
    /// Declares `graph`, scheduled as `schedule`, on `builder`: a CPU-driver queue per stream
    /// and a semaphore per stream. `work` gives each node's work (its tag is the node index).
    pub fn declare(
        builder: &mut DeviceBuilder,
        graph: &Graph,
        schedule: &Schedule,
        work: impl Fn(usize) -> Work,
    ) -> Body {
        let assignment = &schedule.assignment;
        let mut streams = Vec::new();
        for stream in &assignment.streams {
            let queue = builder.queue(QueueConfig::default());
            let home = builder.endpoint(queue).unwrap_or(causeway::scope::Endpoint {
                machine: 0,
                process: 0,
                device_group: 0,
                device: 0,
                queue: 0,
            });
            let semaphore = builder.semaphore(0, Scope::ProcessLocal, home);
            streams.push((queue, semaphore, stream.nodes.len() as u64));
        }
        let ops = graph
            .order()
            .iter()
            .map(|&node| {
                let stream = assignment.stream_of[node];
                let epoch = assignment.epoch_of[node];
                let last = epoch == streams[stream].2;
                BodyOp {
                    stream,
                    waits: schedule.signals.waits[node]
                        .iter()
                        .map(|&dep| (assignment.stream_of[dep], assignment.epoch_of[dep]))
                        .collect(),
                    signal: (schedule.signals.signals[node] || last).then_some(epoch),
                    work: work(node),
                    tag: node as u64,
                }
            })
            .collect();
        Body { streams, ops, runs: 0 }
    }

    /// Submits one run of the body; returns the points (semaphore, value) that end it.
    fn submit(&mut self, device: &Device) -> Result<Vec<(SemaphoreId, u64)>, ControlError> {
        let run = self.runs;
        self.runs += 1;
        let value = |stream: usize, epoch: u64| run * self.streams[stream].2 + epoch;
        let mut waits = Vec::new();
        for op in &self.ops {
            waits.clear();
            waits.extend(op.waits.iter().map(|&(s, e)| (self.streams[s].1, value(s, e))));
            let signal: Vec<(SemaphoreId, u64)> = op
                .signal
                .iter()
                .map(|&e| (self.streams[op.stream].1, value(op.stream, e)))
                .collect();
            let submitted = Op { waits: &waits, signals: &signal, work: op.work, tag: op.tag };
            device.submit(self.streams[op.stream].0, &submitted).map_err(ControlError::Submit)?;
        }
        Ok(self.streams.iter().map(|&(_, semaphore, len)| (semaphore, (run + 1) * len)).collect())
    }

    /// Submits one run and yields until every stream has finished it.
    async fn run_once(&mut self, device: &Device) -> Result<(), ControlError> {
        for (semaphore, value) in self.submit(device)? {
            let Some(semaphore) = device.semaphore(semaphore) else { continue };
            wait(semaphore, value).await.map_err(ControlError::Failed)?;
        }
        Ok(())
    }
}

/// Runs `body` while `condition(iteration)` holds (evaluated before each iteration, after the
/// previous one has finished, so it may read what the body computed); returns the number of
/// iterations run.
pub async fn run_while(
    device: &Device,
    body: &mut Body,
    mut condition: impl FnMut(u64) -> bool,
) -> Result<u64, ControlError> {
    let mut iterations = 0;
    while condition(iterations) {
        body.run_once(device).await?;
        iterations += 1;
    }
    Ok(iterations)
}

/// Runs the branch `select()` names (evaluated when the case is reached) and returns its
/// index.
pub async fn run_case(
    device: &Device,
    branches: &mut [Body],
    select: impl FnOnce() -> usize,
) -> Result<usize, ControlError> {
    let chosen = select();
    let branch = branches.get_mut(chosen).ok_or(ControlError::NoSuchBranch(chosen))?;
    branch.run_once(device).await?;
    Ok(chosen)
}

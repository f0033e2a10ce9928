//! Loops and branches over scheduled graphs, run as coroutine processes on the device's pool
//! (this crate's `run` feature: the one part of it that runs anything).
//!
//! A `while` or `case` body is a graph scheduled once ([`crate::schedule`]) and declared on a
//! device as a [`Body`]: a queue per stream and a timeline semaphore per stream. Each time the
//! body runs, every node is submitted to its stream's queue with the waits the schedule chose,
//! and the last node of each stream signals, so one wait per stream tells when the body is
//! done. Values never repeat: the `r`-th run of a stream of `k` nodes signals `r·k + epoch`.
//!
//! [`run_while`] and [`run_case`] are `async`: spawned as coroutines
//! ([`causeway_runtime::Spawner`]) they evaluate their condition on a pool worker at run
//! time, submit the body's operations, and yield while the streams work — the worker runs
//! other processes meanwhile and the semaphore's waker brings the coroutine back. No thread is
//! created for them.
//!
//! [`run_graph`] runs a [`Program`] whose `while` and `case` controls say the same (the CLI
//! reads one from a graph file): conditions compare a counter with a constant ([`Condition`]),
//! and nodes change counters when they run ([`Update`]), so a condition reads what the graph
//! computed. Scenario files describe a fixed list of operations and cannot carry a loop whose
//! trip count is decided while it runs, so such graphs run here, not through `causeway run`.
//!
//! It runs on the device layer with the CPU driver directly, not through the `causeway`
//! facade, so that this crate's dependencies point down the layers.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway_core::executor::ProcessError;
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::Failure;
use causeway_core::unpoisoned::Mutex;
use causeway_device::{
    Device, DeviceBuilder, DeviceError, Op, QueueConfig, QueueId, SemaphoreConfig, SemaphoreId,
    SubmitError, Work,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::{wait, JoinError, PoolConfig, Spawner};

use crate::control::{Block, Condition, Control, ControlKind, Update};
use crate::{Graph, NodeId, Program, Schedule};

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

/// Why a body or a graph could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ControlError {
    /// The device refused an operation.
    Submit(SubmitError),
    /// An operation of the body failed (its stream's semaphore carries the failure).
    Failed(Failure),
    /// A `case` chose a branch that does not exist.
    NoSuchBranch(usize),
    /// The device for a graph could not be built.
    Device(DeviceError),
    /// The run was still going at its time limit: a loop whose condition still held, or work
    /// still running (cut short there).
    TimedOut(Box<Overrun>),
    /// The coroutine running a graph's loops and branches could not start.
    Spawn(ProcessError),
    /// The coroutine running a graph's loops and branches did not finish.
    Coroutine(JoinError),
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::Submit(error) => write!(f, "the device refused an operation: {error:?}"),
            ControlError::Failed(failure) => write!(f, "an operation failed: {failure:?}"),
            ControlError::NoSuchBranch(branch) => write!(f, "no branch {branch}"),
            ControlError::Device(error) => write!(f, "cannot build the device: {error:?}"),
            ControlError::TimedOut(overrun) => {
                write!(f, "still going at the {:?} limit", overrun.limit)?;
                if let Some(at) = overrun.control {
                    write!(f, ", in control {} after {} iterations", at.control, at.iterations)?;
                }
                write!(f, ", {} nodes still running", overrun.running_total)
            }
            ControlError::Spawn(error) => {
                write!(f, "cannot start the control coroutine: {error:?}")
            }
            ControlError::Coroutine(error) => write!(f, "the control coroutine: {error}"),
        }
    }
}

impl std::error::Error for ControlError {}

/// What a graph's run was doing when its time limit passed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Overrun {
    /// The limit.
    pub limit: Duration,
    /// The loop or branch the run was in, if any.
    pub control: Option<ControlAt>,
    /// Nodes whose work was still running at the limit (it was cut short there): the first
    /// [`OVERRUN_LISTED`].
    pub running: Vec<Ran>,
    /// How many nodes were still running, in all.
    pub running_total: usize,
}

/// Where in a loop or branch a run was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControlAt {
    /// The control, an index into [`Program::controls`].
    pub control: usize,
    /// The iterations of its body that had finished (a `case`: 0, its branch running).
    pub iterations: u64,
    /// A `while` whose condition still held at the limit (else the limit passed while its
    /// body ran iteration `iterations`).
    pub condition_held: bool,
}

/// Nodes an [`Overrun`] names, at most.
pub const OVERRUN_LISTED: usize = 20;

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
            // Room for a whole run: one run is submitted only after the previous one ended,
            // so a submission (on a pool worker) never waits for room.
            let (queue, semaphore) =
                stream_queue(builder, stream.nodes.len(), stream.nodes.len(), 0);
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
            let submitted = Op {
                waits: &waits,
                signals: &signal,
                work: op.work,
                tag: op.tag,
                ..Default::default()
            };
            device.submit(self.streams[op.stream].0, &submitted).map_err(ControlError::Submit)?;
        }
        Ok(self.streams.iter().map(|&(_, semaphore, len)| (semaphore, (run + 1) * len)).collect())
    }

    /// The points (semaphore, value) every run so far has reached once it is done.
    fn ends(&self) -> impl Iterator<Item = (SemaphoreId, u64)> + '_ {
        self.streams.iter().map(|&(_, semaphore, len)| (semaphore, self.runs * len))
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

/// Where a node that ran sits in a graph file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// A node of the file's graph.
    Graph(NodeId),
    /// Node `node` of branch `branch` of control `control` (a `while` has one branch, 0).
    Block {
        /// The control, an index into [`Program::controls`].
        control: usize,
        /// The branch (0 for a `while`).
        branch: usize,
        /// The node in that block's graph.
        node: NodeId,
    },
}

/// One node having run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ran {
    /// Which node.
    pub place: Place,
    /// Which iteration of its loop (0 outside loops).
    pub iteration: u64,
}

/// What running a graph file did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GraphRun {
    /// Per control: how many times its body ran (for a `case`, 0 or 1).
    pub iterations: Vec<u64>,
    /// Per control: the branch a `case` took (`None` for a `while`, or no branch held).
    pub branches: Vec<Option<usize>>,
    /// The counters' values at the end.
    pub counters: Vec<i64>,
    /// How many nodes ran (body nodes once per iteration).
    pub nodes_ran: u64,
    /// The check of the run, made as its nodes finished: every plain node ran once, every body
    /// node of the branch taken once per iteration and no other, and every dependency edge —
    /// within each iteration, into a control (before its body's first node) and out of it
    /// (after its body's last) — ordered by when the work finished. The number of edges
    /// checked, or the first problem.
    pub checked: Result<usize, String>,
}

/// What decides a control at run time.
enum Test {
    /// Loop while it holds.
    While(Condition),
    /// Take the first branch whose condition holds (`None` always holds).
    Case(Vec<Option<Condition>>),
}

/// What the nodes' host calls share with the coroutine: one lock, taken once per node.
struct Shared {
    /// The dependency check, fed as each node finishes.
    ledger: Ledger,
    /// Every node's run in finishing order, when the caller asked for it
    /// ([`run_graph_in_order`]): it grows with the run.
    order: Option<Vec<Ran>>,
    counters: Vec<i64>,
    /// Per control, the iteration its body is running (set before the body is submitted).
    iteration: Vec<u64>,
    /// The loop or branch the coroutine is in.
    at: Option<ControlAt>,
    /// Nodes whose work the time limit cut short: the first [`OVERRUN_LISTED`], and how many.
    cut_short: Vec<Ran>,
    cut_short_total: usize,
}

impl Shared {
    /// What the run was doing when `limit` passed.
    fn overrun(&self, limit: Duration) -> Overrun {
        Overrun {
            limit,
            control: self.at,
            running: self.cut_short.clone(),
            running_total: self.cut_short_total,
        }
    }
}

/// One operation of the file's graph, ready to submit.
struct Submission {
    queue: QueueId,
    waits: Vec<(SemaphoreId, u64)>,
    signal: Option<(SemaphoreId, u64)>,
    work: Work,
    tag: u64,
}

impl Submission {
    fn submit(
        &self,
        device: &Device,
        extra_waits: &[(SemaphoreId, u64)],
    ) -> Result<(), ControlError> {
        let waits: Vec<(SemaphoreId, u64)> =
            self.waits.iter().chain(extra_waits).copied().collect();
        let signals: Vec<(SemaphoreId, u64)> = self.signal.into_iter().collect();
        let op = Op {
            waits: &waits,
            signals: &signals,
            work: self.work,
            tag: self.tag,
            ..Default::default()
        };
        device.submit(self.queue, &op).map(drop).map_err(ControlError::Submit)
    }
}

/// A host call that does a node's work: spins `us`, applies its update and records it.
///
/// Work stops at `deadline`: a node that starts after it does nothing, and one still spinning
/// there is recorded as cut short; both fail as aborted, so nothing that depends on them runs
/// and the run ends within the deadline however long a node's work would take.
fn node_call(
    builder: &mut DeviceBuilder,
    shared: &Arc<Mutex<Shared>>,
    place: Place,
    us: u32,
    update: Option<Update>,
    control: Option<usize>,
    deadline: Option<Instant>,
) -> Work {
    let shared = Arc::clone(shared);
    let call = builder.host_call(move |_| {
        let started = Instant::now();
        if deadline.is_some_and(|deadline| started >= deadline) {
            return Err(Failure::Aborted);
        }
        // At most u32::MAX µs (71 minutes): no instant overflows.
        let until = started + Duration::from_micros(u64::from(us));
        let stop = deadline.map_or(until, |deadline| until.min(deadline));
        while Instant::now() < stop {
            std::hint::spin_loop();
        }
        let mut state = shared.lock();
        let ran = Ran { place, iteration: control.map_or(0, |c| state.iteration[c]) };
        if until > stop {
            state.cut_short_total += 1;
            if state.cut_short.len() < OVERRUN_LISTED {
                state.cut_short.push(ran);
            }
            return Err(Failure::Aborted);
        }
        if let Some(update) = update {
            update.apply(&mut state.counters);
        }
        state.ledger.record(ran);
        if let Some(order) = &mut state.order {
            order.push(ran);
        }
        Ok(())
    });
    Work::Host(call)
}

/// Runs `program` on a CPU device with `workers` pool
/// workers: every node a host call (its spin work, its counter update), each `while` and
/// `case` a coroutine.
///
/// The program's graph is scheduled as usual; a control node is one operation on its stream,
/// submitted once its loop or branch is over, waiting on the body's last points. Nodes that
/// come after no control are submitted at once, from the calling thread. One coroutine then
/// walks the rest in topological order: it submits plain nodes, and at a control it yields
/// until the control's dependencies have signalled, runs the loop or the branch (conditions
/// read the counters on a pool worker, after the previous iteration finished), submits the
/// control's operation, and goes on. It finally yields until every stream has finished. No
/// thread is created; the calling thread blocks until the run is over.
///
/// The run ends at `limit` after its start, with [`ControlError::TimedOut`]: a loop whose
/// condition still holds then (a file can say `while` of a condition nothing changes) runs no
/// further iteration, and work still running is cut short and fails, so that nothing which
/// depends on it runs.
pub fn run_graph(
    program: &Program,
    workers: usize,
    limit: Duration,
) -> Result<GraphRun, ControlError> {
    run(program, workers, limit, false).map(|(run, _)| run)
}

/// As [`run_graph`], also returning every node's run in the order their work finished (for
/// checking a run independently of [`GraphRun::checked`]). That list grows with the run;
/// `run_graph` keeps only what its check needs, which grows with the graph.
pub fn run_graph_in_order(
    program: &Program,
    workers: usize,
    limit: Duration,
) -> Result<(GraphRun, Vec<Ran>), ControlError> {
    run(program, workers, limit, true).map(|(run, order)| (run, order.unwrap_or_default()))
}

/// [`run_graph`], keeping the nodes' runs in order when `keep_order`.
fn run(
    program: &Program,
    workers: usize,
    limit: Duration,
    keep_order: bool,
) -> Result<(GraphRun, Option<Vec<Ran>>), ControlError> {
    let deadline = Instant::now().checked_add(limit);
    let graph = &program.graph;
    let nodes = graph.nodes();
    let plan = crate::schedule(graph);
    let assignment = &plan.assignment;
    let mut control_at = vec![None; nodes.len()];
    for (index, control) in program.controls.iter().enumerate() {
        control_at[control.node] = Some(index);
    }
    // A control's dependencies signal so that its coroutine can wait for them, and every
    // stream's last node signals so that the end of the run can be awaited.
    let mut signals = plan.signals.signals.clone();
    for control in &program.controls {
        nodes[control.node].deps.iter().for_each(|&d| signals[d] = true);
    }
    for stream in &assignment.streams {
        if let Some(&last) = stream.nodes.last() {
            signals[last] = true;
        }
    }
    // A node after a control (or a control itself) waits for the coroutine to submit it.
    let mut after_control = vec![false; nodes.len()];
    for &node in graph.order() {
        after_control[node] =
            control_at[node].is_some() || nodes[node].deps.iter().any(|&d| after_control[d]);
    }

    let shared = Arc::new(Mutex::new(Shared {
        ledger: Ledger::new(program),
        order: keep_order.then(Vec::new),
        counters: program.counters.iter().map(|c| c.initial).collect(),
        iteration: vec![0; program.controls.len()],
        at: None,
        cut_short: Vec::new(),
        cut_short_total: 0,
    }));
    let mut builder = Device::builder(PoolConfig::with_workers(workers));
    builder.driver(CpuBackend::new());
    let mut streams = Vec::new();
    for (id, stream) in assignment.streams.iter().enumerate() {
        // Room for every operation and every signal of the stream at once: nothing submitted
        // ever waits for room.
        let signalled = stream.nodes.iter().filter(|&&n| signals[n]).count();
        let (queue, semaphore) = stream_queue(&mut builder, stream.nodes.len(), signalled, id);
        streams.push((queue, semaphore, stream.nodes.len() as u64));
    }
    let mut submissions = Vec::with_capacity(nodes.len());
    for (node, spec) in nodes.iter().enumerate() {
        let stream = assignment.stream_of[node];
        let work = match control_at[node] {
            Some(_) => Work::Barrier,
            None => {
                let (place, update) = (Place::Graph(node), program.updates[node]);
                node_call(&mut builder, &shared, place, spec.work_us, update, None, deadline)
            }
        };
        let point = |n: NodeId| (streams[assignment.stream_of[n]].1, assignment.epoch_of[n]);
        submissions.push(Submission {
            queue: streams[stream].0,
            waits: plan.signals.waits[node].iter().map(|&d| point(d)).collect(),
            signal: signals[node].then(|| point(node)),
            work,
            tag: node as u64,
        });
    }
    let mut bodies: Vec<Vec<Body>> = Vec::new();
    for (control_index, control) in program.controls.iter().enumerate() {
        let mut declared = Vec::new();
        for (branch, block) in blocks(control).into_iter().enumerate() {
            let body_plan = crate::schedule(&block.graph);
            let works: Vec<Work> = block
                .graph
                .nodes()
                .iter()
                .enumerate()
                .map(|(node, spec)| {
                    let place = Place::Block { control: control_index, branch, node };
                    let (update, control) = (block.updates[node], Some(control_index));
                    node_call(&mut builder, &shared, place, spec.work_us, update, control, deadline)
                })
                .collect();
            declared.push(Body::declare(&mut builder, &block.graph, &body_plan, |n| works[n]));
        }
        bodies.push(declared);
    }
    let device = Arc::new(builder.build().map_err(ControlError::Device)?);

    for &node in graph.order().iter().filter(|&&n| !after_control[n]) {
        submissions[node].submit(&device, &[])?;
    }
    let rest: Vec<NodeId> = graph.order().iter().copied().filter(|&n| after_control[n]).collect();
    let deps: Vec<Vec<(SemaphoreId, u64)>> = program
        .controls
        .iter()
        .map(|c| {
            let point = |d: NodeId| (streams[assignment.stream_of[d]].1, assignment.epoch_of[d]);
            nodes[c.node].deps.iter().map(|&d| point(d)).collect()
        })
        .collect();
    let tests: Vec<Test> = program
        .controls
        .iter()
        .map(|c| match &c.kind {
            ControlKind::While { condition, .. } => Test::While(*condition),
            ControlKind::Case { branches } => {
                Test::Case(branches.iter().map(|(when, _)| *when).collect())
            }
        })
        .collect();
    let ends: Vec<(SemaphoreId, u64)> = streams.iter().map(|&(_, s, len)| (s, len)).collect();
    let coroutine_device = Arc::clone(&device);
    let coroutine_shared = Arc::clone(&shared);
    let walk = async move {
        let device = coroutine_device;
        let shared = coroutine_shared;
        let controls = bodies.len();
        let mut iterations = vec![0; controls];
        let mut branches = vec![None; controls];
        for node in rest {
            let Some(control) = control_at[node] else {
                submissions[node].submit(&device, &[])?;
                continue;
            };
            for &(semaphore, value) in &deps[control] {
                await_point(&device, semaphore, value).await?;
            }
            let entered = ControlAt { control, iterations: 0, condition_held: false };
            shared.lock().at = Some(entered);
            let chosen = match &tests[control] {
                Test::Case(whens) => {
                    let values = shared.lock().counters.clone();
                    let chosen =
                        whens.iter().position(|when| when.is_none_or(|c| c.holds(&values)));
                    if let Some(chosen) = chosen {
                        run_case(&device, &mut bodies[control], || chosen).await?;
                        iterations[control] = 1;
                    }
                    branches[control] = chosen;
                    chosen
                }
                &Test::While(condition) => {
                    let body = &mut bodies[control][0];
                    let mut late = false;
                    let holds = |iteration: u64| {
                        let mut state = shared.lock();
                        state.iteration[control] = iteration;
                        let holds = condition.holds(&state.counters);
                        late = holds && deadline.is_some_and(|d| Instant::now() >= d);
                        let at =
                            ControlAt { iterations: iteration, condition_held: late, ..entered };
                        state.at = Some(at);
                        holds && !late
                    };
                    iterations[control] = run_while(&device, body, holds).await?;
                    if late {
                        // Nothing submitted waits on what is left unsubmitted: stop here.
                        return Err(ControlError::TimedOut(Box::new(shared.lock().overrun(limit))));
                    }
                    Some(0)
                }
            };
            shared.lock().at = None;
            let body_ends: Vec<(SemaphoreId, u64)> =
                chosen.map(|b| bodies[control][b].ends().collect()).unwrap_or_default();
            submissions[node].submit(&device, &body_ends)?;
        }
        for &(semaphore, value) in &ends {
            await_point(&device, semaphore, value).await?;
        }
        Ok::<_, ControlError>((iterations, branches))
    };
    let outcome = {
        let spawner = Spawner::new(device.executor());
        let handle = spawner
            .spawn(async move { Ok(walk.await) })
            .map_err(|refused| ControlError::Spawn(refused.error()))?;
        handle.join().map_err(ControlError::Coroutine)?
    };
    // Past the deadline, whatever stopped the run (a loop not done, work cut short and what
    // failed behind it) is the time limit's doing.
    let (iterations, branches) = match outcome {
        Err(_) if deadline.is_some_and(|deadline| Instant::now() >= deadline) => {
            return Err(ControlError::TimedOut(Box::new(shared.lock().overrun(limit))));
        }
        outcome => outcome?,
    };
    let mut state = shared.lock();
    let run = GraphRun {
        nodes_ran: state.ledger.records,
        checked: state.ledger.verdict(program, &iterations, &branches),
        iterations,
        branches,
        counters: std::mem::take(&mut state.counters),
    };
    Ok((run, state.order.take()))
}

/// Yields until `semaphore` on `device` reaches `value`.
async fn await_point(
    device: &Device,
    semaphore: SemaphoreId,
    value: u64,
) -> Result<(), ControlError> {
    match device.semaphore(semaphore) {
        Some(semaphore) => wait(semaphore, value).await.map(drop).map_err(ControlError::Failed),
        None => Ok(()),
    }
}

/// The blocks of `control`: a `while`'s body, or each branch of a `case`, in order.
fn blocks(control: &Control) -> Vec<&Block> {
    match &control.kind {
        ControlKind::While { body, .. } => vec![body],
        ControlKind::Case { branches } => branches.iter().map(|(_, block)| block).collect(),
    }
}

/// The check of a run ([`GraphRun::checked`]), made as its nodes finish: each node's host call
/// records itself here, under the lock they share, once its work is done, so the order of the
/// records is the order the work finished in. An edge `a -> b` holds when `a` has a record in
/// `b`'s iteration by the time `b`'s comes.
///
/// What it keeps follows the graph, not the run: per node the position of its record, per body
/// node the last iteration it ran in, per control the span of its records. (Keeping every
/// record to check them afterwards took `schedule --run` to 218 MB at 4·10^5 iterations of a
/// four-node body; this keeps it at 5 MB, as at 4·10^3.) Iteration tags are read under the
/// same lock as the records are made, so a loop's iterations never interleave in them;
/// checking that an iteration is whole when the next one begins is what remains.
struct Ledger {
    /// Records so far (the next one's position).
    records: u64,
    /// Per node of the file's graph, the position of its record.
    graph: Vec<Option<u64>>,
    controls: Vec<ControlLedger>,
    /// Edges found ordered so far, within bodies.
    edges: usize,
    /// The first problem found.
    problem: Option<Problem>,
}

/// What a [`Ledger`] keeps of one control.
struct ControlLedger {
    /// Per branch (one for a `while`), per node, its dependencies in the block.
    deps: Vec<Vec<Vec<NodeId>>>,
    /// The branch whose nodes ran.
    branch: Option<usize>,
    /// Per branch, per node: the last iteration it ran in.
    last_iteration: Vec<Vec<Option<u64>>>,
    /// The iteration being recorded, and how many of its nodes have been.
    iteration: Option<u64>,
    recorded_in_iteration: usize,
    /// The positions of the first and the last record of the control's body.
    span: Option<(u64, u64)>,
}

/// Why a run does not check ([`Ledger`]), rendered with the program's names.
#[derive(Clone, Copy, Debug)]
enum Problem {
    /// A node ran twice in one iteration.
    Twice(Ran),
    /// A body node finished before a dependency of its in the same iteration had.
    Before(Ran, NodeId),
    /// A body node did not run in an iteration of its control.
    Missing { control: usize, branch: usize, node: NodeId, iteration: u64 },
    /// A body node of an earlier iteration finished after iteration `current` had begun.
    Overlap { ran: Ran, current: u64 },
    /// Nodes of two branches of one `case` ran.
    TwoBranches { control: usize, branches: (usize, usize) },
    /// A control's body ran more iterations than the control did.
    ExtraIterations { control: usize, recorded: u64, ran: u64 },
    /// A node of the file's graph never ran.
    NeverRan(NodeId),
    /// A node of the file's graph (or a control's body) started before a dependency finished.
    Early { node: NodeId, dep: NodeId },
}

impl ControlLedger {
    /// Starts recording `iteration`.
    fn begin(&mut self, iteration: u64) {
        self.iteration = Some(iteration);
        self.recorded_in_iteration = 0;
    }

    /// A node of `branch` not recorded in the current iteration, if any.
    fn unfinished(&self, branch: usize) -> Option<NodeId> {
        if self.recorded_in_iteration == self.deps[branch].len() {
            return None;
        }
        self.last_iteration[branch].iter().position(|&last| last != self.iteration)
    }
}

impl Ledger {
    fn new(program: &Program) -> Ledger {
        let controls = program
            .controls
            .iter()
            .map(|control| {
                let deps: Vec<Vec<Vec<NodeId>>> = blocks(control)
                    .iter()
                    .map(|block| block.graph.nodes().iter().map(|n| n.deps.clone()).collect())
                    .collect();
                let last_iteration = deps.iter().map(|nodes| vec![None; nodes.len()]).collect();
                ControlLedger {
                    deps,
                    branch: None,
                    last_iteration,
                    iteration: None,
                    recorded_in_iteration: 0,
                    span: None,
                }
            })
            .collect();
        Ledger {
            records: 0,
            graph: vec![None; program.graph.nodes().len()],
            controls,
            edges: 0,
            problem: None,
        }
    }

    /// Records that `ran`'s work has finished, after every record before it.
    fn record(&mut self, ran: Ran) {
        let at = self.records;
        self.records += 1;
        if self.problem.is_none() {
            self.problem = self.place(ran, at).err();
        }
    }

    fn place(&mut self, ran: Ran, at: u64) -> Result<(), Problem> {
        let (control, branch, node) = match ran.place {
            Place::Graph(node) => {
                if self.graph[node].replace(at).is_some() {
                    return Err(Problem::Twice(ran));
                }
                return Ok(());
            }
            Place::Block { control, branch, node } => (control, branch, node),
        };
        let ledger = &mut self.controls[control];
        if let Some(other) = ledger.branch.filter(|&other| other != branch) {
            return Err(Problem::TwoBranches { control, branches: (other, branch) });
        }
        ledger.branch = Some(branch);
        // A whole iteration that never ran is named by its block's first node.
        let skipped = |iteration| Problem::Missing { control, branch, node: 0, iteration };
        match ledger.iteration {
            Some(current) if current == ran.iteration => {}
            Some(current) if ran.iteration < current => {
                return Err(Problem::Overlap { ran, current });
            }
            Some(current) => {
                if let Some(node) = ledger.unfinished(branch) {
                    return Err(Problem::Missing { control, branch, node, iteration: current });
                }
                if ran.iteration > current + 1 {
                    return Err(skipped(current + 1));
                }
                ledger.begin(ran.iteration);
            }
            None if ran.iteration > 0 => return Err(skipped(0)),
            None => ledger.begin(ran.iteration),
        }
        let this_iteration = Some(ran.iteration);
        if ledger.last_iteration[branch][node] == this_iteration {
            return Err(Problem::Twice(ran));
        }
        for &dep in &ledger.deps[branch][node] {
            if ledger.last_iteration[branch][dep] != this_iteration {
                return Err(Problem::Before(ran, dep));
            }
            self.edges += 1;
        }
        ledger.last_iteration[branch][node] = this_iteration;
        ledger.recorded_in_iteration += 1;
        ledger.span = Some(ledger.span.map_or((at, at), |(first, _)| (first, at)));
        Ok(())
    }

    /// The check of the whole run, given what each control did: the number of edges found
    /// ordered, or the first problem, in `program`'s names.
    fn verdict(
        &self,
        program: &Program,
        iterations: &[u64],
        branches: &[Option<usize>],
    ) -> Result<usize, String> {
        self.whole(program, iterations, branches).map_err(|problem| describe(program, problem))
    }

    fn whole(
        &self,
        program: &Program,
        iterations: &[u64],
        branches: &[Option<usize>],
    ) -> Result<usize, Problem> {
        if let Some(problem) = self.problem {
            return Err(problem);
        }
        let nodes = program.graph.nodes();
        // Per node of the file's graph: the positions of its first and last record (a
        // control's: its body's), `u64::MAX` first when it has none.
        let mut span = vec![(u64::MAX, 0); nodes.len()];
        for (control, (ledger, spec)) in self.controls.iter().zip(&program.controls).enumerate() {
            let ran = iterations[control];
            let taken = match spec.kind {
                ControlKind::While { .. } => Some(0),
                ControlKind::Case { .. } => branches[control],
            };
            let recorded = ledger.iteration.map_or(0, |last| last + 1);
            if let (Some(branch), Some(taken)) = (ledger.branch, taken) {
                if branch != taken {
                    return Err(Problem::TwoBranches { control, branches: (taken, branch) });
                }
            }
            if recorded > ran || (recorded > 0 && taken.is_none()) {
                return Err(Problem::ExtraIterations { control, recorded, ran });
            }
            let Some(branch) = taken else { continue };
            // Every iteration but the last recorded one was found whole when the next began.
            if let (Some(last), Some(node)) = (ledger.iteration, ledger.unfinished(branch)) {
                return Err(Problem::Missing { control, branch, node, iteration: last });
            }
            if recorded < ran {
                return Err(Problem::Missing { control, branch, node: 0, iteration: recorded });
            }
            if let Some(body) = ledger.span {
                span[spec.node] = body;
            }
        }
        let mut edges = self.edges;
        for &node in program.graph.order() {
            let (first, last) = match self.graph[node] {
                Some(at) => (at, at),
                None if program.controls.iter().any(|c| c.node == node) => span[node],
                None => return Err(Problem::NeverRan(node)),
            };
            let mut finished = last;
            for &dep in &nodes[node].deps {
                let dep_last = span[dep].1;
                if first != u64::MAX && dep_last > first {
                    return Err(Problem::Early { node, dep });
                }
                finished = finished.max(dep_last);
                edges += 1;
            }
            // A control whose body never ran finishes, for what follows, with its dependencies.
            span[node] = (first, if first == u64::MAX { finished } else { last });
        }
        Ok(edges)
    }
}

/// `problem` in the names `program` gives its nodes.
fn describe(program: &Program, problem: Problem) -> String {
    let nodes = program.graph.nodes();
    let body_node = |control: usize, branch: usize, node: NodeId| {
        blocks(&program.controls[control])[branch].graph.nodes()[node].name.clone()
    };
    let control_name = |control: usize| &nodes[program.controls[control].node].name;
    let name = |ran: Ran| match ran.place {
        Place::Graph(node) => nodes[node].name.clone(),
        Place::Block { control, branch, node } => body_node(control, branch, node),
    };
    match problem {
        Problem::Twice(ran) => format!("`{}` ran twice in iteration {}", name(ran), ran.iteration),
        Problem::Before(ran, dep) => {
            let Place::Block { control, branch, .. } = ran.place else {
                unreachable!("only body nodes are checked against their block's dependencies")
            };
            let dep = body_node(control, branch, dep);
            format!("`{}` ran before `{dep}` in iteration {}", name(ran), ran.iteration)
        }
        Problem::Missing { control, branch, node, iteration } => {
            format!("`{}` did not run in iteration {iteration}", body_node(control, branch, node))
        }
        Problem::Overlap { ran, current } => format!(
            "`{}` of iteration {} finished after iteration {current} had begun",
            name(ran),
            ran.iteration
        ),
        Problem::TwoBranches { control, branches: (first, second) } => format!(
            "`{}` ran nodes of branch {first} and of branch {second}",
            control_name(control)
        ),
        Problem::ExtraIterations { control, recorded, ran } => {
            format!("`{}` ran {ran} iterations, but its body ran {recorded}", control_name(control))
        }
        Problem::NeverRan(node) => format!("`{}` did not run", nodes[node].name),
        Problem::Early { node, dep } => {
            format!("`{}` started before `{}` finished", nodes[node].name, nodes[dep].name)
        }
    }
}

/// A stream's queue, with ring slots for `operations`, and its process-local semaphore, with
/// history slots for `signals` pending at once (plus the newest reached): sized so that
/// nothing submitted to them waits for room. `ordinal` names the home endpoint when the queue
/// got no axis.
fn stream_queue(
    builder: &mut DeviceBuilder,
    operations: usize,
    signals: usize,
    ordinal: usize,
) -> (QueueId, SemaphoreId) {
    let mut config = QueueConfig::default();
    config.capacity = operations.max(1);
    let queue = builder.queue(config);
    let home = builder.endpoint(queue).unwrap_or(Endpoint {
        machine: 0,
        process: 0,
        device_group: 0,
        device: 0,
        queue: ordinal as u64,
    });
    let mut semaphore = SemaphoreConfig::new(0, Scope::ProcessLocal, home);
    semaphore.history = (signals + 2).min(usize::from(u16::MAX));
    (queue, builder.semaphore_config(semaphore))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::control::Counter;
    use crate::NodeSpec;

    /// `x -> w -> y` on one device, `w` a loop of `a -> b` while `n < 2`: nodes in the order a
    /// graph file lists them (plain nodes, then controls), so `x` is 0, `y` 1 and `w` 2.
    fn program() -> Program {
        let node = |name: &str, deps: &[NodeId]| NodeSpec {
            name: name.to_string(),
            command: name.to_string(),
            devices: vec![0],
            deps: deps.to_vec(),
            work_us: 0,
        };
        let devices = || vec!["gpu".to_string()];
        let graph = Graph::new(devices(), vec![node("x", &[]), node("y", &[2]), node("w", &[0])])
            .expect("the graph builds");
        let body =
            Graph::new(devices(), vec![node("a", &[]), node("b", &[0])]).expect("the body builds");
        let counters = HashMap::from([("n", 0)]);
        let condition = Condition::parse("n < 2", &counters).expect("the condition parses");
        let body = Block { graph: body, updates: vec![None, None] };
        Program {
            graph,
            updates: vec![None, None, None],
            counters: vec![Counter { name: "n".to_string(), initial: 0 }],
            controls: vec![Control { node: 2, kind: ControlKind::While { condition, body } }],
        }
    }

    /// The check of `records` (`"x"`, `"y"`, or `"a1"`: body node `a` in iteration 1) as the
    /// run's finishing order, the loop having run `iterations` times.
    fn check(records: &[&str], iterations: u64) -> Result<usize, String> {
        let program = &program();
        let mut ledger = Ledger::new(program);
        for record in records {
            let (name, iteration) = record.split_at(1);
            let place = match name {
                "x" => Place::Graph(0),
                "y" => Place::Graph(1),
                body => Place::Block { control: 0, branch: 0, node: usize::from(body == "b") },
            };
            ledger.record(Ran { place, iteration: iteration.parse().unwrap_or(0) });
        }
        ledger.verdict(program, &[iterations], &[None])
    }

    #[test]
    fn a_run_in_dependency_order_checks_every_edge() {
        // a -> b twice, x -> w, w -> y.
        assert_eq!(check(&["x", "a0", "b0", "a1", "b1", "y"], 2), Ok(4));
        assert_eq!(check(&["x", "y"], 0), Ok(2));
    }

    #[test]
    fn each_break_of_the_order_is_named() {
        let cases: [(&[&str], u64, &str); 8] = [
            (&["x", "a0", "b0", "b1", "a1", "y"], 2, "`b` ran before `a` in iteration 1"),
            (&["x", "a0", "b0", "a1", "y"], 2, "`b` did not run in iteration 1"),
            (&["x", "a0", "b0", "a2", "b2", "y"], 3, "`a` did not run in iteration 1"),
            (&["x", "a0", "a1", "b1", "y"], 2, "`b` did not run in iteration 0"),
            (&["x", "x", "y"], 0, "`x` ran twice in iteration 0"),
            (&["x", "a0", "y", "b0"], 1, "`y` started before `w` finished"),
            (&["a0", "b0", "x", "y"], 1, "`w` started before `x` finished"),
            (&["x", "a0", "b0", "a1", "b1"], 2, "`y` did not run"),
        ];
        for (records, iterations, problem) in cases {
            assert_eq!(check(records, iterations), Err(problem.to_string()), "{records:?}");
        }
        let extra = check(&["x", "a0", "b0", "a1", "b1", "y"], 1);
        assert_eq!(extra, Err("`w` ran 1 iterations, but its body ran 2".to_string()));
    }
}

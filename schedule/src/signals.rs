//! Deciding which dependency edges need a signal and a wait.
//!
//! Each stream has a timeline: its `k`-th node signals value `k` when anything must wait for
//! it. The nodes are visited in topological order, each starting from what its stream knows
//! (the frontier of the node before it on the stream) plus its own point. Its dependencies are
//! taken latest first (in topological order); a dependency is
//!
//! - **FIFO** when it is on the same stream: stream order already runs it first;
//! - **implied** when the frontier already knows its point: a wait taken for a later
//!   dependency, or one the stream took earlier, carries it transitively;
//! - otherwise **waited**: the node waits on the dependency's stream timeline reaching the
//!   dependency's epoch, the dependency signals that value, and the wait's frontier (the
//!   dependency's own, exactly what the runtime imports from that signal) joins the node's.
//!
//! Latest first matters: if one dependency is an ancestor of another, the later one's wait
//! carries the earlier one, so only edges of the transitive reduction are ever waited on —
//! whenever the frontiers are exact, which holds while the streams fit their capacity. A
//! frontier that has to forget entries stays sound: it only waits more.

use causeway_core::frontier::{Frontier, Point};

use crate::assign::{stream_axis, Assignment, StreamId};
use crate::graph::{Graph, NodeId};

/// The waits a schedule emits, and what each node knows when it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signals {
    /// For each node, the dependencies it waits on (each on another stream).
    pub waits: Vec<Vec<NodeId>>,
    /// Whether each node signals its stream's timeline (some node waits on it).
    pub signals: Vec<bool>,
    /// Dependency edges within one stream (ordered by FIFO).
    pub fifo: usize,
    /// Cross-stream edges implied by other waits (no signal needed).
    pub implied: usize,
    /// Cross-stream edges waited on.
    pub waited: usize,
    /// Whether every frontier kept every entry (then `waited` counts only edges of the
    /// transitive reduction).
    pub exact: bool,
    /// Each node's frontier, as (stream, epoch) pairs sorted by stream: the flat pairs and,
    /// per node, where its pairs start (one more entry marks the end).
    frontier_pairs: Vec<(StreamId, u64)>,
    frontier_starts: Vec<usize>,
}

impl Signals {
    /// What `node` knows has run when it starts: for each stream, the last node on it among
    /// its causal past (the node itself included), as (stream, epoch).
    pub fn frontier(&self, node: NodeId) -> &[(StreamId, u64)] {
        &self.frontier_pairs[self.frontier_starts[node]..self.frontier_starts[node + 1]]
    }

    /// The cross-stream edges (what one event per crossing edge would signal and wait).
    pub fn cross_stream(&self) -> usize {
        self.implied + self.waited
    }

    /// The number of nodes that signal.
    pub fn signal_count(&self) -> usize {
        self.signals.iter().filter(|&&s| s).count()
    }
}

/// The fewest waits that order every edge of `graph` under `assignment` (see the module
/// documentation).
pub fn minimise(graph: &Graph, assignment: &Assignment) -> Signals {
    let streams = assignment.streams.len();
    if streams <= 8 {
        minimise_with::<8>(graph, assignment)
    } else if streams <= 16 {
        minimise_with::<16>(graph, assignment)
    } else if streams <= 32 {
        minimise_with::<32>(graph, assignment)
    } else {
        minimise_with::<64>(graph, assignment)
    }
}

fn minimise_with<const N: usize>(graph: &Graph, assignment: &Assignment) -> Signals {
    let nodes = graph.nodes();
    let mut position = vec![0usize; nodes.len()];
    for (at, &node) in graph.order().iter().enumerate() {
        position[node] = at;
    }
    let point = |node: NodeId| {
        Point::new(stream_axis(assignment.stream_of[node]), assignment.epoch_of[node])
    };
    let mut knowledge: Vec<Frontier<N>> = vec![Frontier::new(); nodes.len()];
    let mut stream_knows: Vec<Frontier<N>> = vec![Frontier::new(); assignment.streams.len()];
    let mut waits = vec![Vec::new(); nodes.len()];
    let mut signals = vec![false; nodes.len()];
    let (mut fifo, mut implied, mut waited) = (0, 0, 0);
    let mut deps = Vec::new();
    for &node in graph.order() {
        let stream = assignment.stream_of[node];
        let mut known = stream_knows[stream];
        let own = point(node);
        known.insert_or_raise(own.axis, own.epoch);
        deps.clear();
        deps.extend_from_slice(&nodes[node].deps);
        deps.sort_unstable_by_key(|&d| std::cmp::Reverse(position[d]));
        for &dep in &deps {
            if assignment.stream_of[dep] == stream {
                fifo += 1;
            } else if known.knows(point(dep)) {
                implied += 1;
            } else {
                waited += 1;
                waits[node].push(dep);
                signals[dep] = true;
                known.merge(&knowledge[dep]);
            }
        }
        stream_knows[stream] = known;
        knowledge[node] = known;
    }
    let exact = knowledge.iter().all(|k| !k.is_tainted());
    let mut frontier_pairs = Vec::new();
    let mut frontier_starts = Vec::with_capacity(nodes.len() + 1);
    for known in &knowledge {
        frontier_starts.push(frontier_pairs.len());
        frontier_pairs.extend(known.iter().map(|p| (p.axis.ordinal() as StreamId, p.epoch)));
    }
    frontier_starts.push(frontier_pairs.len());
    Signals { waits, signals, fifo, implied, waited, exact, frontier_pairs, frontier_starts }
}

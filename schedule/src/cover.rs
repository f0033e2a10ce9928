//! Narrowing an assignment to the fewest streams a device allows.
//!
//! The greedy walk ([`crate::assign`]) can use more streams than needed on graphs that are not
//! series-parallel: walking one stream down a successor may take the node another chain
//! needed. The fewest streams a device can have is the number of chains that cover its nodes,
//! and by Dilworth's theorem that is the largest set of its nodes no two of which are ordered
//! (its *width*). This module reaches it without the transitive closure, as a minimum flow.
//!
//! The network is the graph itself: every node split into an entry and an exit joined by an
//! arc that must carry at least one unit if the node is on the device (nothing otherwise),
//! every dependency an arc, a source feeding every entry and every exit draining to a sink,
//! no upper bounds. A unit of flow is a path through the graph; the nodes of the device it
//! passes are comparable in order, so each path gives a chain, and paths may pass through nodes
//! other paths cover. The minimum flow is therefore the device's width.
//!
//! The greedy streams are the starting, feasible flow: one unit per stream, from its first node
//! to its last. Two nodes next to each other on a stream are ordered but not always joined by
//! an arc (a recycled stream jumps from its last node to a descendant), so each such pair gets
//! an arc of its own: it stands for a path that exists, and adding arcs that stand for the
//! order changes no chain cover. The flow is then lowered by Dinic's algorithm run from the
//! sink back to the source: each phase levels the residual network breadth first (backward
//! along arcs that carry more than their lower bound, forward along any arc), stopping at the
//! source's level, then gives up one unit per path that climbs one level a step, every arc
//! tried at most once per phase — linear in nodes and arcs. When the greedy streams are
//! already the fewest, one search that never reaches the source is all, and the greedy
//! assignment — with its preferences for ranks and commands — is kept. Otherwise the flow is
//! cut into paths, each node goes to the first path that passes it, and each path's nodes, in
//! its order, become a stream.

use std::collections::VecDeque;

use crate::graph::{DeviceId, Graph, NodeId};
use crate::streams::{Assignment, Stream};

/// `greedy`, or the same nodes on the fewest streams per device where the greedy walk used
/// more (see the module documentation).
pub fn narrow(graph: &Graph, greedy: Assignment) -> Assignment {
    let devices = graph.devices().len();
    let mut narrowed: Vec<Option<Vec<Vec<NodeId>>>> = vec![None; devices];
    for (device, narrowed) in narrowed.iter_mut().enumerate() {
        let streams: Vec<&Stream> = greedy.streams.iter().filter(|s| s.device == device).collect();
        if streams.len() > 1 {
            *narrowed = Network::new(graph, device, &streams).fewest_chains();
        }
    }
    if narrowed.iter().all(Option::is_none) {
        return greedy;
    }
    // Streams of a device the greedy walk already covered best keep their place and order;
    // a narrowed device's chains take the place of its first stream.
    let mut streams = Vec::new();
    for stream in greedy.streams {
        let device = stream.device;
        match &mut narrowed[device] {
            None => streams.push(stream),
            Some(chains) => {
                streams.extend(chains.drain(..).map(|nodes| Stream { device, nodes }));
            }
        }
    }
    let nodes = graph.nodes().len();
    let (mut stream_of, mut epoch_of) = (vec![0; nodes], vec![0; nodes]);
    let mut recycled = 0;
    for (id, stream) in streams.iter().enumerate() {
        for (at, &node) in stream.nodes.iter().enumerate() {
            stream_of[node] = id;
            epoch_of[node] = at as u64 + 1;
        }
        recycled += stream
            .nodes
            .windows(2)
            .filter(|pair| !graph.successors(pair[0]).contains(&pair[1]))
            .count();
    }
    Assignment { streams, stream_of, epoch_of, rank: greedy.rank, recycled }
}

/// The states of the residual network, as indices: node `n`'s entry is `2n`, its exit `2n + 1`,
/// then the source and the sink.
fn entry_state(node: NodeId) -> usize {
    2 * node
}

fn exit_state(node: NodeId) -> usize {
    2 * node + 1
}

fn source_state(nodes: usize) -> usize {
    2 * nodes
}

fn sink_state(nodes: usize) -> usize {
    2 * nodes + 1
}

/// A residual arc taken: the change to the flow it makes.
#[derive(Clone, Copy)]
enum Step {
    /// From the sink: one unit less from this node's exit to the sink.
    FromSink(NodeId),
    /// One unit more on this arc.
    Forward(usize),
    /// One unit less on this arc.
    Backward(usize),
    /// One unit more through this node.
    Through(NodeId),
    /// One unit less through this node.
    BackThrough(NodeId),
    /// One unit less from the source into this node's entry.
    ToSource(NodeId),
}

/// The flow network of one device (see the module documentation).
struct Network {
    from: Vec<NodeId>,
    to: Vec<NodeId>,
    flow: Vec<u32>,
    /// Arcs leaving each node's exit, and entering each node's entry (compressed rows).
    out_start: Vec<usize>,
    out_arcs: Vec<usize>,
    in_start: Vec<usize>,
    in_arcs: Vec<usize>,
    /// Units through each node, and whether the node must carry one (it is on the device).
    through: Vec<u32>,
    covered: Vec<bool>,
    source: Vec<u32>,
    sink: Vec<u32>,
    order: Vec<NodeId>,
    streams: usize,
}

impl Network {
    /// The network of `device`, carrying one unit along each of its greedy `streams`.
    fn new(graph: &Graph, device: DeviceId, streams: &[&Stream]) -> Network {
        let count = graph.nodes().len();
        let (mut from, mut to) = (Vec::new(), Vec::new());
        for (node, spec) in graph.nodes().iter().enumerate() {
            for &dep in &spec.deps {
                from.push(dep);
                to.push(node);
            }
        }
        let mut flow = vec![0; from.len()];
        let (mut through, mut source, mut sink) = (vec![0; count], vec![0; count], vec![0; count]);
        for stream in streams {
            let (Some(&first), Some(&last)) = (stream.nodes.first(), stream.nodes.last()) else {
                continue;
            };
            source[first] += 1;
            sink[last] += 1;
            stream.nodes.iter().for_each(|&n| through[n] += 1);
            for pair in stream.nodes.windows(2) {
                from.push(pair[0]);
                to.push(pair[1]);
                flow.push(1);
            }
        }
        let rows = |ends: &[NodeId]| {
            let mut start = vec![0; count + 1];
            ends.iter().for_each(|&n| start[n + 1] += 1);
            for n in 0..count {
                start[n + 1] += start[n];
            }
            let mut next = start.clone();
            let mut arcs = vec![0; ends.len()];
            for (arc, &n) in ends.iter().enumerate() {
                arcs[next[n]] = arc;
                next[n] += 1;
            }
            (start, arcs)
        };
        let (out_start, out_arcs) = rows(&from);
        let (in_start, in_arcs) = rows(&to);
        let covered = graph.nodes().iter().map(|n| n.device == device).collect();
        Network {
            from,
            to,
            flow,
            out_start,
            out_arcs,
            in_start,
            in_arcs,
            through,
            covered,
            source,
            sink,
            order: graph.order().to_vec(),
            streams: streams.len(),
        }
    }

    fn outgoing(&self, node: NodeId) -> &[usize] {
        &self.out_arcs[self.out_start[node]..self.out_start[node + 1]]
    }

    fn incoming(&self, node: NodeId) -> &[usize] {
        &self.in_arcs[self.in_start[node]..self.in_start[node + 1]]
    }

    /// Residual arc number `index` leaving `state` (see [`entry_state`]): `None` past the last,
    /// `Some(None)` for an arc with nothing left, else where it leads and what taking it
    /// changes.
    fn residual(&self, state: usize, index: usize) -> Option<Option<(usize, Step)>> {
        let count = self.through.len();
        if state == sink_state(count) {
            let node = index;
            return (node < count).then(|| {
                (self.sink[node] > 0).then_some((exit_state(node), Step::FromSink(node)))
            });
        }
        let node = state / 2;
        if state % 2 == 1 {
            // A node's exit: forward along any arc out of it, or back through the node while
            // it carries more than it must.
            let outgoing = self.outgoing(node);
            if let Some(&arc) = outgoing.get(index) {
                return Some(Some((entry_state(self.to[arc]), Step::Forward(arc))));
            }
            return (index == outgoing.len()).then(|| {
                let spare = self.through[node] > u32::from(self.covered[node]);
                spare.then_some((entry_state(node), Step::BackThrough(node)))
            });
        }
        // A node's entry: back to the source if it feeds this node, forward through the node,
        // or back along an arc into it that carries flow.
        match index {
            0 => {
                Some((self.source[node] > 0).then_some((source_state(count), Step::ToSource(node))))
            }
            1 => Some(Some((exit_state(node), Step::Through(node)))),
            _ => self.incoming(node).get(index - 2).map(|&arc| {
                (self.flow[arc] > 0).then_some((exit_state(self.from[arc]), Step::Backward(arc)))
            }),
        }
    }

    fn take(&mut self, step: Step) {
        match step {
            Step::FromSink(node) => self.sink[node] -= 1,
            Step::Forward(arc) => self.flow[arc] += 1,
            Step::Backward(arc) => self.flow[arc] -= 1,
            Step::Through(node) => self.through[node] += 1,
            Step::BackThrough(node) => self.through[node] -= 1,
            Step::ToSource(node) => self.source[node] -= 1,
        }
    }

    /// One phase of Dinic's algorithm, from the sink back to the source: a breadth-first
    /// search levels the residual network, then paths that climb one level per step give up
    /// one unit each until none is left, every arc tried at most once per phase (a pointer per
    /// state only moves forward). Returns the units given up; 0 when the flow is minimal.
    fn phase(&mut self) -> usize {
        let count = self.through.len();
        let states = 2 * count + 2;
        let (source, sink) = (source_state(count), sink_state(count));
        let mut level = vec![u32::MAX; states];
        level[sink] = 0;
        let mut queue = VecDeque::from([sink]);
        while let Some(state) = queue.pop_front() {
            if state == source {
                // Breadth first: every state as close as the source is levelled already, and
                // the paths of this phase go no further.
                break;
            }
            let mut index = 0;
            while let Some(arc) = self.residual(state, index) {
                index += 1;
                if let Some((next, _)) = arc {
                    if level[next] == u32::MAX {
                        level[next] = level[state] + 1;
                        queue.push_back(next);
                    }
                }
            }
        }
        if level[source] == u32::MAX {
            return 0;
        }
        let mut pointer = vec![0usize; states];
        let mut path: Vec<(usize, Step)> = Vec::new();
        let mut removed = 0;
        let mut at = sink;
        loop {
            if at == source {
                for (_, step) in std::mem::take(&mut path) {
                    self.take(step);
                }
                removed += 1;
                at = sink;
                continue;
            }
            let mut advanced = false;
            while let Some(arc) = self.residual(at, pointer[at]) {
                if let Some((next, step)) = arc {
                    if level[next] == level[at] + 1
                        && (next == source || level[next] <= level[source])
                    {
                        path.push((at, step));
                        at = next;
                        advanced = true;
                        break;
                    }
                }
                pointer[at] += 1;
            }
            if advanced {
                continue;
            }
            // A dead end: nothing from here reaches the source this phase.
            level[at] = u32::MAX;
            match path.pop() {
                Some((previous, _)) => {
                    at = previous;
                    pointer[at] += 1;
                }
                None => return removed,
            }
        }
    }

    /// The device's nodes on the fewest chains, or `None` when the greedy streams already are.
    fn fewest_chains(mut self) -> Option<Vec<Vec<NodeId>>> {
        let mut removed = 0;
        loop {
            match self.phase() {
                0 => break,
                units => removed += units,
            }
        }
        if removed == 0 {
            return None;
        }
        debug_assert_eq!(self.source.iter().sum::<u32>() as usize, self.streams - removed);
        // Cut the flow into paths, each from the source to the sink; every node goes to the
        // first path through it. Each arc's unused units are found from a cursor that only
        // moves forward, so cutting costs the total flow.
        let count = self.through.len();
        let mut cursor: Vec<usize> = self.out_start[..count].to_vec();
        let mut placed = vec![false; count];
        let mut chains = Vec::new();
        for index in 0..self.order.len() {
            let first = self.order[index];
            while self.source[first] > 0 {
                self.source[first] -= 1;
                let mut chain = Vec::new();
                let mut node = first;
                loop {
                    if self.covered[node] && !placed[node] {
                        placed[node] = true;
                        chain.push(node);
                    }
                    if self.sink[node] > 0 {
                        self.sink[node] -= 1;
                        break;
                    }
                    let end = self.out_start[node + 1];
                    while cursor[node] < end && self.flow[self.out_arcs[cursor[node]]] == 0 {
                        cursor[node] += 1;
                    }
                    if cursor[node] == end {
                        // Conservation says flow that enters a node leaves it; were it ever
                        // broken, the check below keeps the greedy streams.
                        break;
                    }
                    let arc = self.out_arcs[cursor[node]];
                    self.flow[arc] -= 1;
                    node = self.to[arc];
                }
                if !chain.is_empty() {
                    chains.push(chain);
                }
            }
        }
        let complete = (0..count).all(|node| placed[node] || !self.covered[node]);
        complete.then_some(chains)
    }
}

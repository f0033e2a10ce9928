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
//! order changes no chain cover. Each search for a path from sink back to source in the
//! residual network (backward along arcs that carry more than their lower bound, forward along
//! any arc) takes one unit away; it is a breadth-first search, linear in nodes and arcs, and
//! there is one per stream too many, plus the one that finds none. When the greedy streams are
//! already the fewest, that one search is all, and the greedy assignment — with its
//! preferences for ranks and commands — is kept. Otherwise the flow is cut into paths, each
//! node goes to the first path that passes it, and each path's nodes, in its order, become a
//! stream.

use std::collections::VecDeque;

use crate::assign::{Assignment, Stream};
use crate::graph::{DeviceId, Graph, NodeId};

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

/// A state of the residual network's search: a node's entry or exit, or the source.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Vertex {
    Entry(NodeId),
    Exit(NodeId),
}

/// How the search reached a vertex: the change to make when the path is taken.
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

    /// Finds a path from the sink back to the source in the residual network and takes one
    /// unit along it; `false` when there is none (the flow is minimal).
    fn reduce(&mut self) -> bool {
        let count = self.through.len();
        // Per node, how its entry and its exit were reached (None: not yet).
        let mut entry: Vec<Option<Step>> = vec![None; count];
        let mut exit: Vec<Option<Step>> = vec![None; count];
        let mut queue = VecDeque::new();
        for (node, exit) in exit.iter_mut().enumerate().filter(|(n, _)| self.sink[*n] > 0) {
            *exit = Some(Step::FromSink(node));
            queue.push_back(Vertex::Exit(node));
        }
        let mut reached_source = None;
        while let Some(vertex) = queue.pop_front() {
            match vertex {
                Vertex::Exit(node) => {
                    for &arc in self.outgoing(node) {
                        let next = self.to[arc];
                        if entry[next].is_none() {
                            entry[next] = Some(Step::Forward(arc));
                            queue.push_back(Vertex::Entry(next));
                        }
                    }
                    let spare = self.through[node] > u32::from(self.covered[node]);
                    if spare && entry[node].is_none() {
                        entry[node] = Some(Step::BackThrough(node));
                        queue.push_back(Vertex::Entry(node));
                    }
                }
                Vertex::Entry(node) => {
                    if self.source[node] > 0 {
                        reached_source = Some(node);
                        break;
                    }
                    if exit[node].is_none() {
                        exit[node] = Some(Step::Through(node));
                        queue.push_back(Vertex::Exit(node));
                    }
                    for &arc in self.incoming(node) {
                        let previous = self.from[arc];
                        if self.flow[arc] > 0 && exit[previous].is_none() {
                            exit[previous] = Some(Step::Backward(arc));
                            queue.push_back(Vertex::Exit(previous));
                        }
                    }
                }
            }
        }
        let Some(start) = reached_source else { return false };
        // Walk back from the source to the sink, changing the flow along the way.
        self.source[start] -= 1;
        let mut at = Vertex::Entry(start);
        loop {
            let step = match at {
                Vertex::Entry(node) => entry[node],
                Vertex::Exit(node) => exit[node],
            };
            match step.expect("every vertex on the path was reached") {
                Step::FromSink(node) => {
                    self.sink[node] -= 1;
                    return true;
                }
                Step::Forward(arc) => {
                    self.flow[arc] += 1;
                    at = Vertex::Exit(self.from[arc]);
                }
                Step::Backward(arc) => {
                    self.flow[arc] -= 1;
                    at = Vertex::Entry(self.to[arc]);
                }
                Step::Through(node) => {
                    self.through[node] += 1;
                    at = Vertex::Entry(node);
                }
                Step::BackThrough(node) => {
                    self.through[node] -= 1;
                    at = Vertex::Exit(node);
                }
            }
        }
    }

    /// The device's nodes on the fewest chains, or `None` when the greedy streams already are.
    fn fewest_chains(mut self) -> Option<Vec<Vec<NodeId>>> {
        let mut removed = 0;
        while self.reduce() {
            removed += 1;
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

//! Assigning nodes to streams.
//!
//! Every node gets a *rank*: the number of nodes on the longest chain that follows it (0 for a
//! node nothing depends on). The nodes are then visited in topological order. A node that has
//! no stream yet opens one — a *recycled* stream when one of its device is certainly finished
//! before the node starts (the stream's last node is among the node's ancestors), else a new
//! one — and walks it forward: the stream takes the highest-ranked successor that has no
//! stream yet, then that node's, and so on until none is left.
//!
//! Ties go to the node whose command this stream has already run (it can share that command's
//! context and workspace), then to the node with fewer dependencies (a node many others feed
//! is easier for one of their streams to pick up later), then to the earlier node. Recycling
//! prefers, likewise, a stream that has run the node's command, then the earliest stream.
//!
//! "Certainly finished" is decided with frontiers: each node's reachability frontier holds,
//! for every stream, the last node on it among the node's ancestors (a stream is a chain, so
//! that one entry stands for all of them). A stream is recyclable for a node when the node's
//! frontier has reached the stream's last node. The frontiers have a fixed capacity; when a
//! graph needs more streams than that, the assignment starts again with a larger capacity, and
//! past the largest a frontier that forgets entries only recycles less, never wrongly.
//!
//! The walk is greedy: on graphs that are not series-parallel it can take a node another chain
//! needed and end with more streams than the device's width. [`assign`] therefore hands its
//! result to [`crate::cover::narrow`], which keeps it when it is already the fewest streams and
//! otherwise replaces a device's streams by a minimum chain cover.

use causeway_core::axis::{Axis, Domain};
use causeway_core::frontier::Frontier;

use crate::graph::{CommandId, DeviceId, Graph, NodeId};
pub use crate::streams::{Assignment, Stream, StreamId};

/// The axis standing for stream `stream` in schedule-time frontiers.
pub fn stream_axis(stream: StreamId) -> Axis {
    Axis::new(0, Domain::Queue, stream as u64)
}

/// Each node's rank: nodes on the longest chain that follows it.
pub fn ranks(graph: &Graph) -> Vec<u32> {
    let mut rank = vec![0u32; graph.nodes().len()];
    for &node in graph.order().iter().rev() {
        rank[node] = graph.successors(node).iter().map(|&s| rank[s] + 1).max().unwrap_or(0);
    }
    rank
}

/// Assigns every node of `graph` to a stream (see the module documentation), then narrows
/// the assignment to the fewest streams each device allows ([`crate::cover`]).
pub fn assign(graph: &Graph) -> Assignment {
    crate::cover::narrow(graph, walk(graph))
}

/// The greedy walk alone.
fn walk(graph: &Graph) -> Assignment {
    let rank = ranks(graph);
    // Most graphs fit the small frontiers; a wider one is assigned again with more room.
    let (assignment, exact) = assign_with::<8>(graph, &rank);
    if exact {
        return assignment;
    }
    let (assignment, exact) = assign_with::<16>(graph, &rank);
    if exact {
        return assignment;
    }
    let (assignment, exact) = assign_with::<32>(graph, &rank);
    if exact {
        return assignment;
    }
    assign_with::<64>(graph, &rank).0
}

/// What the assignment keeps per stream while it runs.
struct Open {
    device: DeviceId,
    nodes: Vec<NodeId>,
    /// Commands this stream has run, sorted.
    commands: Vec<CommandId>,
}

impl Open {
    fn has_run(&self, command: CommandId) -> bool {
        self.commands.binary_search(&command).is_ok()
    }

    fn push(&mut self, node: NodeId, command: CommandId) -> u64 {
        self.nodes.push(node);
        if let Err(at) = self.commands.binary_search(&command) {
            self.commands.insert(at, command);
        }
        self.nodes.len() as u64
    }
}

/// The assignment with frontiers of capacity `N`, and whether no frontier overflowed (one
/// that did only made the assignment recycle less).
fn assign_with<const N: usize>(graph: &Graph, rank: &[u32]) -> (Assignment, bool) {
    const UNASSIGNED: StreamId = StreamId::MAX;
    let nodes = graph.nodes();
    let mut stream_of = vec![UNASSIGNED; nodes.len()];
    let mut epoch_of = vec![0u64; nodes.len()];
    let mut reach: Vec<Frontier<N>> = vec![Frontier::new(); nodes.len()];
    let mut streams: Vec<Open> = Vec::new();
    let mut recycled = 0;
    let mut exact = true;
    for &node in graph.order() {
        let mut known = Frontier::<N>::new();
        for &dep in &nodes[node].deps {
            known.merge(&reach[dep]);
        }
        if stream_of[node] == UNASSIGNED {
            let command = nodes[node].command;
            // Only a stream the node's frontier names can be known finished: look at those
            // entries alone, so the search costs the frontier's size, not the stream count.
            let mut reuse: Option<StreamId> = None;
            for point in known.iter() {
                let id = point.axis.ordinal() as StreamId;
                let open = &streams[id];
                let finished =
                    open.device == nodes[node].device && point.epoch == open.nodes.len() as u64;
                let better = match reuse {
                    None => true,
                    Some(r) => !streams[r].has_run(command) && open.has_run(command),
                };
                if finished && better {
                    reuse = Some(id);
                }
            }
            let stream = match reuse {
                Some(stream) => {
                    recycled += 1;
                    stream
                }
                None => {
                    let device = nodes[node].device;
                    streams.push(Open { device, nodes: Vec::new(), commands: Vec::new() });
                    streams.len() - 1
                }
            };
            let open = &mut streams[stream];
            let mut at = node;
            loop {
                stream_of[at] = stream;
                epoch_of[at] = open.push(at, nodes[at].command);
                let next = graph
                    .successors(at)
                    .iter()
                    .copied()
                    .filter(|&s| stream_of[s] == UNASSIGNED && nodes[s].device == open.device)
                    .max_by_key(|&s| {
                        let seen = open.has_run(nodes[s].command);
                        (
                            rank[s],
                            seen,
                            std::cmp::Reverse(nodes[s].deps.len()),
                            std::cmp::Reverse(s),
                        )
                    });
                match next {
                    Some(next) => at = next,
                    None => break,
                }
            }
        }
        known.insert_or_raise(stream_axis(stream_of[node]), epoch_of[node]);
        exact &= !known.is_tainted();
        reach[node] = known;
    }
    let streams =
        streams.into_iter().map(|s| Stream { device: s.device, nodes: s.nodes }).collect();
    (Assignment { streams, stream_of, epoch_of, rank: rank.to_vec(), recycled }, exact)
}

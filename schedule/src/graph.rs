//! The graph a schedule is made for: named nodes, each a command on a device, with the nodes
//! it depends on.
//!
//! A node may span several devices (a transfer between two of them, say). A stream belongs to
//! one device, so such a node is split when the graph is built: the node itself stays on its
//! first device, and each further device gets a *part* (`name@device`) with the node's
//! dependencies; the node depends on its parts, so whatever depends on the node runs after
//! every part. Building checks every reference and rejects cycles, naming the nodes on one.

use std::collections::HashMap;
use std::fmt;

/// Index of a node in its [`Graph`] (the order the specs were given in; parts follow).
pub type NodeId = usize;

/// Index of a device in its [`Graph`].
pub type DeviceId = usize;

/// Index of a command name in its [`Graph`]: nodes running the same command share one.
pub type CommandId = usize;

/// One node as described by its author, before the graph is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// What it runs (nodes running the same command can share a stream's context).
    pub command: String,
    /// The devices it runs on, its home first; at least one.
    pub devices: Vec<DeviceId>,
    /// The nodes it depends on, as indices into the spec list.
    pub deps: Vec<NodeId>,
    /// How long its work takes, in microseconds (0: nothing to do but order).
    pub work_us: u32,
}

/// A node of a built graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Unique name (parts are named `node@device`).
    pub name: String,
    /// What it runs.
    pub command: CommandId,
    /// The one device it runs on.
    pub device: DeviceId,
    /// The nodes it depends on.
    pub deps: Vec<NodeId>,
    /// For a part of a node that spans devices, that node.
    pub part_of: Option<NodeId>,
    /// How long its work takes, in microseconds.
    pub work_us: u32,
}

/// Why a graph could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphError {
    /// The dependencies go round: the spec indices of the nodes on one cycle, each depending
    /// on the one before it (and the first on the last).
    Cycle(Vec<NodeId>),
    /// Node `node` depends on an index that names no node.
    UnknownDependency {
        /// The node (spec index).
        node: NodeId,
        /// The index it names.
        dependency: NodeId,
    },
    /// Node `node` names a device index that names no device.
    UnknownDevice {
        /// The node (spec index).
        node: NodeId,
        /// The index it names.
        device: DeviceId,
    },
    /// Node `node` names no device at all.
    NoDevice {
        /// The node (spec index).
        node: NodeId,
    },
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphError::Cycle(nodes) => {
                write!(f, "the dependencies of nodes {nodes:?} form a cycle")
            }
            GraphError::UnknownDependency { node, dependency } => {
                write!(f, "node {node} depends on node {dependency}, which does not exist")
            }
            GraphError::UnknownDevice { node, device } => {
                write!(f, "node {node} runs on device {device}, which does not exist")
            }
            GraphError::NoDevice { node } => write!(f, "node {node} names no device"),
        }
    }
}

impl std::error::Error for GraphError {}

/// A checked, acyclic graph with its successor lists and one topological order.
#[derive(Clone, Debug)]
pub struct Graph {
    devices: Vec<String>,
    commands: Vec<String>,
    nodes: Vec<Node>,
    successors: Vec<Vec<NodeId>>,
    order: Vec<NodeId>,
}

impl Graph {
    /// Builds the graph of `specs` on `devices`: checks every reference, splits nodes that
    /// span devices into parts, and orders the nodes topologically (a cycle is an error that
    /// names its nodes). Linear in nodes and edges.
    pub fn new(devices: Vec<String>, specs: Vec<NodeSpec>) -> Result<Graph, GraphError> {
        let count = specs.len();
        for (index, spec) in specs.iter().enumerate() {
            if spec.devices.is_empty() {
                return Err(GraphError::NoDevice { node: index });
            }
            if let Some(&device) = spec.devices.iter().find(|&&d| d >= devices.len()) {
                return Err(GraphError::UnknownDevice { node: index, device });
            }
            if let Some(&dependency) = spec.deps.iter().find(|&&d| d >= count) {
                return Err(GraphError::UnknownDependency { node: index, dependency });
            }
        }
        let mut command_ids: HashMap<String, CommandId> = HashMap::new();
        let mut commands = Vec::new();
        let mut nodes = Vec::with_capacity(count);
        let mut parts = Vec::new();
        for (index, spec) in specs.into_iter().enumerate() {
            let next = commands.len();
            let command = *command_ids.entry(spec.command.clone()).or_insert(next);
            if command == next {
                commands.push(spec.command);
            }
            let mut deps = spec.deps;
            for &device in &spec.devices[1..] {
                deps.push(count + parts.len());
                parts.push(Node {
                    name: format!("{}@{}", spec.name, devices[device]),
                    command,
                    device,
                    deps: Vec::new(),
                    part_of: Some(index),
                    work_us: spec.work_us,
                });
            }
            nodes.push(Node {
                name: spec.name,
                command,
                device: spec.devices[0],
                deps,
                part_of: None,
                work_us: spec.work_us,
            });
        }
        for part in &mut parts {
            let whole = part.part_of.unwrap_or_default();
            part.deps = nodes[whole].deps.iter().copied().filter(|&d| d < count).collect();
        }
        nodes.extend(parts);
        let mut successors = vec![Vec::new(); nodes.len()];
        for (index, node) in nodes.iter().enumerate() {
            for &dep in &node.deps {
                successors[dep].push(index);
            }
        }
        let order = topological_order(&nodes, &successors)
            .map_err(|stuck| GraphError::Cycle(cycle_among(&nodes, &stuck)))?;
        Ok(Graph { devices, commands, nodes, successors, order })
    }

    /// The devices, by index.
    pub fn devices(&self) -> &[String] {
        &self.devices
    }

    /// The command names, by [`CommandId`].
    pub fn commands(&self) -> &[String] {
        &self.commands
    }

    /// The nodes, by [`NodeId`] (parts after every node given).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The nodes that depend on `node`.
    pub fn successors(&self, node: NodeId) -> &[NodeId] {
        &self.successors[node]
    }

    /// Every node, each after all it depends on.
    pub fn order(&self) -> &[NodeId] {
        &self.order
    }

    /// The number of dependency edges.
    pub fn edge_count(&self) -> usize {
        self.nodes.iter().map(|n| n.deps.len()).sum()
    }
}

/// Kahn's algorithm; on a cycle, the nodes that could not be ordered.
fn topological_order(nodes: &[Node], successors: &[Vec<NodeId>]) -> Result<Vec<NodeId>, Vec<bool>> {
    let mut waiting: Vec<usize> = nodes.iter().map(|n| n.deps.len()).collect();
    let mut order: Vec<NodeId> = (0..nodes.len()).filter(|&n| waiting[n] == 0).collect();
    let mut next = 0;
    while next < order.len() {
        let node = order[next];
        next += 1;
        for &successor in &successors[node] {
            waiting[successor] -= 1;
            if waiting[successor] == 0 {
                order.push(successor);
            }
        }
    }
    if order.len() == nodes.len() {
        Ok(order)
    } else {
        Err(waiting.iter().map(|&w| w > 0).collect())
    }
}

/// One cycle among the `stuck` nodes (those Kahn's algorithm could not order): each stuck node
/// has a stuck dependency, so walking dependencies from any of them must come back round.
fn cycle_among(nodes: &[Node], stuck: &[bool]) -> Vec<NodeId> {
    let mut seen_at = vec![usize::MAX; nodes.len()];
    let mut walk = Vec::new();
    let mut node = stuck.iter().position(|&s| s).unwrap_or_default();
    while seen_at[node] == usize::MAX {
        seen_at[node] = walk.len();
        walk.push(node);
        match nodes[node].deps.iter().find(|&&d| stuck[d]) {
            Some(&dep) => node = dep,
            None => break,
        }
    }
    let mut cycle = walk.split_off(seen_at[node].min(walk.len()));
    // The walk followed dependencies backwards; report each node after the one it depends on.
    cycle.reverse();
    // A part depends only on its node's dependencies, so a cycle through a part also passes
    // through its node: report the node the author named.
    cycle.iter_mut().for_each(|n| *n = nodes[*n].part_of.unwrap_or(*n));
    cycle.dedup();
    // Start at the node given first, so the same cycle is always reported the same way.
    let first = cycle.iter().enumerate().min_by_key(|&(_, &n)| n).map_or(0, |(at, _)| at);
    cycle.rotate_left(first);
    cycle
}

//! # causeway-schedule
//!
//! Static scheduling of a known graph onto streams, so that independent commands run side by
//! side with as few signals as possible.
//!
//! 1. [`graph`] — the graph: nodes, each a command on a device, and their dependencies; nodes
//!    that span devices are split into one part per device; cycles are rejected by name.
//! 2. [`assign`] — each node's rank (the longest chain that follows it), then streams opened
//!    in topological order and walked down the highest-ranked successor, recycling a stream
//!    that is certainly finished, ties broken by the command a stream has already run.
//!    What it produces — the [`Stream`]s and each node's place on them, an [`Assignment`] —
//!    is defined on its own (`streams`), for the next step builds one too.
//! 3. [`cover`] — where the walk used more streams than a device needs, the fewest: a
//!    minimum chain cover per device (its width, by Dilworth's theorem), found as a minimum
//!    flow through the graph itself, starting from the walk's streams.
//! 4. [`signals`] — a wait only for a cross-stream edge that neither stream order nor another
//!    wait already implies, decided with causeway's frontiers at schedule time: the same
//!    knowledge the runtime will have when the schedule runs.
//! 5. [`control`] — graphs with loops and branches: a [`Program`] whose `while` and `case`
//!    nodes each stand for a body graph of their own, with the integer counters their
//!    conditions read and nodes update. What they are and how a condition decides.
//! 6. `run` (the `run` feature) — running them: loops and branches as coroutine processes on
//!    a device with CPU queues, every dependency checked as the nodes finish.
//!
//! Without the `run` feature everything here is plain data code over core alone: no threads,
//! no devices. The feature adds the device layer, the runtime and the CPU driver, for `run`
//! only. Scheduling grows linearly with nodes and edges (times the frontier capacity, at
//! most 64).
//!
//! In the guide: `docs/src/scheduling.md` in the repository.

pub mod assign;
pub mod control;
pub mod cover;
pub mod graph;
#[cfg(feature = "run")]
pub mod run;
pub mod signals;
mod streams;

pub use assign::{Assignment, Stream, StreamId};
pub use control::Program;
pub use graph::{Graph, GraphError, Node, NodeId, NodeSpec};
pub use signals::Signals;

/// A graph's schedule: where each node runs and which edges are signalled.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The streams and each node's place on them.
    pub assignment: Assignment,
    /// The waits and signals that order every edge.
    pub signals: Signals,
}

/// Schedules `graph`: assigns streams, then decides the signals.
pub fn schedule(graph: &Graph) -> Schedule {
    let assignment = assign::assign(graph);
    let signals = signals::minimise(graph, &assignment);
    Schedule { assignment, signals }
}

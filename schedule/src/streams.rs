//! Streams and where every node runs on them: the result of an assignment.
//!
//! Both steps that build one share these types — the greedy walk ([`crate::assign`]) and the
//! narrowing to the fewest streams ([`crate::cover`]) — and [`crate::signals`] reads them; they
//! are re-exported from [`crate::assign`] and the crate root.

use crate::graph::{DeviceId, NodeId};

/// Index of a stream in an [`Assignment`].
pub type StreamId = usize;

/// One stream: a device and the nodes it runs, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// The device it belongs to.
    pub device: DeviceId,
    /// Its nodes, in the order they run.
    pub nodes: Vec<NodeId>,
}

/// Where every node runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The streams.
    pub streams: Vec<Stream>,
    /// Each node's stream.
    pub stream_of: Vec<StreamId>,
    /// Each node's position on its stream, from 1 (its epoch on the stream's axis).
    pub epoch_of: Vec<u64>,
    /// Each node's rank: the length of the longest chain following it.
    pub rank: Vec<u32>,
    /// How many times a stream was recycled for a new chain.
    pub recycled: usize,
}

//! Schedules one operator-like graph of the given size once, for instruction counts under
//! callgrind (load-independent, unlike wall time on a shared machine):
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='causeway_schedule::graph::Graph::new' \
//!     --toggle-collect='causeway_schedule::schedule' target/release/examples/growth 100000
//! ```
//!
//! The graph is the bench's (`benches/blocks/mod.rs`): chains of fork-join blocks over eight
//! commands. The two toggles count the bench's whole job (building the graph and scheduling
//! it), not generating the node list. Prints the node count, the streams and the waits, so the run is checked to have
//! done the work.

use causeway_schedule::{schedule, Graph};

#[path = "../benches/blocks/mod.rs"]
mod blocks;

use blocks::blocks;

fn main() {
    let count: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let graph =
        Graph::new(vec!["gpu".into()], blocks(count)).expect("the generated graph is acyclic");
    let result = schedule(&graph);
    println!(
        "{count} nodes: {} streams, {} waits",
        result.assignment.streams.len(),
        result.signals.waited
    );
}

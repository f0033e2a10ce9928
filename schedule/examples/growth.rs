//! Schedules one operator-like graph of the given size once, for instruction counts under
//! callgrind (load-independent, unlike wall time on a shared machine):
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='causeway_schedule::graph::Graph::new' \
//!     --toggle-collect='causeway_schedule::schedule' target/release/examples/growth 100000
//! ```
//!
//! The graph is the bench's (`benches/blocks/mod.rs`): chains of fork-join blocks over eight
//! commands; with a second argument `random`, a random DAG whose width grows with it (where
//! the greedy walk opens thousands of streams too many and the narrowing does real work). The two toggles count the bench's whole job (building the graph and scheduling
//! it), not generating the node list. Prints the node count, the streams and the waits, so the run is checked to have
//! done the work.

use causeway_schedule::{schedule, Graph, NodeSpec};

#[path = "../benches/blocks/mod.rs"]
mod blocks;

use blocks::blocks;

/// A random DAG whose width grows with it: node `i` depends on one to three of the six nodes
/// before it (about one node in eight is on no longer chain than its neighbours, so the width
/// is in the thousands at 10^5 nodes and the walk opens far more streams than that).
fn random(count: usize) -> Vec<NodeSpec> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    (0..count)
        .map(|index| {
            let mut deps = Vec::new();
            for _ in 0..if index > 0 { 1 + next(3) } else { 0 } {
                let dep = index - 1 - next(index.min(6));
                if !deps.contains(&dep) {
                    deps.push(dep);
                }
            }
            let command = format!("c{}", next(3));
            NodeSpec { name: format!("n{index}"), command, devices: vec![0], deps, work_us: 0 }
        })
        .collect()
}

fn main() {
    let count: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let specs = match std::env::args().nth(2).as_deref() {
        Some("random") => random(count),
        _ => blocks(count),
    };
    let graph = Graph::new(vec!["gpu".into()], specs).expect("the generated graph is acyclic");
    let result = schedule(&graph);
    println!(
        "{count} nodes: {} streams, {} waits",
        result.assignment.streams.len(),
        result.signals.waited
    );
}

//! The operator-like graph the bench and `examples/growth.rs` schedule.

use causeway_schedule::NodeSpec;

/// A deterministic operator-like graph of `count` nodes on one device: blocks that fan out
/// into two to six branches of one to three nodes (a branch node now and then also reads a
/// node of an earlier branch of its block) and join again, one block after another.
pub fn blocks(count: usize) -> Vec<NodeSpec> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    let mut specs: Vec<NodeSpec> = Vec::with_capacity(count + 32);
    let push = |specs: &mut Vec<NodeSpec>, deps: Vec<usize>, command: usize| {
        let name = format!("n{}", specs.len());
        let command = format!("op{command}");
        specs.push(NodeSpec { name, command, devices: vec![0], deps, work_us: 0 });
        specs.len() - 1
    };
    let mut head = push(&mut specs, Vec::new(), 0);
    while specs.len() < count {
        let block_start = specs.len();
        let mut ends = Vec::new();
        for _ in 0..2 + next(5) {
            let mut at = head;
            for _ in 0..1 + next(3) {
                let mut deps = vec![at];
                if specs.len() > block_start && next(4) == 0 {
                    let other = block_start + next(specs.len() - block_start);
                    if other != at {
                        deps.push(other);
                    }
                }
                at = push(&mut specs, deps, next(8));
            }
            ends.push(at);
        }
        head = push(&mut specs, ends, 0);
    }
    // Dependencies only point back, so the first `count` nodes are a graph of their own.
    specs.truncate(count);
    specs
}

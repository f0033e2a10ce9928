//! Property tests of the schedule on random DAGs of up to 10^3 nodes, against a plain model:
//! the transitive closure as bit sets, the graph's width (its largest antichain) computed
//! exactly by Dilworth's theorem — the nodes minus a maximum matching of the comparability
//! bipartite graph (Hopcroft–Karp) — and the transitive reduction read off the closure.

use std::collections::VecDeque;

use causeway_schedule::{schedule, Graph, GraphError, NodeSpec, Schedule};
use proptest::prelude::*;

/// Bit-set rows: `rows[a]` holds every node reachable from `a` by one or more edges.
struct Closure {
    rows: Vec<Vec<u64>>,
}

impl Closure {
    /// The closure of the relation `edges` (pairs `(from, to)`), given a topological order.
    fn of(count: usize, order: &[usize], edges: &[(usize, usize)]) -> Closure {
        let words = count.div_ceil(64);
        let mut successors = vec![Vec::new(); count];
        for &(from, to) in edges {
            successors[from].push(to);
        }
        let mut rows = vec![vec![0u64; words]; count];
        for &node in order.iter().rev() {
            let mut row = vec![0u64; words];
            for &s in &successors[node] {
                row[s / 64] |= 1 << (s % 64);
                for (word, bits) in row.iter_mut().zip(&rows[s]) {
                    *word |= bits;
                }
            }
            rows[node] = row;
        }
        Closure { rows }
    }

    fn reaches(&self, from: usize, to: usize) -> bool {
        self.rows[from][to / 64] & (1 << (to % 64)) != 0
    }

    /// The size of the largest antichain: nodes minus a maximum matching between "left" and
    /// "right" copies of the nodes, with an edge wherever one reaches the other.
    fn width(&self) -> usize {
        let all: Vec<usize> = (0..self.rows.len()).collect();
        self.width_of(&all)
    }

    /// The size of the largest antichain among `nodes` (ordered as in the whole graph).
    fn width_of(&self, nodes: &[usize]) -> usize {
        let adjacency: Vec<Vec<usize>> = nodes
            .iter()
            .map(|&a| (0..nodes.len()).filter(|&b| self.reaches(a, nodes[b])).collect())
            .collect();
        nodes.len() - hopcroft_karp(&adjacency, nodes.len())
    }
}

fn hopcroft_karp(adjacency: &[Vec<usize>], right: usize) -> usize {
    const FREE: usize = usize::MAX;
    let left = adjacency.len();
    let (mut match_left, mut match_right) = (vec![FREE; left], vec![FREE; right]);
    let mut matched = 0;
    loop {
        let mut distance = vec![usize::MAX; left];
        let mut queue: VecDeque<usize> = (0..left).filter(|&u| match_left[u] == FREE).collect();
        queue.iter().for_each(|&u| distance[u] = 0);
        let mut found = false;
        while let Some(u) = queue.pop_front() {
            for &v in &adjacency[u] {
                match match_right[v] {
                    FREE => found = true,
                    w if distance[w] == usize::MAX => {
                        distance[w] = distance[u] + 1;
                        queue.push_back(w);
                    }
                    _ => {}
                }
            }
        }
        if !found {
            return matched;
        }
        fn augment(
            u: usize,
            adjacency: &[Vec<usize>],
            distance: &mut [usize],
            match_left: &mut [usize],
            match_right: &mut [usize],
        ) -> bool {
            for &v in &adjacency[u] {
                let w = match_right[v];
                let next = w == usize::MAX
                    || (distance[w] == distance[u] + 1
                        && augment(w, adjacency, distance, match_left, match_right));
                if next {
                    match_left[u] = v;
                    match_right[v] = u;
                    return true;
                }
            }
            distance[u] = usize::MAX;
            false
        }
        for u in 0..left {
            if match_left[u] == FREE
                && augment(u, adjacency, &mut distance, &mut match_left, &mut match_right)
            {
                matched += 1;
            }
        }
    }
}

/// A random DAG: node `i` (but the first) depends on one to three of the `window` nodes
/// before it.
fn dag(max_nodes: usize, window: usize, devices: usize) -> impl Strategy<Value = Vec<NodeSpec>> {
    (1..=max_nodes, any::<u64>()).prop_map(move |(count, seed)| {
        let mut state = seed | 1;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        (0..count)
            .map(|index| {
                let mut deps = Vec::new();
                if index > 0 {
                    for _ in 0..1 + next(3) {
                        let dep = index - 1 - next(index.min(window));
                        if !deps.contains(&dep) {
                            deps.push(dep);
                        }
                    }
                }
                let mut on = vec![next(devices)];
                if devices > 1 && next(8) == 0 {
                    on.push((on[0] + 1) % devices);
                }
                NodeSpec {
                    name: format!("n{index}"),
                    command: format!("c{}", next(3)),
                    devices: on,
                    deps,
                    work_us: 0,
                }
            })
            .collect()
    })
}

fn build(specs: Vec<NodeSpec>, devices: usize) -> Graph {
    let names = (0..devices).map(|d| format!("d{d}")).collect();
    Graph::new(names, specs).expect("the generator makes DAGs")
}

fn graph_edges(graph: &Graph) -> Vec<(usize, usize)> {
    let nodes = graph.nodes().iter().enumerate();
    nodes.flat_map(|(n, node)| node.deps.iter().map(move |&d| (d, n))).collect()
}

/// Checks what holds for every schedule: each node on one stream of its device, each stream a
/// chain of the graph's order, every edge ordered by stream order and waits alone, each node's
/// frontier knowing each dependency, signals exactly where waits are.
fn check_sound(graph: &Graph, schedule: &Schedule, closure: &Closure) {
    let nodes = graph.nodes();
    let assignment = &schedule.assignment;
    let mut seen = vec![false; nodes.len()];
    let mut ordering = Vec::new();
    for (id, stream) in assignment.streams.iter().enumerate() {
        for (at, &node) in stream.nodes.iter().enumerate() {
            assert!(!seen[node], "node {node} on two streams");
            seen[node] = true;
            assert_eq!(assignment.stream_of[node], id);
            assert_eq!(assignment.epoch_of[node], at as u64 + 1);
            assert_eq!(nodes[node].device, stream.device, "node {node} on another device's stream");
        }
        for pair in stream.nodes.windows(2) {
            assert!(closure.reaches(pair[0], pair[1]), "stream {id} runs {pair:?} out of order");
            ordering.push((pair[0], pair[1]));
        }
    }
    assert!(seen.iter().all(|&s| s), "a node has no stream");
    for (node, waits) in schedule.signals.waits.iter().enumerate() {
        for &dep in waits {
            assert_ne!(assignment.stream_of[dep], assignment.stream_of[node]);
            assert!(schedule.signals.signals[dep]);
            ordering.push((dep, node));
        }
    }
    let waited_on: usize = schedule.signals.signals.iter().filter(|&&s| s).count();
    let distinct: std::collections::BTreeSet<usize> =
        schedule.signals.waits.iter().flatten().copied().collect();
    assert_eq!(waited_on, distinct.len(), "a node signals that nothing waits on");
    // What the run orders: stream order and the waits, nothing else.
    let run = Closure::of(nodes.len(), graph.order(), &ordering);
    for (dep, node) in graph_edges(graph) {
        assert!(run.reaches(dep, node), "edge {dep} -> {node} is not ordered by the schedule");
        if !schedule.signals.exact {
            // Past the frontier capacity knowledge forgets entries (and waits more).
            continue;
        }
        let (stream, epoch) = (assignment.stream_of[dep], assignment.epoch_of[dep]);
        let known = schedule.signals.frontier(node).iter().any(|&(s, e)| s == stream && e >= epoch);
        assert!(known, "node {node}'s frontier does not know {dep}");
    }
    let edges = graph.edge_count();
    let counted = schedule.signals.fifo + schedule.signals.implied + schedule.signals.waited;
    assert_eq!(counted, edges);
}

/// The cross-stream edges of the transitive reduction: edges `d -> n` with no other
/// dependency of `n` reachable from `d`.
fn reduced_cross_stream(graph: &Graph, schedule: &Schedule, closure: &Closure) -> usize {
    let stream_of = &schedule.assignment.stream_of;
    graph_edges(graph)
        .into_iter()
        .filter(|&(dep, node)| stream_of[dep] != stream_of[node])
        .filter(|&(dep, node)| !graph.nodes()[node].deps.iter().any(|&o| closure.reaches(dep, o)))
        .count()
}

/// Series-parallel graphs (nested forks and joins, the shape of operator graphs): no more
/// streams than the graph's width (here the greedy walk alone already achieves it; on the
/// arbitrary DAGs below the minimum flow narrows it).
fn series_parallel() -> impl Strategy<Value = Vec<NodeSpec>> {
    (1usize..40, any::<u64>()).prop_map(|(steps, seed)| {
        let mut state = seed | 1;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut specs = vec![node("root", "c0", &[])];
        let mut tail = 0;
        for step in 0..steps {
            let branches = 1 + next(4);
            let mut ends = Vec::new();
            for branch in 0..branches {
                let mut at = tail;
                for depth in 0..1 + next(3) {
                    specs.push(node(
                        &format!("s{step}b{branch}d{depth}"),
                        &format!("c{}", next(3)),
                        &[at],
                    ));
                    at = specs.len() - 1;
                }
                ends.push(at);
            }
            specs.push(node(&format!("join{step}"), "c0", &ends));
            tail = specs.len() - 1;
        }
        specs
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn series_parallel_within_width(specs in series_parallel()) {
        let graph = build(specs, 1);
        let schedule = schedule(&graph);
        let closure = Closure::of(graph.nodes().len(), graph.order(), &graph_edges(&graph));
        check_sound(&graph, &schedule, &closure);
        let width = closure.width();
        prop_assert!(schedule.assignment.streams.len() <= width,
            "{} streams for width {width}", schedule.assignment.streams.len());
        let reduced = reduced_cross_stream(&graph, &schedule, &closure);
        prop_assert!(schedule.signals.waited <= reduced);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn one_device_within_reduction(specs in dag(1000, 6, 1)) {
        let graph = build(specs, 1);
        let schedule = schedule(&graph);
        let closure = Closure::of(graph.nodes().len(), graph.order(), &graph_edges(&graph));
        check_sound(&graph, &schedule, &closure);
        let width = closure.width();
        prop_assert!(schedule.assignment.streams.len() <= width,
            "{} streams for width {width}", schedule.assignment.streams.len());
        // Frontiers hold 64 entries: with at most that many streams, knowledge is exact.
        prop_assume!(schedule.assignment.streams.len() <= 64);
        prop_assert!(schedule.signals.exact);
        let reduced = reduced_cross_stream(&graph, &schedule, &closure);
        prop_assert!(schedule.signals.waited <= reduced,
            "{} waits for {reduced} cross-stream reduction edges", schedule.signals.waited);
    }

    #[test]
    fn wide_thousand_node_graphs_within_width(specs in dag(1000, 40, 1)) {
        let graph = build(specs, 1);
        let schedule = schedule(&graph);
        let closure = Closure::of(graph.nodes().len(), graph.order(), &graph_edges(&graph));
        check_sound(&graph, &schedule, &closure);
        let width = closure.width();
        prop_assert!(schedule.assignment.streams.len() <= width,
            "{} streams for width {width}", schedule.assignment.streams.len());
    }

    #[test]
    fn small_wide_graphs(specs in dag(60, 60, 1)) {
        let graph = build(specs, 1);
        let schedule = schedule(&graph);
        let closure = Closure::of(graph.nodes().len(), graph.order(), &graph_edges(&graph));
        check_sound(&graph, &schedule, &closure);
        let width = closure.width();
        prop_assert!(schedule.assignment.streams.len() <= width,
            "{} streams for width {width}", schedule.assignment.streams.len());
        if schedule.signals.exact {
            let reduced = reduced_cross_stream(&graph, &schedule, &closure);
            prop_assert!(schedule.signals.waited <= reduced);
        }
    }

    #[test]
    fn devices_and_spanning_nodes(specs in dag(400, 16, 3)) {
        let graph = build(specs, 3);
        let schedule = schedule(&graph);
        let closure = Closure::of(graph.nodes().len(), graph.order(), &graph_edges(&graph));
        check_sound(&graph, &schedule, &closure);
        // Each device's streams are a chain cover of its nodes: no more than their width.
        for device in 0..3 {
            let on: Vec<usize> =
                (0..graph.nodes().len()).filter(|&n| graph.nodes()[n].device == device).collect();
            let streams =
                schedule.assignment.streams.iter().filter(|s| s.device == device).count();
            let width = closure.width_of(&on);
            prop_assert!(streams <= width, "device {device}: {streams} streams for width {width}");
        }
        if schedule.signals.exact {
            let reduced = reduced_cross_stream(&graph, &schedule, &closure);
            prop_assert!(schedule.signals.waited <= reduced);
        }
    }
}

fn node(name: &str, command: &str, deps: &[usize]) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        command: command.into(),
        devices: vec![0],
        deps: deps.to_vec(),
        work_us: 0,
    }
}

/// `N1 -> (N2, N3) -> N4`: the join stays on the stream that ran the fork, and the branch that
/// splits off gets the second stream (rather than alternating streams).
#[test]
fn fork_join_keeps_the_join_on_the_fork_stream() {
    let specs = vec![
        node("N1", "conv", &[]),
        node("N2", "gemm", &[0]),
        node("N3", "gemm", &[0]),
        node("N4", "conv", &[1, 2]),
    ];
    let graph = build(specs, 1);
    let schedule = schedule(&graph);
    let streams: Vec<&[usize]> =
        schedule.assignment.streams.iter().map(|s| s.nodes.as_slice()).collect();
    assert_eq!(streams, [&[0, 1, 3][..], &[2][..]]);
    // N3 waits on N1, N4 waits on N3: two waits, as many as crossing edges.
    assert_eq!(schedule.signals.waits, vec![vec![], vec![], vec![0], vec![2]]);
    assert_eq!(schedule.signals.cross_stream(), 2);
}

/// On a rank tie the stream takes the node running the command it has already run.
#[test]
fn rank_ties_go_to_the_command_the_stream_has_run() {
    let specs = vec![
        node("a", "matmul", &[]),
        node("b", "relu", &[0]),
        node("c", "matmul", &[0]),
        node("d", "relu", &[1]),
        node("e", "matmul", &[2]),
    ];
    let graph = build(specs, 1);
    let schedule = schedule(&graph);
    assert_eq!(schedule.assignment.streams[0].nodes, [0, 2, 4]);
    assert_eq!(schedule.assignment.streams[1].nodes, [1, 3]);
}

/// A stream whose last node finished before a new chain starts is used again.
#[test]
fn finished_streams_are_recycled() {
    // a -> (b, c) -> d -> (e, f) -> g: the second split reuses the first split's stream.
    let specs = vec![
        node("a", "x", &[]),
        node("b", "x", &[0]),
        node("c", "y", &[0]),
        node("d", "x", &[1, 2]),
        node("e", "x", &[3]),
        node("f", "y", &[3]),
        node("g", "x", &[4, 5]),
    ];
    let graph = build(specs, 1);
    let schedule = schedule(&graph);
    assert_eq!(schedule.assignment.streams.len(), 2);
    assert_eq!(schedule.assignment.recycled, 1);
    assert_eq!(schedule.assignment.streams[1].nodes, [2, 5]);
}

/// An edge implied through another stream's wait needs no signal of its own.
#[test]
fn transitively_implied_edges_are_not_signalled() {
    // a's stream follows the long chain p, q, r; b's stream runs b, b2; c depends on a and b
    // and gets a third stream: its wait on b carries a.
    let specs = vec![
        node("a", "x", &[]),
        node("p", "x", &[0]),
        node("q", "x", &[1]),
        node("r", "x", &[2]),
        node("b", "y", &[0]),
        node("b2", "y", &[4]),
        node("c", "z", &[0, 4]),
    ];
    let graph = build(specs, 1);
    let schedule = schedule(&graph);
    let closure = Closure::of(7, graph.order(), &graph_edges(&graph));
    check_sound(&graph, &schedule, &closure);
    assert_eq!(schedule.assignment.streams.len(), 3);
    assert_eq!(schedule.signals.waits[6], [4]);
    assert_eq!(schedule.signals.implied, 1);
    assert_eq!(schedule.signals.cross_stream(), 3);
}

#[test]
fn cycles_are_named() {
    let specs =
        vec![node("a", "x", &[2]), node("b", "x", &[0]), node("c", "x", &[1]), node("d", "x", &[])];
    let error = Graph::new(vec!["d0".into()], specs).unwrap_err();
    let GraphError::Cycle(mut nodes) = error else { panic!("not a cycle: {error:?}") };
    nodes.sort();
    assert_eq!(nodes, [0, 1, 2]);
}

#[test]
fn bad_references_are_refused() {
    let error = Graph::new(vec!["d0".into()], vec![node("a", "x", &[3])]).unwrap_err();
    assert_eq!(error, GraphError::UnknownDependency { node: 0, dependency: 3 });
    let mut spec = node("a", "x", &[]);
    spec.devices = vec![1];
    let error = Graph::new(vec!["d0".into()], vec![spec]).unwrap_err();
    assert_eq!(error, GraphError::UnknownDevice { node: 0, device: 1 });
}

/// `a -> c -> e`, `b -> c`, `a -> d`: the walk from `a` takes `c` (the higher rank), `b` is
/// left alone, and `d` — not after `b`, and `a`'s stream not finished — opens a third stream.
/// The width is two (`{a, d}` and `{b, c, e}` cover it), and the narrowed assignment has two.
#[test]
fn narrowing_reaches_the_width_where_the_walk_does_not() {
    let specs = vec![
        node("a", "x", &[]),
        node("b", "x", &[]),
        node("c", "x", &[0, 1]),
        node("d", "x", &[0]),
        node("e", "x", &[2]),
    ];
    let graph = build(specs, 1);
    let schedule = schedule(&graph);
    let closure = Closure::of(5, graph.order(), &graph_edges(&graph));
    check_sound(&graph, &schedule, &closure);
    assert_eq!(closure.width(), 2);
    let mut streams: Vec<Vec<usize>> =
        schedule.assignment.streams.iter().map(|s| s.nodes.clone()).collect();
    streams.sort();
    assert_eq!(streams, [vec![0, 3], vec![1, 2, 4]]);
}

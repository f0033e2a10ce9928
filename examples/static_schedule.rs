//! A static schedule, made before anything runs and then run: an attention block — `embed`,
//! then `q`, `k` and `v` side by side, `attention` over all three, `proj` after it (and after
//! `embed`, a residual edge) — scheduled onto streams by `causeway-schedule`, then submitted to
//! a device with one CPU queue per stream, one semaphore per stream, and only the waits the
//! schedule emits.
//!
//! The schedule puts the longest chain on one stream and the parallel branches beside it; it
//! waits only on cross-stream edges that neither stream order nor another wait already
//! implies. The run checks that this was enough: every dependency finished before its
//! dependent started. `causeway schedule GRAPH.toml` does the same from a graph file
//! (`graphs/`), and `--emit` writes the schedule as a scenario.
//!
//! Run: `cargo run --release --example static_schedule`

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway::cpu::CpuBackend;
use causeway::device::{Args, Device, Invocation, Op, QueueConfig, SemaphoreId, Work};
use causeway::{PoolConfig, Scope};
use causeway_schedule::{schedule, Graph, NodeSpec};

/// The block: (name, command, microseconds of work, the nodes it depends on).
const NODES: [(&str, &str, u32, &[usize]); 6] = [
    ("embed", "embed", 20, &[]),
    ("q", "gemm", 100, &[0]),
    ("k", "gemm", 100, &[0]),
    ("v", "gemm", 100, &[0]),
    ("attention", "attention", 80, &[1, 2, 3]),
    ("proj", "gemm", 60, &[4, 0]),
];

/// The longest chain: embed → q (or k, v) → attention → proj. No schedule finishes sooner.
const CRITICAL_PATH_US: u64 = 20 + 100 + 80 + 60;

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let specs = NODES
        .iter()
        .map(|&(name, command, work_us, deps)| NodeSpec {
            name: name.into(),
            command: command.into(),
            devices: vec![0],
            deps: deps.to_vec(),
            work_us,
        })
        .collect();
    let graph = Graph::new(vec!["gpu".into()], specs)?;
    let plan = schedule(&graph);
    let (assignment, signals) = (&plan.assignment, &plan.signals);
    let name = |node: usize| graph.nodes()[node].name.as_str();

    for (index, stream) in assignment.streams.iter().enumerate() {
        let nodes: Vec<&str> = stream.nodes.iter().map(|&node| name(node)).collect();
        println!("stream {index}: {}", nodes.join(" → "));
    }
    println!(
        "{} edges: {} in stream order, {} implied by other waits, {} waited on",
        graph.edge_count(),
        signals.fifo,
        signals.implied,
        signals.waited
    );

    // The schedule's makespan if every node takes its work time: each node starts when the
    // node before it on its stream and every dependency have ended.
    let mut end_us = vec![0u64; graph.nodes().len()];
    for &node in graph.order() {
        let stream = &assignment.streams[assignment.stream_of[node]];
        let position = assignment.epoch_of[node] as usize - 1;
        let before_on_stream = position.checked_sub(1).map_or(0, |p| end_us[stream.nodes[p]]);
        let deps_done = graph.nodes()[node].deps.iter().map(|&dep| end_us[dep]).max();
        let start = before_on_stream.max(deps_done.unwrap_or(0));
        end_us[node] = start + u64::from(graph.nodes()[node].work_us);
    }
    let makespan_us = end_us.iter().copied().max().unwrap_or(0);
    println!("makespan {makespan_us} µs (critical path {CRITICAL_PATH_US} µs)");

    // Run it: a queue and a timeline per stream; node k of a stream signals its timeline = k.
    // One host function runs every node: its arguments say which, and it records when the
    // node started and ended on one shared sequence.
    let clock = Arc::new(AtomicU64::new(0));
    let count = graph.nodes().len();
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..count).map(|_| AtomicU64::new(0)).collect());
    let ended: Arc<Vec<AtomicU64>> = Arc::new((0..count).map(|_| AtomicU64::new(0)).collect());
    let work_us: Vec<u32> = graph.nodes().iter().map(|node| node.work_us).collect();

    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let node_call = builder.host_call({
        let (clock, started, ended) = (clock.clone(), started.clone(), ended.clone());
        move |call: &Invocation| {
            let node = call.args.u64(0) as usize;
            started[node].store(clock.fetch_add(1, SeqCst) + 1, SeqCst);
            let spin = Duration::from_micros(u64::from(work_us[node]));
            let begin = Instant::now();
            while begin.elapsed() < spin {
                std::hint::spin_loop();
            }
            ended[node].store(clock.fetch_add(1, SeqCst) + 1, SeqCst);
            Ok(())
        }
    });
    let queues: Vec<_> =
        assignment.streams.iter().map(|_| builder.queue(QueueConfig::on(cpu))).collect();
    let home = builder.endpoint(queues[0]).ok_or("the queue has no endpoint")?;
    let timelines: Vec<SemaphoreId> =
        queues.iter().map(|_| builder.semaphore(0, Scope::DeviceLocal, home)).collect();
    let device = builder.build()?;

    let begin = Instant::now();
    for &node in graph.order() {
        let stream = assignment.stream_of[node];
        let waits: Vec<(SemaphoreId, u64)> = signals.waits[node]
            .iter()
            .map(|&dep| (timelines[assignment.stream_of[dep]], assignment.epoch_of[dep]))
            .collect();
        // Every node signals, so the host can wait for each stream's last one below; the
        // schedule's `signals` says which signals another stream needs.
        let signal = [(timelines[stream], assignment.epoch_of[node])];
        let op = Op {
            waits: &waits,
            signals: &signal,
            work: Work::Host(node_call),
            tag: node as u64,
            args: Args::from_u64s([node as u64]),
        };
        device.submit(queues[stream], &op)?;
    }
    for (stream, &timeline) in assignment.streams.iter().zip(&timelines) {
        device.wait(timeline, stream.nodes.len() as u64, Some(Duration::from_secs(30)))?;
    }
    println!("ran on {} CPU queues in {:?} of wall time", queues.len(), begin.elapsed());

    // Every dependency ended before its dependent started, with only the emitted waits.
    let ordered = graph.nodes().iter().enumerate().all(|(node, spec)| {
        spec.deps.iter().all(|&dep| ended[dep].load(SeqCst) < started[node].load(SeqCst))
    });
    let waits: usize = signals.waits.iter().map(Vec::len).sum();
    if assignment.streams.len() != 3
        || signals.waited != 4
        || waits != 4
        || makespan_us != CRITICAL_PATH_US
        || !ordered
    {
        return Err("expected 3 streams, 4 waits, the critical path as makespan, and every \
                    dependency ordered"
            .into());
    }
    println!("3 streams, 4 waits, makespan = critical path: every dependency honoured");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("static_schedule: {error}");
            ExitCode::FAILURE
        }
    }
}

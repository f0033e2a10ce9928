//! Loops and branches over a scheduled graph, run as coroutines on the device's pool: the
//! condition is evaluated at run time on a pool worker (no thread of its own), the body's
//! operations are submitted per iteration, and every dependency of every iteration holds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use causeway::cpu::CpuBackend;
use causeway::device::{Device, Work};
use causeway::runtime::Spawner;
use causeway::semaphore::Failure;
use causeway::PoolConfig;
use causeway_schedule::run::{run_case, run_while, Body};
use causeway_schedule::{schedule, Graph, NodeSpec};

/// `N1 -> (N2, N3) -> N4`, each node a host call that logs its index; N4 also counts.
fn fork_join() -> Graph {
    let node = |name: &str, deps: &[usize]| NodeSpec {
        name: name.into(),
        command: name.into(),
        devices: vec![0],
        deps: deps.to_vec(),
        work_us: 0,
    };
    let specs = vec![node("N1", &[]), node("N2", &[0]), node("N3", &[0]), node("N4", &[1, 2])];
    Graph::new(vec!["cpu".into()], specs).expect("a DAG")
}

struct Logged {
    device: Arc<Device>,
    bodies: Vec<Body>,
    log: Arc<Mutex<Vec<(usize, usize)>>>,
    finished: Arc<AtomicU64>,
}

/// A device running `branches` bodies of the fork-join graph; node `n` of body `b` logs
/// `(b, n)`, and every body's N4 counts a finished run.
fn device_with(branches: usize) -> Logged {
    let graph = fork_join();
    let plan = schedule(&graph);
    let log = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::new(AtomicU64::new(0));
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    builder.driver(CpuBackend::new());
    let mut bodies = Vec::new();
    for branch in 0..branches {
        let calls: Vec<_> = (0..4)
            .map(|node| {
                let (log, finished) = (Arc::clone(&log), Arc::clone(&finished));
                builder.host_call(move |_| {
                    log.lock().unwrap().push((branch, node));
                    if node == 3 {
                        finished.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        bodies.push(Body::declare(&mut builder, &graph, &plan, |n| Work::Host(calls[n])));
    }
    let device = Arc::new(builder.build().expect("a CPU device"));
    Logged { device, bodies, log, finished }
}

/// Each run of the body logs N1 first and N4 last, with N2 and N3 between.
fn assert_runs_in_order(log: &[(usize, usize)], runs: usize) {
    assert_eq!(log.len(), runs * 4, "{log:?}");
    for run in log.chunks(4) {
        let nodes: Vec<usize> = run.iter().map(|&(_, n)| n).collect();
        assert_eq!(nodes[0], 0, "{log:?}");
        assert_eq!(nodes[3], 3, "{log:?}");
        assert!(nodes[1..3].contains(&1) && nodes[1..3].contains(&2), "{log:?}");
    }
}

#[test]
fn while_loop_runs_until_its_run_time_condition_fails() {
    let Logged { device, mut bodies, log, finished } = device_with(1);
    let mut body = bodies.pop().unwrap();
    let threads = Arc::new(Mutex::new(Vec::new()));
    let handle = {
        let (device2, finished, threads) = (Arc::clone(&device), finished.clone(), threads.clone());
        let spawner = Spawner::new(device.executor());
        let looping = async move {
            let condition = |_iteration| {
                threads.lock().unwrap().push(std::thread::current().name().map(String::from));
                // Read what the body itself counted: decided at run time.
                finished.load(Ordering::Relaxed) < 5
            };
            run_while(&device2, &mut body, condition).await.map_err(|_| Failure::Application(1))
        };
        let handle = spawner.spawn(looping).map_err(|e| e.error()).expect("spawned");
        let iterations = handle.join().expect("the loop finishes");
        drop(spawner);
        iterations
    };
    assert_eq!(handle, 5);
    assert_runs_in_order(&log.lock().unwrap(), 5);
    let threads = threads.lock().unwrap();
    assert_eq!(threads.len(), 6, "the condition is evaluated once per iteration and once more");
    for name in threads.iter() {
        let name = name.as_deref().unwrap_or("");
        assert!(name.starts_with("causeway-worker"), "condition evaluated on thread `{name}`");
    }
    drop(device);
}

#[test]
fn case_runs_the_branch_chosen_at_run_time() {
    let Logged { device, mut bodies, log, .. } = device_with(3);
    let chosen = {
        let device2 = Arc::clone(&device);
        let spawner = Spawner::new(device.executor());
        let branching = async move {
            let mut picks = Vec::new();
            for round in 0..4usize {
                let pick = run_case(&device2, &mut bodies, || (round * 2) % 3).await;
                picks.push(pick.map_err(|_| Failure::Application(1))?);
            }
            Ok(picks)
        };
        let handle = spawner.spawn(branching).map_err(|e| e.error()).expect("spawned");
        let picks = handle.join().expect("the case finishes");
        drop(spawner);
        picks
    };
    assert_eq!(chosen, [0, 2, 1, 0]);
    let log = log.lock().unwrap();
    assert_runs_in_order(&log, 4);
    let branches: Vec<usize> = log.chunks(4).map(|run| run[0].0).collect();
    assert_eq!(branches, chosen);
}

//! The peers, each in the form its users write first:
//!
//! - **rayon**: the timestep loop runs inside the pool (`install`), each timestep a `scope`
//!   that spawns its tasks; the scope's end is the barrier between timesteps.
//! - **tokio**: the timestep loop is itself a spawned task on a multi-thread runtime; each
//!   timestep spawns its tasks and awaits their join handles before the next.
//! - **threads**: one std thread per worker, each running a fixed share of every timestep's
//!   tasks, all meeting at a `std::sync::Barrier` after each timestep: no scheduler at all,
//!   the floor the others' scheduling is measured against.
//!
//! All three synchronise whole timesteps, which orders every pattern's dependencies (they only
//! reach one timestep back) at the price of waiting for the slowest task of each.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use super::{system_error, System};
use crate::graph::{Outputs, TaskGraph};
use crate::TaskBenchError;

/// rayon: a scope per timestep on a pool of `workers` threads.
pub fn run_rayon(
    graph: &TaskGraph,
    outputs: &Outputs,
    iterations: u32,
    workers: usize,
) -> Result<Duration, TaskBenchError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .thread_name(|index| format!("taskbench-rayon-{index}"))
        .build()
        .map_err(|error| system_error(System::Rayon, error))?;
    let start = Instant::now();
    pool.install(|| {
        for step in 0..graph.steps() {
            rayon::scope(|scope| {
                for &point in graph.active(step) {
                    scope.spawn(move |_| graph.run_task(outputs, step, point, iterations));
                }
            });
        }
    });
    Ok(start.elapsed())
}

/// tokio: a spawned task per graph task, a timestep's join handles awaited before the next.
pub fn run_tokio(
    graph: &Arc<TaskGraph>,
    outputs: &Arc<Outputs>,
    iterations: u32,
    workers: usize,
) -> Result<Duration, TaskBenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("taskbench-tokio")
        .build()
        .map_err(|error| system_error(System::Tokio, error))?;
    let (graph, outputs) = (Arc::clone(graph), Arc::clone(outputs));
    let start = Instant::now();
    // The loop runs on a worker, as rayon's does, not on the thread timing the run.
    let driver = runtime.spawn(async move {
        let mut handles = Vec::with_capacity(graph.width() as usize);
        for step in 0..graph.steps() {
            for &point in graph.active(step) {
                let (graph, outputs) = (Arc::clone(&graph), Arc::clone(&outputs));
                handles.push(tokio::spawn(async move {
                    graph.run_task(&outputs, step, point, iterations)
                }));
            }
            for handle in handles.drain(..) {
                handle.await?;
            }
        }
        Ok::<(), tokio::task::JoinError>(())
    });
    runtime
        .block_on(driver)
        .map_err(|error| system_error(System::Tokio, error))?
        .map_err(|error| system_error(System::Tokio, error))?;
    Ok(start.elapsed())
}

/// std threads: worker `k` runs the `k`-th, `k + workers`-th, … task of every timestep, and
/// all meet at a barrier after each.
pub fn run_threads(
    graph: &TaskGraph,
    outputs: &Outputs,
    iterations: u32,
    workers: usize,
) -> Duration {
    // The timing thread meets the workers at the start and at the end; the workers alone meet
    // between timesteps.
    let start_and_end = Barrier::new(workers + 1);
    let between_steps = Barrier::new(workers);
    thread::scope(|scope| {
        for worker in 0..workers {
            let (start_and_end, between_steps) = (&start_and_end, &between_steps);
            scope.spawn(move || {
                start_and_end.wait();
                for step in 0..graph.steps() {
                    for &point in graph.active(step).iter().skip(worker).step_by(workers) {
                        graph.run_task(outputs, step, point, iterations);
                    }
                    between_steps.wait();
                }
                start_and_end.wait();
            });
        }
        // The clock starts before the workers are let go: read after the barrier, a timing
        // thread preempted there would start it after the workers had already finished.
        let start = Instant::now();
        start_and_end.wait();
        start_and_end.wait();
        start.elapsed()
    })
}

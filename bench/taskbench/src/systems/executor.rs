//! causeway's executor: one immediate process per task. A task's process is a dependent of each
//! of its dependencies' processes ([`Process::set_dependents`]): it holds one suspension per
//! dependency and becomes runnable when the last of them completes, with no other
//! synchronisation. Every process has a home worker ([`Process::with_home`]), the columns split
//! into one contiguous block per worker: a runnable task is queued on its home worker's list
//! (or run at once by that worker when it completed the last dependency and is free, the
//! executor's hand-off), and a worker with nothing of its own takes from another's.
//!
//! Two timings ([`Wiring`]): with the graph's wiring and submission inside the timed part, done
//! by the thread timing the run, task by task in timestep order, while the workers already run
//! the first tasks (as rayon and tokio create their tasks while they run); and with the graph
//! wired and submitted before the timer, the tasks without dependencies held and released when
//! it starts (how a graph built once and run many times is timed): the executor's dependency
//! resolution and scheduling alone.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use causeway::executor::{Class, Drain, DrainContext, Drained, Process};
use causeway::{Failure, Runtime};

use super::{system_error, System};
use crate::graph::{Outputs, TaskGraph};
use crate::TaskBenchError;

/// What every task's process shares: the graph, its outputs, and the count of sinks (tasks no
/// other task depends on) not yet finished, whose last decrement wakes the thread timing the
/// run. Sinks alone: every other task finishes before one of its dependents starts, so the
/// graph is done when its sinks are, and the other tasks do not all contend for one counter
/// (a cache line both workers would pass back and forth once per task).
struct Shared<'g> {
    graph: &'g TaskGraph,
    outputs: &'g Outputs,
    iterations: u32,
    remaining: AtomicU64,
    failed: AtomicBool,
    timer: Thread,
}

/// One task's drain.
struct TaskDrain<'g> {
    shared: &'g Shared<'g>,
    step: u32,
    point: u32,
    /// Whether no task depends on it (see [`Shared`]).
    sink: bool,
}

impl Drain for TaskDrain<'_> {
    fn drain(&self, _: &mut DrainContext<'_, '_>) -> Drained {
        let shared = self.shared;
        shared.graph.run_task(shared.outputs, self.step, self.point, shared.iterations);
        Drained::Done(Ok(()))
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        if outcome.is_err() {
            self.shared.failed.store(true, Ordering::Relaxed);
        }
        if !self.sink {
            return;
        }
        // AcqRel: the timer's Acquire load of zero sees every sink's outputs, and each sink
        // ran after its dependencies finished (the executor's dependency edges), so every
        // task's outputs.
        if self.shared.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.timer.unpark();
        }
    }
}

/// What the timed part of a run includes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wiring {
    /// Wiring every dependency and submitting every process, then running.
    Timed,
    /// Only running: the graph is wired and submitted before the timer starts.
    BeforeTimer,
}

/// Runs `graph` on a causeway runtime of `workers` workers; the time until the last task's
/// end, from wiring the first dependency or from releasing the first task (`wiring`).
pub fn run(
    graph: &TaskGraph,
    outputs: &Outputs,
    iterations: u32,
    workers: usize,
    wiring: Wiring,
) -> Result<Duration, TaskBenchError> {
    let system = match wiring {
        Wiring::Timed => System::Executor,
        Wiring::BeforeTimer => System::ExecutorPrebuilt,
    };
    let failed = |error: &dyn std::fmt::Display| system_error(system, error);
    // Tasks in timestep order; `process_of[cell]` is the cell's task, if it holds one.
    let mut tasks = Vec::with_capacity(graph.tasks() as usize);
    let mut process_of = vec![usize::MAX; graph.index(graph.steps(), 0)];
    // The tasks without dependencies, which start the graph.
    let mut roots = Vec::new();
    for step in 0..graph.steps() {
        for &point in graph.active(step) {
            process_of[graph.index(step, point)] = tasks.len();
            if graph.dependencies(step, point).is_empty() {
                roots.push(tasks.len());
            }
            tasks.push((step, point));
        }
    }
    let mut sink = vec![true; tasks.len()];
    for &(step, point) in tasks.iter().filter(|&&(step, _)| step > 0) {
        for &column in graph.dependencies(step, point) {
            sink[process_of[graph.index(step - 1, column)]] = false;
        }
    }
    let shared = Shared {
        graph,
        outputs,
        iterations,
        remaining: AtomicU64::new(sink.iter().filter(|&&sink| sink).count() as u64),
        failed: AtomicBool::new(false),
        timer: thread::current(),
    };
    let drains: Vec<TaskDrain> = tasks
        .iter()
        .zip(&sink)
        .map(|(&(step, point), &sink)| TaskDrain { shared: &shared, step, point, sink })
        .collect();
    // Each worker's home is a contiguous block of columns, as an MPI rank owns its block: a
    // task's dependencies in its own column and the next ones were mostly run by its home
    // worker, whose cache still holds their outputs and processes.
    let width = graph.width() as usize;
    let home = |point: u32| point as usize * workers / width;
    let processes: Vec<Process> = drains
        .iter()
        .map(|drain| Process::new(drain, Class::Immediate).with_home(home(drain.point)))
        .collect();
    let mut dependents: Vec<Vec<&Process>> = vec![Vec::new(); processes.len()];
    for step in 1..graph.steps() {
        for &point in graph.active(step) {
            let consumer = &processes[process_of[graph.index(step, point)]];
            for &column in graph.dependencies(step, point) {
                dependents[process_of[graph.index(step - 1, column)]].push(consumer);
            }
        }
    }

    let elapsed = Runtime::builder()
        .workers(workers)
        .thread_name("taskbench-executor")
        .scope(|executor| -> Result<Duration, TaskBenchError> {
            // Every edge is wired before its producer or consumer is submitted, as the
            // executor requires: the tasks are in timestep order and each wires the edges to
            // its dependents (of the next timestep) before it is submitted. A process whose
            // dependencies completed before its own submission is activated by that
            // submission. Timed, each task is submitted as soon as it is wired, so the workers
            // run the first timesteps while the later ones are wired (as rayon and tokio
            // spawn while they run); before the timer, the roots are held until it starts.
            let wire_and_submit = || -> Result<(), TaskBenchError> {
                for (process, dependents) in processes.iter().zip(&dependents) {
                    process.set_dependents(dependents).map_err(|error| failed(&error))?;
                    if wiring == Wiring::Timed {
                        executor.submit(process).map_err(|error| failed(&error))?;
                    }
                }
                if wiring == Wiring::BeforeTimer {
                    for &root in &roots {
                        executor.hold(&processes[root]).map_err(|error| failed(&error))?;
                    }
                    for process in &processes {
                        executor.submit(process).map_err(|error| failed(&error))?;
                    }
                }
                Ok(())
            };
            let start = match wiring {
                Wiring::Timed => {
                    let start = Instant::now();
                    wire_and_submit()?;
                    start
                }
                Wiring::BeforeTimer => {
                    wire_and_submit()?;
                    let start = Instant::now();
                    for &root in &roots {
                        executor.release(&processes[root]).map_err(|error| failed(&error))?;
                    }
                    start
                }
            };
            while shared.remaining.load(Ordering::Acquire) != 0 {
                thread::park();
            }
            Ok(start.elapsed())
        })
        .map_err(|error| failed(&error))??;
    if shared.failed.load(Ordering::Relaxed) {
        return Err(failed(&"a task's process failed"));
    }
    Ok(elapsed)
}

//! causeway's device queues: the path an application takes. Column `i` is a CPU queue with a
//! timeline semaphore; task `(t, i)` is an operation on that queue running one host function
//! (told its task by the operation's arguments), signalling column `i`'s semaphore to `t + 1`,
//! and waiting, for each dependency `(t − 1, j)`, on column `j`'s semaphore reaching `t`.
//!
//! Every dependency is issued as a wait, the column's own included; the device resolves each
//! at submission. A wait the submitting queue's frontier already covers — its own column, by
//! stream order, or one its earlier operations waited on transitively — is elided; others are
//! satisfied (already reached), held on the host, or left to the device. The counts say how
//! many of each a pattern produced.

use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway::cpu::CpuBackend;
use causeway::device::{
    Args, Device, Op, QueueConfig, QueueId, SemaphoreConfig, SemaphoreId, Work, MAX_WAITS,
};
use causeway::{PoolConfig, Scope};

use super::{system_error, Limits, RunOutcome, System, WaitCounts};
use crate::graph::{Outputs, TaskGraph};
use crate::TaskBenchError;

/// Operations each queue's ring holds: enough that the submitting thread stays well ahead of
/// the workers.
const QUEUE_CAPACITY: usize = 256;

/// History slots per semaphore: every signal a full ring may have pending, and as many
/// reached values again for waiters that come late.
const SEMAPHORE_HISTORY: usize = 2 * QUEUE_CAPACITY;

/// How long a submission may wait for ring room, and the end for the last signals: far beyond
/// any run, so only a hang trips it.
const PATIENCE: Duration = Duration::from_secs(120);

const SYSTEM: System = System::Queues;

/// Refuses a graph wider than the queues allowed, or with a task of more dependencies than an
/// operation may wait on.
pub fn validate(graph: &TaskGraph, limits: &Limits) -> Result<(), TaskBenchError> {
    if graph.width() > limits.max_queues {
        return Err(TaskBenchError::TooManyColumns {
            width: graph.width(),
            queues: limits.max_queues,
        });
    }
    let dependencies = graph.max_dependencies();
    if dependencies > MAX_WAITS {
        return Err(TaskBenchError::TooManyDependencies {
            pattern: graph.pattern(),
            width: graph.width(),
            dependencies,
            waits: MAX_WAITS,
        });
    }
    Ok(())
}

/// Runs `graph` on a device of `workers` pool threads, one queue per column; the time from the
/// first submission until every column's last signal is reached, and the waits.
pub fn run(
    graph: &Arc<TaskGraph>,
    outputs: &Arc<Outputs>,
    iterations: u32,
    workers: usize,
) -> Result<RunOutcome, TaskBenchError> {
    let failed = |error: &dyn std::fmt::Display| system_error(SYSTEM, error);
    let mut builder = Device::builder(PoolConfig::with_workers(workers).name("taskbench-queues"));
    let cpu = builder.driver(CpuBackend::new());
    let task = builder.host_call({
        let (graph, outputs) = (Arc::clone(graph), Arc::clone(outputs));
        move |call| {
            graph.run_task(&outputs, call.args.u32(0), call.args.u32(1), iterations);
            Ok(())
        }
    });
    let columns: Vec<QueueId> = (0..graph.width())
        .map(|_| builder.queue(QueueConfig::on(cpu).capacity(QUEUE_CAPACITY)))
        .collect();
    let mut semaphores: Vec<SemaphoreId> = Vec::with_capacity(columns.len());
    for &queue in &columns {
        let home = builder.endpoint(queue).ok_or_else(|| failed(&"a queue got no axis"))?;
        let config = SemaphoreConfig::new(0, Scope::DeviceLocal, home).history(SEMAPHORE_HISTORY);
        semaphores.push(builder.semaphore_config(config));
    }
    let device = builder.build().map_err(|error| failed(&error))?;

    let mut waits = Vec::with_capacity(MAX_WAITS);
    let mut issued = 0;
    let start = Instant::now();
    for step in 0..graph.steps() {
        for &point in graph.active(step) {
            waits.clear();
            waits.extend(
                graph
                    .dependencies(step, point)
                    .iter()
                    .map(|&column| (semaphores[column as usize], u64::from(step))),
            );
            issued += waits.len() as u64;
            let op = Op {
                waits: &waits,
                signals: &[(semaphores[point as usize], u64::from(step) + 1)],
                work: Work::Host(task),
                tag: 0,
                args: Args::NONE.with_u32(0, step).with_u32(1, point),
            };
            device
                .submit_timeout(columns[point as usize], &op, PATIENCE)
                .map_err(|error| failed(&error))?;
        }
    }
    // Each column's semaphore ends at one more than the last timestep that has a task there.
    for (column, &semaphore) in semaphores.iter().enumerate() {
        let last =
            (0..graph.steps()).rev().find(|&step| graph.active(step).contains(&(column as u32)));
        if let Some(step) = last {
            device
                .wait(semaphore, u64::from(step) + 1, Some(PATIENCE))
                .map_err(|error| failed(&error))?;
        }
    }
    let elapsed = start.elapsed();
    let resolutions = device.stats().resolutions();
    let report = device.shutdown(PATIENCE);
    // Everything was waited for: anything cancelled, stuck or panicked is a fault of the run.
    if report.cancelled != 0 || !report.stuck.is_empty() || report.panicked_workers != 0 {
        return Err(failed(&format_args!("the device shut down unclean: {report:?}")));
    }
    Ok(RunOutcome {
        elapsed,
        tasks: graph.tasks(),
        waits: Some(WaitCounts { issued, resolutions }),
    })
}

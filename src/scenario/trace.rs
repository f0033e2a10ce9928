//! The `--trace` file: Chrome / Perfetto trace-event JSON. One track per queue (and one for the
//! host) under "queues", one per worker under "workers", and a flow arrow from each signalling
//! operation to every operation whose wait it satisfied.

use serde_json::{json, Value};

use super::model::Target;
use super::report::queue_name;
use super::run::Outcome;

const QUEUES_PID: u64 = 1;
const WORKERS_PID: u64 = 2;

/// The trace document for `outcome`.
pub fn trace(outcome: &Outcome<'_>) -> Value {
    let scenario = outcome.scenario;
    let host_track = scenario.queues.len() as u64;
    let mut events = vec![
        json!({"ph": "M", "name": "process_name", "pid": QUEUES_PID, "args": {"name": "queues"}}),
        json!({"ph": "M", "name": "process_name", "pid": WORKERS_PID, "args": {"name": "workers"}}),
        json!({"ph": "M", "name": "thread_name", "pid": QUEUES_PID, "tid": host_track, "args": {"name": "host"}}),
    ];
    for (index, queue) in scenario.queues.iter().enumerate() {
        events.push(json!({"ph": "M", "name": "thread_name", "pid": QUEUES_PID, "tid": index, "args": {"name": queue.name}}));
    }
    for worker in 0..scenario.workers {
        events.push(json!({"ph": "M", "name": "thread_name", "pid": WORKERS_PID, "tid": worker, "args": {"name": format!("worker {worker}")}}));
    }
    let track = |target: Target| match target {
        Target::Queue(queue) => queue as u64,
        Target::Host => host_track,
    };
    let us = |ns: u64| ns as f64 / 1e3;
    for (spec, record) in scenario.ops.iter().zip(&outcome.ops) {
        let frontier: Vec<String> = record
            .frontier
            .iter()
            .map(|p| format!("{}:{}", outcome.axis_name(p.axis), p.epoch))
            .collect();
        let waits: Vec<String> = record
            .waits
            .iter()
            .map(|w| {
                format!(
                    "{}>={} {}",
                    scenario.semaphores[w.semaphore].name,
                    w.value,
                    w.resolution.map_or("failed", |r| r.name())
                )
            })
            .collect();
        let args = json!({
            "queue": queue_name(outcome, spec.target),
            "epoch": record.point.epoch,
            "frontier": frontier,
            "waits": waits,
            "status": record.status.name(),
        });
        let duration = us(record.end_ns.saturating_sub(record.start_ns));
        events.push(json!({
            "ph": "X", "name": spec.name, "cat": "op", "pid": QUEUES_PID, "tid": track(spec.target),
            "ts": us(record.start_ns), "dur": duration, "args": args,
        }));
        if let Some(worker) = record.worker {
            events.push(json!({
                "ph": "X", "name": spec.name, "cat": "op", "pid": WORKERS_PID, "tid": worker,
                "ts": us(record.start_ns), "dur": duration,
            }));
        }
    }
    // Flows: the operation whose signal first reached each waited value, to the waiter.
    let mut flow = 0u64;
    for (waiter_spec, waiter) in scenario.ops.iter().zip(&outcome.ops) {
        for wait in &waiter.waits {
            let signaller = scenario.ops.iter().zip(&outcome.ops).find(|(spec, _)| {
                spec.signals.iter().any(|&(s, v)| s == wait.semaphore && v >= wait.value)
            });
            let Some((signal_spec, signal)) = signaller else { continue };
            flow += 1;
            let name = format!("{}>={}", scenario.semaphores[wait.semaphore].name, wait.value);
            events.push(json!({
                "ph": "s", "id": flow, "name": name, "cat": "signal", "pid": QUEUES_PID,
                "tid": track(signal_spec.target), "ts": us(signal.end_ns.saturating_sub(1)),
            }));
            events.push(json!({
                "ph": "f", "bp": "e", "id": flow, "name": name, "cat": "signal", "pid": QUEUES_PID,
                "tid": track(waiter_spec.target), "ts": us(waiter.start_ns),
            }));
        }
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns" })
}

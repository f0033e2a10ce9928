//! The `--report` JSON: a stable contract for tools (see the README for the schema).

use causeway_core::frontier::Frontier;
use serde_json::{json, Value};

use super::run::{OpRecord, Outcome};
use super::stats::Stats;

/// The report document for `outcome`.
pub fn report(outcome: &Outcome<'_>) -> Value {
    let scenario = outcome.scenario;
    let ops: Vec<Value> = scenario
        .ops
        .iter()
        .zip(&outcome.ops)
        .map(|(spec, record)| op(outcome, &spec.name, &queue_name(outcome, spec.target), record))
        .collect();
    let semaphores: Vec<Value> = scenario
        .semaphores
        .iter()
        .zip(&outcome.semaphores)
        .map(|(spec, record)| {
            let history: Vec<Value> = record
                .history
                .iter()
                .map(|entry| {
                    json!({
                        "value": entry.value,
                        "frontier": frontier(outcome, &entry.frontier),
                        "tainted": entry.tainted,
                    })
                })
                .collect();
            json!({
                "name": spec.name,
                "value": record.value,
                "failed": record.failed,
                "history": history,
            })
        })
        .collect();
    json!({
        "scenario": scenario.name,
        "ops": ops,
        "semaphores": semaphores,
        "stats": Stats::of(outcome).to_json(),
    })
}

/// The queue column of an operation: its queue's name, or `host`.
pub fn queue_name(outcome: &Outcome<'_>, target: super::model::Target) -> String {
    match target {
        super::model::Target::Queue(queue) => outcome.scenario.queues[queue].name.clone(),
        super::model::Target::Host => super::parse::HOST.to_string(),
    }
}

fn op(outcome: &Outcome<'_>, name: &str, queue: &str, record: &OpRecord) -> Value {
    let waits: Vec<Value> = record
        .waits
        .iter()
        .map(|wait| {
            json!({
                "semaphore": outcome.scenario.semaphores[wait.semaphore].name,
                "value": wait.value,
                // A wait on an already-failed semaphore is decided on the spot.
                "resolution": wait.resolution.map_or("satisfied", |r| r.name()),
                "tainted": wait.tainted,
            })
        })
        .collect();
    json!({
        "name": name,
        "queue": queue,
        "epoch": record.point.epoch,
        "frontier": frontier(outcome, &record.frontier),
        "tainted": record.frontier.is_tainted(),
        "waits": waits,
        "start_ns": record.start_ns,
        "end_ns": record.end_ns,
        "status": record.status.name(),
    })
}

fn frontier(outcome: &Outcome<'_>, frontier: &Frontier<8>) -> Value {
    Value::Array(
        frontier
            .iter()
            .map(|point| json!({ "axis": outcome.axis_name(point.axis), "epoch": point.epoch }))
            .collect(),
    )
}

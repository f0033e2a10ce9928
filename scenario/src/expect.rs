//! Checking a run against the expectations its scenario carries.

use super::model::StatusExpect;
use super::outcome::{Outcome, Status};
use super::stats::Stats;

/// Every expectation of the scenario that the run did not meet, one line each (empty when all
/// held), and how many expectations were checked.
pub fn unmet(outcome: &Outcome<'_>) -> (Vec<String>, usize) {
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut expect = |ok: bool, what: String| {
        checked += 1;
        if !ok {
            failures.push(what);
        }
    };
    // So is Vulkan's validation, when it was on: any message is a failure.
    if let Some(vulkan) = &outcome.vulkan {
        let messages = &vulkan.validation_messages;
        let first = messages.first().map_or("", String::as_str);
        let what = format!("vulkan validation: {} messages, the first: {first}", messages.len());
        expect(messages.is_empty(), what);
    }
    // Compute and copy results are checked whether or not the scenario expects anything of them.
    for check in &outcome.compute {
        let Some(result) = &check.result else { continue };
        let spec = &outcome.scenario.ops[check.op];
        let wrong = match result {
            Ok(()) => String::new(),
            Err(error) => format!(
                "op `{}` (line {}): result wrong: {error}",
                outcome.scenario.op_name(spec),
                spec.line
            ),
        };
        expect(result.is_ok(), wrong);
    }
    for (spec, record) in outcome.scenario.ops.iter().zip(&outcome.ops) {
        let at = format!("op `{}` (line {})", outcome.scenario.op_name(spec), spec.line);
        if let Some(frontier) = &spec.expect.frontier {
            let points = outcome.points_of(record.frontier).iter();
            let mut actual: Vec<(String, u64)> =
                points.map(|&p| (outcome.axis_name(p).to_string(), p.epoch)).collect();
            actual.sort();
            let mut wanted = frontier.clone();
            wanted.sort();
            expect(
                actual == wanted,
                format!("{at}: frontier {} expected {}", show(&actual), show(&wanted)),
            );
        }
        if let Some(resolutions) = &spec.expect.resolution {
            let waits = outcome.waits_of(record);
            let actual: Vec<&str> =
                waits.iter().map(|w| w.resolution.map_or("failed", |r| r.name())).collect();
            let met = waits.len() == resolutions.len()
                && waits
                    .iter()
                    .zip(resolutions)
                    .all(|(w, accepted)| w.resolution.is_some_and(|r| accepted.contains(&r)));
            let wanted: Vec<String> = resolutions
                .iter()
                .map(|accepted| accepted.iter().map(|r| r.name()).collect::<Vec<_>>().join("|"))
                .collect();
            expect(
                met,
                format!(
                    "{at}: resolutions [{}] expected [{}]",
                    actual.join(", "),
                    wanted.join(", ")
                ),
            );
        }
        if let Some(status) = spec.expect.status {
            let actual = record.status;
            let matches = matches!(
                (status, actual),
                (StatusExpect::Ok, Status::Ok)
                    | (StatusExpect::Failed, Status::Failed)
                    | (StatusExpect::Cancelled, Status::Cancelled)
            );
            expect(matches, format!("{at}: status {} expected {}", actual.name(), status.name()));
        }
        if let Some(tainted) = spec.expect.tainted {
            let actual = record.frontier.tainted;
            expect(
                actual == tainted,
                format!("{at}: frontier tainted = {actual}, expected {tainted}"),
            );
        }
    }
    for (spec, record) in outcome.scenario.semaphores.iter().zip(&outcome.semaphores) {
        let at = format!("semaphore `{}` (line {})", spec.name, spec.line);
        if let Some(value) = spec.expect_value {
            expect(record.value == value, format!("{at}: value {} expected {value}", record.value));
        }
        if let Some(failed) = spec.expect_failed {
            expect(
                record.failed == failed,
                format!("{at}: failed = {}, expected {failed}", record.failed),
            );
        }
    }
    let stats = Stats::of(outcome);
    let totals = outcome.scenario.expect;
    let mut total = |name: &str, wanted: Option<u64>, actual: u64| {
        if let Some(wanted) = wanted {
            expect(actual == wanted, format!("total {name}: {actual} expected {wanted}"));
        }
    };
    total("elided waits", totals.elided, stats.elided);
    total("satisfied waits", totals.satisfied, stats.satisfied);
    total("device waits", totals.device, stats.device);
    total("held waits", totals.held, stats.held);
    total("tainted waits", totals.tainted, stats.tainted_waits);
    total("memory reuses", totals.memory_reused, stats.memory_reused);
    total("peak memory", totals.peak_memory, stats.peak_memory);
    (failures, checked)
}

fn show(frontier: &[(String, u64)]) -> String {
    let entries: Vec<String> =
        frontier.iter().map(|(axis, epoch)| format!("{axis}:{epoch}")).collect();
    format!("{{{}}}", entries.join(", "))
}

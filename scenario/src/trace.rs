//! The `--trace` file: Chrome / Perfetto trace-event JSON. One track per queue (and one for the
//! host) under "queues", one per worker under "workers", and a flow arrow from each signalling
//! operation to every operation whose wait it satisfied.
//!
//! A run stopped at its deadline has a global instant event there ("timed out after …");
//! operations still running then end at it, and those not started have no slice.
//!
//! Like the report, the trace is streamed as it is serialized (keys in sorted order), and its
//! composite strings (`q:3`, `s>=2 satisfied`) are written straight into the output, never
//! built first. The signaller of a wait `s >= v` is the first operation in file order that
//! signals `s` to `v` or beyond; `FirstSignals` finds it by binary search, so flows cost
//! O(waits log signals).

use std::borrow::Cow;
use std::fmt;
use std::io;

use serde::{Serialize, Serializer};

use super::model::{Scenario, Target};
use super::outcome::{Outcome, Status};
use super::report::{queue_name, LazyArray};

const QUEUES_PID: u64 = 1;
const WORKERS_PID: u64 = 2;

/// Writes the trace of `outcome` to `out` as pretty-printed JSON.
pub fn write(outcome: &Outcome<'_>, out: impl io::Write) -> io::Result<()> {
    let first_signals = FirstSignals::of(outcome.scenario);
    let document = Document {
        display_time_unit: "ns",
        trace_events: LazyArray(|| {
            metadata(outcome.scenario)
                .chain(slices(outcome))
                .chain(flows(outcome, &first_signals))
                .chain(deadline(outcome))
        }),
    };
    serde_json::to_writer_pretty(out, &document).map_err(io::Error::from)
}

/// A signal that raised the highest value of its semaphore signalled so far in file order.
#[derive(Clone, Copy, Default)]
struct Raise {
    value: u64,
    /// The signalling operation.
    op: u32,
    /// Its track (see [`track`]), so that a flow need not look up its spec.
    track: u32,
}

/// Per semaphore, the signals that raised its highest value, in file order: strictly
/// increasing, so the first at or above `v` names the first operation in file order to signal
/// `v` or beyond. All semaphores' raises lie in one array, grouped by semaphore.
struct FirstSignals {
    raises: Vec<Raise>,
    /// Semaphore `s`'s raises are `raises[starts[s]..starts[s + 1]]`.
    starts: Vec<usize>,
}

impl FirstSignals {
    fn of(scenario: &Scenario) -> FirstSignals {
        let semaphores = scenario.semaphores.len();
        let mut highest: Vec<Option<u64>> = vec![None; semaphores];
        let mut in_file_order = Vec::new();
        let mut starts = vec![0; semaphores + 1];
        for (index, op) in scenario.ops.iter().enumerate() {
            let op_index = u32::try_from(index).expect("operation indices fit in u32");
            let track = u32::try_from(track(scenario, op.target)).expect("tracks fit in u32");
            for &(semaphore, value) in scenario.signals(op) {
                if highest[semaphore].is_none_or(|highest| value > highest) {
                    highest[semaphore] = Some(value);
                    in_file_order.push((semaphore, Raise { value, op: op_index, track }));
                    starts[semaphore + 1] += 1;
                }
            }
        }
        // Counts to starts, then each raise to its semaphore's group (a stable counting sort).
        for semaphore in 0..semaphores {
            starts[semaphore + 1] += starts[semaphore];
        }
        let mut next = starts.clone();
        let mut raises = vec![Raise::default(); in_file_order.len()];
        for (semaphore, raise) in in_file_order {
            raises[next[semaphore]] = raise;
            next[semaphore] += 1;
        }
        FirstSignals { raises, starts }
    }

    /// The first signal to raise `semaphore` to `value` or beyond.
    fn signaller(&self, semaphore: usize, value: u64) -> Option<Raise> {
        let raises = &self.raises[self.starts[semaphore]..self.starts[semaphore + 1]];
        let first = raises.partition_point(|raise| raise.value < value);
        raises.get(first).copied()
    }
}

/// A string written as its [`Display`](fmt::Display) form, straight into the output.
struct Text<D>(D);

impl<D: fmt::Display> Serialize for Text<D> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// A frontier entry, `axis:epoch`.
struct AxisEpoch<'a> {
    axis: &'a str,
    epoch: u64,
}

impl fmt::Display for AxisEpoch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.axis, self.epoch)
    }
}

/// A waited condition, `semaphore>=value`, and how the wait resolved, if told.
#[derive(Clone, Copy)]
struct Condition<'a> {
    semaphore: &'a str,
    value: u64,
    resolution: Option<&'static str>,
}

impl fmt::Display for Condition<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}>={}", self.semaphore, self.value)?;
        match self.resolution {
            Some(resolution) => write!(f, " {resolution}"),
            None => Ok(()),
        }
    }
}

#[derive(Serialize)]
struct Document<Events> {
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: &'static str,
    #[serde(rename = "traceEvents")]
    trace_events: Events,
}

/// One trace event; each kind's keys are in sorted order.
#[derive(Serialize)]
#[serde(untagged)]
enum Event<'a, Args> {
    Metadata(Metadata<'a>),
    Slice(Slice<'a, Args>),
    Flow(Flow<'a>),
    Instant(Instant),
}

/// A global instant: a line across every track.
#[derive(Serialize)]
struct Instant {
    cat: &'static str,
    name: String,
    ph: &'static str,
    pid: u64,
    s: &'static str,
    ts: f64,
}

#[derive(Serialize)]
struct Metadata<'a> {
    args: Named<'a>,
    name: &'static str,
    ph: &'static str,
    pid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<u64>,
}

#[derive(Serialize)]
struct Named<'a> {
    name: Cow<'a, str>,
}

#[derive(Serialize)]
struct Slice<'a, Args> {
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<Args>,
    cat: &'static str,
    dur: f64,
    name: &'a str,
    ph: &'static str,
    pid: u64,
    tid: u64,
    ts: f64,
}

#[derive(Serialize)]
struct OpArgs<'a, Frontier, Waits> {
    epoch: u64,
    frontier: Frontier,
    queue: &'a str,
    status: &'static str,
    waits: Waits,
}

#[derive(Serialize)]
struct Flow<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    bp: Option<&'static str>,
    cat: &'static str,
    id: u64,
    name: Text<Condition<'a>>,
    ph: &'static str,
    pid: u64,
    tid: u64,
    ts: f64,
}

/// Process and thread names: "queues" with a track per queue and the host, "workers".
fn metadata<Args>(scenario: &Scenario) -> impl Iterator<Item = Event<'_, Args>> {
    let queues =
        scenario.queues.iter().enumerate().map(|(index, queue)| {
            thread_name(QUEUES_PID, index, Cow::Borrowed(queue.name.as_str()))
        });
    let workers = (0..scenario.workers)
        .map(|worker| thread_name(WORKERS_PID, worker, Cow::Owned(format!("worker {worker}"))));
    [
        process_name(QUEUES_PID, "queues"),
        process_name(WORKERS_PID, "workers"),
        thread_name(QUEUES_PID, host_track(scenario), Cow::Borrowed(super::parse::HOST)),
    ]
    .into_iter()
    .chain(queues)
    .chain(workers)
}

fn process_name<Args>(pid: u64, name: &'static str) -> Event<'static, Args> {
    Event::Metadata(Metadata {
        args: Named { name: Cow::Borrowed(name) },
        name: "process_name",
        ph: "M",
        pid,
        tid: None,
    })
}

fn thread_name<Args>(pid: u64, tid: usize, name: Cow<'_, str>) -> Event<'_, Args> {
    Event::Metadata(Metadata {
        args: Named { name },
        name: "thread_name",
        ph: "M",
        pid,
        tid: Some(tid as u64),
    })
}

fn host_track(scenario: &Scenario) -> usize {
    scenario.queues.len()
}

fn track(scenario: &Scenario, target: Target) -> u64 {
    match target {
        Target::Queue(queue) => queue as u64,
        Target::Host => host_track(scenario) as u64,
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// Each operation on its queue's track (with its details), and on its worker's if it ran on one.
fn slices<'a>(outcome: &'a Outcome<'_>) -> impl Iterator<Item = Event<'a, impl Serialize + 'a>> {
    let scenario = outcome.scenario;
    let started =
        scenario.ops.iter().zip(&outcome.ops).filter(|(_, r)| r.status != Status::NotStarted);
    started.flat_map(move |(spec, record)| {
        let args = OpArgs {
            epoch: record.epoch,
            frontier: LazyArray(move || {
                outcome.points_of(record.frontier).iter().map(move |&point| {
                    Text(AxisEpoch { axis: outcome.axis_name(point), epoch: point.epoch })
                })
            }),
            queue: queue_name(outcome, spec.target),
            status: record.status.name(),
            waits: LazyArray(move || {
                outcome.waits_of(record).iter().map(move |wait| {
                    Text(Condition {
                        semaphore: &scenario.semaphores[wait.semaphore as usize].name,
                        value: wait.value,
                        resolution: Some(wait.resolution.map_or("failed", |r| r.name())),
                    })
                })
            }),
        };
        let slice = |pid: u64, tid: u64, args| {
            Event::Slice(Slice {
                args,
                cat: "op",
                dur: us(record.end_ns.saturating_sub(record.start_ns)),
                name: outcome.scenario.op_name(spec),
                ph: "X",
                pid,
                tid,
                ts: us(record.start_ns),
            })
        };
        let on_queue = slice(QUEUES_PID, track(scenario, spec.target), Some(args));
        let on_worker = record.worker.map(|worker| slice(WORKERS_PID, u64::from(worker), None));
        std::iter::once(on_queue).chain(on_worker)
    })
}

/// Flow arrows: from the operation whose signal first reached each waited value (at its end)
/// to the waiter (at its start), numbered in waiter order.
fn flows<'a, Args>(
    outcome: &'a Outcome<'_>,
    first_signals: &'a FirstSignals,
) -> impl Iterator<Item = Event<'a, Args>> {
    let scenario = outcome.scenario;
    // Only between operations that ended and ones that started: a run stopped at its deadline
    // has others.
    let arrows = scenario.ops.iter().zip(&outcome.ops).flat_map(move |(waiter_spec, waiter)| {
        outcome.waits_of(waiter).iter().filter_map(move |wait| {
            let signaller = first_signals.signaller(wait.semaphore as usize, wait.value)?;
            let ended = !outcome.ops[signaller.op as usize].status.at_deadline();
            (ended && waiter.status != Status::NotStarted).then_some((
                waiter_spec,
                waiter,
                wait,
                signaller,
            ))
        })
    });
    arrows.zip(1..).flat_map(move |((waiter_spec, waiter, wait, signaller), id)| {
        let name = Condition {
            semaphore: &scenario.semaphores[wait.semaphore as usize].name,
            value: wait.value,
            resolution: None,
        };
        let start = Flow {
            bp: None,
            cat: "signal",
            id,
            name: Text(name),
            ph: "s",
            pid: QUEUES_PID,
            tid: u64::from(signaller.track),
            ts: us(outcome.ops[signaller.op as usize].end_ns.saturating_sub(1)),
        };
        let finish = Flow {
            bp: Some("e"),
            cat: "signal",
            id,
            name: Text(name),
            ph: "f",
            pid: QUEUES_PID,
            tid: track(scenario, waiter_spec.target),
            ts: us(waiter.start_ns),
        };
        [Event::Flow(start), Event::Flow(finish)]
    })
}

/// The instant a run was stopped at its deadline, if it was.
fn deadline<'a, Args>(outcome: &Outcome<'_>) -> impl Iterator<Item = Event<'a, Args>> {
    outcome
        .timed_out
        .as_ref()
        .map(|timed_out| {
            Event::Instant(Instant {
                cat: "deadline",
                name: format!("timed out after {:?}", timed_out.timeout),
                ph: "i",
                pid: QUEUES_PID,
                s: "g",
                ts: us(timed_out.at_ns),
            })
        })
        .into_iter()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;
    use crate::report::tests::streamed;

    #[test]
    fn the_streamed_trace_is_the_sorted_pretty_print_of_its_own_tree() {
        for name in ["fork-join", "speculation"] {
            let (text, tree) = streamed(name, |outcome, out| write(outcome, out));
            assert_eq!(serde_json::to_string_pretty(&tree).unwrap(), text, "{name}");
        }
    }

    #[test]
    fn flows_run_from_the_first_signal_to_reach_each_waited_value() {
        let (_, trace) = streamed("late-waiter", |outcome, out| write(outcome, out));
        let flows: Vec<(&str, &str, u64)> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event["cat"] == "signal")
            .map(|e| {
                (e["ph"].as_str().unwrap(), e["name"].as_str().unwrap(), e["id"].as_u64().unwrap())
            })
            .collect();
        let waits: usize = {
            let found = crate::bundled::find("late-waiter").unwrap();
            let scenario = crate::parse::parse(Path::new(found.file), found.source).unwrap();
            scenario.ops.iter().map(|op| scenario.waits(op).len()).sum()
        };
        assert_eq!(flows.len(), 2 * waits);
        for (pair, id) in flows.chunks(2).zip(1..) {
            assert_eq!((pair[0].0, pair[1].0), ("s", "f"));
            assert_eq!((pair[0].2, pair[1].2), (id, id));
            assert_eq!(pair[0].1, pair[1].1);
        }
    }

    proptest! {
        #[test]
        fn the_signaller_is_the_first_in_file_order_to_reach_the_value(
            signals in proptest::collection::vec(proptest::collection::vec((0..3usize, 0..20u64), 0..3), 0..12),
            semaphore in 0..3usize,
            value in 0..22u64,
        ) {
            let scenario = {
                let mut text = String::from("name = \"t\"\n[[queue]]\nname = \"q\"\n");
                for s in 0..3 {
                    text.push_str(&format!("[[semaphore]]\nname = \"s{s}\"\n"));
                }
                for (index, op) in signals.iter().enumerate() {
                    let list: Vec<String> = op.iter().map(|(s, v)| format!("\"s{s}={v}\"")).collect();
                    text.push_str(&format!("[[op]]\nname = \"op{index}\"\nqueue = \"q\"\nsignal = [{}]\n", list.join(", ")));
                }
                if signals.is_empty() {
                    text.push_str("[[op]]\nname = \"only\"\nqueue = \"q\"\n");
                }
                crate::parse::parse(Path::new("t.toml"), &text).unwrap()
            };
            let first_in_file_order = scenario.ops.iter().position(|op| {
                scenario.signals(op).iter().any(|&(s, v)| s == semaphore && v >= value)
            });
            let signaller = FirstSignals::of(&scenario).signaller(semaphore, value);
            prop_assert_eq!(signaller.map(|raise| raise.op as usize), first_in_file_order);
        }
    }
}

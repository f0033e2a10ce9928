//! Speculation: a draft queue proposes four drafts, a consumer queue works on each one as soon
//! as it is drafted, and a third queue does work of its own. A verifier then accepts the first
//! two drafts: `Device::cancel_speculative` cancels exactly the work that consumed a rejected
//! draft — the drafts themselves and what waited on them — decided per operation from its
//! frontier, which holds the draft queue's axis at the epoch it consumed. Everything else runs
//! as submitted.
//!
//! The draft and consumer queues start behind a gate the host opens after the rejection, so the
//! rejection always finds the speculative work queued (a real verifier races the drafts; an
//! operation already running when the rejection comes runs to its end and is reported as
//! `OpEvent::Speculative { started: true, .. }`).
//!
//! Run: `cargo run --release --example speculative_cancel`

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use causeway::cpu::CpuBackend;
use causeway::device::{
    Device, HostWaitError, ObservedQueue, Observer, Op, OpEvent, OpStatus, QueueConfig, QueueId,
    SemaphoreId, SemaphoreWaitError, Work,
};
use causeway::{Dependence, Failure, PoolConfig, Rejection, Scope};

const TIMEOUT: Duration = Duration::from_secs(30);

/// What the observer saw of one operation: its speculation verdict, if any, and how it ended.
type Verdict = (Option<Dependence>, Option<OpStatus>);

/// What the observer saw of each operation, by tag.
#[derive(Default)]
struct Seen {
    ops: Mutex<BTreeMap<u64, Verdict>>,
}

impl Seen {
    /// How many operations have finished.
    fn finished(&self) -> usize {
        let ops = self.ops.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        ops.values().filter(|(_, status)| status.is_some()).count()
    }
}

impl Observer for Seen {
    // Called on worker threads: record and return.
    fn op_event(&self, _queue: ObservedQueue<'_>, tag: u64, event: OpEvent) {
        let mut ops = self.ops.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let op = ops.entry(tag).or_default();
        match event {
            OpEvent::Speculative { dependence, .. } => op.0 = Some(dependence),
            OpEvent::Finished { status, .. } => op.1 = Some(status),
            _ => {}
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let seen = Arc::new(Seen::default());
    let mut builder = Device::builder(PoolConfig::with_workers(2));
    let cpu = builder.driver(CpuBackend::new());
    let draft = builder.queue(QueueConfig::on(cpu).name("draft"));
    let consumer = builder.queue(QueueConfig::on(cpu).name("consumer"));
    let other = builder.queue(QueueConfig::on(cpu).name("other"));
    let home = builder.endpoint(draft).ok_or("the queue has no endpoint")?;
    // Draft k signals `drafted` = k; the consumer's work on it signals `consumed` = k.
    let [gate, drafted, consumed, other_done] =
        [(); 4].map(|()| builder.semaphore(0, Scope::DeviceLocal, home));
    builder.observer(Arc::clone(&seen) as Arc<dyn Observer>);
    let device = builder.build()?;

    let submit = |queue: QueueId,
                  tag: u64,
                  waits: &[(SemaphoreId, u64)],
                  signals: &[(SemaphoreId, u64)],
                  work| {
        device.submit(queue, &Op { waits, signals, work, tag, ..Default::default() })
    };
    let step = Work::Spin(Duration::from_micros(100));
    submit(draft, 1, &[(gate, 1)], &[], Work::Barrier)?;
    submit(consumer, 2, &[(gate, 1)], &[], Work::Barrier)?;
    // Drafts 1..=4 (tags 11..=14) and the consumer's work on each (tags 21..=24).
    let mut draft_epochs = Vec::new();
    for k in 1..=4 {
        draft_epochs.push(submit(draft, 10 + k, &[], &[(drafted, k)], step)?.point.epoch);
        submit(consumer, 20 + k, &[(drafted, k)], &[(consumed, k)], step)?;
    }
    // Work that never saw a draft (tags 31, 32).
    submit(other, 31, &[], &[], step)?;
    submit(other, 32, &[], &[(other_done, 1)], step)?;
    println!("submitted: 4 drafts, 4 consumers of them, 2 independent operations");

    // The verifier accepts drafts 1 and 2: the draft queue's axis up to draft 2's epoch.
    let draft_axis = device.axis(draft).ok_or("the draft queue has an axis")?;
    let report = device.cancel_speculative(Rejection::new(draft_axis, draft_epochs[1]));
    println!(
        "rejected drafts after 2: {} cancelled ({} conservatively), {} already running",
        report.cancelled, report.conservative, report.running
    );

    device.semaphore(gate).ok_or("the gate exists")?.signal_external(1)?;
    // Accepted work completes; a wait on what rejected work would have signalled fails.
    device.wait(consumed, 2, Some(TIMEOUT))?;
    device.wait(other_done, 1, Some(TIMEOUT))?;
    let cancelled_wait = device.wait(consumed, 3, Some(TIMEOUT));
    let outcome = match cancelled_wait {
        Ok(value) => format!("reached {value}"),
        Err(error) => format!("{error}"),
    };
    println!("wait on consumed >= 2: reached; on consumed >= 3: {outcome}");
    // Wait until the observer has seen all 12 operations finish, cancelled ones included.
    let deadline = Instant::now() + TIMEOUT;
    while seen.finished() < 12 {
        if Instant::now() > deadline {
            return Err("operations still unfinished after 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }

    let ops = seen.ops.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let cancelled: Vec<u64> = ops
        .iter()
        .filter(|(_, (dependence, status))| {
            *dependence == Some(Dependence::Rejected) && *status == Some(OpStatus::Cancelled)
        })
        .map(|(&tag, _)| tag)
        .collect();
    let completed: Vec<u64> = ops
        .iter()
        .filter(|(_, (dependence, status))| dependence.is_none() && *status == Some(OpStatus::Ok))
        .map(|(&tag, _)| tag)
        .collect();
    println!("cancelled (OpEvent::Speculative, never ran): {cancelled:?}");
    println!("completed as submitted: {completed:?}");

    let rejected_wait_failed =
        cancelled_wait == Err(SemaphoreWaitError::Wait(HostWaitError::Failed(Failure::Cancelled)));
    if (report.cancelled, report.conservative, report.running) != (4, 0, 0)
        || cancelled != [13, 14, 23, 24]
        || completed != [1, 2, 11, 12, 21, 22, 31, 32]
        || !rejected_wait_failed
    {
        return Err("the cancellation did not match the drafts' dependents".into());
    }
    println!("exactly the dependents of rejected drafts were cancelled");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("speculative_cancel: {error}");
            ExitCode::FAILURE
        }
    }
}

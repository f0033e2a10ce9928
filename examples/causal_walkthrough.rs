//! Walks the design's transitivity and late-waiter cases through the real core types and
//! prints, per operation, its queue, epoch, frontier and how each wait was resolved.
//!
//! Run: `cargo run --release --example causal_walkthrough`

use std::process::ExitCode;

use causeway::axis::{Axis, AxisAllocator, Domain};
use causeway::{Capabilities, Endpoint, Frontier, QueueClock, Scope, Semaphore};

/// A named set of queues and semaphores on one device.
struct Walkthrough {
    axes: AxisAllocator,
    queues: Vec<(&'static str, QueueClock)>,
    semaphores: Vec<(&'static str, Semaphore)>,
}

impl Walkthrough {
    fn new(title: &str) -> Walkthrough {
        println!("\n== {title}");
        Walkthrough { axes: AxisAllocator::new(0), queues: Vec::new(), semaphores: Vec::new() }
    }

    fn queue(&mut self, name: &'static str) -> Result<(), Box<dyn std::error::Error>> {
        let axis = self.axes.allocate(Domain::Queue)?;
        let endpoint = endpoint(axis.to_bits());
        let capabilities = Capabilities { wait_before_signal: true };
        self.queues.push((name, QueueClock::new(axis, endpoint, capabilities)));
        Ok(())
    }

    fn semaphore(&mut self, name: &'static str) {
        self.semaphores.push((name, Semaphore::new(0, Scope::DeviceLocal, endpoint(0))));
    }

    fn semaphore_named(&self, name: &str) -> &Semaphore {
        &self.semaphores.iter().find(|(n, _)| *n == name).expect("declared semaphore").1
    }

    fn axis_name(&self, axis: Axis) -> String {
        self.queues
            .iter()
            .find(|(_, q)| q.axis() == axis)
            .map_or_else(|| format!("{axis}"), |(n, _)| (*n).to_string())
    }

    fn show(&self, frontier: &Frontier) -> String {
        let entries: Vec<String> =
            frontier.iter().map(|p| format!("{}:{}", self.axis_name(p.axis), p.epoch)).collect();
        let taint = if frontier.is_tainted() { " (tainted)" } else { "" };
        format!("{{{}}}{taint}", entries.join(", "))
    }

    /// Submits an op; `complete` also retires its signals (the device ran it).
    fn op(
        &mut self,
        name: &str,
        queue: &str,
        waits: &[(&str, u64)],
        signals: &[(&str, u64)],
        complete: bool,
    ) -> Result<Frontier, Box<dyn std::error::Error>> {
        let index = self.queues.iter().position(|(n, _)| *n == queue).expect("declared queue");
        let mut clock = self.queues[index].1.clone();
        let mut submission = clock.begin();
        let mut resolved = Vec::new();
        for (semaphore, value) in waits {
            let r = submission.wait(self.semaphore_named(semaphore), *value)?;
            let taint = if r.tainted { ", tainted" } else { "" };
            resolved.push(format!("{semaphore}>={value}: {}{taint}", r.resolution.name()));
        }
        let targets = signals.iter().map(|(name, value)| (self.semaphore_named(name), *value));
        let done = submission.commit_signalling(targets.clone())?;
        if complete {
            causeway::queue::retire(targets, Ok(()));
        }
        let signalled: Vec<String> = signals.iter().map(|(s, v)| format!("{s}={v}")).collect();
        println!(
            "  {name:<4} on {queue:<3} epoch {:<2} frontier {:<28} waits [{}] signals [{}]",
            done.point.epoch,
            self.show(&done.frontier),
            resolved.join("; "),
            signalled.join(", "),
        );
        self.queues[index].1 = clock;
        Ok(done.frontier)
    }
}

fn endpoint(queue: u64) -> Endpoint {
    Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue }
}

fn transitivity() -> Result<(), Box<dyn std::error::Error>> {
    let mut w = Walkthrough::new("transitivity: C learns A's work through B alone");
    for q in ["QA", "QB", "QC"] {
        w.queue(q)?;
    }
    w.semaphore("S1");
    w.semaphore("S2");
    w.op("a", "QA", &[], &[("S1", 1)], false)?;
    w.op("b", "QB", &[("S1", 1)], &[("S2", 1)], false)?;
    let c = w.op("c", "QC", &[("S2", 1)], &[], false)?;
    let qa = w.queues[0].1.axis();
    println!("  -> C knows QA:{} without ever waiting on S1", c.get(qa).unwrap_or(0));
    let again = w.op("c2", "QC", &[("S1", 1)], &[], false)?;
    println!("  -> a later wait on S1 from QC is elided: {}", w.show(&again));
    Ok(())
}

fn late_waiter() -> Result<(), Box<dyn std::error::Error>> {
    let mut w = Walkthrough::new("late waiter: S >= 2 imports the value-2 frontier, not value 5's");
    w.queue("Q")?;
    w.queue("QB")?;
    w.semaphore("S");
    for v in 1..=5 {
        w.op(&format!("p{v}"), "Q", &[], &[("S", v)], true)?;
    }
    let late = w.op("late", "QB", &[("S", 2)], &[], false)?;
    let q = w.queues[0].1.axis();
    println!(
        "  -> S is at {}, yet the late waiter depends on Q:{} only",
        w.semaphore_named("S").value(),
        late.get(q).unwrap_or(0)
    );
    Ok(())
}

fn main() -> ExitCode {
    println!("causeway causal walkthrough: frontiers and wait resolutions, op by op");
    match transitivity().and_then(|()| late_waiter()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("walkthrough failed: {error}");
            ExitCode::FAILURE
        }
    }
}

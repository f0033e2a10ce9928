//! Checks that need the whole scenario: signal values advance, and the workload can finish.
//!
//! Whether a scenario can finish does not depend on timing: values only grow, failures only
//! spread, and each queue runs in order, so repeatedly running whatever can run reaches the
//! same end state in any order. [`check`] plays the scenario that way, without threads, and a
//! state with work left and nothing runnable is a deadlock — reported before anything runs,
//! naming each stuck wait.

use std::collections::VecDeque;

use super::model::{OpSpec, Scenario, ScenarioError, Target, WorkSpec};

/// Checks `scenario`; the error names the file, the line and the stuck waits.
pub fn check(scenario: &Scenario) -> Result<(), ScenarioError> {
    check_signals_advance(scenario)?;
    Simulation::new(scenario).run()
}

fn check_signals_advance(scenario: &Scenario) -> Result<(), ScenarioError> {
    let mut submitted: Vec<u64> = scenario.semaphores.iter().map(|s| s.initial).collect();
    for op in &scenario.ops {
        for &(semaphore, value) in &op.signals {
            if value <= submitted[semaphore] {
                return Err(ScenarioError::at(
                    &scenario.path,
                    op.line,
                    format!(
                        "op `{}` signals {}={value}, which does not advance past {}",
                        op.name, scenario.semaphores[semaphore].name, submitted[semaphore]
                    ),
                ));
            }
            submitted[semaphore] = value;
        }
    }
    Ok(())
}

struct Simulation<'s> {
    scenario: &'s Scenario,
    values: Vec<u64>,
    failed: Vec<bool>,
    queues: Vec<VecDeque<usize>>,
    committed: u64,
    /// Bytes committed per buffer (None: not committed).
    buffers: Vec<Option<u64>>,
}

impl<'s> Simulation<'s> {
    fn new(scenario: &'s Scenario) -> Simulation<'s> {
        Simulation {
            scenario,
            values: scenario.semaphores.iter().map(|s| s.initial).collect(),
            failed: vec![false; scenario.semaphores.len()],
            queues: vec![VecDeque::new(); scenario.queues.len()],
            committed: 0,
            buffers: vec![None; scenario.buffers.len()],
        }
    }

    fn run(mut self) -> Result<(), ScenarioError> {
        for (index, op) in self.scenario.ops.iter().enumerate() {
            match op.target {
                Target::Queue(queue) => self.queues[queue].push_back(index),
                Target::Host => {
                    self.settle();
                    if !self.waits_met(op) {
                        return Err(self.deadlock(Some(op)));
                    }
                    self.host_step(op);
                }
            }
        }
        self.settle();
        if self.queues.iter().any(|q| !q.is_empty()) {
            return Err(self.deadlock(None));
        }
        Ok(())
    }

    /// Runs queue heads until none can run.
    fn settle(&mut self) {
        let mut progress = true;
        while progress {
            progress = false;
            for queue in 0..self.queues.len() {
                while let Some(&index) = self.queues[queue].front() {
                    let op = &self.scenario.ops[index];
                    if !self.waits_met(op) || !self.memory_fits(op) {
                        break;
                    }
                    self.queues[queue].pop_front();
                    self.queue_step(op);
                    progress = true;
                }
            }
        }
    }

    fn waits_met(&self, op: &OpSpec) -> bool {
        op.waits.iter().all(|&(s, v)| self.failed[s] || self.values[s] >= v)
    }

    fn fails(&self, op: &OpSpec) -> bool {
        op.waits.iter().any(|&(s, _)| self.failed[s])
            || matches!(op.work, WorkSpec::Host { fail: Some(_), .. })
    }

    fn memory_fits(&self, op: &OpSpec) -> bool {
        match op.work {
            WorkSpec::Alloca { bytes, .. } if !self.fails(op) => {
                self.committed + bytes <= self.scenario.memory_quota
            }
            _ => true,
        }
    }

    fn queue_step(&mut self, op: &OpSpec) {
        let mut failed = self.fails(op);
        if !failed {
            match op.work {
                WorkSpec::Alloca { buffer, bytes } => {
                    self.committed += bytes;
                    self.buffers[buffer] = Some(bytes);
                }
                WorkSpec::Dealloca { buffer } => match self.buffers[buffer].take() {
                    Some(bytes) => self.committed -= bytes,
                    None => failed = true,
                },
                _ => {}
            }
        }
        self.signal(op, failed);
    }

    fn host_step(&mut self, op: &OpSpec) {
        let failed = self.fails(op);
        self.signal(op, failed);
        if let Some((semaphore, _)) = op.fail {
            self.failed[semaphore] = true;
        }
    }

    fn signal(&mut self, op: &OpSpec, failed: bool) {
        for &(semaphore, value) in &op.signals {
            if failed {
                self.failed[semaphore] = true;
            } else if !self.failed[semaphore] {
                self.values[semaphore] = self.values[semaphore].max(value);
            }
        }
    }

    fn deadlock(&self, host: Option<&OpSpec>) -> ScenarioError {
        let mut stuck = Vec::new();
        for queue in &self.queues {
            if let Some(&index) = queue.front() {
                stuck.push(self.describe(&self.scenario.ops[index]));
            }
        }
        if let Some(op) = host {
            stuck.push(self.describe(op));
        }
        let line = host.map(|op| op.line).or_else(|| {
            self.queues.iter().filter_map(|q| q.front()).map(|&i| self.scenario.ops[i].line).min()
        });
        ScenarioError {
            path: self.scenario.path.clone(),
            line,
            message: format!("deadlock: the workload can never finish\n{}", stuck.join("\n")),
            deadlock: true,
        }
    }

    fn describe(&self, op: &OpSpec) -> String {
        let who = match op.target {
            Target::Queue(queue) => format!("queue {}", self.scenario.queues[queue].name),
            Target::Host => "the host".to_string(),
        };
        let mut reasons = Vec::new();
        for &(semaphore, value) in &op.waits {
            if self.failed[semaphore] || self.values[semaphore] >= value {
                continue;
            }
            let name = &self.scenario.semaphores[semaphore].name;
            let ever = self.highest_ever(semaphore);
            let why = if ever < value {
                format!("nothing ever signals {name} to {value} (highest: {ever})")
            } else {
                format!(
                    "its signaller is itself stuck (a cycle); {name} is at {}",
                    self.values[semaphore]
                )
            };
            reasons.push(format!("waits for {name}>={value}: {why}"));
        }
        if let WorkSpec::Alloca { bytes, .. } = op.work {
            if !self.memory_fits(op) {
                reasons.push(format!(
                    "needs {bytes} bytes with {} of {} committed, and no dealloca can run first",
                    self.committed, self.scenario.memory_quota
                ));
            }
        }
        format!("  op `{}` (line {}) on {who} {}", op.name, op.line, reasons.join("; "))
    }

    fn highest_ever(&self, semaphore: usize) -> u64 {
        let signalled = self.scenario.ops.iter().flat_map(|op| &op.signals);
        signalled
            .filter(|&&(s, _)| s == semaphore)
            .map(|&(_, v)| v)
            .fold(self.scenario.semaphores[semaphore].initial, u64::max)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scenario::parse::parse;

    fn checked(source: &str) -> Result<(), ScenarioError> {
        check(&parse(Path::new("t.toml"), source).unwrap())
    }

    const HEADER: &str = "name = \"t\"\n[[queue]]\nname = \"q0\"\n[[queue]]\nname = \"q1\"\n[[semaphore]]\nname = \"s\"\n[[semaphore]]\nname = \"t\"\n";

    #[test]
    fn a_wait_nothing_signals_is_a_deadlock_naming_it() {
        let source = format!("{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n");
        let error = checked(&source).unwrap_err();
        assert_eq!(error.line, Some(10));
        assert!(
            error.message.contains(
                "op `a` (line 10) on queue q0 waits for s>=1: nothing ever signals s to 1"
            ),
            "{error}"
        );
    }

    #[test]
    fn a_cycle_is_a_deadlock() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\nsignal = [\"t=1\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q1\"\nwait = [\"t>=1\"]\nsignal = [\"s=1\"]\n"
        );
        let error = checked(&source).unwrap_err();
        assert!(error.message.contains("cycle"), "{error}");
        assert!(error.message.contains("op `a`") && error.message.contains("op `b`"), "{error}");
    }

    #[test]
    fn fifo_order_behind_a_later_signal_is_a_deadlock() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\n"
        );
        assert!(checked(&source).unwrap_err().message.contains("op `a`"));
    }

    #[test]
    fn a_host_wait_before_its_signal_is_submitted_is_a_deadlock() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"h\"\nqueue = \"host\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\n"
        );
        let error = checked(&source).unwrap_err();
        assert!(error.message.contains("the host"), "{error}");
    }

    #[test]
    fn submit_before_wait_across_queues_is_fine() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q1\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\n\
             [[op]]\nname = \"h\"\nqueue = \"host\"\nwait = [\"s>=1\"]\n"
        );
        assert_eq!(checked(&source), Ok(()));
    }

    #[test]
    fn failures_release_waiters() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"h\"\nqueue = \"host\"\nfail = \"s\"\n"
        );
        assert_eq!(checked(&source), Ok(()));
    }

    #[test]
    fn non_advancing_signals_are_refused_with_their_line() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nsignal = [\"s=2\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q1\"\nsignal = [\"s=2\"]\n"
        );
        let error = checked(&source).unwrap_err();
        assert_eq!(error.line, Some(14));
        assert!(error.message.contains("does not advance past 2"), "{error}");
    }

    #[test]
    fn memory_beyond_the_quota_on_one_queue_is_a_deadlock() {
        let source = format!(
            "memory_quota = 100\n{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwork = {{ kind = \"alloca\", buffer = \"x\", bytes = 80 }}\n\
             [[op]]\nname = \"b\"\nqueue = \"q0\"\nwork = {{ kind = \"alloca\", buffer = \"y\", bytes = 80 }}\n\
             [[op]]\nname = \"c\"\nqueue = \"q0\"\nwork = {{ kind = \"dealloca\", buffer = \"x\" }}\n"
        );
        let error = checked(&source).unwrap_err();
        assert!(error.message.contains("needs 80 bytes with 80 of 100 committed"), "{error}");
    }
}

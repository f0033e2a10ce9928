//! Checks that need the whole scenario: signal values advance, the workload can finish, and
//! what bounded resources a run needs so that it finishes (the [`Plan`]).
//!
//! # The pre-run
//!
//! Whether a scenario can finish does not depend on timing: values only grow, failures only
//! spread, and each queue runs in order, so running whatever can run reaches the same end
//! state in any order. [`check`] plays the scenario that way, without threads, in the order
//! the runner submits it: each queue operation joins its queue's FIFO, each host step acts at
//! its point of the file (a host step whose waits are not met then can never go on: a
//! deadlock), and after each the simulation *settles* — runs queue heads until none can run.
//! Work left when the file is done and everything settled is a deadlock, reported before
//! anything runs, naming each stuck wait.
//!
//! Only allocations competing for the memory quota (and a dealloca racing its alloca) make the
//! order matter; at run time timing decides them, and the run's timeout reports a stall. The
//! pre-run decides them as a device that keeps up with the submitter would: each submission
//! settles before the next. (Versions before the plan settled only before host steps and at
//! the end, as if the device started late; where allocations race, their verdict can differ.)
//!
//! # Event-driven settling
//!
//! Settling after every operation must be cheap, so nothing is ever rescanned. A queue whose
//! head cannot run is parked on the one thing it waits for, and looked at again only when
//! that changes:
//!
//! - an unmet wait `s >= v` (the first one of its head): the queue joins the waiters, one
//!   ordered set of `(s, v, queue)` for all semaphores, which holds at most one entry per
//!   queue. Advancing `s` to `v'` wakes `s`'s waiters with `v <= v'`; failing `s` wakes them
//!   all. A woken head may park on its next unmet wait; a wait once met stays met, so a head
//!   parks at most once per wait.
//! - room in the memory quota (an alloca, every wait met): the queue's need goes into a tree
//!   of minimums over the queues, which finds the first queue after a given one whose need
//!   fits the free bytes in O(log queues). The failure of a semaphore the head waits on also
//!   wakes it (a doomed alloca needs no memory).
//!
//! Woken queues are examined in the order the plain algorithm — sweep the queues in index
//! order, running each head while it can run, and sweep again until a sweep runs nothing —
//! would reach them: a queue woken after the sweep has passed it waits for the next sweep.
//! Queues that are not woken could not run, so skipping them changes nothing, and where order
//! matters (memory) the outcome is that of the plain sweeps exactly. Every operation runs
//! once, parks at most once per wait and once for memory, and each step is O(log n): loading
//! and checking cost O((operations + waits) log n) in all.
//!
//! The simulation reads the operations' waits and signals in file order from the scenario's
//! one array of them ([`Scenario::conditions`]), and each operation's spec once.
//!
//! # The plan
//!
//! A run bounds each queue's ring and each semaphore's history, and a submitter that finds
//! no room waits for earlier work to make some. That wait must end, so the sizes come from
//! what the workload needs with the submitter blocked, not from worst case × count. The
//! runner submits in file order; consider the moment before it submits operation `k`: the
//! device may have run everything it can, which is the simulation's settled state once the
//! operations before `k` are submitted and the host steps before `k` done. What is still in
//! queue `q`'s FIFO then cannot finish without later submissions, so:
//!
//! - `queue_slots[q]` = the most, over operations `k` on `q`, of `q`'s FIFO length in that
//!   state, plus one (for `k`); at least 1;
//! - `history_slots[s]` = the most, over every signal of `s` by an operation `k` (queue
//!   operations and host steps alike), of the signals of `s` pending in that state (made by
//!   operations still in a FIFO, plus any earlier signal of `s` in `k`'s own list, which is
//!   recorded first), plus two: one for the newest reached entry, which a history never
//!   evicts, and one for the new signal; at least 2.
//!
//! Settling after each submission is exactly what the pre-run does, so the plan comes from
//! the same pass.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use causeway_core::semaphore::MIN_HISTORY_SLOTS;

use super::model::{OpSpec, Scenario, ScenarioError, Target, WorkSpec};

/// What bounded resources the run needs so that a submitter waiting for room never waits
/// forever (see the [module documentation](self) for how each figure is defined).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Per queue: the most operations that can be in flight on it at once when the submitter
    /// is blocked, plus one (ring slots the queue needs).
    pub queue_slots: Vec<usize>,
    /// Per semaphore: the most signals of it that can be pending (submitted, not yet reached)
    /// at once when the submitter is blocked, plus two (history slots it needs: one for the
    /// newest reached entry, which is never evicted, and one for the new signal).
    pub history_slots: Vec<usize>,
}

/// Checks `scenario` and plans its bounded resources; the error names the file, the line and
/// the stuck waits.
pub fn check(scenario: &Scenario) -> Result<Plan, ScenarioError> {
    signals_advance(scenario)?;
    Simulation::new(scenario).run()
}

/// Every signal of the file advances its semaphore past the value the file signalled it to
/// before; each one that does not is refused (all of them, in file order, which is line order).
fn signals_advance(scenario: &Scenario) -> Result<(), ScenarioError> {
    let mut last: Vec<u64> = scenario.semaphores.iter().map(|s| s.initial).collect();
    let mut refused = Vec::new();
    for op in &scenario.ops {
        for &(semaphore, value) in scenario.signals(op) {
            if value <= last[semaphore] {
                refused.push(ScenarioError::at(
                    &scenario.path,
                    op.line,
                    format!(
                        "op `{}` signals {}={value}, which does not advance past {}",
                        scenario.op_name(op),
                        scenario.semaphores[semaphore].name,
                        last[semaphore]
                    ),
                ));
            } else {
                last[semaphore] = value;
            }
        }
    }
    ScenarioError::gathered(refused).map_or(Ok(()), Err)
}

/// An operation as the simulation reads it: its spec and its waits and signals.
#[derive(Clone, Copy)]
struct Op<'s> {
    spec: &'s OpSpec,
    waits: &'s [(usize, u64)],
    signals: &'s [(usize, u64)],
}

impl<'s> Op<'s> {
    fn of(scenario: &'s Scenario, spec: &'s OpSpec) -> Op<'s> {
        Op { spec, waits: scenario.waits(spec), signals: scenario.signals(spec) }
    }
}

/// Whether `op` fails whatever it signals (a waited semaphore failed, or its host call fails).
fn fails(op: Op<'_>, failed: &[bool]) -> bool {
    op.waits.iter().any(|&(s, _)| failed[s])
        || matches!(op.spec.work, WorkSpec::Host { fail: Some(_), .. })
}

/// Bytes `op` must find free before it can run (`None`: it needs none).
fn memory_needed(op: Op<'_>, failed: &[bool]) -> Option<u64> {
    match op.spec.work {
        WorkSpec::Alloca { bytes, .. } if !fails(op, failed) => Some(bytes),
        _ => None,
    }
}

/// Queues whose head waits for memory, by the bytes it needs: a tree of minimums over the
/// queues, so the first waiting queue at or after a given one whose need fits is found in
/// O(log queues).
struct MemoryWaiters {
    /// Leaves in the tree: the queue count rounded up to a power of two.
    leaves: usize,
    /// Node `i`'s children are `2i` and `2i + 1`; the root is 1 and queue `q` is leaf
    /// `leaves + q`. Each node holds the smallest need below it (`None`: nobody waits there).
    needs: Vec<Option<u64>>,
}

impl MemoryWaiters {
    fn new(queues: usize) -> MemoryWaiters {
        let leaves = queues.next_power_of_two();
        MemoryWaiters { leaves, needs: vec![None; 2 * leaves] }
    }

    fn is_waiting(&self, queue: usize) -> bool {
        self.needs[self.leaves + queue].is_some()
    }

    fn set(&mut self, queue: usize, need: Option<u64>) {
        let mut node = self.leaves + queue;
        self.needs[node] = need;
        while node > 1 {
            node /= 2;
            self.needs[node] = smaller(self.needs[2 * node], self.needs[2 * node + 1]);
        }
    }

    /// The first queue at or after `from` whose need is at most `free`.
    fn first_fitting(&self, from: usize, free: u64) -> Option<usize> {
        self.search(1, 0, self.leaves, from, free)
    }

    /// [`first_fitting`](Self::first_fitting) within node `node`, which covers queues
    /// `low..high`.
    fn search(
        &self,
        node: usize,
        low: usize,
        high: usize,
        from: usize,
        free: u64,
    ) -> Option<usize> {
        if high <= from || self.needs[node].is_none_or(|need| need > free) {
            return None;
        }
        if high - low == 1 {
            return Some(low);
        }
        let middle = (low + high) / 2;
        self.search(2 * node, low, middle, from, free)
            .or_else(|| self.search(2 * node + 1, middle, high, from, free))
    }
}

fn smaller(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Which woken queues the current sweep still reaches, and which wait for the next one.
#[derive(Default)]
struct Sweep {
    /// The queue being examined (`None`: before the first).
    at: Option<usize>,
    /// Woken queues after `at`.
    this: BTreeSet<usize>,
    /// Woken queues at or before `at`.
    next: BTreeSet<usize>,
}

impl Sweep {
    fn wake(&mut self, queue: usize) {
        if self.at.is_some_and(|at| queue <= at) {
            self.next.insert(queue);
        } else {
            self.this.insert(queue);
        }
    }
}

struct Simulation<'s> {
    scenario: &'s Scenario,
    /// The value each semaphore is last signalled to in the file so far: its highest (signals
    /// must advance), over the whole file once the pass is done.
    signalled: Vec<u64>,
    values: Vec<u64>,
    failed: Vec<bool>,
    /// Submitted, not yet run operations per queue, oldest first.
    fifos: Vec<VecDeque<usize>>,
    committed: u64,
    /// Bytes committed per buffer (None: not committed).
    buffers: Vec<Option<u64>>,
    /// `(semaphore, value, queue)` for each queue whose head waits for `semaphore` to reach
    /// `value`. A queue parks at most one wait at a time, so this stays as small as the
    /// queues are few, where state per semaphore (a heap each) would be as large as a
    /// scenario with a semaphore per operation, and written and read at every one.
    waiters: BTreeSet<(usize, u64, usize)>,
    /// By semaphore, `(queue, operation)` for heads that wait for memory and on it (only the
    /// semaphores that such a head waits on have an entry, for the same reason).
    failure_watchers: BTreeMap<usize, Vec<(usize, usize)>>,
    memory_waiters: MemoryWaiters,
    sweep: Sweep,
    /// Per semaphore, its signals by operations still in a FIFO.
    pending: Vec<usize>,
    plan: Plan,
}

impl<'s> Simulation<'s> {
    fn new(scenario: &'s Scenario) -> Simulation<'s> {
        let (queues, semaphores) = (scenario.queues.len(), scenario.semaphores.len());
        let initial: Vec<u64> = scenario.semaphores.iter().map(|s| s.initial).collect();
        Simulation {
            scenario,
            signalled: initial.clone(),
            values: initial,
            failed: vec![false; semaphores],
            fifos: vec![VecDeque::new(); queues],
            committed: 0,
            buffers: vec![None; scenario.buffers.len()],
            waiters: BTreeSet::new(),
            failure_watchers: BTreeMap::new(),
            memory_waiters: MemoryWaiters::new(queues),
            sweep: Sweep::default(),
            pending: vec![0; semaphores],
            plan: Plan {
                queue_slots: vec![1; queues],
                history_slots: vec![MIN_HISTORY_SLOTS; semaphores],
            },
        }
    }

    /// Plays the file in one pass, its signals known to advance. Once a host step is stuck,
    /// nothing more runs, but the rest of the file is still read: a deadlock report names the
    /// highest value each stuck wait could ever see.
    fn run(mut self) -> Result<Plan, ScenarioError> {
        let scenario = self.scenario;
        let mut stuck_host = None;
        for index in 0..scenario.ops.len() {
            let op = self.op(index);
            for &(semaphore, value) in op.signals {
                self.signalled[semaphore] = value;
            }
            if stuck_host.is_some() {
                continue;
            }
            self.plan_signals(op);
            match op.spec.target {
                Target::Queue(queue) => {
                    let fifo = &mut self.fifos[queue];
                    let slots = &mut self.plan.queue_slots[queue];
                    *slots = (*slots).max(fifo.len() + 1);
                    fifo.push_back(index);
                    if fifo.len() == 1 {
                        self.sweep.wake(queue);
                    }
                    for &(semaphore, _) in op.signals {
                        self.pending[semaphore] += 1;
                    }
                }
                Target::Host => {
                    if self.first_unmet_wait(op).is_some() {
                        stuck_host = Some(op.spec);
                        continue;
                    }
                    self.host_step(op);
                }
            }
            self.settle();
        }
        if stuck_host.is_some() || self.fifos.iter().any(|fifo| !fifo.is_empty()) {
            return Err(self.deadlock(stuck_host));
        }
        Ok(self.plan)
    }

    fn op(&self, index: usize) -> Op<'s> {
        Op::of(self.scenario, &self.scenario.ops[index])
    }

    /// Raises the history plan for each signal `op` is about to record.
    fn plan_signals(&mut self, op: Op<'_>) {
        for (position, &(semaphore, _)) in op.signals.iter().enumerate() {
            let earlier_in_op =
                op.signals[..position].iter().filter(|&&(s, _)| s == semaphore).count();
            let needed = self.pending[semaphore] + earlier_in_op + MIN_HISTORY_SLOTS;
            let slots = &mut self.plan.history_slots[semaphore];
            *slots = (*slots).max(needed);
        }
    }

    /// Runs queue heads until none can run, in the plain sweeps' order (module docs).
    fn settle(&mut self) {
        self.sweep.at = None;
        loop {
            let from = self.sweep.at.map_or(0, |at| at + 1);
            let woken = self.sweep.this.first().copied();
            let fitting = self.memory_waiters.first_fitting(from, self.free());
            let queue = match (woken, fitting) {
                (Some(woken), Some(fitting)) => woken.min(fitting),
                (Some(queue), None) | (None, Some(queue)) => queue,
                (None, None) => {
                    let fits_anywhere = self.memory_waiters.first_fitting(0, self.free());
                    if self.sweep.next.is_empty() && fits_anywhere.is_none() {
                        break;
                    }
                    self.sweep.this = std::mem::take(&mut self.sweep.next);
                    self.sweep.at = None;
                    continue;
                }
            };
            self.sweep.this.remove(&queue);
            self.memory_waiters.set(queue, None);
            self.sweep.at = Some(queue);
            self.advance(queue);
        }
        self.sweep.at = None;
    }

    /// Runs `queue`'s head while it can run, then parks the queue on what its head waits for.
    fn advance(&mut self, queue: usize) {
        while let Some(&index) = self.fifos[queue].front() {
            let op = self.op(index);
            if let Some((semaphore, value)) = self.first_unmet_wait(op) {
                self.waiters.insert((semaphore, value, queue));
                return;
            }
            if let Some(bytes) = memory_needed(op, &self.failed) {
                if bytes > self.free() {
                    self.memory_waiters.set(queue, Some(bytes));
                    for &(semaphore, _) in op.waits {
                        self.failure_watchers.entry(semaphore).or_default().push((queue, index));
                    }
                    return;
                }
            }
            self.fifos[queue].pop_front();
            for &(semaphore, _) in op.signals {
                self.pending[semaphore] -= 1;
            }
            self.queue_step(op);
        }
    }

    fn first_unmet_wait(&self, op: Op<'_>) -> Option<(usize, u64)> {
        op.waits.iter().copied().find(|&(s, v)| !self.failed[s] && self.values[s] < v)
    }

    fn free(&self) -> u64 {
        self.scenario.memory_quota.saturating_sub(self.committed)
    }

    fn queue_step(&mut self, op: Op<'_>) {
        let mut failed = fails(op, &self.failed);
        match op.spec.work {
            // An alloca that fails holds nothing: its dealloca gives nothing back, and succeeds.
            WorkSpec::Alloca { buffer, bytes } => {
                let bytes = if failed { 0 } else { bytes };
                self.committed += bytes;
                self.buffers[buffer] = Some(bytes);
            }
            // A dealloca gives its bytes back whether it runs or fails (the device's rule: "A
            // dealloca that does not run" in `causeway_device`'s memory); one that finds its
            // alloca not run yet fails.
            WorkSpec::Dealloca { buffer } => match self.buffers[buffer].take() {
                Some(bytes) => self.committed -= bytes,
                None => failed = true,
            },
            _ => {}
        }
        self.signal(op, failed);
    }

    fn host_step(&mut self, op: Op<'_>) {
        let failed = fails(op, &self.failed);
        self.signal(op, failed);
        if let Some((semaphore, _)) = op.spec.fail {
            self.fail(semaphore);
        }
    }

    fn signal(&mut self, op: Op<'_>, failed: bool) {
        for &(semaphore, value) in op.signals {
            if failed {
                self.fail(semaphore);
            } else if !self.failed[semaphore] {
                self.advance_to(semaphore, value);
            }
        }
    }

    fn advance_to(&mut self, semaphore: usize, value: u64) {
        if value <= self.values[semaphore] {
            return;
        }
        self.values[semaphore] = value;
        self.wake_waiters(semaphore, value);
    }

    /// Wakes the queues whose head waits for `semaphore` to reach at most `value`.
    fn wake_waiters(&mut self, semaphore: usize, value: u64) {
        let reached = (semaphore, 0, 0)..=(semaphore, value, usize::MAX);
        while let Some(&waiter) = self.waiters.range(reached.clone()).next() {
            self.waiters.remove(&waiter);
            let (_, _, queue) = waiter;
            self.sweep.wake(queue);
        }
    }

    fn fail(&mut self, semaphore: usize) {
        if std::mem::replace(&mut self.failed[semaphore], true) {
            return;
        }
        self.wake_waiters(semaphore, u64::MAX);
        for (queue, index) in self.failure_watchers.remove(&semaphore).unwrap_or_default() {
            // The entry is stale once that head ran (an operation runs only once).
            if self.memory_waiters.is_waiting(queue) && self.fifos[queue].front() == Some(&index) {
                self.memory_waiters.set(queue, None);
                self.sweep.wake(queue);
            }
        }
    }

    fn deadlock(&self, host: Option<&OpSpec>) -> ScenarioError {
        let scenario = self.scenario;
        let heads = self.fifos.iter().filter_map(|fifo| fifo.front()).map(|&i| &scenario.ops[i]);
        Stuck {
            scenario,
            highest: &self.signalled,
            values: &self.values,
            failed: &self.failed,
            committed: self.committed,
        }
        .error(heads, host)
    }
}

/// A settled state with work left, as the deadlock report describes it.
struct Stuck<'a> {
    scenario: &'a Scenario,
    highest: &'a [u64],
    values: &'a [u64],
    failed: &'a [bool],
    committed: u64,
}

impl Stuck<'_> {
    /// The report naming every stuck queue head (in queue order), then the stuck host step.
    fn error<'o>(
        &self,
        heads: impl Iterator<Item = &'o OpSpec> + Clone,
        host: Option<&OpSpec>,
    ) -> ScenarioError {
        let mut stuck: Vec<String> = heads.clone().map(|op| self.describe(op)).collect();
        if let Some(op) = host {
            stuck.push(self.describe(op));
        }
        let line = host.map(|op| op.line).or_else(|| heads.map(|op| op.line).min());
        let message = format!("deadlock: the workload can never finish\n{}", stuck.join("\n"));
        let error = match line {
            Some(line) => ScenarioError::at(&self.scenario.path, line, message),
            None => ScenarioError::in_file(&self.scenario.path, message),
        };
        error.deadlock()
    }

    fn describe(&self, op: &OpSpec) -> String {
        let scenario = self.scenario;
        let who = match op.target {
            Target::Queue(queue) => format!("queue {}", scenario.queues[queue].name),
            Target::Host => "the host".to_string(),
        };
        let mut reasons = Vec::new();
        for &(semaphore, value) in scenario.waits(op) {
            if self.failed[semaphore] || self.values[semaphore] >= value {
                continue;
            }
            let name = &scenario.semaphores[semaphore].name;
            let ever = self.highest[semaphore];
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
        if let Some(bytes) = memory_needed(Op::of(scenario, op), self.failed) {
            if bytes > scenario.memory_quota.saturating_sub(self.committed) {
                reasons.push(format!(
                    "needs {bytes} bytes with {} of {} committed, and no dealloca can run first",
                    self.committed, scenario.memory_quota
                ));
            }
        }
        let name = scenario.op_name(op);
        format!("  op `{name}` (line {}) on {who} {}", op.line, reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use causeway_core::scope::Scope;
    use proptest::prelude::*;

    use super::*;
    use crate::generate;
    use crate::model::{
        Conditions, DriverKind, Home, OpExpect, OpName, QueueSpec, SemaphoreSpec, TotalsExpect,
    };
    use crate::parse::parse;

    fn checked(source: &str) -> Result<Plan, ScenarioError> {
        check(&parse(Path::new("t.toml"), source).unwrap())
    }

    const HEADER: &str = "name = \"t\"\n[[queue]]\nname = \"q0\"\n[[queue]]\nname = \"q1\"\n[[semaphore]]\nname = \"s\"\n[[semaphore]]\nname = \"t\"\n";

    #[test]
    fn a_wait_nothing_signals_is_a_deadlock_naming_it() {
        let source = format!("{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n");
        let error = checked(&source).unwrap_err();
        assert_eq!(error.line, Some(10));
        assert_eq!(
            error.message,
            "deadlock: the workload can never finish\n  \
             op `a` (line 10) on queue q0 waits for s>=1: nothing ever signals s to 1 (highest: 0)"
        );
        assert!(error.deadlock);
    }

    #[test]
    fn a_cycle_is_a_deadlock() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\nsignal = [\"t=1\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q1\"\nwait = [\"t>=1\"]\nsignal = [\"s=1\"]\n"
        );
        let error = checked(&source).unwrap_err();
        assert_eq!(
            error.message,
            "deadlock: the workload can never finish\n  \
             op `a` (line 10) on queue q0 waits for s>=1: its signaller is itself stuck (a cycle); s is at 0\n  \
             op `b` (line 15) on queue q1 waits for t>=1: its signaller is itself stuck (a cycle); t is at 0"
        );
        assert_eq!(error.line, Some(10));
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
        assert_eq!(
            error.message,
            "deadlock: the workload can never finish\n  \
             op `h` (line 10) on the host waits for s>=1: its signaller is itself stuck (a cycle); s is at 0"
        );
        assert_eq!(error.line, Some(10));
    }

    #[test]
    fn a_signal_that_does_not_advance_is_reported_before_an_earlier_deadlock() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"h\"\nqueue = \"host\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"a\"\nqueue = \"q0\"\nsignal = [\"t=1\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q0\"\nsignal = [\"t=1\"]\n"
        );
        let error = checked(&source).unwrap_err();
        assert_eq!(
            (error.line, error.message.as_str(), error.deadlock),
            (Some(18), "op `b` signals t=1, which does not advance past 1", false)
        );
    }

    #[test]
    fn submit_before_wait_across_queues_is_fine() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q1\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q0\"\nsignal = [\"s=1\"]\n\
             [[op]]\nname = \"h\"\nqueue = \"host\"\nwait = [\"s>=1\"]\n"
        );
        assert_eq!(
            checked(&source),
            Ok(Plan { queue_slots: vec![1, 1], history_slots: vec![2, 2] })
        );
    }

    #[test]
    fn failures_release_waiters() {
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"h\"\nqueue = \"host\"\nfail = \"s\"\n"
        );
        assert!(checked(&source).is_ok());
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

    #[test]
    fn a_failed_dealloca_gives_its_bytes_back_and_a_failed_allocas_dealloca_succeeds() {
        // `x_free` fails with `s`, and still gives back the 80 bytes `y` needs; `y` fails too,
        // and its dealloca, with nothing to give back, signals `t`.
        let source = format!(
            "memory_quota = 100\n{HEADER}\
             [[op]]\nname = \"x\"\nqueue = \"q0\"\nwork = {{ kind = \"alloca\", buffer = \"x\", bytes = 80 }}\n\
             [[op]]\nname = \"x_free\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\nwork = {{ kind = \"dealloca\", buffer = \"x\" }}\n\
             [[op]]\nname = \"h\"\nqueue = \"host\"\nfail = \"s\"\n\
             [[op]]\nname = \"y\"\nqueue = \"q1\"\nwork = {{ kind = \"alloca\", buffer = \"y\", bytes = 80 }}\n\
             [[op]]\nname = \"z\"\nqueue = \"q1\"\nwait = [\"s>=1\"]\nwork = {{ kind = \"alloca\", buffer = \"z\", bytes = 80 }}\n\
             [[op]]\nname = \"z_free\"\nqueue = \"q1\"\nwork = {{ kind = \"dealloca\", buffer = \"z\" }}\nsignal = [\"t=1\"]\n\
             [[op]]\nname = \"y_free\"\nqueue = \"q1\"\nwork = {{ kind = \"dealloca\", buffer = \"y\" }}\n\
             [[op]]\nname = \"after\"\nqueue = \"host\"\nwait = [\"t>=1\"]\n"
        );
        assert!(checked(&source).is_ok(), "{:?}", checked(&source));
    }

    #[test]
    fn competing_allocations_are_played_in_submission_order() {
        // q1's alloca, submitted first, takes the memory; q0's waits for it, and q1 frees it
        // only after signalling what q0's later operation waits for. Had q0's alloca run first
        // (a device that starts late, or timing), both queues would be stuck.
        let source = format!(
            "memory_quota = 100\n{HEADER}\
             [[op]]\nname = \"b_alloc\"\nqueue = \"q1\"\nwork = {{ kind = \"alloca\", buffer = \"b\", bytes = 60 }}\n\
             [[op]]\nname = \"a_alloc\"\nqueue = \"q0\"\nwork = {{ kind = \"alloca\", buffer = \"a\", bytes = 60 }}\n\
             [[op]]\nname = \"a_wait\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"a_free\"\nqueue = \"q0\"\nwork = {{ kind = \"dealloca\", buffer = \"a\" }}\n\
             [[op]]\nname = \"b_signal\"\nqueue = \"q1\"\nsignal = [\"s=1\"]\n\
             [[op]]\nname = \"b_free\"\nqueue = \"q1\"\nwork = {{ kind = \"dealloca\", buffer = \"b\" }}\n"
        );
        assert_eq!(
            checked(&source),
            Ok(Plan { queue_slots: vec![3, 1], history_slots: vec![2, 2] })
        );
    }

    #[test]
    fn the_plan_counts_what_waits_behind_a_blocked_head() {
        // `a` waits for a signal submitted last; `b` and `c` queue behind it, their signals of
        // `t` pending until then. The host's signal of `t` finds both pending.
        let source = format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwait = [\"s>=1\"]\n\
             [[op]]\nname = \"b\"\nqueue = \"q0\"\nsignal = [\"t=1\"]\n\
             [[op]]\nname = \"c\"\nqueue = \"q0\"\nsignal = [\"t=2\"]\n\
             [[op]]\nname = \"h\"\nqueue = \"host\"\nsignal = [\"t=3\"]\n\
             [[op]]\nname = \"d\"\nqueue = \"q1\"\nsignal = [\"s=1\"]\n\
             [[op]]\nname = \"e\"\nqueue = \"q0\"\nsignal = [\"t=4\"]\n"
        );
        assert_eq!(
            checked(&source),
            Ok(Plan { queue_slots: vec![3, 1], history_slots: vec![2, 4] })
        );
    }

    #[test]
    fn two_signals_of_one_semaphore_in_one_operation_need_a_slot_each() {
        let source =
            format!("{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nsignal = [\"s=1\", \"s=2\"]\n");
        assert_eq!(
            checked(&source),
            Ok(Plan { queue_slots: vec![1, 1], history_slots: vec![3, 2] })
        );
    }

    #[test]
    fn generated_shapes_finish_with_the_smallest_plan() {
        let plan = |text: String| check(&parse(Path::new("g.toml"), &text).unwrap()).unwrap();
        assert_eq!(
            plan(generate::pipeline(50)),
            Plan { queue_slots: vec![1], history_slots: vec![2] }
        );
        let fan_in = plan(generate::fan_in(5 * (generate::FAN_IN + 1) + 3));
        assert_eq!(fan_in.queue_slots, vec![1; generate::FAN_IN + 1]);
        assert_eq!(fan_in.history_slots, vec![2; generate::FAN_IN + 1]);
        let many = plan(generate::many_semaphores(50));
        assert_eq!(many.queue_slots, vec![1; generate::MANY_SEMAPHORES_QUEUES]);
        assert_eq!(many.history_slots, vec![2; 50]);
    }

    #[test]
    fn memory_waiters_find_the_first_fitting_queue_at_or_after_a_position() {
        let mut waiters = MemoryWaiters::new(5);
        waiters.set(1, Some(50));
        waiters.set(3, Some(10));
        waiters.set(4, Some(70));
        assert_eq!(waiters.first_fitting(0, 9), None);
        assert_eq!(waiters.first_fitting(0, 10), Some(3));
        assert_eq!(waiters.first_fitting(0, 50), Some(1));
        assert_eq!(waiters.first_fitting(2, 100), Some(3));
        assert_eq!(waiters.first_fitting(4, 69), None);
        assert_eq!(waiters.first_fitting(4, 70), Some(4));
        waiters.set(3, None);
        assert_eq!(waiters.first_fitting(2, 60), None);
        assert!(waiters.is_waiting(1) && !waiters.is_waiting(3));
    }

    /// The plain algorithm the simulation must agree with: after each submission, sweep the
    /// queues in order until a sweep runs nothing, and read the plan off the FIFOs.
    struct Sweeping<'s> {
        scenario: &'s Scenario,
        values: Vec<u64>,
        failed: Vec<bool>,
        fifos: Vec<VecDeque<usize>>,
        committed: u64,
        buffers: Vec<Option<u64>>,
    }

    impl Sweeping<'_> {
        fn check(scenario: &Scenario) -> Result<Plan, ScenarioError> {
            let highest = Self::signals_advance(scenario)?;
            let mut model = Sweeping {
                scenario,
                values: scenario.semaphores.iter().map(|s| s.initial).collect(),
                failed: vec![false; scenario.semaphores.len()],
                fifos: vec![VecDeque::new(); scenario.queues.len()],
                committed: 0,
                buffers: vec![None; scenario.buffers.len()],
            };
            let mut plan = Plan {
                queue_slots: vec![1; scenario.queues.len()],
                history_slots: vec![2; scenario.semaphores.len()],
            };
            for (index, op) in scenario.ops.iter().enumerate() {
                for (position, &(semaphore, _)) in scenario.signals(op).iter().enumerate() {
                    let of_it = |signals: &[(usize, u64)]| {
                        signals.iter().filter(|&&(s, _)| s == semaphore).count()
                    };
                    let in_fifos: usize = model
                        .fifos
                        .iter()
                        .flatten()
                        .map(|&queued| of_it(scenario.signals(&scenario.ops[queued])))
                        .sum();
                    let needed = in_fifos + of_it(&scenario.signals(op)[..position]) + 2;
                    plan.history_slots[semaphore] = plan.history_slots[semaphore].max(needed);
                }
                match op.target {
                    Target::Queue(queue) => {
                        let slots = model.fifos[queue].len() + 1;
                        plan.queue_slots[queue] = plan.queue_slots[queue].max(slots);
                        model.fifos[queue].push_back(index);
                    }
                    Target::Host => {
                        if !model.waits_met(op) {
                            return Err(model.stuck(&highest, Some(op)));
                        }
                        let failed = scenario.waits(op).iter().any(|&(s, _)| model.failed[s]);
                        model.signal(op, failed);
                        if let Some((semaphore, _)) = op.fail {
                            model.failed[semaphore] = true;
                        }
                    }
                }
                model.sweep_until_still();
            }
            if model.fifos.iter().any(|fifo| !fifo.is_empty()) {
                return Err(model.stuck(&highest, None));
            }
            Ok(plan)
        }

        /// Every signal of the file advances its semaphore, or every one that does not is
        /// refused; the highest value each semaphore is ever signalled to.
        fn signals_advance(scenario: &Scenario) -> Result<Vec<u64>, ScenarioError> {
            let mut submitted: Vec<u64> = scenario.semaphores.iter().map(|s| s.initial).collect();
            let mut refused = Vec::new();
            for op in &scenario.ops {
                for &(semaphore, value) in scenario.signals(op) {
                    if value <= submitted[semaphore] {
                        refused.push(ScenarioError::at(
                            &scenario.path,
                            op.line,
                            format!(
                                "op `{}` signals {}={value}, which does not advance past {}",
                                scenario.op_name(op),
                                scenario.semaphores[semaphore].name,
                                submitted[semaphore]
                            ),
                        ));
                    } else {
                        submitted[semaphore] = value;
                    }
                }
            }
            ScenarioError::gathered(refused).map_or(Ok(submitted), Err)
        }

        fn sweep_until_still(&mut self) {
            let mut ran = true;
            while ran {
                ran = false;
                for queue in 0..self.fifos.len() {
                    while let Some(&index) = self.fifos[queue].front() {
                        let op = &self.scenario.ops[index];
                        let doomed = self.scenario.waits(op).iter().any(|&(s, _)| self.failed[s])
                            || matches!(op.work, WorkSpec::Host { fail: Some(_), .. });
                        let fits = match op.work {
                            WorkSpec::Alloca { bytes, .. } if !doomed => {
                                self.committed + bytes <= self.scenario.memory_quota
                            }
                            _ => true,
                        };
                        if !self.waits_met(op) || !fits {
                            break;
                        }
                        self.fifos[queue].pop_front();
                        let mut failed = doomed;
                        match op.work {
                            WorkSpec::Alloca { buffer, bytes } => {
                                let bytes = if failed { 0 } else { bytes };
                                self.committed += bytes;
                                self.buffers[buffer] = Some(bytes);
                            }
                            WorkSpec::Dealloca { buffer } => match self.buffers[buffer].take() {
                                Some(bytes) => self.committed -= bytes,
                                None => failed = true,
                            },
                            _ => {}
                        }
                        self.signal(op, failed);
                        ran = true;
                    }
                }
            }
        }

        fn waits_met(&self, op: &OpSpec) -> bool {
            self.scenario.waits(op).iter().all(|&(s, v)| self.failed[s] || self.values[s] >= v)
        }

        fn signal(&mut self, op: &OpSpec, failed: bool) {
            for &(semaphore, value) in self.scenario.signals(op) {
                if failed {
                    self.failed[semaphore] = true;
                } else if !self.failed[semaphore] {
                    self.values[semaphore] = self.values[semaphore].max(value);
                }
            }
        }

        fn stuck(&self, highest: &[u64], host: Option<&OpSpec>) -> ScenarioError {
            let heads = self.fifos.iter().filter_map(|f| f.front()).map(|&i| &self.scenario.ops[i]);
            Stuck {
                scenario: self.scenario,
                highest,
                values: &self.values,
                failed: &self.failed,
                committed: self.committed,
            }
            .error(heads, host)
        }
    }

    /// One operation before its indices are reduced to the scenario's counts.
    #[derive(Clone, Debug)]
    struct RawOp {
        target: Option<usize>,
        waits: Vec<(usize, u64)>,
        signals: Vec<(usize, u64)>,
        work: u8,
        buffer: usize,
        bytes: u64,
        fail: Option<usize>,
    }

    fn raw_op() -> impl Strategy<Value = RawOp> {
        (
            prop_oneof![4 => (0..4usize).prop_map(Some), 1 => Just(None)],
            proptest::collection::vec((0..3usize, 0..=4u64), 0..=2),
            // A step of 0 repeats the last value: a signal that does not advance.
            proptest::collection::vec(
                (0..3usize, prop_oneof![15 => 1..=2u64, 1 => Just(0)]),
                0..=2,
            ),
            0..6u8,
            (0..2usize, prop::sample::select(vec![30u64, 60, 90])),
            prop_oneof![5 => Just(None), 1 => (0..3usize).prop_map(Some)],
        )
            .prop_map(|(target, waits, signals, work, (buffer, bytes), fail)| RawOp {
                target,
                waits,
                signals,
                work,
                buffer,
                bytes,
                fail,
            })
    }

    /// Small scenarios of every kind of operation the simulation plays: waits before and after
    /// their signals, host steps, failures, and allocations competing for a small quota.
    fn scenarios() -> impl Strategy<Value = Scenario> {
        (1..=4usize, 1..=3usize, 0..=2usize, prop::sample::select(vec![60u64, 100, 1000]))
            .prop_flat_map(|counts| (Just(counts), proptest::collection::vec(raw_op(), 1..=24)))
            .prop_map(|((queues, semaphores, buffers, quota), raw)| {
                let mut submitted = vec![0; semaphores];
                let mut conditions = Vec::new();
                let mut op_names = String::new();
                let ops = raw
                    .into_iter()
                    .enumerate()
                    .map(|(index, raw)| {
                        let target = match raw.target {
                            Some(queue) => Target::Queue(queue % queues),
                            None => Target::Host,
                        };
                        let work = match (target, raw.work) {
                            (Target::Host, _) | (_, 0 | 1) => WorkSpec::Noop,
                            (_, 2) => {
                                WorkSpec::Host { duration: Default::default(), fail: Some(1) }
                            }
                            (_, 3 | 4) if buffers > 0 => {
                                WorkSpec::Alloca { buffer: raw.buffer % buffers, bytes: raw.bytes }
                            }
                            (_, 5) if buffers > 0 => {
                                WorkSpec::Dealloca { buffer: raw.buffer % buffers }
                            }
                            _ => WorkSpec::Noop,
                        };
                        let signals: Vec<_> = raw
                            .signals
                            .iter()
                            .map(|&(s, step)| {
                                let s = s % semaphores;
                                submitted[s] += step;
                                (s, submitted[s])
                            })
                            .collect();
                        OpSpec {
                            name: OpName::push(&mut op_names, &format!("op{index}")),
                            line: index + 1,
                            target,
                            conditions: Conditions::push(
                                &mut conditions,
                                raw.waits.iter().map(|&(s, v)| (s % semaphores, v)),
                                signals,
                            ),
                            work,
                            external: false,
                            fail: match target {
                                Target::Host => raw.fail.map(|s| (s % semaphores, 1)),
                                Target::Queue(_) => None,
                            },
                            cancel: None,
                            expect: OpExpect::default(),
                        }
                    })
                    .collect();
                Scenario {
                    name: "random".to_string(),
                    description: String::new(),
                    path: PathBuf::from("random.toml"),
                    workers: 2,
                    memory_quota: quota,
                    queues: (0..queues)
                        .map(|q| QueueSpec {
                            name: format!("q{q}"),
                            line: 0,
                            machine: 0,
                            device: 0,
                            group: 0,
                            wait_before_signal: true,
                            driver: DriverKind::Cpu,
                        })
                        .collect(),
                    semaphores: (0..semaphores)
                        .map(|s| SemaphoreSpec {
                            name: format!("s{s}"),
                            line: 0,
                            initial: 0,
                            scope: Scope::ProcessLocal,
                            home: Home::Queue(0),
                            expect_value: None,
                            expect_failed: None,
                        })
                        .collect(),
                    buffers: (0..buffers).map(|b| format!("b{b}")).collect(),
                    ops,
                    conditions,
                    op_names,
                    expect: TotalsExpect::default(),
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn the_event_driven_simulation_agrees_with_plain_sweeps(scenario in scenarios()) {
            prop_assert_eq!(check(&scenario), Sweeping::check(&scenario));
        }
    }
}

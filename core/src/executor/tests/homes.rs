//! Homes: processes queued on their home worker's list, taken by others when it is busy, and
//! the shared list still served (see "Homes" in the executor docs).

use std::sync::atomic::AtomicU64 as StdU64;
use std::vec;

use super::*;

/// Records the worker of each drain.
struct OnWorker {
    workers: Mutex<Vec<usize>>,
    /// `Progress` this many times before `Done`.
    progress: StdU32,
}

impl OnWorker {
    fn new() -> OnWorker {
        OnWorker::progressing(0)
    }

    fn progressing(times: u32) -> OnWorker {
        OnWorker { workers: Mutex::new(Vec::new()), progress: StdU32::new(times) }
    }

    fn ran_on(&self) -> Vec<usize> {
        self.workers.lock().unwrap().clone()
    }
}

impl Drain for OnWorker {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        self.workers.lock().unwrap().push(cx.worker());
        let left = self.progress.load(SEQ);
        if left == 0 {
            return Drained::Done(Ok(()));
        }
        self.progress.store(left - 1, SEQ);
        Drained::Progress
    }

    fn finish(&self, _outcome: Result<(), Failure>) {}
}

#[test]
fn a_home_is_kept_below_the_worker_count_and_dropped_at_or_beyond_it() {
    let drain = OnWorker::new();
    assert_eq!(Process::new(&drain, Class::Immediate).home(), None);
    assert_eq!(Process::new(&drain, Class::Immediate).with_home(3).home(), Some(3));
    assert_eq!(Process::new(&drain, Class::Immediate).with_home(255).home(), None);
    assert_eq!(Process::new(&drain, Class::Immediate).with_home(usize::MAX).home(), None);
    // Beyond this executor's two workers: queued on the shared list like a process without one.
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    let process = Process::new(&drain, Class::Immediate).with_home(3);
    executor.submit(&process).unwrap();
    assert!(!executor.immediate().looks_empty());
    assert!(executor.homes_look_empty());
}

#[test]
fn a_process_with_a_home_waits_on_its_home_list_and_runs_there_first() {
    let (homed, shared) = (OnWorker::new(), OnWorker::new());
    let homed_process = Process::new(&homed, Class::Immediate).with_home(1);
    let shared_process = Process::new(&shared, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    let mut first = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    let mut second = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
    executor.submit(&shared_process).unwrap();
    executor.submit(&homed_process).unwrap();
    assert!(!executor.homes[1].0.looks_empty(), "on worker 1's own list");
    // Worker 1 takes its own work before the older process on the shared list.
    assert!(second.step());
    assert_eq!(homed.ran_on(), [1]);
    assert!(shared.ran_on().is_empty());
    assert!(first.step());
    assert_eq!(shared.ran_on(), [0]);
    assert!(!first.step() && !second.step());
}

#[test]
fn a_worker_with_nothing_of_its_own_takes_another_workers_home_work() {
    let drain = OnWorker::new();
    let process = Process::new(&drain, Class::Immediate).with_home(1);
    let executor = TestExecutor::<8>::new(YieldingFutex, 3).unwrap();
    let mut first = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    executor.submit(&process).unwrap();
    assert!(first.step(), "worker 1 is busy elsewhere (never steps): worker 0 takes its work");
    assert_eq!(drain.ran_on(), [0]);
    assert!(process.is_completed());
    assert_eq!(executor.live(), 0);
}

#[test]
fn a_worker_kept_busy_by_its_home_list_still_serves_the_shared_list() {
    // A process at home on worker 0 that always has more to do: its home list never runs dry.
    let busy = OnWorker::progressing(u32::MAX);
    let busy_process = Process::new(&busy, Class::Immediate).with_home(0);
    let waiting = OnWorker::new();
    let waiting_process = Process::new(&waiting, Class::Immediate);
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    executor.submit(&busy_process).unwrap();
    executor.submit(&waiting_process).unwrap();
    let mut steps = 0;
    while !waiting_process.is_completed() {
        assert!(worker.step());
        steps += 1;
        assert!(steps <= SHARED_LIST_FIRST_EVERY as usize + 1, "the shared list was starved");
    }
    assert_eq!(waiting.ran_on(), [0]);
    executor.cancel(&busy_process);
    while worker.step() {}
    assert!(busy_process.is_completed());
}

#[test]
fn a_dependent_is_handed_off_only_to_its_home_worker() {
    let (upstream_drain, at_home, elsewhere) = (OnWorker::new(), OnWorker::new(), OnWorker::new());
    let upstream = Process::new(&upstream_drain, Class::Immediate).with_home(0);
    let stays = Process::new(&at_home, Class::Immediate).with_home(0);
    let moves = Process::new(&elsewhere, Class::Immediate).with_home(1);
    let dependents = [&stays, &moves];
    upstream.set_dependents(&dependents).unwrap();
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    let mut first = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    let mut second = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
    executor.submit(&stays).unwrap();
    executor.submit(&moves).unwrap();
    executor.submit(&upstream).unwrap();
    assert!(first.step(), "runs the upstream");
    assert!(stays.state().load().is_running(), "claimed by worker 0, its home");
    assert!(moves.state().load().is_queued(), "queued for worker 1");
    assert!(!executor.homes[1].0.looks_empty());
    assert!(second.step());
    assert_eq!(elsewhere.ran_on(), [1]);
    assert!(first.step());
    assert_eq!(at_home.ran_on(), [0]);
    assert_eq!(executor.live(), 0);
}

#[test]
fn processes_waiting_on_home_lists_are_cancelled_at_shutdown_and_workers_return() {
    let drains: Vec<Scripted> = (0..6).map(|_| Scripted::done()).collect();
    let processes: Vec<Process> = drains
        .iter()
        .enumerate()
        .map(|(index, drain)| Process::new(drain, Class::Immediate).with_home(index % 3))
        .collect();
    let executor = TestExecutor::<8>::new(YieldingFutex, 2).unwrap();
    for process in &processes {
        executor.submit(process).unwrap();
    }
    executor.shutdown();
    // Worker 1 never runs: worker 0 takes its home work too, cancels it all and returns.
    executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap().run();
    assert!(executor.is_quiescent());
    for drain in &drains {
        assert_eq!(drain.outcomes(), [Err(Failure::Cancelled)]);
        assert_eq!(drain.drains.load(SEQ), 0);
    }
}

/// One task of a stencil, by its cell: checks that its dependencies finished before it ran,
/// counts its drains, and fails when it is the chosen cell.
struct StencilTask<'a> {
    cell: usize,
    failing: usize,
    outcomes: &'a [StdU64],
    drains: &'a [StdU32],
}

const WIDTH: usize = 10;
const NOT_FINISHED: u64 = 0;
const FINISHED_OK: u64 = 1;
const FINISHED_FAILED: u64 = 2;

/// The cells of the step before that `cell` reads: its own column and its neighbours.
fn stencil_dependencies(cell: usize) -> impl Iterator<Item = usize> {
    let (step, point) = (cell / WIDTH, cell % WIDTH);
    let columns = if step == 0 { 0..0 } else { point.saturating_sub(1)..(point + 2).min(WIDTH) };
    columns.map(move |column| (step - 1) * WIDTH + column)
}

impl Drain for StencilTask<'_> {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.drains[self.cell].fetch_add(1, SEQ);
        for dependency in stencil_dependencies(self.cell) {
            assert_ne!(self.outcomes[dependency].load(SEQ), NOT_FINISHED, "ran too early");
        }
        if self.cell == self.failing {
            Drained::Done(Err(Failure::Cancelled))
        } else {
            Drained::Done(Ok(()))
        }
    }

    fn finish(&self, outcome: Result<(), Failure>) {
        let word = if outcome.is_ok() { FINISHED_OK } else { FINISHED_FAILED };
        assert_eq!(self.outcomes[self.cell].swap(word, SEQ), NOT_FINISHED, "finished twice");
    }
}

#[test]
fn a_hundred_thousand_stencil_tasks_with_mixed_homes_run_once_in_order_and_fail_downstream() {
    const WORKERS: usize = 3;
    let steps = if cfg!(miri) { 8 } else { 10_000 };
    let cells = WIDTH * steps;
    let failing = (steps / 2) * WIDTH + WIDTH / 2;
    let outcomes: Vec<StdU64> = (0..cells).map(|_| StdU64::new(NOT_FINISHED)).collect();
    let drains: Vec<StdU32> = (0..cells).map(|_| StdU32::new(0)).collect();
    let tasks: Vec<StencilTask> = (0..cells)
        .map(|cell| StencilTask { cell, failing, outcomes: &outcomes, drains: &drains })
        .collect();
    // Homes by column: a block per worker, none, and one beyond the worker count.
    let processes: Vec<Process> = tasks
        .iter()
        .map(|task| {
            let point = task.cell % WIDTH;
            let process = Process::new(task, Class::Immediate);
            match point % 4 {
                0 => process,
                1 => process.with_home(7),
                _ => process.with_home(point * WORKERS / WIDTH),
            }
        })
        .collect();
    let mut dependents: Vec<Vec<&Process>> = vec![Vec::new(); cells];
    for (cell, process) in processes.iter().enumerate() {
        for dependency in stencil_dependencies(cell) {
            dependents[dependency].push(process);
        }
    }
    let executor = TestExecutor::<8>::new(YieldingFutex, WORKERS).unwrap();
    let submit = || {
        for (process, dependents) in processes.iter().zip(&dependents) {
            process.set_dependents(dependents).unwrap();
        }
        for process in &processes {
            executor.submit(process).unwrap();
        }
    };
    with_workers(&executor, WORKERS, submit, || executor.live() == 0);
    // The model: the failing cell and every cell it reaches through the stencil fail, and only
    // the failing cell of those was drained; every other cell ran once and finished Ok.
    let (failing_step, failing_point) = (failing / WIDTH, failing % WIDTH);
    for cell in 0..cells {
        let (step, point) = (cell / WIDTH, cell % WIDTH);
        let downstream =
            step > failing_step && point.abs_diff(failing_point) <= step - failing_step;
        let (outcome, drained) = if cell == failing {
            (FINISHED_FAILED, 1)
        } else if downstream {
            (FINISHED_FAILED, 0)
        } else {
            (FINISHED_OK, 1)
        };
        assert_eq!(outcomes[cell].load(SEQ), outcome, "cell {cell}");
        assert_eq!(drains[cell].load(SEQ), drained, "cell {cell}");
    }
}

//! The executor on Windows threads, parking through `WindowsFutex` (`WaitOnAddress`): bursts of
//! activations with every worker parked in between, a compute process that fans wake-ups out
//! through the wake tree, and shutdown waking parked workers. Every drain is counted: each
//! process runs exactly once per submission, and the futex really was waited on and woken.
#![cfg(windows)]

use std::io::{self, Write};
use std::process;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{
    Class, Drain, DrainContext, Drained, Executor, Futex, FutexWord, Process, RoundRobin,
    SpinPolicy,
};
use causeway_platform_windows::WindowsFutex;

const WORKERS: usize = 4;
/// Waits longer than this fail the test; a test running longer than twice this aborts.
const DEADLINE: Duration = Duration::from_secs(60);

/// `WindowsFutex`, counting what the executor asks of it.
#[derive(Default)]
struct CountingFutex {
    waits: AtomicUsize,
    wakes: AtomicUsize,
}

impl Futex for CountingFutex {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        self.waits.fetch_add(1, Ordering::Relaxed);
        WindowsFutex.wait(word, expected, timeout);
    }

    fn wake_one(&self, word: &FutexWord) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        WindowsFutex.wake_one(word);
    }

    fn wake_all(&self, word: &FutexWord) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        WindowsFutex.wake_all(word);
    }
}

type TestExecutor<'p> = Executor<'p, &'p CountingFutex, 16, WORKERS>;

/// Aborts the process if the test outlives twice the deadline (a worker that cannot be joined).
fn with_watchdog(test: &'static str, body: impl FnOnce()) {
    let (finished, finished_signal) = mpsc::channel::<()>();
    let watchdog = thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = finished_signal.recv_timeout(DEADLINE * 2) {
            let _ = writeln!(io::stderr(), "{test}: still running after {:?}", DEADLINE * 2);
            process::abort();
        }
    });
    body();
    drop(finished);
    watchdog.join().expect("the watchdog never panics");
}

fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "not reached within {DEADLINE:?}: {what}");
        thread::sleep(Duration::from_micros(200));
    }
}

/// Runs `WORKERS` workers on `executor` around `body`, shutting down even if `body` panics.
fn with_workers(executor: &TestExecutor<'_>, body: impl FnOnce()) {
    thread::scope(|scope| {
        for index in 0..WORKERS {
            let mut worker = executor
                .worker::<RoundRobin>(index, SpinPolicy::Fixed(16))
                .expect("a free worker index");
            scope.spawn(move || worker.run());
        }
        struct ShutdownOnExit<'a, 'p>(&'a TestExecutor<'p>);
        impl Drop for ShutdownOnExit<'_, '_> {
            fn drop(&mut self) {
                self.0.shutdown();
            }
        }
        let _shutdown = ShutdownOnExit(executor);
        body();
    });
}

/// Counts its drains; finishes successfully.
#[derive(Default)]
struct Counted {
    drains: AtomicU32,
    finishes: AtomicU32,
}

impl Drain for Counted {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        self.drains.fetch_add(1, Ordering::Relaxed);
        Drained::Done(Ok(()))
    }

    fn finish(&self, outcome: Result<(), causeway_core::Failure>) {
        assert_eq!(outcome, Ok(()));
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn bursts_of_activations_wake_parked_workers_and_run_each_once() {
    const PROCESSES: usize = 64;
    const BURSTS: u32 = 200;
    with_watchdog("bursts", || {
        let futex = CountingFutex::default();
        let drains: Vec<Counted> = (0..PROCESSES).map(|_| Counted::default()).collect();
        let processes: Vec<Process<'_>> =
            drains.iter().map(|drain| Process::new(drain, Class::Immediate)).collect();
        let executor = TestExecutor::new(&futex, WORKERS).unwrap();
        with_workers(&executor, || {
            for burst in 1..=BURSTS {
                // Let every worker run out of work and park before the burst arrives.
                thread::sleep(Duration::from_micros(500));
                for process in &processes {
                    executor.submit(process).unwrap();
                }
                wait_until("the burst completes", || executor.live() == 0);
                for (process, drain) in processes.iter().zip(&drains) {
                    assert!(process.is_completed());
                    assert_eq!(drain.drains.load(Ordering::Relaxed), burst, "exactly once");
                    process.rearm().unwrap();
                }
            }
        });
        for drain in &drains {
            assert_eq!(drain.finishes.load(Ordering::Relaxed), BURSTS);
        }
        let (waits, wakes) =
            (futex.waits.load(Ordering::Relaxed), futex.wakes.load(Ordering::Relaxed));
        assert!(
            waits > 0 && wakes > 0,
            "parked through WaitOnAddress: {waits} waits, {wakes} wakes"
        );
        println!("{waits} waits and {wakes} wakes over {BURSTS} bursts of {PROCESSES}");
    });
}

/// A compute process with a wake budget of every worker: drained concurrently until its work
/// runs out; the wake tree must bring parked workers in. Its first drain raises the budget and
/// sleeps; the wake that follows notifies the whole budget (a raise alone wakes nobody).
struct Tiles {
    budget_raised: AtomicBool,
    next: AtomicU32,
    total: u32,
    seen_workers: [AtomicBool; WORKERS],
    done: AtomicU32,
}

impl Drain for Tiles {
    fn drain(&self, cx: &mut DrainContext<'_, '_>) -> Drained {
        if !self.budget_raised.swap(true, Ordering::Relaxed) {
            cx.set_wake_budget(WORKERS as u32);
            return Drained::Sleep;
        }
        self.seen_workers[cx.worker()].store(true, Ordering::Relaxed);
        let tile = self.next.fetch_add(1, Ordering::Relaxed);
        if tile >= self.total {
            return Drained::Done(Ok(()));
        }
        // A little work per tile, so several workers overlap.
        thread::sleep(Duration::from_micros(50));
        self.done.fetch_add(1, Ordering::Relaxed);
        Drained::Progress
    }
}

#[test]
fn a_wide_compute_process_wakes_parked_workers_through_the_wake_tree() {
    with_watchdog("wake tree", || {
        let futex = CountingFutex::default();
        let tiles = Tiles {
            budget_raised: AtomicBool::new(false),
            next: AtomicU32::new(0),
            total: 2_000,
            seen_workers: Default::default(),
            done: AtomicU32::new(0),
        };
        let process = Process::new(&tiles, Class::Compute);
        let executor = TestExecutor::new(&futex, WORKERS).unwrap();
        with_workers(&executor, || {
            executor.submit(&process).unwrap();
            wait_until("the budget is raised", || tiles.budget_raised.load(Ordering::Relaxed));
            // Every worker runs out of work and parks; the wake then fans out to all of them.
            wait_until("every worker parks", || futex.waits.load(Ordering::Relaxed) >= WORKERS);
            thread::sleep(Duration::from_millis(20));
            executor.wake(&process);
            wait_until("the compute process completes", || process.is_completed());
        });
        assert_eq!(tiles.done.load(Ordering::Relaxed), 2_000, "every tile exactly once");
        let helpers = tiles.seen_workers.iter().filter(|w| w.load(Ordering::Relaxed)).count();
        assert!(helpers >= 2, "parked workers joined the drain ({helpers} of {WORKERS})");
    });
}

#[test]
fn shutdown_wakes_every_parked_worker() {
    with_watchdog("shutdown", || {
        let futex = CountingFutex::default();
        let executor = TestExecutor::new(&futex, WORKERS).unwrap();
        let started = Instant::now();
        // `with_workers` shuts down on exit and joins the workers: that returns only if the
        // shutdown reached every parked worker through the futex.
        with_workers(&executor, || {
            wait_until("every worker parks", || futex.waits.load(Ordering::Relaxed) >= WORKERS);
        });
        assert!(started.elapsed() < DEADLINE);
    });
}

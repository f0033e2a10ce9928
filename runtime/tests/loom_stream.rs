//! Loom models of the streaming process's protocol (run with `RUSTFLAGS="--cfg loom"`, see the
//! stream module docs), driving the real `Stream` through core's real executor with tiny
//! capacities (2 slots, 2 workers):
//! - no lost wake-up: two producers push while the only worker drains and sleeps; every
//!   operation runs (a lost wake-up leaves the worker spinning on nothing, which loom reports
//!   as exceeding its branch budget);
//! - close racing a push, with two workers draining: an accepted operation always runs, a
//!   refused one never does, each at most once, and the process completes exactly once;
//! - a full ring hands the operation back, and nothing is stranded;
//! - with two drainers popping out of order, a producer may find its slot still being
//!   vacated (the ring-level refusal, whose producer may hold the wake duty): each push is
//!   refused or run exactly once, and the stream still completes;
//! - a stream started while every slot is taken waits on the overflow list, and a worker claims
//!   it there (on its own thread) while a producer pushes: the producer's wake may find no slot
//!   yet, and the drain decides its `Sleep` with a plain load of the count, so only core's
//!   compute claim meeting that wake keeps the push from being stranded (it fails without the
//!   claim's meeting).
#![cfg(loom)]

#[path = "../../core/tests/loom_support/mod.rs"]
mod loom_support;

use causeway_core::executor::{
    Class, Drain, DrainContext, Drained, Executor, Process, RoundRobin, SpinPolicy, Worker,
};
use causeway_runtime::{Operation, Producer, PushError, Stream};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use loom_support::LoomFutex;

type ModelExecutor = Executor<'static, LoomFutex, 2, 2>;
type ModelWorker = Worker<'static, 'static, LoomFutex, RoundRobin, 2, 2>;

/// An operation that counts its runs.
struct Tick(&'static AtomicUsize);

impl Operation for Tick {
    fn run(self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

struct Model {
    executor: &'static ModelExecutor,
    stream: &'static Stream<Tick, 2>,
    process: &'static Process<'static>,
    ticks: &'static AtomicUsize,
}

fn model(workers: usize) -> Model {
    let futex = LoomFutex::new();
    let executor: &'static ModelExecutor =
        Box::leak(Box::new(ModelExecutor::new(futex, workers).unwrap()));
    let stream: &'static Stream<Tick, 2> = Box::leak(Box::new(Stream::new()));
    let process = Box::leak(Box::new(Process::new(stream, Class::Compute)));
    Model { executor, stream, process, ticks: Box::leak(Box::new(AtomicUsize::new(0))) }
}

fn bounded(body: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    // A worker step touches a dozen atomics (list, overflow, slot scan) before the stream's
    // own, so executions are longer than loom's default branch budget allows.
    builder.max_branches = 20_000;
    builder.check(body);
}

/// Steps `worker` until `done` holds, yielding between idle steps so loom schedules the others.
fn step_until(worker: &mut ModelWorker, done: impl Fn() -> bool) {
    while !done() {
        if !worker.step() {
            thread::yield_now();
        }
    }
}

/// Checks, on a fresh worker 0 and within a few steps each, that the `accepted` operations all
/// run before the close (whose wake would mask a lost one: each ran already, or the process is
/// runnable), and that the process completes after it.
fn runs_then_completes_on_close(
    executor: &'static ModelExecutor,
    producer: &Producer<'static, 'static, Tick, 2>,
    process: &'static Process<'static>,
    ticks: &AtomicUsize,
    accepted: usize,
) {
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    for _ in 0..4 {
        if ticks.load(Ordering::Relaxed) == accepted {
            break;
        }
        worker.step();
    }
    assert_eq!(ticks.load(Ordering::Relaxed), accepted, "an accepted operation is stranded");
    producer.close();
    for _ in 0..4 {
        if process.is_completed() {
            break;
        }
        worker.step();
    }
    assert!(process.is_completed());
    assert_eq!(ticks.load(Ordering::Relaxed), accepted);
}

#[test]
fn two_producers_and_a_sleeping_drainer_lose_no_wake_up() {
    bounded(|| {
        let Model { executor, stream, process, ticks } = model(1);
        let producer = stream.start(executor, process).unwrap();
        // Both producers on their own threads, so the drainer may already be asleep when
        // they reserve, and neither push is ordered before the drains by this thread.
        let producers: Vec<_> = (0..2)
            .map(|_| thread::spawn(move || assert!(producer.push(Tick(ticks)).is_ok())))
            .collect();
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || ticks.load(Ordering::Relaxed) == 2);
        for producer in producers {
            producer.join().unwrap();
        }
        producer.close();
        step_until(&mut worker, || process.is_completed());
        assert_eq!(ticks.load(Ordering::Relaxed), 2);
        assert_eq!(process.failure(), None);
    });
}

#[test]
fn an_accepted_push_always_runs_even_racing_close_and_two_drainers() {
    bounded(|| {
        let Model { executor, stream, process, ticks } = model(2);
        let producer = stream.start(executor, process).unwrap();
        let pusher = thread::spawn(move || producer.push(Tick(ticks)).is_ok());
        let helper = thread::spawn(move || {
            let mut worker = executor.worker::<RoundRobin>(1, SpinPolicy::Park).unwrap();
            step_until(&mut worker, || executor.live() == 0);
        });
        producer.close();
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || process.is_completed());
        let accepted = pusher.join().unwrap();
        helper.join().unwrap();
        assert_eq!(ticks.load(Ordering::Relaxed), usize::from(accepted));
        assert_eq!(stream.queued(), 0);
    });
}

#[test]
fn a_full_ring_hands_back_and_strands_nothing() {
    bounded(|| {
        let Model { executor, stream, process, ticks } = model(1);
        let producer = stream.start(executor, process).unwrap();
        // Two slots, three pushes from two threads before any drain can free one.
        let other = thread::spawn(move || producer.push(Tick(ticks)).is_ok());
        let mut accepted = usize::from(producer.push(Tick(ticks)).is_ok());
        match producer.push(Tick(ticks)) {
            Ok(()) => accepted += 1,
            Err(PushError::Full(_)) => {}
            Err(PushError::Closed(_)) => panic!("nobody closed the stream"),
            Err(_) => panic!("an unknown refusal"),
        }
        let accepted = accepted + usize::from(other.join().unwrap());
        assert!(accepted >= 2, "at most one of three pushes is refused by two slots");
        let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
        step_until(&mut worker, || ticks.load(Ordering::Relaxed) == accepted);
        producer.close();
        step_until(&mut worker, || process.is_completed());
        assert_eq!(ticks.load(Ordering::Relaxed), accepted);
    });
}

#[test]
fn slots_vacated_out_of_order_refuse_or_accept_each_push_once() {
    bounded(|| {
        let Model { executor, stream, process, ticks } = model(2);
        let producer = stream.start(executor, process).unwrap();
        // Both slots filled before the workers start: the race that matters is the third push
        // against two workers popping, and exploring the first two pushes' interleavings too
        // took loom minutes (at this preemption bound) for no schedule the check needs.
        let mut accepted = (0..2).filter(|_| producer.push(Tick(ticks)).is_ok()).count();
        // Two steps each and no spinning: with two idle spinners, loom (which has no
        // fairness) could starve the producer forever, and a livelock budget could not tell
        // that from a lost wake-up. Bounded steps make the check below decisive instead.
        let workers: Vec<_> = (0..2)
            .map(|index| {
                thread::spawn(move || {
                    let mut worker =
                        executor.worker::<RoundRobin>(index, SpinPolicy::Park).unwrap();
                    for _ in 0..2 {
                        worker.step();
                    }
                })
            })
            .collect();
        // The third push while two workers drain: it may find its slot still being vacated by a
        // worker that popped out of order (without the refusal's count repair the stream never
        // empties, and the check below fails).
        accepted += usize::from(producer.push(Tick(ticks)).is_ok());
        for worker in workers {
            worker.join().unwrap();
        }
        assert!(accepted >= 2, "two free slots accept at least two of three pushes");
        // Before closing (whose wake would mask a lost one): every accepted operation is still
        // reachable, i.e. ran already or the process is runnable.
        runs_then_completes_on_close(executor, &producer, process, ticks, accepted);
    });
}

/// A compute process that finishes on its first drain: it holds a slot until a worker runs it.
struct Filler;

impl Drain for Filler {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        Drained::Done(Ok(()))
    }
}

#[test]
fn a_stream_claimed_from_overflow_while_a_producer_pushes_loses_no_wake_up() {
    bounded(|| {
        let Model { executor, stream, process, ticks } = model(1);
        // Both slots taken, so the stream goes onto the overflow list.
        for _ in 0..2 {
            let filler = Box::leak(Box::new(Process::new(&Filler, Class::Compute)));
            executor.submit(filler).unwrap();
        }
        let producer = stream.start(executor, process).unwrap();
        // The producer's wake may land before the stream has a slot, or while the worker claims
        // it: the wake then meets the claim on the process's state word (core's invariant 6),
        // the stream's own plain load deciding its `Sleep`.
        let pusher = thread::spawn(move || assert!(producer.push(Tick(ticks)).is_ok()));
        let drainer = thread::spawn(move || {
            let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
            // The fillers' drains, the claim from overflow, the stream's first drain.
            for _ in 0..4 {
                worker.step();
            }
        });
        pusher.join().unwrap();
        drainer.join().unwrap();
        // The push returned: its operation ran, or the stream is runnable and runs it now.
        runs_then_completes_on_close(executor, &producer, process, ticks, 1);
    });
}

//! Invocations ordered by fences: the sequential and pipelined examples, failure
//! propagation through signal fences, resolution counts and the frontiers signals carry.
#![cfg(not(loom))]

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use causeway_core::axis::{Axis, Domain};
use causeway_core::fence::Fence;
use causeway_core::frontier::{Frontier, Point};
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::{Failure, Lookup, Semaphore, SignalError};
use causeway_runtime::{
    block_on, CpuPool, FenceExt, InvokeError, Invoker, PoolConfig, Spawner, FRONTIER_CAPACITY,
};

const HERE: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

fn timeline() -> &'static Semaphore {
    Box::leak(Box::new(Semaphore::new(0, Scope::ProcessLocal, HERE)))
}

fn fence(points: &[(&'static Semaphore, u64)]) -> Fence<'static> {
    let mut fence = Fence::new();
    for &(semaphore, value) in points {
        fence.insert(semaphore, value).expect("test fences have at most four points");
    }
    fence
}

fn context<'s, 'e>(spawner: &'s Spawner<'e>, ordinal: u64) -> Invoker<'s, 'e> {
    let endpoint = Endpoint { queue: ordinal, ..HERE };
    Invoker::new(spawner, Axis::new(0, Domain::Host, ordinal), endpoint)
}

fn user_signal(semaphore: &Semaphore, value: u64) {
    let user = Point::new(Axis::new(0, Domain::Host, 999), value);
    semaphore
        .signal(value, user, &Frontier::<FRONTIER_CAPACITY>::new())
        .expect("an advancing signal");
}

type Log = Arc<Mutex<Vec<&'static str>>>;

/// A host function that records its name and returns it.
fn step(log: &Log, name: &'static str) -> impl FnOnce() -> Result<&'static str, Failure> {
    let log = Arc::clone(log);
    move || {
        log.lock().unwrap().push(name);
        Ok(name)
    }
}

#[test]
fn sequential_invocation_advances_the_timeline_by_one() {
    let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
    let spawner = Spawner::new(pool.executor());
    let invoker = context(&spawner, 1);
    let my_timeline = timeline();
    let t = my_timeline.value();
    let wait_fence = fence(&[(my_timeline, t)]);
    let signal_fence = fence(&[(my_timeline, t + 1)]);
    let invocation = invoker.invoke_async(|| Ok(42), &wait_fence, &signal_fence).unwrap();
    assert_eq!(block_on(signal_fence.wait()), Ok(()));
    assert_eq!(my_timeline.value(), t + 1);
    assert_eq!(invocation.wait(), Ok(42));
    // The blocking form, chained on the same timeline.
    assert_eq!(
        invoker.invoke(|| Ok("again"), &signal_fence, &fence(&[(my_timeline, t + 2)])),
        Ok("again")
    );
    assert_eq!(my_timeline.value(), t + 2);
}

/// The pipelined example on one user timeline: everything is issued up front, the user
/// releases the input, then blocks once on the final fence.
#[test]
fn pipelined_invocations_issue_without_blocking_and_retire_in_fence_order() {
    let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
    let spawner = Spawner::new(pool.executor());
    let invoker = context(&spawner, 2);
    let (my_timeline, input) = (timeline(), timeline());
    let log: Log = Arc::default();

    let fence_a = fence(&[(input, 1)]);
    let fence_b = fence(&[(my_timeline, 1)]);
    let fence_c = fence(&[(my_timeline, 5)]);
    let fn0 = invoker.invoke_async(step(&log, "fn0"), &fence_a, &fence_b).unwrap();
    let fn1 =
        invoker.invoke_async(step(&log, "fn1"), &fence_b, &fence(&[(my_timeline, 2)])).unwrap();
    let fn2 =
        invoker.invoke_async(step(&log, "fn2"), &fence_b, &fence(&[(my_timeline, 3)])).unwrap();
    let fn3 = invoker
        .invoke_async(step(&log, "fn3"), &Fence::new(), &fence(&[(my_timeline, 4)]))
        .unwrap();
    let fn4 = invoker.invoke_async(step(&log, "fn4"), &fence_a, &fence_c).unwrap();

    // Issued, nothing ran: the input is not there and the context retires in order.
    thread::sleep(Duration::from_millis(20));
    assert!(log.lock().unwrap().is_empty());
    assert_eq!((my_timeline.value(), invoker.retired()), (0, 0));
    // Every signal is already recorded (pending), with the frontier of its invocation.
    let pending = my_timeline.lookup(1);
    assert!(
        matches!(pending, Lookup::Tracked { origin, reached: false, .. } if origin == fn0.point())
    );

    user_signal(input, 1);
    assert_eq!(block_on(fence_c.wait()), Ok(()));

    assert_eq!(*log.lock().unwrap(), ["fn0", "fn1", "fn2", "fn3", "fn4"]);
    assert_eq!(my_timeline.value(), 5);
    assert_eq!(invoker.retired(), 5);
    let results: Vec<_> = [fn0, fn1, fn2, fn3, fn4].into_iter().map(|i| i.wait()).collect();
    assert_eq!(results, [Ok("fn0"), Ok("fn1"), Ok("fn2"), Ok("fn3"), Ok("fn4")]);
    // fn0 and fn4 waited at run time for the input; fn1 and fn2 knew fn0 (same context):
    // elided, no wait armed at all.
    let counts = invoker.counts();
    assert_eq!((counts.device, counts.elided, counts.satisfied), (2, 2, 0));
}

#[test]
fn a_failed_host_function_fails_its_signals_and_everything_downstream() {
    let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
    let spawner = Spawner::new(pool.executor());
    let invoker = context(&spawner, 3);
    let (first, second) = (timeline(), timeline());
    let ran_downstream = Arc::new(Mutex::new(false));
    let failing = invoker.invoke_async(
        || Err::<(), _>(Failure::Application(3)),
        &Fence::new(),
        &fence(&[(first, 1)]),
    );
    let witness = Arc::clone(&ran_downstream);
    let downstream = invoker.invoke_async(
        move || {
            *witness.lock().unwrap() = true;
            Ok(())
        },
        &fence(&[(first, 1)]),
        &fence(&[(second, 1)]),
    );
    assert_eq!(failing.unwrap().wait(), Err(InvokeError::Failed(Failure::Application(3))));
    assert_eq!(downstream.unwrap().wait(), Err(InvokeError::Failed(Failure::Application(3))));
    assert!(!*ran_downstream.lock().unwrap(), "a failed wait skips the host function");
    assert_eq!(first.failure(), Some(Failure::Application(3)));
    assert_eq!(second.failure(), Some(Failure::Application(3)));
    assert_eq!(block_on(fence(&[(second, 1)]).wait()), Err(Failure::Application(3)));

    // A timeline that failed before the invocation was issued fails it the same way.
    let already = invoker.invoke_async(|| Ok(()), &fence(&[(second, 1)]), &Fence::new());
    assert_eq!(already.unwrap().wait(), Err(InvokeError::Failed(Failure::Application(3))));
}

#[test]
fn a_panicking_host_function_fails_its_signals_and_the_context_moves_on() {
    let pool = CpuPool::start(PoolConfig::with_workers(1)).unwrap();
    let spawner = Spawner::new(pool.executor());
    let invoker = context(&spawner, 4);
    let (broken, fine) = (timeline(), timeline());
    let panicking = invoker
        .invoke_async(
            || -> Result<(), Failure> { panic!("a host function panics (the test expects this)") },
            &Fence::new(),
            &fence(&[(broken, 1)]),
        )
        .unwrap();
    let after = invoker.invoke_async(|| Ok(1), &Fence::new(), &fence(&[(fine, 1)])).unwrap();
    assert_eq!(panicking.wait(), Err(InvokeError::Panicked));
    assert_eq!(broken.failure(), Some(Failure::PANICKED));
    assert_eq!(after.wait(), Ok(1));
    assert_eq!(fine.value(), 1);
}

#[test]
fn a_refused_signal_point_is_reported_at_issue_and_records_nothing() {
    let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
    let spawner = Spawner::new(pool.executor());
    let invoker = context(&spawner, 5);
    let (unrecorded, stale) = (timeline(), timeline());
    user_signal(stale, 4);
    let refused = invoker.invoke_async(
        || -> Result<(), Failure> { unreachable!("issue refused; the function never runs") },
        &Fence::new(),
        &fence(&[(unrecorded, 1), (stale, 2)]),
    );
    assert_eq!(
        refused.unwrap_err(),
        InvokeError::Signal { index: 1, error: SignalError::NotAdvancing { value: 2, current: 4 } }
    );
    // All or none: the first point was reserved, then withdrawn — nothing pending, nothing
    // failed, and the context took no turn.
    assert_eq!(unrecorded.with_history(|h| (h.submitted(), h.pending())), (0, 0));
    assert_eq!((unrecorded.failure(), stale.failure()), (None, None));
    assert_eq!(invoker.frontier().get(invoker.axis()), None);
    // So the same invocation, corrected, runs as the context's first and signals the point
    // the refusal left free.
    let corrected = invoker
        .invoke_async(|| Ok(7), &Fence::new(), &fence(&[(unrecorded, 1), (stale, 5)]))
        .unwrap();
    assert_eq!(corrected.point().epoch, 1);
    assert_eq!(corrected.wait(), Ok(7));
    assert_eq!((unrecorded.value(), stale.value()), (1, 5));
}

#[test]
fn waits_across_contexts_import_the_signaller_frontier() {
    let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
    let spawner = Spawner::new(pool.executor());
    let (producer, consumer) = (context(&spawner, 6), context(&spawner, 7));
    let (input, handoff, output) = (timeline(), timeline(), timeline());
    let produced =
        producer.invoke_async(|| Ok(()), &fence(&[(input, 1)]), &fence(&[(handoff, 1)])).unwrap();
    let consumed =
        consumer.invoke_async(|| Ok(()), &fence(&[(handoff, 1)]), &fence(&[(output, 1)])).unwrap();
    // Issued before the producer ran: a run-time wait, which imported the producer's frontier.
    assert_eq!(consumer.counts().device, 1);
    assert!(consumed.frontier().knows(produced.point()));
    assert_eq!(consumed.frontier().get(producer.axis()), Some(1));
    user_signal(input, 1);
    assert_eq!(consumed.wait(), Ok(()));
    assert_eq!(produced.wait(), Ok(()));
    // The output signal carries the consumer's frontier, which includes the producer.
    match output.lookup(1) {
        Lookup::Tracked { frontier, reached: true, .. } => {
            assert_eq!(frontier.get(producer.axis()), Some(1));
            assert_eq!(frontier.get(consumer.axis()), Some(1));
        }
        other => panic!("output@1 should be a reached tracked signal, found {other:?}"),
    }
    // Now reached: a further wait on it is satisfied at issue, nothing armed at run time.
    let later = consumer.invoke_async(|| Ok(()), &fence(&[(input, 1)]), &Fence::new()).unwrap();
    assert_eq!(later.wait(), Ok(()));
    assert_eq!(consumer.counts().satisfied, 1);
}

/// Invocation `a` (100 ms) signals `s` and `t`; `w`, on another context, waits on `s` — so that
/// context learns `a` — and `s` fails while `a` still runs; `z`, next on `w`'s context, waits
/// on `t`, which only `a` signals, and is elided by what `w` imported. `w` ends only once `a`
/// has, so `z` runs after `a`.
#[test]
fn an_invocation_whose_wait_fails_ends_after_the_signal_it_imported() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
    let spawner = Spawner::new(pool.executor());
    let (producer, consumer) = (context(&spawner, 7), context(&spawner, 8));
    let (s, t) = (timeline(), timeline());
    let a_ended = Arc::new(AtomicBool::new(false));
    let a = producer
        .invoke_async(
            {
                let a_ended = Arc::clone(&a_ended);
                move || {
                    thread::sleep(Duration::from_millis(100));
                    a_ended.store(true, Ordering::SeqCst);
                    Ok(())
                }
            },
            &Fence::<'static>::new(),
            &fence(&[(s, 1), (t, 1)]),
        )
        .unwrap();
    let w = consumer.invoke_async(|| Ok(()), &fence(&[(s, 1)]), &Fence::<'static>::new()).unwrap();
    s.fail(Failure::Application(3));
    let z = consumer
        .invoke_async(
            {
                let a_ended = Arc::clone(&a_ended);
                move || Ok(a_ended.load(Ordering::SeqCst))
            },
            &fence(&[(t, 1)]),
            &Fence::<'static>::new(),
        )
        .unwrap();
    assert!(consumer.counts().elided >= 1, "z's wait is elided by what w imported");
    assert_eq!(w.wait(), Err(InvokeError::Failed(Failure::Application(3))));
    assert_eq!(z.wait(), Ok(true), "z ran after a ended");
    assert_eq!(a.wait(), Ok(()));
}

/// A signal point on a timeline that has failed dooms the invocation, but issues it: its handle
/// yields the failure, and the context's order goes on.
#[test]
fn an_invocation_signalling_a_failed_timeline_is_issued_doomed() {
    let pool = CpuPool::start(PoolConfig::with_workers(2)).unwrap();
    let spawner = Spawner::new(pool.executor());
    let invoker = context(&spawner, 9);
    let (failed, fine) = (timeline(), timeline());
    failed.fail(Failure::DeviceLost);
    let doomed = invoker
        .invoke_async(
            || -> Result<(), Failure> { unreachable!("a doomed invocation does not run") },
            &Fence::<'static>::new(),
            &fence(&[(fine, 1), (failed, 1)]),
        )
        .expect("issued, not refused");
    assert_eq!(doomed.wait(), Err(InvokeError::Failed(Failure::Aborted)));
    assert_eq!(fine.failure(), Some(Failure::Aborted), "its other signal fails with it");
    let nothing: Fence<'static> = Fence::new();
    assert_eq!(invoker.invoke(|| Ok(5), &nothing, &nothing), Ok(5));
}

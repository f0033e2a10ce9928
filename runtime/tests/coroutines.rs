//! Coroutine processes on a real pool: waking from other threads, cancellation while pending,
//! failure and panic propagation, wakers that outlive their coroutine and spawner, reclamation,
//! and ten thousand coroutines chained through one semaphore.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::axis::{Axis, Domain};
use causeway_core::executor::ProcessError;
use causeway_core::frontier::{Frontier, Point};
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::{Failure, Semaphore};
use causeway_runtime::{
    block_on, CpuPool, JoinError, PoolConfig, SemaphoreExt, Spawner, FRONTIER_CAPACITY,
};

const HERE: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

fn pool(workers: usize) -> CpuPool {
    CpuPool::start(PoolConfig::with_workers(workers)).expect("start the pool")
}

/// Every timeline the tests made, each for the rest of the binary.
static LIVE_TIMELINES: Mutex<Vec<&'static Semaphore>> = Mutex::new(Vec::new());

/// A timeline that lives for the rest of the test binary, as coroutines require.
fn timeline() -> &'static Semaphore {
    let timeline = Box::leak(Box::new(Semaphore::new(0, Scope::ProcessLocal, HERE)));
    // Kept reachable from a static: Miri reports leaked memory that no static reaches.
    LIVE_TIMELINES.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(timeline);
    timeline
}

fn signal(semaphore: &Semaphore, value: u64) {
    let origin = Point::new(Axis::new(0, Domain::Host, 1), value);
    semaphore
        .signal(value, origin, &Frontier::<FRONTIER_CAPACITY>::new())
        .expect("an advancing signal");
}

fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not reached in 30 s");
        thread::yield_now();
    }
}

/// A one-shot flag set (and its waker woken) by another thread: a future that knows nothing
/// about semaphores, to show any waker-based future runs as a coroutine.
#[derive(Default)]
struct Flag {
    state: Mutex<(bool, Option<Waker>)>,
}

impl Flag {
    fn raise(&self) {
        let waker = {
            let mut state = self.state.lock().unwrap();
            state.0 = true;
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

struct Raised(Arc<Flag>);

impl Future for Raised {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.0.state.lock().unwrap();
        if state.0 {
            return Poll::Ready(());
        }
        state.1 = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[test]
fn a_coroutine_woken_from_another_thread_runs_to_completion() {
    let pool = pool(2);
    let spawner = Spawner::new(pool.executor());
    let flag = Arc::new(Flag::default());
    let polls = Arc::new(AtomicUsize::new(0));
    let handle = {
        let (flag, polls) = (Arc::clone(&flag), Arc::clone(&polls));
        spawner
            .spawn(async move {
                polls.fetch_add(1, Ordering::SeqCst);
                Raised(flag).await;
                polls.fetch_add(1, Ordering::SeqCst);
                Ok("raised")
            })
            .expect("the pool accepts work")
    };
    wait_until("first poll", || polls.load(Ordering::SeqCst) == 1);
    assert!(!handle.is_finished());
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(10));
        flag.raise();
    });
    assert_eq!(handle.join(), Ok("raised"));
    assert_eq!(polls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_semaphore_signal_from_another_thread_resumes_the_coroutine() {
    let pool = pool(2);
    let spawner = Spawner::new(pool.executor());
    let timeline = timeline();
    let handle = spawner.spawn(async move { timeline.wait(3).await }).unwrap();
    let signaller = thread::spawn(move || {
        for value in 1..=3 {
            thread::sleep(Duration::from_millis(2));
            signal(timeline, value);
        }
    });
    assert_eq!(handle.join(), Ok(3));
    signaller.join().unwrap();
}

#[test]
fn cancelling_a_pending_coroutine_drops_its_future_and_unlinks_its_timepoint() {
    let pool = pool(2);
    let spawner = Spawner::new(pool.executor());
    let timeline = timeline();
    let dropped = Arc::new(AtomicUsize::new(0));
    struct CountsDrop(Arc<AtomicUsize>);
    impl Drop for CountsDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let guard = CountsDrop(Arc::clone(&dropped));
    let handle = spawner
        .spawn(async move {
            let _guard = guard;
            timeline.wait(1).await?;
            Ok(())
        })
        .unwrap();
    wait_until("the coroutine armed its timepoint", || timeline.has_waiters());
    handle.cancel();
    assert_eq!(handle.join(), Err(JoinError::Failed(Failure::Cancelled)));
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the future was dropped");
    assert!(!timeline.has_waiters(), "dropping the future cancelled its timepoint");
    // The timepoint's memory is gone; signalling must not touch it.
    signal(timeline, 1);
}

fn explode() -> Result<(), Failure> {
    panic!("a coroutine panics (the test expects this message)")
}

#[test]
fn failures_and_panics_become_the_process_outcome_and_the_workers_survive() {
    let pool = pool(1);
    let spawner = Spawner::new(pool.executor());
    let failed = spawner.spawn(async { Err::<(), _>(Failure::Application(7)) }).unwrap();
    assert_eq!(failed.join(), Err(JoinError::Failed(Failure::Application(7))));
    let panicked = spawner.spawn(async { explode() }).unwrap();
    assert_eq!(panicked.join(), Err(JoinError::Panicked));
    // The only worker caught the panic and is still draining.
    assert_eq!(spawner.spawn(async { Ok(5) }).unwrap().join(), Ok(5));
}

#[test]
fn a_join_handle_is_itself_awaitable_and_reports_consumption() {
    let pool = pool(2);
    let spawner = Spawner::new(pool.executor());
    let inner = spawner.spawn(async { Ok(20) }).unwrap();
    let outer = spawner
        .spawn(async move {
            let value = inner.await.map_err(|_| Failure::Aborted)?;
            Ok(value + 1)
        })
        .unwrap();
    assert_eq!(outer.join(), Ok(21));

    let mut once = spawner.spawn(async { Ok(1) }).unwrap();
    assert_eq!(block_on(&mut once), Ok(1));
    assert_eq!(block_on(&mut once), Err(JoinError::Consumed));
}

#[test]
fn a_waker_kept_past_its_coroutine_spawner_and_pool_is_harmless() {
    let stash: Arc<Mutex<Option<Waker>>> = Arc::default();
    let pool = pool(2);
    let spawner = Spawner::new(pool.executor());
    let kept = Arc::clone(&stash);
    let handle = spawner
        .spawn(std::future::poll_fn(move |cx| {
            *kept.lock().unwrap() = Some(cx.waker().clone());
            Poll::Ready(Ok(()))
        }))
        .unwrap();
    assert_eq!(handle.join(), Ok(()));
    let waker = stash.lock().unwrap().take().expect("the coroutine stashed its waker");
    waker.wake_by_ref(); // the process has completed: a no-op
    drop(spawner);
    waker.wake_by_ref(); // the spawner closed its gate: nothing reaches the executor
    assert_eq!(pool.shutdown(), 0);
    waker.wake(); // the executor is gone
}

#[test]
fn dropping_the_spawner_cancels_what_it_spawned() {
    let pool = pool(2);
    let timeline = timeline();
    let spawner = Spawner::new(pool.executor());
    let handles: Vec<_> = (1..=4)
        .map(|value| spawner.spawn(async move { timeline.wait(value).await }).unwrap())
        .collect();
    // Some are asleep on their timepoints, others may still be queued: both get cancelled.
    wait_until("a coroutine armed its timepoint", || timeline.has_waiters());
    drop(spawner);
    for handle in handles {
        assert_eq!(handle.join(), Err(JoinError::Failed(Failure::Cancelled)));
    }
    assert!(!timeline.has_waiters());
}

#[test]
fn a_stopped_executor_hands_the_future_back_unpolled() {
    let pool = pool(1);
    pool.executor().shutdown();
    let spawner = Spawner::new(pool.executor());
    let refused = spawner.spawn(async { Ok(9) }).expect_err("the executor is stopping");
    assert_eq!(refused.error(), ProcessError::ShutDown);
    assert_eq!(block_on(refused.into_future()), Ok(9));
}

#[test]
fn completed_coroutines_are_reclaimed_as_spawning_goes_on() {
    let pool = pool(2);
    let spawner = Spawner::new(pool.executor());
    // Miri interprets every step: a hundred spawns still pass the reclaim threshold many times.
    let rounds = if cfg!(miri) { 100 } else { 1_000u32 };
    for round in 0..rounds {
        assert_eq!(spawner.spawn(async move { Ok(round) }).unwrap().join(), Ok(round));
    }
    assert!(spawner.unreclaimed() < 16, "{} coroutines still held", spawner.unreclaimed());
}

#[test]
fn ten_thousand_coroutines_chained_through_one_semaphore() {
    const CHAIN: u64 = if cfg!(miri) { 20 } else { 10_000 };
    let pool = pool(4);
    let spawner = Spawner::new(pool.executor());
    let timeline = timeline();
    let ran = Arc::new(AtomicUsize::new(0));
    // Spawned last link first: every coroutine is armed and asleep before the chain starts.
    let mut handles: Vec<_> = (0..CHAIN)
        .rev()
        .map(|link| {
            let ran = Arc::clone(&ran);
            spawner
                .spawn(async move {
                    let seen = timeline.wait(link + 1).await?;
                    ran.fetch_add(1, Ordering::Relaxed);
                    let origin = Point::new(Axis::new(0, Domain::Host, 2), link + 2);
                    timeline
                        .signal(link + 2, origin, &Frontier::<FRONTIER_CAPACITY>::new())
                        .map_err(|_| Failure::OutOfOrderSignal)?;
                    Ok(seen)
                })
                .unwrap()
        })
        .collect();
    signal(timeline, 1);
    handles.reverse();
    for (link, handle) in (0..CHAIN).zip(handles) {
        assert_eq!(handle.join(), Ok(link + 1), "link {link} saw its own value");
    }
    assert_eq!(ran.load(Ordering::Relaxed), CHAIN as usize);
    assert_eq!(timeline.value(), CHAIN + 1);
    assert!(!timeline.has_waiters());
}

//! A loom model of a coroutine's wake against its next poll, through the real `Spawner`, task
//! and waker on core's real executor (run with `RUSTFLAGS="--cfg loom" cargo test -p
//! causeway-runtime --release --test loom_coroutine`).
//!
//! std's `Waker` contract: the call to `wake` happens before the poll it asks for begins. A
//! coroutine relies on the executor for it (core's state-word invariant 4): a wake that finds
//! the coroutine's process already QUEUED rewrites its state with a read-modify-write, and the
//! drain call it counts on starts with a swap that reads it. With either half a plain access
//! (the wake only loading QUEUED, or the drain starting with a store), a future that reads
//! its cause with a plain load can read it stale and sleep for good.
//!
//! The scenario: the coroutine sleeps after its first poll; waker A raises its flag and wakes
//! it (SLEEPING → QUEUED); waker B raises its flag and wakes it too, possibly finding it
//! QUEUED. The future is ready only once it sees both flags, read with Relaxed loads, so
//! nothing but the wake orders B's flag before the poll. After both wakers returned, a few
//! steps must complete it. It fails (a lost wake) with the executor's drain starting with a
//! store, or with its wake of a queued process only a load.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use causeway_core::executor::{Executor, RoundRobin, SpinPolicy};
use causeway_runtime::{HostExecutor, HostFutex, Spawner};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Mutex;
use loom::thread;

/// What the future waits on: two flags, and the waker its first poll leaves for the wakers.
struct Flags {
    a: AtomicBool,
    b: AtomicBool,
    waker: Mutex<Option<Waker>>,
    /// Wakers that have returned from their wake.
    woke: AtomicUsize,
}

impl Flags {
    /// The waker side: raise a flag, then wake (the order std's contract is about).
    fn raise(&self, flag: &AtomicBool) {
        flag.store(true, Ordering::Relaxed);
        let waker = self.waker.lock().unwrap().clone();
        waker.expect("the first poll stored the waker").wake();
        self.woke.fetch_add(1, Ordering::Relaxed);
    }
}

/// The flags, and whether the waker was stored (only the first poll takes the lock, so the
/// lock orders nothing between the wakers and later polls).
struct BothFlags(&'static Flags, bool);

impl Future for BothFlags {
    type Output = Result<(), causeway_core::Failure>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let flags = self.0;
        if !self.1 {
            *flags.waker.lock().unwrap() = Some(cx.waker().clone());
            self.1 = true;
        }
        // Relaxed on purpose: the wakes are the only thing ordering the flags before a poll.
        if flags.a.load(Ordering::Relaxed) && flags.b.load(Ordering::Relaxed) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

/// Loom's default thread stack is too small for the executor's 64 slots of loom atomics, which
/// are built on the stack before they are boxed: the model runs on a thread with this one.
const STACK: usize = 64 << 20;

#[test]
fn a_wake_that_finds_the_coroutine_queued_is_seen_by_its_next_poll() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.max_branches = 20_000;
    builder.check(|| {
        thread::Builder::new().stack_size(STACK).spawn(model).unwrap().join().unwrap();
    });
}

fn model() {
    let executor: &'static HostExecutor<'static> =
        Box::leak(Box::new(Executor::new(HostFutex::new(), 1).unwrap()));
    let flags: &'static Flags = Box::leak(Box::new(Flags {
        a: AtomicBool::new(false),
        b: AtomicBool::new(false),
        waker: Mutex::new(None),
        woke: AtomicUsize::new(0),
    }));
    let spawner = Spawner::new(executor);
    let handle = spawner.spawn(BothFlags(flags, false)).map_err(|refused| refused.error()).unwrap();
    let mut worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).unwrap();
    // The first poll: Pending, the waker stored, the process asleep.
    assert!(worker.step());
    assert!(!handle.is_finished());
    let wakers: Vec<_> = [&flags.a, &flags.b]
        .into_iter()
        .map(|flag| thread::spawn(move || flags.raise(flag)))
        .collect();
    // The worker drains concurrently with the wakes, yielding while idle (so loom runs the
    // wakers), until both wakes have returned.
    while flags.woke.load(Ordering::Relaxed) < 2 {
        if !worker.step() {
            thread::yield_now();
        }
    }
    for waker in wakers {
        waker.join().unwrap();
    }
    // Both wakes returned after raising their flags: the process is completed, or runnable with
    // a poll ahead that sees both flags. Bounded, so a lost wake-up fails the assertion instead
    // of spinning.
    for _ in 0..3 {
        if handle.is_finished() {
            break;
        }
        worker.step();
    }
    assert!(handle.is_finished(), "asleep with both flags raised: a lost wake-up");
    *flags.waker.lock().unwrap() = None;
    drop(handle);
    drop(worker);
    drop(spawner);
}

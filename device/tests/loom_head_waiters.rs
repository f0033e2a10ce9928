//! Loom model of a queue's head waiters (`src/queue/head_waiters.rs`: the crate's own
//! `HeadWaiters`, which under `--cfg loom` runs on loom's atomics, lock and condition variable;
//! see the crate's `sync` module): every interleaving of sleepers waiting for the queue's head
//! to reach their points and the queue process advancing it, as `free_head` does (a Release
//! store of `head`, then `advanced`).
//!
//! What each model checks: every sleeper whose point the head reaches returns (loom reports a
//! sleeper left asleep as a deadlock), and sees the head at or past its point. Each of these
//! changes to `head_waiters.rs` makes a model here fail: leaving out the barrier of
//! `advanced` or of `sleep` (a lost wake-up), or storing a sleeper's point outside the lock
//! (the reset of another sleeper's wake then loses it).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p causeway-device --release --test
//! loom_head_waiters` (the test command's loom tier does).
#![cfg(loom)]

use causeway_device::loom_models::{HeadWaiters, Sleep};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A queue's `head` and its waiters, as `QueueShared` holds them.
struct Queue {
    head: AtomicU64,
    waiters: HeadWaiters,
}

impl Queue {
    fn new() -> Queue {
        Queue { head: AtomicU64::new(0), waiters: HeadWaiters::new() }
    }

    /// The queue process retiring operations up to `last`, as `free_head` does.
    fn retire_through(&self, last: u64) {
        for head in 1..=last {
            self.head.store(head, Ordering::Release);
            self.waiters.advanced(head);
        }
    }

    /// A sleeper waiting, with no deadline, for the head to reach `point`; the head it saw.
    fn sleep_until(&self, point: u64) -> u64 {
        let mut seen = 0;
        let got = self.waiters.sleep(
            || (self.head.load(Ordering::Acquire), 0),
            |head, _, _| {
                seen = head;
                if head >= point {
                    Sleep::Over(true)
                } else {
                    Sleep::Until { head: point, at: None }
                }
            },
        );
        assert!(got);
        seen
    }
}

#[test]
fn a_sleeper_is_woken_when_the_head_reaches_its_point() {
    loom::model(|| {
        let queue = Arc::new(Queue::new());
        let sleeper = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || queue.sleep_until(2))
        };
        queue.retire_through(2);
        assert!(sleeper.join().unwrap() >= 2);
    });
}

/// Two sleepers with different points: the wake for the nearer one resets the wake point, and
/// the farther one must still be woken when the head reaches its own.
#[test]
fn a_wake_for_one_sleeper_loses_no_other() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let queue = Arc::new(Queue::new());
        let sleepers: Vec<_> = [1, 2]
            .into_iter()
            .map(|point| {
                let queue = Arc::clone(&queue);
                thread::spawn(move || (point, queue.sleep_until(point)))
            })
            .collect();
        queue.retire_through(2);
        for sleeper in sleepers {
            let (point, seen) = sleeper.join().unwrap();
            assert!(seen >= point, "woken at {seen} for {point}");
        }
    });
}

//! Loom model of a queue's ring ownership (`src/queue/ownership.rs`: the crate's own
//! `RingOwnership`, which under `--cfg loom` runs on loom's atomics, with `SeqCst` fences for
//! the two sides of the asymmetric barrier; see the crate's `sync` module): every
//! interleaving of the queue process draining — entering, running an operation's work,
//! finishing it, leaving — against the device taking the queue over at shutdown.
//!
//! What the model checks is the phase's contract with the code around it: the queue process
//! and the device never touch the ring at once (both write it through one loom cell, so an
//! overlap is a data race loom reports); a take-over that finds the work running reports it,
//! and the queue process then touches nothing when the work returns; once taken over, the
//! queue is never entered again and a second take-over says so.
//!
//! Each of these changes to `ownership.rs` makes the model fail: either barrier side dropped
//! (the ring written from both sides at once), a refused `enter` or `finish_work` that no
//! longer stores back the phase it left (the device waits on Stepping forever: loom's branch
//! limit), or the Release store of `leave` or `start_work` made Relaxed.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p causeway-device --release --test
//! loom_ownership` (the test command's loom tier does).
#![cfg(loom)]

use causeway_device::loom_models::{RingOwnership, Running, TakeOver};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// One queue: its phase and a stand-in for its ring.
struct Queue {
    ownership: RingOwnership,
    ring: UnsafeCell<u32>,
}

// SAFETY: `ring` is written only by whoever the phase makes its owner; loom reports a data
// race if the phase lets two threads write it at once.
unsafe impl Sync for Queue {}

impl Queue {
    fn touch_ring(&self) {
        // SAFETY: the caller owns the ring by the phase protocol (checked by loom).
        self.ring.with_mut(|ring| unsafe { *ring += 1 });
    }
}

const WORK: Running = Running { tag: 7, worker: 0, since_ns: 1 };

/// One drain of the queue process: bookkeeping, an operation's work (which touches nothing of
/// the ring), bookkeeping again. Whether it got through.
fn drain(queue: &Queue) -> bool {
    if !queue.ownership.enter() {
        return false;
    }
    queue.touch_ring();
    queue.ownership.start_work(WORK);
    if !queue.ownership.finish_work() {
        return false;
    }
    queue.touch_ring();
    queue.ownership.leave();
    true
}

#[test]
fn the_device_and_the_queue_process_never_own_the_ring_at_once() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let queue = Arc::new(Queue { ownership: RingOwnership::new(), ring: UnsafeCell::new(0) });
        let drainer = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                // Two drains: the second may start after the take-over and must be refused.
                if drain(&queue) {
                    drain(&queue);
                }
            })
        };
        let taken = loop {
            match queue.ownership.take_over() {
                TakeOver::Stepping => thread::yield_now(),
                taken => break taken,
            }
        };
        match taken {
            TakeOver::Idle => queue.touch_ring(),
            TakeOver::Stuck(running) => {
                assert_eq!(running, WORK, "the running fields of the work the device found");
                queue.touch_ring();
            }
            other => panic!("a first take-over found {other:?}"),
        }
        drainer.join().unwrap();
        assert_eq!(queue.ownership.take_over(), TakeOver::Abandoned);
        assert!(!queue.ownership.enter(), "a taken-over queue is never entered again");
    });
}

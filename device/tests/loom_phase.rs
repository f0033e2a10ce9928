//! Loom model of a queue's phase and the device's take-over (`src/phase.rs`, compiled here as
//! it is, against loom's atomics, with `SeqCst` fences for the two sides of the asymmetric
//! barrier): every interleaving of a queue process draining (entering, running work, leaving)
//! against the shutdown taking the queue over and retrying while the queue process steps.
//!
//! What each model checks is the phase's contract with the code around it: the device and the
//! queue process never both hold the ring; a take-over that caught Working reports that work,
//! and the worker touches nothing once the work returns; a take-over that caught Idle sees
//! everything the last drain wrote; a drain that starts after the request never touches the
//! ring.
//!
//! Who holds the ring is recorded in an oracle outside the model (plain std atomics, not loom
//! types): loom runs the modelled threads one at a time, so the oracle follows the order in
//! which loom ran them, and an assertion on it catches two holders at once.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p causeway-device --release --test loom_phase`
//! (the test command's loom tier does).
#![cfg(loom)]

// Only what the models use is called; the rest of the file is the crate's.
#[allow(dead_code)]
#[path = "../src/phase.rs"]
mod phase;

use std::sync::atomic::{AtomicBool, Ordering as Oracle};

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use phase::{QueuePhase, Running, TakeOver};

const WORK: Running = Running { tag: 7, worker: 1, since_ns: 100 };

/// The queue's ring as the model sees it: a word the drains write, and the oracle of who holds
/// the ring right now.
struct Ring {
    phase: QueuePhase,
    /// Written by a drain while it holds the ring; the device reads it after taking over.
    last_written: AtomicU64,
    drain_holds: std::sync::Arc<AtomicBool>,
    device_holds: std::sync::Arc<AtomicBool>,
}

impl Ring {
    fn new() -> Ring {
        Ring {
            phase: QueuePhase::new(),
            last_written: AtomicU64::new(0),
            drain_holds: std::sync::Arc::new(AtomicBool::new(false)),
            device_holds: std::sync::Arc::new(AtomicBool::new(false)),
        }
    }

    /// The queue process takes the ring (after a successful `enter` or `finish_work`).
    fn drain_takes(&self) {
        assert!(!self.device_holds.load(Oracle::SeqCst), "the drain holds a ring the device took");
        self.drain_holds.store(true, Oracle::SeqCst);
    }

    /// The queue process lets go of the ring (before `start_work` or `leave`).
    fn drain_lets_go(&self) {
        self.drain_holds.store(false, Oracle::SeqCst);
    }

    /// The device takes the ring over (after `take_over` answered Idle or Stuck).
    fn device_takes(&self) {
        assert!(!self.drain_holds.load(Oracle::SeqCst), "the device took a ring the drain holds");
        self.device_holds.store(true, Oracle::SeqCst);
    }
}

/// One drain of `rounds` operations, each run as work; stops where the phase says the queue was
/// taken over. Returns how many operations' work returned and was finished by the drain.
fn drain(ring: &Ring, rounds: u64) -> u64 {
    if !ring.phase.enter() {
        return 0;
    }
    ring.drain_takes();
    let mut finished = 0;
    for round in 1..=rounds {
        ring.last_written.store(round, Ordering::Relaxed);
        ring.drain_lets_go();
        ring.phase.start_work(WORK);
        // The work runs here, touching nothing of the ring.
        if !ring.phase.finish_work() {
            return finished;
        }
        ring.drain_takes();
        finished += 1;
    }
    ring.last_written.store(rounds + 1, Ordering::Relaxed);
    ring.drain_lets_go();
    ring.phase.leave();
    finished
}

/// The shutdown: takes the queue over, trying again while the drain steps. Returns what the
/// take-over found.
fn take_over(ring: &Ring) -> TakeOver {
    loop {
        match ring.phase.take_over() {
            TakeOver::Stepping => thread::yield_now(),
            found => return found,
        }
    }
}

/// A drain of one operation races the take-over; a second drain may start afterwards.
#[test]
fn the_device_and_a_drain_never_hold_the_ring_together() {
    loom::model(|| {
        let ring = Arc::new(Ring::new());
        let queue = {
            let ring = Arc::clone(&ring);
            thread::spawn(move || {
                let first = drain(&ring, 1);
                let second = drain(&ring, 1);
                (first, second)
            })
        };
        let found = take_over(&ring);
        match found {
            TakeOver::Idle => {
                ring.device_takes();
                // Everything the last drain wrote before `leave` is visible.
                let written = ring.last_written.load(Ordering::Relaxed);
                assert!(written == 0 || written == 2, "a drain's writes half seen: {written}");
            }
            TakeOver::Stuck(running) => {
                assert_eq!(running, WORK);
                ring.device_takes();
            }
            other => panic!("a first take-over found {other:?}"),
        }
        assert_eq!(ring.phase.take_over(), TakeOver::Abandoned);
        let (first, second) = queue.join().unwrap();
        if let TakeOver::Stuck(_) = found {
            // The work the device caught was not finished by its drain.
            assert!(first + second < 2, "the drain finished work the device failed");
        }
        // The drain never holds the ring once the device took it (checked in `drain_takes`);
        // nor does a drain that began after the take-over.
        assert!(!ring.phase.enter(), "a taken-over queue is never drained again");
    });
}

/// A drain of two operations: the take-over may land while the first one's work runs, between
/// the two, or while the drain steps, and retries until the drain leaves Stepping.
#[test]
fn a_take_over_during_a_drain_waits_for_its_bookkeeping_and_stops_its_work() {
    loom::model(|| {
        let ring = Arc::new(Ring::new());
        let queue = {
            let ring = Arc::clone(&ring);
            thread::spawn(move || drain(&ring, 2))
        };
        let found = take_over(&ring);
        match found {
            TakeOver::Idle => ring.device_takes(),
            TakeOver::Stuck(running) => {
                assert_eq!(running, WORK);
                ring.device_takes();
            }
            other => panic!("a first take-over found {other:?}"),
        }
        let finished = queue.join().unwrap();
        match found {
            TakeOver::Idle => assert!(finished == 0 || finished == 2, "{finished}"),
            _ => assert!(finished < 2, "the drain finished the work the device caught"),
        }
    });
}

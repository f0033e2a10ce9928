//! Loom model of the wait gate's count (`src/queue/wait_count.rs`: the crate's own
//! `WaitCount`, which under `--cfg loom` runs on loom's atomics; see the crate's `sync`
//! module): every interleaving of the submitter arming and dropping its hold, the
//! armed waits' holders releasing (each recording a failure first, as a timepoint that fires
//! on a failed semaphore does) and the queue process reading the gate.
//!
//! What each model checks is the count's contract with the code around it: exactly one release
//! opens the gate, and only after every count was released; whoever opens it, and the queue
//! process once it reads it open, sees every failure recorded before a release (the first one
//! kept); a slot reused after its gate opened starts from a clean count.
//!
//! Each of these changes to `wait_count.rs` makes at least one model here fail: the Acquire
//! load or the Release store of `release`'s last-holder path, the Acquire load of `is_open`, or
//! the AcqRel decrement, made Relaxed.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p causeway-device --release --test
//! loom_wait_count` (the test command's loom tier does).
#![cfg(loom)]

use causeway_core::semaphore::Failure;
use causeway_device::loom_models::WaitCount;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// What the model's threads saw: how many releases opened the gate, and whether each opener
/// saw a failure recorded.
#[derive(Default)]
struct Seen {
    openers: AtomicUsize,
    openers_without_failure: AtomicUsize,
}

impl Seen {
    fn released(&self, count: &WaitCount, opened: bool) {
        if opened {
            self.openers.fetch_add(1, Ordering::Relaxed);
            if count.failure().is_none() {
                self.openers_without_failure.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A holder of one armed wait: records `failure` (if any), then releases.
fn spawn_holder(
    count: &Arc<WaitCount>,
    seen: &Arc<Seen>,
    failure: Option<Failure>,
) -> thread::JoinHandle<()> {
    let (count, seen) = (Arc::clone(count), Arc::clone(seen));
    thread::spawn(move || {
        if let Some(failure) = failure {
            count.record_failure(failure);
        }
        let opened = count.release();
        seen.released(&count, opened);
    })
}

/// The submitter's hold and two armed waits, whose holders race each other and the submitter's
/// own release; the queue process reads the gate open and finds the failure.
#[test]
fn one_release_opens_the_gate_and_every_failure_is_seen() {
    loom::model(|| {
        let count = Arc::new(WaitCount::new());
        let seen = Arc::new(Seen::default());
        count.hold(None);
        count.add_wait();
        let first = spawn_holder(&count, &seen, Some(Failure::Aborted));
        count.add_wait();
        let second = spawn_holder(&count, &seen, None);
        let opened = count.release();
        seen.released(&count, opened);
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!(seen.openers.load(Ordering::Relaxed), 1, "exactly one release opens");
        assert_eq!(
            seen.openers_without_failure.load(Ordering::Relaxed),
            0,
            "the opener sees the failure recorded before a release"
        );
        assert!(count.is_open());
        assert_eq!(count.failure(), Some(Failure::Aborted));
    });
}

/// The queue process reads the gate while the holders release: if it reads it open it sees
/// both holders' records (the first kept), and never reads it open while a count is held.
#[test]
fn the_queue_process_reads_the_gate_open_only_after_every_release() {
    loom::model(|| {
        let count = Arc::new(WaitCount::new());
        let seen = Arc::new(Seen::default());
        let released = Arc::new(AtomicUsize::new(0));
        count.hold(None);
        count.add_wait();
        count.add_wait();
        let holders: Vec<_> = [Failure::Aborted, Failure::Cancelled]
            .into_iter()
            .map(|failure| {
                let (count, seen, released) =
                    (Arc::clone(&count), Arc::clone(&seen), Arc::clone(&released));
                thread::spawn(move || {
                    count.record_failure(failure);
                    released.fetch_add(1, Ordering::Relaxed);
                    let opened = count.release();
                    seen.released(&count, opened);
                })
            })
            .collect();
        // The submitter drops its hold after publishing; the queue process then reads the
        // gate (once: loom places the read at every point of the holders' runs).
        let opened = count.release();
        seen.released(&count, opened);
        if count.is_open() {
            assert_eq!(released.load(Ordering::Relaxed), 2, "open before a holder released");
            let failure = count.failure();
            assert!(
                failure == Some(Failure::Aborted) || failure == Some(Failure::Cancelled),
                "a record made before a release is visible once the gate reads open: {failure:?}"
            );
        }
        for holder in holders {
            holder.join().unwrap();
        }
        assert_eq!(seen.openers.load(Ordering::Relaxed), 1);
    });
}

/// A wait counted and then withdrawn (its semaphore had already reached the value), one armed
/// wait, and the slot reused once the gate opened: the last release of the first operation
/// cannot disturb the second operation's count.
#[test]
fn a_withdrawn_wait_and_a_reused_slot_keep_the_count_exact() {
    loom::model(|| {
        let count = Arc::new(WaitCount::new());
        let seen = Arc::new(Seen::default());
        count.hold(None);
        count.add_wait();
        count.withdraw_wait();
        count.add_wait();
        let mut first = Some(spawn_holder(&count, &seen, Some(Failure::DeviceLost)));
        let opened = count.release();
        seen.released(&count, opened);
        // The queue process reads the gate; until it reads it open, it sleeps (here: joins the
        // holder, after which it must read it open).
        if !count.is_open() {
            if let Some(holder) = first.take() {
                holder.join().unwrap();
            }
            assert!(count.is_open());
        }
        assert_eq!(count.failure(), Some(Failure::DeviceLost));
        // The queue process ran and retired the operation; the submitter reuses the slot.
        count.hold(None);
        count.add_wait();
        let second = spawn_holder(&count, &seen, None);
        assert!(!count.is_open(), "the submitter still holds");
        let opened = count.release();
        seen.released(&count, opened);
        second.join().unwrap();
        if let Some(holder) = first {
            holder.join().unwrap();
        }
        assert!(count.is_open());
        assert_eq!(count.failure(), None, "the reused slot starts clean");
        assert_eq!(seen.openers.load(Ordering::Relaxed), 2, "one opener per operation");
    });
}

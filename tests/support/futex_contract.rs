//! The `Futex` contract as generic checks, shared by the platform crates' contract tests
//! (each includes this file with a `#[path]` and instantiates [`contract_tests!`] per
//! implementation, or calls single checks). Every check runs under a hang limit, because the
//! failure they look for — a lost wake-up — otherwise hangs instead of failing.
// Each includer uses the checks that apply to its implementations.
#![allow(dead_code, unused_macros)]

use std::any::type_name;
use std::io::{self, Write};
use std::process;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{Futex, FutexWord};

/// How long any one test may run. A lost wake-up leaves a waiter asleep forever, and a hung
/// test would stall the whole run instead of failing it.
pub const HANG_LIMIT: Duration = Duration::from_secs(60);

/// How long the tests give spawned waiters to reach their sleep before waking them. A waiter
/// that is slower still is woken before it sleeps, which the tests tolerate; they only lose
/// strength.
pub const SETTLE: Duration = Duration::from_millis(50);

/// Runs `body`, aborting the process if it has not finished within [`HANG_LIMIT`]. Aborting,
/// because a panic on the watchdog's own thread would fail nothing: the harness waits on the
/// hung test thread, not on the watchdog.
pub fn within_hang_limit<R>(test: &str, body: impl FnOnce() -> R) -> R {
    let test = test.to_owned();
    let (finished, finished_signal) = mpsc::channel::<()>();
    let watchdog = thread::spawn(move || {
        // The sender is dropped when `body` returns or unwinds, which ends the wait early.
        if let Err(RecvTimeoutError::Timeout) = finished_signal.recv_timeout(HANG_LIMIT) {
            // Written straight to the stream: the test harness's capture of `eprintln!` output
            // would die with the process unprinted.
            let _ = writeln!(
                io::stderr(),
                "{test} still running after {HANG_LIMIT:?}: a wake-up was lost"
            );
            process::abort();
        }
    });
    let result = body();
    drop(finished);
    watchdog.join().expect("the watchdog thread never panics");
    result
}

pub fn wait_returns_at_once_when_word_differs<F: Futex>(futex: &F) {
    within_hang_limit(&format!("{}: differing word", type_name::<F>()), || {
        let word = FutexWord::new(1);
        futex.wait(&word, 0, None);
        futex.wait(&word, 0, Some(Duration::MAX));
    });
}

pub fn wake_one_releases_a_waiter<F: Futex>(futex: &F, timeout: Option<Duration>) {
    within_hang_limit(&format!("{}: wake_one, timeout {timeout:?}", type_name::<F>()), || {
        let word = FutexWord::new(0);
        let released = AtomicBool::new(false);
        thread::scope(|scope| {
            scope.spawn(|| {
                // Acquire pairs with the main thread's Release store of 1 below.
                while word.load(Ordering::Acquire) == 0 {
                    futex.wait(&word, 0, timeout);
                }
                released.store(true, Ordering::Relaxed);
            });
            thread::sleep(SETTLE);
            // Release pairs with the waiter's Acquire load of the word.
            word.store(1, Ordering::Release);
            futex.wake_one(&word);
        });
        assert!(released.load(Ordering::Relaxed));
    });
}

pub fn timeout_ends_the_wait<F: Futex>(futex: &F) {
    const TIMEOUT: Duration = Duration::from_millis(50);
    within_hang_limit(&format!("{}: timeout", type_name::<F>()), || {
        let word = FutexWord::new(0);
        let started = Instant::now();
        futex.wait(&word, 0, Some(TIMEOUT));
        let elapsed = started.elapsed();
        // Only a lower bound: how late a sleeper is rescheduled is up to the host.
        assert!(elapsed >= TIMEOUT * 9 / 10, "returned after {elapsed:?}, timeout {TIMEOUT:?}");
    });
}

pub fn wake_all_releases_every_waiter<F: Futex>(futex: &F, waiters: usize) {
    within_hang_limit(&format!("{}: wake_all, {waiters} waiters", type_name::<F>()), || {
        let word = FutexWord::new(0);
        let released = AtomicUsize::new(0);
        thread::scope(|scope| {
            for _ in 0..waiters {
                scope.spawn(|| {
                    // Acquire pairs with the main thread's Release store of 1 below.
                    while word.load(Ordering::Acquire) == 0 {
                        futex.wait(&word, 0, None);
                    }
                    released.fetch_add(1, Ordering::Relaxed);
                });
            }
            thread::sleep(SETTLE);
            // Release pairs with the waiters' Acquire loads of the word.
            word.store(1, Ordering::Release);
            futex.wake_all(&word);
        });
        assert_eq!(released.load(Ordering::Relaxed), waiters);
    });
}

/// Adjacent words with a waiter each, woken one at a time: a wake must reach its own word's
/// waiter even where an implementation shares wait queues between words. Given more words than
/// a bucketed implementation has buckets, some certainly share one, and they are woken newest
/// waiter first, so a first-come queue shared between words would wake the wrong one.
pub fn wake_one_reaches_its_word_among_many<F: Futex>(futex: &F, words: usize) {
    within_hang_limit(&format!("{}: wake_one among many", type_name::<F>()), || {
        let words: Vec<FutexWord> = (0..words).map(|_| FutexWord::new(0)).collect();
        thread::scope(|scope| {
            let waiters: Vec<_> = words
                .iter()
                .map(|word| {
                    scope.spawn(move || {
                        // Acquire pairs with the main thread's Release store of 1 below.
                        while word.load(Ordering::Acquire) == 0 {
                            futex.wait(word, 0, None);
                        }
                    })
                })
                .collect();
            thread::sleep(SETTLE);
            for (word, waiter) in words.iter().zip(waiters).rev() {
                // Release pairs with this word's waiter's Acquire load.
                word.store(1, Ordering::Release);
                futex.wake_one(word);
                waiter.join().expect("a waiter never panics");
            }
        });
    });
}

/// Two threads take turns through one word `round_trips` times each way, sleeping whenever it is
/// the other's turn. Any lost wake-up leaves both asleep and trips the hang limit.
pub fn ping_pong_completes<F: Futex>(futex: &F, round_trips: u64) {
    const PING_TURN: u32 = 0;
    const PONG_TURN: u32 = 1;
    within_hang_limit(&format!("{}: ping-pong", type_name::<F>()), || {
        let turn = FutexWord::new(PING_TURN);
        // Written by whichever side holds the turn; checks that each handover also hands over
        // the data written before it.
        let baton = AtomicU64::new(0);
        let take_turn = |mine: u32, theirs: u32| {
            // Acquire pairs with the other side's Release store handing the turn over.
            while turn.load(Ordering::Acquire) != mine {
                futex.wait(&turn, theirs, None);
            }
        };
        let hand_over = |theirs: u32| {
            // Release pairs with the other side's Acquire load in `take_turn`.
            turn.store(theirs, Ordering::Release);
            futex.wake_one(&turn);
        };
        thread::scope(|scope| {
            scope.spawn(|| {
                for round in 0..round_trips {
                    take_turn(PONG_TURN, PING_TURN);
                    assert_eq!(baton.load(Ordering::Relaxed), 2 * round + 1);
                    baton.store(2 * round + 2, Ordering::Relaxed);
                    hand_over(PING_TURN);
                }
            });
            for round in 0..round_trips {
                take_turn(PING_TURN, PONG_TURN);
                assert_eq!(baton.load(Ordering::Relaxed), 2 * round);
                baton.store(2 * round + 1, Ordering::Relaxed);
                hand_over(PONG_TURN);
            }
        });
        assert_eq!(baton.load(Ordering::Relaxed), 2 * round_trips);
    });
}

/// One module of `#[test]`s per implementation, each built fresh by `$new`. The ping-pong runs
/// `$round_trips` each way and the many-words check uses `$words` waiters (fewer where the host
/// is emulated).
macro_rules! contract_tests {
    ($implementation:ident, $new:expr, round_trips: $round_trips:expr, words: $words:expr) => {
        mod $implementation {
            use std::time::Duration;

            #[test]
            fn wait_returns_at_once_when_word_differs() {
                super::wait_returns_at_once_when_word_differs(&$new);
            }

            #[test]
            fn wake_one_releases_a_waiter() {
                super::wake_one_releases_a_waiter(&$new, None);
            }

            #[test]
            fn wake_one_releases_a_waiter_with_an_unrepresentable_timeout() {
                super::wake_one_releases_a_waiter(&$new, Some(Duration::MAX));
            }

            #[test]
            fn timeout_ends_the_wait() {
                super::timeout_ends_the_wait(&$new);
            }

            #[test]
            fn wake_all_releases_every_waiter() {
                super::wake_all_releases_every_waiter(&$new, 4);
            }

            #[test]
            fn wake_one_reaches_its_word_among_many() {
                super::wake_one_reaches_its_word_among_many(&$new, $words);
            }

            #[test]
            fn ping_pong_completes() {
                super::ping_pong_completes(&$new, $round_trips);
            }
        }
    };
}

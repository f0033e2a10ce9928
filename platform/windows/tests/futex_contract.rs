//! The `Futex` contract, checked against `WindowsFutex` (run under wine in CI, see
//! `scripts/windows.sh`). The same checks as `causeway-platform-linux`'s contract tests.
#![cfg(windows)]

use std::io::{self, Write};
use std::process;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{Futex, FutexWord};
use causeway_platform_windows::{HostFutex, WindowsFutex};

/// How long any one test may run before the process is aborted: a lost wake-up leaves a
/// waiter asleep forever, and a hung test would stall the run instead of failing it.
const HANG_LIMIT: Duration = Duration::from_secs(60);

/// How long waiters get to reach their sleep before being woken. A slower waiter is woken
/// before it sleeps, which the tests tolerate; they only lose strength.
const SETTLE: Duration = Duration::from_millis(50);

fn within_hang_limit<R>(test: &str, body: impl FnOnce() -> R) -> R {
    let test = test.to_owned();
    let (finished, finished_signal) = mpsc::channel::<()>();
    let watchdog = thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = finished_signal.recv_timeout(HANG_LIMIT) {
            let _ = writeln!(io::stderr(), "{test} still running after {HANG_LIMIT:?}: aborting");
            process::abort();
        }
    });
    let result = body();
    drop(finished);
    watchdog.join().expect("the watchdog thread never panics");
    result
}

#[test]
fn wait_returns_at_once_when_word_differs() {
    within_hang_limit("differing word", || {
        let word = FutexWord::new(1);
        WindowsFutex.wait(&word, 0, None);
        WindowsFutex.wait(&word, 0, Some(Duration::MAX));
    });
}

fn wake_one_releases_a_waiter(timeout: Option<Duration>) {
    within_hang_limit("wake_one", || {
        let word = FutexWord::new(0);
        let released = AtomicBool::new(false);
        thread::scope(|scope| {
            scope.spawn(|| {
                // Acquire pairs with the main thread's Release store of 1 below.
                while word.load(Ordering::Acquire) == 0 {
                    WindowsFutex.wait(&word, 0, timeout);
                }
                released.store(true, Ordering::Relaxed);
            });
            thread::sleep(SETTLE);
            // Release pairs with the waiter's Acquire load.
            word.store(1, Ordering::Release);
            WindowsFutex.wake_one(&word);
        });
        assert!(released.load(Ordering::Relaxed));
    });
}

#[test]
fn wake_one_releases_an_untimed_waiter() {
    wake_one_releases_a_waiter(None);
}

#[test]
fn wake_one_releases_a_waiter_with_an_unrepresentable_timeout() {
    wake_one_releases_a_waiter(Some(Duration::MAX));
}

#[test]
fn timeout_ends_the_wait() {
    const TIMEOUT: Duration = Duration::from_millis(50);
    within_hang_limit("timeout", || {
        let word = FutexWord::new(0);
        let started = Instant::now();
        WindowsFutex.wait(&word, 0, Some(TIMEOUT));
        let elapsed = started.elapsed();
        // Only a lower bound (less the timer's granularity): rescheduling is up to the host.
        assert!(elapsed >= TIMEOUT * 9 / 10, "returned after {elapsed:?}, timeout {TIMEOUT:?}");
    });
}

#[test]
fn wake_all_releases_every_waiter() {
    const WAITERS: usize = 4;
    within_hang_limit("wake_all", || {
        let word = FutexWord::new(0);
        let released = AtomicUsize::new(0);
        thread::scope(|scope| {
            for _ in 0..WAITERS {
                scope.spawn(|| {
                    // Acquire pairs with the main thread's Release store of 1 below.
                    while word.load(Ordering::Acquire) == 0 {
                        WindowsFutex.wait(&word, 0, None);
                    }
                    released.fetch_add(1, Ordering::Relaxed);
                });
            }
            thread::sleep(SETTLE);
            // Release pairs with the waiters' Acquire loads.
            word.store(1, Ordering::Release);
            WindowsFutex.wake_all(&word);
        });
        assert_eq!(released.load(Ordering::Relaxed), WAITERS);
    });
}

/// Adjacent words with a waiter each, woken newest first: each wake must reach its own word.
#[test]
fn wake_one_reaches_its_word_among_many() {
    const WORDS: usize = 32;
    within_hang_limit("wake_one among many", || {
        let words: Vec<FutexWord> = (0..WORDS).map(|_| FutexWord::new(0)).collect();
        thread::scope(|scope| {
            let waiters: Vec<_> = words
                .iter()
                .map(|word| {
                    scope.spawn(move || {
                        // Acquire pairs with the main thread's Release store of 1 below.
                        while word.load(Ordering::Acquire) == 0 {
                            WindowsFutex.wait(word, 0, None);
                        }
                    })
                })
                .collect();
            thread::sleep(SETTLE);
            for (word, waiter) in words.iter().zip(waiters).rev() {
                // Release pairs with this word's waiter's Acquire load.
                word.store(1, Ordering::Release);
                WindowsFutex.wake_one(word);
                waiter.join().expect("a waiter never panics");
            }
        });
    });
}

/// Two threads take turns through one word, sleeping whenever it is the other's turn.
#[test]
fn ping_pong_completes() {
    const ROUND_TRIPS: u64 = 20_000;
    within_hang_limit("ping-pong", || {
        let turn = FutexWord::new(0);
        let baton = AtomicU64::new(0);
        let take_turn = |mine: u32, theirs: u32| {
            // Acquire pairs with the other side's Release store handing the turn over.
            while turn.load(Ordering::Acquire) != mine {
                WindowsFutex.wait(&turn, theirs, None);
            }
        };
        let hand_over = |theirs: u32| {
            // Release pairs with the other side's Acquire load in `take_turn`.
            turn.store(theirs, Ordering::Release);
            WindowsFutex.wake_one(&turn);
        };
        thread::scope(|scope| {
            scope.spawn(|| {
                for round in 0..ROUND_TRIPS {
                    take_turn(1, 0);
                    assert_eq!(baton.load(Ordering::Relaxed), 2 * round + 1);
                    baton.store(2 * round + 2, Ordering::Relaxed);
                    hand_over(0);
                }
            });
            for round in 0..ROUND_TRIPS {
                take_turn(0, 1);
                assert_eq!(baton.load(Ordering::Relaxed), 2 * round);
                baton.store(2 * round + 1, Ordering::Relaxed);
                hand_over(1);
            }
        });
        assert_eq!(baton.load(Ordering::Relaxed), 2 * ROUND_TRIPS);
    });
}

#[test]
fn host_futex_is_usable_as_a_static() {
    static HOST: HostFutex = HostFutex::new();
    within_hang_limit("static", || {
        let word = FutexWord::new(0);
        thread::scope(|scope| {
            scope.spawn(|| {
                // Acquire pairs with the Release store below.
                while word.load(Ordering::Acquire) == 0 {
                    HOST.wait(&word, 0, None);
                }
            });
            thread::sleep(SETTLE);
            // Release pairs with the waiter's Acquire load.
            word.store(1, Ordering::Release);
            HOST.wake_all(&word);
        });
    });
}

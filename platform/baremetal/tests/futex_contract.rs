//! The `Futex` contract on the host, for the one implementation that runs everywhere
//! ([`SpinFutex`]), with and without a delay bounding timed waits. The sleeping futexes
//! (`InterruptFutex`, `EventFutex`) are exercised on qemu by `tests/firmware`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{Futex, FutexWord};
use causeway_platform_baremetal::{BareMetalFutex, SpinFutex};
use embedded_hal::delay::DelayNs;

/// How long the tests give spawned waiters to reach their wait before waking them.
const SETTLE: Duration = Duration::from_millis(20);

/// A `DelayNs` backed by the host's sleep.
struct HostDelay;

impl DelayNs for HostDelay {
    fn delay_ns(&mut self, ns: u32) {
        thread::sleep(Duration::from_nanos(u64::from(ns)));
    }
}

fn wait_returns_at_once_when_word_differs(futex: &impl Futex) {
    let word = FutexWord::new(1);
    futex.wait(&word, 0, None);
    futex.wait(&word, 0, Some(Duration::MAX));
}

fn a_store_and_wake_release_every_waiter(futex: &impl Futex) {
    const WAITERS: usize = 2;
    let word = FutexWord::new(0);
    let released = AtomicUsize::new(0);
    thread::scope(|scope| {
        for _ in 0..WAITERS {
            scope.spawn(|| {
                // Acquire pairs with the Release store of 1 below.
                while word.load(Ordering::Acquire) == 0 {
                    futex.wait(&word, 0, None);
                }
                released.fetch_add(1, Ordering::Relaxed);
            });
        }
        thread::sleep(SETTLE);
        // Release pairs with the waiters' Acquire loads.
        word.store(1, Ordering::Release);
        futex.wake_all(&word);
    });
    assert_eq!(released.load(Ordering::Relaxed), WAITERS);
}

/// Two threads hand a turn back and forth; a lost wake-up would leave both spinning forever.
fn ping_pong_completes(futex: &impl Futex) {
    const ROUND_TRIPS: u64 = 500;
    let turn = FutexWord::new(0);
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
}

#[test]
fn spin_futex_keeps_the_contract() {
    let futex = SpinFutex::new();
    wait_returns_at_once_when_word_differs(&futex);
    a_store_and_wake_release_every_waiter(&futex);
    ping_pong_completes(&futex);
}

#[test]
fn spin_futex_with_a_delay_keeps_the_contract() {
    let futex = SpinFutex::with_delay(HostDelay);
    wait_returns_at_once_when_word_differs(&futex);
    a_store_and_wake_release_every_waiter(&futex);
    ping_pong_completes(&futex);
}

#[test]
fn a_timed_wait_under_a_delay_lasts_its_timeout() {
    const TIMEOUT: Duration = Duration::from_millis(30);
    let futex = SpinFutex::with_delay(HostDelay);
    let word = FutexWord::new(0);
    let started = Instant::now();
    futex.wait(&word, 0, Some(TIMEOUT));
    let elapsed = started.elapsed();
    // Only a lower bound: how late a sleeper is rescheduled is up to the host.
    assert!(elapsed >= TIMEOUT, "returned after {elapsed:?}, timeout {TIMEOUT:?}");
}

#[test]
fn a_timed_wait_under_a_delay_ends_early_when_the_word_changes() {
    let futex = SpinFutex::with_delay(HostDelay);
    let word = FutexWord::new(0);
    let returned = AtomicBool::new(false);
    let started = Instant::now();
    thread::scope(|scope| {
        scope.spawn(|| {
            futex.wait(&word, 0, Some(Duration::from_secs(60)));
            returned.store(true, Ordering::Relaxed);
        });
        thread::sleep(SETTLE);
        word.store(1, Ordering::Relaxed);
        futex.wake_one(&word);
    });
    assert!(returned.load(Ordering::Relaxed));
    assert!(started.elapsed() < Duration::from_secs(30), "the wake ended the wait");
}

#[test]
fn a_timed_wait_without_a_delay_returns_at_once() {
    let futex = SpinFutex::new();
    let word = FutexWord::new(0);
    let started = Instant::now();
    futex.wait(&word, 0, Some(Duration::from_secs(60)));
    assert!(started.elapsed() < Duration::from_secs(30), "a spurious return, not a wait");
}

/// `BareMetalFutex` is the spin fallback on hosts and builds in a `static`.
#[test]
fn bare_metal_futex_is_usable_as_a_static() {
    static FUTEX: BareMetalFutex = BareMetalFutex::new();
    a_store_and_wake_release_every_waiter(&FUTEX);
}

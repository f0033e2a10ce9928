//! The `Futex` contract on the host, for the one implementation that runs everywhere
//! ([`SpinFutex`]), with and without a delay bounding timed waits. The sleeping futexes
//! (`InterruptFutex`, `EventFutex`) are exercised on qemu by `tests/firmware`. The generic
//! checks are the shared ones of `tests/support/futex_contract.rs`.

#[path = "../../../tests/support/futex_contract.rs"]
mod contract;

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use causeway_core::executor::{Futex, FutexWord};
use causeway_platform_baremetal::{BareMetalFutex, SpinFutex};
use contract::*;
use embedded_hal::delay::DelayNs;

/// A `DelayNs` backed by the host's sleep.
struct HostDelay;

impl DelayNs for HostDelay {
    fn delay_ns(&mut self, ns: u32) {
        thread::sleep(Duration::from_nanos(u64::from(ns)));
    }
}

#[test]
fn spin_futex_keeps_the_contract() {
    let futex = SpinFutex::new();
    wait_returns_at_once_when_word_differs(&futex);
    wake_all_releases_every_waiter(&futex, 2);
    ping_pong_completes(&futex, 500);
}

#[test]
fn spin_futex_with_a_delay_keeps_the_contract() {
    let futex = SpinFutex::with_delay(HostDelay);
    wait_returns_at_once_when_word_differs(&futex);
    wake_all_releases_every_waiter(&futex, 2);
    ping_pong_completes(&futex, 500);
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
    wake_all_releases_every_waiter(&FUTEX, 2);
}

//! The executor's wait seam over `WaitOnAddress`.

use core::ffi::c_void;
use core::time::Duration;

use causeway_core::executor::{Futex, FutexWord};
use windows_sys::Win32::System::Threading::{
    SwitchToThread, WaitOnAddress, WakeByAddressAll, WakeByAddressSingle, INFINITE,
};

// `WaitOnAddress` compares the word with a plain hardware read, so core's word must be a real
// hardware atomic (never portable-atomic's lock-based fallback) of four bytes. Checked here,
// at compile time.
const _: () = {
    assert!(size_of::<FutexWord>() == size_of::<u32>());
    assert!(FutexWord::is_always_lock_free());
};

/// [`Futex`] over `WaitOnAddress` / `WakeByAddressSingle` / `WakeByAddressAll`.
///
/// Holds no state: the system keys its wait queues by the word's address, so one value (or
/// `static`) serves every word in the process.
#[derive(Debug, Default, Clone, Copy)]
pub struct WindowsFutex;

impl WindowsFutex {
    /// Returns the futex handle; usable in a `static`.
    pub const fn new() -> WindowsFutex {
        WindowsFutex
    }
}

/// `WaitOnAddress` takes whole milliseconds. Rounding up keeps a timed wait at least as long as
/// asked; a timeout beyond the largest finite value (about 49.7 days) waits that long and
/// returns, a spurious wake-up the contract allows.
fn milliseconds(timeout: Option<Duration>) -> u32 {
    match timeout {
        None => INFINITE,
        Some(timeout) => {
            let rounded_up = timeout.as_nanos().div_ceil(1_000_000);
            u32::try_from(rounded_up).map_or(INFINITE - 1, |ms| ms.min(INFINITE - 1))
        }
    }
}

fn address(word: &FutexWord) -> *const c_void {
    word.as_ptr().cast_const().cast()
}

impl Futex for WindowsFutex {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        // Every outcome is a return to the caller, who re-checks its condition, so the result
        // (FALSE with ERROR_TIMEOUT when the timeout passed) is dropped.
        // SAFETY: `WaitOnAddress` reads `AddressSize` (4) bytes at each pointer. The first is
        // `word`'s value, live for this call, four bytes and always a hardware atomic (the
        // compile-time assertions above), so the system's plain read races with no non-atomic
        // access; the second is `expected`, a live local.
        let _ = unsafe {
            WaitOnAddress(
                address(word),
                core::ptr::from_ref(&expected).cast(),
                size_of::<u32>(),
                milliseconds(timeout),
            )
        };
    }

    fn wake_one(&self, word: &FutexWord) {
        // SAFETY: the address is only used as a key to find waiters; it is `word`'s, live.
        unsafe { WakeByAddressSingle(address(word)) };
    }

    fn wake_all(&self, word: &FutexWord) {
        // SAFETY: as in `wake_one`.
        unsafe { WakeByAddressAll(address(word)) };
    }

    fn yield_now(&self) {
        // Whether another thread ran is of no use to the caller, which goes on scanning.
        // SAFETY: `SwitchToThread` takes no arguments and touches no memory of the caller.
        let _ = unsafe { SwitchToThread() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up_to_whole_milliseconds_and_stay_finite() {
        assert_eq!(milliseconds(None), INFINITE);
        assert_eq!(milliseconds(Some(Duration::ZERO)), 0);
        assert_eq!(milliseconds(Some(Duration::from_nanos(1))), 1);
        assert_eq!(milliseconds(Some(Duration::from_micros(1_500))), 2);
        assert_eq!(milliseconds(Some(Duration::from_millis(7))), 7);
        assert_eq!(milliseconds(Some(Duration::from_secs(u64::MAX))), INFINITE - 1);
        assert_eq!(milliseconds(Some(Duration::from_millis(u64::from(INFINITE)))), INFINITE - 1);
    }
}

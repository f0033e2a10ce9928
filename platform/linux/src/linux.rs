//! The executor's wait seam over the Linux futex system call.

use core::sync::atomic::AtomicU32;
use core::time::Duration;

use causeway_core::executor::{Futex, FutexWord};
use rustix::thread::futex;

// The conversion in `as_kernel_word` relies on core's word having portable-atomic's layout and on
// every access to it being a real hardware atomic (never portable-atomic's lock-based fallback),
// because the kernel reads the word with a plain atomic load. Checked here, at compile time.
const _: () = {
    assert!(size_of::<FutexWord>() == size_of::<AtomicU32>());
    assert!(align_of::<FutexWord>() == align_of::<AtomicU32>());
    assert!(FutexWord::is_always_lock_free());
};

/// [`Futex`] over the kernel's `futex(2)` (`FUTEX_WAIT` / `FUTEX_WAKE`, process-private).
///
/// Holds no state: the kernel keys its wait queues by the word's address, so one value (or
/// `static`) serves every word in the process.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxFutex;

impl LinuxFutex {
    /// Returns the futex handle; usable in a `static`.
    pub const fn new() -> LinuxFutex {
        LinuxFutex
    }
}

/// Views the executor's word as the `core` atomic that `rustix` passes to the kernel.
fn as_kernel_word(word: &FutexWord) -> &AtomicU32 {
    // SAFETY: `AtomicU32::from_ptr` needs a pointer that is aligned, valid for the returned
    // lifetime, and never accessed non-atomically while that borrow lives. The pointer comes from
    // `word`, a live reference, and the returned borrow has `word`'s lifetime; the two types have
    // the same size and alignment and `FutexWord` is always lock-free (the compile-time
    // assertions above), so every access through either type is a hardware atomic on the same
    // four bytes; and `FutexWord` offers no non-atomic access to its value while shared.
    unsafe { AtomicU32::from_ptr(word.as_ptr()) }
}

/// `FUTEX_WAKE` with this count wakes every waiter. The kernel reads the count as a signed
/// `int`, so `u32::MAX` would arrive as -1 and wake only one.
const WAKE_EVERY_WAITER: u32 = i32::MAX as u32;

impl Futex for LinuxFutex {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        // `FUTEX_WAIT` takes a relative timeout. A duration too long for a `timespec` (beyond
        // 2^63 seconds) is indistinguishable from no timeout at all.
        let timeout = timeout.and_then(|timeout| futex::Timespec::try_from(timeout).ok());
        // Every outcome is a return to the caller, who re-checks its condition, so the result is
        // dropped: EAGAIN (the word no longer held `expected`), EINTR (a signal) and ETIMEDOUT
        // are the contract's ordinary returns, and the remaining documented errors (EFAULT,
        // EINVAL, ENOSYS) cannot arise from a live reference, a normalised timespec and a kernel
        // new enough to run Rust.
        let _ =
            futex::wait(as_kernel_word(word), futex::Flags::PRIVATE, expected, timeout.as_ref());
    }

    fn wake_one(&self, word: &FutexWord) {
        // The count of woken threads is of no use to the executor, and no error can arise from
        // a live reference (see `wait`).
        let _ = futex::wake(as_kernel_word(word), futex::Flags::PRIVATE, 1);
    }

    fn wake_all(&self, word: &FutexWord) {
        // As in `wake_one`: nothing to learn from the result.
        let _ = futex::wake(as_kernel_word(word), futex::Flags::PRIVATE, WAKE_EVERY_WAITER);
    }

    fn yield_now(&self) {
        rustix::thread::sched_yield();
    }
}

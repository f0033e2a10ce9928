//! The futex loom models park executor workers on: core's `loom_executor.rs` includes it with
//! `mod loom_support;`, the CPU driver's `loom_*.rs` with a `#[path]` to this file.

use std::time::Duration;

use causeway_core::executor::{Futex, FutexWord};
use loom::sync::atomic::Ordering;
use loom::sync::{Condvar, Mutex};

/// A futex over one lock and condition variable: the waker changes the word before taking the
/// lock and the waiter compares under it, so no wake slips between the compare and the sleep.
pub struct LoomFutex {
    lock: Mutex<()>,
    condvar: Condvar,
}

impl LoomFutex {
    /// A futex nobody waits on.
    pub fn new() -> LoomFutex {
        LoomFutex { lock: Mutex::new(()), condvar: Condvar::new() }
    }
}

impl Futex for LoomFutex {
    fn wait(&self, word: &FutexWord, expected: u32, _timeout: Option<Duration>) {
        let guard = self.lock.lock().unwrap();
        // SeqCst: the model's stand-in for the kernel's own compare, which is ordered with the
        // waker's store by the lock anyway.
        if word.load(Ordering::SeqCst) == expected {
            drop(self.condvar.wait(guard).unwrap());
        }
    }

    fn wake_one(&self, _word: &FutexWord) {
        let _guard = self.lock.lock().unwrap();
        self.condvar.notify_all();
    }

    fn wake_all(&self, _word: &FutexWord) {
        let _guard = self.lock.lock().unwrap();
        self.condvar.notify_all();
    }
}

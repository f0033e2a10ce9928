//! Blocking waits for host threads.
//!
//! A host thread that must wait for a timeline value arms a timepoint whose callback unparks
//! it, then parks. The timepoint lives on the waiting thread's stack and is cancelled before
//! the wait returns, whatever the outcome.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use causeway_core::semaphore::{Arm, Failure, HistorySlots, Notify, Outcome, Semaphore};

/// Why a host wait returned without the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostWaitError {
    /// The timeline failed.
    Failed(Failure),
    /// The timeout passed first; the semaphore was at `value`.
    TimedOut {
        /// The value when the wait gave up.
        value: u64,
    },
}

impl fmt::Display for HostWaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostWaitError::Failed(failure) => write!(f, "semaphore failed: {failure}"),
            HostWaitError::TimedOut { value } => write!(f, "timed out at value {value}"),
        }
    }
}

impl std::error::Error for HostWaitError {}

struct Unpark {
    thread: Thread,
    fired: AtomicBool,
}

impl Notify for Unpark {
    fn notify(&self, _: Outcome) {
        // Release pairs with the Acquire load in the park loop of `wait`.
        self.fired.store(true, Ordering::Release);
        self.thread.unpark();
    }

    /// The thread just unparked may have preempted this callback's thread: give the core back.
    fn while_firing(&self) {
        thread::yield_now();
    }
}

/// Blocks the calling thread until `semaphore` reaches `minimum` (returning the value seen),
/// the timeline fails, or `timeout` passes.
pub fn wait<const H: usize, const N: usize, S: HistorySlots<N>>(
    semaphore: &Semaphore<H, N, S>,
    minimum: u64,
    timeout: Option<Duration>,
) -> Result<u64, HostWaitError> {
    wait_until(semaphore, minimum, timeout.and_then(|t| Instant::now().checked_add(t)))
}

/// [`wait`] with an absolute deadline (`None`: no deadline).
pub fn wait_until<const H: usize, const N: usize, S: HistorySlots<N>>(
    semaphore: &Semaphore<H, N, S>,
    minimum: u64,
    deadline: Option<Instant>,
) -> Result<u64, HostWaitError> {
    let wake = Unpark { thread: thread::current(), fired: AtomicBool::new(false) };
    let arm = semaphore.wait_scoped(minimum, &wake, |arm| {
        if arm != Arm::Armed {
            return arm;
        }
        // Acquire pairs with the Release store in `Unpark::notify`.
        while !wake.fired.load(Ordering::Acquire) {
            match deadline {
                None => thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Arm::Armed;
                    }
                    thread::park_timeout(deadline - now);
                }
            }
        }
        // `failure_for`, not `failure`: a cancelled signal fails the values it would have
        // reached without failing the timeline, and a timeline that failed after reaching
        // `minimum` still answers this wait with success.
        Arm::Ready(semaphore.failure_for(minimum).map_or_else(|| Ok(semaphore.value()), Err))
    });
    match arm {
        Arm::Ready(Ok(value)) => Ok(value),
        Arm::Ready(Err(failure)) => Err(HostWaitError::Failed(failure)),
        // Gave up at the deadline. A wait whose signal is still live has not ended, even when
        // its value is known to fail: the operation it waits for has not ended yet.
        Arm::Armed if semaphore.is_live_at(minimum) => {
            Err(HostWaitError::TimedOut { value: semaphore.value() })
        }
        Arm::Armed => match semaphore.failure_for(minimum) {
            Some(failure) => Err(HostWaitError::Failed(failure)),
            None if semaphore.value() >= minimum => Ok(semaphore.value()),
            None => Err(HostWaitError::TimedOut { value: semaphore.value() }),
        },
    }
}

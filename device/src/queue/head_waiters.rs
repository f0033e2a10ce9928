//! Sleeping until a queue's `head` (the operations it has retired) reaches a point: the
//! protocol behind a submitter's wait for room and a wait for retirements (the policy — what
//! point, for how long — is the ring's: `ring.rs`, "Waiting for a free slot").
//!
//! Its atomics, lock and condition variable come from `crate::sync`, so that under `--cfg loom`
//! the loom model (`tests/loom_head_waiters.rs`) checks this type as the queue uses it.
//!
//! # Protocol
//!
//! A sleeper stores the `head` it wants to be woken at, its *wake point*, into `wake_at` (the
//! lowest of every sleeper's: `fetch_min`; `u64::MAX` when none sleeps), then reads `head`,
//! then sleeps on the condition variable. The queue process stores `head` (in `free_head`),
//! then reads `wake_at`, and when `head` reached it, resets it and wakes every sleeper:
//!
//! ```text
//!  sleeper (holds `lock`)                          queue process (`advanced`)
//!  wake_at.fetch_min(point)                        head.store(h)
//!  heavy barrier                                   light barrier
//!  head ≥ point? ── yes ──▶ decide again           h ≥ wake_at? ── no ──▶ done
//!       │ no                                            │ yes
//!  sleep (releases `lock`)                         lock; wake_at = MAX; notify_all
//! ```
//!
//! Invariants:
//! 1. The two sides are a store/load pair on different words, each with a store → load barrier
//!    between its accesses: either the sleeper sees the `head` that reached its point, or the
//!    queue process sees the point.
//! 2. Every store to `wake_at` is made under `lock`: a sleeper's `fetch_min` and the queue
//!    process's reset. So a reset comes before a sleeper's store, or after the sleeper sleeps
//!    and then its `notify_all` wakes it.
//! 3. A woken sleeper decides again and, if it sleeps again, stores its point again.
//!
//! So a sleeper whose point `head` reaches is woken, whatever other sleepers do; a sleeper may
//! also wake early (another's point, a reset it did not need, a spurious wake-up), which only
//! makes it decide again.
//!
//! The queue process retires every operation and a sleeper sleeps rarely, so the barrier pair
//! is asymmetric (`causeway_runtime::barrier`): the queue process's barrier is a compiler
//! barrier only, the sleeper's makes every thread of the process execute a full one
//! (`membarrier` on Linux; both are `SeqCst` fences where that is not available). A locked
//! instruction here cost the signal → dependent start path 7–8 ns of its ~125 (it waits for
//! every store before it to reach the cache). The queue process pays, with nobody sleeping, one
//! load and a comparison.

use std::time::Instant;

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::barrier;
use crate::sync::lock::{Condvar, Mutex};

/// What a sleeper decided, each time it looks ([`HeadWaiters::sleep`]).
pub enum Sleep {
    /// Done: `true` when the wait got what it waited for.
    Over(bool),
    /// Sleep until woken, or until `at`.
    Until {
        /// The wake point: wake me when `head` reaches this.
        head: u64,
        /// When to look again if nobody wakes me (`None`: not before a wake).
        at: Option<Instant>,
    },
}

/// The sleepers waiting for a queue's `head`, and how the queue process wakes them.
pub struct HeadWaiters {
    /// The lowest wake point of a sleeper; `u64::MAX` when none sleeps.
    wake_at: AtomicU64,
    lock: Mutex<()>,
    woken: Condvar,
}

impl HeadWaiters {
    /// Nobody sleeping.
    pub fn new() -> HeadWaiters {
        HeadWaiters {
            wake_at: AtomicU64::new(u64::MAX),
            lock: Mutex::new(()),
            woken: Condvar::new(),
        }
    }

    /// The queue process's side: called after it stored `head`, with that value. Inlined into
    /// the retirement, whose every operation pays it.
    #[inline]
    pub fn advanced(&self, head: u64) {
        // The frequent side of the store → load pair with `sleep` (invariant 1); pairs with
        // its heavy barrier.
        barrier::light();
        if head >= self.wake_at.load(Ordering::Relaxed) {
            self.wake_all();
        }
    }

    /// Wakes every sleeper, each of which decides again; out of line, where the retirement
    /// that rarely calls it does not carry its code.
    #[cold]
    #[inline(never)]
    fn wake_all(&self) {
        // Invariant 2: under the lock every sleeper stores its point and checks under.
        let _guard = self.lock.lock();
        self.wake_at.store(u64::MAX, Ordering::Relaxed);
        self.woken.notify_all();
    }

    /// The sleeper's side: sleeps as `decide(head, tail, now)` asks each time it looks (the
    /// indices from `indices`, which reads `head` with Acquire), until it says the wait is
    /// over; returns what it said then.
    pub fn sleep(
        &self,
        indices: impl Fn() -> (u64, u64),
        mut decide: impl FnMut(u64, u64, Instant) -> Sleep,
    ) -> bool {
        let mut guard = self.lock.lock();
        loop {
            let (head, tail) = indices();
            let (point, at) = match decide(head, tail, Instant::now()) {
                Sleep::Over(got) => return got,
                Sleep::Until { head, at } => (head, at),
            };
            // Invariant 2: under the lock the reset is made under.
            self.wake_at.fetch_min(point, Ordering::Relaxed);
            // The rare side of the store → load pair with `advanced` (invariant 1); pairs with
            // its light barrier.
            barrier::heavy();
            if indices().0 >= point {
                continue;
            }
            guard = match at {
                None => self.woken.wait(guard),
                Some(at) => {
                    let left = at.saturating_duration_since(Instant::now());
                    self.woken.wait_timeout(guard, left)
                }
            };
        }
    }
}

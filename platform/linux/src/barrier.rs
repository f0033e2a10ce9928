//! An asymmetric store → load barrier: [`light`] on a path that runs all the time, [`heavy`] on
//! one that runs rarely, together as strong as a `SeqCst` fence on each side.
//!
//! # The pattern it serves
//!
//! Two threads each store one word and then load the other's (a Dekker pair: a queue that frees
//! a slot and then looks for waiters, a waiter that registers and then looks for a free slot).
//! Neither load may be satisfied before its own store is visible to the other thread, or both
//! can miss each other. A `SeqCst` fence between store and load on both sides rules that out,
//! but on x86-64 a fence (or a locked instruction) waits for every earlier store to reach the
//! cache, and the frequent side pays that on every call.
//!
//! With an asymmetric barrier the frequent side only stops the compiler from reordering
//! ([`light`]), and the rare side makes every other thread of the process execute a full
//! barrier ([`heavy`]: Linux's `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which
//! interrupts each CPU running one of the process's threads; a thread not running passed a
//! context switch, a full barrier too). Argument, for `light` between store A and load B on one
//! thread and `heavy` between store B and load A on another: the frequent thread's barrier
//! ran at some point of its program. If its store A came before that point, A was visible
//! when `heavy` returned, and the load of A after it sees it; otherwise its load B comes after
//! that point, after `heavy` began and so after store B. Either one load sees the other
//! side's store, as with two fences.
//!
//! # Availability
//!
//! The expedited command needs Linux 4.14 and a registration per process, which [`prepare`]
//! makes (a process-wide one-time step, cheap; a device calls it when it is built). Until it
//! succeeds — and on other targets, under Miri, or when the kernel refuses — both functions are plain
//! `SeqCst` fences: correct, only without the saving. The mode is decided once and never goes
//! back, so a `heavy` never runs as a fence while some `light` ran as a compiler barrier:
//! `light` reads the mode, `heavy` reads it again after any `light` that saw it set (it was
//! set before either).

use std::sync::atomic::{compiler_fence, fence, AtomicU8, Ordering};

/// Not decided yet: both sides are fences.
const UNDECIDED: u8 = 0;
/// Registered for expedited barriers: [`light`] orders for the compiler only.
const EXPEDITED: u8 = 1;
/// The kernel offers no expedited barrier: both sides stay fences.
const FENCES: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Decides the mode once for the process (registering for expedited barriers where the kernel
/// offers them); returns whether [`light`] is now a compiler barrier only. Later calls return
/// the first decision.
pub fn prepare() -> bool {
    let decided = MODE.load(Ordering::Acquire);
    if decided != UNDECIDED {
        return decided == EXPEDITED;
    }
    let mode = if register() { EXPEDITED } else { FENCES };
    // AcqRel: a thread that loses the race adopts the winner's mode, and one that reads
    // EXPEDITED later (Acquire) sees the registration made before it.
    match MODE.compare_exchange(UNDECIDED, mode, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => mode == EXPEDITED,
        Err(winner) => winner == EXPEDITED,
    }
}

/// The frequent side: between a store and a load that must not be reordered with it, when the
/// other side of the pair calls [`heavy`] between its own store and load.
#[inline]
pub fn light() {
    // Relaxed: the mode only moves from UNDECIDED to its final value. A stale UNDECIDED means a
    // fence, which is always enough.
    if MODE.load(Ordering::Relaxed) == EXPEDITED {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The rare side: between a store and a load, pairing with [`light`] on the frequent side. A
/// system call (microseconds) once the mode is expedited.
pub fn heavy() {
    if prepare() {
        if expedited_barrier() {
            return;
        }
        // Refused although registered: a forked child's address space may have started out
        // unregistered while this static says otherwise. Register again, once.
        if register() && expedited_barrier() {
            return;
        }
        // Still refused (never expected): a `light` somewhere may already rely on this
        // barrier, so there is nothing sound left to do.
        std::process::abort();
    }
    fence(Ordering::SeqCst);
}

#[cfg(all(target_os = "linux", not(loom), not(miri)))]
fn register() -> bool {
    use rustix::thread::{membarrier, membarrier_query, MembarrierCommand};
    let offered = membarrier_query();
    offered.contains_command(MembarrierCommand::PrivateExpedited)
        && offered.contains_command(MembarrierCommand::RegisterPrivateExpedited)
        && membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
}

#[cfg(all(target_os = "linux", not(loom), not(miri)))]
fn expedited_barrier() -> bool {
    use rustix::thread::{membarrier, MembarrierCommand};
    membarrier(MembarrierCommand::PrivateExpedited).is_ok()
}

// Elsewhere (under loom, whose models pair SeqCst fences themselves, and under Miri, which
// runs no `membarrier`) nothing registers: both sides stay fences.
#[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
fn register() -> bool {
    false
}

#[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
fn expedited_barrier() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn prepare_decides_once() {
        let first = prepare();
        assert_eq!(prepare(), first);
        if cfg!(all(target_os = "linux", not(loom), not(miri))) {
            // Every kernel the project supports (4.14 and later) offers it.
            assert!(first, "membarrier(PRIVATE_EXPEDITED) is available on this Linux kernel");
        }
        heavy();
        light();
    }

    /// The store-buffering litmus test: two threads store one word each and then load the
    /// other's, one with `light`, one with `heavy` between. Each round both threads meet at a
    /// counter, then each waits a varying few spins so that their stores land close together
    /// some of the time. With compiler barriers only, both loads see the old values within a
    /// few thousand rounds on x86-64 (checked when this test was written); with these two
    /// barriers, never.
    #[test]
    fn a_light_and_a_heavy_barrier_forbid_store_buffering() {
        prepare();
        const ROUNDS: u64 = 100_000;
        /// One word per cache line, so each store waits for its own line alone.
        #[repr(align(64))]
        struct Line(AtomicU64);
        let words = Arc::new([Line(AtomicU64::new(0)), Line(AtomicU64::new(0))]);
        let seen = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let arrived = Arc::new(AtomicU64::new(0));
        // Spins until both sides arrived; yields now and then, in case the other side's thread
        // is not running (a loaded machine).
        fn meet(arrived: &AtomicU64, count: u64) {
            let mut spins = 0u32;
            while arrived.load(Ordering::Acquire) < count {
                spins += 1;
                if spins % 1024 == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        // Both sides run the same round: meet, wait a little, store, barrier, load, meet again.
        let side = move |me: usize, barrier: fn()| {
            let (words, seen, arrived) =
                (Arc::clone(&words), Arc::clone(&seen), Arc::clone(&arrived));
            move || {
                let mut missed = 0u64;
                let mut jitter = 0x9e37_79b9_u32.wrapping_mul(me as u32 + 1);
                for round in 1..=ROUNDS {
                    arrived.fetch_add(1, Ordering::AcqRel);
                    meet(&arrived, 2 * (2 * round - 1));
                    jitter ^= jitter << 13;
                    jitter ^= jitter >> 17;
                    jitter ^= jitter << 5;
                    for _ in 0..jitter % 48 {
                        std::hint::spin_loop();
                    }
                    words[me].0.store(round, Ordering::Relaxed);
                    barrier();
                    seen[me].store(words[1 - me].0.load(Ordering::Relaxed), Ordering::Relaxed);
                    arrived.fetch_add(1, Ordering::AcqRel);
                    meet(&arrived, 2 * (2 * round));
                    if seen[0].load(Ordering::Relaxed) != round
                        && seen[1].load(Ordering::Relaxed) != round
                    {
                        missed += 1;
                    }
                }
                missed
            }
        };
        let frequent = std::thread::spawn(side(0, light));
        let missed = side(1, heavy)();
        let missed_too = frequent.join().unwrap();
        assert_eq!((missed, missed_too), (0, 0), "rounds in which both sides missed the other");
    }
}

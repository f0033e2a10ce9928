//! The executor's wait seam emulated with std's mutexes and condition variables, for hosts whose
//! kernel offers no futex.

use core::fmt;
use core::sync::atomic::Ordering;
use core::time::Duration;

use causeway_core::executor::{Futex, FutexWord};
use causeway_core::unpoisoned::{Condvar, Mutex};
use causeway_core::CachePadded;

const BUCKET_INDEX_BITS: u32 = 6;
const BUCKET_COUNT: usize = 1 << BUCKET_INDEX_BITS;

/// 2^64 divided by the golden ratio: multiplying by it scatters nearby addresses across the
/// high bits (Fibonacci hashing), which is where the bucket index is taken from.
const FIBONACCI_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// A wait queue shared by every word whose address hashes to it.
struct Bucket {
    /// How many wakes this bucket has seen. A waiter sleeps until the count moves, which absorbs
    /// the condition variable's own spurious wake-ups while any real wake still ends the wait.
    /// At 64 bits it cannot wrap within the life of a process. Any value of it is consistent,
    /// so a panic elsewhere while it is held leaves nothing to repair.
    wakes: Mutex<u64>,
    sleepers: Condvar,
}

impl Bucket {
    const fn new() -> Bucket {
        Bucket { wakes: Mutex::new(0), sleepers: Condvar::new() }
    }
}

/// [`Futex`] emulated with a fixed table of `std::sync::{Mutex, Condvar}` buckets, each shared by
/// the words whose addresses hash to it.
///
/// For std hosts without a futex-like system call; on Linux prefer `LinuxFutex`
/// (see [`HostFutex`]). The table lives inline (a few KiB), and nothing is allocated by this type
/// itself; `std`'s locks allocate nothing on futex-based platforms (Linux, Windows, the BSDs),
/// while its pthread-based ones may box their lock on first use.
///
/// [`HostFutex`]: crate::HostFutex
pub struct ParkingFutex {
    /// Each bucket on a cache line of its own: threads parking on unrelated words should not
    /// contend.
    buckets: [CachePadded<Bucket>; BUCKET_COUNT],
}

impl ParkingFutex {
    /// Returns a futex with every bucket empty; usable in a `static`.
    pub const fn new() -> ParkingFutex {
        ParkingFutex { buckets: [const { CachePadded::new(Bucket::new()) }; BUCKET_COUNT] }
    }

    fn bucket_for(&self, word: &FutexWord) -> &Bucket {
        let address = core::ptr::from_ref(word).addr() as u64;
        let index = address.wrapping_mul(FIBONACCI_MULTIPLIER) >> (u64::BITS - BUCKET_INDEX_BITS);
        // In bounds: `index` keeps only the top `BUCKET_INDEX_BITS` bits of the product.
        &self.buckets[index as usize]
    }

    /// Counts a wake on `word`'s bucket and wakes every thread sleeping there.
    fn wake_bucket(&self, word: &FutexWord) {
        let bucket = self.bucket_for(word);
        {
            // Counting under the lock is what reaches a waiter that has compared the word but
            // not yet gone to sleep: it holds this lock from its comparison until the condition
            // variable releases it, so it either sees the new count or is already asleep.
            let mut wakes = bucket.wakes.lock();
            *wakes = wakes.wrapping_add(1);
        }
        // Notified after unlocking, so the woken threads do not immediately block on the lock.
        bucket.sleepers.notify_all();
    }
}

impl Default for ParkingFutex {
    fn default() -> ParkingFutex {
        ParkingFutex::new()
    }
}

impl fmt::Debug for ParkingFutex {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("ParkingFutex").field("buckets", &BUCKET_COUNT).finish()
    }
}

impl Futex for ParkingFutex {
    fn wait(&self, word: &FutexWord, expected: u32, timeout: Option<Duration>) {
        let bucket = self.bucket_for(word);
        let wakes = bucket.wakes.lock();
        // Relaxed is enough to rule out a lost wake: a waker stores to the word before taking
        // this lock in `wake_bucket`, so if it took the lock first its store happens-before this
        // load, and otherwise its wake comes after this thread is asleep. Ordering the caller's
        // own data is left to the caller's re-check of its condition.
        if word.load(Ordering::Relaxed) != expected {
            return;
        }
        let wakes_before_sleep = *wakes;
        let not_yet_woken = |wakes: &mut u64| *wakes == wakes_before_sleep;
        // The returned guard is only dropped: the caller re-checks its condition either way.
        match timeout {
            None => drop(bucket.sleepers.wait_while(wakes, not_yet_woken)),
            Some(timeout) => {
                drop(bucket.sleepers.wait_timeout_while(wakes, timeout, not_yet_woken));
            }
        }
    }

    fn wake_one(&self, word: &FutexWord) {
        // Every word hashing to this bucket shares its condition variable, so `notify_one` could
        // rouse a thread waiting on some other word and leave this word's waiter asleep: a lost
        // wake. Waking the whole bucket instead costs only spurious returns on the other words,
        // which the contract allows.
        self.wake_bucket(word);
    }

    fn wake_all(&self, word: &FutexWord) {
        self.wake_bucket(word);
    }

    fn yield_now(&self) {
        std::thread::yield_now();
    }
}

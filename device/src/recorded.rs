//! [`Recorded`]: an append-only table of what a driver records — command buffers, the kernels
//! they run — filled before the device is built and while it runs, read without a lock by
//! submission and by the driver's issue path.
//!
//! A driver's [`Backend::command_buffers`](crate::Backend::command_buffers) is the count the
//! layer checks every [`Kernel::Execute`](crate::Kernel::Execute) against, at each submission;
//! a table that grows while the device runs keeps that count true only if every entry below it
//! is complete — stored, and made ready for the device (linked to it, say). So recording is
//! serialised by a writer lock, and each entry is stored, then prepared at its final address,
//! then counted:
//!
//! ```text
//!   push(item, ready):  lock ─ store at index n ─ ready(&item) ─ count = n + 1 ─ unlock
//!   submission:         n < count?  (Acquire)  ─ refused as unknown otherwise
//!   driver:             get(n)                 ─ the entry, complete
//! ```
//!
//! Invariants: entries never move and are never removed while the table lives (indices are
//! ids handed to users); `count` only grows, by one per stored entry, and every index below
//! it names an entry `ready` has returned for.
//!
//! Ordering: the count is stored with Release after `ready` returns, pairing with the Acquire
//! of [`len`](Recorded::len) at submission; the submission then publishes the operation
//! through its ring (Release on the tail, acquired by the queue process), so the driver's
//! [`get`](Recorded::get) on the issue path finds the entry complete as well. The storage is
//! `boxcar`'s append-only vector: its buckets are allocated once and never moved, and a slot
//! reads as absent until written.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

use causeway_core::unpoisoned::Mutex;

/// An append-only table of recorded entries; see the [module documentation](self).
pub struct Recorded<T> {
    items: boxcar::Vec<T>,
    /// Entries stored and ready: indices `0..count` (see the module documentation).
    count: AtomicU32,
    /// Serialises recording, so indices are handed out in order and counted contiguously.
    writer: Mutex<()>,
}

impl<T> Recorded<T> {
    /// An empty table.
    pub fn new() -> Recorded<T> {
        Recorded { items: boxcar::Vec::new(), count: AtomicU32::new(0), writer: Mutex::new(()) }
    }

    /// Stores `item` at the next index, calls `ready` with it at its final address, and then
    /// counts it; hands it back when the table already holds `u32::MAX` entries.
    pub fn push<'a>(&'a self, item: T, ready: impl FnOnce(&'a T)) -> Result<u32, T> {
        let _writer = self.writer.lock();
        let index = self.count.load(Ordering::Relaxed);
        if index == u32::MAX {
            return Err(item);
        }
        let stored = self.items.push(item);
        debug_assert_eq!(stored, index as usize, "the writer lock orders every push");
        if let Some(item) = self.items.get(stored) {
            ready(item);
        }
        // Release: pairs with the Acquire in `len`, so a submission that counts this entry
        // finds it stored and ready.
        self.count.store(index + 1, Ordering::Release);
        Ok(index)
    }

    /// Stores every item of `items` at consecutive indices and counts them together; hands
    /// them all back when they would take the table past `u32::MAX` entries.
    pub fn push_all(&self, items: Vec<T>) -> Result<Range<u32>, Vec<T>> {
        let _writer = self.writer.lock();
        let first = self.count.load(Ordering::Relaxed);
        let Some(end) = u32::try_from(items.len()).ok().and_then(|len| first.checked_add(len))
        else {
            return Err(items);
        };
        for item in items {
            self.items.push(item);
        }
        // Release: pairs with the Acquire in `len` (as in `push`).
        self.count.store(end, Ordering::Release);
        Ok(first..end)
    }

    /// The entry at `index`, once stored.
    pub fn get(&self, index: u32) -> Option<&T> {
        self.items.get(index as usize)
    }

    /// Entries stored and ready: every index below this names one.
    pub fn len(&self) -> u32 {
        // Acquire: pairs with the Release of the count in `push` and `push_all`.
        self.count.load(Ordering::Acquire)
    }

    /// Whether nothing is recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries stored and ready, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len()).filter_map(|index| self.get(index))
    }
}

impl<T> Default for Recorded<T> {
    fn default() -> Recorded<T> {
        Recorded::new()
    }
}

impl<T> From<Vec<T>> for Recorded<T> {
    /// A table holding `items` at indices `0..`.
    fn from(items: Vec<T>) -> Recorded<T> {
        let table = Recorded::new();
        // Longer than ids name (`u32::MAX` entries), the table keeps the first `u32::MAX`.
        for item in items {
            if table.push(item, |_| {}).is_err() {
                break;
            }
        }
        table
    }
}

impl<T> fmt::Debug for Recorded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorded").field("len", &self.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn entries_are_counted_once_ready_in_order() {
        let table = Recorded::new();
        let mut readied = Vec::new();
        // Fewer under Miri, which interprets every step.
        const COUNT: u32 = if cfg!(miri) { 100 } else { 1000 };
        for value in 0..COUNT {
            let index = table.push(value, |item| readied.push(*item)).unwrap();
            assert_eq!(index, value);
            assert_eq!(table.len(), value + 1);
        }
        assert_eq!(readied, (0..COUNT).collect::<Vec<_>>());
        assert_eq!(table.push_all(vec![7, 8, 9]).unwrap(), COUNT..COUNT + 3);
        assert_eq!(table.get(COUNT + 1), Some(&8));
        assert_eq!(table.get(COUNT + 3), None);
        assert_eq!(table.iter().count(), COUNT as usize + 3);
    }

    #[test]
    fn concurrent_recorders_fill_every_index_below_the_count() {
        // Fewer under Miri, which interprets every step.
        const PER_THREAD: u32 = if cfg!(miri) { 60 } else { 2_500 };
        let table = Arc::new(Recorded::new());
        let recorders: Vec<_> = (0..4u32)
            .map(|thread| {
                let table = Arc::clone(&table);
                std::thread::spawn(move || {
                    for value in 0..PER_THREAD {
                        table.push(thread * 10_000 + value, |_| {}).unwrap();
                        // The newest counted entry is complete, whoever stored it.
                        assert!(table.get(table.len() - 1).is_some());
                    }
                })
            })
            .collect();
        for recorder in recorders {
            recorder.join().unwrap();
        }
        assert_eq!(table.len(), 4 * PER_THREAD);
        let mut values: Vec<u32> = table.iter().copied().collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), 4 * PER_THREAD as usize);
    }
}

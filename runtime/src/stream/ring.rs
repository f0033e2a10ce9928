//! The stream's bounded multi-producer, multi-consumer ring: an array of `C` slots with one
//! sequence number each (Vyukov's bounded queue). Values live inline; nothing is allocated.
//!
//! # Protocol
//!
//! Producers claim increasing *positions* from `enqueue`, consumers from `dequeue`; position
//! `p` uses slot `p mod C`. A slot's sequence number says whose turn it is:
//!
//! ```text
//!            producer of p: CAS enqueue p → p+1, write value, seq := p+1 (Release)
//!   seq = p ─────────────────────────────────────────────────────────────────► seq = p+1
//!   (free for the producer of p)                                   (holds the value of p)
//!      ▲                                                                           │
//!      │    consumer of p: CAS dequeue p → p+1, read value, seq := p+C (Release)   │
//!      └──────────────── seq = p+C = (p+C), the next lap's "free" ◄────────────────┘
//! ```
//!
//! - A producer at position `p` that finds `seq < p` sees the previous lap's value still there
//!   (or still being read): the ring is full and the value is handed back. `seq > p` means
//!   another producer took `p`; it reloads the position.
//! - A consumer at `p` that finds `seq < p+1` sees no value yet: empty, or a producer has
//!   claimed `p` and not yet written it (the caller counts claims separately, see the stream
//!   module). `seq > p+1` means another consumer took `p`; it reloads the position.
//!
//! Invariants: exactly one producer wins each position and exactly one consumer (the position
//! CASes); a slot's value is written only by the producer that won its position while
//! `seq = p`, and read only by the consumer that won it while `seq = p+1`; so each pushed value
//! is popped exactly once.
//!
//! # Orderings
//!
//! - The sequence store after writing a value is **Release**, paired with the consumer's
//!   **Acquire** load of the sequence: the value's bytes are visible before it is read.
//! - The sequence store after reading a value is **Release**, paired with the next lap's
//!   producer's **Acquire** load: the move-out happens before the slot is overwritten.
//! - The position loads and CASes are **Relaxed**: they only arbitrate who owns a position;
//!   every byte of data crosses threads through the sequence numbers above.
//!
//! Positions wrap (`usize` arithmetic modulo 2^bits); `C` is a power of two, so `p mod C` stays
//! continuous across the wrap and sequence comparisons use the wrapped difference.

use std::mem::MaybeUninit;

use causeway_core::CachePadded;

use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

struct Slot<T> {
    sequence: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Slot<T> {
    #[cfg(not(loom))]
    const fn new(sequence: usize) -> Slot<T> {
        Slot { sequence: AtomicUsize::new(sequence), value: UnsafeCell::new(MaybeUninit::uninit()) }
    }

    #[cfg(loom)]
    fn new(sequence: usize) -> Slot<T> {
        Slot { sequence: AtomicUsize::new(sequence), value: UnsafeCell::new(MaybeUninit::uninit()) }
    }
}

/// See the [module docs](self).
pub(crate) struct Ring<T, const C: usize> {
    /// The producers' and the consumers' positions, the hot words, each on a line of its own.
    enqueue: CachePadded<AtomicUsize>,
    dequeue: CachePadded<AtomicUsize>,
    slots: [Slot<T>; C],
}

// SAFETY: values move in through `push` and out through `pop` on whichever thread calls them,
// so `T: Send` is required and sufficient; the protocol gives each slot's value to exactly one
// thread at a time (see the module docs), so the cells are never shared.
unsafe impl<T: Send, const C: usize> Sync for Ring<T, C> {}
// SAFETY: as for `Sync`; the ring owns its values.
unsafe impl<T: Send, const C: usize> Send for Ring<T, C> {}

impl<T, const C: usize> Ring<T, C> {
    const CAPACITY_IS_VALID: () =
        assert!(C.is_power_of_two() && C <= isize::MAX as usize / 2, "ring capacity");

    const MASK: usize = C - 1;

    /// An empty ring.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Ring<T, C> {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_IS_VALID;
        let mut slots = [const { Slot::new(0) }; C];
        let mut index = 0;
        while index < C {
            slots[index] = Slot::new(index);
            index += 1;
        }
        Ring {
            enqueue: CachePadded(AtomicUsize::new(0)),
            dequeue: CachePadded(AtomicUsize::new(0)),
            slots,
        }
    }

    /// An empty ring.
    #[cfg(loom)]
    pub(crate) fn new() -> Ring<T, C> {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_IS_VALID;
        Ring {
            enqueue: CachePadded(AtomicUsize::new(0)),
            dequeue: CachePadded(AtomicUsize::new(0)),
            slots: std::array::from_fn(Slot::new),
        }
    }

    /// Appends `value`, or hands it back when the slot it needs still holds the previous lap's.
    pub(crate) fn push(&self, value: T) -> Result<(), T> {
        let mut position = self.enqueue.0.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[position & Self::MASK];
            // Acquire pairs with the consumer's Release store of `position` (as p + C) in `pop`.
            let sequence = slot.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position) as isize;
            if lag == 0 {
                match self.enqueue.0.compare_exchange_weak(
                    position,
                    position.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the CAS for `position` while the slot's sequence was
                        // `position` makes this thread the slot's only accessor until it
                        // publishes below (module invariants); the previous value was moved
                        // out before that sequence was stored (Acquire above).
                        slot.value.with_mut(|cell| unsafe { (*cell).write(value) });
                        // Release pairs with the Acquire load in `pop`.
                        slot.sequence.store(position.wrapping_add(1), Ordering::Release);
                        return Ok(());
                    }
                    Err(current) => position = current,
                }
            } else if lag < 0 {
                return Err(value);
            } else {
                position = self.enqueue.0.load(Ordering::Relaxed);
            }
        }
    }

    /// Takes the oldest value, or `None` when the next position holds none yet.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut position = self.dequeue.0.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[position & Self::MASK];
            // Acquire pairs with the producer's Release store of `position + 1` in `push`.
            let sequence = slot.sequence.load(Ordering::Acquire);
            let lag = sequence.wrapping_sub(position.wrapping_add(1)) as isize;
            if lag == 0 {
                match self.dequeue.0.compare_exchange_weak(
                    position,
                    position.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: winning the CAS for `position` while the slot's sequence was
                        // `position + 1` makes this thread the only reader of the value its
                        // producer published (visible through the Acquire above); nobody
                        // writes the slot again until the store below.
                        let value =
                            slot.value.with_mut(|cell| unsafe { (*cell).assume_init_read() });
                        // Release pairs with the Acquire load in `push` of the next lap.
                        slot.sequence.store(position.wrapping_add(C), Ordering::Release);
                        return Some(value);
                    }
                    Err(current) => position = current,
                }
            } else if lag < 0 {
                return None;
            } else {
                position = self.dequeue.0.load(Ordering::Relaxed);
            }
        }
    }
}

impl<T, const C: usize> Drop for Ring<T, C> {
    fn drop(&mut self) {
        // Exclusive access: every push has returned, so every claimed position is published
        // and `pop` sees all of them.
        while let Some(value) = self.pop() {
            drop(value);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;
    use std::thread;

    use super::*;

    #[test]
    fn fifo_until_full_then_hands_back() {
        let ring: Ring<u32, 4> = Ring::new();
        for value in 0..4 {
            ring.push(value).unwrap();
        }
        assert_eq!(ring.push(9), Err(9));
        assert_eq!(ring.pop(), Some(0));
        ring.push(4).unwrap();
        let drained: Vec<u32> = std::iter::from_fn(|| ring.pop()).collect();
        assert_eq!(drained, [1, 2, 3, 4]);
        assert_eq!(ring.pop(), None);
    }

    #[test]
    fn positions_wrap_around_the_integer_range() {
        let ring: Ring<u32, 2> = Ring::new();
        // Start both positions just below the wrap, with the slots' sequences to match.
        let start = usize::MAX - 2;
        ring.enqueue.0.store(start, Ordering::Relaxed);
        ring.dequeue.0.store(start, Ordering::Relaxed);
        for position in [start, start.wrapping_add(1)] {
            ring.slots[position & 1].sequence.store(position, Ordering::Relaxed);
        }
        for round in 0..8 {
            ring.push(round).unwrap();
            ring.push(round + 100).unwrap();
            assert_eq!(ring.push(7), Err(7));
            assert_eq!(
                (ring.pop(), ring.pop(), ring.pop()),
                (Some(round), Some(round + 100), None)
            );
        }
    }

    #[test]
    fn dropping_the_ring_drops_what_it_holds() {
        let drops = Arc::new(AtomicU32::new(0));
        struct Counted(Arc<AtomicU32>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let ring: Ring<Counted, 4> = Ring::new();
        for _ in 0..3 {
            assert!(ring.push(Counted(Arc::clone(&drops))).is_ok());
        }
        drop(ring.pop());
        drop(ring);
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn concurrent_producers_and_consumers_move_every_value_once() {
        // Miri interprets every atomic; a few hundred values still wrap the ring many times.
        const PER_PRODUCER: u32 = if cfg!(miri) { 200 } else { 20_000 };
        let ring: Ring<u32, 64> = Ring::new();
        let seen: Vec<AtomicU32> = (0..4 * PER_PRODUCER).map(|_| AtomicU32::new(0)).collect();
        let taken = AtomicU32::new(0);
        thread::scope(|scope| {
            for producer in 0..4 {
                let ring = &ring;
                scope.spawn(move || {
                    for index in 0..PER_PRODUCER {
                        let mut value = producer * PER_PRODUCER + index;
                        while let Err(back) = ring.push(value) {
                            value = back;
                            thread::yield_now();
                        }
                    }
                });
            }
            for _ in 0..2 {
                scope.spawn(|| {
                    while taken.load(Ordering::Relaxed) < 4 * PER_PRODUCER {
                        match ring.pop() {
                            Some(value) => {
                                seen[value as usize].fetch_add(1, Ordering::Relaxed);
                                taken.fetch_add(1, Ordering::Relaxed);
                            }
                            None => thread::yield_now(),
                        }
                    }
                });
            }
        });
        assert!(seen.iter().all(|count| count.load(Ordering::Relaxed) == 1));
    }
}

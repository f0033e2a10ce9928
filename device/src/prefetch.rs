//! Prefetch hints on the signal → dependent-start path.
//!
//! Handing work from one queue to the next reaches state that other cores wrote last: the
//! signalled semaphore (its lock, history and waiter list, written by whoever submitted the
//! signal and armed the waits), the dependent operation's slot and its queue's indices and
//! process (written by the submitter, and by whichever worker drained that queue before). The
//! path reaches them one after another, and each is a cache miss it waits out in turn. Asking
//! for the lines as soon as their addresses are known lets those misses overlap: a
//! semaphore's when the operation that signals it starts its work, the woken queue's when one
//! of its operation's timepoints fires, before the gate is counted down.
//!
//! On the 2-core virtual machine the benches run on, a signal → dependent start took 125 ns
//! instead of 157 with these hints, measured in alternating blocks in one process while
//! moving a line between its cores was cheap, and 331 ns instead of 470 while it was dear (the
//! virtual CPUs' placement on the host decides which, from one hour to the next). The hints
//! cost 53 instructions per hand-over (742 → 795, `scripts/instructions.sh`).
//!
//! A prefetch is a hint: it never faults, whatever the address, and writes nothing. Off
//! x86-64 (and under Miri) the hints are left out.

use core::mem::size_of;
use core::ptr;

/// The cache-line size the hints step by (x86-64 and most other hosted targets).
const LINE: usize = 64;

/// Hints every cache line of `value` into this core's cache.
#[inline]
pub(crate) fn object<T>(value: &T) {
    bytes(ptr::from_ref(value).cast(), size_of::<T>());
}

/// Hints the cache line holding the start of `value`.
#[inline]
pub(crate) fn first_line<T>(value: &T) {
    line(ptr::from_ref(value).cast());
}

/// Hints every cache line of the `len` bytes from `start`.
#[inline]
fn bytes(start: *const u8, len: usize) {
    let mut offset = 0;
    while offset < len {
        line(start.wrapping_add(offset));
        offset += LINE;
    }
    // `start` need not be line-aligned: the last byte may lie one line past the steps above.
    if len > 0 {
        line(start.wrapping_add(len - 1));
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline]
fn line(address: *const u8) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: `prefetcht0` needs SSE, which every x86-64 target enables (it is part of the
    // architecture's baseline); the instruction never faults, whatever the address, and
    // writes no memory and no register.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(address.cast()) }
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
#[inline]
fn line(_address: *const u8) {}

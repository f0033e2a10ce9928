//! The memory the ring lives in, as the device sees it: a window of 32-bit words reached by
//! bus address, and the 64-bit values both sides keep in it.
//!
//! A bus address is a byte offset into the window. Every address the host programs is checked
//! against the window before the device uses it, so a bad address is a refused configuration,
//! never a stray access.
//!
//! # 64-bit values on 32-bit words
//!
//! Semaphore values and the completion timeline are 64-bit, but the controller has only 32-bit
//! loads and stores, and no compare-and-swap. Each value has one writer at a time, and only
//! grows, so it is kept as two words written **low half first, then high half**, both with
//! release, and read **high half first, then low half**, both with acquire. A reader then never
//! sees more than the value whose low half it read: a high half it reads was written after that
//! value's low half ([`load_u64`](Window::load_u64) explains the cases), so a torn read is
//! always an *underestimate*, which a "has the value reached v" check tolerates — it looks
//! again later. And whatever the reader concludes from a read, the low-half store it read from
//! released everything the writer did before it.

use crate::sync::{AtomicU32, Ordering};

/// A semaphore slot: value low, value high, failure code, reserved.
pub const SEMAPHORE_SLOT_BYTES: u32 = 16;

/// Byte offset of a semaphore slot's failure word (0 while the semaphore has not failed).
const SEMAPHORE_FAILURE_OFFSET: u32 = 8;

/// A window of device-visible memory. Cheap to copy: a borrowed slice.
#[derive(Clone, Copy, Debug)]
pub struct Window<'a> {
    words: &'a [AtomicU32],
}

impl<'a> Window<'a> {
    /// The window over `words`; bus address `4 * i` is `words[i]`.
    pub fn new(words: &'a [AtomicU32]) -> Window<'a> {
        Window { words }
    }

    /// The window's size in bytes (saturating at `u32::MAX`: bus addresses are 32-bit).
    pub fn len_bytes(&self) -> u32 {
        u32::try_from(self.words.len().saturating_mul(4)).unwrap_or(u32::MAX)
    }

    /// Whether `bytes` bytes from bus address `address` lie inside the window, `align`-aligned.
    pub fn contains(&self, address: u32, bytes: u32, align: u32) -> bool {
        address.checked_rem(align) == Some(0)
            && address.checked_add(bytes).is_some_and(|end| end <= self.len_bytes())
    }

    /// The word at bus address `address`, if it is an aligned address inside the window.
    pub fn word(&self, address: u32) -> Option<&'a AtomicU32> {
        if address % 4 != 0 {
            return None;
        }
        self.words.get(usize::try_from(address / 4).ok()?)
    }

    /// The 64-bit value at `address` (8-byte aligned, inside the window), read high half first.
    ///
    /// Cases, for a writer that stores low then high, both release: if the high half read comes
    /// from value `N`'s store, the acquire makes `N`'s earlier low store visible, so the low half
    /// read is `N`'s or a later value `M`'s; `(N.high, M.low)` is then `M` itself or, when `M`
    /// moved into a higher high half, below `M`. If the high half read is older than the low
    /// half's value, the pair is below that value too. Either way the result never exceeds the
    /// value whose low-half store the read synchronised with. `None` for a bad address.
    pub fn load_u64(&self, address: u32) -> Option<u64> {
        if address % 8 != 0 {
            return None;
        }
        let (low, high) = (self.word(address)?, self.word(address.checked_add(4)?)?);
        // Acquire: pairs with the writer's release store of the high half (`store_u64`), which
        // makes the low half stored before it visible to the next load.
        let high = high.load(Ordering::Acquire);
        // Acquire: pairs with the writer's release store of the low half, which follows every
        // write the value stands for.
        let low = low.load(Ordering::Acquire);
        Some(u64::from(high) << 32 | u64::from(low))
    }

    /// Stores `value` at `address` (8-byte aligned, inside the window), low half first. Only the
    /// value's single writer calls this, and only with values that grow. `false` for a bad
    /// address (nothing is written).
    pub fn store_u64(&self, address: u32, value: u64) -> bool {
        let words =
            address.checked_add(4).and_then(|high| Some((self.word(address)?, self.word(high)?)));
        let Some((low, high)) = words.filter(|_| address % 8 == 0) else {
            return false;
        };
        // Release: pairs with `load_u64`'s acquire load of the low half; publishes everything
        // the writer did before this value.
        low.store(value as u32, Ordering::Release);
        // Release: pairs with `load_u64`'s acquire load of the high half, making the low half
        // above visible to a reader that sees this high half.
        high.store((value >> 32) as u32, Ordering::Release);
        true
    }

    /// The semaphore slot `slot` of the table at `base`: its value and whether it failed
    /// (its failure code), read failure first. `None` when the slot is outside the window.
    pub fn semaphore(&self, base: u32, slot: u32) -> Option<SemaphoreState> {
        let address = semaphore_address(base, slot)?;
        // Acquire: pairs with `fail_semaphore`'s release store.
        let failure =
            self.word(address.checked_add(SEMAPHORE_FAILURE_OFFSET)?)?.load(Ordering::Acquire);
        let value = self.load_u64(address)?;
        Some(SemaphoreState { value, failure })
    }

    /// Advances semaphore slot `slot` of the table at `base` to `value` (its one writer, with a
    /// value above the current one). `false` when the slot is outside the window.
    pub fn signal_semaphore(&self, base: u32, slot: u32, value: u64) -> bool {
        semaphore_address(base, slot).is_some_and(|address| self.store_u64(address, value))
    }

    /// Marks semaphore slot `slot` failed with `code` (non-zero). `false` when the slot is
    /// outside the window.
    pub fn fail_semaphore(&self, base: u32, slot: u32, code: u32) -> bool {
        let word = semaphore_address(base, slot)
            .and_then(|address| address.checked_add(SEMAPHORE_FAILURE_OFFSET))
            .and_then(|address| self.word(address));
        // Release: pairs with `semaphore`'s acquire load of the failure word; a waiter that sees
        // the failure sees what the failing side did before it.
        word.map(|word| word.store(code, Ordering::Release)).is_some()
    }
}

/// A semaphore slot as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SemaphoreState {
    /// Its value (possibly an underestimate while its writer advances it; see the module docs).
    pub value: u64,
    /// 0, or the completion code of the operation that failed it.
    pub failure: u32,
}

/// Bus address of slot `slot` of the semaphore table at `base`.
fn semaphore_address(base: u32, slot: u32) -> Option<u32> {
    base.checked_add(slot.checked_mul(SEMAPHORE_SLOT_BYTES)?)
}

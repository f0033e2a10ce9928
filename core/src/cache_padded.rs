//! [`CachePadded`]: a value on a cache line of its own, for every concurrent structure in
//! causeway.

use core::fmt;
use core::ops::{Deref, DerefMut};

/// `T`, aligned to (and so padded to a multiple of) a cache line of the target, so that nothing
/// stored beside it shares its line.
///
/// Two threads writing different words of one cache line make the line move between their cores
/// on every write (false sharing), so a structure whose fields are written by different threads
/// puts each group of them in a `CachePadded`.
///
/// The value is a public field, as in [`core::num::Wrapping`]: the padding is a property of the
/// type, not of the value, so there is nothing to protect, and the field reaches the value in
/// `const` code where [`Deref`] cannot. Everywhere else the value is also reached through
/// [`Deref`]/[`DerefMut`].
///
/// ```
/// use causeway_core::CachePadded;
/// use core::sync::atomic::{AtomicUsize, Ordering};
///
/// /// Pushed by producers, popped by consumers: the two positions must not share a line.
/// struct Positions {
///     enqueue: CachePadded<AtomicUsize>,
///     dequeue: CachePadded<AtomicUsize>,
/// }
///
/// let positions =
///     Positions { enqueue: CachePadded::new(AtomicUsize::new(0)), dequeue: CachePadded::default() };
/// positions.enqueue.fetch_add(1, Ordering::Relaxed);
/// assert_eq!(positions.dequeue.load(Ordering::Relaxed), 0);
/// ```
///
/// # How wide a line is
///
/// The width is fixed per target architecture when the crate is compiled; it is a judgement from
/// what the architecture's usual cores do, not something the running machine is asked:
///
/// | architecture                                                        | padded to  |
/// |---------------------------------------------------------------------|------------|
/// | `x86_64`, `aarch64`, `arm64ec`, `powerpc64`                         | 128 bytes  |
/// | `s390x`                                                             | 256 bytes  |
/// | `arm`, `mips`, `mips32r6`, `mips64`, `mips64r6`, `sparc`, `hexagon` | 32 bytes   |
/// | `m68k`                                                              | 16 bytes   |
/// | everything else (`x86`, `riscv32`, `riscv64`, `wasm32`, …)          | 64 bytes   |
/// | bare metal (`target_os = "none"`), whatever the architecture        | not padded |
///
/// Why those numbers (they are the ones crossbeam-utils' `CachePadded` settled on, from Intel's
/// optimisation manual, Go's runtime and Linux's per-architecture cache headers):
/// - Intel cores since Sandy Bridge have a spatial prefetcher that fetches the aligned *pair* of
///   64-byte lines around a miss, so two threads on neighbouring lines still slow each other
///   down: the line is 64 bytes, but the unit that moves between cores is 128.
/// - Some aarch64 cores (Apple's, the big cores of some big.LITTLE designs) have 128-byte lines,
///   and a thread may migrate between core kinds, so aarch64 takes the larger width; POWER has
///   128-byte lines and IBM Z 256-byte ones.
/// - 32-bit Arm application cores, MIPS, SPARC and Hexagon are taken as 32 bytes, m68k as 16;
///   RISC-V (32- and 64-bit) and every other architecture as 64.
/// - Bare-metal images (the firmware tests' controller) run on one core, so no other core ever
///   fights over a line, while their static RAM is the budget they must fit (the Cortex-M0
///   controller has 4 KiB in all): padding would only multiply the size of every executor line
///   and process. A multi-core bare-metal part would want padding back; none is targeted today.
///
/// A guess too small costs some false sharing, a guess too large some memory: never
/// correctness.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    all(
        not(target_os = "none"),
        any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_arch = "arm64ec",
            target_arch = "powerpc64",
        )
    ),
    repr(align(128))
)]
#[cfg_attr(all(not(target_os = "none"), target_arch = "s390x"), repr(align(256)))]
#[cfg_attr(
    all(
        not(target_os = "none"),
        any(
            target_arch = "arm",
            target_arch = "mips",
            target_arch = "mips32r6",
            target_arch = "mips64",
            target_arch = "mips64r6",
            target_arch = "sparc",
            target_arch = "hexagon",
        )
    ),
    repr(align(32))
)]
#[cfg_attr(all(not(target_os = "none"), target_arch = "m68k"), repr(align(16)))]
#[cfg_attr(
    all(
        not(target_os = "none"),
        not(any(
            target_arch = "x86_64",
            target_arch = "aarch64",
            target_arch = "arm64ec",
            target_arch = "powerpc64",
            target_arch = "s390x",
            target_arch = "arm",
            target_arch = "mips",
            target_arch = "mips32r6",
            target_arch = "mips64",
            target_arch = "mips64r6",
            target_arch = "sparc",
            target_arch = "hexagon",
            target_arch = "m68k",
        ))
    ),
    repr(align(64))
)]
pub struct CachePadded<T>(pub T);

impl<T> CachePadded<T> {
    /// Pads `value` to a cache line.
    pub const fn new(value: T) -> CachePadded<T> {
        CachePadded(value)
    }

    /// The value, unpadded.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> From<T> for CachePadded<T> {
    fn from(value: T) -> CachePadded<T> {
        CachePadded(value)
    }
}

impl<T: fmt::Debug> fmt::Debug for CachePadded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CachePadded").field(&self.0).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn lines_are_128_bytes_where_line_pairs_are_prefetched_or_lines_are_long() {
        assert_eq!(align_of::<CachePadded<u8>>(), 128);
        assert_eq!(size_of::<CachePadded<u8>>(), 128);
        assert_eq!(size_of::<CachePadded<[u8; 129]>>(), 256);
    }

    #[test]
    fn neighbours_never_share_a_line() {
        let line = align_of::<CachePadded<u8>>();
        assert!(line >= 16, "a hosted target pads to a line, not to the value's alignment");
        let pair = [CachePadded::new(1u8), CachePadded::new(2u8)];
        let first = core::ptr::from_ref(&*pair[0]).addr();
        let second = core::ptr::from_ref(&*pair[1]).addr();
        assert_eq!(first % line, 0);
        assert_eq!(second - first, line);
    }

    #[test]
    fn a_value_aligned_beyond_a_line_keeps_its_alignment() {
        #[repr(align(512))]
        struct Page(u8);
        let page = CachePadded::new(Page(1));
        assert_eq!(core::ptr::from_ref(&page).addr() % 512, 0);
        assert_eq!(page.0 .0, 1);
    }

    #[test]
    fn the_value_is_reached_through_the_field_deref_and_into_inner() {
        let mut padded = CachePadded::from(5u32);
        *padded += 1;
        padded.0 += 1;
        assert_eq!(*padded, 7);
        assert_eq!(padded.into_inner(), 7);
        assert_eq!(std::format!("{:?}", CachePadded::new(3)), "CachePadded(3)");
    }
}

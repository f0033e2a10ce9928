//! Axes: globally unique, never-reused identities of timeline participants.
//!
//! An [`Axis`] packs three fields into 64 bits so that frontiers can store it as a plain integer
//! and sort by it:
//!
//! ```text
//!  63            48 47      40 39                                   0
//! +----------------+----------+--------------------------------------+
//! |  machine (16)  | domain(8)|              ordinal (40)            |
//! +----------------+----------+--------------------------------------+
//! ```
//!
//! Never reusing an axis is what keeps frontier comparisons free of ABA hazards: an axis seen in
//! a frontier names exactly one timeline, even after its queue is gone. [`AxisAllocator`] is the
//! only sanctioned source of fresh ordinals and refuses to wrap.

use core::fmt;

use crate::sync::atomic::{AtomicU64, Ordering};

/// Number of bits in an axis ordinal.
pub const ORDINAL_BITS: u32 = 40;
/// Largest ordinal an axis can carry.
pub const MAX_ORDINAL: u64 = (1 << ORDINAL_BITS) - 1;

const DOMAIN_SHIFT: u32 = ORDINAL_BITS;
const MACHINE_SHIFT: u32 = ORDINAL_BITS + 8;

/// The kind of timeline an axis belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum Domain {
    /// A device or CPU queue: one epoch per submitted operation.
    Queue = 1,
    /// A collective channel shared by every participant of a collective operation.
    Collective = 2,
    /// A host thread acting as a tracked participant.
    Host = 3,
}

impl Domain {
    /// The wire code of this domain.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The domain with wire code `code`, if it is one this build knows.
    pub const fn from_code(code: u8) -> Option<Domain> {
        match code {
            1 => Some(Domain::Queue),
            2 => Some(Domain::Collective),
            3 => Some(Domain::Host),
            _ => None,
        }
    }
}

/// Identity of one timeline participant: machine, domain and a never-reused ordinal.
///
/// Axes order by their 64-bit encoding (machine, then domain, then ordinal); frontiers keep their
/// entries in that order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Axis(u64);

impl Axis {
    /// Builds an axis.
    ///
    /// # Panics
    /// Panics if `ordinal` exceeds [`MAX_ORDINAL`], like an out-of-range index. Use
    /// [`Axis::try_new`] for ordinals that come from outside the program.
    pub const fn new(machine: u16, domain: Domain, ordinal: u64) -> Axis {
        match Axis::try_new(machine, domain, ordinal) {
            Some(axis) => axis,
            None => panic!("axis ordinal exceeds 40 bits"),
        }
    }

    /// Builds an axis, or `None` if `ordinal` exceeds [`MAX_ORDINAL`].
    pub const fn try_new(machine: u16, domain: Domain, ordinal: u64) -> Option<Axis> {
        if ordinal > MAX_ORDINAL {
            return None;
        }
        Some(Axis(
            (machine as u64) << MACHINE_SHIFT | (domain.code() as u64) << DOMAIN_SHIFT | ordinal,
        ))
    }

    /// The machine index this axis belongs to.
    pub const fn machine(self) -> u16 {
        (self.0 >> MACHINE_SHIFT) as u16
    }

    /// The timeline kind.
    pub const fn domain(self) -> Domain {
        match Domain::from_code((self.0 >> DOMAIN_SHIFT) as u8) {
            Some(domain) => domain,
            // Every constructor validates the domain code, so the field always decodes.
            None => unreachable!(),
        }
    }

    /// The ordinal, unique within (machine, domain).
    pub const fn ordinal(self) -> u64 {
        self.0 & MAX_ORDINAL
    }

    /// The 64-bit encoding (the order frontiers sort by).
    pub const fn to_bits(self) -> u64 {
        self.0
    }

    /// Rebuilds an axis from bits that came out of a valid [`Axis`] (a frontier slot below its
    /// length, for instance). Callers guarantee validity; nothing unsafe depends on it.
    pub(crate) const fn from_trusted_bits(bits: u64) -> Axis {
        Axis(bits)
    }

    /// Decodes an axis, or `None` if the domain field names no known [`Domain`].
    pub const fn from_bits(bits: u64) -> Option<Axis> {
        match Domain::from_code((bits >> DOMAIN_SHIFT) as u8) {
            Some(_) => Some(Axis(bits)),
            None => None,
        }
    }
}

impl fmt::Debug for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let domain = match self.domain() {
            Domain::Queue => "q",
            Domain::Collective => "c",
            Domain::Host => "h",
        };
        write!(f, "{}{}@m{}", domain, self.ordinal(), self.machine())
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Errors from [`AxisAllocator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AxisError {
    /// Every ordinal of this (machine, domain) has been handed out; axes are never reused.
    Exhausted {
        /// The domain whose ordinals ran out.
        domain: Domain,
    },
}

impl fmt::Display for AxisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisError::Exhausted { domain } => {
                write!(f, "axis ordinals exhausted for domain {domain:?}")
            }
        }
    }
}

impl core::error::Error for AxisError {}

/// Hands out fresh axes for one machine, monotonically, from any thread.
///
/// Each domain has its own ordinal counter. An allocator never returns the same axis twice and
/// reports [`AxisError::Exhausted`] instead of wrapping. Ordinal 0 is never issued, so a zeroed
/// field can never alias a live axis.
pub struct AxisAllocator {
    machine: u16,
    next: [AtomicU64; 3],
}

impl AxisAllocator {
    /// An allocator for `machine` whose first ordinal in every domain is 1.
    #[cfg(not(loom))]
    pub const fn new(machine: u16) -> AxisAllocator {
        AxisAllocator::starting_at(machine, 1)
    }

    /// An allocator for `machine` whose first ordinal in every domain is 1.
    #[cfg(loom)]
    pub fn new(machine: u16) -> AxisAllocator {
        AxisAllocator::starting_at(machine, 1)
    }

    /// An allocator whose next ordinal in every domain is `first` (e.g. resuming after a
    /// persisted high-water mark). `first` of 0 is treated as 1.
    #[cfg(not(loom))]
    pub const fn starting_at(machine: u16, first: u64) -> AxisAllocator {
        let first = if first == 0 { 1 } else { first };
        AxisAllocator {
            machine,
            next: [AtomicU64::new(first), AtomicU64::new(first), AtomicU64::new(first)],
        }
    }

    /// An allocator whose next ordinal in every domain is `first`.
    #[cfg(loom)]
    pub fn starting_at(machine: u16, first: u64) -> AxisAllocator {
        let first = if first == 0 { 1 } else { first };
        AxisAllocator {
            machine,
            next: [AtomicU64::new(first), AtomicU64::new(first), AtomicU64::new(first)],
        }
    }

    /// The machine this allocator serves.
    pub fn machine(&self) -> u16 {
        self.machine
    }

    /// A fresh axis in `domain`.
    pub fn allocate(&self, domain: Domain) -> Result<Axis, AxisError> {
        let counter = &self.next[usize::from(domain.code() - 1)];
        // Relaxed: uniqueness comes from the atomicity of the read-modify-write alone; the
        // ordinal publishes no other memory.
        let claimed = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
            (next <= MAX_ORDINAL).then_some(next + 1)
        });
        match claimed {
            Ok(ordinal) => Ok(Axis::new(self.machine, domain, ordinal)),
            Err(_) => Err(AxisError::Exhausted { domain }),
        }
    }
}

impl fmt::Debug for AxisAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AxisAllocator").field("machine", &self.machine).finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_round_trip() {
        let axis = Axis::new(0xBEEF, Domain::Collective, 12345);
        assert_eq!(axis.machine(), 0xBEEF);
        assert_eq!(axis.domain(), Domain::Collective);
        assert_eq!(axis.ordinal(), 12345);
        assert_eq!(Axis::from_bits(axis.to_bits()), Some(axis));
    }

    #[test]
    fn ordinal_range_is_enforced() {
        assert!(Axis::try_new(0, Domain::Queue, MAX_ORDINAL).is_some());
        assert!(Axis::try_new(0, Domain::Queue, MAX_ORDINAL + 1).is_none());
    }

    #[test]
    #[should_panic(expected = "40 bits")]
    fn new_panics_on_out_of_range_ordinal() {
        let _ = Axis::new(0, Domain::Queue, MAX_ORDINAL + 1);
    }

    #[test]
    fn unknown_domain_bits_are_rejected() {
        assert_eq!(Axis::from_bits(0), None);
        assert_eq!(Axis::from_bits(u64::MAX), None);
    }

    #[test]
    fn allocator_is_monotonic_per_domain_and_starts_at_one() {
        let alloc = AxisAllocator::new(7);
        let q1 = alloc.allocate(Domain::Queue).unwrap();
        let q2 = alloc.allocate(Domain::Queue).unwrap();
        let h1 = alloc.allocate(Domain::Host).unwrap();
        assert_eq!((q1.ordinal(), q2.ordinal(), h1.ordinal()), (1, 2, 1));
        assert!(q1 < q2);
        assert_eq!(q1.machine(), 7);
    }

    #[test]
    fn allocator_reports_exhaustion_instead_of_wrapping() {
        let alloc = AxisAllocator::starting_at(0, MAX_ORDINAL);
        assert_eq!(alloc.allocate(Domain::Queue).unwrap().ordinal(), MAX_ORDINAL);
        assert_eq!(
            alloc.allocate(Domain::Queue),
            Err(AxisError::Exhausted { domain: Domain::Queue })
        );
        assert_eq!(
            alloc.allocate(Domain::Queue),
            Err(AxisError::Exhausted { domain: Domain::Queue })
        );
        assert!(alloc.allocate(Domain::Host).is_ok());
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config())]
        #[test]
        fn order_follows_machine_domain_ordinal(
            m1 in any::<u16>(), m2 in any::<u16>(),
            o1 in 0..=MAX_ORDINAL, o2 in 0..=MAX_ORDINAL,
        ) {
            let a = Axis::new(m1, Domain::Queue, o1);
            let b = Axis::new(m2, Domain::Queue, o2);
            prop_assert_eq!(a.cmp(&b), (m1, o1).cmp(&(m2, o2)));
        }
    }
}

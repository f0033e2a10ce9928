//! Handles: what a C caller holds instead of a pointer, and the fixed-size, generation-checked
//! tables they index.
//!
//! # Encoding
//!
//! A handle is one `u64`: its kind in the top byte, a slot index below that and the slot's
//! generation in the low half. Zero is the null handle. Decoding checks, in order: null, a kind
//! this library has (else the bits are garbage), the kind the function wants (else a wrong-type
//! handle), reserved bits clear and the index inside its table. Only then does the table look
//! at the slot, and a slot whose generation or phase differs makes the handle stale. Nothing a
//! caller passes can make the library read outside its tables.
//!
//! # A slot's life
//!
//! Each slot of a [`Table`] has one atomic state word — generation, phase and the number of
//! calls using the slot right now — so claiming, using and retiring it are single
//! compare-exchanges, without locks: an interrupt handler may use a handle while the main loop
//! holds another, or the same.
//!
//! ```text
//!   FREE ──create: claim, generation + 1──► INIT ──value written (Release)──► LIVE
//!    ▲                                                                       │ destroy
//!    └──────────── the last user leaves: value dropped (Release) ─────────── DYING
//! ```
//!
//! A call acquires the slot (users + 1, only while LIVE and the generation matches) for as long
//! as it uses the value, so a concurrent destroy cannot take the value away underneath it:
//! destroy moves the slot to DYING, which refuses new users, and whoever leaves last — the
//! destroyer or a call still inside — drops the value and frees the slot. The generation
//! changes at every creation, so a handle of a destroyed object never names what the slot
//! holds next (until the generation wraps, after 2^20 creations in one slot).

use core::cell::UnsafeCell;
use core::fmt;
use core::mem::MaybeUninit;
use core::ops::Deref;
use core::sync::atomic::{AtomicU32, Ordering};

/// What a handle names. The values are the top byte of its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Frontier = 1,
    Semaphore = 2,
    Queue = 3,
    Timepoint = 4,
    #[cfg(feature = "hosted")]
    Device = 5,
    #[cfg(feature = "hosted")]
    DeviceSemaphore = 6,
}

impl Kind {
    const fn from_tag(tag: u64) -> Option<Kind> {
        Some(match tag {
            1 => Kind::Frontier,
            2 => Kind::Semaphore,
            3 => Kind::Queue,
            4 => Kind::Timepoint,
            #[cfg(feature = "hosted")]
            5 => Kind::Device,
            #[cfg(feature = "hosted")]
            6 => Kind::DeviceSemaphore,
            _ => return None,
        })
    }

    /// The C type's name, for messages.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Kind::Frontier => "cw_frontier",
            Kind::Semaphore => "cw_semaphore",
            Kind::Queue => "cw_queue",
            Kind::Timepoint => "cw_timepoint",
            #[cfg(feature = "hosted")]
            Kind::Device => "cw_device",
            #[cfg(feature = "hosted")]
            Kind::DeviceSemaphore => "cw_device_semaphore",
        }
    }
}

const KIND_SHIFT: u32 = 56;
const INDEX_SHIFT: u32 = 32;
const INDEX_MASK: u64 = 0xFFFF;
/// Bits 48..56: always zero in a handle this library made.
const RESERVED_MASK: u64 = 0xFF << 48;

/// Why a handle names nothing usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandleError {
    /// All bits zero.
    Null(Kind),
    /// Bits no handle of this library has.
    Invalid(Kind),
    /// A handle of another kind.
    WrongType { expected: Kind, found: Kind },
    /// A handle of an object that was destroyed (or whose owner was).
    Stale(Kind),
}

impl fmt::Display for HandleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HandleError::Null(kind) => write!(f, "null {} handle", kind.name()),
            HandleError::Invalid(kind) => {
                write!(f, "invalid {} handle: no handle has these bits", kind.name())
            }
            HandleError::WrongType { expected, found } => {
                write!(f, "expected a {} handle, got a {}", expected.name(), found.name())
            }
            HandleError::Stale(kind) => {
                write!(f, "stale {} handle: its object was destroyed", kind.name())
            }
        }
    }
}

/// A decoded handle: slot index and generation, its kind checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub(crate) index: usize,
    pub(crate) generation: u32,
}

/// The bits of the handle of slot `index` at `generation`.
pub(crate) const fn encode(kind: Kind, index: usize, generation: u32) -> u64 {
    (kind as u64) << KIND_SHIFT | (index as u64 & INDEX_MASK) << INDEX_SHIFT | generation as u64
}

/// Decodes `bits` as a handle of `kind` into a table of `capacity` slots.
pub(crate) fn decode(bits: u64, kind: Kind, capacity: usize) -> Result<Decoded, HandleError> {
    if bits == 0 {
        return Err(HandleError::Null(kind));
    }
    let found = Kind::from_tag(bits >> KIND_SHIFT).ok_or(HandleError::Invalid(kind))?;
    if found != kind {
        return Err(HandleError::WrongType { expected: kind, found });
    }
    let index = ((bits >> INDEX_SHIFT) & INDEX_MASK) as usize;
    if bits & RESERVED_MASK != 0 || index >= capacity {
        return Err(HandleError::Invalid(kind));
    }
    Ok(Decoded { index, generation: bits as u32 })
}

// The state word: users in the low bits, then the phase, then the generation.
const USERS_BITS: u32 = 10;
const USERS_MASK: u32 = (1 << USERS_BITS) - 1;
const PHASE_SHIFT: u32 = USERS_BITS;
const PHASE_MASK: u32 = 0b11 << PHASE_SHIFT;
const GENERATION_SHIFT: u32 = PHASE_SHIFT + 2;
/// Generations live in the top 20 bits of the state word.
const GENERATION_LIMIT: u32 = 1 << (32 - GENERATION_SHIFT);

const FREE: u32 = 0;
const INIT: u32 = 1 << PHASE_SHIFT;
const LIVE: u32 = 2 << PHASE_SHIFT;
const DYING: u32 = 3 << PHASE_SHIFT;

const fn generation_of(state: u32) -> u32 {
    state >> GENERATION_SHIFT
}

const fn state(generation: u32, phase: u32, users: u32) -> u32 {
    generation << GENERATION_SHIFT | phase | users
}

/// Why a slot could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UseError {
    /// The handle's bits name nothing.
    Handle(HandleError),
    /// As many calls as a slot counts are using it already.
    TooManyUsers(Kind),
}

impl From<HandleError> for UseError {
    fn from(error: HandleError) -> UseError {
        UseError::Handle(error)
    }
}

struct Slot<T> {
    state: AtomicU32,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A fixed-size table of objects of the kind tagged `KIND`, named by generation-checked
/// handles. Zeroed memory is an empty table (every slot FREE), so a `static` one lives in
/// `.bss`: the kind is a parameter rather than a field, which would put the whole table in
/// `.data` (its initial image in flash, copied to RAM at reset).
pub(crate) struct Table<T, const CAPACITY: usize, const KIND: u8> {
    slots: [Slot<T>; CAPACITY],
}

// SAFETY: a slot's value is written only by the creator between claiming the slot (INIT, which
// no other call can acquire) and publishing it (LIVE), and dropped only by the last user of a
// DYING slot, which no other call holds; in between every call reaches it through `&T`, so the
// table is `Sync` exactly when `T` is, and values cross threads (created on one, dropped on
// another) only if `T: Send`.
unsafe impl<T: Send + Sync, const CAPACITY: usize, const KIND: u8> Sync
    for Table<T, CAPACITY, KIND>
{
}

impl<T, const CAPACITY: usize, const KIND: u8> Table<T, CAPACITY, KIND> {
    const CAPACITY_FITS: () = assert!(CAPACITY <= INDEX_MASK as usize + 1);
    const KIND: Kind = match Kind::from_tag(KIND as u64) {
        Some(kind) => kind,
        None => panic!("a table's KIND is a handle kind's tag"),
    };

    /// An empty table.
    pub(crate) const fn new() -> Table<T, CAPACITY, KIND> {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAPACITY_FITS;
        Table {
            slots: [const {
                Slot { state: AtomicU32::new(FREE), value: UnsafeCell::new(MaybeUninit::uninit()) }
            }; CAPACITY],
        }
    }

    /// Puts `make(slot index)` into a free slot and returns its handle's bits, or `None` when
    /// every slot is taken.
    pub(crate) fn create(&self, make: impl FnOnce(usize) -> T) -> Option<u64> {
        for (index, slot) in self.slots.iter().enumerate() {
            let current = slot.state.load(Ordering::Relaxed);
            if current & PHASE_MASK != FREE {
                continue;
            }
            let generation = (generation_of(current) + 1) % GENERATION_LIMIT;
            // Acquire pairs with the Release store that freed the slot (`Guard::drop`): the
            // previous value's drop is over before this one is written.
            if slot
                .state
                .compare_exchange(
                    current,
                    state(generation, INIT, 0),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                continue;
            }
            // SAFETY: the slot is INIT, which only this call could make it and no other call
            // acquires (see the module docs), so nothing else touches the value.
            unsafe { (*slot.value.get()).write(make(index)) };
            // Release pairs with the Acquire compare-exchange in `acquire`: a user sees the value
            // written.
            slot.state.store(state(generation, LIVE, 0), Ordering::Release);
            return Some(encode(Self::KIND, index, generation));
        }
        None
    }

    /// Uses the object `bits` names until the guard drops.
    pub(crate) fn acquire(&self, bits: u64) -> Result<Guard<'_, T>, UseError> {
        self.enter(bits, LIVE)
    }

    /// Destroys the object `bits` names: no call acquires it from now on, and it is dropped when
    /// the returned guard — the destroyer's last use — and every other user have left.
    pub(crate) fn destroy(&self, bits: u64) -> Result<Guard<'_, T>, UseError> {
        self.enter(bits, DYING)
    }

    /// Adds a user to the LIVE slot `bits` names, leaving it in `phase` (LIVE, or DYING for a
    /// destruction).
    fn enter(&self, bits: u64, phase: u32) -> Result<Guard<'_, T>, UseError> {
        let Decoded { index, generation } = decode(bits, Self::KIND, CAPACITY)?;
        let slot = &self.slots[index];
        let mut current = slot.state.load(Ordering::Relaxed);
        loop {
            if current & PHASE_MASK != LIVE || generation_of(current) != generation {
                return Err(HandleError::Stale(Self::KIND).into());
            }
            let users = current & USERS_MASK;
            if users == USERS_MASK {
                return Err(UseError::TooManyUsers(Self::KIND));
            }
            // Acquire pairs with the Release store in `create`: the value is fully written.
            match slot.state.compare_exchange_weak(
                current,
                state(generation, phase, users + 1),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(Guard { slot, index }),
                Err(actual) => current = actual,
            }
        }
    }

    /// The object in slot `index`, reached without a guard.
    ///
    /// # Safety
    /// The slot must hold a value for as long as the reference is used: some use of it (a
    /// guard, or one kept) must outlast the reference.
    pub(crate) unsafe fn value_of(&self, index: usize) -> &T {
        // SAFETY: the caller guarantees the slot holds a value for the reference's life.
        unsafe { (*self.slots[index].value.get()).assume_init_ref() }
    }

    /// Leaves the slot `index` that [`Guard::keep`] kept in use.
    ///
    /// # Safety
    /// Once for each `keep` of a guard of this table's slot `index`.
    pub(crate) unsafe fn release_kept(&self, index: usize) {
        // The caller's kept use makes the index one of a live or dying slot.
        if let Some(slot) = self.slots.get(index) {
            drop(Guard { slot, index });
        }
    }
}

/// One call's use of a slot's object; leaving it may drop the object (see the module docs).
pub(crate) struct Guard<'t, T> {
    slot: &'t Slot<T>,
    index: usize,
}

impl<T> Guard<'_, T> {
    /// The slot the object is in.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// Keeps the use after the guard is gone, until [`Table::release_kept`] (an armed timepoint
    /// keeps its semaphore so, until it fires or is cancelled).
    pub(crate) fn keep(self) {
        core::mem::forget(self);
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: a guard exists only while its slot counts it as a user, and a slot with users
        // holds an initialised value that is dropped only after the last user left.
        unsafe { (*self.slot.value.get()).assume_init_ref() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // AcqRel: Release publishes this user's accesses to whoever drops the value; Acquire,
        // when this is the last user of a dying slot, sees every other user's (their own
        // Release here).
        let before = self.slot.state.fetch_sub(1, Ordering::AcqRel);
        if before & PHASE_MASK == DYING && before & USERS_MASK == 1 {
            // SAFETY: this was the last user of a DYING slot, which no call can acquire: the
            // value is initialised (it was LIVE) and nothing else can reach it.
            unsafe { (*self.slot.value.get()).assume_init_drop() };
            // Release pairs with the Acquire compare-exchange in `create`.
            self.slot.state.store(state(generation_of(before), FREE, 0), Ordering::Release);
        }
    }
}

#[cfg(all(test, feature = "hosted"))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    struct Counted;

    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn handles_decode_only_as_made() {
        let bits = encode(Kind::Queue, 3, 7);
        assert_eq!(decode(bits, Kind::Queue, 4), Ok(Decoded { index: 3, generation: 7 }));
        assert_eq!(decode(0, Kind::Queue, 4), Err(HandleError::Null(Kind::Queue)));
        assert_eq!(
            decode(bits, Kind::Frontier, 4),
            Err(HandleError::WrongType { expected: Kind::Frontier, found: Kind::Queue })
        );
        assert_eq!(decode(bits, Kind::Queue, 3), Err(HandleError::Invalid(Kind::Queue)));
        assert_eq!(decode(bits | 1 << 50, Kind::Queue, 4), Err(HandleError::Invalid(Kind::Queue)));
        assert_eq!(decode(0xEE << 56, Kind::Queue, 4), Err(HandleError::Invalid(Kind::Queue)));
    }

    #[test]
    fn a_destroyed_object_is_dropped_by_its_last_user_and_its_handle_goes_stale() {
        let table: Table<Counted, 2, { Kind::Frontier as u8 }> = Table::new();
        let first = table.create(|_| Counted).unwrap();
        let user = table.acquire(first).unwrap();
        let drops = DROPS.load(Ordering::SeqCst);
        drop(table.destroy(first).unwrap());
        // Still used: not dropped, but no longer acquirable.
        assert_eq!(DROPS.load(Ordering::SeqCst), drops);
        assert!(matches!(table.acquire(first), Err(UseError::Handle(HandleError::Stale(_)))));
        drop(user);
        assert_eq!(DROPS.load(Ordering::SeqCst), drops + 1);
        // The slot is reused under a new generation: the old handle stays stale.
        let second = table.create(|_| Counted).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            decode(first, Kind::Frontier, 2).unwrap().index,
            decode(second, Kind::Frontier, 2).unwrap().index
        );
        assert!(matches!(table.acquire(first), Err(UseError::Handle(HandleError::Stale(_)))));
        assert!(table.acquire(second).is_ok());
        assert!(table.create(|_| Counted).is_some());
        assert!(table.create(|_| Counted).is_none(), "two slots");
    }
}

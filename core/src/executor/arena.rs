//! A fixed-block arena: `N` slots for values of one type, handed out and taken back without
//! locks and without the heap.
//!
//! The executor gives every submission a context from an [`Arena`]. The arena's storage is the
//! arena value itself, so it lives wherever its owner puts it: a `static` (`new` is `const`), a
//! stack frame, a field of a larger structure.
//!
//! # Protocol
//!
//! Every block is in one of two states:
//!
//! ```text
//!              acquire: CAS head (tag, i + 1) -> (tag + 1, next[i]); write the value
//!            +--------------------------------------------------------------------+
//!            |                                                                    v
//!        +--------+                                                          +---------+
//!        |  free  |                                                          |  owned  |
//!        +--------+                                                          +---------+
//!            ^                                                                    |
//!            +--------------------------------------------------------------------+
//!              Block::drop: drop the value; next[i] = top; CAS head (tag, top) -> (tag + 1, i + 1)
//! ```
//!
//! The free blocks form a Treiber stack. `head` packs a 32-bit tag (high half) with the top
//! block's index plus one (low half; 0 is the empty stack); `next[i]` holds, in the same
//! encoding, the block below `i` while `i` is free. Blocks start on the stack in index order,
//! so a fresh arena hands out 0, 1, 2, ...; after that the most recently freed block comes
//! first (it is the one most likely still in cache).
//!
//! # Invariants
//!
//! 1. **Free xor owned.** A block is either reachable from `head` through `next` or owned by
//!    exactly one [`Block`], never both and never neither (except a `Block` leaked with
//!    `mem::forget`, or one whose value's `Drop` panicked: that block stays owned forever,
//!    which costs capacity and nothing else). The only transitions are a successful CAS in
//!    [`Arena::acquire`], which takes the top block off the stack and gives it to the new
//!    `Block`, and the successful CAS in `Drop for Block`, which puts the block back.
//! 2. **Owned slots hold a value, free slots hold none.** `acquire` writes the value after its
//!    CAS and before it builds the `Block`; `Drop for Block` drops the value before its CAS.
//! 3. **A stale head fails its CAS.** Every successful CAS on `head` adds one to the tag, so a
//!    `head` word an acquirer read earlier is never equal to the current one once any push or
//!    pop has happened since (until the tag wraps: 2^32 successful operations while one thread
//!    sits between its load and its CAS). Without the tag this is the ABA problem: thread 1
//!    reads head = A and next\[A\] = B, stalls; thread 2 takes A, takes B, frees A; head is A
//!    again, thread 1's CAS would succeed and install B, which thread 2 owns.
//! 4. **`head` is only ever written by read-modify-writes.** That keeps every release sequence
//!    on `head` unbroken, so an Acquire read of `head` synchronises with the Release CAS that
//!    pushed the block it sees, however many pops and pushes came in between.
//!
//! # Orderings
//!
//! Only two things cross threads: the slot's contents (a previous owner's writes and its drop
//! of the value, which the next owner must not race) and the `next` link (which an acquirer
//! must read as it was when the block was pushed).
//!
//! - The push's CAS is **Release**: it publishes both the slot (the value's drop and every
//!   write made through the `Block`) and the `next[i]` store just before it.
//! - The acquirer's load of `head` and its failed CAS (which hands back the fresh head) are
//!   **Acquire**: they pair with the push that put the seen top block there, so the `next` link
//!   read right after is that push's (or newer, in which case the tag has moved on and the CAS
//!   fails).
//! - The acquirer's successful CAS is **Acquire**: it pairs with the same push, so the previous
//!   owner's slot accesses happen-before the new owner's write of its value. Strictly, the
//!   Acquire read of `head` that this CAS compared against already carries that edge (with the
//!   tag, an equal word is the same write); the CAS that transfers ownership carries it itself
//!   so the hand-off does not lean on that argument. Loom cannot tell the two apart: weakening
//!   only this ordering passes the models, weakening the load and failure orderings does not.
//! - Everything else is **Relaxed**: the `next` store and load (published and read through
//!   `head` as above), the pusher's load of `head` and its failed CAS (the pusher only needs
//!   the top index to link below itself, and the CAS checks it is still current).
//!
//! # Progress
//!
//! Both loops use a strong CAS, so each retry means another thread's CAS succeeded: the arena
//! is lock-free. `acquire` on an empty stack returns at once with the value handed back; it
//! never waits for a block. On targets without native 64-bit atomics `head` goes through
//! `portable-atomic`'s fallback (a critical section on bare metal).

use core::fmt;
use core::mem::MaybeUninit;
use core::ops::{Deref, DerefMut};

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::UnsafeCell;

/// The link value of "no block": the bottom of the stack, or an empty stack at `head`.
const NO_BLOCK: u32 = 0;

/// The free-list head word, unpacked: a modification counter and the top block's link.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Head {
    /// Bumped by every successful CAS, so a stale head never compares equal (invariant 3).
    tag: u32,
    /// The top free block's index plus one, or [`NO_BLOCK`].
    top: u32,
}

impl Head {
    const fn from_bits(bits: u64) -> Head {
        Head { tag: (bits >> 32) as u32, top: bits as u32 }
    }

    const fn to_bits(self) -> u64 {
        ((self.tag as u64) << 32) | self.top as u64
    }

    /// The head after a successful CAS that leaves `top` on the stack.
    const fn next(self, top: u32) -> Head {
        Head { tag: self.tag.wrapping_add(1), top }
    }
}

/// The link naming block `index`. Fits in a `u32`: `new` rejects `N >= u32::MAX`.
const fn link_to(index: usize) -> u32 {
    index as u32 + 1
}

/// The block below `index` in a fresh arena of `capacity` blocks: the next index, so blocks
/// come off the stack in index order.
const fn initial_link_below(index: usize, capacity: usize) -> u32 {
    if index + 1 < capacity {
        link_to(index + 1)
    } else {
        NO_BLOCK
    }
}

/// `N` blocks of `T` with a lock-free free list (its protocol, with state diagram and
/// invariants, is written up in the private `executor::arena` module's documentation).
///
/// [`acquire`](Arena::acquire) moves a value into a free block and returns its [`Block`], the
/// value's unique owner; dropping the `Block` drops the value and frees the block. Nothing
/// allocates, and when all `N` blocks are taken `acquire` hands the value back.
///
/// `N` must be at least 1 and below `u32::MAX`; other values fail to compile at `new`:
///
/// ```compile_fail,E0080
/// use causeway_core::executor::Arena;
///
/// static NOTHING: Arena<u64, 0> = Arena::new();
/// ```
pub struct Arena<T, const N: usize> {
    /// Packed [`Head`] of the free stack.
    head: AtomicU64,
    /// `next[i]`: the link below block `i` while `i` is free; meaningless while it is owned.
    next: [AtomicU32; N],
    /// The values; slot `i` is initialised exactly while block `i` is owned (invariant 2).
    slots: [UnsafeCell<MaybeUninit<T>>; N],
}

// SAFETY: `head` and `next` are atomics. A slot is only ever accessed by the one `Block` that
// owns it (invariant 1: ownership passes only through the CAS in `acquire` and back through
// the CAS in `Drop for Block`, and the Release/Acquire pair on those CASes orders consecutive
// owners' accesses), so sharing the arena never shares a slot. A value is dropped where its
// `Block` is dropped, which is another thread than the one that moved it in only if the
// `Block` was sent, and `Block: Send` already needs `T: Send`; asking `T: Send` here as well
// is the conservative bound, the usual one for a container shared between threads.
unsafe impl<T: Send, const N: usize> Sync for Arena<T, N> {}

impl<T, const N: usize> Arena<T, N> {
    /// Rejects capacities the packed head cannot name (index + 1 must fit in 32 bits) and the
    /// useless empty arena.
    const CAPACITY_FITS: () =
        assert!(N >= 1 && (N as u64) < u32::MAX as u64, "an Arena needs 1 <= N < u32::MAX blocks");

    /// An arena with all `N` blocks free, handed out in index order first.
    #[cfg(not(loom))]
    pub const fn new() -> Arena<T, N> {
        let () = Self::CAPACITY_FITS;
        let mut next = [const { AtomicU32::new(NO_BLOCK) }; N];
        let mut index = 0;
        while index < N {
            next[index] = AtomicU32::new(initial_link_below(index, N));
            index += 1;
        }
        Arena {
            head: AtomicU64::new(Head { tag: 0, top: link_to(0) }.to_bits()),
            next,
            slots: [const { UnsafeCell::new(MaybeUninit::uninit()) }; N],
        }
    }

    /// An arena with all `N` blocks free, handed out in index order first.
    #[cfg(loom)]
    pub fn new() -> Arena<T, N> {
        let () = Self::CAPACITY_FITS;
        Arena {
            head: AtomicU64::new(Head { tag: 0, top: link_to(0) }.to_bits()),
            next: core::array::from_fn(|index| AtomicU32::new(initial_link_below(index, N))),
            slots: core::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
        }
    }

    /// How many blocks the arena has: `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Moves `value` into a free block and returns the block's unique owner.
    ///
    /// # Errors
    ///
    /// Hands `value` back unchanged when all `N` blocks are owned at the moment of the attempt.
    /// Never waits for a block to be freed.
    pub fn acquire(&self, value: T) -> Result<Block<'_, T, N>, T> {
        // Acquire: pairs with the Release CAS in `release` that pushed the top block we see, so
        // the `next` link loaded below is the one that push stored (or newer; then the tag has
        // moved on and our CAS fails).
        let mut head = Head::from_bits(self.head.load(Ordering::Acquire));
        let index = loop {
            if head.top == NO_BLOCK {
                return Err(value);
            }
            let index = (head.top - 1) as usize;
            // Relaxed: ordered after the push by the Acquire on `head` above. The block may
            // have been taken (and even freed again) since we read `head`; then the value is
            // stale and the tagged CAS below fails (invariant 3).
            let below = self.next[index].load(Ordering::Relaxed);
            match self.head.compare_exchange(
                head.to_bits(),
                head.next(below).to_bits(),
                // Success, Acquire: pairs with the Release CAS in `release` that freed this
                // block, so the previous owner's accesses to the slot (its writes and its drop
                // of the value) happen-before our write below.
                Ordering::Acquire,
                // Failure, Acquire: the fresh head is the next one we try, and needs the same
                // pairing as the first load.
                Ordering::Acquire,
            ) {
                Ok(_) => break index,
                Err(current) => head = Head::from_bits(current),
            }
        };
        let slot = &self.slots[index];
        // SAFETY: our successful CAS took block `index` off the free stack, so we own it and no
        // one else touches its slot (invariant 1); the slot holds no value (invariant 2), so
        // overwriting it leaks nothing; the Acquire CAS ordered the previous owner's accesses
        // before this write.
        slot.with_mut(|uninit| unsafe {
            (*uninit).write(value);
        });
        Ok(Block { arena: self, index })
    }

    /// Pushes block `index` back onto the free stack.
    ///
    /// # Safety
    ///
    /// The caller owns block `index` (it is the block's `Block`, being dropped), has already
    /// dropped the slot's value, and never touches the slot again.
    unsafe fn release(&self, index: usize) {
        // Relaxed: we only need a candidate top to link below us; the CAS checks it is current.
        let mut head = Head::from_bits(self.head.load(Ordering::Relaxed));
        loop {
            // Relaxed: published by the Release CAS below, read after an Acquire of `head`.
            self.next[index].store(head.top, Ordering::Relaxed);
            match self.head.compare_exchange(
                head.to_bits(),
                head.next(link_to(index)).to_bits(),
                // Success, Release: pairs with the Acquire load and the Acquire CASes in
                // `acquire`, so the next owner of this block sees the `next` link stored above
                // and our accesses to the slot, including the drop of the value, happen-before
                // its own.
                Ordering::Release,
                // Failure, Relaxed: as for the load above, only the fresh top index is needed.
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => head = Head::from_bits(current),
            }
        }
    }
}

impl<T, const N: usize> Default for Arena<T, N> {
    fn default() -> Arena<T, N> {
        Arena::new()
    }
}

impl<T, const N: usize> fmt::Debug for Arena<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arena").field("capacity", &N).finish_non_exhaustive()
    }
}

/// The unique owner of one block of an [`Arena`] and of the value in it.
///
/// Derefs to the value. Dropping it drops the value and frees the block for the next
/// [`acquire`](Arena::acquire).
///
/// `Block` is `Send` when `T: Send` and `Sync` when `T: Sync`, like the value it holds:
///
/// ```compile_fail,E0277
/// use core::cell::Cell;
/// use causeway_core::executor::{Arena, Block};
///
/// fn shared_between_threads<S: Sync>() {}
/// // `Cell` is `Send` but not `Sync`, so neither is a `Block` holding one.
/// shared_between_threads::<Block<'static, Cell<u32>, 4>>();
/// ```
pub struct Block<'arena, T, const N: usize> {
    arena: &'arena Arena<T, N>,
    /// Which block this is; `< N`, owned by us (invariant 1) and initialised (invariant 2).
    index: usize,
}

// SAFETY: a `Block` is the only handle to its slot (invariant 1), so moving it to another
// thread moves the value (needs `T: Send`) and the right to call `release`, which only
// touches atomics. Its `&Arena` is shareable because `Arena: Sync` whenever `T: Send`.
unsafe impl<T: Send, const N: usize> Send for Block<'_, T, N> {}

// SAFETY: through `&Block` another thread can only reach `&T` (`Deref`) and the index, so
// sharing a `Block` shares exactly a `&T`, which `T: Sync` allows.
unsafe impl<T: Sync, const N: usize> Sync for Block<'_, T, N> {}

impl<T, const N: usize> Block<'_, T, N> {
    /// Which of the arena's blocks this is, in `0..N`; for diagnostics.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl<T, const N: usize> Deref for Block<'_, T, N> {
    type Target = T;

    fn deref(&self) -> &T {
        let slot = &self.arena.slots[self.index];
        // SAFETY: we own the block, so no one else accesses the slot (invariant 1), and it
        // holds the value `acquire` wrote before building us (invariant 2). The reference
        // borrows `self`, so it ends before `Drop` drops the value.
        slot.with(|value| unsafe { (*value).assume_init_ref() })
    }
}

impl<T, const N: usize> DerefMut for Block<'_, T, N> {
    fn deref_mut(&mut self) -> &mut T {
        let slot = &self.arena.slots[self.index];
        // SAFETY: as in `deref`; `&mut self` also rules out any other reference we handed out.
        slot.with_mut(|value| unsafe { (*value).assume_init_mut() })
    }
}

impl<T, const N: usize> Drop for Block<'_, T, N> {
    fn drop(&mut self) {
        let slot = &self.arena.slots[self.index];
        // SAFETY: we own the block and its slot holds the value (invariants 1 and 2), and no
        // reference to it outlives this `&mut self`; it is dropped once, here, and the slot
        // is not read again until a later `acquire` writes a new value.
        slot.with_mut(|value| unsafe { (*value).assume_init_drop() });
        // SAFETY: we own block `index` and have just dropped its value; `self` is going away,
        // so nothing touches the slot through it again.
        unsafe { self.arena.release(self.index) };
    }
}

impl<T: fmt::Debug, const N: usize> fmt::Debug for Block<'_, T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Block").field("index", &self.index).field("value", &**self).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use core::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::vec::Vec;

    use super::{Arena, Block};

    /// Counts its drops in a counter it borrows, so each test has its own.
    struct CountsDrops<'a>(&'a Cell<usize>);

    impl Drop for CountsDrops<'_> {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn blocks_come_out_in_index_order_then_the_value_is_handed_back() {
        let arena: Arena<u32, 3> = Arena::new();
        assert_eq!(arena.capacity(), 3);
        let blocks: Vec<_> = (0..3).map(|value| arena.acquire(value).ok().unwrap()).collect();
        let indices: Vec<_> = blocks.iter().map(Block::index).collect();
        assert_eq!(indices, [0, 1, 2]);
        assert_eq!(arena.acquire(7).err(), Some(7));
    }

    #[test]
    fn a_handed_back_value_is_not_dropped_by_the_arena() {
        let drops = Cell::new(0);
        let arena: Arena<CountsDrops<'_>, 1> = Arena::new();
        let _held = arena.acquire(CountsDrops(&drops)).ok().unwrap();
        let refused = arena.acquire(CountsDrops(&drops)).err().unwrap();
        assert_eq!(drops.get(), 0);
        drop(refused);
        assert_eq!(drops.get(), 1);
    }

    #[test]
    fn dropping_a_block_drops_its_value_once_and_frees_the_block() {
        let drops = Cell::new(0);
        let arena: Arena<CountsDrops<'_>, 1> = Arena::new();
        let block = arena.acquire(CountsDrops(&drops)).ok().unwrap();
        assert_eq!(drops.get(), 0);
        drop(block);
        assert_eq!(drops.get(), 1);
        let again = arena.acquire(CountsDrops(&drops)).ok().unwrap();
        assert_eq!(again.index(), 0);
        assert_eq!(drops.get(), 1);
        drop(again);
        assert_eq!(drops.get(), 2);
    }

    #[test]
    fn freed_blocks_are_reused_most_recent_first() {
        let arena: Arena<u32, 3> = Arena::new();
        let first = arena.acquire(0).ok().unwrap();
        let second = arena.acquire(1).ok().unwrap();
        drop(first);
        drop(second);
        let indices: Vec<_> = [arena.acquire(2), arena.acquire(3), arena.acquire(4)]
            .map(|b| b.ok().unwrap().index())
            .into();
        assert_eq!(indices, [1, 0, 2]);
    }

    #[test]
    fn writes_through_the_block_are_seen_and_the_next_owner_gets_its_own_value() {
        let arena: Arena<[u8; 4], 1> = Arena::new();
        let mut block = arena.acquire([0; 4]).ok().unwrap();
        block[2] = 9;
        block.reverse();
        assert_eq!(*block, [0, 9, 0, 0]);
        drop(block);
        let next = arena.acquire([1; 4]).ok().unwrap();
        assert_eq!(*next, [1; 4]);
    }

    #[test]
    fn a_static_arena_is_built_at_compile_time_and_shared() {
        static CONTEXTS: Arena<u64, 2> = Arena::new();
        let handle = std::thread::spawn(|| *CONTEXTS.acquire(5).ok().unwrap() + 1);
        assert_eq!(handle.join().unwrap(), 6);
        assert_eq!(*CONTEXTS.acquire(8).ok().unwrap(), 8);
    }

    #[test]
    fn blocks_are_send_and_sync_like_their_values() {
        fn send<S: Send>() {}
        fn sync<S: Sync>() {}
        send::<Block<'static, Cell<u32>, 2>>();
        sync::<Block<'static, u32, 2>>();
        sync::<Arena<Cell<u32>, 2>>();
    }

    #[test]
    fn debug_shows_the_index_and_the_value() {
        let arena: Arena<u8, 2> = Arena::default();
        let block = arena.acquire(3).ok().unwrap();
        assert_eq!(std::format!("{block:?}"), "Block { index: 0, value: 3 }");
        assert_eq!(std::format!("{arena:?}"), "Arena { capacity: 2, .. }");
    }

    /// What each owner writes into its block and checks is still there before letting go.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    struct Stamp {
        thread: usize,
        round: usize,
    }

    #[test]
    fn threads_never_share_a_block_and_every_block_comes_back() {
        const THREADS: usize = 4;
        const BLOCKS: usize = 8;
        // Three held per thread: twelve wanted from eight blocks, so exhaustion is exercised.
        const HELD_PER_THREAD: usize = 3;
        let rounds = if cfg!(miri) { 100 } else { 20_000 };
        let arena: Arena<Stamp, BLOCKS> = Arena::new();
        let owned: [AtomicBool; BLOCKS] = [const { AtomicBool::new(false) }; BLOCKS];

        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let (arena, owned) = (&arena, &owned);
                scope.spawn(move || {
                    for round in 0..rounds {
                        let mut held: Vec<Block<'_, Stamp, BLOCKS>> = Vec::new();
                        for _ in 0..HELD_PER_THREAD {
                            let stamp = Stamp { thread, round };
                            match arena.acquire(stamp) {
                                Ok(mut block) => {
                                    let was_owned =
                                        owned[block.index()].swap(true, Ordering::Relaxed);
                                    assert!(!was_owned, "block {} has two owners", block.index());
                                    assert_eq!(*block, stamp);
                                    block.round = round + 1;
                                    held.push(block);
                                }
                                Err(refused) => assert_eq!(refused, stamp),
                            }
                        }
                        for block in held {
                            assert_eq!(*block, Stamp { thread, round: round + 1 });
                            owned[block.index()].store(false, Ordering::Relaxed);
                        }
                    }
                });
            }
        });

        let all: Vec<_> = (0..BLOCKS)
            .map(|_| arena.acquire(Stamp { thread: 0, round: 0 }).ok().unwrap())
            .collect();
        let mut seen = [false; BLOCKS];
        for block in &all {
            assert!(!core::mem::replace(&mut seen[block.index()], true));
        }
        assert!(arena.acquire(Stamp { thread: 0, round: 0 }).is_err());
    }
}

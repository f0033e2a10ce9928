//! The compute slot array: fixed slots holding the active compute processes, scanned read-only
//! by every worker and drained by many at once.
//!
//! # Protocol
//!
//! Each slot has a 32-bit word: a drainer count (low 24 bits) and flags.
//!
//! ```text
//!       claim (CAS 0 → OCCUPIED), store process, meet wakes, set PUBLISHED | RUNNABLE
//!   free ─────────────────────────────────────────────────► runnable ◄──┐
//!    ▲                                                     │   │  │     │ wake
//!    │ clear flags                               Sleep     │   │  └─────┼── drainers enter /
//!    │ (late enterers may still hold counts)  (unless      ▼   │        │   leave (count ±1)
//!  finalizing ◄── last leaver, count 0 ◄── closing ◄─ sleeping │        │
//!                  (CAS adds FINALIZING)      ▲   NOTIFIED)    │        │
//!                                             └── Done / failure seen ──┘
//! ```
//!
//! A worker *enters* a slot by incrementing the count and checking, in the value that the same
//! atomic increment returned, that the slot is PUBLISHED | RUNNABLE and neither CLOSING nor
//! FINALIZING; only then does it read the process pointer and touch the process. A drainer that
//! finishes the process sets CLOSING; no new drainer gets in after that, and whichever drainer
//! *leaves* last (count back to zero with CLOSING set) wins a compare-exchange to FINALIZING and
//! finalizes the process. So the process is finalized exactly once, after every drain call on
//! it has returned — and a worker that merely raced to enter never touches process memory,
//! which is what lets the owner reuse the storage the moment it is completed. The slot itself
//! becomes claimable again only when its word is exactly zero: no occupant, no stragglers.
//!
//! Between its claim and its publication a slot is OCCUPIED alone. A wake that finds it so
//! sets NOTIFIED: the publication, a read-modify-write after it, continues its release
//! sequence to the drainers, and the first `Sleep` drains once more. (A wake that finds the
//! process in no slot at all meets the claim on the process's state word instead: invariant 6
//! of the state module.)
//!
//! Scanners only load words (read-shared cache lines); a runnable check never writes.
//!
//! # Runnable summary
//!
//! One 64-bit word beside the slots summarises them: bit `i % 64` set means slot `i` (or
//! another slot congruent to it modulo 64) may be runnable. It is a hint that lets an idle scan
//! be one load and a revolution a walk over set bits; the slot word stays the truth (a scanner
//! still checks it, and `enter` still decides).
//!
//! ```text
//!   slot word turns runnable (claim, wake)  ──then──►  announce: fetch_or(bit)         (Release)
//!   slot word stops being runnable           ──then──►  retract:  fetch_and(!bit)      (Acquire)
//!     (sleep, close)                                              re-check the bit's slots;
//!                                                                 announce again if one is
//!                                                                 runnable
//! ```
//!
//! Invariant: a slot that is runnable has its bit set, except while the thread that made it
//! runnable has not announced it yet, or while a retracting thread is between its `fetch_and`
//! and its re-check — both of which finish by setting the bit. The re-check is what makes this
//! exact: if a waker's announce precedes a retract's `fetch_and` in the summary's modification
//! order, that `fetch_and` reads from the announce (or a later RMW in its release sequence), so
//! the re-check sees the waker's slot word; if it follows, the bit stays set. Either way the
//! bit ends up set while the slot is runnable, so spinning scanners cannot miss it. The waker
//! notifies only after announcing, and a parking worker checks the slot words themselves (not
//! the summary) after announcing its idleness, so no wake-up is lost either.

use core::ptr;

use super::process::Process;
use crate::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::CachePadded;

const COUNT: u32 = (1 << 24) - 1;
const OCCUPIED: u32 = 1 << 24;
const RUNNABLE: u32 = 1 << 25;
const NOTIFIED: u32 = 1 << 26;
const CLOSING: u32 = 1 << 27;
const FINALIZING: u32 = 1 << 28;
/// Set (with RUNNABLE) by the claimer's Release RMW after it stored the process pointer: a
/// word carrying it guarantees an Acquire reader sees the pointer.
const PUBLISHED: u32 = 1 << 29;

/// What a wake did to a compute slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotWake {
    /// The process was asleep and is runnable again: workers should be woken.
    Runnable,
    /// The process was runnable, and its next `Sleep` becomes another drain; or its slot is
    /// claimed but not yet published, and the publication carries the wake on.
    Notified,
    /// The slot no longer holds that process, or it is completing.
    Gone,
}

/// What a scan reads first, on a line of its own: it changes only when a slot's runnability or
/// occupancy does.
struct Summary {
    /// The runnable summary (see the module docs).
    runnable: AtomicU64,
    /// Bumped whenever occupancy changes: scan policies rebuild their tables on a change.
    generation: AtomicU32,
}

/// The summary bit of slot `index`.
fn bit(index: usize) -> u64 {
    1 << (index % 64)
}

/// Whether `hint` (from [`SlotArray::runnable_hint`]) marks slot `index` as worth a look.
pub(crate) fn marked(hint: u64, index: usize) -> bool {
    hint & bit(index) != 0
}

pub(crate) struct SlotArray<'p, const SLOTS: usize> {
    summary: CachePadded<Summary>,
    /// On lines of their own: drainers' entries and leaves write them.
    words: CachePadded<[AtomicU32; SLOTS]>,
    processes: [AtomicPtr<Process<'p>>; SLOTS],
    /// Bumped on every claim: lets workers reset per-slot private state for a new occupant.
    claims: [AtomicU32; SLOTS],
}

impl<'p, const SLOTS: usize> SlotArray<'p, SLOTS> {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> SlotArray<'p, SLOTS> {
        SlotArray {
            summary: CachePadded(Summary {
                runnable: AtomicU64::new(0),
                generation: AtomicU32::new(0),
            }),
            words: CachePadded([const { AtomicU32::new(0) }; SLOTS]),
            processes: [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS],
            claims: [const { AtomicU32::new(0) }; SLOTS],
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> SlotArray<'p, SLOTS> {
        SlotArray {
            summary: CachePadded(Summary {
                runnable: AtomicU64::new(0),
                generation: AtomicU32::new(0),
            }),
            words: CachePadded(core::array::from_fn(|_| AtomicU32::new(0))),
            processes: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            claims: core::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// Puts `process` into a free slot and makes it runnable; `None` when every slot is taken.
    pub(crate) fn claim(&self, process: &'p Process<'p>) -> Option<usize> {
        for (index, word) in self.words.0.iter().enumerate() {
            if word.load(Ordering::Relaxed) != 0 {
                continue;
            }
            // Acquire pairs with the Release in `vacate`: the previous occupant's finalization
            // is complete before this claim reuses the slot.
            if word.compare_exchange(0, OCCUPIED, Ordering::Acquire, Ordering::Relaxed).is_err() {
                continue;
            }
            self.processes[index].store(ptr::from_ref(process).cast_mut(), Ordering::Relaxed);
            self.claims[index].fetch_add(1, Ordering::Relaxed);
            process.slot().store(index as u32, Ordering::Relaxed);
            // Meets a wake that found the process in no slot (the state module's invariant 6):
            // after the pointer and index stores, which a later such wake then sees, and
            // before the publication below, which hands an earlier one's writes on.
            process.state().meet_compute_claim();
            // Release: pairs with the Acquire increment in `enter`, publishing the pointer,
            // the claim number and the process's own state to every drainer.
            word.fetch_or(PUBLISHED | RUNNABLE, Ordering::Release);
            self.summary.0.generation.fetch_add(1, Ordering::Relaxed);
            self.announce(index);
            return Some(index);
        }
        None
    }

    /// The runnable summary: slot `i` is worth a look only if bit `i % 64` is set. One relaxed
    /// load: a hint, which `looks_runnable` and `enter` confirm.
    pub(crate) fn runnable_hint(&self) -> u64 {
        self.summary.0.runnable.load(Ordering::Relaxed)
    }

    /// Whether scanners should try to enter `index`: one relaxed load, never a write.
    pub(crate) fn looks_runnable(&self, index: usize) -> bool {
        self.words.0[index].load(Ordering::Relaxed) & (RUNNABLE | CLOSING | FINALIZING) == RUNNABLE
    }

    /// Whether any slot looks runnable, from the slot words themselves rather than the summary
    /// (a parking worker's re-check; see the module docs).
    pub(crate) fn any_runnable(&self) -> bool {
        (0..SLOTS).any(|index| self.looks_runnable(index))
    }

    /// Whether every slot is free (a hint).
    pub(crate) fn all_vacant(&self) -> bool {
        self.words.0.iter().all(|word| word.load(Ordering::Relaxed) & !COUNT == 0)
    }

    /// Sets the summary bit of `index`, whose slot this thread has just made runnable.
    fn announce(&self, index: usize) {
        // Release pairs with the Acquire `fetch_and` in `retract`: a retract ordered after this
        // announce re-checks and sees the slot word this thread changed before it.
        self.summary.0.runnable.fetch_or(bit(index), Ordering::Release);
    }

    /// Clears the summary bit of `index`, whose slot this thread has just made unrunnable, then
    /// sets it again if any slot sharing the bit is runnable (a wake may have raced the change).
    fn retract(&self, index: usize) {
        let bit = bit(index);
        // Acquire pairs with the Release `fetch_or` of every announce before this RMW in the
        // summary's modification order: their slot-word changes are visible to the re-check.
        self.summary.0.runnable.fetch_and(!bit, Ordering::Acquire);
        if (index % 64..SLOTS).step_by(64).any(|sharing| self.looks_runnable(sharing)) {
            self.announce(index);
        }
    }

    /// Registers as a drainer of `index`. On success returns the process and its claim number;
    /// the caller must [`leave`](Self::leave) exactly once afterwards either way.
    pub(crate) fn enter(&self, index: usize) -> Option<(&'p Process<'p>, u32)> {
        // Acquire pairs with the Release `fetch_or(PUBLISHED | RUNNABLE)` in `claim` (and the RMWs after
        // it in the word's release sequence): pointer and process state are visible.
        let before = self.words.0[index].fetch_add(1, Ordering::Acquire);
        if before & (PUBLISHED | RUNNABLE | CLOSING | FINALIZING) != PUBLISHED | RUNNABLE {
            return None;
        }
        let process = self.processes[index].load(Ordering::Relaxed);
        // SAFETY: the slot was PUBLISHED and not closing when this drainer's increment landed,
        // so `claim` had stored a `&'p Process` here (visible through the Acquire above), and finalization (which clears it) waits
        // for this drainer's `leave`.
        Some((unsafe { &*process }, self.claims[index].load(Ordering::Relaxed)))
    }

    /// Unregisters a drainer. Returns the process when this leaver must finalize it.
    pub(crate) fn leave(&self, index: usize) -> Option<&'p Process<'p>> {
        let word = &self.words.0[index];
        // Release: this drainer's writes happen before the finalization. Acquire: a leaver
        // that finalizes sees every other drainer's writes (their Release decrements).
        let after = word.fetch_sub(1, Ordering::AcqRel) - 1;
        if after & COUNT != 0 || after & (CLOSING | FINALIZING) != CLOSING {
            return None;
        }
        // Acquire: as above, for decrements that landed between ours and this exchange.
        word.compare_exchange(after, after | FINALIZING, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        let process = self.processes[index].load(Ordering::Relaxed);
        // SAFETY: FINALIZING was won by this thread from a CLOSING slot with no drainers, so
        // the pointer stored by `claim` is still there and nobody else will finalize it.
        Some(unsafe { &*process })
    }

    /// Stops new drainers: the process is finishing. Called by a registered drainer.
    pub(crate) fn close(&self, index: usize) {
        // Release: the closer's writes (its recorded outcome) happen before the finalization,
        // which acquires through the leavers' decrements.
        self.words.0[index].fetch_or(CLOSING, Ordering::Release);
        self.retract(index);
    }

    /// A drainer found nothing to do: sleep unless a wake arrived meanwhile.
    ///
    /// Only a drainer alone in the slot decides. With others still inside, one of them may
    /// have entered before a wake whose NOTIFIED this drainer would consume (or, entering
    /// after it, may be about to see its work): deciding here could leave the process asleep
    /// with work published. So the slot stays runnable and a later, solitary drain decides.
    pub(crate) fn sleep(&self, index: usize) {
        // AcqRel: pairs with the RMW in `wake`, so a wake either lands before (NOTIFIED seen
        // and consumed) or after (it finds the slot asleep and makes it runnable).
        let slept = self.words.0[index].fetch_update(Ordering::AcqRel, Ordering::Relaxed, |word| {
            if word & (CLOSING | FINALIZING) != 0 || word & COUNT > 1 {
                None
            } else if word & NOTIFIED != 0 {
                Some(word & !NOTIFIED)
            } else {
                Some(word & !RUNNABLE)
            }
        });
        if matches!(slept, Ok(before) if before & NOTIFIED == 0) {
            self.retract(index);
        }
    }

    /// Wakes `process` if it still occupies `index`.
    pub(crate) fn wake(&self, index: usize, process: &Process<'p>) -> SlotWake {
        if index >= SLOTS || !ptr::eq(self.processes[index].load(Ordering::Relaxed), process) {
            return SlotWake::Gone;
        }
        self.rouse(index)
    }

    /// Makes whatever occupies `index` runnable (shutdown: every occupant must be drained once
    /// more to see its cancellation). A slot claimed but not yet published only records the
    /// wake (NOTIFIED): its publication, a read-modify-write after this one, makes it runnable
    /// and carries this waker's writes to its drainers.
    pub(crate) fn rouse(&self, index: usize) -> SlotWake {
        let word = &self.words.0[index];
        // AcqRel: pairs with `sleep` (see there) and publishes the waker's writes to the
        // drainers that enter after the slot turns runnable.
        let result = word.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |word| {
            if word & (OCCUPIED | PUBLISHED) == OCCUPIED {
                Some(word | NOTIFIED)
            } else if word & PUBLISHED == 0 || word & (CLOSING | FINALIZING) != 0 {
                None
            } else if word & RUNNABLE != 0 {
                Some(word | NOTIFIED)
            } else {
                Some(word | RUNNABLE)
            }
        });
        match result {
            Ok(before) if before & PUBLISHED == 0 => SlotWake::Notified,
            Ok(before) if before & RUNNABLE == 0 => {
                self.announce(index);
                SlotWake::Runnable
            }
            Ok(_) => SlotWake::Notified,
            Err(_) => SlotWake::Gone,
        }
    }

    /// Frees a finalized slot for the next claim.
    pub(crate) fn vacate(&self, index: usize) {
        self.processes[index].store(ptr::null_mut(), Ordering::Relaxed);
        // Release: pairs with the Acquire exchange in `claim`; stragglers' counts stay.
        self.words.0[index].fetch_and(COUNT, Ordering::Release);
        self.summary.0.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The occupancy generation (see the field).
    pub(crate) fn generation(&self) -> u32 {
        self.summary.0.generation.load(Ordering::Relaxed)
    }
}

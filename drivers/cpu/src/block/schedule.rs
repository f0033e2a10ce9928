//! The claim and election protocol of one command-buffer execution, kernels aside. The
//! protocol, its invariants (I1–I5) and its orderings are written up in the
//! [`block` module docs](super); comments here refer to them.

use std::fmt;
use std::ops::Range;

use causeway_core::CachePadded;

use super::buffer::{CommandBuffer, Region};
use causeway_runtime::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The claim word: the region epoch in the high half, the next unclaimed tile in the low half.
fn pack(epoch: u32, next: u32) -> u64 {
    u64::from(epoch) << 32 | u64::from(next)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// The lock-free claim/election state behind a [`BlockProcessor`](super::BlockProcessor):
/// epoch-tagged tile claiming, a completion count and completer election. It holds no kernel
/// and calls none; whoever drives it runs the claimed tiles between [`claim`](Self::claim) and
/// [`complete`](Self::complete). Usable on its own to execute a [`CommandBuffer`] from threads
/// of one's own (the loom model does).
pub struct TileSchedule {
    /// `(epoch, next)`; see the module docs. Hammered by claimers, so on a line of its own, as
    /// is `done` (bumped once per batch): neither should slow down the other or the
    /// read-mostly fields.
    claim: CachePadded<AtomicU64>,
    /// Tiles completed in the current execution, over all of its regions.
    done: CachePadded<AtomicU64>,
    /// The epoch of region 0 of the current execution; written only by [`reset`](Self::reset).
    base: AtomicU32,
    /// Threads expected to claim, times two: the guided batch is an equal share of half of
    /// what is left.
    shares: u32,
}

/// A claimer's memo of the region it last looked at, keyed by that region's epoch, so that
/// claims after the first in a region skip the epoch-to-region lookup (a `base` load and a
/// bounds check). Sound across regions and executions because an epoch names one region of one
/// execution only: epochs only grow (I2), so a memo for an older epoch is simply never matched
/// again (short of the 2³² epochs I2's ABA note needs, so keep a cursor for one claiming loop,
/// not for the schedule's lifetime). Create one per claiming loop, over the buffer it claims
/// from.
pub struct Cursor<'b, 'k> {
    buffer: &'b CommandBuffer<'k>,
    /// The epoch last looked up, its region's index and the region.
    seen: Option<(u32, usize, &'b Region<'k>)>,
}

impl<'b, 'k> Cursor<'b, 'k> {
    /// A cursor over `buffer` that has seen no region yet.
    pub fn new(buffer: &'b CommandBuffer<'k>) -> Cursor<'b, 'k> {
        Cursor { buffer, seen: None }
    }

    /// The region of the epoch last looked up: after [`Next::Claimed`], the claim's region.
    pub(crate) fn region(&self) -> Option<&'b Region<'k>> {
        self.seen.map(|(_, _, region)| region)
    }

    /// The index and region of `epoch`, looked up only when it is not the memo's.
    fn resolve(&mut self, epoch: u32, base: &AtomicU32) -> Option<(usize, &'b Region<'k>)> {
        match self.seen {
            Some((seen, index, region)) if seen == epoch => Some((index, region)),
            _ => {
                let index = epoch.wrapping_sub(base.load(Ordering::Relaxed)) as usize;
                let region = self.buffer.region(index)?;
                self.seen = Some((epoch, index, region));
                Some((index, region))
            }
        }
    }
}

impl fmt::Debug for Cursor<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cursor")
            .field("epoch", &self.seen.map(|(epoch, _, _)| epoch))
            .field("region", &self.seen.map(|(_, index, _)| index))
            .finish_non_exhaustive()
    }
}

/// Tiles claimed by one thread: run every one of them, then hand the claim to
/// [`TileSchedule::complete`].
#[must_use = "a claim must be completed, or its region never finishes"]
#[derive(Debug, PartialEq, Eq)]
pub struct Claim {
    epoch: u32,
    region: usize,
    tiles: Range<u32>,
    /// The completion count at which the region is complete, copied from it at claim time so
    /// that completing needs no region lookup.
    end: u64,
    /// The region's tile count and largest batch, copied likewise for
    /// [`TileSchedule::claim_more`].
    region_tiles: u32,
    max_batch: u32,
    /// Tiles this claim reports when completed: its own, plus those its claimer took with
    /// [`TileSchedule::claim_more`] while holding it.
    count: u32,
}

impl Claim {
    /// The region the tiles belong to.
    pub fn region(&self) -> usize {
        self.region
    }

    /// The claimed tile indices (never empty).
    pub fn tiles(&self) -> Range<u32> {
        self.tiles.clone()
    }

    /// Whether this claim took the region's first tile (exactly one claim per region does).
    pub fn opens_region(&self) -> bool {
        self.tiles.start == 0
    }

    /// Tiles [`TileSchedule::complete`] reports for this claim: its own and those claimed with `claim_more`.
    pub(crate) fn reported(&self) -> u32 {
        self.count
    }
}

/// What [`TileSchedule::claim`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Tiles to run.
    Claimed(Claim),
    /// Every tile of the current region is claimed and some are still running: the next
    /// region opens when the last of them completes.
    Waiting,
    /// The execution has no region left (finished), or the caller is looking at an epoch that
    /// is not the current execution's.
    Finished,
}

/// What [`TileSchedule::complete`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// The region still has tiles claimed by others, or unclaimed.
    Pending,
    /// The caller completed its region's last tile and opened region `region`, of `tiles`
    /// tiles.
    Advanced {
        /// The region now open.
        region: usize,
        /// Its tile count.
        tiles: u32,
    },
    /// The caller completed the last tile of the last region: the execution is over.
    Finished,
}

impl TileSchedule {
    /// A schedule armed for an execution, shared by `claimers` threads (at least one; it only
    /// sizes the guided batches).
    pub fn new(claimers: u32) -> TileSchedule {
        TileSchedule {
            claim: CachePadded(AtomicU64::new(pack(0, 0))),
            done: CachePadded(AtomicU64::new(0)),
            base: AtomicU32::new(0),
            shares: claimers.max(1).saturating_mul(2),
        }
    }

    /// Claims the next batch of tiles of `buffer`'s current region.
    pub fn claim(&self, buffer: &CommandBuffer<'_>) -> Next {
        self.claim_with(&mut Cursor::new(buffer))
    }

    /// As [`claim`](Self::claim), from `cursor`'s buffer, remembering the region looked up in
    /// `cursor` for the next call: what a claiming loop calls.
    // Never inlined: called once per region and drain, and inlined it keeps the cursor's memo
    // in registers across the claiming loop's per-tile kernel calls, which then reload them
    // from the stack every tile.
    #[inline(never)]
    pub fn claim_with(&self, cursor: &mut Cursor<'_, '_>) -> Next {
        // Acquire: pairs with the Release store that opened the epoch read here (`complete`'s
        // advance or `reset`), directly or through the claims since (RMWs, so they continue
        // its release sequence): the previous region's writes happen before any tile claimed
        // from this word runs (I3), and `base` below is at least the one that epoch was
        // published with.
        let mut word = self.claim.0.load(Ordering::Acquire);
        loop {
            let (epoch, next) = unpack(word);
            // `base` is read (on a memo miss) after the Acquire above, so it is at least the
            // one this epoch was published with.
            let Some((index, region)) = cursor.resolve(epoch, &self.base) else {
                // The terminal epoch, or one from before the last reset.
                return Next::Finished;
            };
            if next >= region.tiles {
                return Next::Waiting;
            }
            let count = self.batch(region.tiles, region.max_batch, next);
            // The epoch in the expected word is what makes a stale claimer harmless (I2): this
            // succeeds only if the word is still in the epoch just read. Acquire on success and
            // failure: as for the load above, for the value this exchange read. Adding `count`
            // to the word is `pack(epoch, next + count)`: `next + count` is at most the
            // region's tile count, a `u32`, so nothing carries into the epoch.
            match self.claim.0.compare_exchange_weak(
                word,
                word + u64::from(count),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Next::Claimed(Claim {
                        epoch,
                        region: index,
                        tiles: next..next + count,
                        end: region.end,
                        region_tiles: region.tiles,
                        max_batch: region.max_batch,
                        count,
                    })
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Claims the next batch of `held`'s region for the claimer holding `held`, and
    /// adds it to `held`'s report, so that one [`complete`](Self::complete) reports both: one
    /// RMW of the completion count instead of one per claim. `None` once every tile of the
    /// region is claimed. [`Claim::tiles`] still names `held`'s own tiles.
    ///
    /// A claiming loop's way through its region: no region lookup, no claim to build. Holding
    /// reports back is safe because the region cannot complete without them (I4), so the word
    /// stays in `held`'s epoch meanwhile (checked all the same: the exchange expects it).
    pub fn claim_more(&self, held: &mut Claim) -> Option<Range<u32>> {
        // `word - pack(epoch, 0)` is `next` while the word is in `held`'s epoch, and at least
        // 2³² (wrapping) in any other: one comparison checks both.
        let first = pack(held.epoch, 0);
        let tiles = u64::from(held.region_tiles);
        // Acquire: as in `claim_with` (the previous region's writes were acquired by `held`'s
        // own claim already; this keeps the reasoning local).
        let mut word = self.claim.0.load(Ordering::Acquire);
        loop {
            let next = word.wrapping_sub(first);
            if next >= tiles {
                return None;
            }
            // Below `tiles`, a `u32`.
            let next = next as u32;
            let count = self.batch(held.region_tiles, held.max_batch, next);
            // As in `claim_with`: the epoch in the expected word keeps the claim in `held`'s
            // region, and `next + count` never carries into the epoch.
            match self.claim.0.compare_exchange_weak(
                word,
                word + u64::from(count),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    held.count += count;
                    return Some(next..next + count);
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Reports `claim`'s tiles as run. The caller that completes a region's last tile is its
    /// completer: it opens the next region (or ends the execution) before this returns.
    pub fn complete(&self, buffer: &CommandBuffer<'_>, claim: Claim) -> Completion {
        let count = u64::from(claim.count);
        // AcqRel: the Release half publishes this caller's kernel writes to the region's
        // completer; the Acquire half makes the completer see every other tile's writes, since
        // each earlier increment heads a release sequence that this RMW continues (I3).
        let before = self.done.0.fetch_add(count, Ordering::AcqRel);
        if before + count != claim.end {
            return Completion::Pending;
        }
        // Elected (I4). Every tile of the region is claimed, so no claimer writes the word any
        // more (I1) and a plain store opens the next epoch. Release: pairs with the Acquire
        // load and exchange in `claim`, carrying what the Acquire above gathered.
        self.claim.0.store(pack(claim.epoch.wrapping_add(1), 0), Ordering::Release);
        match buffer.region(claim.region + 1) {
            Some(next) => Completion::Advanced { region: claim.region + 1, tiles: next.tiles },
            None => Completion::Finished,
        }
    }

    /// Arms the schedule for another execution. Epochs keep counting, so no word of an earlier
    /// execution can ever match one of the next (I2).
    ///
    /// If the previous execution ran to its end (a completion returned
    /// [`Completion::Finished`], and that is ordered before this call), other threads may still
    /// be inside `claim` on it: they see [`Next::Finished`] or claim in the new execution, never
    /// a tile of the old one (the loom model checks this). If it was abandoned with tiles left,
    /// every `claim` and `complete` call on it must have returned, ordered before this call.
    /// The executor gives both: every drain call returns before `finish` runs.
    pub fn reset(&self) {
        let (epoch, _) = unpack(self.claim.0.load(Ordering::Relaxed));
        let base = epoch.wrapping_add(1);
        self.base.store(base, Ordering::Relaxed);
        self.done.0.store(0, Ordering::Relaxed);
        // Release: pairs with the Acquire load in `claim`, for claimers the caller did not
        // order after this call itself (it normally does: the submission's Release).
        self.claim.0.store(pack(base, 0), Ordering::Release);
    }

    /// Guided batch size: an equal share of half of what is left, capped by the region.
    /// `tiles` and `max_batch` are the region's.
    fn batch(&self, tiles: u32, max_batch: u32, next: u32) -> u32 {
        if max_batch == 1 {
            // One tile per claim: no division on the path of the finest-grained regions.
            return 1;
        }
        let left = tiles - next;
        left.div_ceil(self.shares).min(max_batch)
    }
}

impl fmt::Debug for TileSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (epoch, next) = unpack(self.claim.0.load(Ordering::Relaxed));
        f.debug_struct("TileSchedule")
            .field("epoch", &epoch)
            .field("next", &next)
            .field("base", &self.base.load(Ordering::Relaxed))
            .field("done", &self.done.0.load(Ordering::Relaxed))
            .field("claimers", &(self.shares / 2))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn claimed(next: Next) -> Claim {
        match next {
            Next::Claimed(claim) => claim,
            other => panic!("expected a claim, found {other:?}"),
        }
    }

    fn nothing(_: u32) {}

    #[test]
    fn guided_batches_shrink_and_cover_the_region_exactly() {
        let buffer = CommandBuffer::builder().dispatch(64, &nothing).build().unwrap();
        let schedule = TileSchedule::new(2);
        let mut sizes = Vec::new();
        let mut covered = 0;
        loop {
            match schedule.claim(&buffer) {
                Next::Claimed(claim) => {
                    assert_eq!(claim.tiles().start, covered, "batches are contiguous");
                    covered = claim.tiles().end;
                    sizes.push(claim.tiles().len());
                    // Hold the completions back: claiming alone must cover the region.
                    drop(claim);
                }
                Next::Waiting => break,
                Next::Finished => panic!("nothing completed yet"),
            }
        }
        assert_eq!(covered, 64);
        assert_eq!(sizes[0], 16, "a quarter of 64 on two claimers");
        assert!(sizes.windows(2).all(|pair| pair[0] >= pair[1]), "{sizes:?}");
        assert_eq!(*sizes.last().unwrap(), 1);
    }

    #[test]
    fn max_batch_caps_claims() {
        let buffer = CommandBuffer::builder().dispatch_batched(5, 1, &nothing).build().unwrap();
        let schedule = TileSchedule::new(1);
        for tile in 0..5 {
            let claim = claimed(schedule.claim(&buffer));
            assert_eq!(claim.tiles(), tile..tile + 1);
            let expected = if tile == 4 { Completion::Finished } else { Completion::Pending };
            assert_eq!(schedule.complete(&buffer, claim), expected);
        }
        assert_eq!(schedule.claim(&buffer), Next::Finished);
    }

    #[test]
    fn the_last_completion_of_a_region_opens_the_next() {
        let buffer =
            CommandBuffer::builder().dispatch(2, &nothing).dispatch(3, &nothing).build().unwrap();
        let schedule = TileSchedule::new(4);
        let first = claimed(schedule.claim(&buffer));
        let second = claimed(schedule.claim(&buffer));
        assert!(first.opens_region() && !second.opens_region());
        assert_eq!(schedule.claim(&buffer), Next::Waiting, "region 0 is claimed, not complete");
        // Completion order does not matter: whoever completes last is elected.
        assert_eq!(schedule.complete(&buffer, second), Completion::Pending);
        assert_eq!(schedule.complete(&buffer, first), Completion::Advanced { region: 1, tiles: 3 });
        let claim = claimed(schedule.claim(&buffer));
        assert_eq!((claim.region(), claim.tiles()), (1, 0..1));
        assert!(claim.opens_region());
    }

    /// A claimer that read the word in region 0 can never claim with it in region 1, even when
    /// the tile counter has come back to the same value (the ABA the epoch tag rules out).
    #[test]
    fn a_stale_word_never_claims_in_a_later_region() {
        let buffer = CommandBuffer::builder()
            .dispatch_batched(2, 1, &nothing)
            .dispatch_batched(2, 1, &nothing)
            .build()
            .unwrap();
        let schedule = TileSchedule::new(2);
        let tile0 = claimed(schedule.claim(&buffer));
        let stale = schedule.claim.0.load(Ordering::Relaxed);
        assert_eq!(unpack(stale).1, 1, "the stale claimer saw region 0, next tile 1");
        let tile1 = claimed(schedule.claim(&buffer));
        assert_eq!(schedule.complete(&buffer, tile0), Completion::Pending);
        assert!(matches!(schedule.complete(&buffer, tile1), Completion::Advanced { .. }));
        let region1_tile0 = claimed(schedule.claim(&buffer));
        assert_eq!(unpack(schedule.claim.0.load(Ordering::Relaxed)).1, 1, "next is 1 again");
        // The exchange a stale claimer would make (orderings as in `claim`).
        assert!(
            schedule
                .claim
                .0
                .compare_exchange(
                    stale,
                    pack(unpack(stale).0, 2),
                    Ordering::Acquire,
                    Ordering::Relaxed
                )
                .is_err(),
            "the stale exchange fails on the epoch"
        );
        assert_eq!(region1_tile0.region(), 1);
    }

    #[test]
    fn reset_moves_every_epoch_past_the_previous_execution() {
        let buffer = CommandBuffer::builder().dispatch(1, &nothing).build().unwrap();
        let schedule = TileSchedule::new(1);
        let claim = claimed(schedule.claim(&buffer));
        let old = schedule.claim.0.load(Ordering::Relaxed);
        assert_eq!(schedule.complete(&buffer, claim), Completion::Finished);
        let terminal = schedule.claim.0.load(Ordering::Relaxed);
        schedule.reset();
        let fresh = schedule.claim.0.load(Ordering::Relaxed);
        assert!(unpack(fresh).0 > unpack(terminal).0 && unpack(terminal).0 > unpack(old).0);
        assert_eq!(claimed(schedule.claim(&buffer)).tiles(), 0..1);
    }

    #[test]
    fn an_abandoned_execution_resets_cleanly() {
        let buffer =
            CommandBuffer::builder().dispatch(4, &nothing).dispatch(4, &nothing).build().unwrap();
        let schedule = TileSchedule::new(1);
        // Claimed and never completed: a cancelled execution.
        drop(claimed(schedule.claim(&buffer)));
        schedule.reset();
        let mut completions = Vec::new();
        while let Next::Claimed(claim) = schedule.claim(&buffer) {
            completions.push(schedule.complete(&buffer, claim));
        }
        assert_eq!(completions.last(), Some(&Completion::Finished));
        assert_eq!(
            completions.iter().filter(|c| matches!(c, Completion::Advanced { .. })).count(),
            1
        );
    }

    /// One cursor kept across regions and executions: its memo is keyed by epoch, so it finds
    /// each new region, and a memo from a finished execution never matches the next one.
    #[test]
    fn a_cursor_follows_regions_and_executions() {
        let buffer = CommandBuffer::builder()
            .dispatch_batched(1, 1, &nothing)
            .dispatch_batched(2, 1, &nothing)
            .build()
            .unwrap();
        let schedule = TileSchedule::new(1);
        let mut cursor = Cursor::new(&buffer);
        for _ in 0..2 {
            let mut claimed = Vec::new();
            loop {
                match schedule.claim_with(&mut cursor) {
                    Next::Claimed(claim) => {
                        claimed.push((claim.region(), claim.tiles()));
                        assert_eq!(
                            cursor.region().map(|region| region.tiles),
                            Some([1, 2][claim.region()])
                        );
                        if schedule.complete(&buffer, claim) == Completion::Finished {
                            break;
                        }
                    }
                    other => panic!("expected a claim, found {other:?}"),
                }
            }
            assert_eq!(claimed, [(0, 0..1), (1, 0..1), (1, 1..2)]);
            assert_eq!(schedule.claim_with(&mut cursor), Next::Finished);
            schedule.reset();
        }
    }

    #[test]
    fn claims_made_while_holding_are_reported_by_one_completion() {
        let buffer = CommandBuffer::builder()
            .dispatch_batched(3, 1, &nothing)
            .dispatch(4, &nothing)
            .build()
            .unwrap();
        let schedule = TileSchedule::new(1);
        let mut held = claimed(schedule.claim(&buffer));
        assert_eq!(schedule.claim_more(&mut held), Some(1..2));
        assert_eq!(schedule.claim_more(&mut held), Some(2..3));
        assert_eq!(schedule.claim_more(&mut held), None, "every tile claimed");
        assert_eq!(held.tiles(), 0..1, "the holder's own tiles");
        assert_eq!(held.reported(), 3);
        assert_eq!(schedule.claim(&buffer), Next::Waiting);
        assert_eq!(schedule.complete(&buffer, held), Completion::Advanced { region: 1, tiles: 4 });
    }

    #[test]
    fn a_claim_held_across_a_reset_claims_nothing_more() {
        let buffer = CommandBuffer::builder().dispatch_batched(4, 1, &nothing).build().unwrap();
        let schedule = TileSchedule::new(2);
        let mut stale = claimed(schedule.claim(&buffer));
        schedule.reset();
        assert_eq!(schedule.claim_more(&mut stale), None, "its epoch is over");
        assert_eq!(stale.reported(), 1);
        assert_eq!(claimed(schedule.claim(&buffer)).tiles(), 0..1, "the new execution is whole");
    }

    #[test]
    fn an_empty_buffer_is_finished_from_the_start() {
        let buffer = CommandBuffer::builder().dispatch(0, &nothing).build().unwrap();
        assert!(buffer.is_empty());
        assert_eq!(TileSchedule::new(1).claim(&buffer), Next::Finished);
    }
}

//! Scan policies: the order in which a worker visits compute slots.
//!
//! A policy is worker-private plain data: it sees the slot count, the array's occupancy
//! generation and the hints this worker gathered while draining (each occupant's priority and
//! wake budget), and calls `visit` on slot indices until one reports work. Tables are rebuilt
//! only when the generation or the hints change, so they are immutable between updates and a
//! scan is a walk over plain memory plus one relaxed load per visited slot.

/// What a worker last saw of a slot's occupant, refreshed whenever it enters the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotHint {
    /// The occupant's priority (higher first); 128 when never seen.
    pub priority: u8,
    /// The occupant's wake budget; 1 when never seen.
    pub budget: u32,
}

impl SlotHint {
    /// The hint for a slot this worker has not entered yet.
    pub const UNSEEN: SlotHint = SlotHint { priority: 128, budget: 1 };
}

/// Chooses the visiting order of one scan revolution.
pub trait ScanPolicy<const SLOTS: usize> {
    /// The policy of worker `worker` out of `workers`.
    fn for_worker(worker: usize, workers: usize) -> Self
    where
        Self: Sized;

    /// Calls `visit` on slot indices, at most one revolution's worth, until it returns `true`;
    /// returns whether one did. `version` changes whenever occupancy or `hints` changed.
    /// `runnable` is the executor's runnable summary: slot `i` can have work only where bit
    /// `i % 64` is set. A policy may skip the other slots (`visit` refuses them anyway).
    fn scan(
        &mut self,
        hints: &[SlotHint; SLOTS],
        version: u64,
        runnable: u64,
        visit: impl FnMut(usize) -> bool,
    ) -> bool;
}

/// Every slot in index order, each worker starting at its own offset and resuming after the
/// slot where it last found work: simple, fair, and free of tables.
#[derive(Clone, Copy, Debug)]
pub struct RoundRobin {
    cursor: usize,
}

impl RoundRobin {
    /// The next scan starts after `index`, where this one found work.
    fn resume_after<const SLOTS: usize>(&mut self, index: usize) {
        self.cursor = if index + 1 == SLOTS { 0 } else { index + 1 };
    }
}

impl<const SLOTS: usize> ScanPolicy<SLOTS> for RoundRobin {
    fn for_worker(worker: usize, workers: usize) -> RoundRobin {
        RoundRobin { cursor: worker * SLOTS / workers.max(1) % SLOTS.max(1) }
    }

    fn scan(
        &mut self,
        _hints: &[SlotHint; SLOTS],
        _version: u64,
        runnable: u64,
        mut visit: impl FnMut(usize) -> bool,
    ) -> bool {
        let start = self.cursor;
        // Bare-metal builds walk the slots instead: the bit walk's 64-bit rotate and count
        // are library calls on a Cortex-M0, and its code weighs on the firmware's flash budget.
        if SLOTS <= 64 && cfg!(not(target_os = "none")) {
            // One summary bit per slot: visit only the marked ones, in the same order (from
            // the cursor, wrapping), with the summary rotated so the cursor's bit is bit 0.
            // Bits at and above SLOTS name no slot (masked off, a constant per SLOTS).
            let slots = u64::MAX.checked_shr(64 - SLOTS as u32).unwrap_or(0);
            let mut marked = (runnable & slots).rotate_right(start as u32);
            while marked != 0 {
                let offset = marked.trailing_zeros() as usize;
                marked &= marked - 1;
                let index = (offset + start) % 64;
                if visit(index) {
                    self.resume_after::<SLOTS>(index);
                    return true;
                }
            }
            return false;
        }
        // Two plain ranges instead of a modulo per step; a bit marks every 64th slot. Bare-metal
        // builds visit every slot (`visit` refuses the unmarked ones): the smallest code.
        for index in (start..SLOTS).chain(0..start) {
            let marked = cfg!(target_os = "none") || runnable >> (index % 64) & 1 != 0;
            if marked && visit(index) {
                self.resume_after::<SLOTS>(index);
                return true;
            }
        }
        false
    }
}

/// Slots ordered by their occupant's priority, highest first (ties in index order), through an
/// indirection table rebuilt when occupancy or hints change.
#[derive(Clone, Copy, Debug)]
pub struct Priority<const SLOTS: usize> {
    order: [u16; SLOTS],
    built_for: Option<u64>,
}

impl<const SLOTS: usize> ScanPolicy<SLOTS> for Priority<SLOTS> {
    fn for_worker(_worker: usize, _workers: usize) -> Priority<SLOTS> {
        Priority { order: [0; SLOTS], built_for: None }
    }

    fn scan(
        &mut self,
        hints: &[SlotHint; SLOTS],
        version: u64,
        _runnable: u64,
        mut visit: impl FnMut(usize) -> bool,
    ) -> bool {
        if self.built_for != Some(version) {
            // Insertion sort (core has no stable sort without `alloc`): equal priorities keep
            // index order, and the table is small and rebuilt rarely.
            let priority = |slot: u16| hints[usize::from(slot)].priority;
            for (slot, hint) in hints.iter().enumerate() {
                let mut at = slot;
                while at > 0 && priority(self.order[at - 1]) < hint.priority {
                    self.order[at] = self.order[at - 1];
                    at -= 1;
                }
                self.order[at] = slot as u16;
            }
            self.built_for = Some(version);
        }
        self.order.iter().any(|&slot| visit(usize::from(slot)))
    }
}

/// Slots visited in proportion to their occupant's wake budget: weight = budget / 2, clamped
/// to 1..=4, so a budget-8 process is visited four times as often as a budget-2 one. The table
/// holds up to four passes; pass `r` lists the slots whose weight exceeds `r`, which spreads
/// the repeats over the revolution instead of bunching them.
#[derive(Clone, Copy, Debug)]
pub struct BudgetWeighted<const SLOTS: usize> {
    table: [[u16; SLOTS]; 4],
    lengths: [usize; 4],
    built_for: Option<u64>,
}

impl<const SLOTS: usize> BudgetWeighted<SLOTS> {
    fn weight(hint: &SlotHint) -> usize {
        (hint.budget / 2).clamp(1, 4) as usize
    }
}

impl<const SLOTS: usize> ScanPolicy<SLOTS> for BudgetWeighted<SLOTS> {
    fn for_worker(_worker: usize, _workers: usize) -> BudgetWeighted<SLOTS> {
        BudgetWeighted { table: [[0; SLOTS]; 4], lengths: [0; 4], built_for: None }
    }

    fn scan(
        &mut self,
        hints: &[SlotHint; SLOTS],
        version: u64,
        _runnable: u64,
        mut visit: impl FnMut(usize) -> bool,
    ) -> bool {
        if self.built_for != Some(version) {
            for (pass, (row, length)) in self.table.iter_mut().zip(&mut self.lengths).enumerate() {
                *length = 0;
                for (slot, hint) in hints.iter().enumerate() {
                    if Self::weight(hint) > pass {
                        row[*length] = slot as u16;
                        *length += 1;
                    }
                }
            }
            self.built_for = Some(version);
        }
        self.table
            .iter()
            .zip(&self.lengths)
            .any(|(row, &length)| row[..length].iter().any(|&slot| visit(usize::from(slot))))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::vec::Vec;

    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;

    use super::*;

    fn order<P: ScanPolicy<8>>(policy: &mut P, hints: &[SlotHint; 8], version: u64) -> Vec<usize> {
        let mut seen = Vec::new();
        policy.scan(hints, version, u64::MAX, |slot| {
            seen.push(slot);
            false
        });
        seen
    }

    fn hinted(priorities_and_budgets: [(u8, u32); 8]) -> [SlotHint; 8] {
        priorities_and_budgets.map(|(priority, budget)| SlotHint { priority, budget })
    }

    #[test]
    fn round_robin_starts_at_the_worker_offset_and_resumes_after_work() {
        let mut policy = <RoundRobin as ScanPolicy<8>>::for_worker(1, 2);
        let hints = [SlotHint::UNSEEN; 8];
        assert_eq!(order(&mut policy, &hints, 0), [4, 5, 6, 7, 0, 1, 2, 3]);
        assert!(policy.scan(&hints, 0, u64::MAX, |slot| slot == 6));
        assert_eq!(order(&mut policy, &hints, 0)[0], 7);
        assert!(policy.scan(&hints, 0, u64::MAX, |slot| slot == 7));
        assert_eq!(order(&mut policy, &hints, 0)[0], 0, "wraps past the last slot");
    }

    #[test]
    fn priority_visits_high_priorities_first_and_keeps_ties_in_index_order() {
        let mut policy = <Priority<8> as ScanPolicy<8>>::for_worker(0, 1);
        let hints =
            hinted([(1, 1), (200, 1), (128, 1), (200, 1), (0, 1), (128, 1), (128, 1), (9, 1)]);
        assert_eq!(order(&mut policy, &hints, 1), [1, 3, 2, 5, 6, 7, 0, 4]);
        let changed =
            hinted([(255, 1), (200, 1), (128, 1), (200, 1), (0, 1), (128, 1), (128, 1), (9, 1)]);
        assert_eq!(order(&mut policy, &changed, 1), [1, 3, 2, 5, 6, 7, 0, 4], "same version");
        assert_eq!(order(&mut policy, &changed, 2)[0], 0, "a new version rebuilds the table");
    }

    #[test]
    fn budget_weighted_visits_in_proportion_to_budget() {
        let mut policy = <BudgetWeighted<8> as ScanPolicy<8>>::for_worker(0, 1);
        let hints = hinted([(0, 8), (0, 2), (0, 1), (0, 4), (0, 1), (0, 1), (0, 1), (0, 100)]);
        let visits = order(&mut policy, &hints, 1);
        let count = |slot| visits.iter().filter(|&&s| s == slot).count();
        assert_eq!(count(0), 4);
        assert_eq!(count(1), 1);
        assert_eq!(count(3), 2);
        assert_eq!(count(7), 4, "weights are clamped");
        assert_eq!(visits.len(), 4 + 1 + 1 + 2 + 1 + 1 + 1 + 4);
        assert_eq!(&visits[..8], [0, 1, 2, 3, 4, 5, 6, 7], "the first pass covers every slot");
    }

    /// Round robin over the marked slots, as the plain model has it: every slot from the
    /// cursor on, wrapping, skipping those whose summary bit is clear; the cursor moves past
    /// the slot where work was found.
    fn round_robin_model<const SLOTS: usize>(
        cursor: &mut usize,
        runnable: u64,
        work: &[bool; SLOTS],
    ) -> (Vec<usize>, bool) {
        let mut visited = Vec::new();
        for index in (*cursor..SLOTS).chain(0..*cursor) {
            if runnable & (1 << (index % 64)) == 0 {
                continue;
            }
            visited.push(index);
            if work[index] {
                *cursor = (index + 1) % SLOTS;
                return (visited, true);
            }
        }
        (visited, false)
    }

    fn round_robin_matches_the_model<const SLOTS: usize>(
        worker: usize,
        rounds: &[(u64, u64)],
    ) -> Result<(), TestCaseError> {
        let mut policy = <RoundRobin as ScanPolicy<SLOTS>>::for_worker(worker % 4, 4);
        let mut cursor = policy.cursor;
        for &(runnable, with_work) in rounds {
            let work: [bool; SLOTS] =
                core::array::from_fn(|slot| with_work >> (slot % 64) & 1 != 0);
            let (expected, expected_found) = round_robin_model(&mut cursor, runnable, &work);
            let mut visited = Vec::new();
            let found = policy.scan(&[SlotHint::UNSEEN; SLOTS], 0, runnable, |slot| {
                visited.push(slot);
                work[slot]
            });
            prop_assert_eq!(&visited, &expected);
            prop_assert_eq!(found, expected_found);
            prop_assert_eq!(policy.cursor, cursor);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config())]
        #[test]
        fn round_robin_visits_exactly_the_marked_slots_in_order(
            worker in 0usize..4,
            rounds in proptest::collection::vec((any::<u64>(), any::<u64>()), 1..20),
        ) {
            round_robin_matches_the_model::<8>(worker, &rounds)?;
            round_robin_matches_the_model::<64>(worker, &rounds)?;
            round_robin_matches_the_model::<100>(worker, &rounds)?;
        }
    }

    #[test]
    fn a_scan_stops_at_the_first_slot_with_work() {
        let mut policy = <RoundRobin as ScanPolicy<8>>::for_worker(0, 1);
        let mut visited = 0;
        assert!(policy.scan(&[SlotHint::UNSEEN; 8], 0, u64::MAX, |slot| {
            visited += 1;
            slot == 2
        }));
        assert_eq!(visited, 3);
    }
}

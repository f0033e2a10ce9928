//! The emulation's bookkeeping against simple models, on every machine (no CUDA needed):
//! events are recorded again only after their operation completed and every waiter unpinned
//! them; waits plan exactly the event of the operation they name, or nothing once it completed;
//! the pool grows only when no event is free; timeline words are never handed out while in use
//! or draining, and a full buffer is backpressure.

use std::collections::{BTreeMap, BTreeSet};

use causeway_driver_cuda::{
    EventError, EventSlot, EventTable, TimelineWords, WaitPlan, WordError, WordIndex,
};
use proptest::prelude::*;

const QUEUES: usize = 3;

#[derive(Clone, Debug)]
enum EventStep {
    /// Issue the next operation of a queue to the device (records an event).
    Issue(usize),
    /// Retire the next operation of a queue on the host (no event), when the queue is idle.
    RetireOnHost(usize),
    /// Plan a wait on an issued operation of a queue, picked by this fraction of its epochs.
    Wait(usize, u8),
    /// The device completed a queue's operations up to a fraction of the way to the last.
    Complete(usize, u8),
    /// A waiter enqueued its wait: unpin the pin picked by this index.
    Unpin(u8),
}

fn event_step() -> impl Strategy<Value = EventStep> {
    prop_oneof![
        3 => (0..QUEUES).prop_map(EventStep::Issue),
        1 => (0..QUEUES).prop_map(EventStep::RetireOnHost),
        3 => ((0..QUEUES), any::<u8>()).prop_map(|(q, at)| EventStep::Wait(q, at)),
        2 => ((0..QUEUES), any::<u8>()).prop_map(|(q, at)| EventStep::Complete(q, at)),
        2 => any::<u8>().prop_map(EventStep::Unpin),
    ]
}

/// The model: which operation each event stands for, which are completed, who holds pins.
#[derive(Default)]
struct Model {
    /// Next epoch per queue.
    next: [u64; QUEUES],
    completed: [u64; QUEUES],
    /// Event (by its id) → the operation it was recorded for, while that one is not completed.
    recorded: BTreeMap<u32, (usize, u64)>,
    /// Events of completed operations still pinned.
    draining: BTreeSet<u32>,
    /// Outstanding pins: (slot, event id).
    pins: Vec<(EventSlot, u32)>,
    /// Events created so far (their ids are 0..created).
    created: u32,
}

impl Model {
    fn pinned(&self, event: u32) -> bool {
        self.pins.iter().any(|(_, pinned)| *pinned == event)
    }

    fn live(&self) -> usize {
        self.recorded.len() + self.draining.len()
    }
}

fn pick(at: u8, range: std::ops::RangeInclusive<u64>) -> u64 {
    let (low, high) = (*range.start(), *range.end());
    low + (u64::from(at) * (high - low + 1)) / 256
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn events_match_the_model(steps in prop::collection::vec(event_step(), 1..200)) {
        let mut table: EventTable<u32> = EventTable::new(QUEUES);
        let mut model = Model::default();
        for step in steps {
            match step {
                EventStep::Issue(queue) => {
                    let (slot, event) = match table.take_free() {
                        Some(free) => free,
                        None => {
                            prop_assert_eq!(
                                table.events(), model.live(),
                                "a new event only when none is free"
                            );
                            let id = model.created;
                            model.created += 1;
                            (table.add(id).unwrap(), id)
                        }
                    };
                    prop_assert!(!model.recorded.contains_key(&event), "recorded twice: {}", event);
                    prop_assert!(!model.draining.contains(&event), "draining event reused");
                    prop_assert!(!model.pinned(event), "pinned event reused");
                    model.next[queue] += 1;
                    let epoch = model.next[queue];
                    table.record(queue, epoch, slot).unwrap();
                    model.recorded.insert(event, (queue, epoch));
                }
                EventStep::RetireOnHost(queue) => {
                    // The layer retires on the host only when nothing of the queue is in flight.
                    if model.completed[queue] == model.next[queue] {
                        model.next[queue] += 1;
                        let epoch = model.next[queue];
                        prop_assert_eq!(table.complete(queue, epoch), Ok(0));
                        model.completed[queue] = epoch;
                    }
                }
                EventStep::Wait(queue, at) => {
                    if model.next[queue] == 0 {
                        prop_assert_eq!(table.wait(queue, 1), Ok(WaitPlan::Unrecorded));
                        continue;
                    }
                    let epoch = pick(at, 1..=model.next[queue]);
                    match table.wait(queue, epoch).unwrap() {
                        WaitPlan::Satisfied => {
                            prop_assert!(epoch <= model.completed[queue]);
                        }
                        WaitPlan::Event { slot, event } => {
                            prop_assert!(epoch > model.completed[queue]);
                            // Every device-issued epoch recorded its own event; a host-retired
                            // one is completed, so the event is exactly that operation's.
                            prop_assert_eq!(model.recorded.get(&event), Some(&(queue, epoch)));
                            model.pins.push((slot, event));
                        }
                        WaitPlan::Unrecorded => {
                            prop_assert!(false, "an issued operation is recorded or completed");
                        }
                    }
                }
                EventStep::Complete(queue, at) => {
                    let epoch = pick(at, model.completed[queue]..=model.next[queue]);
                    let done: Vec<u32> = model
                        .recorded
                        .iter()
                        .filter(|(_, (q, e))| *q == queue && *e <= epoch)
                        .map(|(event, _)| *event)
                        .collect();
                    let mut freed = 0;
                    for event in done {
                        model.recorded.remove(&event);
                        if model.pinned(event) {
                            model.draining.insert(event);
                        } else {
                            freed += 1;
                        }
                    }
                    prop_assert_eq!(table.complete(queue, epoch), Ok(freed));
                    model.completed[queue] = model.completed[queue].max(epoch);
                }
                EventStep::Unpin(at) => {
                    if model.pins.is_empty() {
                        continue;
                    }
                    let (slot, event) = model.pins.swap_remove(usize::from(at) % model.pins.len());
                    table.unpin(slot).unwrap();
                    if !model.pinned(event) {
                        model.draining.remove(&event);
                    }
                }
            }
            prop_assert_eq!(table.events(), model.created as usize);
            prop_assert_eq!(table.free_events(), model.created as usize - model.live());
            for queue in 0..QUEUES {
                prop_assert_eq!(table.completed(queue), Some(model.completed[queue]));
            }
        }
    }

    #[test]
    fn words_are_never_handed_out_in_use_or_draining(
        capacity in 1u32..16,
        steps in prop::collection::vec((0u8..3, any::<u8>()), 1..300),
    ) {
        let mut words = TimelineWords::new(capacity);
        let (mut in_use, mut draining) = (BTreeSet::new(), BTreeSet::new());
        for (kind, at) in steps {
            match kind {
                0 => match words.allocate() {
                    Ok(word) => {
                        prop_assert!(word.0 < capacity);
                        prop_assert!(!in_use.contains(&word) && !draining.contains(&word));
                        in_use.insert(word);
                    }
                    Err(error) => {
                        prop_assert_eq!(error, WordError::Full);
                        prop_assert_eq!(in_use.len() + draining.len(), capacity as usize);
                    }
                },
                1 => {
                    let word = WordIndex(u32::from(at) % capacity);
                    let given = words.give_back(word);
                    if in_use.remove(&word) {
                        prop_assert_eq!(given, Ok(()));
                        draining.insert(word);
                    } else {
                        prop_assert_eq!(given, Err(WordError::State(word)));
                    }
                }
                _ => {
                    let word = WordIndex(u32::from(at) % capacity);
                    let drained = words.drained(word);
                    if draining.remove(&word) {
                        prop_assert_eq!(drained, Ok(()));
                    } else {
                        prop_assert_eq!(drained, Err(WordError::State(word)));
                    }
                }
            }
            prop_assert_eq!(words.free(), capacity as usize - in_use.len() - draining.len());
            for word in 0..capacity {
                prop_assert_eq!(words.in_use(WordIndex(word)), in_use.contains(&WordIndex(word)));
            }
        }
    }
}

#[test]
fn a_recorded_epoch_must_grow_and_a_slot_must_be_free() {
    let mut table: EventTable<u32> = EventTable::new(1);
    let first = table.add(10).unwrap();
    let second = table.add(11).unwrap();
    table.record(0, 1, first).unwrap();
    assert_eq!(table.record(0, 2, first), Err(EventError::SlotState(first)));
    assert_eq!(table.record(0, 1, second), Err(EventError::EpochNotAfter { queue: 0, epoch: 1 }));
    assert_eq!(table.record(1, 2, second), Err(EventError::UnknownQueue(1)));
    assert_eq!(table.unpin(second), Err(EventError::SlotState(second)));
    assert_eq!(table.wait(0, 2), Ok(WaitPlan::Unrecorded));
}

#[test]
fn a_wait_on_an_epoch_before_a_later_record_waits_on_the_later_event() {
    // Epoch 1 retired on the host is completed; epoch 2 recorded: a wait on 2 takes its event.
    // A wait on an epoch between records (none here, by the layer's rules) takes the next one.
    let mut table: EventTable<u32> = EventTable::new(1);
    assert_eq!(table.complete(0, 1), Ok(0));
    let slot = table.add(7).unwrap();
    table.record(0, 3, slot).unwrap();
    assert_eq!(table.wait(0, 1), Ok(WaitPlan::Satisfied));
    assert_eq!(table.wait(0, 2), Ok(WaitPlan::Event { slot, event: 7 }));
    table.unpin(slot).unwrap();
}

/// A chain of 10^5 operations on two queues, each waiting on the other's last: the pool stays
/// as small as the operations in flight, and every step costs the same.
#[test]
fn a_chain_of_a_hundred_thousand_operations_keeps_the_pool_at_the_window() {
    const OPERATIONS: u64 = 100_000;
    const IN_FLIGHT: u64 = 8;
    let mut table: EventTable<u32> = EventTable::new(2);
    let mut next_event = 0;
    for operation in 1..=OPERATIONS {
        let queue = (operation % 2) as usize;
        let epoch = operation.div_ceil(2);
        let other = 1 - queue;
        let other_epoch = (operation - 1) / 2;
        if other_epoch > 0 {
            match table.wait(other, other_epoch).unwrap() {
                WaitPlan::Event { slot, .. } => table.unpin(slot).unwrap(),
                WaitPlan::Satisfied => {}
                WaitPlan::Unrecorded => panic!("operation {operation}: origin unrecorded"),
            }
        }
        let (slot, _) = table.take_free().unwrap_or_else(|| {
            next_event += 1;
            let slot = table.add(next_event).unwrap();
            (slot, next_event)
        });
        table.record(queue, epoch, slot).unwrap();
        // The device completes what is more than the window behind.
        if operation > IN_FLIGHT {
            let done = operation - IN_FLIGHT;
            table.complete((done % 2) as usize, done.div_ceil(2)).unwrap();
        }
    }
    assert!(table.events() as u64 <= IN_FLIGHT + 1, "{} events", table.events());
    assert_eq!(table.completed(0), Some((OPERATIONS - IN_FLIGHT) / 2));
}

//! The event emulation's bookkeeping: which event stands for which operation, which events are
//! free, and when one may be recorded again. Plain data, generic over the event handle, so it
//! is tested on every machine ([`CudaBackend`](crate::CudaBackend) keeps one behind a lock and
//! makes the CUDA calls it plans).
//!
//! # Rules
//!
//! - **Record.** An operation `(queue, epoch)` issued to the device records an event on its
//!   stream right after its work. A queue's recorded epochs only grow.
//! - **Wait.** A device wait on `(queue, epoch)` is *satisfied* (no CUDA call) when the queue
//!   has completed `epoch`; otherwise it waits on the event of the oldest recorded operation at
//!   or after `epoch` (the stream runs in order, so that one ending means `epoch` ended). The
//!   event is **pinned** while the waiter enqueues its `cuStreamWaitEvent`, outside the table's
//!   lock, and unpinned after.
//! - **Unrecorded.** A wait on an operation that is neither completed nor recorded cannot be
//!   issued: the device layer holds such waits until their operation is issued (its held-wait
//!   logic; the driver does not keep a second copy), so [`EventTable::wait`] reports it rather
//!   than guess.
//! - **Recycle.** An event goes back to the pool only when its operation completed *and* no
//!   waiter holds a pin on it: re-recording an event a waiter has not yet consumed would make
//!   that waiter wait for the wrong operation.

use std::collections::VecDeque;
use std::fmt;

/// An event of the table, by index (stable for the table's life).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventSlot(pub u32);

/// What a device wait on an operation comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitPlan<E> {
    /// The operation completed: no CUDA call.
    Satisfied,
    /// Wait on this event (`cuStreamWaitEvent`), then [`EventTable::unpin`] the slot.
    Event {
        /// The pinned slot.
        slot: EventSlot,
        /// Its event.
        event: E,
    },
    /// Neither completed nor recorded: the layer should have held the wait.
    Unrecorded,
}

/// Why the table refused a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventError {
    /// The queue index is outside the table's queues.
    UnknownQueue(usize),
    /// An epoch at or below one already recorded or completed on its queue.
    EpochNotAfter {
        /// The queue.
        queue: usize,
        /// The epoch refused.
        epoch: u64,
    },
    /// A slot that is not free was recorded, or a slot without pins was unpinned.
    SlotState(EventSlot),
    /// More events than a 32-bit slot index names.
    TooManyEvents,
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::UnknownQueue(queue) => write!(f, "queue {queue} has no event timeline"),
            EventError::EpochNotAfter { queue, epoch } => {
                write!(f, "epoch {epoch} of queue {queue} is not after its last one")
            }
            EventError::SlotState(slot) => write!(f, "event slot {} is not in that state", slot.0),
            EventError::TooManyEvents => f.write_str("too many events"),
        }
    }
}

impl std::error::Error for EventError {}

/// Where an event of the pool stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    /// In the pool: may be recorded.
    Free,
    /// Recorded for an operation that has not completed.
    Recorded,
    /// Its operation completed, but waiters still hold pins: freed at the last unpin.
    Draining,
}

#[derive(Debug)]
struct Slot<E> {
    event: E,
    state: SlotState,
    pins: u32,
}

#[derive(Debug, Default)]
struct QueueEvents {
    /// Recorded, not completed operations: `(epoch, slot)`, epochs increasing.
    recorded: VecDeque<(u64, EventSlot)>,
    /// Every epoch up to this one completed.
    completed: u64,
    /// The last epoch recorded or completed.
    last: u64,
}

/// The value → event map, the event pool and its recycling (see the [module docs](self)).
#[derive(Debug)]
pub struct EventTable<E> {
    queues: Vec<QueueEvents>,
    slots: Vec<Slot<E>>,
    free: Vec<EventSlot>,
}

impl<E: Copy> EventTable<E> {
    /// A table for `queues` queues (indices `0..queues`), with no events yet.
    pub fn new(queues: usize) -> EventTable<E> {
        EventTable {
            queues: (0..queues).map(|_| QueueEvents::default()).collect(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Queues of the table.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Events the table owns, free or not.
    pub fn events(&self) -> usize {
        self.slots.len()
    }

    /// Free events in the pool.
    pub fn free_events(&self) -> usize {
        self.free.len()
    }

    /// Every event the table owns (to destroy them at the end).
    pub fn all_events(&self) -> impl Iterator<Item = E> + '_ {
        self.slots.iter().map(|slot| slot.event)
    }

    /// A free event to record, if the pool has one (otherwise create one and
    /// [`add`](Self::add) it).
    pub fn take_free(&mut self) -> Option<(EventSlot, E)> {
        let slot = *self.free.last()?;
        Some((slot, self.slots[slot.0 as usize].event))
    }

    /// Adds a newly created event to the pool; returns its slot.
    pub fn add(&mut self, event: E) -> Result<EventSlot, EventError> {
        let slot =
            EventSlot(u32::try_from(self.slots.len()).map_err(|_| EventError::TooManyEvents)?);
        self.slots.push(Slot { event, state: SlotState::Free, pins: 0 });
        self.free.push(slot);
        Ok(slot)
    }

    /// `slot` (free) was recorded on `queue`'s stream after operation `epoch`.
    pub fn record(&mut self, queue: usize, epoch: u64, slot: EventSlot) -> Result<(), EventError> {
        let events = self.queues.get_mut(queue).ok_or(EventError::UnknownQueue(queue))?;
        if epoch <= events.last {
            return Err(EventError::EpochNotAfter { queue, epoch });
        }
        let state = self.slots.get_mut(slot.0 as usize).ok_or(EventError::SlotState(slot))?;
        if state.state != SlotState::Free {
            return Err(EventError::SlotState(slot));
        }
        let Some(position) = self.free.iter().rposition(|free| *free == slot) else {
            return Err(EventError::SlotState(slot));
        };
        self.free.swap_remove(position);
        state.state = SlotState::Recorded;
        events.recorded.push_back((epoch, slot));
        events.last = epoch;
        Ok(())
    }

    /// Plans a device wait for operation `epoch` of `queue`; an [`Event`](WaitPlan::Event)
    /// comes pinned.
    pub fn wait(&mut self, queue: usize, epoch: u64) -> Result<WaitPlan<E>, EventError> {
        let events = self.queues.get(queue).ok_or(EventError::UnknownQueue(queue))?;
        if epoch <= events.completed {
            return Ok(WaitPlan::Satisfied);
        }
        let at = events.recorded.partition_point(|(recorded, _)| *recorded < epoch);
        let Some(&(_, slot)) = events.recorded.get(at) else {
            return Ok(WaitPlan::Unrecorded);
        };
        let state = &mut self.slots[slot.0 as usize];
        state.pins += 1;
        Ok(WaitPlan::Event { slot, event: state.event })
    }

    /// A waiter has enqueued its wait on `slot`.
    pub fn unpin(&mut self, slot: EventSlot) -> Result<(), EventError> {
        let state = self.slots.get_mut(slot.0 as usize).ok_or(EventError::SlotState(slot))?;
        if state.pins == 0 {
            return Err(EventError::SlotState(slot));
        }
        state.pins -= 1;
        if state.pins == 0 && state.state == SlotState::Draining {
            state.state = SlotState::Free;
            self.free.push(slot);
        }
        Ok(())
    }

    /// Every operation of `queue` up to `epoch` completed (on the device, or on the host for
    /// work that never reached it): their events go back to the pool, or drain until their
    /// last pin. Returns how many went straight back.
    pub fn complete(&mut self, queue: usize, epoch: u64) -> Result<usize, EventError> {
        let events = self.queues.get_mut(queue).ok_or(EventError::UnknownQueue(queue))?;
        events.completed = events.completed.max(epoch);
        events.last = events.last.max(epoch);
        let mut freed = 0;
        while let Some(&(recorded, slot)) = events.recorded.front() {
            if recorded > epoch {
                break;
            }
            events.recorded.pop_front();
            let state = &mut self.slots[slot.0 as usize];
            if state.pins == 0 {
                state.state = SlotState::Free;
                self.free.push(slot);
                freed += 1;
            } else {
                state.state = SlotState::Draining;
            }
        }
        Ok(freed)
    }

    /// The last completed epoch of `queue`.
    pub fn completed(&self, queue: usize) -> Option<u64> {
        self.queues.get(queue).map(|events| events.completed)
    }
}

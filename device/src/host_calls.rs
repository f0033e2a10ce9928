//! The device's host functions: a table of fixed capacity, filled before the device is built
//! and while it runs, read without a lock by submission and by the queue processes.
//!
//! The builder's functions sit in a plain slice; those registered later in slots set at most
//! once and never cleared. Either way a [`HostCallId`] names the same function for the
//! device's whole life. Registering takes the next free index with a compare-exchange
//! and then sets the slot; a slot whose index was taken but which is not set yet reads as
//! absent, and a submission naming it is refused as an unknown host function — the caller has
//! not been handed that id yet, so no correct program submits it.
//!
//! Ordering: the slot is a `OnceLock`, whose set releases and whose get acquires; a submission
//! that read the slot set publishes the operation through its ring (Release on the tail, which
//! the queue process acquires), so the queue process reads the slot set as well.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use causeway_core::semaphore::Failure;

use crate::ids::HostCallId;
use crate::op::Invocation;
#[cfg(doc)]
use crate::Work;

/// A host function a [`Work::Host`] operation calls, with the operation's tag and arguments.
pub type HostCall = Box<dyn Fn(&Invocation) -> Result<(), Failure> + Send + Sync>;

/// Host functions a device takes beyond those its builder registered, unless the builder says
/// otherwise ([`DeviceBuilder::spare_host_calls`](crate::DeviceBuilder::spare_host_calls)).
pub const DEFAULT_SPARE_HOST_CALLS: usize = 64;

pub(crate) struct HostCallTable {
    /// The builder's functions (ids `0..built.len()`), fixed for the device's life: looked up
    /// with a bounds check alone, on the path from a signal to a dependent host function.
    built: Box<[HostCall]>,
    /// Those registered while the device runs (ids from `built.len()` on).
    later: Box<[OnceLock<HostCall>]>,
    /// Indices of `later` handed out so far (at most its length).
    taken: AtomicU32,
}

impl HostCallTable {
    /// A table holding `registered` (ids `0..`) with room for `spare` more.
    pub(crate) fn new(registered: Vec<HostCall>, spare: usize) -> HostCallTable {
        HostCallTable {
            built: registered.into_boxed_slice(),
            later: std::iter::repeat_with(OnceLock::new).take(spare).collect(),
            taken: AtomicU32::new(0),
        }
    }

    /// Registers `call` in the next free slot; hands it back when the table is full.
    pub(crate) fn register(&self, call: HostCall) -> Result<HostCallId, HostCall> {
        let spare = u32::try_from(self.later.len()).unwrap_or(u32::MAX);
        // Relaxed: the index only has to be unique; the slot's own set publishes the function.
        let taken = self.taken.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |taken| {
            (taken < spare).then_some(taken + 1)
        });
        let Ok(index) = taken else { return Err(call) };
        let Ok(id) = u32::try_from(self.built.len() + index as usize) else { return Err(call) };
        match self.later[index as usize].set(call) {
            Ok(()) => Ok(HostCallId(id)),
            // Each index is taken once, so its slot is empty.
            Err(call) => Err(call),
        }
    }

    /// The function `id` names, once registered.
    pub(crate) fn get(&self, id: HostCallId) -> Option<&HostCall> {
        let index = id.0 as usize;
        match self.built.get(index) {
            Some(call) => Some(call),
            None => self.later.get(index - self.built.len()).and_then(OnceLock::get),
        }
    }

    /// Registered functions.
    pub(crate) fn len(&self) -> usize {
        self.built.len() + self.later.iter().filter(|slot| slot.get().is_some()).count()
    }

    /// How many the table holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.built.len() + self.later.len()
    }
}

impl fmt::Debug for HostCallTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostCallTable")
            .field("registered", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

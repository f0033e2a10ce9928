//! The process lists: the immediate list of runnable budget-1 processes, and the overflow list
//! of compute processes waiting for a free slot.
//!
//! # Protocol
//!
//! Producers (any thread activating or waking a process) push onto an intrusive *inbox*
//! stack with one compare-exchange. Consumers (workers) take turns under a try-lock: the
//! holder pops from a private *ready* run, and when that is empty takes the whole inbox with one
//! swap and reverses it, so processes come out in push order. Taking the whole inbox instead of
//! popping single nodes is what makes the list immune to ABA: no consumer ever compare-exchanges
//! a head it read a `next` pointer from.
//!
//! ```text
//!   push ──CAS──► inbox (LIFO) ──swap(null) + reverse──► ready (FIFO) ──pop──► worker
//!                                 └──── only under the `consuming` try-lock ────┘
//! ```
//!
//! Invariants: a process is linked into at most one list at a time (its lifecycle state says
//! who may push it, see `process`); only the try-lock holder reads or writes `ready` and the
//! links of taken nodes; an empty check is two relaxed loads and is only a hint, because a
//! producer always wakes a worker after pushing.

use core::ptr;

use super::process::Process;
use crate::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

pub(crate) struct ProcessList<'p> {
    inbox: AtomicPtr<Process<'p>>,
    ready: AtomicPtr<Process<'p>>,
    consuming: AtomicBool,
}

impl<'p> ProcessList<'p> {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> ProcessList<'p> {
        ProcessList {
            inbox: AtomicPtr::new(ptr::null_mut()),
            ready: AtomicPtr::new(ptr::null_mut()),
            consuming: AtomicBool::new(false),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> ProcessList<'p> {
        ProcessList {
            inbox: AtomicPtr::new(ptr::null_mut()),
            ready: AtomicPtr::new(ptr::null_mut()),
            consuming: AtomicBool::new(false),
        }
    }

    /// Appends `process`, which must not be linked into any list.
    pub(crate) fn push(&self, process: &'p Process<'p>) {
        let node = ptr::from_ref(process).cast_mut();
        let mut head = self.inbox.load(Ordering::Relaxed);
        loop {
            process.link().store(head, Ordering::Relaxed);
            // Release: pairs with the Acquire swap in `pop`, so the consumer sees the link just
            // written and everything the pusher did to the process before queueing it.
            match self.inbox.compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Whether the list looked empty: a hint (see the module docs).
    pub(crate) fn looks_empty(&self) -> bool {
        self.inbox.load(Ordering::Relaxed).is_null() && self.ready.load(Ordering::Relaxed).is_null()
    }

    /// Takes the oldest process, or `None` when the list is empty or another worker is popping.
    pub(crate) fn pop(&self) -> Option<&'p Process<'p>> {
        if self.looks_empty() {
            return None;
        }
        // Acquire pairs with the Release store that ends the previous holder's turn: its
        // updates to `ready` and the links are visible to this turn.
        if self.consuming.swap(true, Ordering::Acquire) {
            return None;
        }
        let mut front = self.ready.load(Ordering::Relaxed);
        if front.is_null() {
            // Acquire pairs with each push's Release compare-exchange (all in the release
            // sequence of the head read here).
            let mut taken = self.inbox.swap(ptr::null_mut(), Ordering::Acquire);
            while !taken.is_null() {
                // SAFETY: non-null inbox nodes come from `push`, which stores `&'p Process`
                // references; `'p` outlives the list, and this turn owns the taken nodes.
                let process = unsafe { &*taken };
                let next = process.link().load(Ordering::Relaxed);
                process.link().store(front, Ordering::Relaxed);
                front = taken;
                taken = next;
            }
        }
        let popped = if front.is_null() {
            None
        } else {
            // SAFETY: as above, `front` is a node pushed as a `&'p Process`, owned by this turn.
            let process = unsafe { &*front };
            self.ready.store(process.link().load(Ordering::Relaxed), Ordering::Relaxed);
            process.link().store(ptr::null_mut(), Ordering::Relaxed);
            Some(process)
        };
        // Release: pairs with the Acquire swap that starts the next turn.
        self.consuming.store(false, Ordering::Release);
        popped
    }
}

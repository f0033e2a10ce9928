//! The process lists: the immediate list of runnable budget-1 processes, and the overflow list
//! of compute processes waiting for a free slot.
//!
//! # Protocol
//!
//! Producers (any thread activating or waking a process) push onto an intrusive *inbox*
//! stack with one compare-exchange. Consumers (workers) take turns under a try-lock: the
//! holder takes from the front of the shared *ready* run, and when that is empty takes the
//! whole inbox with one swap and reverses it, so processes come out in push order. Taking the
//! whole inbox instead of popping single nodes is what makes the list immune to ABA: no
//! consumer ever compare-exchanges a head it read a `next` pointer from.
//!
//! A turn takes a *run* — the oldest processes, still linked — rather than one process: its
//! fair share of the backlog, `len / sharers` (the caller says how many workers share the
//! list), at least one and at most [`MAX_RUN`]. The worker then pops the run privately, with no
//! lock and no shared line. With the usual zero to two queued processes a run is one process,
//! exactly as a single pop; under a burst, the try-lock and the ready line change hands once
//! per run instead of once per process (two workers popping one at a time were slower than
//! one), and no worker takes more than its share, so the others are never left idle beside a
//! hoard.
//!
//! ```text
//!   push ──CAS──► inbox (LIFO) ──swap(null) + reverse──► ready (FIFO) ──cut a run──► worker
//!                                 └──────── only under the `consuming` try-lock ───────┘
//! ```
//!
//! Invariants: a process is linked into at most one list or run at a time (its lifecycle state
//! says who may push it, see `process`); only the try-lock holder reads or writes `ready`,
//! `ready_len` and the links of taken nodes, and a run's links belong to the worker that cut
//! it; processes leave in push order (runs are cut from the front); an empty check is two
//! relaxed loads and is only a hint, because a producer always wakes a worker after pushing.

use core::ptr;

use super::process::Process;
use crate::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// The most processes one turn takes: enough to make the try-lock's cost per process small,
/// few enough that a run of short processes stays short.
const MAX_RUN: usize = 16;

pub(crate) struct ProcessList<'p> {
    inbox: AtomicPtr<Process<'p>>,
    ready: AtomicPtr<Process<'p>>,
    /// Processes in `ready`; only the try-lock holder touches it (Relaxed, ordered by the lock).
    ready_len: AtomicUsize,
    consuming: AtomicBool,
}

/// Processes taken from a list by one worker, oldest first, linked through their links.
pub(crate) struct Run<'p> {
    front: Option<&'p Process<'p>>,
}

impl<'p> Run<'p> {
    pub(crate) const EMPTY: Run<'p> = Run { front: None };

    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn is_empty(&self) -> bool {
        self.front.is_none()
    }

    /// Takes the oldest process of the run.
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn pop(&mut self) -> Option<&'p Process<'p>> {
        let process = self.front?;
        let next = process.link().load(Ordering::Relaxed);
        process.link().store(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the run's links were written by pushes (as `&'p Process` references) and by
        // the turn that cut the run, on this thread or visible to it through the try-lock's
        // Acquire; nobody else reaches these nodes until they are popped.
        self.front = unsafe { next.as_ref() };
        Some(process)
    }
}

impl<'p> ProcessList<'p> {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> ProcessList<'p> {
        ProcessList {
            inbox: AtomicPtr::new(ptr::null_mut()),
            ready: AtomicPtr::new(ptr::null_mut()),
            ready_len: AtomicUsize::new(0),
            consuming: AtomicBool::new(false),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> ProcessList<'p> {
        ProcessList {
            inbox: AtomicPtr::new(ptr::null_mut()),
            ready: AtomicPtr::new(ptr::null_mut()),
            ready_len: AtomicUsize::new(0),
            consuming: AtomicBool::new(false),
        }
    }

    /// Appends `process`, which must not be linked into any list.
    #[cfg_attr(not(target_os = "none"), inline)]
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
    #[cfg_attr(not(target_os = "none"), inline)]
    pub(crate) fn looks_empty(&self) -> bool {
        self.inbox.load(Ordering::Relaxed).is_null() && self.ready.load(Ordering::Relaxed).is_null()
    }

    /// Takes the oldest process alone, or `None` when the list is empty or another worker is
    /// taking (the overflow list: each process needs a slot of its own).
    pub(crate) fn pop(&self) -> Option<&'p Process<'p>> {
        self.take(1, 1).pop()
    }

    /// Takes the oldest processes, as many as a fair share among `sharers` workers (see the
    /// module docs); an empty run when the list is empty or another worker is taking.
    pub(crate) fn pop_run(&self, sharers: usize) -> Run<'p> {
        self.take(sharers, MAX_RUN)
    }

    /// One turn: cuts `len / sharers` processes, clamped to `1..=max`, from the front.
    fn take(&self, sharers: usize, max: usize) -> Run<'p> {
        if self.looks_empty() {
            return Run::EMPTY;
        }
        // Acquire pairs with the Release store that ends the previous holder's turn: its
        // updates to `ready`, `ready_len` and the links are visible to this turn. A
        // compare-exchange rather than a swap: a failed attempt writes nothing (and loom 0.7
        // mis-orders a swap racing the holder's release store, tokio-rs/loom#254).
        if self
            .consuming
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Run::EMPTY;
        }
        let mut front = self.ready.load(Ordering::Relaxed);
        let mut len = self.ready_len.load(Ordering::Relaxed);
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
                len += 1;
            }
        }
        // SAFETY: as above, `front` is null or a node pushed as a `&'p Process`, owned by this
        // turn.
        let run = Run { front: unsafe { front.as_ref() } };
        if let Some(first) = run.front {
            let share = (len / sharers.max(1)).clamp(1, max);
            let mut last = first;
            for _ in 1..share {
                // SAFETY: `len` counts the nodes linked from `front`, so `share ≤ len` nodes are
                // there to walk, each pushed as a `&'p Process` and owned by this turn.
                last = unsafe { &*last.link().load(Ordering::Relaxed) };
            }
            self.ready.store(last.link().load(Ordering::Relaxed), Ordering::Relaxed);
            self.ready_len.store(len - share, Ordering::Relaxed);
            last.link().store(ptr::null_mut(), Ordering::Relaxed);
        }
        // Release: pairs with the Acquire compare-exchange that starts the next turn.
        self.consuming.store(false, Ordering::Release);
        run
    }
}

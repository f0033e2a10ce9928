//! [`Watcher`]: the one completion-watcher thread of a [`Gpu`], which turns timeline values
//! reached on the device into calls of a completion callback.
//!
//! # Protocol
//!
//! Under one mutex the watcher keeps, for each VkQueue, the submissions made through
//! [`Watcher::submit`] that it has not yet seen complete, in the VkQueue's submission order
//! (the **in-flight** lists: each entry the timeline the submission signals and the value), and
//! a bounded list of **registrations** `(timeline, value, token)`.
//!
//! - [`Watcher::submit`] submits, and with the VkQueue's lock still held (so the list keeps the
//!   VkQueue's order) appends the submission to that VkQueue's list. If the list was empty, the
//!   thread is not waiting on it: it notifies the condition variable (the thread may be idle),
//!   and, on a device with several VkQueues, signals the **wake** timeline (the thread may be
//!   in a wait on the other VkQueues only).
//! - The thread, in a loop: under the mutex, sleeps on the condition variable while nothing is
//!   in flight (an idle watcher makes no Vulkan call; with registrations but nothing in flight
//!   it looks again every [`POLL_INTERVAL`]). Otherwise it copies the **head** of each
//!   non-empty list — the oldest submission of that VkQueue it has not seen complete — and,
//!   with several VkQueues, the wake timeline's next value. Without the mutex it waits with
//!   `vkWaitSemaphores` for any of them, or for [`POLL_INTERVAL`] (so a driver that never
//!   reports a lost device is asked again). Then, under the mutex, it drops from each list the
//!   submissions that have completed, oldest first, and takes out every registration whose
//!   timeline has reached its value; it calls the callback for each **outside** the mutex (the
//!   callback may register more).
//! - [`Watcher::register`], under the mutex: if the timeline has already reached the value it
//!   answers [`Registration::Reached`] and records nothing; otherwise it records the
//!   registration and answers [`Registration::Watching`]. The registered value belongs to a
//!   submission in flight (or is reached by some other party, seen within the poll interval),
//!   and the thread looks at every registration each time a head completes; so a registration
//!   wakes the thread only when it is the first one and nothing is in flight (the thread may
//!   then be asleep with no deadline).
//! - [`Watcher::stop`], under the mutex: sets `stopping`, notifies the condition variable and
//!   signals the wake timeline; the thread sees it before its next wait (within the poll
//!   interval), calls the callback with [`VulkanError::WatcherStopped`] for every registration
//!   left, and ends.
//!
//! Why no registration is missed: a registration is recorded only while its value is not
//! reached (checked under the mutex, which the thread's look at the registrations also takes).
//! Its submission is in flight then, so it is in a list; the thread waits on each list's head
//! until it completes, so it comes back after that submission completes, and finds the
//! registration reached. On an in-order VkQueue (lavapipe's) the heads complete in list order;
//! where a VkQueue completes out of order, a completion behind a slower head is reported when
//! the head completes: later, never lost.
//!
//! Why one semaphore per VkQueue, and the wake timeline only with several: Mesa's common
//! timeline emulation (lavapipe's) implements `WAIT_ANY` over more than one semaphore by
//! polling in a loop, which kept a core busy for the whole run; a wait on one semaphore sleeps.
//! On one VkQueue (lavapipe has one) the thread waits on exactly one semaphore, and nothing but
//! a stop ever needs to interrupt that wait. The single-semaphore wait is on causeway queues'
//! timelines, which the host signals ([`Timeline::signal_host`] from `completed_on_host`) only
//! above values already reached on the device: no host signal ends such a wait (the validation
//! layer 1.3.239 stalls when one does: KhronosGroup/Vulkan-ValidationLayers#4649).
//!
//! A device error (`VK_ERROR_DEVICE_LOST` or any other) from a wait or a value query: the
//! callback is called with that error for every registration, the watcher refuses new
//! submissions and registrations ([`VulkanError::WatcherStopped`]) and the thread ends.
//!
//! Every registration's token reaches the callback exactly once. Registrations and in-flight
//! entries hold clones of their timelines, so no timeline is destroyed while the thread waits
//! on it. Registering does not allocate: the list is sized at start, and a full list is refused
//! ([`VulkanError::WatcherFull`]) — backpressure is the caller's. An in-flight list grows only
//! past the deepest submission queue seen so far.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ash::vk;
use causeway_core::unpoisoned::{Condvar, Mutex, MutexGuard};

use crate::submit::submit_then;
use crate::{CommandBuffer, Gpu, Timeline, VulkanError};

/// How long the thread waits before asking the device again when nothing completes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// In-flight submissions each VkQueue's list has room for before it grows.
const IN_FLIGHT_ROOM: usize = 64;

/// The completion callback: a registration's token, and `Ok(())` when its timeline reached its
/// value or why it never will. Runs on the watcher thread and should be brief (it delays every
/// other completion). It must not panic: if it does, the thread ends, the registrations left
/// are never reported, and the watcher refuses new ones ([`VulkanError::WatcherStopped`]).
pub type OnComplete = Box<dyn Fn(u64, Result<(), VulkanError>) + Send + 'static>;

/// What [`Watcher::register`] did (a yes-or-no answer: closed to new variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registration {
    /// The timeline had already reached the value: nothing was recorded and the callback will
    /// not be called for it.
    Reached,
    /// Recorded: the callback will be called with its token.
    Watching,
}

/// The completion watcher of a [`Gpu`] (see the module documentation for its protocol).
pub struct Watcher {
    shared: Arc<WatcherShared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct WatcherShared {
    gpu: Gpu,
    wake: Timeline,
    capacity: usize,
    state: Mutex<State>,
    /// Notified when a submission arrives in an empty in-flight list, and on stop.
    submitted: Condvar,
}

struct State {
    /// By VkQueue: the submissions not yet seen complete, oldest first.
    in_flight: Vec<VecDeque<Signalled>>,
    watched: Vec<Watched>,
    /// The last value signalled to the wake timeline.
    wake_value: u64,
    /// `stop` was called: the thread ends at its next look.
    stopping: bool,
    /// The thread has ended (stopped or after a device error): registrations are refused.
    stopped: bool,
}

impl State {
    fn refuses(&self) -> bool {
        self.stopping || self.stopped
    }

    fn anything_in_flight(&self) -> bool {
        self.in_flight.iter().any(|list| !list.is_empty())
    }
}

/// A timeline and the value a submission signals it to.
struct Signalled {
    timeline: Timeline,
    value: u64,
}

struct Watched {
    timeline: Timeline,
    value: u64,
    token: u64,
}

impl WatcherShared {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state whole where it could panic (a push or a
        // removal, a flag, a counter), and callbacks run outside it.
        self.state.lock()
    }

    /// Whether the thread's waits include the wake timeline (see the module documentation).
    fn uses_wake(&self) -> bool {
        self.gpu.queue_count() > 1
    }
}

/// Raises the wake value and signals the wake timeline to it (the state's mutex held).
fn wake(wake: &Timeline, state: &mut State) -> Result<(), VulkanError> {
    state.wake_value += 1;
    wake.signal_host(state.wake_value)
}

impl Watcher {
    /// Starts the watcher thread of `gpu`, with room for `capacity` outstanding registrations,
    /// calling `on_complete` for each.
    pub fn start(
        gpu: &Gpu,
        capacity: usize,
        on_complete: impl Fn(u64, Result<(), VulkanError>) + Send + 'static,
    ) -> Result<Watcher, VulkanError> {
        let shared = Arc::new(WatcherShared {
            gpu: gpu.clone(),
            wake: Timeline::new(gpu, 0)?,
            capacity,
            state: Mutex::new(State {
                in_flight: (0..gpu.queue_count())
                    .map(|_| VecDeque::with_capacity(IN_FLIGHT_ROOM))
                    .collect(),
                watched: Vec::with_capacity(capacity),
                wake_value: 0,
                stopping: false,
                stopped: false,
            }),
            submitted: Condvar::new(),
        });
        let on_complete: OnComplete = Box::new(on_complete);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("causeway-vulkan-watcher".into())
            .spawn(move || watch(&thread_shared, &on_complete))
            .map_err(|error| VulkanError::WatcherThread { detail: error.to_string() })?;
        Ok(Watcher { shared, thread: Mutex::new(Some(thread)) })
    }

    /// [`submit`](crate::submit) to VkQueue `queue`, the submission watched until it completes
    /// (registrations of its `signal` are reported when it does). Refused, with nothing
    /// submitted, when the watcher has stopped ([`VulkanError::WatcherStopped`]).
    pub fn submit(
        &self,
        queue: usize,
        commands: Option<&CommandBuffer>,
        waits: &[(&Timeline, u64)],
        signal: (&Timeline, u64),
    ) -> Result<(), VulkanError> {
        if self.shared.state().refuses() {
            return Err(VulkanError::WatcherStopped);
        }
        submit_then(&self.shared.gpu, queue, commands, waits, signal, || {
            let mut state = self.shared.state();
            let Some(list) = state.in_flight.get_mut(queue) else { return };
            let was_empty = list.is_empty();
            list.push_back(Signalled { timeline: signal.0.clone(), value: signal.1 });
            if was_empty {
                self.shared.submitted.notify_all();
                if self.shared.uses_wake() {
                    // Failing to signal leaves the thread to see it after its poll interval.
                    let _ = wake(&self.shared.wake, &mut state);
                }
            }
        })
    }

    /// Calls the completion callback with `token` once `timeline` reaches `value`, unless it
    /// has already ([`Registration::Reached`]). Refused when the watcher is full
    /// ([`VulkanError::WatcherFull`]: retry after completions) or has stopped
    /// ([`VulkanError::WatcherStopped`]). Reported promptly when a submission made through
    /// [`submit`](Self::submit) reaches the value; otherwise within [`POLL_INTERVAL`].
    pub fn register(
        &self,
        timeline: &Timeline,
        value: u64,
        token: u64,
    ) -> Result<Registration, VulkanError> {
        let mut state = self.shared.state();
        if state.refuses() {
            return Err(VulkanError::WatcherStopped);
        }
        if timeline.value()? >= value {
            return Ok(Registration::Reached);
        }
        if state.watched.len() == self.shared.capacity {
            return Err(VulkanError::WatcherFull { capacity: self.shared.capacity });
        }
        state.watched.push(Watched { timeline: timeline.clone(), value, token });
        if state.watched.len() == 1 && !state.anything_in_flight() {
            // The thread may sleep with no deadline (nothing watched, nothing in flight): from
            // now on it must look every poll interval.
            self.shared.submitted.notify_all();
        }
        Ok(Registration::Watching)
    }

    /// Registrations not yet reported.
    pub fn outstanding(&self) -> usize {
        self.shared.state().watched.len()
    }

    /// Stops the thread: registrations left are reported [`VulkanError::WatcherStopped`].
    /// `true` when the thread has ended by `deadline`; otherwise it ends on its own later.
    pub fn stop(&self, deadline: Instant) -> bool {
        {
            let mut state = self.shared.state();
            if !state.refuses() {
                state.stopping = true;
                self.shared.submitted.notify_all();
                // Failing to signal leaves the thread to see `stopping` after its poll interval.
                let _ = wake(&self.shared.wake, &mut state);
            }
        }
        let mut thread = self.thread.lock();
        let Some(handle) = thread.take() else { return true };
        while !handle.is_finished() {
            if Instant::now() >= deadline {
                *thread = Some(handle);
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // The thread has returned; a panic in the callback is the callback's, already reported
        // by the panic hook.
        let _ = handle.join();
        true
    }
}

impl fmt::Debug for Watcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watcher")
            .field("capacity", &self.shared.capacity)
            .field("outstanding", &self.outstanding())
            .finish_non_exhaustive()
    }
}

impl Drop for Watcher {
    /// Stops the thread, waiting for it a bounded time (it holds what it uses, so a thread
    /// that outlives its watcher is harmless).
    fn drop(&mut self) {
        self.stop(Instant::now() + Duration::from_secs(10));
    }
}

/// Marks the watcher stopped when the thread ends, however it ends (a panicking callback
/// included), so registrations are refused rather than never reported.
struct MarkStoppedOnExit<'a>(&'a WatcherShared);

impl Drop for MarkStoppedOnExit<'_> {
    fn drop(&mut self) {
        self.0.state().stopped = true;
    }
}

/// The watcher thread (see the module documentation).
fn watch(shared: &WatcherShared, on_complete: &OnComplete) {
    let _mark_stopped = MarkStoppedOnExit(shared);
    let device = shared.gpu.device();
    let queues = shared.gpu.queue_count();
    let mut semaphores = Vec::with_capacity(queues + 1);
    let mut values = Vec::with_capacity(queues + 1);
    // Clones of the heads waited on, so none is destroyed during the wait.
    let mut heads: Vec<Timeline> = Vec::with_capacity(queues);
    let mut completed: Vec<Watched> = Vec::with_capacity(shared.capacity);
    let poll_ns = POLL_INTERVAL.as_nanos() as u64;
    let failure = loop {
        semaphores.clear();
        values.clear();
        heads.clear();
        {
            let mut state = shared.state();
            while !state.stopping && !state.anything_in_flight() {
                if state.watched.is_empty() {
                    state = shared.submitted.wait(state);
                } else {
                    state = shared.submitted.wait_timeout(state, POLL_INTERVAL).0;
                    break;
                }
            }
            if state.stopping {
                break VulkanError::WatcherStopped;
            }
            for head in state.in_flight.iter().filter_map(VecDeque::front) {
                semaphores.push(head.timeline.raw());
                values.push(head.value);
                heads.push(head.timeline.clone());
            }
            if shared.uses_wake() && !semaphores.is_empty() {
                semaphores.push(shared.wake.raw());
                values.push(state.wake_value + 1);
            }
        }
        if !semaphores.is_empty() {
            let info = vk::SemaphoreWaitInfo::default()
                .flags(if semaphores.len() > 1 {
                    vk::SemaphoreWaitFlags::ANY
                } else {
                    vk::SemaphoreWaitFlags::empty()
                })
                .semaphores(&semaphores)
                .values(&values);
            let waited = match injected_wait_fault(&shared.gpu) {
                Some(injected) => Err(injected),
                // SAFETY: every semaphore is a live timeline semaphore of this device: the wake
                // one is ours, the others are held by `heads` across the call; the arrays live
                // across the call.
                None => unsafe { device.wait_semaphores(&info, poll_ns) },
            };
            match waited {
                Ok(()) | Err(vk::Result::TIMEOUT) => {}
                Err(result) => break VulkanError::Vk { call: "vkWaitSemaphores", result },
            }
        }
        match take_completed(&mut shared.state(), &mut completed) {
            // Outside the mutex: the callback may register more, and the last clone of a
            // timeline dropped here waits for the device to go idle.
            Ok(()) => {
                for watched in completed.drain(..) {
                    on_complete(watched.token, Ok(()));
                }
            }
            Err(error) => {
                for watched in completed.drain(..) {
                    on_complete(watched.token, Ok(()));
                }
                break error;
            }
        }
    };
    let left = {
        let mut state = shared.state();
        state.stopped = true;
        for list in &mut state.in_flight {
            list.clear();
        }
        std::mem::take(&mut state.watched)
    };
    for watched in left {
        on_complete(watched.token, Err(failure.clone()));
    }
}

/// Drops the completed submissions from the front of every in-flight list and moves every
/// reached registration into `completed` (the state's mutex held).
fn take_completed(state: &mut State, completed: &mut Vec<Watched>) -> Result<(), VulkanError> {
    for list in &mut state.in_flight {
        while let Some(head) = list.front() {
            if head.timeline.value()? < head.value {
                break;
            }
            list.pop_front();
        }
    }
    let mut index = 0;
    while index < state.watched.len() {
        if state.watched[index].timeline.value()? >= state.watched[index].value {
            completed.push(state.watched.swap_remove(index));
        } else {
            index += 1;
        }
    }
    Ok(())
}

/// The error a test made this wait return instead of reaching Vulkan ([`Gpu::inject_fault`]).
#[cfg(feature = "fault-injection")]
fn injected_wait_fault(gpu: &Gpu) -> Option<vk::Result> {
    gpu.injected_fault(crate::FaultPoint::WatcherWait)
}

/// Without the `fault-injection` feature every wait reaches Vulkan.
#[cfg(not(feature = "fault-injection"))]
fn injected_wait_fault(_: &Gpu) -> Option<vk::Result> {
    None
}

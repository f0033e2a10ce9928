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
//!   it looks again every [`POLL_INTERVAL`]). Otherwise it picks one **target** per non-empty
//!   list (the wake policy below) and, with several VkQueues, the wake timeline's next value.
//!   Without the mutex it waits with `vkWaitSemaphores` for any of them, or for
//!   [`POLL_INTERVAL`] (so a driver that never reports a lost device is asked again). Then,
//!   under the mutex, it drops every submission that has completed, every need reached, and
//!   takes out every registration whose timeline has reached its value; it calls the callback
//!   for each **outside** the mutex (the callback may register more).
//! - [`Watcher::register`], under the mutex: if the timeline has already reached the value it
//!   answers [`Registration::Reached`] and records nothing; otherwise it records the
//!   registration and answers [`Registration::Watching`]. The registered value belongs to a
//!   submission in flight (or is reached by some other party, seen within the poll interval),
//!   and the thread looks at every registration each time a wait ends; so a registration
//!   wakes the thread only when it is the first one and nothing is in flight (the thread may
//!   then be asleep with no deadline).
//! - [`Watcher::need`], under the mutex: records `(timeline, value)` as needed unless already
//!   reached (see the wake policy).
//! - [`Watcher::stop`], under the mutex: sets `stopping`, notifies the condition variable and
//!   signals the wake timeline; the thread sees it before its next wait (within the poll
//!   interval), calls the callback with [`VulkanError::WatcherStopped`] for every registration
//!   left, and ends.
//!
//! # Wake policy
//!
//! Every wake of the thread costs a thread switch, and each report wakes a queue process on a
//! pool worker: waking at every completion (a small kernel on lavapipe completes every few
//! tens of microseconds) costs more than the device work. So the thread wakes for what
//! somebody needs, and otherwise lets completions pile up and reports them in one pass:
//!
//! - **a need** ([`Watcher::need`]): a value somebody is blocked on until the device reaches
//!   it — the backend records one when a queue finds the command buffer it must submit still
//!   pending (backpressure on a device resource). The target on a VkQueue is then the oldest
//!   submission in flight that reaches a recorded need, or, when that one is in the older half
//!   of what is in flight, the middle submission: the thread wakes once half the work in flight
//!   has completed, the resources it freed are reused while the device still runs the other
//!   half, and one wake serves several completions instead of one each (a need at the front
//!   of eight submissions in flight wakes the thread after four);
//! - **otherwise, the batch**: the newest submission in flight on that VkQueue when the wait
//!   began. Everything submitted before it completes no later (in order on lavapipe's queue),
//!   and the pass after the wake reports every registration reached by then, whatever it is;
//! - **a stop** (teardown) and, with several VkQueues, a new submission on an idle VkQueue or
//!   a new need, signal the wake timeline; on one VkQueue a stop is seen within
//!   [`POLL_INTERVAL`], and a need recorded during a wait steers the next wait;
//! - **the periodic wake** every [`POLL_INTERVAL`] (a device that never reports its loss, a
//!   value reached by another party than a watched submission).
//!
//! What the thread does not see: a waiter on the host or a queue of another driver waiting for
//! a value a Vulkan queue signals, or a submitter waiting for room in a queue's ring (the
//! device layer keeps those waiters; the driver is not told of them). Such a value is reported when the batch that contains it completes: later by at
//! most the work submitted to its VkQueue before the thread's wait began, never lost.
//!
//! Why no registration is missed: a registration is recorded only while its value is not
//! reached (checked under the mutex, which the thread's look at the registrations also takes).
//! Its submission is in flight then, so it is in a list, and it leaves the list only once
//! completed. While a list is not empty the thread waits on one of its submissions not yet
//! complete, and looks at every registration after each wait (at the latest after
//! [`POLL_INTERVAL`]): it comes back after the registration's submission completes, and finds
//! it reached. On an in-order VkQueue (lavapipe's) the batch's target completes last; where a
//! VkQueue completes out of order, a completion before the target is reported when the target
//! completes or the poll interval ends: later, never lost. The pass drops the completed
//! submissions at both ends of each list, so neither the oldest nor the newest left has
//! completed; a need's target is the middle one only when a query at the pick finds it not
//! complete, else the needed one, which has not completed either (its need would have been
//! reached and dropped in the same pass): no wait ends at once for a submission known done.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ash::vk;
use causeway_core::unpoisoned::{Condvar, Mutex, MutexGuard};
use causeway_device::Args;

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

/// How often the watcher thread's waits ended ([`Watcher::wakes`]): the cost the wake policy
/// keeps down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Wakes {
    /// Waits that ended because a submission waited for completed (or, on a device with
    /// several VkQueues, the wake timeline was signalled).
    pub completed: u64,
    /// Waits that ended after [`POLL_INTERVAL`] with nothing of theirs completed.
    pub timed_out: u64,
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
    /// Statistics of the thread's waits ([`Wakes`]).
    completed_wakes: AtomicU64,
    timed_out_wakes: AtomicU64,
}

struct State {
    /// By VkQueue: the submissions not yet seen complete, oldest first.
    in_flight: Vec<VecDeque<Signalled>>,
    watched: Vec<Watched>,
    /// Values somebody needs soon ([`Watcher::need`]): each steers the
    /// thread's wait on its VkQueue to the submission that reaches it. Dropped once reached.
    needs: Vec<Signalled>,
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
                needs: Vec::with_capacity(capacity),
                wake_value: 0,
                stopping: false,
                stopped: false,
            }),
            submitted: Condvar::new(),
            completed_wakes: AtomicU64::new(0),
            timed_out_wakes: AtomicU64::new(0),
        });
        let on_complete: OnComplete = Box::new(on_complete);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("causeway-vulkan-watcher".into())
            .spawn(move || watch(&thread_shared, &on_complete))
            .map_err(|error| VulkanError::WatcherThread { detail: error.to_string() })?;
        Ok(Watcher { shared, thread: Mutex::new(Some(thread)) })
    }

    /// [`submit`](crate::submit()) to VkQueue `queue`, the submission watched until it completes
    /// (registrations of its `signal` are reported when it does). Refused, with nothing
    /// submitted, when the watcher has stopped ([`VulkanError::WatcherStopped`]).
    pub fn submit(
        &self,
        queue: usize,
        commands: Option<&CommandBuffer>,
        waits: &[(&Timeline, u64)],
        signal: (&Timeline, u64),
    ) -> Result<(), VulkanError> {
        self.submit_with_arguments(
            queue,
            commands.map(|commands| (commands, Args::NONE)),
            waits,
            signal,
        )
    }

    /// [`submit`](Self::submit), the command buffer's [`Step::Arguments`](crate::Step::Arguments)
    /// copying `args`.
    pub(crate) fn submit_with_arguments(
        &self,
        queue: usize,
        commands: Option<(&CommandBuffer, Args)>,
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

    /// Somebody needs `timeline` to reach `value` soon (a resource a submission holds until
    /// then): from its next wait on, the thread wakes when the submission that reaches it has
    /// completed and, with more in flight behind it, half the work in flight has, instead of
    /// when the newest submission in flight does (see the module documentation). Registrations report through
    /// [`register`](Self::register) as always; a need only moves when the thread looks.
    ///
    /// A hint: when it cannot be kept (the value is reached already, [`capacity`] needs are
    /// kept already, the watcher has stopped), nothing is recorded and nothing is lost — the
    /// value is still seen, when the batch it is part of completes.
    ///
    /// [`capacity`]: Self::start
    pub fn need(&self, timeline: &Timeline, value: u64) {
        let mut state = self.shared.state();
        if state.refuses() || state.needs.len() == self.shared.capacity {
            return;
        }
        if !matches!(timeline.value(), Ok(reached) if reached < value) {
            return;
        }
        let raw = timeline.raw();
        if state.needs.iter().any(|need| need.timeline.raw() == raw && need.value <= value) {
            return;
        }
        state.needs.push(Signalled { timeline: timeline.clone(), value });
        if self.shared.uses_wake() {
            // Several VkQueues: interrupt the wait so the thread looks at the need now.
            // Failing to signal leaves it to look after the current wait.
            let _ = wake(&self.shared.wake, &mut state);
        }
    }

    /// How often the thread's waits ended so far, by why.
    pub fn wakes(&self) -> Wakes {
        // Statistics: each counter is read on its own, ordering nothing.
        Wakes {
            completed: self.shared.completed_wakes.load(Ordering::Relaxed),
            timed_out: self.shared.timed_out_wakes.load(Ordering::Relaxed),
        }
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
    // Clones of the timelines waited on, so none is destroyed during the wait.
    let mut targets: Vec<Timeline> = Vec::with_capacity(queues);
    let mut completed: Vec<Watched> = Vec::with_capacity(shared.capacity);
    let poll_ns = POLL_INTERVAL.as_nanos() as u64;
    let failure = loop {
        semaphores.clear();
        values.clear();
        targets.clear();
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
            for list in &state.in_flight {
                let Some(target) = wait_target(list, &state.needs) else { continue };
                semaphores.push(target.timeline.raw());
                values.push(target.value);
                targets.push(target.timeline.clone());
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
                // one is ours, the others are held by `targets` across the call; the arrays live
                // across the call.
                None => unsafe { device.wait_semaphores(&info, poll_ns) },
            };
            match waited {
                // Statistics, as in `wakes`.
                Ok(()) => {
                    shared.completed_wakes.fetch_add(1, Ordering::Relaxed);
                }
                Err(vk::Result::TIMEOUT) => {
                    shared.timed_out_wakes.fetch_add(1, Ordering::Relaxed);
                }
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
        state.needs.clear();
        std::mem::take(&mut state.watched)
    };
    for watched in left {
        on_complete(watched.token, Err(failure.clone()));
    }
}

/// What the thread waits for on one VkQueue: the oldest submission in flight that reaches a
/// value somebody needs, but not before the middle one (half the work in flight), or else the
/// newest in flight (the whole batch); `None` when nothing is in flight there.
fn wait_target<'a>(list: &'a VecDeque<Signalled>, needs: &[Signalled]) -> Option<&'a Signalled> {
    let reaches_a_need = |entry: &&Signalled| {
        let raw = entry.timeline.raw();
        needs.iter().any(|need| need.timeline.raw() == raw && entry.value >= need.value)
    };
    if needs.is_empty() {
        return list.back();
    }
    let Some(needed) = list.iter().position(|entry| reaches_a_need(&entry)) else {
        return list.back();
    };
    let middle = &list[needed.max((list.len() - 1) / 2)];
    // A VkQueue that completes out of order may have completed the middle one already: waiting
    // on it would end at once, so wait on the needed one (not complete: see `take_completed`).
    if matches!(middle.timeline.value(), Ok(reached) if reached < middle.value) {
        Some(middle)
    } else {
        list.get(needed)
    }
}

/// Drops the completed submissions at both ends of every in-flight list (so that neither the
/// oldest nor the newest left has completed: the thread never targets a completed one, which
/// would end its next wait at once), drops the needs reached, and moves every reached
/// registration into `completed` (the state's mutex held). Each submission is looked at once
/// when it is dropped, and each pass looks at one more per end: the cost follows the work.
fn take_completed(state: &mut State, completed: &mut Vec<Watched>) -> Result<(), VulkanError> {
    for list in &mut state.in_flight {
        while let Some(oldest) = list.front() {
            if oldest.timeline.value()? < oldest.value {
                break;
            }
            list.pop_front();
        }
        // On an in-order VkQueue (lavapipe's) nothing is left here when the oldest has not
        // completed; out of order, the newest may have.
        while let Some(newest) = list.back() {
            if newest.timeline.value()? < newest.value {
                break;
            }
            list.pop_back();
        }
    }
    let mut index = 0;
    while index < state.needs.len() {
        if state.needs[index].timeline.value()? >= state.needs[index].value {
            state.needs.swap_remove(index);
        } else {
            index += 1;
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

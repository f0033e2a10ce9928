//! [`Watcher`]: the one completion-watcher thread of a [`Gpu`], which turns timeline values
//! reached on the device into calls of a completion callback.
//!
//! # Protocol
//!
//! The watcher owns a **wake** timeline that only the host signals, and a bounded list of
//! registrations `(timeline, value, token)` under one mutex, with the wake value `w` (the last
//! value signalled to the wake timeline).
//!
//! - The thread, in a loop: under the mutex, sleeps on a condition variable while there is no
//!   registration (an idle watcher makes no Vulkan call); otherwise copies every
//!   registration's `(semaphore, value)` and adds `(wake, w + 1)`. Then, without the mutex, it
//!   waits with `vkWaitSemaphores` (`WAIT_ANY`) for any of them, or for [`POLL_INTERVAL`] (so
//!   a driver that never reports a lost device is still asked again). Then, under the mutex, it
//!   takes out every registration whose timeline has reached its value, and calls the callback
//!   for each with `Ok(())` **outside** the mutex (the callback may register more).
//! - [`Watcher::register`], under the mutex: pushes the registration. If the list was empty,
//!   the thread is not in a Vulkan wait (only it removes registrations, and it waits only on a
//!   non-empty list): it notifies the condition variable. Otherwise the thread may be waiting
//!   on the copy it took: it raises `w` by one and signals the wake timeline to `w`
//!   (signalling under the mutex keeps the host signals rising, as `vkSignalSemaphore`
//!   requires). A registration made after the copy has so raised the wake timeline to at least
//!   `w + 1`, and the wait returns at once: no registration waits for the poll interval, none
//!   is missed.
//! - [`Watcher::stop`], under the mutex: sets `stopping`, notifies the condition variable and
//!   signals the wake timeline; the thread sees it before its next wait, calls the callback with
//!   [`VulkanError::WatcherStopped`] for every registration left, and ends.
//!
//! Why the condition variable, beyond sparing an idle watcher: the validation layer 1.3.239
//! stalls (for seconds, then reports `UNASSIGNED-VkSemaphore-state-timeout`, "most likely a
//! validation bug") when a host wait on a **single** timeline returns because another thread's
//! `vkSignalSemaphore` reached it, before that thread's call returned
//! (KhronosGroup/Vulkan-ValidationLayers#4649, fixed upstream by #8519). A wait on one
//! registration and the wake timeline is `WAIT_ANY` over two semaphores, which that layer does
//! not track.
//! - A device error (`VK_ERROR_DEVICE_LOST` or any other) from a wait or a value query: the
//!   callback is called with that error for every registration, the watcher refuses new ones
//!   ([`VulkanError::WatcherStopped`]) and the thread ends.
//!
//! Every registration's token reaches the callback exactly once. A registration holds a clone
//! of its timeline, so no timeline is destroyed while the thread waits on it. Registering does
//! not allocate: the list is sized at start, and a full list is refused
//! ([`VulkanError::WatcherFull`]) — backpressure is the caller's.

use std::fmt;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ash::vk;
use causeway_core::unpoisoned::{Condvar, Mutex, MutexGuard};

use crate::{Gpu, Timeline, VulkanError};

/// How long the thread waits before asking the device again when nothing completes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The completion callback: a registration's token, and `Ok(())` when its timeline reached its
/// value or why it never will. Runs on the watcher thread and should be brief (it delays every
/// other completion). It must not panic: if it does, the thread ends, the registrations left
/// are never reported, and the watcher refuses new ones ([`VulkanError::WatcherStopped`]).
pub type OnComplete = Box<dyn Fn(u64, Result<(), VulkanError>) + Send + 'static>;

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
    /// Notified when the first registration arrives in an empty list, and on stop.
    registered: Condvar,
}

struct State {
    watched: Vec<Watched>,
    /// The last value signalled to the wake timeline.
    wake_value: u64,
    /// `stop` was called: the thread ends at its next look.
    stopping: bool,
    /// The thread has ended (stopped or after a device error): registrations are refused.
    stopped: bool,
}

struct Watched {
    timeline: Timeline,
    value: u64,
    token: u64,
}

impl WatcherShared {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state whole where it could panic (a push or a
        // removal of a registration, a flag, a counter), and callbacks run outside it.
        self.state.lock()
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
                watched: Vec::with_capacity(capacity),
                wake_value: 0,
                stopping: false,
                stopped: false,
            }),
            registered: Condvar::new(),
        });
        let on_complete: OnComplete = Box::new(on_complete);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("causeway-vulkan-watcher".into())
            .spawn(move || watch(&thread_shared, &on_complete))
            .map_err(|error| VulkanError::WatcherThread { detail: error.to_string() })?;
        Ok(Watcher { shared, thread: Mutex::new(Some(thread)) })
    }

    /// Calls the completion callback with `token` once `timeline` reaches `value`. Refused when
    /// the watcher is full ([`VulkanError::WatcherFull`]: retry after completions) or has
    /// stopped ([`VulkanError::WatcherStopped`]).
    pub fn register(&self, timeline: &Timeline, value: u64, token: u64) -> Result<(), VulkanError> {
        let mut state = self.shared.state();
        if state.stopping || state.stopped {
            return Err(VulkanError::WatcherStopped);
        }
        if state.watched.len() == self.shared.capacity {
            return Err(VulkanError::WatcherFull { capacity: self.shared.capacity });
        }
        state.watched.push(Watched { timeline: timeline.clone(), value, token });
        if state.watched.len() == 1 {
            self.shared.registered.notify_all();
        } else if let Err(error) = wake(&self.shared.wake, &mut state) {
            state.watched.pop();
            return Err(error);
        }
        Ok(())
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
            if !state.stopping && !state.stopped {
                state.stopping = true;
                self.shared.registered.notify_all();
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
    let mut semaphores = Vec::with_capacity(shared.capacity + 1);
    let mut values = Vec::with_capacity(shared.capacity + 1);
    let mut completed: Vec<Watched> = Vec::with_capacity(shared.capacity);
    let poll_ns = POLL_INTERVAL.as_nanos() as u64;
    let failure = loop {
        semaphores.clear();
        values.clear();
        {
            let mut state = shared.state();
            while state.watched.is_empty() && !state.stopping {
                state = shared.registered.wait(state);
            }
            if state.stopping {
                break VulkanError::WatcherStopped;
            }
            for watched in &state.watched {
                semaphores.push(watched.timeline.raw());
                values.push(watched.value);
            }
            semaphores.push(shared.wake.raw());
            values.push(state.wake_value + 1);
        }
        let info = vk::SemaphoreWaitInfo::default()
            .flags(vk::SemaphoreWaitFlags::ANY)
            .semaphores(&semaphores)
            .values(&values);
        let waited = match injected_wait_fault(&shared.gpu) {
            Some(injected) => Err(injected),
            // SAFETY: every semaphore is a live timeline semaphore of this device: the wake one
            // is ours, the others are held by registrations that only this thread removes; the
            // arrays live across the call.
            None => unsafe { device.wait_semaphores(&info, poll_ns) },
        };
        match waited {
            Ok(()) | Err(vk::Result::TIMEOUT) => {}
            Err(result) => break VulkanError::Vk { call: "vkWaitSemaphores", result },
        }
        let mut query_failure = None;
        {
            let mut state = shared.state();
            let mut index = 0;
            while index < state.watched.len() {
                match state.watched[index].timeline.value() {
                    Ok(reached) if reached >= state.watched[index].value => {
                        completed.push(state.watched.swap_remove(index));
                    }
                    Ok(_) => index += 1,
                    Err(error) => {
                        query_failure = Some(error);
                        break;
                    }
                }
            }
        }
        // Outside the mutex: the callback may register more, and the last clone of a timeline
        // dropped here waits for the device to go idle.
        for watched in completed.drain(..) {
            on_complete(watched.token, Ok(()));
        }
        if let Some(error) = query_failure {
            break error;
        }
    };
    let left = {
        let mut state = shared.state();
        state.stopped = true;
        std::mem::take(&mut state.watched)
    };
    for watched in left {
        on_complete(watched.token, Err(failure.clone()));
    }
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

//! A 4-queue controller: the firmware shape the size budget is measured on.
//!
//! Four queues form a pipeline: queue 0 consumes events a timer interrupt delivers on an input
//! timeline (external signals, as a device's completion interrupt would), queue `q` consumes
//! queue `q − 1`'s timeline, and each queue's operation `k` waits on its upstream value `k`,
//! advances its [`QueueClock`] and signals its own timeline to `k` with its frontier. Each
//! queue is an immediate [`Process`] on one [`Executor`] run by the main loop, which parks in
//! `WFI`; a queue with nothing to do arms a timepoint on its upstream timeline and sleeps, and
//! the timepoint's callback (in the interrupt, or inline in an upstream queue's signal) wakes
//! it. Everything lives in statics: no heap, no stack-allocated state beyond the worker.
//!
//! Capacities are what four queues need: frontiers of 4 (one entry per queue axis: the last
//! queue's frontier names all four, untainted), histories of 4 signals per timeline.
//!
//! The timelines, queue states, executor and timepoints are built at start-up into zeroed RAM
//! (one `spin::Once` in `.bss`) rather than written as initialised statics: a frontier's empty
//! slots hold a non-zero sentinel, so an initialised static would also store its whole image
//! in flash (2.7 KiB for five timelines) only to copy it to RAM at reset. One `Once` for all of
//! them, not one each: every `Once` type links its own copy of the initialisation path (about
//! 250 bytes each on the M0).

use core::cell::RefCell;
use core::pin::Pin;

use causeway_core::executor::{
    Class, Drain, DrainContext, Drained, Executor, ExecutorError, Process, RoundRobin, SpinPolicy,
};
use causeway_core::queue;
use causeway_core::semaphore::{Arm, Notify, Outcome, Timepoint};
use causeway_core::{Axis, Capabilities, Domain, Endpoint, Failure, QueueClock, Scope, Semaphore};
use causeway_platform_baremetal::BareMetalFutex;
use critical_section::Mutex;
use spin::Once;

use crate::{board, ticks};

/// Queues in the pipeline.
pub const QUEUES: usize = 4;
/// Operations each queue runs.
pub const OPS: u64 = 8;

/// Frontier capacity: one entry per queue axis.
const FRONTIER: usize = QUEUES;
/// Signals each timeline remembers.
const HISTORY: usize = 4;

type Timeline = Semaphore<HISTORY, FRONTIER>;
type Clock = QueueClock<FRONTIER>;
type ControllerExecutor = Executor<'static, BareMetalFutex, QUEUES, 1>;

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };
const CAPABILITIES: Capabilities = Capabilities { wait_before_signal: true };

/// A queue's mutable state; only its own drain touches it, one call at a time, inside a
/// critical section (a `critical_section::Mutex` costs less flash than a spin lock on the M0).
struct QueueState {
    clock: Clock,
    next: u64,
}

/// What the controller builds at start-up.
struct Controller {
    /// The timer's events (external signals, one per tick, up to [`OPS`]), then each queue's
    /// own timeline.
    timelines: [Timeline; 1 + QUEUES],
    states: [Mutex<RefCell<QueueState>>; QUEUES],
    /// The executor, or why it could not be made (one worker never fails: this is for the
    /// types, and the run then fails).
    executor: Result<ControllerExecutor, ExecutorError>,
    /// Each queue's timepoint on its upstream timeline.
    timepoints: [Timepoint<'static>; QUEUES],
}

static CONTROLLER: Once<Controller> = Once::new();

static DRAINS: [QueueDrain; QUEUES] = [
    QueueDrain { queue: 0 },
    QueueDrain { queue: 1 },
    QueueDrain { queue: 2 },
    QueueDrain { queue: 3 },
];

static PROCESSES: [Process<'static>; QUEUES] = [
    Process::new(&DRAINS[0], Class::Immediate),
    Process::new(&DRAINS[1], Class::Immediate),
    Process::new(&DRAINS[2], Class::Immediate),
    Process::new(&DRAINS[3], Class::Immediate),
];

static WAKERS: [WakeQueue; QUEUES] = [WakeQueue(0), WakeQueue(1), WakeQueue(2), WakeQueue(3)];

/// The timeline queue `queue` waits on: the input's for queue 0, else its predecessor's.
fn upstream(queue: usize) -> Option<&'static Timeline> {
    CONTROLLER.get().map(|controller| &controller.timelines[queue])
}

/// The timepoint callback: makes the sleeping queue process runnable.
struct WakeQueue(usize);

impl Notify for WakeQueue {
    fn notify(&self, _outcome: Outcome) {
        // Woken with a failure too: the drain reads it from the timeline.
        if let Some(Controller { executor: Ok(executor), .. }) = CONTROLLER.get() {
            executor.wake(&PROCESSES[self.0]);
        }
    }
}

/// One queue's behaviour: run the next operation once its upstream value is reached.
struct QueueDrain {
    queue: usize,
}

impl Drain for QueueDrain {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        let queue = self.queue;
        let Some(controller) = CONTROLLER.get() else {
            return Drained::Done(Err(Failure::Aborted));
        };
        // Interrupts stay masked while the operation runs inline: the timer's delivery waits
        // for it, as it would for any short critical section.
        critical_section::with(|cs| {
            self.step(controller, &mut controller.states[queue].borrow_ref_mut(cs))
        })
    }
}

impl QueueDrain {
    /// Runs the queue's next operation if its upstream value is reached.
    fn step(&self, controller: &'static Controller, state: &mut QueueState) -> Drained {
        let queue = self.queue;
        let (upstream, own) = (&controller.timelines[queue], &controller.timelines[queue + 1]);
        let k = state.next;
        if upstream.value() < k {
            let timepoint = Pin::static_ref(&controller.timepoints[queue]);
            // SAFETY: the timepoint and both timelines live in the static controller, so they
            // stay alive and in place for as long as the timepoint may be linked.
            match unsafe { upstream.arm(timepoint, k) } {
                Ok(Arm::Ready(Ok(_))) => {}
                Ok(Arm::Ready(Err(failure))) => return Drained::Done(Err(failure)),
                // Armed now, or still armed from before: its callback wakes this process.
                Ok(Arm::Armed) | Err(_) => return Drained::Sleep,
            }
        }
        let mut op = state.clock.begin();
        if op.wait(upstream, k).is_err() {
            return Drained::Done(Err(Failure::Aborted));
        }
        // The operation runs inline: committed with its signal, then retired at once. Its wait
        // has not failed, so it is doomed only when its own timeline failed already: there is
        // nothing left to fail then.
        let Ok(done) = op.commit_signalling([(own, k)]) else {
            return Drained::Done(Err(Failure::Aborted));
        };
        if let Some(failure) = done.failure {
            return Drained::Done(Err(failure));
        }
        queue::retire([(own, k)], Ok(()));
        state.next += 1;
        if state.next <= OPS {
            return Drained::Progress;
        }
        if queue == QUEUES - 1 {
            // The last queue finishes last (it waits on every other queue's last operation).
            if let Ok(executor) = &controller.executor {
                executor.shutdown();
            }
        }
        Drained::Done(Ok(()))
    }
}

/// The timer interrupt's work: deliver the next input event.
fn deliver_input() {
    let Some(input) = upstream(0) else { return };
    let value = input.value();
    if value < OPS {
        // A refusal cannot happen (the value advances by one, nothing else signals the input);
        // if it did, the pipeline would stall and the run's check would fail.
        let _ = input.signal_external(value + 1);
    }
}

/// What a finished run looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every queue ran every operation and the last queue knows all four exactly.
    Passed,
    /// The pipeline did not finish or its knowledge is wrong.
    Failed,
}

/// Runs the controller until its last queue finishes, then checks what it knows.
pub fn run() -> Verdict {
    let axes = causeway_core::AxisAllocator::new(0);
    let mut queue_axes = [Axis::new(0, Domain::Queue, 1); QUEUES];
    for axis in &mut queue_axes {
        let Ok(allocated) = axes.allocate(Domain::Queue) else { return Verdict::Failed };
        *axis = allocated;
    }
    let controller = CONTROLLER.call_once(|| Controller {
        timelines: core::array::from_fn(|_| Semaphore::new(0, Scope::DeviceLocal, HOME)),
        states: core::array::from_fn(|queue| {
            let clock = QueueClock::new(queue_axes[queue], HOME, CAPABILITIES);
            Mutex::new(RefCell::new(QueueState { clock, next: 1 }))
        }),
        executor: ControllerExecutor::new(BareMetalFutex::new(), 1),
        timepoints: core::array::from_fn(|queue| Timepoint::new(&WAKERS[queue])),
    });
    let Controller { timelines, states, executor: Ok(executor), .. } = controller else {
        return Verdict::Failed;
    };
    for process in &PROCESSES {
        if executor.submit(process).is_err() {
            return Verdict::Failed;
        }
    }
    ticks::set_hook(Some(deliver_input));
    board::start_ticks();
    if let Ok(mut worker) = executor.worker::<RoundRobin>(0, SpinPolicy::Park) {
        worker.run();
    }
    board::stop_ticks();
    ticks::set_hook(None);

    let all_done = PROCESSES.iter().all(|p| p.is_completed() && p.failure().is_none());
    let passed = critical_section::with(|cs| {
        let last = states[QUEUES - 1].borrow_ref(cs);
        let clock = &last.clock;
        let knows_every_queue =
            queue_axes.iter().all(|&axis| clock.frontier().get(axis) == Some(OPS));
        knows_every_queue
            && clock.frontier().len() == QUEUES
            && !clock.frontier().is_tainted()
            && all_done
            && timelines[1..].iter().all(|t| t.value() == OPS)
            && clock.counts().satisfied == OPS
            && executor.live() == 0
    });
    if passed {
        Verdict::Passed
    } else {
        Verdict::Failed
    }
}

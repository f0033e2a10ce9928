//! The device side: one process per ring on causeway-core's executor, each stepping the ring's
//! [`Engine`] and keeping the ring's [`QueueClock`].
//!
//! # What the controller adds to the engine
//!
//! The engine alone stalls on every WAIT whose semaphore word has not reached its value and
//! completes the rest. The controller also knows *why* a value is reached: every SIGNAL it
//! completes is recorded on the slot's core [`Semaphore`] with the signalling ring's frontier,
//! and every WAIT it completes imports the frontier of the signal that first reached the value
//! (the late-waiter rule). A WAIT whose signalling descriptor the ring already knows — an
//! earlier SIGNAL of its own ring (FIFO), or one that an imported frontier names (transitive)
//! — is **elided**: it imports nothing and costs no bookkeeping beyond the lookup, and it can
//! never stall. A WAIT that stalls sleeps on a timepoint of the slot's core semaphore, so the
//! SIGNAL that reaches its value wakes exactly the rings waiting for it.
//!
//! Knowledge only ever decides what the controller *skips*; the engine still reads the
//! semaphore word of every WAIT it completes, so a host that rewrites a slot it already
//! published, or mirrors a value into the table behind the controller's back, can make the
//! controller know less, never complete a WAIT early.
//!
//! # The ring's clock
//!
//! Only a SIGNAL's point can ever be imported (a WAIT imports the frontier of the signal that
//! reached its value), so the ring's clock moves only when it learns or signals something: a
//! SIGNAL is an operation of its own (the next epoch, its frontier recorded with the value), a
//! WAIT that imports is an operation that merges the import, and an elided WAIT, an EXEC, a
//! BARRIER or a malformed descriptor leave the clock as it was. The epoch thus counts the
//! ring's SIGNALs and importing WAITs rather than its descriptors, which no frontier can tell
//! apart, and the controller spends no frontier copy on descriptors that change nothing.
//!
//! # One drain call
//!
//! 1. If the ring's EXEC is running on its compute engine: sleep until the engine's completion
//!    interrupt, then run the kernel's effect and [`finish`](Engine::finish) it.
//! 2. Otherwise read the head descriptor, if one is published (the ring's slots between head
//!    and tail belong to the device, so it cannot change under the engine), and step the
//!    engine. On completion, apply the descriptor to the ring's clock: a SIGNAL is committed
//!    with its value and retired (waking the timepoints it reaches), or fails the slot's core
//!    semaphore when the engine failed it; a WAIT is resolved and counted; every other
//!    descriptor leaves the clock alone (above).
//!
//! A drain call repeats this for up to [`DRAIN_BUDGET`] descriptors while they complete, then
//! reports [`Drained::Progress`], so rings take turns on the one worker without paying the
//! executor's scheduling for every descriptor (a third of a BARRIER's cost on the Cortex-M0);
//! it sleeps as soon as the ring stalls, idles or has its EXEC running.

use core::pin::Pin;

use causeway_core::executor::{Drain, DrainContext, Drained};
use causeway_core::queue::{self, Resolution, WaitResolution};
use causeway_core::semaphore::{Arm, Notify, Outcome, Timepoint};
use causeway_core::{Capabilities, Failure, QueueClock};
use causeway_driver_npu::{
    Command, CompletionError, CompletionStatus, Engine, ExecRequest, Limits, RawDescriptor,
    Register, RegisterIo, RingLayout, Step, Window, DESCRIPTOR_BYTES,
};
use portable_atomic::{fence, Ordering};
use spin::Once;

use super::compute::{self, Kernel};
use super::{timelines, wake, window, RingRegisters, Timeline, FRONTIER, HOME, RINGS};

/// The ring's device waits are WAIT descriptors: a wait may be published before its signal.
const CAPABILITIES: Capabilities = Capabilities { wait_before_signal: true };

/// Words of a descriptor in memory.
const DESCRIPTOR_WORDS: usize = (DESCRIPTOR_BYTES / 4) as usize;

/// The words of a descriptor the controller's bookkeeping reads (the protocol crate's
/// descriptor table): the header, the target (kernel or slot) and the value's two halves. The
/// rest decodes as zeros, which changes nothing the controller uses: an EXEC's arguments come
/// from the engine's request, and decoding judges only the header and the slot.
const NAMING_WORDS: [usize; 4] = [0, 2, 4, 5];

/// How the controller disposed of the WAIT descriptors it completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCounts {
    /// WAIT descriptors consumed (well-formed ones; a malformed WAIT is a malformed
    /// descriptor).
    pub emitted: u32,
    /// Completed without stalling, the ring already knowing the signal that reached the value.
    pub elided: u32,
    /// Completed without stalling, the value reached by a signal the ring did not know yet
    /// (its frontier imported), or by the semaphore's initial value.
    pub satisfied: u32,
    /// Stalled at least once before the value was reached.
    pub stalled: u32,
    /// Completed with an error (a failed semaphore, a failed chain).
    pub failed: u32,
}

/// One ring's controller state; only that ring's drain and the host between runs touch it.
pub struct RingController {
    ring: usize,
    engine: Engine<RingRegisters>,
    clock: QueueClock<FRONTIER>,
    /// The EXEC running on the ring's compute engine, and the kernel it runs.
    running: Option<(ExecRequest, Kernel)>,
    /// The slot whose core semaphore holds this ring's timepoint, armed when the head WAIT
    /// stalled; the timepoint is withdrawn when that WAIT completes.
    armed_on: Option<usize>,
    /// The head WAIT has stalled.
    stalled: bool,
    waits: WaitCounts,
    /// Descriptors completed with an error status.
    errors: u32,
}

/// What the head slot holds, as far as the controller's bookkeeping needs it.
enum Head {
    /// Nothing published.
    Empty,
    /// A well-formed descriptor's command.
    Command(Command),
    /// A descriptor the engine will complete as malformed.
    Malformed,
    /// The EXEC whose kernel ran (or was refused): an operation that signals nothing.
    Ran,
}

impl RingController {
    /// The controller of ring `ring`, whose registers are `registers`, on queue axis `axis`.
    pub fn new(ring: usize, registers: RingRegisters, axis: causeway_core::Axis) -> RingController {
        RingController {
            ring,
            engine: Engine::new(registers),
            clock: QueueClock::new(axis, HOME, CAPABILITIES),
            running: None,
            armed_on: None,
            stalled: false,
            waits: WaitCounts::default(),
            errors: 0,
        }
    }

    /// The WAIT dispositions so far.
    pub fn waits(&self) -> WaitCounts {
        self.waits
    }

    /// Descriptors completed with an error status so far.
    pub fn errors(&self) -> u32 {
        self.errors
    }

    /// What the ring knows.
    pub fn clock(&self) -> &QueueClock<FRONTIER> {
        &self.clock
    }

    /// One drain call (see the [module documentation](self)).
    fn advance(&mut self, window: &Window<'static>) -> Drained {
        if let Some((request, kernel)) = self.running.take() {
            if !compute::take_finished(self.ring) {
                self.running = Some((request, kernel));
                return Drained::Sleep;
            }
            let outcome = kernel.run(window, &request.arguments);
            let step = self.engine.finish(window, request, outcome);
            return self.settle(Head::Ran, step);
        }
        let head = self.read_head(window);
        let step = self.engine.step(window);
        self.settle(head, step)
    }

    /// Reads the head descriptor if one is published: the tail, an acquire fence (as the
    /// engine's own read), the head, then the slot.
    fn read_head(&self, window: &Window<'static>) -> Head {
        let registers = self.engine.registers();
        let tail = registers.read(Register::Tail);
        // Acquire: pairs with the producer's release fence before its tail write, so the slots
        // below the tail are visible.
        fence(Ordering::Acquire);
        let head = registers.read(Register::Head);
        if tail == head {
            return Head::Empty;
        }
        let layout = RingLayout::read(registers);
        let base = layout.slot_address(head);
        let mut raw = RawDescriptor([0; DESCRIPTOR_WORDS]);
        for index in NAMING_WORDS {
            // A layout the engine refused reads as zeros; the engine then consumes nothing.
            raw.0[index] = window
                .word(base.wrapping_add(4 * index as u32))
                .map_or(0, |word| word.load(Ordering::Relaxed));
        }
        match raw.decode(Limits { semaphore_slots: layout.semaphore_count }) {
            Ok(descriptor) => Head::Command(descriptor.command),
            Err(_) => Head::Malformed,
        }
    }

    /// Acts on what the engine did with the descriptor `head` describes.
    fn settle(&mut self, head: Head, step: Step) -> Drained {
        match step {
            Step::Completed { status, semaphore_changed } => {
                self.completed(head, status, semaphore_changed);
                Drained::Progress
            }
            Step::Exec(request) => match Kernel::from_index(request.kernel) {
                Some(kernel) => {
                    let tiles = request.tiles;
                    self.running = Some((request, kernel));
                    compute::dispatch(self.ring, tiles);
                    // The engine's interrupt wakes this process; until then there is nothing
                    // to do (a wake that already came turns this into another drain).
                    Drained::Sleep
                }
                None => {
                    let window = window();
                    let step =
                        self.engine.finish(&window, request, Err(CompletionError::UnknownKernel));
                    self.settle(Head::Ran, step)
                }
            },
            Step::Stalled { slot, value } => {
                self.stalled = true;
                self.arm(slot, value)
            }
            Step::Transitioned => Drained::Progress,
            // The host's doorbell wakes the process.
            Step::Idle { .. } => Drained::Sleep,
        }
    }

    /// Sleeps until the slot's core semaphore reaches `value` (or fails): a timepoint on it
    /// wakes this ring's process.
    fn arm(&mut self, slot: u32, value: u64) -> Drained {
        let Some(timeline) = usize::try_from(slot).ok().and_then(|slot| timelines().get(slot))
        else {
            // A slot beyond the controller's table (a host that programmed a larger one): no
            // signal the controller completes can reach it; the next doorbell re-checks.
            return Drained::Sleep;
        };
        let slot = slot as usize;
        if let Some(previous) = self.armed_on.filter(|&armed| armed != slot) {
            // Left armed by a WAIT whose value a host write reached: withdraw it first.
            timelines()[previous].cancel(&timepoint(self.ring));
            self.armed_on = None;
        }
        // SAFETY: the timepoint and every core semaphore are statics (`TIMEPOINTS`,
        // `TIMELINES`), so they stay alive and in place for as long as the timepoint may be
        // linked.
        match unsafe { timeline.arm(timepoint(self.ring), value) } {
            // Reached (or failed) already: step again, the engine sees it too.
            Ok(Arm::Ready(_)) => Drained::Progress,
            Ok(Arm::Armed) => {
                self.armed_on = Some(slot);
                Drained::Sleep
            }
            // Still armed on this slot from the WAIT's earlier stall.
            Err(_) => Drained::Sleep,
        }
    }

    /// Applies a completed descriptor to the ring's clock and counts.
    fn completed(&mut self, head: Head, status: CompletionStatus, semaphore_changed: bool) {
        let failure = match status {
            CompletionStatus::Failed(error) => Some(error),
            CompletionStatus::Completed | CompletionStatus::Pending => None,
        };
        self.errors += u32::from(failure.is_some());
        match head {
            Head::Command(Command::Wait { slot, value }) => {
                self.completed_wait(slot, value, failure)
            }
            Head::Command(Command::Signal { slot, value }) => {
                let Some(timeline) = usize::try_from(slot).ok().and_then(|s| timelines().get(s))
                else {
                    return;
                };
                match failure {
                    None => self.completed_signal(timeline, value),
                    // The engine failed the slot; its core semaphore fails with it, so every
                    // ring stalled on it wakes to the failure.
                    Some(error) => {
                        timeline.fail(Failure::Faulted(error.failure_code()));
                    }
                }
            }
            // Nothing imported, nothing signalled: the clock stays as it was (see the module
            // documentation's "The ring's clock").
            Head::Command(Command::Exec { .. } | Command::Barrier)
            | Head::Ran
            | Head::Malformed => {}
            // Published after the controller looked (a host running beside it): had it been a
            // SIGNAL, no timepoint saw it, so every ring checks its stall again.
            Head::Empty => {
                if semaphore_changed {
                    (0..RINGS).for_each(wake);
                }
            }
        }
    }

    /// A SIGNAL the engine completed: the ring's operation signalling `value`, recorded with
    /// its frontier and retired at once (its value is in the table already).
    fn completed_signal(&mut self, timeline: &'static Timeline, value: u64) {
        match self.clock.begin().commit_signalling([(timeline, value)]) {
            Ok(_) => queue::retire([(timeline, value)], Ok(())),
            // The core semaphore refused a value the engine accepted: the two disagree about
            // the slot (a host that wrote it directly), so nothing exact can be said of it.
            Err(_) => {
                timeline.fail(Failure::OutOfOrderSignal);
            }
        }
    }

    /// A WAIT the engine completed: resolve it against the ring's knowledge and count it.
    fn completed_wait(&mut self, slot: u32, value: u64, failure: Option<CompletionError>) {
        self.waits.emitted += 1;
        let stalled = core::mem::take(&mut self.stalled);
        if let Some(armed) = self.armed_on.take() {
            // Fired already when the signal reached the value; withdrawn otherwise.
            let _ = timelines()[armed].cancel(&timepoint(self.ring));
        }
        if failure.is_some() {
            self.waits.failed += 1;
            return;
        }
        let Some(timeline) = usize::try_from(slot).ok().and_then(|s| timelines().get(s)) else {
            return;
        };
        // The elision test first, on the ring's frontier as it is: an elided WAIT imports
        // nothing, so it needs no operation of its own (a WAIT that stalled never is one: the
        // ring cannot have known a signal that had not happened). The price is a second lookup
        // for a WAIT that imports.
        if !stalled {
            let lookup = timeline.lookup(value);
            if let Ok((WaitResolution { resolution: Resolution::Elided, .. }, _)) =
                queue::resolve(self.clock.frontier(), &lookup, CAPABILITIES)
            {
                self.waits.elided += 1;
                return;
            }
        }
        let mut operation = self.clock.begin();
        let resolution = operation.wait(timeline, value).map(|resolved| resolved.resolution);
        let _ = operation.commit();
        match resolution {
            _ if stalled => self.waits.stalled += 1,
            Ok(Resolution::Elided) => self.waits.elided += 1,
            // Satisfied, or reached by a value the controller did not record (a host mirror):
            // either way the ring did not know the signal.
            Ok(_) => self.waits.satisfied += 1,
            // The core semaphore failed although the engine saw the value reached: count it
            // with the failures.
            Err(_) => self.waits.failed += 1,
        }
    }
}

/// Descriptors one drain call handles at most before the ring lets the others run: a ring's
/// worth, so a full ring is one drain call.
pub const DRAIN_BUDGET: u32 = 1 << super::RING_ORDER;

/// The process behaviour of ring `ring`.
pub struct RingDrain {
    /// The ring.
    pub ring: usize,
}

impl Drain for RingDrain {
    fn drain(&self, _cx: &mut DrainContext<'_, '_>) -> Drained {
        let Some(controllers) = CONTROLLERS.get() else {
            return Drained::Done(Err(Failure::Aborted));
        };
        let mut controller = controllers[self.ring].lock();
        let window = window();
        for _ in 1..DRAIN_BUDGET {
            match controller.advance(&window) {
                Drained::Progress => {}
                other => return other,
            }
        }
        controller.advance(&window)
    }
}

/// Each ring's controller, built at start-up (an engine reads its registers when created).
pub static CONTROLLERS: Once<[spin::Mutex<RingController>; RINGS]> = Once::new();

/// Wakes ring `.0`'s process: the callback of its timepoint.
pub struct WakeRing(pub usize);

impl Notify for WakeRing {
    fn notify(&self, _outcome: Outcome) {
        // A failure wakes it too: the engine then completes the WAIT with the failure.
        wake(self.0);
    }
}

static WAKERS: [WakeRing; RINGS] = [WakeRing(0), WakeRing(1), WakeRing(2)];

/// Each ring's timepoint (built on first use: `Timepoint::new` is not `const`).
static TIMEPOINTS: [Once<Timepoint<'static>>; RINGS] = [const { Once::new() }; RINGS];

fn timepoint(ring: usize) -> Pin<&'static Timepoint<'static>> {
    Pin::static_ref(TIMEPOINTS[ring].call_once(|| Timepoint::new(&WAKERS[ring])))
}

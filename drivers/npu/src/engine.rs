//! The device side of a ring: consume descriptors in order, stall on WAIT, release SIGNAL
//! values, complete, raise the interrupt.
//!
//! The engine never blocks and never spins: [`Engine::step`] does one thing and says what it
//! did, and whoever drives it (a thread of the software model, the controller's main loop)
//! sleeps when it answers [`Step::Idle`] or [`Step::Stalled`]: on the doorbell register while it
//! still holds the value the engine saw, or until the semaphore table changes.
//!
//! # States
//!
//! ```text
//!               control = Run, layout valid
//!   Stopped ─────────────────────────────────► Running ──┐ step: complete one descriptor,
//!      ▲  │  control = Run, layout invalid       │   ▲   │ or answer Exec / Stalled / Idle
//!      │  └────────────────────► Faulted(code)   │   └───┘
//!      │      control = Stop        │            │ tail beyond head + size
//!      ├────────────────────────────┘            └──────────► Faulted(TailOverrun)
//!      │      control = Stop (after the running descriptor)
//!      └──────────────────────────────────────── Running
//! ```
//!
//! # Going idle without losing a doorbell
//!
//! With nothing between head and tail, the engine reads the doorbell, issues an acquire fence
//! (pairing with the producer's release fence before its doorbell write), and reads the control
//! and tail registers again. If they still show nothing to do it answers
//! [`Step::Idle`] with the doorbell value it read, and its driver sleeps only while the doorbell
//! still holds it. A publication the second tail read missed wrote its doorbell after that
//! value (otherwise the fence would have made its tail visible), so the doorbell no longer
//! holds it: the sleep returns at once or is woken by the write.
//!
//! # Completing a descriptor
//!
//! 1. status word ← the status (relaxed);
//! 2. completion timeline ← completed count (release stores, `Window::store_u64`);
//! 3. release fence, head register ← completed count — pairs with the producer's acquire fence
//!    after its head read, so a reaped status is final;
//! 4. SeqCst fence, then read the acknowledge register — pairs with the producer's SeqCst fence
//!    in `arm_interrupt` (see [the interrupt wait](crate::producer#the-interrupt-wait));
//! 5. raise when the descriptor asked for it, failed, or the acknowledge equals the raise
//!    count: interrupt status ← raise count + 1 (ordered after 1–3 by the SeqCst fence).
//!
//! # Failures
//!
//! A descriptor that fails — malformed, an unknown kernel, a SIGNAL that does not advance, a
//! WAIT on a failed semaphore, a kernel that fails — completes with its error, and so does every
//! descriptor chained after it ([`CompletionError::ChainFailed`]); a failing SIGNAL marks its
//! semaphore failed, so WAITs on it on every ring fail instead of stalling forever.

use crate::descriptor::{
    word, Command, CompletionError, CompletionStatus, Limits, RawDescriptor, DESCRIPTOR_WORDS,
    EXEC_ARGUMENTS,
};
use crate::memory::Window;
use crate::registers::{Control, Register, RegisterIo};
use crate::ring::{ConfigFault, RingLayout};
use crate::sync::{fence, Ordering};

/// Where the engine is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EngineState {
    /// Not consuming; waiting for control = Run.
    Stopped,
    /// Consuming the ring laid out so.
    Running(RingLayout),
    /// The configuration was refused; waiting for control = Stop.
    Faulted(ConfigFault),
}

/// What one [`Engine::step`] did, and what the driver should do next.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Step {
    /// A descriptor completed; step again.
    Completed {
        /// Its status.
        status: CompletionStatus,
        /// A SIGNAL advanced or failed a semaphore: wake whatever stalls on the table.
        semaphore_changed: bool,
    },
    /// An EXEC to run: run it, then [`finish`](Engine::finish) it.
    Exec(ExecRequest),
    /// A WAIT whose semaphore has not reached its value: step again once the semaphore table
    /// changed.
    Stalled {
        /// The semaphore slot waited on.
        slot: u32,
        /// The value waited for.
        value: u64,
    },
    /// Nothing to do: sleep while the doorbell register holds `doorbell`, then step again.
    Idle {
        /// The doorbell value seen.
        doorbell: u32,
    },
    /// The control register changed state (started, stopped, faulted): step again.
    Transitioned,
}

/// A kernel to run for the descriptor at the head: pass it back to [`Engine::finish`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "run the kernel, then pass the request back to `Engine::finish`"]
pub struct ExecRequest {
    /// Kernel index.
    pub kernel: u32,
    /// Tiles to run.
    pub tiles: u32,
    /// Argument words.
    pub arguments: [u32; EXEC_ARGUMENTS],
    interrupt: bool,
}

/// The device's end of one ring.
#[derive(Debug)]
pub struct Engine<R: RegisterIo> {
    registers: R,
    state: EngineState,
    /// Descriptors completed (the head register, free-running).
    head: u32,
    /// Descriptors completed, 64-bit (the completion timeline).
    completed: u64,
    /// Interrupts raised (the interrupt status register).
    raised: u32,
    /// The last descriptor completed failed: chained descriptors after it fail too.
    chain_failed: bool,
}

impl<R: RegisterIo> Engine<R> {
    /// A stopped engine over `registers`, resuming from the head and interrupt count they hold
    /// (both 0 at reset; a restarted controller carries on where its predecessor stopped). The
    /// completion timeline resumes from memory when the ring starts.
    pub fn new(registers: R) -> Engine<R> {
        let head = registers.read(Register::Head);
        let raised = registers.read(Register::InterruptStatus);
        Engine {
            registers,
            state: EngineState::Stopped,
            head,
            completed: 0,
            raised,
            chain_failed: false,
        }
    }

    /// The register block.
    pub fn registers(&self) -> &R {
        &self.registers
    }

    /// Does the next thing the ring asks for (see the [module documentation](self)).
    pub fn step(&mut self, window: &Window<'_>) -> Step {
        let control = self.registers.read(Register::Control);
        // Acquire: pairs with the producer's release fence before it writes the control
        // register, so the configuration written before `Run` is visible.
        fence(Ordering::Acquire);
        let run = control == Control::Run as u32;
        match self.state {
            EngineState::Stopped if run => self.start(window),
            EngineState::Running(_) | EngineState::Faulted(_) if !run => self.stop(),
            EngineState::Running(layout) => self.consume(window, layout),
            EngineState::Stopped | EngineState::Faulted(_) => self.idle(),
        }
    }

    /// Stopped → Running, or → Faulted when the configuration is refused.
    fn start(&mut self, window: &Window<'_>) -> Step {
        let layout = RingLayout::read(&self.registers);
        match layout.validate(window) {
            Ok(()) => {
                // The layout is valid, so the timeline is inside the window; it only grows.
                self.completed = window.load_u64(layout.completion_address).unwrap_or(0);
                self.state = EngineState::Running(layout);
            }
            Err(fault) => self.fault(fault),
        }
        Step::Transitioned
    }

    /// Running or Faulted → Stopped; the fault register clears.
    fn stop(&mut self) -> Step {
        self.state = EngineState::Stopped;
        self.registers.write(Register::Fault, 0);
        Step::Transitioned
    }

    /// → Faulted: the fault register names the fault and the interrupt is raised.
    fn fault(&mut self, fault: ConfigFault) {
        self.state = EngineState::Faulted(fault);
        self.registers.write(Register::Fault, fault.code());
        // Release: pairs with the producer's acquire fence after its status read, so a host the
        // raise wakes sees the fault code.
        fence(Ordering::Release);
        self.raise();
    }

    /// Nothing to consume: idle on the doorbell.
    fn idle(&mut self) -> Step {
        let doorbell = self.registers.read(Register::Doorbell);
        // Acquire: pairs with the producer's release fence before its doorbell write.
        fence(Ordering::Acquire);
        let control = self.registers.read(Register::Control);
        let waiting = match self.state {
            EngineState::Stopped => control != Control::Run as u32,
            EngineState::Faulted(_) => control == Control::Run as u32,
            EngineState::Running(_) => {
                control == Control::Run as u32 && self.registers.read(Register::Tail) == self.head
            }
        };
        if waiting {
            Step::Idle { doorbell }
        } else {
            Step::Transitioned
        }
    }

    fn consume(&mut self, window: &Window<'_>, layout: RingLayout) -> Step {
        let tail = self.registers.read(Register::Tail);
        // Acquire: pairs with the producer's release fence before its tail write, so the slots
        // below the tail are visible.
        fence(Ordering::Acquire);
        let available = tail.wrapping_sub(self.head);
        if available == 0 {
            return self.idle();
        }
        if available > layout.capacity() {
            self.fault(ConfigFault::TailOverrun);
            return Step::Transitioned;
        }
        let raw = self.read_slot(window, &layout);
        let limits = Limits { semaphore_slots: layout.semaphore_count };
        let interrupt = raw.wants_interrupt();
        if self.chain_failed && raw.is_chained() {
            let changed = match raw.decode(limits).map(|descriptor| descriptor.command) {
                Ok(Command::Signal { slot, .. }) => window.fail_semaphore(
                    layout.semaphore_base,
                    slot,
                    CompletionError::ChainFailed.failure_code(),
                ),
                _ => false,
            };
            return self.complete(
                window,
                &layout,
                Err(CompletionError::ChainFailed),
                interrupt,
                changed,
            );
        }
        let descriptor = match raw.decode(limits) {
            Ok(descriptor) => descriptor,
            Err(error) => {
                return self.complete(
                    window,
                    &layout,
                    Err(CompletionError::Malformed(error)),
                    interrupt,
                    false,
                )
            }
        };
        match descriptor.command {
            Command::Exec { kernel, tiles, arguments } => {
                Step::Exec(ExecRequest { kernel, tiles, arguments, interrupt })
            }
            Command::Wait { slot, value } => {
                match window.semaphore(layout.semaphore_base, slot) {
                    Some(state) if state.failure != 0 => self.complete(
                        window,
                        &layout,
                        Err(CompletionError::SemaphoreFailed),
                        interrupt,
                        false,
                    ),
                    Some(state) if state.value >= value => {
                        self.complete(window, &layout, Ok(()), interrupt, false)
                    }
                    Some(_) => Step::Stalled { slot, value },
                    // The layout was validated, so the slot is inside the window.
                    None => self.complete(
                        window,
                        &layout,
                        Err(CompletionError::Malformed(
                            crate::DescriptorError::SemaphoreOutOfRange,
                        )),
                        interrupt,
                        false,
                    ),
                }
            }
            Command::Signal { slot, value } => {
                let outcome = self.signal(window, &layout, slot, value);
                self.complete(window, &layout, outcome, interrupt, true)
            }
            Command::Barrier => self.complete(window, &layout, Ok(()), interrupt, false),
        }
    }

    /// A SIGNAL: advance the slot, or fail it when the value does not advance.
    fn signal(
        &self,
        window: &Window<'_>,
        layout: &RingLayout,
        slot: u32,
        value: u64,
    ) -> Result<(), CompletionError> {
        let base = layout.semaphore_base;
        match window.semaphore(base, slot) {
            Some(state) if state.failure != 0 => Err(CompletionError::SemaphoreFailed),
            Some(state) if value > state.value => {
                window.signal_semaphore(base, slot, value);
                Ok(())
            }
            Some(_) => {
                let error = CompletionError::SignalNotAdvancing;
                window.fail_semaphore(base, slot, error.failure_code());
                Err(error)
            }
            None => Err(CompletionError::Malformed(crate::DescriptorError::SemaphoreOutOfRange)),
        }
    }

    /// Completes the EXEC `request` stood for, with the kernel's outcome.
    pub fn finish(
        &mut self,
        window: &Window<'_>,
        request: ExecRequest,
        outcome: Result<(), CompletionError>,
    ) -> Step {
        match self.state {
            EngineState::Running(layout) => {
                self.complete(window, &layout, outcome, request.interrupt, false)
            }
            // The ring stopped while the kernel ran: its descriptor stays for a restart.
            EngineState::Stopped | EngineState::Faulted(_) => Step::Transitioned,
        }
    }

    fn read_slot(&self, window: &Window<'_>, layout: &RingLayout) -> RawDescriptor {
        let base = layout.slot_address(self.head);
        let mut words = [0; DESCRIPTOR_WORDS];
        for (offset, value) in (0u32..).step_by(4).zip(words.iter_mut()) {
            // The layout was validated, so every slot word is inside the window.
            *value = window.word(base + offset).map_or(0, |word| word.load(Ordering::Relaxed));
        }
        RawDescriptor(words)
    }

    /// Completes the descriptor at the head (see [Completing a
    /// descriptor](self#completing-a-descriptor)).
    fn complete(
        &mut self,
        window: &Window<'_>,
        layout: &RingLayout,
        outcome: Result<(), CompletionError>,
        interrupt: bool,
        semaphore_changed: bool,
    ) -> Step {
        let status = match outcome {
            Ok(()) => CompletionStatus::Completed,
            Err(error) => CompletionStatus::Failed(error),
        };
        let status_address = layout.slot_address(self.head) + 4 * word::STATUS as u32;
        if let Some(word) = window.word(status_address) {
            word.store(status.to_word(), Ordering::Relaxed);
        }
        self.head = self.head.wrapping_add(1);
        self.completed += 1;
        self.chain_failed = outcome.is_err();
        window.store_u64(layout.completion_address, self.completed);
        // Release: pairs with the producer's acquire fence after its head read (step 3).
        fence(Ordering::Release);
        self.registers.write(Register::Head, self.head);
        // SeqCst: pairs with the producer's SeqCst fence in `arm_interrupt` (step 4).
        fence(Ordering::SeqCst);
        let acknowledged = self.registers.read(Register::InterruptAcknowledge);
        if interrupt || outcome.is_err() || acknowledged == self.raised {
            self.raise();
        }
        Step::Completed { status, semaphore_changed }
    }

    /// Raises the interrupt. Callers issue a SeqCst fence (also a release fence) after what the
    /// interrupt announces; it pairs with the producer's acquire fence after its status read.
    fn raise(&mut self) {
        self.raised = self.raised.wrapping_add(1);
        self.registers.write(Register::InterruptStatus, self.raised);
    }
}

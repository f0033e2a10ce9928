//! The host side of a ring: publish descriptors, reap their statuses, arm the interrupt.
//!
//! # Publishing
//!
//! A descriptor is written into its slot word by word (relaxed stores), then published:
//!
//! 1. release fence — pairs with the engine's acquire fence after it reads the tail, so a
//!    device that sees the new tail sees the slots below it;
//! 2. tail register ← descriptors published;
//! 3. release fence — pairs with the engine's acquire fence after it reads the doorbell, so a
//!    device that sees the new doorbell sees the new tail;
//! 4. doorbell register ← one more than its last value (the device's wake-up).
//!
//! Several descriptors may be written before one publication. A slot is written only while it
//! is free — its previous descriptor reaped — so a full ring makes [`Producer::try_push`]
//! answer [`RingFull`] and loses nothing.
//!
//! # Reaping
//!
//! The head register counts completed descriptors; the engine writes each status word before
//! it releases the head, so after an acquire fence the statuses below the head are final and
//! their slots may be reused.
//!
//! # The interrupt wait
//!
//! ```text
//!            arm_interrupt: seen ← status; acknowledge ← seen; SeqCst fence
//!  running ─────────────────────────────────────────────────────────────────► armed(seen)
//!     ▲                                                                          │
//!     │   condition holds (re-checked after arming)          condition not met   │
//!     └────────────────────────────── woken / status ≠ seen ◄── sleep while status = seen
//! ```
//!
//! Writing the acknowledge register with the status it read tells the device "I have seen every
//! interrupt so far; raise the next one". The device completes a descriptor by storing the head
//! and the completion timeline, issuing a SeqCst fence, and reading the acknowledge register;
//! it raises when the acknowledge equals its raise count. The two SeqCst fences are ordered one
//! way or the other: if the host's comes first, the device reads the new acknowledge and raises
//! (so the status moves off `seen` and the sleep ends or never starts); if the device's comes
//! first, the host's re-check after arming sees the completion. A store followed by a load of
//! another location is the one pattern acquire and release cannot order, hence SeqCst.

use crate::descriptor::{word, CompletionStatus, Descriptor, RawDescriptor, UnknownStatus};
use crate::memory::Window;
use crate::registers::{Control, Register, RegisterIo};
use crate::ring::{ConfigFault, RingFull, RingIndices, RingLayout};
use crate::sync::{fence, Ordering};

/// A reaped descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reaped {
    /// Its sequence number: 1 for the ring's first descriptor; the completion timeline reaches
    /// it when the descriptor completes.
    pub sequence: u64,
    /// The status the device wrote.
    pub status: Result<CompletionStatus, UnknownStatus>,
}

/// The host's end of one ring.
#[derive(Debug)]
pub struct Producer<'a, R: RegisterIo> {
    registers: R,
    window: Window<'a>,
    layout: RingLayout,
    indices: RingIndices,
    /// Descriptors pushed since the producer started (the last one's sequence number).
    pushed: u64,
    /// Descriptors reaped since the producer started.
    reaped: u64,
    doorbells: u32,
}

/// An armed interrupt wait: sleep while the interrupt status still holds
/// [`seen`](ArmedInterrupt::seen), after re-checking the condition waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "re-check the condition, then sleep while the status holds `seen`"]
pub struct ArmedInterrupt {
    seen: u32,
}

impl ArmedInterrupt {
    /// The interrupt status when the wait was armed: sleep while the register still holds it.
    pub const fn seen(&self) -> u32 {
        self.seen
    }
}

impl<'a, R: RegisterIo> Producer<'a, R> {
    /// Programs `layout` into a stopped ring, starts it, and returns its producer. The host
    /// checks the layout as the device will, and refuses it with the same fault.
    pub fn start(
        registers: R,
        window: Window<'a>,
        layout: RingLayout,
    ) -> Result<Producer<'a, R>, ConfigFault> {
        layout.validate(&window)?;
        let head = registers.read(Register::Head);
        let mut producer = Producer {
            indices: RingIndices::new(layout.ring_order, head),
            doorbells: registers.read(Register::Doorbell),
            registers,
            window,
            layout,
            pushed: 0,
            reaped: 0,
        };
        layout.program(&producer.registers);
        producer.registers.write(Register::Tail, head);
        // Release: pairs with the engine's acquire fence after it reads the control register, so
        // a device that sees `Run` sees the configuration and tail above.
        fence(Ordering::Release);
        producer.registers.write(Register::Control, Control::Run as u32);
        producer.ring_doorbell();
        Ok(producer)
    }

    /// The ring's layout.
    pub fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// The ring's indices.
    pub fn indices(&self) -> &RingIndices {
        &self.indices
    }

    /// The register block.
    pub fn registers(&self) -> &R {
        &self.registers
    }

    /// Writes `descriptor` into the next free slot, unpublished; its sequence number.
    /// [`RingFull`] when every slot holds a descriptor not yet reaped.
    pub fn try_push(&mut self, descriptor: &Descriptor) -> Result<u64, RingFull> {
        self.try_push_raw(&descriptor.encode())
    }

    /// Writes `raw` as it is — any bit pattern, well-formed or not — into the next free slot,
    /// unpublished, with its status word set pending; its sequence number. For fault injection
    /// and for descriptors built elsewhere.
    pub fn try_push_raw(&mut self, raw: &RawDescriptor) -> Result<u64, RingFull> {
        let index = self.indices.push()?;
        let base = self.layout.slot_address(index);
        let mut words = raw.0;
        words[word::STATUS] = CompletionStatus::Pending.to_word();
        for (offset, value) in (0u32..).step_by(4).zip(words) {
            // `start` validated the layout, so every slot word is inside the window.
            if let Some(word) = self.window.word(base + offset) {
                word.store(value, Ordering::Relaxed);
            }
        }
        self.pushed += 1;
        Ok(self.pushed)
    }

    /// Publishes every descriptor pushed so far and rings the doorbell (see the [module
    /// documentation](self#publishing)).
    pub fn publish(&mut self) {
        // Release: pairs with the engine's acquire fence after its tail read (step 1).
        fence(Ordering::Release);
        self.registers.write(Register::Tail, self.indices.tail());
        self.ring_doorbell();
    }

    fn ring_doorbell(&mut self) {
        // Release: pairs with the engine's acquire fence after its doorbell read (step 3).
        fence(Ordering::Release);
        self.doorbells = self.doorbells.wrapping_add(1);
        self.registers.write(Register::Doorbell, self.doorbells);
    }

    /// Reaps the oldest completed descriptor, if any: its slot becomes free.
    pub fn reap(&mut self) -> Option<Reaped> {
        let head = self.registers.read(Register::Head);
        // Acquire: pairs with the engine's release fence before it writes the head, which
        // follows its status write.
        fence(Ordering::Acquire);
        if self.indices.reapable(head) == 0 {
            return None;
        }
        let index = self.indices.reap()?;
        let address = self.layout.slot_address(index) + 4 * word::STATUS as u32;
        let status = self.window.word(address).map_or(0, |word| word.load(Ordering::Relaxed));
        self.reaped += 1;
        Some(Reaped { sequence: self.reaped, status: CompletionStatus::from_word(status) })
    }

    /// Whether every descriptor pushed has been reaped.
    pub fn is_drained(&self) -> bool {
        self.reaped == self.pushed
    }

    /// The ring's completion timeline: descriptors completed so far (possibly an underestimate
    /// while the device advances it).
    pub fn completion(&self) -> u64 {
        self.window.load_u64(self.layout.completion_address).unwrap_or(0)
    }

    /// Why the device refused the ring, if it did.
    pub fn fault(&self) -> Option<ConfigFault> {
        ConfigFault::from_code(self.registers.read(Register::Fault))
    }

    /// Acknowledges every interrupt so far and asks for the next (see the [module
    /// documentation](self#the-interrupt-wait)). Re-check the condition waited for after this,
    /// and sleep only while the interrupt status holds [`ArmedInterrupt::seen`].
    pub fn arm_interrupt(&self) -> ArmedInterrupt {
        let seen = self.registers.read(Register::InterruptStatus);
        // Acquire: pairs with the engine's SeqCst fence before it writes the interrupt status,
        // so what the device did before raising is visible to the re-check.
        fence(Ordering::Acquire);
        self.registers.write(Register::InterruptAcknowledge, seen);
        // SeqCst: pairs with the engine's SeqCst fence between its completion stores and its
        // read of the acknowledge register (store then load on both sides: see the module docs).
        fence(Ordering::SeqCst);
        ArmedInterrupt { seen }
    }

    /// Stops the ring: the device finishes the descriptor it is running, if any, and consumes
    /// no more.
    pub fn stop(&mut self) {
        self.registers.write(Register::Control, Control::Stop as u32);
        self.ring_doorbell();
    }
}

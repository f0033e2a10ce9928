//! The software device model: the device side of the protocol, played over the same memory
//! layout by threads of its own — one engine thread per ring — so the host side can be built
//! and tested without the hardware.
//!
//! - **Memory.** The model owns the device's memory window (the semaphore table, then each
//!   ring's completion timeline and slots) and one register block per ring. The host reaches
//!   them only through [`Producer`], as it would reach real MMIO.
//! - **The bus.** A write to a ring's doorbell register wakes that ring's engine; a write to its
//!   interrupt status wakes the host waiting for it: both are a futex wake on the register's
//!   own word (`causeway-platform-linux`), so no thread ever spins while idle.
//! - **Kernels.** EXEC runs kernel `kernel` of the model's table for every tile in order, on the
//!   engine's thread. A kernel is an [`ExecKernel`]; the CPU driver's kernels (the tiled
//!   [`causeway_driver_cpu::Kernel`] its block processor runs) plug in unchanged through
//!   [`TileKernel`]. A kernel that panics fails its descriptor ([`CompletionError::KernelFailed`]).
//! - **Stalls.** An engine stalled on a WAIT sleeps on the model's semaphore generation, a
//!   futex word every SIGNAL (and every host write to the table) bumps after writing its slot.
//!   The stalled engine reads the generation before re-checking its slot, so a signal it missed
//!   bumped the word after that read and the sleep does not start or is woken.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering as StdOrdering};
use std::sync::Arc;
use std::thread::JoinHandle;

use causeway_core::executor::{Futex, FutexWord};
use causeway_device::Recorded;
use causeway_platform_linux::HostFutex;

use crate::descriptor::{CompletionError, DESCRIPTOR_BYTES, EXEC_ARGUMENTS};
use crate::engine::{Engine, ExecRequest, Step};
use crate::memory::{Window, SEMAPHORE_SLOT_BYTES};
use crate::producer::{Producer, Reaped};
use crate::registers::{Register, RegisterFile, RegisterIo};
use crate::ring::{ConfigFault, RingLayout, MAX_RING_ORDER};
use crate::sync::Ordering;

static FUTEX: HostFutex = HostFutex::new();

/// A kernel the model runs for EXEC descriptors: called once per tile, in tile order, with the
/// descriptor's argument words.
pub trait ExecKernel: Send + Sync {
    /// Runs tile `tile`. A panic fails the descriptor.
    fn run(&self, arguments: &[u32; EXEC_ARGUMENTS], tile: u32);
}

impl<F: Fn(&[u32; EXEC_ARGUMENTS], u32) + Send + Sync> ExecKernel for F {
    fn run(&self, arguments: &[u32; EXEC_ARGUMENTS], tile: u32) {
        self(arguments, tile);
    }
}

/// The model's kernel table: EXEC's kernel index selects one. Kernels are loaded into it
/// before the model starts and while it runs; an index the table does not hold fails its EXEC
/// ([`CompletionError::UnknownKernel`]).
pub type KernelTable = Recorded<Box<dyn ExecKernel>>;

/// A CPU-driver kernel ([`causeway_driver_cpu::DeviceKernel`]) as a model kernel: it reads the
/// EXEC's argument words as the operation's [`Args`](causeway_device::Args), the same 32 bytes
/// the CPU driver hands its kernels, so one kernel runs on either driver.
pub struct TileKernel(pub causeway_driver_cpu::DeviceKernel);

// An EXEC carries exactly an operation's arguments, no more and no fewer.
const _: () = assert!(EXEC_ARGUMENTS == causeway_device::ARG_WORDS);

impl ExecKernel for TileKernel {
    fn run(&self, arguments: &[u32; EXEC_ARGUMENTS], tile: u32) {
        self.0.run(tile, &causeway_device::Args::from_words(*arguments));
    }
}

impl fmt::Debug for TileKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TileKernel")
    }
}

/// The shape of a model device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelConfig {
    /// Engines, one ring each.
    pub engines: usize,
    /// log2 of each ring's slot count (at most [`MAX_RING_ORDER`]).
    pub ring_order: u32,
    /// Semaphore slots, shared by every ring.
    pub semaphore_slots: u32,
}

/// A register block whose doorbell and interrupt status writes wake their sleepers.
#[derive(Debug, Default)]
pub struct ModelRegisters {
    file: RegisterFile,
}

impl ModelRegisters {
    /// The word behind `register`.
    pub fn word(&self, register: Register) -> &FutexWord {
        self.file.word(register)
    }
}

impl RegisterIo for ModelRegisters {
    fn read(&self, register: Register) -> u32 {
        self.file.read(register)
    }

    fn write(&self, register: Register, value: u32) {
        self.file.write(register, value);
        if matches!(register, Register::Doorbell | Register::InterruptStatus) {
            // The futex wake is the model's interrupt line: it follows the store, so a sleeper
            // that compared the old value is woken.
            FUTEX.wake_all(self.file.word(register));
        }
    }
}

struct Shared {
    memory: Box<[FutexWord]>,
    registers: Box<[ModelRegisters]>,
    layouts: Box<[RingLayout]>,
    kernels: Arc<KernelTable>,
    /// Bumped after every write to the semaphore table; stalled engines sleep on it.
    semaphore_generation: FutexWord,
    stopping: AtomicBool,
}

impl Shared {
    fn window(&self) -> Window<'_> {
        Window::new(&self.memory)
    }

    fn semaphores_changed(&self) {
        // Release: pairs with a stalled engine's acquire load of the generation, so an engine
        // that sees the new generation sees the slot written before it.
        self.semaphore_generation.fetch_add(1, Ordering::Release);
        FUTEX.wake_all(&self.semaphore_generation);
    }
}

/// Why a model could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelError {
    /// The ring order exceeds [`MAX_RING_ORDER`], or there are no engines.
    BadShape,
    /// The memory the configuration needs does not fit a 32-bit bus.
    TooLarge,
    /// An engine thread could not be spawned.
    Spawn,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelError::BadShape => "no engines, or a ring order above the maximum",
            ModelError::TooLarge => "the device memory does not fit a 32-bit bus",
            ModelError::Spawn => "an engine thread could not be spawned",
        })
    }
}

impl std::error::Error for ModelError {}

/// A running software device. Dropping it stops its engines and joins their threads.
pub struct DeviceModel {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for DeviceModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceModel")
            .field("engines", &self.shared.layouts.len())
            .field("kernels", &self.shared.kernels.len())
            .finish_non_exhaustive()
    }
}

impl DeviceModel {
    /// Starts a device shaped by `config` with kernel table `kernels` (EXEC's kernel index
    /// selects one; kernels loaded into the table later are found as well): one engine thread
    /// per ring, each asleep on its doorbell until the host starts its ring
    /// ([`ring`](Self::ring)).
    pub fn start(
        config: ModelConfig,
        kernels: Arc<KernelTable>,
    ) -> Result<DeviceModel, ModelError> {
        if config.engines == 0 || config.ring_order > MAX_RING_ORDER {
            return Err(ModelError::BadShape);
        }
        let layouts = lay_out(config).ok_or(ModelError::TooLarge)?;
        let bytes = layouts.last().map_or(0, |last| {
            u64::from(last.ring_base) + u64::from(last.capacity() * DESCRIPTOR_BYTES)
        });
        let words = usize::try_from(bytes / 4).map_err(|_| ModelError::TooLarge)?;
        let shared = Arc::new(Shared {
            memory: (0..words).map(|_| FutexWord::new(0)).collect(),
            registers: (0..config.engines).map(|_| ModelRegisters::default()).collect(),
            layouts: layouts.into_boxed_slice(),
            kernels,
            semaphore_generation: FutexWord::new(0),
            stopping: AtomicBool::new(false),
        });
        let mut model = DeviceModel { shared, threads: Vec::with_capacity(config.engines) };
        for engine in 0..config.engines {
            let shared = Arc::clone(&model.shared);
            let thread = std::thread::Builder::new()
                .name(format!("npu-engine-{engine}"))
                .spawn(move || run_engine(&shared, engine))
                .map_err(|_| ModelError::Spawn)?;
            model.threads.push(thread);
        }
        Ok(model)
    }

    /// Rings (engines) of the device.
    pub fn rings(&self) -> usize {
        self.shared.layouts.len()
    }

    /// Where ring `ring`'s parts live.
    pub fn layout(&self, ring: usize) -> Option<RingLayout> {
        self.shared.layouts.get(ring).copied()
    }

    /// The device's memory window.
    pub fn window(&self) -> Window<'_> {
        self.shared.window()
    }

    /// Ring `ring`'s register block.
    pub fn registers(&self, ring: usize) -> Option<&ModelRegisters> {
        self.shared.registers.get(ring)
    }

    /// Starts ring `ring` with the model's layout and returns the host's end of it. One host
    /// end per ring at a time: the producer is the registers' only host-side writer.
    pub fn ring(&self, ring: usize) -> Result<HostRing<'_>, ConfigFault> {
        let (Some(registers), Some(layout)) = (self.registers(ring), self.layout(ring)) else {
            return Err(ConfigFault::RingOutsideWindow);
        };
        Ok(HostRing { producer: Producer::start(registers, self.window(), layout)? })
    }

    /// Advances semaphore slot `slot` to `value` from the host (a value reached elsewhere),
    /// waking stalled engines. The host must be the slot's only writer while it does (no ring
    /// signals it meanwhile). `false` when the slot is outside the table.
    pub fn signal_from_host(&self, slot: u32, value: u64) -> bool {
        let Some(base) = self.shared.layouts.first().map(|layout| layout.semaphore_base) else {
            return false;
        };
        let in_table = self.shared.layouts.iter().all(|layout| slot < layout.semaphore_count);
        let written = in_table && self.window().signal_semaphore(base, slot, value);
        if written {
            self.shared.semaphores_changed();
        }
        written
    }

    /// Semaphore slot `slot`'s value and failure code.
    pub fn semaphore(&self, slot: u32) -> Option<crate::memory::SemaphoreState> {
        let layout = self.shared.layouts.first()?;
        (slot < layout.semaphore_count)
            .then(|| self.window().semaphore(layout.semaphore_base, slot))
            .flatten()
    }

    /// Stops every engine (after the descriptor it runs) and joins the threads.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        // Release: pairs with the engine threads' acquire loads of `stopping`.
        self.shared.stopping.store(true, StdOrdering::Release);
        // No host end outlives `self` (they borrow it), so the model may write the doorbells:
        // each engine asleep on one sees it move and finds `stopping`.
        for registers in self.shared.registers.iter() {
            // Release: pairs with the engine's acquire fence after its doorbell read, so an
            // engine that read this value sees `stopping` set.
            registers.word(Register::Doorbell).fetch_add(1, Ordering::Release);
            FUTEX.wake_all(registers.word(Register::Doorbell));
        }
        self.shared.semaphores_changed();
        for thread in self.threads.drain(..) {
            // An engine thread contains kernel panics, so it returns normally.
            let _ = thread.join();
        }
    }
}

impl Drop for DeviceModel {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The semaphore table at 0, then for each ring its completion timeline (padded to a
/// descriptor) and its slots. `None` when it does not fit a 32-bit bus.
fn lay_out(config: ModelConfig) -> Option<Vec<RingLayout>> {
    let table = config.semaphore_slots.checked_mul(SEMAPHORE_SLOT_BYTES)?;
    let mut next = table.checked_next_multiple_of(DESCRIPTOR_BYTES)?;
    let ring_bytes = (1u32 << config.ring_order).checked_mul(DESCRIPTOR_BYTES)?;
    let mut layouts = Vec::with_capacity(config.engines);
    for _ in 0..config.engines {
        let completion_address = next;
        let ring_base = completion_address.checked_add(DESCRIPTOR_BYTES)?;
        next = ring_base.checked_add(ring_bytes)?;
        layouts.push(RingLayout {
            ring_base,
            ring_order: config.ring_order,
            semaphore_base: 0,
            semaphore_count: config.semaphore_slots,
            completion_address,
        });
    }
    Some(layouts)
}

/// An engine thread: steps the ring's engine, sleeping when it is idle or stalled.
fn run_engine(shared: &Shared, ring: usize) {
    let (Some(registers), window) = (shared.registers.get(ring), shared.window()) else {
        return;
    };
    let mut engine = Engine::new(registers);
    // The semaphore generation read after a stall was first seen; the engine steps once more
    // (re-checking the slot) before sleeping on it, so a signal between the two bumped it.
    let mut stalled_at: Option<u32> = None;
    loop {
        // Acquire: pairs with `shut_down`'s release store.
        if shared.stopping.load(StdOrdering::Acquire) {
            return;
        }
        let step = engine.step(&window);
        let generation = stalled_at.take();
        match step {
            Step::Completed { semaphore_changed, .. } => {
                if semaphore_changed {
                    shared.semaphores_changed();
                }
            }
            Step::Exec(request) => {
                let outcome = run_exec(shared, &request);
                // An EXEC changes no semaphore, so its completion needs no wake-up.
                let _ = engine.finish(&window, request, outcome);
            }
            Step::Stalled { .. } => match generation {
                Some(generation) => FUTEX.wait(&shared.semaphore_generation, generation, None),
                // Acquire: pairs with `semaphores_changed`'s release increment.
                None => stalled_at = Some(shared.semaphore_generation.load(Ordering::Acquire)),
            },
            // A doorbell `shut_down` moved may be the one this step read: `stopping` is checked
            // again (the engine's acquire fence after the doorbell read pairs with the release
            // increment there), so the engine never sleeps on the last doorbell.
            Step::Idle { doorbell } => {
                // Acquire: pairs with `shut_down`'s release store.
                if !shared.stopping.load(StdOrdering::Acquire) {
                    FUTEX.wait(registers.word(Register::Doorbell), doorbell, None);
                }
            }
            Step::Transitioned => {}
        }
    }
}

/// Runs an EXEC's kernel over its tiles, containing a panic as the descriptor's failure.
fn run_exec(shared: &Shared, request: &ExecRequest) -> Result<(), CompletionError> {
    let Some(kernel) = shared.kernels.get(request.kernel) else {
        return Err(CompletionError::UnknownKernel);
    };
    let tiles = || (0..request.tiles).for_each(|tile| kernel.run(&request.arguments, tile));
    catch_unwind(AssertUnwindSafe(tiles)).map_err(|_| CompletionError::KernelFailed)
}

/// The host's end of a model ring: a [`Producer`] plus the blocking waits the model's interrupt
/// line allows. The waits block for as long as the device holds the descriptors waited for —
/// a WAIT whose value never comes stalls its ring, as on hardware; deadlines are the caller's.
#[derive(Debug)]
pub struct HostRing<'a> {
    producer: Producer<'a, &'a ModelRegisters>,
}

impl<'a> HostRing<'a> {
    /// The producer, for everything that does not block.
    pub fn producer(&mut self) -> &mut Producer<'a, &'a ModelRegisters> {
        &mut self.producer
    }

    /// Pushes `descriptor`, waiting while the ring is full and handing every descriptor reaped
    /// meanwhile to `reaped`; its sequence number. Unpublished descriptors are published before
    /// waiting, so the device can make room. `Err` when the device refused the ring.
    pub fn push(
        &mut self,
        descriptor: &crate::Descriptor,
        reaped: &mut impl FnMut(Reaped),
    ) -> Result<u64, ConfigFault> {
        loop {
            if let Ok(sequence) = self.producer.try_push(descriptor) {
                return Ok(sequence);
            }
            self.producer.publish();
            self.wait_until(reaped, |producer| producer.indices().free() > 0)?;
        }
    }

    /// Publishes what was pushed and waits until every descriptor is reaped, handing each to
    /// `reaped`. `Err` when the device refused the ring.
    pub fn drain(&mut self, reaped: &mut impl FnMut(Reaped)) -> Result<(), ConfigFault> {
        self.producer.publish();
        self.wait_until(reaped, Producer::is_drained)
    }

    /// Reaps into `reaped` until `done` holds, sleeping on the interrupt status in between.
    fn wait_until(
        &mut self,
        reaped: &mut impl FnMut(Reaped),
        done: impl Fn(&Producer<'a, &'a ModelRegisters>) -> bool,
    ) -> Result<(), ConfigFault> {
        loop {
            while let Some(descriptor) = self.producer.reap() {
                reaped(descriptor);
            }
            if done(&self.producer) {
                return Ok(());
            }
            let armed = self.producer.arm_interrupt();
            // The re-check after arming: a completion or a fault before the arm is seen here.
            if let Some(fault) = self.producer.fault() {
                return Err(fault);
            }
            if let Some(descriptor) = self.producer.reap() {
                reaped(descriptor);
                continue;
            }
            let status = self.producer.registers().word(Register::InterruptStatus);
            FUTEX.wait(status, armed.seen(), None);
        }
    }
}

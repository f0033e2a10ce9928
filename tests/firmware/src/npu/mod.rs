//! The NPU controller: causeway-core's executor as the device-side scheduler of three
//! descriptor rings, speaking `causeway-driver-npu`'s protocol — the same
//! [`Engine`](causeway_driver_npu::Engine) and
//! [`Producer`] code as the hosted driver and its software model — with a host in the image.
//!
//! - [`controller`]: one process per ring consumes its descriptors through the ring's
//!   [`Engine`](causeway_driver_npu::Engine), keeps the ring's [`QueueClock`](causeway_core::QueueClock), records each
//!   SIGNAL's frontier on the slot's core [`Semaphore`] and elides every WAIT the ring already
//!   knows is satisfied (counted); a WAIT that stalls sleeps on a timepoint of that semaphore.
//! - [`compute`]: the engines EXECs are dispatched to, modelled by the tick interrupt, and
//!   their kernels.
//! - [`scenario`]: the host — a [`Producer`] per ring pushing a three-stage pipeline, then
//!   malformed and failing descriptors that must complete with their error statuses — and the
//!   run's checks (`npu_controller` image).
//! - [`cost`]: instructions per descriptor of each kind under qemu's `-icount` (`npu_cost`
//!   image).
//!
//! The rings, the semaphore table, the completion timelines and the kernels' data share one
//! memory window in RAM (a static array of words, as shared memory between host and device);
//! each ring's register block is a RAM region both sides reach only through
//! [`VolatileRegisters`], as they would a device's MMIO block. Everything lives in statics,
//! built at start-up into zeroed RAM, nothing on a heap.

pub mod compute;
pub mod controller;
pub mod cost;
pub mod scenario;

use causeway_core::executor::{Class, Executor, Process, RoundRobin, SpinPolicy, Worker};
use causeway_core::{AxisAllocator, Domain, Endpoint, Scope, Semaphore};
use core::cell::UnsafeCell;
use core::ptr::NonNull;

use causeway_driver_npu::{
    Producer, Register, RegisterIo, RingLayout, VolatileRegisters, Window, DESCRIPTOR_BYTES,
};
use causeway_platform_baremetal::BareMetalFutex;
use portable_atomic::AtomicU32;
use spin::{Mutex, Once};

use controller::{RingController, RingDrain, CONTROLLERS};

/// Descriptor rings, one per causeway queue.
pub const RINGS: usize = 3;
/// log2 of each ring's slot count.
pub const RING_ORDER: u32 = 3;
/// Semaphore slots in the table.
pub const SEMAPHORE_SLOTS: u32 = 4;

/// Frontier capacity: one entry per ring axis, so no knowledge is ever evicted.
pub const FRONTIER: usize = RINGS;
/// Signals each slot's core semaphore remembers.
const HISTORY: usize = 4;

/// A semaphore slot as the controller knows it.
pub type Timeline = Semaphore<HISTORY, FRONTIER>;
type NpuExecutor = Executor<'static, BareMetalFutex, 1, 1>;
/// The main loop's worker.
pub type NpuWorker = Worker<'static, 'static, BareMetalFutex, RoundRobin, 1, 1>;

const HOME: Endpoint = Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

// The memory window, by bus address (bytes): the rings, the semaphore table, each ring's
// completion timeline, then the kernels' data words.
const RING_BYTES: u32 = (1 << RING_ORDER) * DESCRIPTOR_BYTES;
const SEMAPHORE_BASE: u32 = RINGS as u32 * RING_BYTES;
const COMPLETION_BASE: u32 = SEMAPHORE_BASE + SEMAPHORE_SLOTS * 16;
/// Bus address of the first data word.
pub const DATA_BASE: u32 = COMPLETION_BASE + RINGS as u32 * 8;
/// Data words after the rings.
pub const DATA_WORDS: u32 = 12;
const WINDOW_WORDS: usize = ((DATA_BASE + 4 * DATA_WORDS) / 4) as usize;

/// Bus address of data word `index`.
pub const fn data_address(index: u32) -> u32 {
    DATA_BASE + 4 * index
}

/// The shared memory: zero at reset, so it costs no flash.
static MEMORY: [AtomicU32; WINDOW_WORDS] = [const { AtomicU32::new(0) }; WINDOW_WORDS];

/// A ring's register block: RAM standing in for a device's MMIO block.
#[repr(C, align(4))]
struct RegisterBlock([UnsafeCell<u32>; Register::COUNT]);

// SAFETY: the cells are reached only through `VolatileRegisters` (`ring_registers`), whose
// accesses are single 32-bit volatile loads and stores; every register has one writer (the
// protocol's register map), and the image runs on one core whose interrupt handlers never touch
// the registers, so no access races another.
unsafe impl Sync for RegisterBlock {}

static REGISTER_BLOCKS: [RegisterBlock; RINGS] =
    [const { RegisterBlock([const { UnsafeCell::new(0) }; Register::COUNT]) }; RINGS];

/// One side's handle on a ring's register block.
pub struct RingRegisters(VolatileRegisters);

// SAFETY: the handle holds only the address of a static block (`REGISTER_BLOCKS`), valid in
// any context for the program's whole life; moving it moves no access.
unsafe impl Send for RingRegisters {}

impl RegisterIo for RingRegisters {
    fn read(&self, register: Register) -> u32 {
        self.0.read(register)
    }

    fn write(&self, register: Register, value: u32) {
        self.0.write(register, value);
    }
}

/// A handle on ring `ring`'s register block (each side takes its own).
fn ring_registers(ring: usize) -> RingRegisters {
    let block = NonNull::from(&REGISTER_BLOCKS[ring].0).cast::<u32>();
    // SAFETY: `block` is a static array of `Register::COUNT` 4-byte-aligned words, so it stays
    // mapped for the program's life; its cells are `UnsafeCell`s, so writing through a pointer
    // derived from a shared reference is allowed; and nothing reaches them except through
    // volatile accesses of `VolatileRegisters` (`RegisterBlock`'s `Sync`).
    RingRegisters(unsafe { VolatileRegisters::new(block) })
}

/// Each semaphore slot's core semaphore, built at start-up into zeroed RAM (an initialised
/// static would also keep its image in flash: a frontier's empty entries are not zero).
static TIMELINES: Once<[Timeline; SEMAPHORE_SLOTS as usize]> = Once::new();

static EXECUTOR: Once<NpuExecutor> = Once::new();

static DRAINS: [RingDrain; RINGS] =
    [RingDrain { ring: 0 }, RingDrain { ring: 1 }, RingDrain { ring: 2 }];

/// Each ring's process.
pub static PROCESSES: [Process<'static>; RINGS] = [
    Process::new(&DRAINS[0], Class::Immediate),
    Process::new(&DRAINS[1], Class::Immediate),
    Process::new(&DRAINS[2], Class::Immediate),
];

/// The memory window.
pub fn window() -> Window<'static> {
    Window::new(&MEMORY)
}

/// The slots' core semaphores (none before start-up).
pub fn timelines() -> &'static [Timeline] {
    TIMELINES.get().map_or(&[], |timelines| timelines.as_slice())
}

/// Wakes ring `ring`'s process: the doorbell interrupt, a timepoint, a compute engine.
pub fn wake(ring: usize) {
    if let (Some(executor), Some(process)) = (EXECUTOR.get(), PROCESSES.get(ring)) {
        executor.wake(process);
    }
}

/// Ring `ring`'s layout in the window.
pub const fn layout(ring: usize) -> RingLayout {
    RingLayout {
        ring_base: ring as u32 * RING_BYTES,
        ring_order: RING_ORDER,
        semaphore_base: SEMAPHORE_BASE,
        semaphore_count: SEMAPHORE_SLOTS,
        completion_address: COMPLETION_BASE + 8 * ring as u32,
    }
}

/// The host's end of a ring.
pub type HostRing = Producer<'static, RingRegisters>;

/// Brings the controller up — core semaphores, ring controllers on fresh queue axes, the
/// executor with one process per ring — and the host's producers, which start the rings.
/// `None` if any part refuses (an image bug, reported as a failed run).
pub fn start() -> Option<(NpuWorker, [HostRing; RINGS])> {
    TIMELINES.call_once(|| core::array::from_fn(|_| Semaphore::new(0, Scope::DeviceLocal, HOME)));
    let axes = AxisAllocator::new(0);
    let mut controllers = [const { None }; RINGS];
    for (ring, controller) in controllers.iter_mut().enumerate() {
        let axis = axes.allocate(Domain::Queue).ok()?;
        *controller = Some(Mutex::new(RingController::new(ring, ring_registers(ring), axis)));
    }
    let [Some(c0), Some(c1), Some(c2)] = controllers else { return None };
    CONTROLLERS.call_once(|| [c0, c1, c2]);
    let executor = EXECUTOR.try_call_once(|| NpuExecutor::new(BareMetalFutex::new(), 1)).ok()?;
    for process in &PROCESSES {
        executor.submit(process).ok()?;
    }
    let worker = executor.worker::<RoundRobin>(0, SpinPolicy::Park).ok()?;
    let start = |ring: usize| Producer::start(ring_registers(ring), window(), layout(ring)).ok();
    Some((worker, [start(0)?, start(1)?, start(2)?]))
}

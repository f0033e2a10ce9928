//! The compute engines EXECs run on, one per ring, modelled by the tick interrupt: an engine
//! runs one tile per tick and interrupts (wakes its ring's process) on the tick after its last
//! tile. Dispatching raises a tick at once, so a 0-tile EXEC completes without waiting for the
//! period, and without the periodic tick at all (the cost measurement runs so).
//!
//! The kernels' effects on memory are applied by the controller when it finishes the EXEC, in
//! thread mode: the interrupt only counts tiles.

use causeway_driver_npu::{CompletionError, Window, EXEC_ARGUMENTS};
use portable_atomic::{AtomicU32, Ordering};

use super::{wake, RINGS};
use crate::board;

/// Engine states.
const IDLE: u32 = 0;
const RUNNING: u32 = 1;
const FINISHED: u32 = 2;

/// One compute engine. The thread writes `tiles_left` only while the engine is not running
/// and the tick handler only while it is, so neither needs a read-modify-write.
struct ComputeEngine {
    state: AtomicU32,
    tiles_left: AtomicU32,
}

static ENGINES: [ComputeEngine; RINGS] =
    [const { ComputeEngine { state: AtomicU32::new(IDLE), tiles_left: AtomicU32::new(0) } }; RINGS];

/// Starts ring `ring`'s engine on `tiles` tiles.
pub fn dispatch(ring: usize, tiles: u32) {
    let engine = &ENGINES[ring];
    engine.tiles_left.store(tiles, Ordering::Relaxed);
    // Release: pairs with the tick handler's acquire load of the state, which then reads the
    // tile count stored above.
    engine.state.store(RUNNING, Ordering::Release);
    board::raise_tick();
}

/// Whether ring `ring`'s engine finished; a finished engine becomes idle.
pub fn take_finished(ring: usize) -> bool {
    let engine = &ENGINES[ring];
    // Acquire: pairs with the tick handler's release store of FINISHED.
    if engine.state.load(Ordering::Acquire) != FINISHED {
        return false;
    }
    engine.state.store(IDLE, Ordering::Relaxed);
    true
}

/// The tick hook: every running engine runs a tile, or interrupts after its last one.
pub fn on_tick() {
    for (ring, engine) in ENGINES.iter().enumerate() {
        // Acquire: pairs with `dispatch`'s release store of RUNNING.
        if engine.state.load(Ordering::Acquire) != RUNNING {
            continue;
        }
        let tiles_left = engine.tiles_left.load(Ordering::Relaxed);
        if tiles_left > 0 {
            engine.tiles_left.store(tiles_left - 1, Ordering::Relaxed);
            continue;
        }
        // Release: pairs with `take_finished`'s acquire load.
        engine.state.store(FINISHED, Ordering::Release);
        wake(ring);
    }
}

/// The kernels the engines run; an EXEC's kernel index names one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Stores argument 1 at bus address argument 0.
    Fill,
    /// Adds the word at bus address argument 0 to the word at bus address argument 1.
    Accumulate,
}

impl Kernel {
    /// Kernel table index of [`Kernel::Fill`].
    pub const FILL: u32 = 0;
    /// Kernel table index of [`Kernel::Accumulate`].
    pub const ACCUMULATE: u32 = 1;

    /// The kernel at `index` in the table.
    pub fn from_index(index: u32) -> Option<Kernel> {
        match index {
            Kernel::FILL => Some(Kernel::Fill),
            Kernel::ACCUMULATE => Some(Kernel::Accumulate),
            _ => None,
        }
    }

    /// Applies the kernel's effect; its addresses are outside input, so one outside the window
    /// fails the EXEC.
    pub fn run(
        self,
        window: &Window<'_>,
        arguments: &[u32; EXEC_ARGUMENTS],
    ) -> Result<(), CompletionError> {
        let word = |address: u32| window.word(address).ok_or(CompletionError::KernelFailed);
        match self {
            Kernel::Fill => word(arguments[0])?.store(arguments[1], Ordering::Relaxed),
            Kernel::Accumulate => {
                let source = word(arguments[0])?.load(Ordering::Relaxed);
                let destination = word(arguments[1])?;
                let sum = destination.load(Ordering::Relaxed).wrapping_add(source);
                destination.store(sum, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

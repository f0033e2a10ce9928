//! The drivers a scenario's queues may name (`driver = "cpu"`): the one place the CLI names a
//! driver, to check a queue's choice and to register each driver's backend with the device.
//! Everything else in the runner speaks to the device layer only.

use std::time::Duration;

use causeway::cpu::{BlockError, CpuBackend, DeviceKernel};
use causeway::device::{CommandBufferId, DeviceBuilder, DriverId};
use causeway::runtime::spin_for;

/// Drivers this build has, by the name a scenario gives them.
pub const AVAILABLE: &[&str] = &["cpu"];

/// Most regions a recorded command buffer (`tiles` work) may hold.
pub const MAX_REGIONS: usize = causeway::cpu::block::MAX_REGIONS;

/// The backends of a device being built: command buffers are recorded with them before they
/// are registered.
#[derive(Debug, Default)]
pub struct Drivers {
    cpu: CpuBackend,
}

/// The registered drivers, for the queues that name them.
#[derive(Clone, Copy, Debug)]
pub struct Registered {
    /// The CPU driver.
    pub cpu: DriverId,
}

impl Drivers {
    /// Every available driver, with nothing recorded yet.
    pub fn new() -> Drivers {
        Drivers::default()
    }

    /// Records `tiles` work — `regions` regions of `tiles` tiles, each tile busy for
    /// `per_tile` — for a queue of the CPU driver.
    pub fn record_tiles(
        &mut self,
        regions: u32,
        tiles: u32,
        per_tile: Duration,
    ) -> Result<CommandBufferId, BlockError> {
        let kernel = || -> DeviceKernel { Box::new(move |_tile: u32| spin_for(per_tile)) };
        self.cpu.command_buffer((0..regions).map(|_| (tiles, kernel())).collect())
    }

    /// Registers every driver's backend with `builder`.
    pub fn register(self, builder: &mut DeviceBuilder) -> Registered {
        Registered { cpu: builder.driver(self.cpu) }
    }
}

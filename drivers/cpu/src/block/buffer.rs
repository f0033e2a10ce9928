//! Recording: a command buffer is built once, with whatever allocation that takes, and is then
//! immutable — every execution only reads it.

use std::fmt;

use super::{BlockError, Kernel};

/// The most regions one buffer may hold: epochs of one execution (its regions plus the
/// terminal epoch) must all be distinct in 32 bits.
pub const MAX_REGIONS: usize = u32::MAX as usize - 1;

/// One recorded dispatch: `tiles` calls of `kernel`, claimed at most `max_batch` at a time.
pub(crate) struct Region<'k> {
    pub(crate) tiles: u32,
    pub(crate) max_batch: u32,
    /// Tiles of this region and every region before it: the execution-wide completion count
    /// at which this region is complete.
    pub(crate) end: u64,
    pub(crate) kernel: &'k dyn Kernel,
}

/// A recorded, immutable sequence of regions (tiled dispatches) with a barrier between every
/// two: region `k + 1` starts only after every tile of region `k` has returned.
///
/// Dispatches of zero tiles are dropped while recording: they do nothing, and the barrier they
/// would have stood for is already there (every pair of neighbouring regions is separated by
/// one). A buffer with no regions is valid and finishes on its first drain.
pub struct CommandBuffer<'k> {
    regions: Box<[Region<'k>]>,
    tiles: u64,
}

impl<'k> CommandBuffer<'k> {
    /// Starts recording.
    pub fn builder() -> CommandBufferBuilder<'k> {
        CommandBufferBuilder { regions: Vec::new(), tiles: 0 }
    }

    /// The recorded regions (zero-tile dispatches were dropped).
    pub fn regions(&self) -> usize {
        self.regions.len()
    }

    /// Whether the buffer holds no region at all.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// The tile count of region `region`, if it exists.
    pub fn region_tiles(&self, region: usize) -> Option<u32> {
        self.regions.get(region).map(|region| region.tiles)
    }

    /// Tiles over every region: the kernel calls of one execution.
    pub fn tiles(&self) -> u64 {
        self.tiles
    }

    pub(crate) fn region(&self, region: usize) -> Option<&Region<'k>> {
        self.regions.get(region)
    }
}

impl fmt::Debug for CommandBuffer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandBuffer")
            .field("regions", &self.regions.len())
            .field("tiles", &self.tiles)
            .finish_non_exhaustive()
    }
}

/// Records a [`CommandBuffer`]; see [`CommandBuffer::builder`].
pub struct CommandBufferBuilder<'k> {
    regions: Vec<Region<'k>>,
    tiles: u64,
}

impl<'k> CommandBufferBuilder<'k> {
    /// Appends a region: `kernel` runs once for every tile index in `0..tiles`. Workers claim
    /// guided batches (large while much is left, single tiles near the end).
    pub fn dispatch(self, tiles: u32, kernel: &'k dyn Kernel) -> CommandBufferBuilder<'k> {
        self.dispatch_batched(tiles, u32::MAX, kernel)
    }

    /// As [`dispatch`](Self::dispatch), with no claim taking more than `max_batch` tiles (at
    /// least one): `1` gives one claim per tile, for kernels whose tiles vary a lot in cost.
    pub fn dispatch_batched(
        mut self,
        tiles: u32,
        max_batch: u32,
        kernel: &'k dyn Kernel,
    ) -> CommandBufferBuilder<'k> {
        if tiles > 0 {
            self.tiles += u64::from(tiles);
            self.regions.push(Region {
                tiles,
                max_batch: max_batch.max(1),
                end: self.tiles,
                kernel,
            });
        }
        self
    }

    /// The regions recorded so far.
    pub fn regions(&self) -> usize {
        self.regions.len()
    }

    /// Freezes the recording.
    pub fn build(self) -> Result<CommandBuffer<'k>, BlockError> {
        if self.regions.len() > MAX_REGIONS {
            return Err(BlockError::TooManyRegions { regions: self.regions.len() });
        }
        Ok(CommandBuffer { regions: self.regions.into_boxed_slice(), tiles: self.tiles })
    }
}

impl fmt::Debug for CommandBufferBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandBufferBuilder")
            .field("regions", &self.regions.len())
            .field("tiles", &self.tiles)
            .finish_non_exhaustive()
    }
}

//! The drivers a scenario's queues may name (`driver = "cpu"`, `"vulkan"`, `"npu"` or
//! `"cuda"`): the one
//! place the CLI names a driver — which work each runs, opening the Vulkan device, recording
//! command buffers, registering the backends, and checking compute and copy results after the
//! run.
//! Everything else in the runner speaks to the device layer only.
//!
//! `compute` work runs on every driver, on buffers of its own: on a Vulkan queue a compute
//! shader (`drivers/vulkan/shaders/`), on a CPU queue the same arithmetic in tiles on the block
//! processor, on an NPU queue that same tiled arithmetic as EXEC descriptors run by the software
//! NPU model's engines, on a CUDA queue the driver's add or saxpy PTX kernel over device
//! buffers. Inputs are small multiples of one half, so every result is exact in
//! `f32` and is compared bit for bit with the host's.
//!
//! `copy` work runs on the CPU, Vulkan and CUDA drivers: on a Vulkan queue `vkCmdCopyBuffer`
//! between two device buffers, on a CUDA queue `cuMemcpyDtoDAsync`, on a CPU queue the same copy in tiles on the block processor; the
//! destination is compared word for word with the source's pattern after the run, beside the
//! compute results.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use causeway::cpu::{BlockError, CpuBackend, DeviceKernel};
use causeway::device::{Args, CommandBufferId, DeviceBuilder, DriverId};
use causeway::npu::{NpuBackend, NpuCounts, NpuTally};
use causeway::runtime::spin_for;
use causeway::vulkan::{Buffer, Gpu, GpuOptions, Kernel, Step, VulkanBackend, VulkanError};
use causeway_driver_cuda::{
    ComputeKernel as CudaKernel, CudaBackend, CudaCounts, CudaTally, DeviceBuffer, EmulationChoice,
};

use super::model::{ComputeKernel, DriverKind, Scenario, WorkSpec};

/// The name of the NPU driver's device (every rank runs the same software model, so a rank's
/// records name this one).
pub const NPU_ADAPTER: &str = causeway::npu::backend::ADAPTER;

/// Most regions a recorded command buffer (`tiles` or `compute` work) may hold.
pub const MAX_REGIONS: usize = causeway::cpu::block::MAX_REGIONS;

/// Most regions (EXEC descriptors) of `compute` work on an NPU queue.
const NPU_MAX_REGIONS: usize = causeway::npu::backend::MAX_REGIONS;
// `kinds` names the number.
const _: () = assert!(NPU_MAX_REGIONS == 16);

/// Most floats per buffer of one `compute` operation.
pub const MAX_ELEMENTS: u32 = 1 << 22;

/// Why `compute` work with these sizes cannot run, if it cannot.
pub fn check_compute(elements: u32, tiles: u32, regions: u32) -> Result<(), String> {
    if elements == 0 || tiles == 0 || regions == 0 {
        return Err("compute work needs at least one element, one tile and one region".into());
    }
    if elements > MAX_ELEMENTS {
        return Err(format!("compute work takes at most {MAX_ELEMENTS} elements"));
    }
    if tiles > elements {
        return Err(format!("{tiles} tiles of {elements} elements: a tile needs an element"));
    }
    if regions as usize > MAX_REGIONS {
        return Err(format!("a command buffer holds at most {MAX_REGIONS} regions"));
    }
    Ok(())
}

/// Most bytes one `copy` operation moves.
pub const MAX_COPY_BYTES: u64 = 1 << 24;

/// Words a CPU copy moves per tile of the block processor.
const COPY_WORDS_PER_TILE: usize = 1 << 12;

/// The bytes of `copy` work, if it can run.
pub fn check_copy(bytes: u64) -> Result<u32, String> {
    if bytes == 0 || !bytes.is_multiple_of(4) {
        return Err(format!("copy work moves whole 4-byte words, at least one: {bytes} bytes"));
    }
    if bytes > MAX_COPY_BYTES {
        return Err(format!("copy work moves at most {MAX_COPY_BYTES} bytes"));
    }
    // At most MAX_COPY_BYTES, which fits.
    Ok(bytes as u32)
}

/// Whether a queue of `driver` runs `work`. The layer's own kinds (noop, host functions,
/// stream-ordered memory) run on every driver's queues.
pub fn runs(driver: DriverKind, work: &WorkSpec) -> bool {
    match driver {
        DriverKind::Cpu => true,
        DriverKind::Vulkan => {
            !matches!(work, WorkSpec::Spin(_) | WorkSpec::Sleep(_) | WorkSpec::Tiles { .. })
        }
        DriverKind::Npu => match work {
            WorkSpec::Spin(_)
            | WorkSpec::Sleep(_)
            | WorkSpec::Tiles { .. }
            | WorkSpec::Copy { .. } => false,
            WorkSpec::Compute { regions, .. } => *regions as usize <= NPU_MAX_REGIONS,
            _ => true,
        },
        DriverKind::Cuda => true,
    }
}

/// What a queue of `driver` runs, for the error that refuses anything else.
pub fn kinds(driver: DriverKind) -> &'static str {
    match driver {
        DriverKind::Cpu => "CPU queues run every kind of work",
        DriverKind::Vulkan => {
            "Vulkan queues run compute, copy, host, noop, alloca and dealloca work (spin, sleep \
             and tiles are CPU kernels)"
        }
        DriverKind::Npu => {
            "NPU queues run compute (at most 16 regions: the ring takes an operation's \
             descriptors at once), host, noop, alloca and dealloca work (spin, sleep and tiles \
             are CPU kernels; the model has no copy engine)"
        }
        DriverKind::Cuda => {
            "CUDA queues run every kind of work (spin, sleep and tiles as the driver's spin \
             kernel, compute as its add and saxpy kernels, copy as cuMemcpyDtoDAsync)"
        }
    }
}

/// The backends of a device being built: command buffers are recorded with them before they
/// are registered.
pub struct Drivers {
    cpu: CpuBackend,
    vulkan: Option<(VulkanBackend, [Kernel; 2])>,
    npu: Option<NpuBackend>,
    cuda: Option<CudaBackend>,
    /// Every queue runs on the CPU driver, whatever it names.
    all_cpu: bool,
}

/// The registered drivers, for the queues that name them.
#[derive(Clone, Debug)]
pub struct Registered {
    cpu: DriverId,
    vulkan: Option<(DriverId, String, Gpu)>,
    npu: Option<(DriverId, &'static str, NpuTally)>,
    cuda: Option<(DriverId, String, CudaTally)>,
    workers: usize,
}

impl Registered {
    /// The driver a queue naming `kind` runs on, and its adapter (the device it runs on).
    pub fn driver(&self, kind: DriverKind) -> (DriverKind, DriverId, String) {
        if let (DriverKind::Cuda, Some((id, adapter, _))) = (kind, &self.cuda) {
            return (DriverKind::Cuda, *id, adapter.clone());
        }
        match (kind, &self.vulkan, &self.npu) {
            (DriverKind::Vulkan, Some((id, adapter, _)), _) => {
                (DriverKind::Vulkan, *id, adapter.clone())
            }
            (DriverKind::Npu, _, Some((id, adapter, _))) => {
                (DriverKind::Npu, *id, (*adapter).to_string())
            }
            _ => (DriverKind::Cpu, self.cpu, format!("host ({} worker threads)", self.workers)),
        }
    }

    /// The NPU device's name and what the NPU driver did with its queues' waits so far (WAIT
    /// descriptors emitted, waits that emitted nothing), when the scenario runs NPU queues.
    pub fn npu(&self) -> Option<(&'static str, NpuCounts)> {
        self.npu.as_ref().map(|(_, adapter, tally)| (*adapter, tally.counts()))
    }

    /// The CUDA device's name and what the CUDA driver did with its queues' waits so far
    /// (stream waits issued, waits that issued nothing), when the scenario runs CUDA queues.
    pub fn cuda(&self) -> Option<(String, CudaCounts)> {
        self.cuda.as_ref().map(|(_, adapter, tally)| (adapter.clone(), tally.counts()))
    }

    /// The Vulkan adapter's name, the native waits its queues have issued so far (each a
    /// timeline wait in `vkQueueSubmit2`) and the validation layer's messages (when
    /// `CAUSEWAY_VULKAN_VALIDATION=1` turned it on), when the scenario runs Vulkan queues.
    pub fn vulkan(&self) -> Option<(String, u64, Vec<String>)> {
        self.vulkan.as_ref().map(|(_, adapter, gpu)| {
            (adapter.clone(), gpu.native_waits(), gpu.validation_messages())
        })
    }
}

/// A compute or copy operation's output and what it must hold after the run.
pub struct ComputeCheck {
    output: Output,
    expected: Vec<f32>,
}

enum Output {
    Host(Arc<[AtomicU32]>),
    Vulkan(Buffer),
    Cuda(DeviceBuffer),
}

impl ComputeCheck {
    /// The check of values computed on the host (an all-reduce's sums): `values` must equal
    /// `expected` bit for bit.
    pub fn host(values: &[f32], expected: Vec<f32>) -> ComputeCheck {
        let output = values.iter().map(|value| AtomicU32::new(value.to_bits())).collect();
        ComputeCheck { output: Output::Host(output), expected }
    }

    /// `Err` names the first element that differs from the host's arithmetic.
    pub fn verify(&self) -> Result<(), String> {
        let actual: Vec<f32> = match &self.output {
            Output::Host(values) => {
                values.iter().map(|bits| f32::from_bits(bits.load(Ordering::Relaxed))).collect()
            }
            Output::Vulkan(buffer) => buffer
                .read_f32(0, self.expected.len())
                .map_err(|error| format!("cannot read the result back: {error}"))?,
            Output::Cuda(buffer) => buffer
                .read_words(self.expected.len())
                .map_err(|error| format!("cannot read the result back: {error}"))?
                .into_iter()
                .map(f32::from_bits)
                .collect(),
        };
        match actual.iter().zip(&self.expected).position(|(a, e)| a.to_bits() != e.to_bits()) {
            None => Ok(()),
            Some(i) => Err(format!("element {i} is {} (expected {})", actual[i], self.expected[i])),
        }
    }
}

/// The inputs of compute work: `x` (and `a`) at `i` and `y` (and `b`) at `i`.
fn input_x(i: usize) -> f32 {
    (i % 13) as f32 * 0.5
}

fn input_y(i: usize) -> f32 {
    (i % 7) as f32
}

/// The word `copy` work's source holds at `i` (as the bits of an `f32`, checked bit for bit).
fn copy_pattern(i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9) ^ 0x5A5A_5A5A
}

/// What `kernel` leaves in its output after `regions` dispatches.
fn expected(kernel: ComputeKernel, elements: usize, regions: u32) -> Vec<f32> {
    (0..elements)
        .map(|i| match kernel {
            ComputeKernel::Add => input_x(i) + input_y(i),
            ComputeKernel::Saxpy => input_y(i) + 2.0 * regions as f32 * input_x(i),
        })
        .collect()
}

impl Drivers {
    /// Every driver the queues of `scenario` this process hosts name (`hosted[q]` for queue
    /// `q`: all of them, but for a run across ranks); with `all_cpu`, the CPU driver alone.
    /// `Err` explains why the Vulkan device cannot be opened, naming the package that provides
    /// what is missing.
    pub fn new(scenario: &Scenario, all_cpu: bool, hosted: &[bool]) -> Result<Drivers, String> {
        let queues = || scenario.queues.iter().zip(hosted).filter(|(_, &h)| h).map(|(q, _)| q);
        let wants_vulkan = queues().find(|q| q.driver == DriverKind::Vulkan);
        let vulkan = match wants_vulkan {
            Some(queue) if !all_cpu => {
                // An option the driver cannot read is the user's to fix, not a missing device.
                let options = GpuOptions::from_env().map_err(|error| error.to_string())?;
                let open = || -> Result<(VulkanBackend, [Kernel; 2]), VulkanError> {
                    let gpu = Gpu::open(&options)?;
                    let kernels = [Kernel::add(&gpu)?, Kernel::saxpy(&gpu)?];
                    Ok((VulkanBackend::new(gpu), kernels))
                };
                Some(open().map_err(|error| no_device(&queue.name, "vulkan", "Vulkan", &error))?)
            }
            _ => None,
        };
        let wants_npu = queues().any(|q| q.driver == DriverKind::Npu);
        let npu = (wants_npu && !all_cpu).then(NpuBackend::new);
        let cuda = match queues().find(|q| q.driver == DriverKind::Cuda) {
            // Without libcuda this is `CudaError::NoDriver`, found before any CUDA call.
            Some(queue) if !all_cpu => {
                let opened = CudaBackend::open(0, EmulationChoice::Best);
                Some(opened.map_err(|error| no_device(&queue.name, "cuda", "CUDA", &error))?)
            }
            _ => None,
        };
        Ok(Drivers { cpu: CpuBackend::new(), vulkan, npu, cuda, all_cpu })
    }

    /// Records `tiles` work — `regions` regions of `tiles` tiles, each tile busy for
    /// `per_tile` — for a queue naming `driver`: the CUDA driver's kernel on a CUDA queue, the
    /// CPU driver's otherwise.
    pub fn record_tiles(
        &mut self,
        driver: DriverKind,
        regions: u32,
        tiles: u32,
        per_tile: Duration,
    ) -> Result<CommandBufferId, String> {
        if let (Some(cuda), DriverKind::Cuda) = (&mut self.cuda, driver) {
            let recording = (0..regions).map(|_| (tiles, per_tile)).collect();
            return cuda.command_buffer(recording).map_err(|error| format!("cuda: {error}"));
        }
        let kernel =
            || -> DeviceKernel { Box::new(move |_tile: u32, _: &Args| spin_for(per_tile)) };
        let recorded = self.cpu.command_buffer((0..regions).map(|_| (tiles, kernel())).collect());
        recorded.map_err(|error: BlockError| error.to_string())
    }

    /// Records `compute` work for a queue naming `driver`, on buffers of its own filled with
    /// the inputs; returns the command buffer and the check of its result.
    pub fn record_compute(
        &mut self,
        driver: DriverKind,
        (kernel, elements, tiles, regions): (ComputeKernel, u32, u32, u32),
    ) -> Result<(CommandBufferId, ComputeCheck), String> {
        let expected = expected(kernel, elements as usize, regions);
        if let (Some(cuda), DriverKind::Cuda, false) = (&mut self.cuda, driver, self.all_cpu) {
            let n = elements as usize;
            let x: Vec<f32> = (0..n).map(input_x).collect();
            let y: Vec<f32> = (0..n).map(input_y).collect();
            let kernel = match kernel {
                ComputeKernel::Add => CudaKernel::Add,
                ComputeKernel::Saxpy => CudaKernel::Saxpy,
            };
            let (id, output) = cuda
                .record_compute(kernel, (&x, &y), tiles, regions, 2.0)
                .map_err(|error| format!("cuda: {error}"))?;
            return Ok((id, ComputeCheck { output: Output::Cuda(output), expected }));
        }
        match (&mut self.vulkan, driver == DriverKind::Vulkan && !self.all_cpu) {
            (Some((backend, kernels)), true) => {
                let vulkan = |error: VulkanError| format!("vulkan: {error}");
                let gpu = backend.gpu().clone();
                let n = elements as usize;
                let buffer = || Buffer::new(&gpu, u64::from(elements) * 4);
                let (x, y) = (buffer().map_err(vulkan)?, buffer().map_err(vulkan)?);
                x.write_f32(0, &(0..n).map(input_x).collect::<Vec<_>>()).map_err(vulkan)?;
                y.write_f32(0, &(0..n).map(input_y).collect::<Vec<_>>()).map_err(vulkan)?;
                let (output, regions) = match kernel {
                    ComputeKernel::Add => {
                        let sum = buffer().map_err(vulkan)?;
                        let launch = |_| kernels[0].launch(&[&x, &y, &sum], elements, tiles, 0.0);
                        let regions: Result<Vec<_>, _> = (0..regions).map(launch).collect();
                        (sum, regions.map_err(vulkan)?)
                    }
                    ComputeKernel::Saxpy => {
                        let launch = |_| kernels[1].launch(&[&x, &y], elements, tiles, 2.0);
                        let regions: Result<Vec<_>, _> = (0..regions).map(launch).collect();
                        (y, regions.map_err(vulkan)?)
                    }
                };
                let regions = regions.into_iter().map(|launch| vec![Step::Dispatch(launch)]);
                let id = backend.command_buffer(regions.collect()).map_err(vulkan)?;
                Ok((id, ComputeCheck { output: Output::Vulkan(output), expected }))
            }
            _ => {
                let (recording, output) = host_compute(kernel, elements, tiles, regions);
                let id = match (&mut self.npu, driver == DriverKind::Npu && !self.all_cpu) {
                    (Some(npu), true) => {
                        npu.command_buffer(recording).map_err(|error| format!("npu: {error}"))?
                    }
                    _ => self
                        .cpu
                        .command_buffer(recording)
                        .map_err(|error| format!("compute: {error}"))?,
                };
                Ok((id, ComputeCheck { output: Output::Host(output), expected }))
            }
        }
    }

    /// Records `copy` work of `bytes` bytes for a queue naming `driver`, from a source holding
    /// `copy_pattern` to a zeroed destination; returns the command buffer and the check of
    /// the destination.
    pub fn record_copy(
        &mut self,
        driver: DriverKind,
        bytes: u32,
    ) -> Result<(CommandBufferId, ComputeCheck), String> {
        let words = bytes as usize / 4;
        let pattern: Vec<u32> = (0..words).map(copy_pattern).collect();
        let expected = pattern.iter().map(|&word| f32::from_bits(word)).collect();
        if let (Some(cuda), DriverKind::Cuda, false) = (&mut self.cuda, driver, self.all_cpu) {
            let (id, output) =
                cuda.record_copy(&pattern).map_err(|error| format!("cuda: {error}"))?;
            return Ok((id, ComputeCheck { output: Output::Cuda(output), expected }));
        }
        match (&mut self.vulkan, driver == DriverKind::Vulkan && !self.all_cpu) {
            (Some((backend, _)), true) => {
                let vulkan = |error: VulkanError| format!("vulkan: {error}");
                let gpu = backend.gpu().clone();
                let source = Buffer::new(&gpu, u64::from(bytes)).map_err(vulkan)?;
                let destination = Buffer::new(&gpu, u64::from(bytes)).map_err(vulkan)?;
                let source_bytes: Vec<u8> = pattern.iter().flat_map(|w| w.to_ne_bytes()).collect();
                source.write(0, &source_bytes).map_err(vulkan)?;
                let copy = Step::Copy {
                    source,
                    destination: destination.clone(),
                    bytes: u64::from(bytes),
                };
                let id = backend.command_buffer(vec![vec![copy]]).map_err(vulkan)?;
                Ok((id, ComputeCheck { output: Output::Vulkan(destination), expected }))
            }
            _ => {
                let source: Arc<[u32]> = pattern.into();
                let output: Arc<[AtomicU32]> = (0..words).map(|_| AtomicU32::new(0)).collect();
                let tiles = words.div_ceil(COPY_WORDS_PER_TILE);
                let destination = Arc::clone(&output);
                let kernel: DeviceKernel = Box::new(move |tile: u32, _: &Args| {
                    let start = tile as usize * COPY_WORDS_PER_TILE;
                    let end = (start + COPY_WORDS_PER_TILE).min(words);
                    for (word, value) in destination[start..end].iter().zip(&source[start..end]) {
                        // Each word belongs to one tile, read back after the command buffer
                        // completed: Relaxed suffices.
                        word.store(*value, Ordering::Relaxed);
                    }
                });
                // At most MAX_COPY_BYTES / 4 / COPY_WORDS_PER_TILE tiles: fits a u32.
                let recorded = self.cpu.command_buffer(vec![(tiles as u32, kernel)]);
                let id = recorded.map_err(|error| format!("copy: {error}"))?;
                Ok((id, ComputeCheck { output: Output::Host(output), expected }))
            }
        }
    }

    /// Registers every driver's backend with `builder`, run by `workers` worker threads.
    pub fn register(self, builder: &mut DeviceBuilder, workers: usize) -> Registered {
        let cpu = builder.driver(self.cpu);
        let vulkan = self.vulkan.map(|(backend, _)| {
            let (adapter, gpu) = (backend.adapter().to_string(), backend.gpu().clone());
            (builder.driver(backend), adapter, gpu)
        });
        let npu = self.npu.map(|backend| {
            let (adapter, tally) = (backend.adapter(), backend.tally());
            (builder.driver(backend), adapter, tally)
        });
        let cuda = self.cuda.map(|backend| {
            let adapter = format!("CUDA device 0 ({:?} timelines)", backend.emulation());
            let tally = backend.tally();
            (builder.driver(backend), adapter, tally)
        });
        Registered { cpu, vulkan, npu, cuda, workers }
    }
}

/// `compute` work as tiled host arithmetic, the recording the CPU and NPU drivers share:
/// `regions` regions of `tiles` tiles, and the buffer they leave the result in.
fn host_compute(
    kernel: ComputeKernel,
    elements: u32,
    tiles: u32,
    regions: u32,
) -> (Vec<(u32, DeviceKernel)>, Arc<[AtomicU32]>) {
    let n = elements as usize;
    let x: Arc<[f32]> = (0..n).map(input_x).collect();
    let y: Arc<[f32]> = (0..n).map(input_y).collect();
    let output: Arc<[AtomicU32]> = match kernel {
        ComputeKernel::Add => (0..n).map(|_| AtomicU32::new(0)).collect(),
        ComputeKernel::Saxpy => y.iter().map(|v| AtomicU32::new(v.to_bits())).collect(),
    };
    let per_tile = n.div_ceil(tiles as usize);
    let region = || -> DeviceKernel {
        let (x, y, output) = (Arc::clone(&x), Arc::clone(&y), Arc::clone(&output));
        Box::new(move |tile: u32, _: &Args| {
            let start = (tile as usize * per_tile).min(n);
            for i in start..(start + per_tile).min(n) {
                // Each element belongs to one tile, and regions are ordered (by the block
                // processor's barrier, or the NPU ring's order): Relaxed suffices.
                let value = match kernel {
                    ComputeKernel::Add => x[i] + y[i],
                    ComputeKernel::Saxpy => {
                        2.0 * x[i] + f32::from_bits(output[i].load(Ordering::Relaxed))
                    }
                };
                output[i].store(value.to_bits(), Ordering::Relaxed);
            }
        })
    };
    ((0..regions).map(|_| (tiles, region())).collect(), output)
}

/// Why a scenario cannot run: `queue` names a driver whose device does not open.
fn no_device(queue: &str, driver: &str, device: &str, error: &dyn std::fmt::Display) -> String {
    format!(
        "queue `{queue}` names the {driver} driver, but no {device} device opens: {error} \
         (or run every queue on the CPU with --all-cpu)"
    )
}

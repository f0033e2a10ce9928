//! The CPU driver's [`Backend`]: spin and sleep kernels on the issuing worker, command
//! buffers on the block processor (see the crate documentation).

use std::time::Instant;

use causeway_core::semaphore::Failure;
#[cfg(doc)]
use causeway_device::Work;
use causeway_device::{
    Backend, BackendCapabilities, CommandBufferId, DeviceContext, DriverError, Issue, Issued,
    Kernel, OpStatus, QueueConfig, QueueId,
};
use causeway_runtime::spin_for;

use crate::block::BlockError;
use crate::execute::{self, DeviceKernel, Execution};

/// The CPU driver's backend: register it with [`DeviceBuilder::driver`] after recording its
/// command buffers.
///
/// [`DeviceBuilder::driver`]: causeway_device::DeviceBuilder::driver
#[derive(Debug, Default)]
pub struct CpuBackend {
    executions: Vec<Execution>,
}

impl CpuBackend {
    /// A backend with no command buffers yet.
    pub fn new() -> CpuBackend {
        CpuBackend::default()
    }

    /// Records a command buffer for [`Work::Execute`] on this driver's queues: regions of
    /// `(tiles, kernel)` tiled dispatches, run in order with a barrier between regions by every
    /// worker at once. Refused when the recording is unusable (an empty region, too many).
    pub fn command_buffer(
        &mut self,
        regions: Vec<(u32, DeviceKernel)>,
    ) -> Result<CommandBufferId, BlockError> {
        self.executions.push(Execution::new(regions)?);
        Ok(CommandBufferId(self.executions.len() as u32 - 1))
    }

    /// The command buffer `buffer` names: one this backend recorded (the layer hands a driver
    /// only buffers below its [`command_buffers`](Backend::command_buffers)).
    fn execution(&self, buffer: CommandBufferId) -> &Execution {
        &self.executions[buffer.0 as usize]
    }
}

impl Backend for CpuBackend {
    /// A CPU queue is the device layer's queue process on the pool: nothing to keep.
    type Queue = CpuQueue;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(true).with_timed_kernels()
    }

    fn command_buffers(&self) -> u32 {
        self.executions.len() as u32
    }

    fn open_queue(
        &mut self,
        queue: QueueId,
        _config: &QueueConfig,
    ) -> Result<CpuQueue, DriverError> {
        Ok(CpuQueue { id: queue })
    }

    fn start(&'static self, device: DeviceContext) {
        for execution in &self.executions {
            execution.link(device);
        }
    }

    fn issue(&'static self, queue: &'static CpuQueue, issue: &mut Issue<'_>) -> Issued {
        match issue.kernel() {
            Kernel::Spin(duration) => issue.run_here(|| {
                spin_for(duration);
                OpStatus::Ok
            }),
            Kernel::Sleep(duration) => issue.run_here(|| {
                std::thread::sleep(duration);
                OpStatus::Ok
            }),
            Kernel::Execute(buffer) => match self.execution(buffer).issue(queue.id, issue.args()) {
                execute::Issue::Issued => Issued::Pending,
                execute::Issue::Busy => Issued::Busy,
            },
        }
    }

    fn poll(
        &'static self,
        queue: &'static CpuQueue,
        _epoch: u64,
        kernel: Kernel,
    ) -> Option<OpStatus> {
        match kernel {
            Kernel::Execute(buffer) => self.execution(buffer).poll(queue.id),
            // Spin and sleep run to their end in `issue` and are never pending: a poll for one
            // finds nothing running.
            _ => Some(OpStatus::Failed(Failure::Aborted)),
        }
    }

    /// Kernels run on the pool's workers: with every worker joined, none runs.
    fn is_running(&self, _queue: &CpuQueue, kernel: Kernel, workers_abandoned: bool) -> bool {
        match kernel {
            Kernel::Execute(buffer) => workers_abandoned && self.execution(buffer).is_running(),
            // Run to their end in `issue`, never pending.
            _ => false,
        }
    }

    /// Everything the CPU driver runs is on the pool's workers, which the device has already
    /// joined or abandoned (keeping its state alive for them): nothing of its own is left.
    fn stop(&self, _deadline: Instant) -> bool {
        true
    }
}

/// A CPU queue: the layer's queue process runs it; the driver keeps only its id, which a
/// command buffer's completion wakes.
#[derive(Debug)]
pub struct CpuQueue {
    id: QueueId,
}

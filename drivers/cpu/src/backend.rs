//! The CPU driver's [`Backend`]: spin and sleep kernels on the issuing worker, command
//! buffers on the block processor (see the crate documentation).

use std::fmt;
use std::sync::OnceLock;
use std::time::Instant;

use causeway_core::semaphore::Failure;
#[cfg(doc)]
use causeway_device::Work;
use causeway_device::{
    Backend, BackendCapabilities, CommandBufferId, DeviceContext, DriverError, Issue, Issued,
    Kernel, OpStatus, QueueConfig, QueueId, Recorded,
};
use causeway_runtime::spin_for;

use crate::block::BlockError;
use crate::execute::{self, DeviceKernel, Execution};

/// The CPU driver's backend: register it with [`DeviceBuilder::driver`]; record its command
/// buffers before (on the backend) or after the device is built (on
/// [`Device::backend`]`::<CpuBackend>`).
///
/// [`DeviceBuilder::driver`]: causeway_device::DeviceBuilder::driver
/// [`Device::backend`]: causeway_device::Device::backend
#[derive(Default)]
pub struct CpuBackend {
    executions: Recorded<Execution>,
    /// The backend at its final address and its device, once started: a command buffer
    /// recorded from then on is linked to the device before it is counted.
    started: OnceLock<(&'static CpuBackend, DeviceContext)>,
}

impl CpuBackend {
    /// A backend with no command buffers yet.
    pub fn new() -> CpuBackend {
        CpuBackend::default()
    }

    /// Records a command buffer for [`Work::Execute`] on this driver's queues: regions of
    /// `(tiles, kernel)` tiled dispatches, run in order with a barrier between regions by every
    /// worker at once. Refused when the recording is unusable (an empty region, too many).
    ///
    /// Before the device is built or while it runs, from any thread: the id is usable as soon
    /// as this returns (the buffer is linked to the device before the layer counts it).
    pub fn command_buffer(
        &self,
        regions: Vec<(u32, DeviceKernel)>,
    ) -> Result<CommandBufferId, BlockError> {
        let execution = Execution::new(regions)?;
        let recorded = match self.started.get() {
            Some(&(this, device)) => this.executions.push(execution, |new| new.link(device)),
            None => self.executions.push(execution, |_| {}),
        };
        recorded.map(CommandBufferId).map_err(|_| BlockError::TooManyCommandBuffers)
    }

    /// The command buffer `buffer` names: one this backend recorded (the layer hands a driver
    /// only buffers below its [`command_buffers`](Backend::command_buffers)).
    fn execution(&self, buffer: CommandBufferId) -> Option<&Execution> {
        self.executions.get(buffer.0)
    }
}

impl fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuBackend")
            .field("command_buffers", &self.executions.len())
            .field("started", &self.started.get().is_some())
            .finish()
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
        self.executions.len()
    }

    fn open_queue(
        &mut self,
        queue: QueueId,
        _config: &QueueConfig,
    ) -> Result<CpuQueue, DriverError> {
        Ok(CpuQueue { id: queue })
    }

    fn start(&'static self, device: DeviceContext) {
        // Recording needs the backend, which the device owns from here on: no command buffer
        // is recorded between these two lines (see `command_buffer`).
        let _ = self.started.set((self, device));
        for execution in self.executions.iter() {
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
            Kernel::Execute(buffer) => match self.execution(buffer) {
                Some(execution) => match execution.issue(queue.id, issue.args()) {
                    execute::Issue::Issued => Issued::Pending,
                    execute::Issue::Busy => Issued::Busy,
                },
                // The layer counted it, so it is recorded (see `Recorded`); should that ever
                // not hold, the operation fails rather than the worker.
                None => issue.run_here(|| OpStatus::Failed(Failure::Aborted)),
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
            Kernel::Execute(buffer) => match self.execution(buffer) {
                Some(execution) => execution.poll(queue.id),
                None => Some(OpStatus::Failed(Failure::Aborted)),
            },
            // Spin and sleep run to their end in `issue` and are never pending: a poll for one
            // finds nothing running.
            _ => Some(OpStatus::Failed(Failure::Aborted)),
        }
    }

    /// Kernels run on the pool's workers: with every worker joined, none runs.
    fn is_running(&self, _queue: &CpuQueue, kernel: Kernel, workers_abandoned: bool) -> bool {
        match kernel {
            Kernel::Execute(buffer) => {
                workers_abandoned && self.execution(buffer).is_some_and(Execution::is_running)
            }
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

//! The CPU driver's [`Backend`]: spin and sleep kernels on the issuing worker, command
//! buffers on the block processor (see the crate documentation).

use std::time::Instant;

use causeway_core::semaphore::Failure;
use causeway_device::{
    Backend, BackendCapabilities, CommandBufferId, DeviceContext, DriverError, Issue, Issued,
    OpStatus, QueueConfig, QueueId, SubmitError, Work,
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

    fn execution(&self, work: Work) -> Option<&Execution> {
        match work {
            Work::Execute(id) => self.executions.get(id.0 as usize),
            _ => None,
        }
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn capabilities(&self) -> BackendCapabilities {
        BackendCapabilities::new(true)
    }

    /// A CPU queue is the device layer's queue process on the pool: nothing to create.
    fn open_queue(&mut self, _queue: QueueId, _config: &QueueConfig) -> Result<(), DriverError> {
        Ok(())
    }

    fn check(&self, _queue: QueueId, work: Work) -> Result<(), SubmitError> {
        match work {
            Work::Spin(_) | Work::Sleep(_) => Ok(()),
            Work::Execute(id) if self.execution(work).is_none() => {
                Err(SubmitError::UnknownCommandBuffer(id))
            }
            Work::Execute(_) => Ok(()),
            _ => Err(SubmitError::Unsupported { driver: self.name() }),
        }
    }

    fn start(&'static self, device: DeviceContext) {
        for execution in &self.executions {
            execution.link(device);
        }
    }

    fn issue(&'static self, issue: &mut Issue<'_>) -> Issued {
        match issue.work() {
            Work::Spin(duration) => issue.run_here(|| {
                spin_for(duration);
                OpStatus::Ok
            }),
            Work::Sleep(duration) => issue.run_here(|| {
                std::thread::sleep(duration);
                OpStatus::Ok
            }),
            work => match self.execution(work) {
                Some(execution) => match execution.issue(issue.queue()) {
                    execute::Issue::Issued => Issued::Pending,
                    execute::Issue::Busy => Issued::Busy,
                },
                // `check` refused it at submission.
                None => Issued::Finished(OpStatus::Failed(Failure::Aborted)),
            },
        }
    }

    fn poll(&'static self, queue: QueueId, _epoch: u64, work: Work) -> Option<OpStatus> {
        match self.execution(work) {
            Some(execution) => execution.poll(queue),
            None => Some(OpStatus::Failed(Failure::Aborted)),
        }
    }

    /// Kernels run on the pool's workers: with every worker joined, none runs.
    fn is_running(&self, _queue: QueueId, work: Work, workers_abandoned: bool) -> bool {
        workers_abandoned && self.execution(work).is_some_and(Execution::is_running)
    }

    /// Everything the CPU driver runs is on the pool's workers, which the device has already
    /// joined or abandoned (keeping its state alive for them): nothing of its own is left.
    fn stop(&self, _deadline: Instant) -> bool {
        true
    }
}

//! How the layer holds drivers of different types side by side: each [`Backend`] behind one
//! object-safe trait, [`DynBackend`], and each of its queue objects, bound to it, behind
//! another, [`DynQueue`], stored beside the layer's queue.
//!
//! A queue object is made while the device is built, before the backend has the address it
//! keeps for the device's life; it waits in an [`OpenedQueue`] until the device is in place
//! and [`DynBackend::bind`] pairs it with its backend. One dynamic call per driver call, as
//! before queue objects: the queue object is reached from the queue, not looked up.

use std::any::Any;
use std::time::Instant;

use causeway_core::semaphore::Failure;

use super::{Backend, BackendCapabilities, DeviceContext, Issue, Issued, MemoryOp};
use crate::config::QueueConfig;
use crate::error::{DriverError, SubmitError};
use crate::ids::QueueId;
use crate::op::{Kernel, OpStatus};

/// A queue object made by [`Backend::open_queue`], not yet bound to its backend.
pub(crate) struct OpenedQueue(Box<dyn Any + Send + Sync>);

/// A [`Backend`] of any type (see the [module documentation](self)).
pub(crate) trait DynBackend: Send + Sync {
    fn name(&self) -> &'static str;
    fn capabilities(&self) -> BackendCapabilities;
    fn command_buffers(&self) -> u32;
    /// The backend itself, for [`Device::backend`](crate::Device::backend) to downcast.
    fn as_any(&self) -> &dyn Any;
    fn counters(&self) -> Vec<(&'static str, u64)>;
    fn open_queue(
        &mut self,
        queue: QueueId,
        config: &QueueConfig,
    ) -> Result<OpenedQueue, DriverError>;
    fn start(&'static self, device: DeviceContext);
    /// Pairs a queue object this backend opened with the backend; `None` for one it did not
    /// open (the builder binds each queue to the backend that opened it).
    fn bind(&'static self, opened: OpenedQueue) -> Option<Box<dyn DynQueue>>;
    fn memory(&self, op: MemoryOp) -> Result<(), Failure>;
    fn mirror_progress(&'static self, origin: QueueId, epoch: u64);
    fn stop(&self, deadline: Instant) -> bool;
}

/// One queue's driver calls, its queue object bound to its backend.
pub(crate) trait DynQueue: Send + Sync {
    fn check(&self, kernel: Kernel) -> Result<(), SubmitError>;
    fn issue(&'static self, issue: &mut Issue<'_>) -> Issued;
    fn poll(&'static self, epoch: u64, kernel: Kernel) -> Option<OpStatus>;
    fn completed_on_host(&'static self, epoch: u64);
    fn is_running(&self, kernel: Kernel, workers_abandoned: bool) -> bool;
}

/// The layer's holder of a backend of type `B`.
pub(crate) struct Driver<B>(pub(crate) B);

/// A queue object of `B`, with the backend that opened it.
struct BoundQueue<B: Backend> {
    backend: &'static B,
    queue: B::Queue,
}

impl<B: Backend> DynBackend for Driver<B> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn capabilities(&self) -> BackendCapabilities {
        self.0.capabilities()
    }

    fn command_buffers(&self) -> u32 {
        self.0.command_buffers()
    }

    fn as_any(&self) -> &dyn Any {
        &self.0
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.0.counters()
    }

    fn open_queue(
        &mut self,
        queue: QueueId,
        config: &QueueConfig,
    ) -> Result<OpenedQueue, DriverError> {
        let opened = self.0.open_queue(queue, config)?;
        Ok(OpenedQueue(Box::new(opened)))
    }

    fn start(&'static self, device: DeviceContext) {
        self.0.start(device);
    }

    fn bind(&'static self, opened: OpenedQueue) -> Option<Box<dyn DynQueue>> {
        let queue = *opened.0.downcast::<B::Queue>().ok()?;
        Some(Box::new(BoundQueue { backend: &self.0, queue }))
    }

    fn memory(&self, op: MemoryOp) -> Result<(), Failure> {
        self.0.memory(op)
    }

    fn mirror_progress(&'static self, origin: QueueId, epoch: u64) {
        self.0.mirror_progress(origin, epoch);
    }

    fn stop(&self, deadline: Instant) -> bool {
        self.0.stop(deadline)
    }
}

impl<B: Backend> DynQueue for BoundQueue<B> {
    fn check(&self, kernel: Kernel) -> Result<(), SubmitError> {
        self.backend.check(&self.queue, kernel)
    }

    fn issue(&'static self, issue: &mut Issue<'_>) -> Issued {
        self.backend.issue(&self.queue, issue)
    }

    fn poll(&'static self, epoch: u64, kernel: Kernel) -> Option<OpStatus> {
        self.backend.poll(&self.queue, epoch, kernel)
    }

    fn completed_on_host(&'static self, epoch: u64) {
        self.backend.completed_on_host(&self.queue, epoch);
    }

    fn is_running(&self, kernel: Kernel, workers_abandoned: bool) -> bool {
        self.backend.is_running(&self.queue, kernel, workers_abandoned)
    }
}

//! What the layer hands a backend to issue, and what issuing came to.

use std::fmt;

use heapless::Vec as FixedVec;

use super::NativeWait;
#[cfg(doc)]
use super::{Backend, BackendCapabilities, DeviceContext};
use causeway_core::semaphore::Failure;
use causeway_runtime::contain::{contain, Panicked};

use crate::error::{DriverCall, Violation};
use crate::ids::QueueId;
use crate::limits::MAX_WAITS;
use crate::op::{Args, Kernel, OpStatus};
#[cfg(doc)]
use causeway_core::queue::Resolution;

/// What issuing an operation came to.
#[derive(Debug)]
#[must_use]
pub enum Issued {
    /// The work ran to its end (on the calling worker, or synchronously on the device).
    Finished(OpStatus),
    /// The device runs it; the backend wakes the queue ([`DeviceContext::wake`]) when it ends
    /// and answers [`Backend::poll`] with its status then. The layer polls it once right away,
    /// and again at every wake-up: a driver may arm its completion notice from a poll that
    /// finds the work running.
    Pending,
    /// A device resource it needs is taken (another queue runs the same command buffer); the
    /// backend wakes the queue when it frees, and the layer issues the operation again.
    Busy,
    /// The device took the queue over at shutdown while the work ran ([`Issue::run_here`]
    /// returns it): the layer touches nothing more.
    Abandoned(TakenOver),
}

/// Proof that a queue was taken over while [`Issue::run_here`] ran its work; only the layer
/// makes one.
#[derive(Debug)]
pub struct TakenOver(());

/// The operation a backend is asked to issue, and what it may do with the calling worker.
pub struct Issue<'a> {
    /// The queue it was submitted to, as the layer runs it.
    pub(crate) issuing: &'a dyn IssuingQueue,
    pub(crate) queue: QueueId,
    pub(crate) tag: u64,
    pub(crate) args: Args,
    pub(crate) kernel: Kernel,
    pub(crate) waits: FixedVec<NativeWait, MAX_WAITS>,
    pub(crate) elided_waits: usize,
    pub(crate) epoch: u64,
    pub(crate) worker: usize,
    pub(crate) started: bool,
    /// Whether [`Issue::run_here`] ran the work (a second call is a broken contract).
    pub(crate) ran: bool,
}

/// The layer's side of an [`Issue`]: the queue issuing it, which runs work under the ring's
/// ownership protocol (a shutdown may take the queue over while it runs), tells the observer
/// and records broken contracts. The device layer implements it (`device::process::driver`),
/// so that the seam names nothing of the layer's internals.
pub(crate) trait IssuingQueue: Sync {
    /// Runs `work` on `worker` as operation `tag`'s body; `false` when the device took the
    /// queue over meanwhile (the work's outcome is then not the queue's to use).
    fn run_work(&self, tag: u64, worker: usize, work: &mut dyn FnMut()) -> bool;
    /// Reports operation `tag` started on `worker`.
    fn started(&self, tag: u64, worker: usize);
    /// Records that the driver broke the contract in `call`, and fails the queue.
    fn driver_fault(&self, call: DriverCall, tag: Option<u64>, violation: Violation);
}

impl Issue<'_> {
    /// The queue it was submitted to.
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// Its kernel.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Its waits that need ordering on the device: those resolved as
    /// [`Resolution::DeviceWait`] or [`Resolution::Held`], in submission order. Elided and
    /// satisfied waits never reach a driver. Without [native
    /// waits](BackendCapabilities::native_waits) the layer has seen every one of them reached
    /// before issuing the operation (the CPU driver needs nothing more). With them, held waits
    /// are reached, and each device wait names its [origin](NativeWait::origin), which the
    /// driver turns into a native wait (a timeline wait in the submission).
    pub fn waits(&self) -> &[NativeWait] {
        &self.waits
    }

    /// How many of its waits the layer resolved elided or satisfied: they never reach a driver
    /// ([`waits`](Self::waits) leaves them out), and a driver that counts what it did not emit
    /// natively counts them from here.
    pub fn elided_waits(&self) -> usize {
        self.elided_waits
    }

    /// Its epoch on its queue (1 for the queue's first operation): what a driver with native
    /// waits signals on the queue's own timeline when it completes.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Its tag ([`Op::tag`](crate::Op::tag)).
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// Its arguments ([`Op::args`](crate::Op::args)): what the driver hands the kernel (the
    /// NPU driver copies them into each EXEC's argument words, the CPU driver hands them to
    /// each tile). A driver whose recorded work cannot take them ignores them and says so.
    pub fn args(&self) -> Args {
        self.args
    }

    /// The worker issuing it.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Runs `work` on this worker as the operation's body: reports it started, and lets a
    /// shutdown abandon it if it never returns (the worker is then detached, the operation
    /// failed as aborted). Once per operation. `work` must not panic out: contain user code
    /// ([`causeway_runtime::contain`]) and give its failure as the status. A panic that
    /// escapes `work`, or a second call, is a broken contract: the layer records it as a
    /// [`DriverFault`](crate::DriverFault) and fails the queue.
    pub fn run_here(&mut self, work: impl FnOnce() -> OpStatus) -> Issued {
        if std::mem::replace(&mut self.ran, true) {
            self.issuing.driver_fault(DriverCall::Issue, Some(self.tag), Violation::RanTwice);
            return Issued::Finished(OpStatus::Failed(Failure::DeviceLost));
        }
        self.start();
        let mut work = Some(work);
        let mut ended = None;
        let kept =
            self.issuing.run_work(self.tag, self.worker, &mut || ended = work.take().map(contain));
        match ended.filter(|_| kept) {
            Some(Ok(status)) => Issued::Finished(status),
            Some(Err(Panicked)) => {
                self.issuing.driver_fault(DriverCall::Issue, Some(self.tag), Violation::Panicked);
                Issued::Finished(OpStatus::Failed(Failure::DeviceLost))
            }
            None => Issued::Abandoned(TakenOver(())),
        }
    }

    /// Reports the operation started (once; [`run_here`](Self::run_here) does it itself).
    pub(crate) fn start(&mut self) {
        if !std::mem::replace(&mut self.started, true) {
            self.issuing.started(self.tag, self.worker);
        }
    }
}

impl fmt::Debug for Issue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Issue")
            .field("queue", &self.queue.index())
            .field("tag", &self.tag)
            .field("kernel", &self.kernel)
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

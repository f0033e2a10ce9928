//! # causeway-distributed
//!
//! causeway across machines: each MPI rank is a machine (axis `machine` = rank) running its
//! own [`Device`](causeway_device::Device); semaphores shared between ranks carry their
//! values *with the signalling operation's frontier* in the frontier wire format, so a rank
//! that receives a value knows the whole causal history behind it — including work on ranks
//! it never talked to — and pipelines its own work from that knowledge alone.
//!
//! - [`message`]: the per-semaphore messages and their byte encoding (plain data; every
//!   malformation is a typed [`MessageError`], nothing panics).
//! - [`Node`]: one rank — MPI set up over Open MPI (rsmpi), shared semaphores linked
//!   ([`Links`]), submissions that announce exported signals, host waits with timeouts, an
//!   all-reduce collective on a collective channel axis, and MPI progress as a process on the
//!   device's executor (see the [`node`] module).
//! - [`gather`]: the end of a run, every rank's bytes to rank 0 by a deadline
//!   ([`Node::gather_until`]), naming the ranks whose bytes never came.
//! - [`reduce`]: an all-reduce that gives up at a deadline ([`Node::sum_across_ranks_until`]).
//! - `probe` (feature `hop-probe` only): hooks at points of a cross-rank hop's path, for the
//!   instruction count of `scripts/hop_instructions.sh`.
//!
//! MPI is used with `MPI_THREAD_SERIALIZED`; Open MPI 4.1 has no asynchronous progress, which
//! is why progress is an executor process (parked whenever nothing is outstanding).
//!
//! In the guide: `docs/src/mpi.md` in the repository.

pub mod gather;
pub mod message;
pub mod node;
#[cfg(feature = "hop-probe")]
pub mod probe;
pub mod reduce;

pub use gather::{GatherError, Gathered, ANSWER_GRACE};
pub use message::{LinkId, Message, MessageError, MAX_MESSAGE_LEN};
pub use node::{
    CollectiveOpError, HostWaitError, Links, Node, NodeError, ProgressStats, RemoteError,
    CLUSTER_MACHINE,
};
pub use reduce::ReduceError;

//! The end of a run across ranks: every rank's bytes to rank 0 by a deadline
//! ([`Node::gather_until`]), naming the ranks whose bytes never came.
//!
//! A collective cannot do this. An `MPI_Gather`, or even an `MPI_Ibarrier` tested in a loop,
//! does not say which rank is missing, and under `mpirun --enable-recovery` a killed rank
//! leaves it incomplete forever. So the exchange is point to point, on the links' communicator
//! (its errors are returned, not fatal: a send to a dead rank does not abort the sender), under
//! tags of its own that the progress process's receive never matches:
//!
//! 1. every rank but 0 sends rank 0 its bytes (tag `GATHER_TAG`) and posts a receive of rank 0's
//!    one-byte answer (tag `ANSWER_TAG`);
//! 2. rank 0 takes each rank's bytes as they arrive (a matched probe, then a receive of exactly
//!    that many bytes) until every rank's are in or the deadline passes;
//! 3. rank 0 answers every rank whose bytes arrived: 1 when every rank's did (the run's end is
//!    *whole*), 0 when some rank is lost.
//!
//! Every step is non-blocking and tested in a loop against the deadline, with the MPI lock
//! released between tests, so the progress process goes on delivering semaphore values
//! meanwhile: a rank whose share is done still serves the ranks whose shares are not. The
//! answer is also the end's barrier: a rank hears it only once every rank's bytes — sent when
//! each share was done — have reached rank 0. Ranks other than 0 wait for it [`ANSWER_GRACE`]
//! past the deadline, since rank 0 answers at its deadline at the latest.
//!
//! Whether the end was whole decides whether MPI may be finalised: Open MPI's `MPI_Finalize`
//! waits for every rank still alive, and a lost rank that is alive but stuck would hold it
//! forever. A rank whose end was not whole leaves MPI unfinalised ([`Node::leave_within`]).

use std::fmt;
use std::mem::MaybeUninit;
use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

use mpi::ffi::{MPI_Message, MPI_Request, MPI_Status};
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::Equivalence;

use crate::node::Node;

/// The MPI tag of the bytes each rank sends rank 0.
const GATHER_TAG: c_int = 18;
/// The MPI tag of rank 0's one-byte answer to them.
const ANSWER_TAG: c_int = 19;

/// How long past the gather's deadline a rank other than 0 waits for rank 0's answer: rank 0
/// answers by its deadline, and one byte needs far less than this to arrive.
pub const ANSWER_GRACE: Duration = Duration::from_secs(2);

/// How long the exchange sleeps between tests when nothing has completed. Nothing else needs
/// its thread, and a spinning rank would take a core from ranks still running their share (on
/// an oversubscribed machine, the very ranks it waits for).
const POLL_INTERVAL: Duration = Duration::from_micros(200);

/// How [`Node::gather_until`] ended on this rank.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Gathered {
    /// On rank 0.
    Root {
        /// Every rank's bytes by rank, this rank's own first; `None` for each rank whose bytes
        /// had not arrived by the deadline: that rank is lost.
        parts: Vec<Option<Vec<u8>>>,
        /// Every rank's bytes arrived, and every rank was told so: MPI may be finalised.
        whole: bool,
    },
    /// On another rank: rank 0 has this rank's bytes.
    Delivered {
        /// Rank 0 had every rank's bytes: MPI may be finalised.
        whole: bool,
    },
}

/// Why a rank other than 0 gave up in [`Node::gather_until`], or why nothing was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatherError {
    /// The bytes are more than one MPI message can count (their length).
    TooLong(usize),
    /// MPI refused to start the send or the answer's receive.
    Refused,
    /// The bytes had not all left for rank 0 by the deadline (and [`ANSWER_GRACE`]).
    NotTaken,
    /// The bytes left, but rank 0 had not answered by the deadline (and [`ANSWER_GRACE`]).
    NotAnswered,
}

impl fmt::Display for GatherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatherError::TooLong(len) => {
                write!(f, "{len} bytes are more than one MPI message can count")
            }
            GatherError::Refused => f.write_str("MPI refused to start the exchange with rank 0"),
            GatherError::NotTaken => f.write_str("rank 0 had not taken this rank's bytes"),
            GatherError::NotAnswered => {
                f.write_str("rank 0 took this rank's bytes but never answered")
            }
        }
    }
}

impl std::error::Error for GatherError {}

impl Node {
    /// Sends `mine` to rank 0 and, on rank 0, returns every rank's (see the
    /// [module](self)): rank 0 waits for them until `deadline` and names the ranks whose bytes
    /// had not arrived by then; every other rank waits for rank 0's answer until
    /// [`ANSWER_GRACE`] after it. `None` is no deadline. Every rank must call it, once, when
    /// it has nothing left to wait for from the others but this; the progress process goes on
    /// meanwhile.
    pub fn gather_until(
        &self,
        mine: Vec<u8>,
        deadline: Option<Instant>,
    ) -> Result<Gathered, GatherError> {
        if c_int::try_from(mine.len()).is_err() {
            return Err(GatherError::TooLong(mine.len()));
        }
        let answer_deadline = deadline.and_then(|deadline| deadline.checked_add(ANSWER_GRACE));
        if self.rank() == 0 {
            Ok(self.gather_at_root(mine, deadline, answer_deadline))
        } else {
            self.deliver_to_root(mine, answer_deadline)
        }
    }

    fn gather_at_root(
        &self,
        mine: Vec<u8>,
        deadline: Option<Instant>,
        answer_deadline: Option<Instant>,
    ) -> Gathered {
        let size = usize::try_from(self.size()).unwrap_or(1);
        let mut parts: Vec<Option<Vec<u8>>> = vec![None; size];
        parts[0] = Some(mine);
        let mut missing = size - 1;
        // Receives under way, with their sender's rank (`None` for one outside the world,
        // taken only so that MPI lets go of it).
        let mut arriving: Vec<(Option<usize>, Transfer)> = Vec::new();
        while missing > 0 && before(deadline) {
            let completed = self.with_links(|links| {
                while let Some(probed) = probe(links, GATHER_TAG) {
                    let rank = usize::try_from(probed.sender).ok().filter(|&rank| rank < size);
                    if let Some(transfer) = Transfer::receive_matched(probed) {
                        arriving.push((rank, transfer));
                    }
                }
                let mut completed = Vec::new();
                let mut k = 0;
                while k < arriving.len() {
                    if arriving[k].1.test() {
                        completed.push(arriving.swap_remove(k));
                    } else {
                        k += 1;
                    }
                }
                completed
            });
            for (rank, transfer) in completed {
                // A second message from the same rank (no rank sends one) is dropped.
                let Some(part) = rank.and_then(|rank| parts.get_mut(rank)).filter(|p| p.is_none())
                else {
                    continue;
                };
                if let Some(bytes) = transfer.into_bytes() {
                    *part = Some(bytes.into_vec());
                    missing -= 1;
                }
            }
            if missing > 0 {
                std::thread::sleep(POLL_INTERVAL);
            }
        }
        let whole = missing == 0;
        let arrived = parts.iter().skip(1).filter(|part| part.is_some()).count();
        let mut answers: Vec<Transfer> = self.with_links(|links| {
            (1..size)
                .filter(|&rank| parts[rank].is_some())
                .filter_map(|rank| {
                    let rank = c_int::try_from(rank).ok()?;
                    Transfer::send(links, Box::new([u8::from(whole)]), rank, ANSWER_TAG)
                })
                .collect()
        });
        let mut answered = answers.len() == arrived;
        loop {
            let sent = self.with_links(|_| answers.iter_mut().all(Transfer::test));
            if sent {
                break;
            }
            if !before(answer_deadline) {
                answered = false;
                break;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        Gathered::Root { parts, whole: whole && answered }
    }

    fn deliver_to_root(
        &self,
        mine: Vec<u8>,
        answer_deadline: Option<Instant>,
    ) -> Result<Gathered, GatherError> {
        let (send, answer) = self.with_links(|links| {
            let send = Transfer::send(links, mine.into_boxed_slice(), 0, GATHER_TAG);
            (send, Transfer::receive(links, 1, 0, ANSWER_TAG))
        });
        let (Some(mut send), Some(mut answer)) = (send, answer) else {
            return Err(GatherError::Refused);
        };
        loop {
            let (sent, answered) = self.with_links(|_| (send.test(), answer.test()));
            if sent && answered {
                let whole = answer.into_bytes().is_some_and(|bytes| *bytes == [1]);
                return Ok(Gathered::Delivered { whole });
            }
            if !before(answer_deadline) {
                return Err(if sent { GatherError::NotAnswered } else { GatherError::NotTaken });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }
}

/// Whether `deadline` (`None`: none) is still ahead.
fn before(deadline: Option<Instant>) -> bool {
    deadline.is_none_or(|deadline| Instant::now() < deadline)
}

/// A message that has arrived, matched by [`probe`]: it must be received through `message`.
struct Probed {
    sender: c_int,
    message: MPI_Message,
    len: c_int,
}

/// Matches a message of `tag` from any rank that has arrived on `links`, if one has (an
/// `MPI_Improbe`: the message is taken out of MPI's queue for one receive of its own).
fn probe(links: &SimpleCommunicator, tag: c_int) -> Option<Probed> {
    let mut found: c_int = 0;
    // SAFETY: reading an immutable constant that mpi-sys initialises statically.
    let mut message = unsafe { mpi::ffi::RSMPI_MESSAGE_NULL };
    let mut status = MaybeUninit::<MPI_Status>::uninit();
    // SAFETY: `links` is a valid communicator of this process and the caller holds the MPI
    // lock (MPI_THREAD_SERIALIZED); `found`, `message` and `status` are written by MPI.
    let code = unsafe {
        mpi::ffi::MPI_Improbe(
            mpi::ffi::RSMPI_ANY_SOURCE,
            tag,
            links.as_raw(),
            &mut found,
            &mut message,
            status.as_mut_ptr(),
        )
    };
    if code != mpi::ffi::MPI_SUCCESS as c_int || found == 0 {
        return None;
    }
    // SAFETY: MPI_Improbe found a message, and with it wrote the status.
    let status = unsafe { status.assume_init() };
    let mut len: c_int = 0;
    // SAFETY: `status` is the matched message's; `len` is written by MPI.
    unsafe { mpi::ffi::MPI_Get_count(&status, u8::equivalent_datatype().as_raw(), &mut len) };
    // A count MPI cannot say (MPI_UNDEFINED) is received as nothing: the receive then fails as
    // truncated, and the bytes count as never arrived.
    Some(Probed { sender: status.MPI_SOURCE, message, len: len.max(0) })
}

/// One non-blocking send or receive of the exchange and the buffer MPI reads or writes for it.
/// The buffer is freed once the transfer completed; a transfer given up on before (its peer
/// lost mid-transfer) leaks it, since MPI may still read or write it, as the process ends.
struct Transfer {
    request: MPI_Request,
    /// From `Box::into_raw`; MPI's to read or write while `request` is active. Taken back by
    /// [`into_bytes`](Transfer::into_bytes) or the drop of a completed transfer.
    buffer: Option<*mut [u8]>,
    /// `request` completed: MPI is done with `buffer`.
    done: bool,
    /// It completed without an error.
    succeeded: bool,
}

impl Transfer {
    /// Starts sending `bytes` to `rank` under `tag`; `None` when MPI refused.
    fn send(
        links: &SimpleCommunicator,
        bytes: Box<[u8]>,
        rank: c_int,
        tag: c_int,
    ) -> Option<Transfer> {
        Transfer::start(bytes, |buffer, len, request| {
            // SAFETY: `buffer` is `len` bytes that stay allocated while the request is active
            // (see `Transfer::buffer`); `links` is a valid communicator and the caller holds
            // the MPI lock; `request` is written by MPI.
            unsafe {
                mpi::ffi::MPI_Isend(
                    buffer,
                    len,
                    u8::equivalent_datatype().as_raw(),
                    rank,
                    tag,
                    links.as_raw(),
                    request,
                )
            }
        })
    }

    /// Starts receiving `len` bytes from `rank` under `tag`; `None` when MPI refused.
    fn receive(
        links: &SimpleCommunicator,
        len: usize,
        rank: c_int,
        tag: c_int,
    ) -> Option<Transfer> {
        Transfer::start(vec![0; len].into_boxed_slice(), |buffer, len, request| {
            // SAFETY: as in `send`; MPI writes at most `len` bytes into `buffer`.
            unsafe {
                mpi::ffi::MPI_Irecv(
                    buffer,
                    len,
                    u8::equivalent_datatype().as_raw(),
                    rank,
                    tag,
                    links.as_raw(),
                    request,
                )
            }
        })
    }

    /// Starts receiving the message `probed` matched; `None` when MPI refused.
    fn receive_matched(mut probed: Probed) -> Option<Transfer> {
        let len = usize::try_from(probed.len).unwrap_or(0);
        Transfer::start(vec![0; len].into_boxed_slice(), |buffer, len, request| {
            // SAFETY: as in `receive`; `probed.message` is the handle MPI_Improbe matched,
            // received once, here (MPI sets it to MPI_MESSAGE_NULL).
            unsafe {
                mpi::ffi::MPI_Imrecv(
                    buffer,
                    len,
                    u8::equivalent_datatype().as_raw(),
                    &mut probed.message,
                    request,
                )
            }
        })
    }

    /// Hands `buffer` to MPI through `post` (buffer, length, request), which returns MPI's code.
    fn start(
        buffer: Box<[u8]>,
        post: impl FnOnce(*mut c_void, c_int, &mut MPI_Request) -> c_int,
    ) -> Option<Transfer> {
        let len = c_int::try_from(buffer.len()).ok()?;
        let buffer = Box::into_raw(buffer);
        let mut transfer = Transfer {
            request: request_null(),
            buffer: Some(buffer),
            done: false,
            succeeded: false,
        };
        let code = post(buffer.cast::<c_void>(), len, &mut transfer.request);
        if code != mpi::ffi::MPI_SUCCESS as c_int {
            // Not started: MPI never had the buffer, and the drop frees it.
            transfer.done = true;
            return None;
        }
        Some(transfer)
    }

    /// Whether the transfer completed, testing it once if it had not; the caller holds the MPI
    /// lock.
    fn test(&mut self) -> bool {
        if self.done {
            return true;
        }
        let mut completed: c_int = 0;
        // SAFETY: `request` is this transfer's active request (started by `start`, not yet
        // completed: `done` is false) and the caller holds the MPI lock; `completed` is
        // written by MPI, and the status is not asked for.
        let code = unsafe {
            mpi::ffi::MPI_Test(&mut self.request, &mut completed, mpi::ffi::RSMPI_STATUS_IGNORE)
        };
        if completed != 0 {
            self.done = true;
            self.succeeded = code == mpi::ffi::MPI_SUCCESS as c_int;
        }
        self.done
    }

    /// The buffer of a transfer that completed without an error.
    fn into_bytes(mut self) -> Option<Box<[u8]>> {
        if !(self.done && self.succeeded) {
            return None;
        }
        let buffer = self.buffer.take()?;
        // SAFETY: `buffer` came from `Box::into_raw` in `start` and was taken back nowhere else
        // (`take` above); the request completed, so MPI no longer reads or writes it.
        Some(unsafe { Box::from_raw(buffer) })
    }
}

impl Drop for Transfer {
    fn drop(&mut self) {
        if !self.done {
            // MPI may still read or write the buffer: it stays allocated.
            return;
        }
        if let Some(buffer) = self.buffer.take() {
            // SAFETY: as in `into_bytes`: from `Box::into_raw`, taken back only here, and MPI is
            // done with it (the request completed, or was never started).
            drop(unsafe { Box::from_raw(buffer) });
        }
    }
}

/// `MPI_REQUEST_NULL`: no request.
fn request_null() -> MPI_Request {
    // SAFETY: reading an immutable constant that mpi-sys initialises statically.
    unsafe { mpi::ffi::RSMPI_REQUEST_NULL }
}

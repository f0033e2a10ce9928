//! Frontiers and axes: `cw_axis_make`, `cw_frontier_*`.

use causeway_core::axis::{Axis, Domain};
use causeway_core::frontier::Frontier;

use crate::exclusive::Exclusive;
use crate::handle::{Kind, Table};
use crate::status::{boundary, require, write_out, CwStatus, Error};
use crate::types::{axis, CwFrontier};

/// Points a frontier holds at most; merging more evicts the smallest epochs and taints it.
pub const CW_FRONTIER_CAPACITY: usize = 8;
/// Bytes the wire encoding of any frontier takes at most: a 3-byte header, then per point an
/// 8-byte axis and an epoch of up to 10 bytes.
pub const CW_FRONTIER_WIRE_MAX: usize = 147;
/// Frontiers that may exist at once: a firmware's few, a host's many.
const MAX_FRONTIERS: usize = if cfg!(feature = "hosted") { 1024 } else { 16 };

/// The frontiers of the C API.
pub(crate) type CFrontier = Frontier<CW_FRONTIER_CAPACITY>;

const BUSY: &str = "the frontier is in use by another call (one context at a time)";

static FRONTIERS: Table<Exclusive<CFrontier>, MAX_FRONTIERS, { Kind::Frontier as u8 }> =
    Table::new();

/// Runs `f` on the frontier `handle` names.
pub(crate) fn with_frontier<R>(
    handle: CwFrontier,
    f: impl FnOnce(&mut CFrontier) -> R,
) -> Result<R, Error> {
    FRONTIERS.acquire(handle.bits)?.with(BUSY, f)
}

/// A copy of the frontier `handle` names.
pub(crate) fn frontier_value(handle: CwFrontier) -> Result<CFrontier, Error> {
    with_frontier(handle, |frontier| *frontier)
}

/// The kind of timeline an axis belongs to.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CwDomain {
    /// A device or CPU queue: one epoch per submitted operation.
    Queue = 1,
    /// A collective channel shared by every participant of a collective operation.
    Collective = 2,
    /// A host thread (or an interrupt source) acting as a tracked participant.
    Host = 3,
}

/// Makes the bits of the axis (`machine`, `domain`, `ordinal`) into `*out`. `domain` is a
/// `cw_domain` value; `ordinal` must fit in 40 bits. An axis names one timeline forever:
/// never give two timelines the same one.
///
/// # Safety
/// `out` must be NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn cw_axis_make(
    machine: u16,
    domain: u32,
    ordinal: u64,
    out: *mut u64,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let domain = u8::try_from(domain)
            .ok()
            .and_then(Domain::from_code)
            .ok_or(Error::InvalidArgument("domain is not a cw_domain"))?;
        let axis = Axis::try_new(machine, domain, ordinal)
            .ok_or(Error::InvalidArgument("ordinal does not fit in 40 bits"))?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", axis.to_bits()) }
    })
}

/// Creates an empty, untainted frontier.
///
/// # Safety
/// `out` must be NULL or valid for writing a `cw_frontier`.
#[no_mangle]
pub unsafe extern "C" fn cw_frontier_create(out: *mut CwFrontier) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let bits = FRONTIERS
            .create(|_| Exclusive::new(Frontier::new()))
            .ok_or(Error::TableFull(Kind::Frontier))?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", CwFrontier { bits }) }
    })
}

/// Destroys a frontier; its handle is stale from now on.
#[no_mangle]
pub extern "C" fn cw_frontier_destroy(frontier: CwFrontier) -> CwStatus {
    boundary(|| {
        FRONTIERS.destroy(frontier.bits)?;
        Ok(())
    })
}

/// Empties a frontier (and clears its taint).
#[no_mangle]
pub extern "C" fn cw_frontier_clear(frontier: CwFrontier) -> CwStatus {
    boundary(|| with_frontier(frontier, CFrontier::clear))
}

/// Raises `axis` to at least `epoch` in the frontier, inserting it if absent; never lowers an
/// entry, and epoch 0 changes nothing. A full frontier evicts its smallest epoch and becomes
/// tainted.
#[no_mangle]
pub extern "C" fn cw_frontier_insert_or_raise(
    frontier: CwFrontier,
    axis_bits: u64,
    epoch: u64,
) -> CwStatus {
    boundary(|| {
        let axis = axis(axis_bits)?;
        with_frontier(frontier, |frontier| frontier.insert_or_raise(axis, epoch))
    })
}

/// Merges `source` into `target` (component-wise maximum; a tainted source taints the target;
/// overflow evicts the smallest epochs and taints).
#[no_mangle]
pub extern "C" fn cw_frontier_merge(target: CwFrontier, source: CwFrontier) -> CwStatus {
    boundary(|| {
        let source = frontier_value(source)?;
        with_frontier(target, |target| target.merge(&source))
    })
}

/// Makes `target` a copy of `source`.
#[no_mangle]
pub extern "C" fn cw_frontier_copy(target: CwFrontier, source: CwFrontier) -> CwStatus {
    boundary(|| {
        let source = frontier_value(source)?;
        with_frontier(target, |target| *target = source)
    })
}

/// Whether `knowledge` dominates `requirement` (knows every point of it), into `*out`. A
/// tainted requirement is never dominated: an incomplete requirement cannot be proven from
/// knowledge, only by a real wait.
///
/// # Safety
/// `out` must be NULL or valid for writing a `bool`.
#[no_mangle]
pub unsafe extern "C" fn cw_frontier_dominates(
    knowledge: CwFrontier,
    requirement: CwFrontier,
    out: *mut bool,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let requirement = frontier_value(requirement)?;
        let dominates = with_frontier(knowledge, |knowledge| knowledge.dominates(&requirement))?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", dominates) }
    })
}

/// The epoch the frontier holds for `axis` (0 when it holds none), into `*out`.
///
/// # Safety
/// `out` must be NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn cw_frontier_get(
    frontier: CwFrontier,
    axis_bits: u64,
    out: *mut u64,
) -> CwStatus {
    boundary(|| {
        require(out, "out")?;
        let axis = axis(axis_bits)?;
        let epoch = with_frontier(frontier, |frontier| frontier.get(axis).unwrap_or(0))?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(out, "out", epoch) }
    })
}

/// How many points the frontier holds, and whether it is tainted (lost an entry, so it never
/// proves a requirement), into `*len` and `*tainted` (either may be NULL).
///
/// # Safety
/// `len` and `tainted` must each be NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn cw_frontier_info(
    frontier: CwFrontier,
    len: *mut usize,
    tainted: *mut bool,
) -> CwStatus {
    boundary(|| {
        let (count, is_tainted) =
            with_frontier(frontier, |frontier| (frontier.len(), frontier.is_tainted()))?;
        if !len.is_null() {
            // SAFETY: non-null; valid by the caller's contract.
            unsafe { len.write(count) };
        }
        if !tainted.is_null() {
            // SAFETY: non-null; valid by the caller's contract.
            unsafe { tainted.write(is_tainted) };
        }
        Ok(())
    })
}

/// Encodes the frontier into `buffer` (at most `CW_FRONTIER_WIRE_MAX` bytes) and the bytes
/// written into `*written`. A buffer too small is `CW_STATUS_BUFFER_TOO_SMALL`, with the bytes
/// needed in `*written`.
///
/// # Safety
/// `buffer` must be NULL or valid for writing `capacity` bytes; `written` NULL or valid for
/// writing a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cw_frontier_encode(
    frontier: CwFrontier,
    buffer: *mut u8,
    capacity: usize,
    written: *mut usize,
) -> CwStatus {
    boundary(|| {
        require(written, "written")?;
        let value = frontier_value(frontier)?;
        let needed = value.encoded_len();
        if needed > capacity {
            // SAFETY: checked non-null; valid by the caller's contract.
            unsafe { write_out(written, "written", needed) }?;
            return Err(Error::Wire(causeway_core::frontier::WireError::BufferTooSmall { needed }));
        }
        require(buffer, "buffer")?;
        // SAFETY: non-null, and valid for `capacity` bytes by the caller's contract.
        let out = unsafe { core::slice::from_raw_parts_mut(buffer, capacity) };
        let count = value.encode(out).map_err(Error::Wire)?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(written, "written", count) }
    })
}

/// Decodes a frontier from the front of `bytes` into `frontier` (replacing what it held) and the
/// bytes consumed into `*consumed` (trailing bytes are the caller's). Malformed bytes are
/// `CW_STATUS_MALFORMED_WIRE` and leave the frontier as it was.
///
/// # Safety
/// `bytes` must be NULL or valid for reading `len` bytes; `consumed` NULL or valid for writing
/// a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn cw_frontier_decode(
    frontier: CwFrontier,
    bytes: *const u8,
    len: usize,
    consumed: *mut usize,
) -> CwStatus {
    boundary(|| {
        require(consumed, "consumed")?;
        let input: &[u8] = if len == 0 {
            &[]
        } else {
            require(bytes, "bytes")?;
            // SAFETY: non-null, and valid for `len` bytes by the caller's contract.
            unsafe { core::slice::from_raw_parts(bytes, len) }
        };
        let (decoded, used) = CFrontier::decode(input).map_err(Error::Wire)?;
        with_frontier(frontier, |frontier| *frontier = decoded)?;
        // SAFETY: checked non-null; valid by the caller's contract.
        unsafe { write_out(consumed, "consumed", used) }
    })
}

//! The frontier wire encoding, version 1.
//!
//! Frontiers travel between hosts, so the encoding is explicit, little-endian and versioned:
//!
//! ```text
//! offset  size      field
//! 0       1         version (= 1)
//! 1       1         flags: bit 0 = tainted; bits 1..7 reserved, must be 0
//! 2       1         entry count (≤ the receiving frontier's capacity)
//! 3       ...       per entry, in strictly increasing axis order:
//!                     axis   8 bytes, u64 little-endian (a valid axis)
//!                     epoch  1..=10 bytes, unsigned LEB128, minimal, ≥ 1
//! ```
//!
//! Epochs are small in practice (one per submitted operation), so the variable-length epoch
//! keeps a typical 6-entry frontier near 60 bytes. Decoding validates everything and never
//! panics: malformed bytes produce a [`WireError`].

use core::fmt;

use super::{Frontier, EMPTY};
use crate::axis::Axis;

/// The only version this build writes and reads.
pub const WIRE_VERSION: u8 = 1;
const HEADER_LEN: usize = 3;
const FLAG_TAINTED: u8 = 1;
const AXIS_LEN: usize = 8;
const MAX_VARINT_LEN: usize = 10;

/// Why a frontier could not be encoded or decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// The output buffer is too small; `needed` bytes are required.
    BufferTooSmall {
        /// Bytes the encoding needs.
        needed: usize,
    },
    /// The input ends before the encoding does.
    Truncated,
    /// The version byte names an encoding this build does not read.
    UnsupportedVersion(u8),
    /// Reserved flag bits are set.
    ReservedFlags(u8),
    /// More entries than the receiving frontier can hold.
    TooManyEntries {
        /// Entries in the encoding.
        count: usize,
        /// Capacity of the receiving frontier.
        capacity: usize,
    },
    /// Entry `index` carries bits that are not a valid axis.
    InvalidAxis {
        /// Position of the offending entry.
        index: usize,
    },
    /// Entry `index` has an axis smaller than its predecessor's.
    UnsortedAxes {
        /// Position of the offending entry.
        index: usize,
    },
    /// Entry `index` repeats its predecessor's axis.
    DuplicateAxis {
        /// Position of the offending entry.
        index: usize,
    },
    /// Entry `index` has epoch 0 (absent entries are not encoded).
    ZeroEpoch {
        /// Position of the offending entry.
        index: usize,
    },
    /// Entry `index` has an epoch that is not a minimal LEB128 encoding of a u64.
    MalformedEpoch {
        /// Position of the offending entry.
        index: usize,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WireError::BufferTooSmall { needed } => {
                write!(f, "output buffer too small: {needed} bytes needed")
            }
            WireError::Truncated => f.write_str("frontier encoding is truncated"),
            WireError::UnsupportedVersion(v) => write!(f, "unsupported frontier wire version {v}"),
            WireError::ReservedFlags(flags) => {
                write!(f, "reserved frontier flag bits set: {flags:#04x}")
            }
            WireError::TooManyEntries { count, capacity } => {
                write!(f, "{count} frontier entries exceed capacity {capacity}")
            }
            WireError::InvalidAxis { index } => write!(f, "entry {index}: invalid axis"),
            WireError::UnsortedAxes { index } => write!(f, "entry {index}: axes out of order"),
            WireError::DuplicateAxis { index } => write!(f, "entry {index}: duplicate axis"),
            WireError::ZeroEpoch { index } => write!(f, "entry {index}: epoch 0"),
            WireError::MalformedEpoch { index } => write!(f, "entry {index}: malformed epoch"),
        }
    }
}

impl core::error::Error for WireError {}

fn varint_len(mut value: u64) -> usize {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

/// Reads a minimal LEB128 u64 from the front of `bytes`; `None` on truncation, overflow or a
/// non-minimal form. Returns the value and the bytes consumed.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (k, &byte) in bytes.iter().take(MAX_VARINT_LEN).enumerate() {
        let payload = u64::from(byte & 0x7f);
        let shift = 7 * k as u32;
        if shift == 63 && payload > 1 {
            return None;
        }
        value |= payload << shift;
        if byte & 0x80 == 0 {
            // A zero final byte after the first is padding: not minimal.
            return (k == 0 || byte != 0).then_some((value, k + 1));
        }
    }
    None
}

impl<const N: usize> Frontier<N> {
    /// Bytes [`encode`](Self::encode) writes for this frontier.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN
            + self.epochs[..self.len()].iter().map(|&e| AXIS_LEN + varint_len(e)).sum::<usize>()
    }

    /// Writes the wire encoding into the front of `out`, returning the bytes written.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let needed = self.encoded_len();
        let Some(out) = out.get_mut(..needed) else {
            return Err(WireError::BufferTooSmall { needed });
        };
        out[0] = WIRE_VERSION;
        out[1] = if self.tainted { FLAG_TAINTED } else { 0 };
        out[2] = self.len;
        let mut at = HEADER_LEN;
        for (&axis, &epoch) in self.axes[..self.len()].iter().zip(&self.epochs[..self.len()]) {
            out[at..at + AXIS_LEN].copy_from_slice(&axis.to_le_bytes());
            at += AXIS_LEN;
            let mut rest = epoch;
            loop {
                let byte = (rest & 0x7f) as u8;
                rest >>= 7;
                out[at] = if rest == 0 { byte } else { byte | 0x80 };
                at += 1;
                if rest == 0 {
                    break;
                }
            }
        }
        Ok(at)
    }

    /// Decodes a frontier from the front of `bytes`, returning it and the bytes consumed.
    ///
    /// Trailing bytes are left for the caller (frontiers are often framed inside larger
    /// messages). Every malformation is reported as a [`WireError`]; nothing panics.
    pub fn decode(bytes: &[u8]) -> Result<(Frontier<N>, usize), WireError> {
        let header: [u8; HEADER_LEN] =
            bytes.get(..HEADER_LEN).and_then(|h| h.try_into().ok()).ok_or(WireError::Truncated)?;
        let [version, flags, count] = header;
        if version != WIRE_VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        if flags & !FLAG_TAINTED != 0 {
            return Err(WireError::ReservedFlags(flags));
        }
        let count = usize::from(count);
        if count > N {
            return Err(WireError::TooManyEntries { count, capacity: N });
        }
        let mut frontier = Frontier::<N>::new();
        frontier.tainted = flags & FLAG_TAINTED != 0;
        let mut at = HEADER_LEN;
        for index in 0..count {
            let axis_bytes: [u8; AXIS_LEN] = bytes
                .get(at..at + AXIS_LEN)
                .and_then(|a| a.try_into().ok())
                .ok_or(WireError::Truncated)?;
            at += AXIS_LEN;
            let bits = u64::from_le_bytes(axis_bytes);
            if bits == EMPTY || Axis::from_bits(bits).is_none() {
                return Err(WireError::InvalidAxis { index });
            }
            if index > 0 {
                let previous = frontier.axes[index - 1];
                if bits == previous {
                    return Err(WireError::DuplicateAxis { index });
                }
                if bits < previous {
                    return Err(WireError::UnsortedAxes { index });
                }
            }
            let rest = &bytes[at..];
            let (epoch, used) = match read_varint(rest) {
                Some(decoded) => decoded,
                None if rest.len() < MAX_VARINT_LEN && rest.iter().all(|b| b & 0x80 != 0) => {
                    return Err(WireError::Truncated)
                }
                None => return Err(WireError::MalformedEpoch { index }),
            };
            at += used;
            if epoch == 0 {
                return Err(WireError::ZeroEpoch { index });
            }
            frontier.axes[index] = bits;
            frontier.epochs[index] = epoch;
            frontier.len += 1;
        }
        Ok((frontier, at))
    }
}

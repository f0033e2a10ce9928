//! Fuzzes the frontier wire decoder, `Frontier::<N>::decode`, with arbitrary bytes at the
//! capacities 1, 4, 8 and 16.
//!
//! Frontier bytes arrive from other machines, so the decoder must never panic, and it must agree
//! exactly with the format: for every input and capacity its answer (the frontier and the bytes
//! consumed, or the error) equals that of a plain reference reading of the version-1 layout
//! below, one field at a time, first problem wins. Whenever decoding succeeds the frontier keeps
//! its invariants (axes strictly increasing, epochs ≥ 1, at most `N` entries, the tainted flag as
//! sent), `encoded_len` is the byte count consumed, re-encoding writes back exactly those bytes
//! (the encoding is canonical: minimal LEB128, no reserved bits) and a buffer one byte short is
//! refused with `BufferTooSmall`.
#![no_main]

use causeway_core::{Frontier, WireError};
use libfuzzer_sys::fuzz_target;

const VERSION: u8 = 1;
const HEADER_LEN: usize = 3;
const TAINTED: u8 = 1;
const AXIS_LEN: usize = 8;
const DOMAIN_SHIFT: u32 = 40;
/// Domain codes a valid axis carries: queue, collective, host.
const DOMAINS: core::ops::RangeInclusive<u8> = 1..=3;
const MAX_EPOCH_LEN: usize = 10;
/// The longest encoding of the largest capacity fuzzed: every epoch in ten bytes.
const MAX_ENCODED_LEN: usize = HEADER_LEN + 16 * (AXIS_LEN + MAX_EPOCH_LEN);

/// A frontier as the reference reading sees it.
#[derive(Debug, PartialEq)]
struct Decoded {
    tainted: bool,
    entries: Vec<(u64, u64)>,
    consumed: usize,
}

fuzz_target!(|bytes: &[u8]| {
    check_capacity::<1>(bytes);
    check_capacity::<4>(bytes);
    check_capacity::<8>(bytes);
    check_capacity::<16>(bytes);
});

fn check_capacity<const N: usize>(bytes: &[u8]) {
    let decoded = Frontier::<N>::decode(bytes).map(|(frontier, consumed)| {
        check_frontier(&frontier, &bytes[..consumed]);
        Decoded {
            tainted: frontier.is_tainted(),
            entries: frontier.iter().map(|p| (p.axis.to_bits(), p.epoch)).collect(),
            consumed,
        }
    });
    assert_eq!(decoded, reference_decode(bytes, N), "capacity {N}, input {bytes:02x?}");
}

/// Invariants of a frontier decoded from exactly `encoding`.
fn check_frontier<const N: usize>(frontier: &Frontier<N>, encoding: &[u8]) {
    assert!(frontier.len() <= N);
    let points: Vec<_> = frontier.iter().collect();
    assert_eq!(points.len(), frontier.len());
    assert!(points.windows(2).all(|pair| pair[0].axis < pair[1].axis), "{points:?}");
    assert!(points.iter().all(|point| point.epoch >= 1), "{points:?}");
    assert_eq!(frontier.is_tainted(), encoding[1] & TAINTED != 0);

    assert_eq!(frontier.encoded_len(), encoding.len());
    let mut out = [0u8; MAX_ENCODED_LEN];
    let written = frontier.encode(&mut out).expect("the buffer fits every encoding");
    assert_eq!(&out[..written], encoding, "re-encoding is not canonical");
    assert_eq!(
        frontier.encode(&mut out[..encoding.len() - 1]),
        Err(WireError::BufferTooSmall { needed: encoding.len() })
    );
}

/// Reads `bytes` as the version-1 layout says, field by field in order, for a receiver of
/// `capacity` entries:
///
/// ```text
/// version (1 byte, = 1) | flags (1 byte: bit 0 tainted, others 0) | count (1 byte, ≤ capacity)
/// count × [ axis (8 bytes LE, domain code 1..=3 in bits 40..48, strictly increasing)
///           epoch (LEB128, ≤ 10 bytes, fits u64, no zero padding byte, ≥ 1) ]
/// ```
fn reference_decode(bytes: &[u8], capacity: usize) -> Result<Decoded, WireError> {
    let &[version, flags, count, ..] = bytes else {
        return Err(WireError::Truncated);
    };
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    if flags & !TAINTED != 0 {
        return Err(WireError::ReservedFlags(flags));
    }
    let count = usize::from(count);
    if count > capacity {
        return Err(WireError::TooManyEntries { count, capacity });
    }
    let mut entries: Vec<(u64, u64)> = Vec::with_capacity(count);
    let mut at = HEADER_LEN;
    for index in 0..count {
        let axis_bytes = bytes.get(at..at + AXIS_LEN).ok_or(WireError::Truncated)?;
        let axis = u64::from_le_bytes(axis_bytes.try_into().expect("eight bytes"));
        at += AXIS_LEN;
        if !DOMAINS.contains(&((axis >> DOMAIN_SHIFT) as u8)) {
            return Err(WireError::InvalidAxis { index });
        }
        if let Some(&(previous, _)) = entries.last() {
            if axis == previous {
                return Err(WireError::DuplicateAxis { index });
            }
            if axis < previous {
                return Err(WireError::UnsortedAxes { index });
            }
        }
        let (epoch, used) = reference_epoch(&bytes[at..], index)?;
        at += used;
        if epoch == 0 {
            return Err(WireError::ZeroEpoch { index });
        }
        entries.push((axis, epoch));
    }
    Ok(Decoded { tainted: flags & TAINTED != 0, entries, consumed: at })
}

/// One LEB128 epoch from the front of `bytes`: seven bits a byte, low group first, the high bit
/// set on every byte but the last. Collected in a u128 so that overflow is a comparison.
fn reference_epoch(bytes: &[u8], index: usize) -> Result<(u64, usize), WireError> {
    let mut value: u128 = 0;
    for (k, &byte) in bytes.iter().enumerate() {
        if k == MAX_EPOCH_LEN {
            return Err(WireError::MalformedEpoch { index });
        }
        value |= u128::from(byte & 0x7f) << (7 * k);
        if byte & 0x80 == 0 {
            let padded = k > 0 && byte == 0;
            return match u64::try_from(value) {
                Ok(epoch) if !padded => Ok((epoch, k + 1)),
                _ => Err(WireError::MalformedEpoch { index }),
            };
        }
    }
    if bytes.len() >= MAX_EPOCH_LEN {
        Err(WireError::MalformedEpoch { index })
    } else {
        Err(WireError::Truncated)
    }
}

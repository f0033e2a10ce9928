//! The messages one rank sends another about a shared semaphore, and their byte encoding.
//!
//! Plain data: no MPI here, so the codec is tested on its own (and fuzzed by property tests
//! with arbitrary bytes). Every message starts with the same five bytes, so a receiver can
//! name the semaphore of a message whose body is malformed and fail exactly that one:
//!
//! ```text
//! offset  size  field
//! 0       1     kind: 1 = pending, 2 = reached, 3 = failed
//! 1       4     semaphore link id, u32 little-endian
//! 5       ...   body
//!   pending: value u64 LE, origin axis u64 LE, origin epoch u64 LE, the signalling
//!            operation's frontier in the frontier wire format (version 1)
//!   reached: value u64 LE
//!   failed:  failure word u64 LE (`Failure::to_word`)
//! ```
//!
//! A message is exactly its encoding: trailing bytes are an error, so a peer that frames
//! messages differently is caught rather than half-read.

use std::fmt;

use causeway_core::axis::Axis;
use causeway_core::frontier::{Frontier, Point, WireError};
use causeway_core::semaphore::Failure;
use causeway_device::FRONTIER_CAPACITY;

/// Bytes before the body: kind and semaphore id.
const HEADER_LEN: usize = 5;
const KIND_PENDING: u8 = 1;
const KIND_REACHED: u8 = 2;
const KIND_FAILED: u8 = 3;
/// The longest encoding: a pending signal with a full frontier (3 header bytes, then per entry
/// an 8-byte axis and an epoch of at most 10 LEB128 bytes).
pub const MAX_MESSAGE_LEN: usize = HEADER_LEN + 24 + 3 + FRONTIER_CAPACITY * 18;

/// A semaphore shared between ranks, named the same on every rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u32);

/// What one rank tells another about a shared semaphore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// A signal to `value` was submitted by the operation at `origin`, which knew `frontier`:
    /// the receiver records it as pending, so its own operations can import that knowledge
    /// (and be pipelined) before the value is reached.
    Pending {
        /// The semaphore.
        link: LinkId,
        /// The value the signal sets.
        value: u64,
        /// The signalling operation.
        origin: Point,
        /// Everything the signalling operation knew, itself included.
        frontier: Frontier<FRONTIER_CAPACITY>,
    },
    /// The timeline reached `value` (every pending signal up to it completed).
    Reached {
        /// The semaphore.
        link: LinkId,
        /// The value reached.
        value: u64,
    },
    /// The timeline failed.
    Failed {
        /// The semaphore.
        link: LinkId,
        /// The first failure, as the signalling rank recorded it.
        failure: Failure,
    },
}

/// Why bytes from a peer are not a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageError {
    /// Fewer bytes than the header: not even the semaphore can be named.
    NoHeader,
    /// The kind byte names no message.
    UnknownKind {
        /// The semaphore the message was about.
        link: LinkId,
        /// The kind byte.
        kind: u8,
    },
    /// The body ends early.
    Truncated {
        /// The semaphore the message was about.
        link: LinkId,
    },
    /// Bytes follow the end of the message.
    TrailingBytes {
        /// The semaphore the message was about.
        link: LinkId,
    },
    /// The origin's axis bits are not an axis, or its epoch is 0.
    InvalidOrigin {
        /// The semaphore the message was about.
        link: LinkId,
    },
    /// The frontier is malformed.
    Frontier {
        /// The semaphore the message was about.
        link: LinkId,
        /// What is wrong with it.
        error: WireError,
    },
    /// The failure word packs no failure.
    UnknownFailure {
        /// The semaphore the message was about.
        link: LinkId,
        /// The word.
        word: u64,
    },
}

impl MessageError {
    /// The semaphore the bad message was about, when its header could be read.
    pub fn link(&self) -> Option<LinkId> {
        match *self {
            MessageError::NoHeader => None,
            MessageError::UnknownKind { link, .. }
            | MessageError::Truncated { link }
            | MessageError::TrailingBytes { link }
            | MessageError::InvalidOrigin { link }
            | MessageError::Frontier { link, .. }
            | MessageError::UnknownFailure { link, .. } => Some(link),
        }
    }
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessageError::NoHeader => f.write_str("message shorter than its header"),
            MessageError::UnknownKind { link, kind } => {
                write!(f, "semaphore link {}: unknown message kind {kind}", link.0)
            }
            MessageError::Truncated { link } => {
                write!(f, "semaphore link {}: message truncated", link.0)
            }
            MessageError::TrailingBytes { link } => {
                write!(f, "semaphore link {}: bytes after the message", link.0)
            }
            MessageError::InvalidOrigin { link } => {
                write!(f, "semaphore link {}: invalid signalling operation", link.0)
            }
            MessageError::Frontier { link, error } => {
                write!(f, "semaphore link {}: malformed frontier: {error}", link.0)
            }
            MessageError::UnknownFailure { link, word } => {
                write!(f, "semaphore link {}: unknown failure word {word:#x}", link.0)
            }
        }
    }
}

impl std::error::Error for MessageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MessageError::Frontier { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl Message {
    /// The semaphore the message is about.
    pub fn link(&self) -> LinkId {
        match *self {
            Message::Pending { link, .. }
            | Message::Reached { link, .. }
            | Message::Failed { link, .. } => link,
        }
    }

    /// Appends the encoding to `out` (at most [`MAX_MESSAGE_LEN`] bytes).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (kind, link) = match *self {
            Message::Pending { link, .. } => (KIND_PENDING, link),
            Message::Reached { link, .. } => (KIND_REACHED, link),
            Message::Failed { link, .. } => (KIND_FAILED, link),
        };
        out.push(kind);
        out.extend_from_slice(&link.0.to_le_bytes());
        match *self {
            Message::Pending { value, origin, ref frontier, .. } => {
                out.extend_from_slice(&value.to_le_bytes());
                out.extend_from_slice(&origin.axis.to_bits().to_le_bytes());
                out.extend_from_slice(&origin.epoch.to_le_bytes());
                let at = out.len();
                out.resize(at + frontier.encoded_len(), 0);
                // The buffer was sized by `encoded_len` just above, so encoding cannot fail.
                let written = frontier.encode(&mut out[at..]).unwrap_or(0);
                out.truncate(at + written);
            }
            Message::Reached { value, .. } => out.extend_from_slice(&value.to_le_bytes()),
            Message::Failed { failure, .. } => {
                out.extend_from_slice(&failure.to_word().to_le_bytes())
            }
        }
    }

    /// Decodes one message that is exactly `bytes`. Never panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<Message, MessageError> {
        let header: [u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(MessageError::NoHeader)?;
        let [kind, id @ ..] = header;
        let link = LinkId(u32::from_le_bytes(id));
        let mut body = Body { bytes: &bytes[HEADER_LEN..], link };
        let message = match kind {
            KIND_PENDING => {
                let value = body.u64()?;
                let axis = body.u64()?;
                let epoch = body.u64()?;
                let axis = Axis::from_bits(axis)
                    .filter(|_| epoch > 0)
                    .ok_or(MessageError::InvalidOrigin { link })?;
                let (frontier, used) = Frontier::<FRONTIER_CAPACITY>::decode(body.bytes)
                    .map_err(|error| MessageError::Frontier { link, error })?;
                body.bytes = &body.bytes[used..];
                Message::Pending { link, value, origin: Point { axis, epoch }, frontier }
            }
            KIND_REACHED => Message::Reached { link, value: body.u64()? },
            KIND_FAILED => {
                let word = body.u64()?;
                let failure =
                    Failure::from_word(word).ok_or(MessageError::UnknownFailure { link, word })?;
                Message::Failed { link, failure }
            }
            kind => return Err(MessageError::UnknownKind { link, kind }),
        };
        if body.bytes.is_empty() {
            Ok(message)
        } else {
            Err(MessageError::TrailingBytes { link })
        }
    }
}

/// The unread rest of a message body.
struct Body<'b> {
    bytes: &'b [u8],
    link: LinkId,
}

impl Body<'_> {
    fn u64(&mut self) -> Result<u64, MessageError> {
        let (word, rest) = self
            .bytes
            .split_first_chunk::<8>()
            .ok_or(MessageError::Truncated { link: self.link })?;
        self.bytes = rest;
        Ok(u64::from_le_bytes(*word))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_core::axis::Domain;
    use proptest::prelude::*;

    fn frontier(entries: &[(u16, u64, u64)]) -> Frontier<FRONTIER_CAPACITY> {
        let mut frontier = Frontier::new();
        for &(machine, ordinal, epoch) in entries {
            frontier.insert_or_raise(Axis::new(machine, Domain::Queue, ordinal), epoch);
        }
        frontier
    }

    fn pending(link: u32, value: u64, entries: &[(u16, u64, u64)]) -> Message {
        let origin = Point { axis: Axis::new(1, Domain::Queue, 7), epoch: 3 };
        Message::Pending { link: LinkId(link), value, origin, frontier: frontier(entries) }
    }

    #[test]
    fn every_kind_round_trips() {
        let messages = [
            pending(4, 9, &[(0, 1, 2), (1, 7, 3), (3, 2, 300)]),
            Message::Reached { link: LinkId(u32::MAX), value: u64::MAX },
            Message::Failed { link: LinkId(0), failure: Failure::Faulted(0xdead) },
        ];
        for message in messages {
            let mut bytes = Vec::new();
            message.encode(&mut bytes);
            assert!(bytes.len() <= MAX_MESSAGE_LEN);
            assert_eq!(Message::decode(&bytes), Ok(message));
        }
    }

    #[test]
    fn every_truncation_names_the_semaphore_once_the_header_is_whole() {
        let mut bytes = Vec::new();
        pending(11, 5, &[(0, 1, 2), (1, 7, 3)]).encode(&mut bytes);
        for cut in 0..bytes.len() {
            let error = Message::decode(&bytes[..cut]).unwrap_err();
            if cut < HEADER_LEN {
                assert_eq!(error, MessageError::NoHeader);
            } else {
                assert_eq!(error.link(), Some(LinkId(11)), "cut at {cut}: {error}");
            }
        }
    }

    #[test]
    fn malformed_frontier_and_trailing_bytes_are_typed() {
        let mut bytes = Vec::new();
        pending(2, 5, &[(0, 1, 2), (1, 7, 3)]).encode(&mut bytes);
        let mut wrong_version = bytes.clone();
        wrong_version[HEADER_LEN + 24] = 9;
        assert_eq!(
            Message::decode(&wrong_version),
            Err(MessageError::Frontier {
                link: LinkId(2),
                error: WireError::UnsupportedVersion(9)
            })
        );
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(
            Message::decode(&trailing),
            Err(MessageError::TrailingBytes { link: LinkId(2) })
        );
        let mut zero_epoch = bytes;
        zero_epoch[HEADER_LEN + 16..HEADER_LEN + 24].fill(0);
        assert_eq!(
            Message::decode(&zero_epoch),
            Err(MessageError::InvalidOrigin { link: LinkId(2) })
        );
        let mut unknown = vec![KIND_FAILED];
        unknown.extend_from_slice(&3u32.to_le_bytes());
        unknown.extend_from_slice(&(99u64 << 32).to_le_bytes());
        assert_eq!(
            Message::decode(&unknown),
            Err(MessageError::UnknownFailure { link: LinkId(3), word: 99 << 32 })
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(message) = Message::decode(&bytes) {
                // Whatever decodes re-encodes to the same bytes (the encoding is canonical).
                let mut again = Vec::new();
                message.encode(&mut again);
                prop_assert_eq!(again, bytes);
            }
        }

        #[test]
        fn pending_round_trips(
            link in any::<u32>(),
            value in any::<u64>(),
            entries in proptest::collection::vec((0u16..64, 0u64..1000, 1u64..u64::MAX), 0..12),
        ) {
            let message = pending(link, value, &entries);
            let mut bytes = Vec::new();
            message.encode(&mut bytes);
            prop_assert!(bytes.len() <= MAX_MESSAGE_LEN);
            prop_assert_eq!(Message::decode(&bytes), Ok(message));
        }
    }
}

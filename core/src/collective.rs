//! Collective channels: one frontier entry for an N-participant collective.
//!
//! Without a channel, every participant of an all-reduce would have to learn every other
//! participant's queue axis, and an 8-device collective alone would fill a default frontier.
//! A channel owns one axis of [`Domain::Collective`]; each round is one epoch on it, and every
//! participating operation gains the single entry `(channel, round)`.

use core::fmt;

use crate::axis::{Axis, Domain};
use crate::frontier::Point;

/// Why a channel could not be created or advanced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectiveError {
    /// The axis is not of [`Domain::Collective`].
    NotACollectiveAxis,
    /// A collective needs at least one participant.
    NoParticipants,
    /// The round counter would wrap.
    RoundsExhausted,
}

impl fmt::Display for CollectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CollectiveError::NotACollectiveAxis => "collective channels need a collective axis",
            CollectiveError::NoParticipants => "a collective needs at least one participant",
            CollectiveError::RoundsExhausted => "collective round counter exhausted",
        })
    }
}

impl core::error::Error for CollectiveError {}

/// A channel shared by a fixed group of participants.
#[derive(Clone, Debug)]
pub struct CollectiveChannel {
    axis: Axis,
    participants: u16,
    round: u64,
}

/// One round of a collective: the shared point every participant's operation gains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectiveRound {
    point: Point,
    participants: u16,
}

impl CollectiveRound {
    /// The `(channel axis, round)` entry.
    pub fn point(&self) -> Point {
        self.point
    }

    /// How many participants take part.
    pub fn participants(&self) -> u16 {
        self.participants
    }
}

impl CollectiveChannel {
    /// A channel on `axis` for `participants` members.
    pub fn new(axis: Axis, participants: u16) -> Result<CollectiveChannel, CollectiveError> {
        if axis.domain() != Domain::Collective {
            return Err(CollectiveError::NotACollectiveAxis);
        }
        if participants == 0 {
            return Err(CollectiveError::NoParticipants);
        }
        Ok(CollectiveChannel { axis, participants, round: 0 })
    }

    /// The channel's axis.
    pub fn axis(&self) -> Axis {
        self.axis
    }

    /// Starts the next round.
    pub fn begin_round(&mut self) -> Result<CollectiveRound, CollectiveError> {
        let round = self.round.checked_add(1).ok_or(CollectiveError::RoundsExhausted)?;
        self.round = round;
        Ok(CollectiveRound { point: Point::new(self.axis, round), participants: self.participants })
    }
}

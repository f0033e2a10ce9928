//! Timeline words: the 64-bit device words that stand for queues' progress under the
//! stream-memory-operation emulation. One device buffer holds a fixed number of words; a queue
//! takes one when it opens and gives it back when it ends. Plain data, tested everywhere.
//!
//! A word given back may still be the target of a `cuStreamWriteValue64` or
//! `cuStreamWaitValue64` in flight, so it **drains** first: it is handed out again only after
//! the owner says every stream that named it has passed ([`TimelineWords::drained`]), and then
//! starts again from zero ([`TimelineWords::allocate`] says so, the caller resets it).

use std::fmt;

/// A word of the buffer, by index (its byte offset is `8 × index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WordIndex(pub u32);

impl WordIndex {
    /// Its byte offset in the buffer.
    pub fn offset(self) -> u64 {
        8 * u64::from(self.0)
    }
}

/// Why a word could not be allocated or given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WordError {
    /// Every word is in use or draining: backpressure, try again after a drain.
    Full,
    /// The word is not in the state the step needs (given back twice, drained unasked).
    State(WordIndex),
}

impl fmt::Display for WordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WordError::Full => f.write_str("every timeline word is in use or draining"),
            WordError::State(word) => write!(f, "timeline word {} is not in that state", word.0),
        }
    }
}

impl std::error::Error for WordError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WordState {
    Free,
    InUse,
    Draining,
}

/// The allocation state of a buffer's words.
#[derive(Debug)]
pub struct TimelineWords {
    states: Vec<WordState>,
    free: Vec<WordIndex>,
}

impl TimelineWords {
    /// `capacity` words, all free.
    pub fn new(capacity: u32) -> TimelineWords {
        TimelineWords {
            states: vec![WordState::Free; capacity as usize],
            // Lowest index first out.
            free: (0..capacity).rev().map(WordIndex).collect(),
        }
    }

    /// Words of the buffer.
    pub fn capacity(&self) -> usize {
        self.states.len()
    }

    /// Words free now.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// A free word, now in use; its device value must be reset to zero before first use.
    pub fn allocate(&mut self) -> Result<WordIndex, WordError> {
        let word = self.free.pop().ok_or(WordError::Full)?;
        self.states[word.0 as usize] = WordState::InUse;
        Ok(word)
    }

    /// The owner is done with `word`; it drains until [`drained`](Self::drained).
    pub fn give_back(&mut self, word: WordIndex) -> Result<(), WordError> {
        self.step(word, WordState::InUse, WordState::Draining)
    }

    /// No stream operation in flight names `word` any more: it is free again.
    pub fn drained(&mut self, word: WordIndex) -> Result<(), WordError> {
        self.step(word, WordState::Draining, WordState::Free)?;
        self.free.push(word);
        Ok(())
    }

    /// Whether `word` is allocated now.
    pub fn in_use(&self, word: WordIndex) -> bool {
        self.states.get(word.0 as usize) == Some(&WordState::InUse)
    }

    fn step(&mut self, word: WordIndex, from: WordState, to: WordState) -> Result<(), WordError> {
        match self.states.get_mut(word.0 as usize) {
            Some(state) if *state == from => {
                *state = to;
                Ok(())
            }
            _ => Err(WordError::State(word)),
        }
    }
}

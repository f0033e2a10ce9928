//! Speculation: deciding from an operation's frontier whether it depended on rejected work.
//!
//! A speculative producer — a draft model's queue, say — runs ahead of the work that checks
//! it. When the checker accepts the draft up to epoch `a` and rejects the rest, the rejection
//! is a [`Rejection`]: the draft's axis and `a`. Every operation whose causal past holds a
//! draft epoch beyond `a` consumed rejected work; everything else did not. A frontier answers
//! that with one lookup, because a frontier *is* the operation's causal past, summarised per
//! axis: no dependency graph is walked and no list of consumers is kept.
//!
//! # Soundness under eviction
//!
//! A frontier that overflowed forgot entries (it is *tainted*, see [`crate::frontier`]). As
//! knowledge that is harmless, but the question here is one of **absence** — "this operation
//! has no draft epoch beyond `a`" — and absence cannot be read from a frontier that may have
//! forgotten things. A tainted frontier may lack the draft axis altogether, or hold it at an
//! epoch ≤ `a` while a forgotten input held it higher (a merge keeps the larger epoch only of
//! the entries it still has). So a tainted frontier that does not show a rejected epoch is
//! answered [`Dependence::Conservative`]: treat it as dependent, and count it apart. Untainted
//! frontiers are exact both ways.
//!
//! Plain data code, no synchronisation: the device layer applies the decision to its queues.

use crate::axis::Axis;
use crate::frontier::Frontier;

/// A rejected speculation: the speculative producer's axis and the last epoch on it that was
/// accepted. Epochs on `axis` beyond `accepted` are rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rejection {
    /// The speculative producer's axis (a draft queue's).
    pub axis: Axis,
    /// The last accepted epoch on `axis` (0: nothing was accepted).
    pub accepted: u64,
}

/// How an operation stands towards a [`Rejection`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dependence {
    /// Its causal past holds no rejected epoch: it may run.
    Independent,
    /// Its frontier holds the speculative axis beyond the accepted epoch: it consumed rejected
    /// work.
    Rejected,
    /// Its frontier is tainted and shows no rejected epoch: it may have forgotten one, so it
    /// is treated as dependent.
    Conservative,
}

impl Dependence {
    /// Whether the operation must be treated as having consumed rejected work.
    pub const fn is_dependent(self) -> bool {
        !matches!(self, Dependence::Independent)
    }
}

impl Rejection {
    /// The rejection of every epoch on `axis` after `accepted`.
    pub const fn new(axis: Axis, accepted: u64) -> Rejection {
        Rejection { axis, accepted }
    }

    /// How an operation whose frontier is `frontier` stands towards this rejection: one
    /// lookup of the speculative axis, then the taint flag (see the
    /// [module documentation](self)).
    #[inline]
    pub fn classify<const N: usize>(&self, frontier: &Frontier<N>) -> Dependence {
        match frontier.get(self.axis) {
            Some(epoch) if epoch > self.accepted => Dependence::Rejected,
            _ if frontier.is_tainted() => Dependence::Conservative,
            _ => Dependence::Independent,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

//! Points on a cross-rank hop's path that a measurement can hook (feature `hop-probe`, for
//! `scripts/hop_instructions.sh` and its `hop_instructions` example; off in every other
//! build, where none of this exists and the hot path is unchanged).
//!
//! The progress process and the watch callback call the hook installed with [`set_hook`] at
//! each [`Point`], on the thread that passes it (a device worker). With no hook installed a
//! point costs a load and a branch.

use std::sync::OnceLock;

/// A point on a hop's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Point {
    /// The progress process's `MPI_Test` has just completed the receive: a message is in the
    /// inbox, not yet looked at.
    Received,
    /// A reached message is encoded in full and about to be sent (next: rsmpi's send to each
    /// importer, `MPI_Send`).
    SendingReached,
    /// A reached message's sends have returned.
    SentReached,
}

static HOOK: OnceLock<fn(Point)> = OnceLock::new();

/// Installs `hook`, called at every [`Point`] from then on; `false` when one was installed
/// already (it stays).
pub fn set_hook(hook: fn(Point)) -> bool {
    HOOK.set(hook).is_ok()
}

/// Calls the hook, if one is installed, at `point`.
#[inline(always)]
pub(crate) fn hit(point: Point) {
    if let Some(hook) = HOOK.get() {
        hook(point);
    }
}

//! The dependency patterns: which tasks of timestep `t − 1` a task of timestep `t` reads.
//!
//! A task graph is `width` columns (points) by `steps` rows (timesteps). Task `(t, i)` reads the
//! outputs of a set of tasks `(t − 1, j)`, its dependencies; timestep 0 reads nothing. The
//! patterns follow the Task Bench paper (Slaughter et al., SC'20), restated here:
//!
//! - **trivial**: no task depends on any other; every task may run at any time.
//! - **no_comm**: each column is a chain: `(t, i)` depends on `(t − 1, i)` only.
//! - **stencil_1d**: `(t, i)` depends on `i − 1`, `i` and `i + 1`, those inside `0..width`.
//! - **fft**: a butterfly. With `L = ⌈log₂ width⌉` stages (at least one), timestep `t` uses the
//!   distance `d = 2^((t − 1) mod L)`, and `(t, i)` depends on `i` and its partner `i xor d`
//!   when the partner is a column.
//! - **tree**: a binary fan-out that starts again when it has covered the width. With
//!   `L = ⌈log₂ width⌉`, timestep `t` is at phase `p = t mod (L + 1)`; at phase `p` only
//!   columns `0..min(2^p, width)` hold a task. A task at phase `p ≥ 1` depends on its parent
//!   `i / 2`; the root of a new tree (phase 0, column 0) depends on column 0 of the step before,
//!   so the trees form one graph. Columns without a task at a step are left out of every
//!   system and of the checksum.
//! - **nearest (radix r)**: `(t, i)` depends on the `r` columns nearest to it, the window
//!   `i − ⌊(r − 1)/2⌋ ..= i + ⌊r/2⌋` clipped to `0..width` (radix 3 is stencil_1d).
//! - **spread (radix r)**: `(t, i)` depends on `r` columns spread evenly over the width:
//!   `(i + k·s) mod width` for `k` in `0..min(r, width)`, with the stride
//!   `s = max(1, ⌊width / r⌋)`.
//! - **all_to_all**: `(t, i)` depends on every column.
//!
//! Dependencies are listed in increasing column order, each once.

use std::fmt;
use std::str::FromStr;

use crate::TaskBenchError;

/// A dependency pattern (see the module docs for each definition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Pattern {
    /// No dependencies at all.
    Trivial,
    /// Each column a chain.
    NoComm,
    /// The three nearest columns.
    Stencil1d,
    /// A radix-2 butterfly, one stage per timestep.
    Fft,
    /// A binary fan-out restarting once it covers the width.
    Tree,
    /// The `radix` nearest columns.
    Nearest {
        /// Dependencies per task (at most; clipped at the edges).
        radix: u32,
    },
    /// `radix` columns spread evenly over the width.
    Spread {
        /// Dependencies per task (at most the width).
        radix: u32,
    },
    /// Every column.
    AllToAll,
}

impl Pattern {
    /// The patterns the benchmark runs by default, in table order.
    pub const STANDARD: [Pattern; 9] = [
        Pattern::Trivial,
        Pattern::NoComm,
        Pattern::Stencil1d,
        Pattern::Fft,
        Pattern::Tree,
        Pattern::Nearest { radix: 3 },
        Pattern::Nearest { radix: 5 },
        Pattern::Spread { radix: 3 },
        Pattern::AllToAll,
    ];

    /// Checks the pattern's own parameters (a radix of 0 names no dependency at all).
    pub fn validate(self) -> Result<(), TaskBenchError> {
        match self {
            Pattern::Nearest { radix: 0 } | Pattern::Spread { radix: 0 } => {
                Err(TaskBenchError::ZeroRadix { pattern: self })
            }
            _ => Ok(()),
        }
    }

    /// Whether column `point` holds a task at timestep `step` of a graph `width` wide.
    pub fn is_active(self, step: u32, point: u32, width: u32) -> bool {
        match self {
            Pattern::Tree => {
                let phase = step % (stages(width) + 1);
                u64::from(point) < (1u64 << phase).min(u64::from(width))
            }
            _ => point < width,
        }
    }

    /// Appends the dependencies of task `(step, point)` (columns of timestep `step − 1`) to
    /// `into`, in increasing order. Timestep 0 and inactive tasks have none.
    pub fn dependencies(self, step: u32, point: u32, width: u32, into: &mut Vec<u32>) {
        if step == 0 || !self.is_active(step, point, width) {
            return;
        }
        let start = into.len();
        match self {
            Pattern::Trivial => {}
            Pattern::NoComm => into.push(point),
            Pattern::Stencil1d => push_window(point, 1, 1, width, into),
            Pattern::Fft => {
                let distance = 1u32 << ((step - 1) % stages(width));
                into.push(point);
                let partner = point ^ distance;
                if partner < width {
                    into.push(partner);
                }
            }
            Pattern::Tree => {
                let phase = step % (stages(width) + 1);
                into.push(if phase == 0 { 0 } else { point / 2 });
            }
            Pattern::Nearest { radix } => {
                let below = radix.saturating_sub(1) / 2;
                push_window(point, below, radix / 2, width, into);
            }
            Pattern::Spread { radix } => {
                let stride = (width / radix.max(1)).max(1);
                for k in 0..radix.min(width) {
                    let column =
                        (u64::from(point) + u64::from(k) * u64::from(stride)) % u64::from(width);
                    into.push(column as u32);
                }
            }
            Pattern::AllToAll => into.extend(0..width),
        }
        into[start..].sort_unstable();
        let mut kept = start;
        for index in start..into.len() {
            if kept == start || into[index] != into[kept - 1] {
                into[kept] = into[index];
                kept += 1;
            }
        }
        into.truncate(kept);
    }
}

/// `⌈log₂ width⌉`, at least 1: the butterfly's stages and the tree's depth.
fn stages(width: u32) -> u32 {
    width.max(2).next_power_of_two().trailing_zeros()
}

/// Pushes `point − below ..= point + above`, clipped to `0..width`.
fn push_window(point: u32, below: u32, above: u32, width: u32, into: &mut Vec<u32>) {
    let first = point.saturating_sub(below);
    let last = point.saturating_add(above).min(width - 1);
    into.extend(first..=last);
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Trivial => f.write_str("trivial"),
            Pattern::NoComm => f.write_str("no_comm"),
            Pattern::Stencil1d => f.write_str("stencil_1d"),
            Pattern::Fft => f.write_str("fft"),
            Pattern::Tree => f.write_str("tree"),
            Pattern::Nearest { radix } => write!(f, "nearest_{radix}"),
            Pattern::Spread { radix } => write!(f, "spread_{radix}"),
            Pattern::AllToAll => f.write_str("all_to_all"),
        }
    }
}

impl FromStr for Pattern {
    type Err = TaskBenchError;

    /// The names [`Display`](fmt::Display) writes: `stencil_1d`, `nearest_5`, `spread_3`, …
    fn from_str(name: &str) -> Result<Pattern, TaskBenchError> {
        let unknown = || TaskBenchError::UnknownPattern { name: name.to_owned() };
        let with_radix = |prefix: &str| -> Result<Option<u32>, TaskBenchError> {
            match name.strip_prefix(prefix) {
                Some(radix) => radix.parse().map(Some).map_err(|_| unknown()),
                None => Ok(None),
            }
        };
        let pattern = match name {
            "trivial" => Pattern::Trivial,
            "no_comm" => Pattern::NoComm,
            "stencil_1d" => Pattern::Stencil1d,
            "fft" => Pattern::Fft,
            "tree" => Pattern::Tree,
            "all_to_all" => Pattern::AllToAll,
            _ => {
                if let Some(radix) = with_radix("nearest_")? {
                    Pattern::Nearest { radix }
                } else if let Some(radix) = with_radix("spread_")? {
                    Pattern::Spread { radix }
                } else {
                    return Err(unknown());
                }
            }
        };
        pattern.validate()?;
        Ok(pattern)
    }
}

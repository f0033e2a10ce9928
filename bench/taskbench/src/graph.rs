//! A task graph laid out for running (every task's dependencies in one array), the
//! compute-bound kernel every task runs, and the checksum that proves the dependencies held.
//!
//! Task `(t, i)` starts from a seed made of its own coordinates and the outputs of its
//! dependencies, runs the kernel for the chosen number of iterations from it, and stores the
//! result as its output. The checksum folds every task's output; a system that lets a task run
//! before one of its dependencies has stored its output makes that task read the wrong value
//! (outputs start at zero), so its output, and every output downstream, changes.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use causeway::core::CachePadded;

use crate::pattern::Pattern;
use crate::TaskBenchError;

/// The kernel's multiplier and increment (Knuth's MMIX linear congruential generator): each
/// iteration needs the previous one's result, so the work cannot be vectorised or overlapped
/// and its time grows linearly with the iterations.
const MULTIPLIER: u64 = 6364136223846793005;
const INCREMENT: u64 = 1442695040888963407;

/// The compute-bound kernel: `iterations` dependent multiply–add–shift rounds from `seed`.
pub fn kernel(seed: u64, iterations: u32) -> u64 {
    let mut state = seed;
    for _ in 0..iterations {
        state = state.wrapping_mul(MULTIPLIER).wrapping_add(INCREMENT);
        state ^= state >> 29;
    }
    state
}

/// Mixes `value` into `hash` (the finaliser of SplitMix64, so that a changed input changes
/// every bit of the seed).
fn mix(hash: u64, value: u64) -> u64 {
    let mut z = (hash ^ value).wrapping_add(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// A graph's shape and, per task, its dependencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskGraph {
    pattern: Pattern,
    width: u32,
    steps: u32,
    /// Task `(t, i)`'s dependencies are `dependencies[starts[t·width + i]..starts[t·width + i + 1]]`.
    starts: Vec<u32>,
    dependencies: Vec<u32>,
    /// Per timestep, the columns that hold a task.
    active: Vec<Vec<u32>>,
    tasks: u64,
}

impl TaskGraph {
    /// The graph of `pattern`, `width` columns by `steps` timesteps; refuses an empty one.
    pub fn new(pattern: Pattern, width: u32, steps: u32) -> Result<TaskGraph, TaskBenchError> {
        pattern.validate()?;
        if width == 0 {
            return Err(TaskBenchError::ZeroWidth);
        }
        if steps == 0 {
            return Err(TaskBenchError::ZeroSteps);
        }
        let cells = u64::from(width) * u64::from(steps);
        let too_large = || TaskBenchError::TooManyTasks { width, steps };
        let cells = usize::try_from(cells).map_err(|_| too_large())?;
        let mut starts = Vec::with_capacity(cells + 1);
        let mut dependencies = Vec::new();
        let mut active = Vec::with_capacity(steps as usize);
        for step in 0..steps {
            let mut columns = Vec::new();
            for point in 0..width {
                starts.push(u32::try_from(dependencies.len()).map_err(|_| too_large())?);
                pattern.dependencies(step, point, width, &mut dependencies);
                if pattern.is_active(step, point, width) {
                    columns.push(point);
                }
            }
            active.push(columns);
        }
        starts.push(u32::try_from(dependencies.len()).map_err(|_| too_large())?);
        let tasks = active.iter().map(|columns| columns.len() as u64).sum();
        Ok(TaskGraph { pattern, width, steps, starts, dependencies, active, tasks })
    }

    /// The same graph with task `(step, point)`'s first dependency removed: a graph whose
    /// runs must fail the checksum of the intact one (the harness's own tests use it).
    pub fn without_first_dependency(&self, step: u32, point: u32) -> TaskGraph {
        let mut broken = self.clone();
        let task = self.index(step, point);
        let (start, end) = (self.starts[task] as usize, self.starts[task + 1] as usize);
        if start < end {
            broken.dependencies.remove(start);
            broken.starts[task + 1..].iter_mut().for_each(|later| *later -= 1);
        }
        broken
    }

    /// The pattern.
    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// Columns.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Timesteps.
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// Tasks (cells of the grid that hold one).
    pub fn tasks(&self) -> u64 {
        self.tasks
    }

    /// The columns of timestep `step` that hold a task.
    pub fn active(&self, step: u32) -> &[u32] {
        &self.active[step as usize]
    }

    /// Task `(step, point)`'s dependencies: columns of timestep `step − 1`, increasing.
    pub fn dependencies(&self, step: u32, point: u32) -> &[u32] {
        let task = self.index(step, point);
        &self.dependencies[self.starts[task] as usize..self.starts[task + 1] as usize]
    }

    /// The most dependencies one task has.
    pub fn max_dependencies(&self) -> usize {
        self.starts.windows(2).map(|pair| (pair[1] - pair[0]) as usize).max().unwrap_or(0)
    }

    /// The cell index of task `(step, point)` (row-major).
    pub fn index(&self, step: u32, point: u32) -> usize {
        step as usize * self.width as usize + point as usize
    }

    /// Runs task `(step, point)`: reads its dependencies' outputs, runs the kernel and stores
    /// its own output. Relaxed accesses: every system orders a task after its dependencies by
    /// its own synchronisation (that is what is measured); a system that fails to makes the
    /// task read a zero and the checksum change.
    pub fn run_task(&self, outputs: &Outputs, step: u32, point: u32, iterations: u32) {
        let mut seed = mix(u64::from(step) << 32 | u64::from(point), 0);
        for &column in self.dependencies(step, point) {
            // `step ≥ 1` whenever there are dependencies.
            seed = mix(seed, outputs.cells[self.index(step - 1, column)].load(Relaxed));
        }
        outputs.cells[self.index(step, point)].store(kernel(seed, iterations), Relaxed);
    }

    /// The checksum of a run: every task's output folded together with its position.
    pub fn checksum(&self, outputs: &Outputs) -> u64 {
        (0..self.steps)
            .flat_map(|step| self.active(step).iter().map(move |&point| (step, point)))
            .map(|(step, point)| {
                let index = self.index(step, point);
                mix(index as u64, outputs.cells[index].load(Relaxed))
            })
            .fold(0, u64::wrapping_add)
    }

    /// The checksum every system must reach: the graph run in order on this thread.
    pub fn reference_checksum(&self, iterations: u32) -> u64 {
        let outputs = Outputs::new(self);
        for step in 0..self.steps {
            for &point in self.active(step) {
                self.run_task(&outputs, step, point, iterations);
            }
        }
        self.checksum(&outputs)
    }

    /// Compares a run's checksum with the reference.
    pub fn check(&self, outputs: &Outputs, expected: u64) -> Result<(), TaskBenchError> {
        let found = self.checksum(outputs);
        if found == expected {
            Ok(())
        } else {
            Err(TaskBenchError::ChecksumMismatch { expected, found })
        }
    }
}

/// Every task's output, one word per cell of the grid, zero until the task stores it.
///
/// Each word has a cache line of its own ([`CachePadded`]): packed, a timestep's outputs at
/// width 8 filled one line, and two workers running neighbouring columns moved that line
/// between their cores at every task's store (false sharing) — a cost of this harness's
/// layout, not of the system measured, and one Task Bench's MPI ranks, each with its own
/// memory, never pay. Padded, only the reads of a dependency's output cross cores, as they
/// must.
#[derive(Debug)]
pub struct Outputs {
    cells: Vec<CachePadded<AtomicU64>>,
}

impl Outputs {
    /// Zeroed outputs for `graph`.
    pub fn new(graph: &TaskGraph) -> Outputs {
        Outputs { cells: (0..graph.starts.len() - 1).map(|_| CachePadded::default()).collect() }
    }
}

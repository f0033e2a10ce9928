//! Fences: fixed-capacity sets of semaphore points, the unit of wait and signal lists.

use core::fmt;
use core::ptr;

use heapless::Vec;

use crate::semaphore::{Failure, HistoryEntry, HistorySlots, Semaphore};

/// A set of `(semaphore, value)` points, at most `K`, each semaphore at most once.
///
/// As a wait list a fence is reached when every point is; as a signal list it names every
/// value an operation advances. Adding a semaphore that is already present keeps the larger
/// value (a wait on `S ≥ 5` subsumes `S ≥ 3`; an operation signals a timeline once).
/// `H`, `N` and `S` are the semaphores' parameters (see [`Semaphore`]).
pub struct Fence<
    's,
    const K: usize = 4,
    const H: usize = 8,
    const N: usize = 8,
    S = [HistoryEntry<N>; H],
> {
    points: Vec<(&'s Semaphore<H, N, S>, u64), K>,
}

/// A point that did not fit, handed back.
#[derive(Clone, Copy)]
pub struct FenceFull<'s, const H: usize, const N: usize, S = [HistoryEntry<N>; H]> {
    /// The semaphore of the refused point.
    pub semaphore: &'s Semaphore<H, N, S>,
    /// The value of the refused point.
    pub value: u64,
}

impl<const H: usize, const N: usize, S> fmt::Debug for FenceFull<'_, H, N, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FenceFull").field("value", &self.value).finish_non_exhaustive()
    }
}

impl<const H: usize, const N: usize, S> fmt::Display for FenceFull<'_, H, N, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fence is full; point at value {} handed back", self.value)
    }
}

impl<const H: usize, const N: usize, S: HistorySlots<N>> core::error::Error
    for FenceFull<'_, H, N, S>
{
}

impl<'s, const K: usize, const H: usize, const N: usize, S> Fence<'s, K, H, N, S> {
    /// An empty fence (trivially reached).
    pub const fn new() -> Fence<'s, K, H, N, S> {
        Fence { points: Vec::new() }
    }
}

impl<'s, const K: usize, const H: usize, const N: usize, S: HistorySlots<N>> Fence<'s, K, H, N, S> {
    /// Adds `semaphore ≥ value`, or raises its value if the semaphore is already present.
    /// A full fence hands the point back.
    pub fn insert(
        &mut self,
        semaphore: &'s Semaphore<H, N, S>,
        value: u64,
    ) -> Result<(), FenceFull<'s, H, N, S>> {
        if let Some(point) = self.points.iter_mut().find(|(s, _)| ptr::eq(*s, semaphore)) {
            point.1 = point.1.max(value);
            return Ok(());
        }
        self.points
            .push((semaphore, value))
            .map_err(|(semaphore, value)| FenceFull { semaphore, value })
    }

    /// The points, in insertion order.
    pub fn iter(
        &self,
    ) -> impl ExactSizeIterator<Item = (&'s Semaphore<H, N, S>, u64)> + Clone + '_ {
        self.points.iter().copied()
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether the fence has no points.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Whether every point is reached (one atomic load per point). A failed semaphore never
    /// counts as reached: see [`failure`](Self::failure).
    pub fn is_reached(&self) -> bool {
        self.points.iter().all(|(s, v)| s.value() >= *v && s.failure().is_none())
    }

    /// The failure of the first failed semaphore in the fence, if any.
    pub fn failure(&self) -> Option<Failure> {
        self.points.iter().find_map(|(s, _)| s.failure())
    }
}

impl<const K: usize, const H: usize, const N: usize, S> Default for Fence<'_, K, H, N, S> {
    fn default() -> Self {
        Fence::new()
    }
}

impl<const K: usize, const H: usize, const N: usize, S: HistorySlots<N>> fmt::Debug
    for Fence<'_, K, H, N, S>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.points.iter().map(|(s, v)| (s.value(), *v))).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::axis::{Axis, Domain};
    use crate::frontier::{Frontier, Point};
    use crate::scope::{Endpoint, Scope};

    const HERE: Endpoint =
        Endpoint { machine: 0, process: 0, device_group: 0, device: 0, queue: 0 };

    #[test]
    fn duplicate_semaphores_keep_the_larger_value_and_overflow_hands_back() {
        let a: Semaphore<4, 4> = Semaphore::new(0, Scope::DeviceLocal, HERE);
        let b: Semaphore<4, 4> = Semaphore::new(0, Scope::DeviceLocal, HERE);
        let mut fence: Fence<'_, 1, 4, 4> = Fence::new();
        fence.insert(&a, 3).unwrap();
        fence.insert(&a, 5).unwrap();
        fence.insert(&a, 1).unwrap();
        assert_eq!(fence.iter().map(|(_, v)| v).collect::<heapless::Vec<_, 2>>(), [5]);
        let back = fence.insert(&b, 2).unwrap_err();
        assert!(ptr::eq(back.semaphore, &b) && back.value == 2);
    }

    #[test]
    fn reached_only_when_every_point_is_and_nothing_failed() {
        let a: Semaphore<4, 4> = Semaphore::new(0, Scope::DeviceLocal, HERE);
        let b: Semaphore<4, 4> = Semaphore::new(0, Scope::DeviceLocal, HERE);
        let mut fence: Fence<'_, 2, 4, 4> = Fence::new();
        fence.insert(&a, 1).unwrap();
        fence.insert(&b, 1).unwrap();
        let origin = Point::new(Axis::new(0, Domain::Host, 1), 1);
        a.signal(1, origin, &Frontier::<4>::new()).unwrap();
        assert!(!fence.is_reached());
        b.fail(Failure::Aborted);
        assert!(!fence.is_reached());
        assert_eq!(fence.failure(), Some(Failure::Aborted));
    }
}

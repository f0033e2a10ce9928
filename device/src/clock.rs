//! The clock that stamps when running work started — every operation that runs user work and
//! every kernel issued to a driver — so that a shutdown can say how long a stuck one had run
//! ([`StuckOp::running`](crate::StuckOp::running)).
//!
//! A precise monotonic reading (a TSC read through the vDSO) cost about 21 ns on the 2-core
//! virtual machine the benches run on, a sixth of a signal → dependent start; on Linux a start
//! is therefore stamped with the coarse monotonic clock (the monotonic time of the last
//! scheduler tick, read from the vDSO's data page: about 3 ns there), and a duration ends on a
//! precise reading of the same clock. The coarse time is never later than the precise time read
//! after it, so a duration is never under-reported, and over-reported by at most one tick (the
//! coarse clock's resolution, a few milliseconds). Elsewhere both are the precise time since a
//! process-wide origin.

/// Nanoseconds on the start clock now: when work starting now started.
#[cfg(target_os = "linux")]
#[inline]
pub(crate) fn start_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC_COARSE)
}

/// Nanoseconds on the start clock, read precisely: the end of a duration since a [`start_ns`].
#[cfg(target_os = "linux")]
pub(crate) fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// Reads `clock` through the C library, whose vDSO lookup also works under valgrind (rustix's
/// own lookup faults there, which would take the instruction counts of
/// `scripts/instructions.sh` with it).
#[cfg(target_os = "linux")]
fn read(clock: libc::clockid_t) -> u64 {
    let mut time = std::mem::MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `time` is valid for writes of a `timespec` for the whole call, and
    // `clock_gettime` writes nothing else.
    if unsafe { libc::clock_gettime(clock, time.as_mut_ptr()) } != 0 {
        // Both clocks exist on every Linux since 2.6.32; zero would only over-report a
        // duration that started now.
        return 0;
    }
    // SAFETY: `clock_gettime` succeeded, so it wrote the whole `timespec`.
    let time = unsafe { time.assume_init() };
    // The kernel keeps both fields non-negative (seconds since boot, nanoseconds below 10^9),
    // and that many seconds in nanoseconds fit a u64 for 584 years of uptime, so the casts and
    // the arithmetic are exact; wrapping only keeps a debug build from checking what cannot
    // overflow. (Checked conversions cost every start about twelve instructions.)
    (time.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(time.tv_nsec as u64)
}

/// Nanoseconds on the start clock now: when work starting now started.
#[cfg(not(target_os = "linux"))]
pub(crate) fn start_ns() -> u64 {
    now_ns()
}

/// Nanoseconds on the start clock, read precisely: the end of a duration since a [`start_ns`].
#[cfg(not(target_os = "linux"))]
pub(crate) fn now_ns() -> u64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let elapsed = ORIGIN.get_or_init(std::time::Instant::now).elapsed();
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_never_later_than_a_precise_reading_after_it() {
        for _ in 0..if cfg!(miri) { 100 } else { 10_000 } {
            let start = start_ns();
            assert!(start <= now_ns(), "a duration from {start} would be under-reported");
        }
    }
}

//! Pinning the calling thread to one logical processor, for worker pools that want stable
//! caches.
//!
//! Windows names processors through a thread affinity mask: one bit per logical processor of
//! the thread's processor group, so at most `usize::BITS` of them. Machines with more than one
//! group (over 64 logical processors) are outside this function's reach: a CPU index past the
//! mask is refused, never wrapped onto another processor.

use core::fmt;

use windows_sys::Win32::Foundation::GetLastError;
use windows_sys::Win32::System::Threading::{GetCurrentThread, SetThreadAffinityMask};

/// Why a thread could not be pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinError {
    /// The CPU index is beyond what an affinity mask of the thread's processor group can name.
    NoSuchCpu(usize),
    /// Windows refused the mask (the processor does not exist, or lies outside the process's
    /// affinity); the Win32 error code.
    Refused(u32),
}

impl fmt::Display for PinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinError::NoSuchCpu(cpu) => {
                write!(f, "CPU {cpu} is beyond the {} an affinity mask can name", usize::BITS)
            }
            PinError::Refused(code) => write!(f, "Windows refused the affinity (error {code})"),
        }
    }
}

impl std::error::Error for PinError {}

/// Restricts the calling thread to run on logical processor `cpu` of its processor group.
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    let mask = u32::try_from(cpu)
        .ok()
        .and_then(|shift| 1usize.checked_shl(shift))
        .ok_or(PinError::NoSuchCpu(cpu))?;
    // SAFETY: `GetCurrentThread` returns a pseudo-handle that always names the calling thread
    // and needs no closing; `SetThreadAffinityMask` only reads its two arguments.
    let previous = unsafe { SetThreadAffinityMask(GetCurrentThread(), mask) };
    if previous == 0 {
        // SAFETY: reads the calling thread's last-error value, set by the failed call above.
        return Err(PinError::Refused(unsafe { GetLastError() }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use windows_sys::Win32::Foundation::ERROR_INVALID_PARAMETER;
    use windows_sys::Win32::System::Threading::GetCurrentProcessorNumber;

    use super::*;

    fn on_a_fresh_thread<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::spawn(f).join().expect("the pinning thread panicked")
    }

    #[test]
    fn a_pinned_thread_runs_on_its_processor() {
        let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
        for cpu in [0, last] {
            let (pinned, observed) = on_a_fresh_thread(move || {
                let pinned = pin_current_thread(cpu);
                // Yield so the scheduler has had a chance to move the thread.
                std::thread::yield_now();
                // SAFETY: no preconditions; reads the processor this thread runs on.
                (pinned, unsafe { GetCurrentProcessorNumber() })
            });
            assert_eq!(pinned, Ok(()), "pinning to CPU {cpu}");
            assert_eq!(observed as usize, cpu, "a thread pinned to CPU {cpu} ran elsewhere");
        }
    }

    #[test]
    fn cpus_a_mask_cannot_name_or_the_machine_lacks_are_refused() {
        let beyond = usize::BITS as usize;
        assert_eq!(
            on_a_fresh_thread(move || pin_current_thread(beyond)),
            Err(PinError::NoSuchCpu(beyond))
        );
        assert_eq!(
            on_a_fresh_thread(|| pin_current_thread(1 << 20)),
            Err(PinError::NoSuchCpu(1 << 20))
        );
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < usize::BITS as usize {
            assert_eq!(
                on_a_fresh_thread(move || pin_current_thread(cpus)),
                Err(PinError::Refused(ERROR_INVALID_PARAMETER))
            );
        }
    }
}

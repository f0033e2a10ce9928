//! Containing panics from user code — kernels, host functions, stream operations, futures — so
//! that the worker running it survives and the failure becomes the work's outcome instead.
//!
//! An unwinding panic that left a drain call would end the worker thread with the process it
//! was draining still marked running: its dependents would never run and a compute slot would
//! never close. Every place the pool calls code it does not own goes through [`contain`], and
//! the caller turns [`Panicked`] into [`Failure::PANICKED`](causeway_core::Failure::PANICKED)
//! (or a richer error where its API has one).
//!
//! Built with `panic = "abort"`, nothing unwinds and there is nothing to contain: the process
//! ends at the panic, as the profile asks.

use std::any::Any;
use std::mem;
use std::panic::{self, AssertUnwindSafe};

/// The contained code panicked; its payload has been disposed of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Panicked;

/// Runs `f`, turning a panic into `Err(Panicked)`.
///
/// Unwind safety is asserted, not proven: the callers' shared state is atomics whose protocols
/// stay consistent at every step (a claimed tile is simply never completed; a popped operation
/// has already been counted out), and the user's own state is the user's, as with
/// `std::thread::spawn`.
pub fn contain<R>(f: impl FnOnce() -> R) -> Result<R, Panicked> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        discard(payload);
        Panicked
    })
}

/// Drops a panic payload. A payload whose destructor panics in turn is leaked rather than
/// unwound into the worker: a few bytes lost once beat a dead worker.
fn discard(payload: Box<dyn Any + Send>) {
    if let Err(again) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        mem::forget(again);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct PanicsOnDrop;

    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("a payload whose destructor panics (the test expects this)");
        }
    }

    #[test]
    fn values_pass_through_and_panics_become_errors() {
        assert_eq!(contain(|| 7), Ok(7));
        assert_eq!(
            contain(|| -> u32 { panic!("contained (the test expects this)") }),
            Err(Panicked)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "leaks the second payload by design; Miri reports every leak")]
    fn a_payload_that_panics_when_dropped_is_contained_too() {
        let outcome = contain(|| panic::panic_any(PanicsOnDrop));
        assert_eq!(outcome, Err(Panicked));
    }
}

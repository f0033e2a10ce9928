//! Blocking waits for host threads: a thread that must wait for a timeline value arms a
//! timepoint on its own stack whose callback unparks it, then parks (see
//! [`runtime::blocking`](crate::runtime::blocking)).

pub use causeway_runtime::blocking::{wait, wait_until, HostWaitError};

//! A minimal test runner: named cases run in order, each reported over semihosting; the first
//! failed assertion panics, and the image's panic handler reports it and exits non-zero.

use semihosting::println;

/// One test case.
#[derive(Clone, Copy)]
pub struct Case {
    /// What it checks, as the report prints it.
    pub name: &'static str,
    /// The check; panics on failure.
    pub run: fn(),
}

/// Declares a `&[Case]` from function names.
#[macro_export]
macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        &[$($crate::harness::Case { name: stringify!($case), run: $case }),*]
    };
}

/// Runs every group's cases in order, printing each; returns how many ran.
pub fn run(group: &str, cases: &[Case]) -> usize {
    for case in cases {
        println!("test {group}::{} ...", case.name);
        (case.run)();
        println!("test {group}::{} ... ok", case.name);
    }
    cases.len()
}

//! `schedule --run` keeps what the run must keep, not a record per iteration: the peak of live
//! heap bytes while a graph's `while` loop runs 2.5·10^4 iterations (10^5 operations) is the
//! peak at 10^3 iterations, give or take allocator slack. A run that kept every node's record
//! (as it once did, for checking the order afterwards) grows by tens of bytes per operation.
//!
//! The test binary counts live bytes with a global allocator of its own, over every thread
//! (the pool's workers included), so it holds this one test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use causeway_cli::output::Stdout;
use causeway_cli::schedule::parse;
use causeway_cli::schedule::run_and_check;

/// Bytes allocated and not yet freed, by every thread.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most [`LIVE`] has been since it was last reset.
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// `System`, counting live bytes and their peak.
struct PeakCounting;

impl PeakCounting {
    fn grew(by: usize) {
        let live = LIVE.fetch_add(by, Ordering::SeqCst) + by;
        PEAK.fetch_max(live, Ordering::SeqCst);
    }

    fn shrank(by: usize) {
        LIVE.fetch_sub(by, Ordering::SeqCst);
    }
}

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds the
// `GlobalAlloc` contract; counting is a side effect that touches no memory handed out.
unsafe impl GlobalAlloc for PeakCounting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract, forwarded unchanged.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            PeakCounting::grew(layout.size());
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc_zeroed`'s contract, forwarded unchanged.
        let block = unsafe { System.alloc_zeroed(layout) };
        if !block.is_null() {
            PeakCounting::grew(layout.size());
        }
        block
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract (`ptr` came from this allocator, which
        // is `System` underneath), forwarded unchanged.
        let block = unsafe { System.realloc(ptr, layout, new_size) };
        if !block.is_null() {
            PeakCounting::grew(new_size);
            PeakCounting::shrank(layout.size());
        }
        block
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `dealloc`'s contract (`ptr` came from `System` above).
        unsafe { System.dealloc(ptr, layout) };
        PeakCounting::shrank(layout.size());
    }
}

#[global_allocator]
static GLOBAL: PeakCounting = PeakCounting;

/// The peak of live heap bytes above those live before it, while `schedule --run` runs
/// `graphs/while-refine.toml` (its work made zero-length) for `iterations` iterations and
/// checks every dependency.
fn peak_growth(iterations: u64) -> usize {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../graphs/while-refine.toml");
    let source = std::fs::read_to_string(&path).expect("the bundled graph");
    let source = source
        .replace("condition = \"residual > 10\"", &format!("condition = \"passes < {iterations}\""))
        .replace("us = ", "us = 0 # ")
        .replace("update = \"residual /= 3\"", "update = \"residual -= 1\"");
    let file = parse(&path, &source).expect("the graph loads");
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let exit = run_and_check(&file, Duration::from_secs(300), &mut Stdout::new());
    assert_eq!(exit, std::process::ExitCode::SUCCESS, "every dependency holds");
    PEAK.load(Ordering::SeqCst) - before
}

#[test]
fn a_loop_of_ten_to_the_fifth_operations_peaks_where_one_of_a_thousand_does() {
    let small = peak_growth(1_000);
    let large = peak_growth(25_000);
    println!("peak live heap above the start: {small} B at 10^3 iterations, {large} B at 2.5·10^4");
    // 24 000 more iterations of four nodes: a record of 16 bytes or more per node run would
    // add 1.5 MB. Allowed: 64 KiB of allocator and scheduling slack.
    assert!(
        large <= small + 64 * 1024,
        "peak live heap grew from {small} B to {large} B with the iterations"
    );
}

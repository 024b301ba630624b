//! The counting global allocator of the test binaries that measure what decoding
//! allocates, and the one way they read it.
#![allow(dead_code, unreachable_pub)]

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes allocated while `f` runs (cumulative, reallocation growth included: an upper
/// bound of the peak) — the least of three runs. The counter is process-wide and the
/// test harness's own thread may allocate during a run (reporting another test's
/// result), which only ever adds bytes; `f` allocates the same on every run, so the
/// least is its own cost and a real overrun still shows in every run.
pub fn allocated<T>(mut f: impl FnMut() -> T) -> (T, usize) {
    let mut least = usize::MAX;
    let mut out = None;
    for _ in 0..3 {
        let region = Region::new(GLOBAL);
        let value = f();
        least = least.min(region.change().bytes_allocated);
        out = Some(value);
    }
    (out.expect("ran three times"), least)
}

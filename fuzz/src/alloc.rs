//! A counting global allocator for every fuzz binary, to measure what decoding
//! allocates.
//!
//! libFuzzer runs the target on one thread, so nothing else allocates while a region
//! is measured.

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Runs `f` and returns its result with the bytes allocated meanwhile (cumulative,
/// reallocation growth included: an upper bound of the peak).
pub fn allocated<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let region = Region::new(GLOBAL);
    let out = f();
    (out, region.change().bytes_allocated)
}

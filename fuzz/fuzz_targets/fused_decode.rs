//! Bytes as one frame body: the single-pass limit-checking decode against the
//! pre-scan + prost; see `iop_fuzz::targets::fused_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iop_fuzz::targets::fused_decode::run(data));

//! Raw bytes, cut into fuzzer-chosen reads, into a `FrameDecoder`; see
//! `iop_fuzz::targets::frame_decode`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iop_fuzz::targets::frame_decode::run(data));

//! Bytes as one frame body: pre-scan, decode, encode, decode; see
//! `iop_fuzz::targets::envelope_roundtrip`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iop_fuzz::targets::envelope_roundtrip::run(data));

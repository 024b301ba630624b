//! Raw bytes into one Control Plane connection; see
//! `iop_fuzz::targets::cp_session_bytes`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iop_fuzz::targets::cp_session_bytes::run(data));

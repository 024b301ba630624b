//! Raw bytes into an Edge's session with its CP; see
//! `iop_fuzz::targets::edge_session_bytes`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| iop_fuzz::targets::edge_session_bytes::run(data));

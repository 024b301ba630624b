//! Every sending API of both sides through the cross-side oracle; see
//! `iop_fuzz::targets::sender_limits`.
#![no_main]

use iop_fuzz::targets::sender_limits::{Input, run};

libfuzzer_sys::fuzz_target!(|input: Input| run(input));

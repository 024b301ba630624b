//! A Control Plane and an Edge wired together, driven by structured sequences; see
//! `iop_fuzz::targets::pair_sequence`.
#![no_main]

use iop_fuzz::targets::pair_sequence::{Input, run};

libfuzzer_sys::fuzz_target!(|input: Input| run(input));

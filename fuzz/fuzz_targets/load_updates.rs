//! Load updates from a scripted Edge into a Control Plane; see
//! `iop_fuzz::targets::load_updates`.
#![no_main]

use iop_fuzz::targets::load_updates::{Input, run};

libfuzzer_sys::fuzz_target!(|input: Input| run(input));

//! Structured sequences of `NodeRegistry` operations against a reference model; see
//! `iop_fuzz::targets::registry_ops`.
#![no_main]

use iop_fuzz::targets::registry_ops::{Input, run};

libfuzzer_sys::fuzz_target!(|input: Input| run(input));

//! Shared pieces of the iop fuzz targets.
//!
//! Each target's logic lives here as a `run(data)` function (the files under
//! `fuzz_targets/` only hand libFuzzer's input to it), so that the logic is
//! type-checked and linted like ordinary code and can be replayed outside libFuzzer.
//!
//! Every target asserts properties, not just "no panic": a failed assertion is a
//! crash that libFuzzer saves under `fuzz/artifacts/<target>/`.
#![forbid(unsafe_code)]

pub mod alloc;
pub mod frames;
pub mod seeds;
pub mod session;
pub mod split;
pub mod targets;

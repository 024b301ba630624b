//! The simulation's only source of randomness: the core's seeded SplitMix64.

/// The simulation's generator: [`SplitMix64`](crate::rng::SplitMix64), the same seed
/// giving the same numbers on every platform and build.
pub type SimRng = crate::rng::SplitMix64;

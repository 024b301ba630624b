//! The core's one source of randomness: SplitMix64 from a seed the caller gives
//! (`EdgeConfig::seed`, a simulation's seed), so the same inputs give the same
//! outputs on every platform and build. Nothing here reads a clock or the OS.
//!
//! ```
//! use iop_core::rng::SplitMix64;
//!
//! let mut a = SplitMix64::new(7);
//! let mut b = SplitMix64::new(7);
//! assert_eq!(a.next_u64(), b.next_u64());
//! assert!((3..=9).contains(&a.range(3, 9)));
//! ```

/// SplitMix64: small, fast, and the same sequence for the same seed everywhere.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix_state(self.state)
    }

    /// A number uniform in `[0, max]` (inclusive), by rejection so there is no bias.
    pub fn uniform_inclusive(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            return self.next_u64();
        }
        let range = max + 1;
        // Largest multiple of `range` that fits in u64's value count.
        let zone = u64::MAX - (u64::MAX - range + 1) % range;
        loop {
            let x = self.next_u64();
            if x <= zone {
                return x % range;
            }
        }
    }

    /// A number in `lo..=hi` (`lo` when `hi < lo`). This and the two below reduce
    /// by a modulo: cheap, and a bias of at most one in 2^64 / span, which
    /// simulations and jitter do not mind.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        match (hi - lo).checked_add(1) {
            Some(n) => lo + self.next_u64() % n,
            None => self.next_u64(),
        }
    }

    /// An index below `len` (0 when `len` is 0).
    pub fn index(&mut self, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        (self.next_u64() % len as u64) as usize
    }

    /// True with probability `num / den` (never when `den` is 0).
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        den > 0 && self.next_u64() % den < num
    }
}

/// SplitMix64's increment.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix_state(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A well-spread 64-bit function of `x` (the first output of a generator seeded with
/// `x`): for a spread that must follow from an id, not from a sequence.
pub fn mix(x: u64) -> u64 {
    mix_state(x.wrapping_add(GOLDEN_GAMMA))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_known_first_value() {
        let mut a = SplitMix64::new(0);
        let mut b = SplitMix64::new(0);
        // Reference value of splitmix64 seeded with 0.
        assert_eq!(a.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(mix(0), 0xE220_A839_7B1D_CDAF);
        b.next_u64();
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn ranges_hold() {
        let mut r = SplitMix64::new(7);
        for max in [0, 1, 2, 3, 250, 1_000_000] {
            for _ in 0..200 {
                assert!(r.uniform_inclusive(max) <= max);
            }
        }
        for _ in 0..100 {
            assert!((3..=9).contains(&r.range(3, 9)));
            assert!(r.index(5) < 5);
        }
        assert_eq!(r.range(5, 5), 5);
        assert_eq!(r.index(0), 0);
        assert!(!r.chance(1, 0));
        assert!(r.chance(1, 1));
    }
}

//! A stable hash of everything a simulation emits, to prove runs are identical.

/// 64-bit FNV-1a: stable across runs, builds and platforms (unlike
/// `std::collections::hash_map::DefaultHasher`, which is free to change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self::new()
    }
}

impl Fnv1a {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// The hash of nothing.
    pub fn new() -> Self {
        Self(Self::OFFSET)
    }

    /// Mixes in `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// Mixes in a number (little-endian bytes).
    pub fn write_u64(&mut self, n: u64) {
        self.write(&n.to_le_bytes());
    }

    /// Mixes in one record: its length first, so records cannot run into each other.
    pub fn record(&mut self, tag: u8, bytes: &[u8]) {
        self.write(&[tag]);
        self.write_u64(bytes.len() as u64);
        self.write(bytes);
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_fnv1a_vectors() {
        assert_eq!(Fnv1a::new().finish(), 0xcbf2_9ce4_8422_2325);
        let mut h = Fnv1a::new();
        h.write(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
        let mut h = Fnv1a::new();
        h.write(b"foobar");
        assert_eq!(h.finish(), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn records_are_delimited() {
        let mut a = Fnv1a::new();
        a.record(1, b"ab");
        a.record(1, b"c");
        let mut b = Fnv1a::new();
        b.record(1, b"a");
        b.record(1, b"bc");
        assert_ne!(a.finish(), b.finish());
    }
}

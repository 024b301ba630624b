//! The table of connections, keyed by the runtime's [`ConnectionId`]s.
//!
//! A hash table, so that every input's lookup costs the same whatever the number of
//! connections (a B-tree compares ids on each of its levels, and a status exchange
//! looks its connection up several times: BENCHMARKS.md §10). Connection ids are
//! chosen by the runtime, never by a peer, so a plain multiplicative hash (no
//! per-process random key) spreads them without exposing the table to collisions an
//! attacker could choose, and keeps the core deterministic.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::ids::ConnectionId;
use super::session::Session;

/// Every connection the Control Plane holds (boxed: the table moves its entries
/// when it grows).
pub(crate) type ConnTable = HashMap<ConnectionId, Box<Session>, BuildHasherDefault<IdHasher>>;

/// Hashes an id issued locally — a [`ConnectionId`] (the runtime's counter), a
/// [`RequestId`](super::RequestId) (the core's) — by one multiplication with the
/// 64-bit golden ratio: consecutive ids land in consecutive buckets, and the high bits
/// a table uses to tell entries apart are well mixed. Not for keys a peer chooses: it
/// has no key to resist chosen collisions.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = (self.0 ^ id).wrapping_mul(GOLDEN);
    }

    /// Anything else written (not used by `ConnectionId`, whose `Hash` writes one
    /// `u64`), eight bytes at a time.
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word.get_mut(..chunk.len())
                .unwrap_or_default()
                .copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn a_connection_id_hashes_as_its_u64_and_consecutive_ids_spread() {
        let build = BuildHasherDefault::<IdHasher>::default();
        let mut direct = IdHasher::default();
        direct.write_u64(42);
        assert_eq!(build.hash_one(ConnectionId(42)), direct.finish());
        // The top 7 bits (what hashbrown compares first) of 1 000 consecutive ids
        // take many values; the low bits (the bucket) are all distinct.
        let hashes: Vec<u64> = (0..1_000)
            .map(|i| build.hash_one(ConnectionId(i)))
            .collect();
        let tops: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(tops.len() > 100, "{} distinct top-7-bit values", tops.len());
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        assert_eq!(buckets.len(), 1_000);
    }

    #[test]
    fn bytes_are_hashed_too() {
        let mut a = IdHasher::default();
        a.write(b"0123456789");
        let mut b = IdHasher::default();
        b.write(b"0123456788");
        assert_ne!(a.finish(), b.finish());
    }
}

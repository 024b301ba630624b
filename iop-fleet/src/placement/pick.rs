//! How a reserving placement chooses the provider it reserves ([`Pick`]).
//!
//! Best first is right for routers that all place through one Control Plane: each
//! reservation is counted before the next placement reads the view. Routers that
//! place through several replicas at once read views that are alike — every replica
//! sees the whole fleet — and rank alike, so they all reserve the same best providers
//! before the replicas tell each other their picks; a provider overfilled that way
//! queues the surplus. Drawing the pick at random, weighted by free slots, spreads
//! their picks over the providers with room in proportion to that room (the routing
//! simulation in docs/benchmarks/load-plane.md §13c measures both).

use super::book::Rank;
use super::query::MAX_PLACEMENT_LIMIT;

/// The most candidates a spread pick draws among: the best this many current ones,
/// whatever the query's limit (no less than [`MAX_PLACEMENT_LIMIT`], so that every
/// candidate listed is among them).
pub const SPREAD_POOL: usize = 1000;
const _: () = assert!(SPREAD_POOL >= MAX_PLACEMENT_LIMIT);

/// How a reserving placement chooses the candidate it reserves (and lists first). A
/// placement that does not reserve lists in rank order whatever the pick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pick {
    /// The best candidate: the most free slots, then the shortest queue, then the
    /// freshest numbers.
    #[default]
    Best,
    /// One candidate drawn at random, weighted by its free slots, among the best
    /// [`SPREAD_POOL`] whose numbers are current (labels and long context as the query
    /// asks), then the best others up to the limit. For routers placing through several
    /// replicas at once. `random` is the draw (uniform over `u64`): the fleet reads no
    /// randomness of its own.
    Spread {
        /// A uniformly random number.
        random: u64,
    },
}

impl Pick {
    /// Whether it draws (and so needs the pool read).
    pub(super) fn draws(self) -> bool {
        matches!(self, Pick::Spread { .. })
    }

    /// Where in `pool` (ranks, best first) the pick falls: the first for
    /// [`Best`](Pick::Best), a draw weighted by free slots for
    /// [`Spread`](Pick::Spread); `None` when the pool is empty.
    pub(super) fn choose(self, pool: &[Rank]) -> Option<usize> {
        let Pick::Spread { random } = self else {
            return (!pool.is_empty()).then_some(0);
        };
        let total: u64 = pool.iter().map(|r| u64::from(r.free.0)).sum();
        if total == 0 {
            return (!pool.is_empty()).then_some(0);
        }
        // A point in [0, total), scaled rather than reduced modulo total: no bias
        // towards the first.
        let mut point = u64::try_from((u128::from(random) * u128::from(total)) >> 64).unwrap_or(0);
        for (at, r) in pool.iter().enumerate() {
            let free = u64::from(r.free.0);
            if point < free {
                return Some(at);
            }
            point -= free;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;

    use super::*;

    fn rank(slot: u32, free: u32) -> Rank {
        Rank {
            free: Reverse(free),
            queued: 0,
            reported: Reverse(0),
            slot,
            index: 0,
        }
    }

    #[test]
    fn best_takes_the_first() {
        assert_eq!(Pick::Best.choose(&[rank(0, 3), rank(1, 1)]), Some(0));
        assert_eq!(Pick::Best.choose(&[]), None);
    }

    #[test]
    fn spread_draws_in_proportion_to_free_slots() {
        let pool = [rank(0, 4), rank(1, 3), rank(2, 1)];
        // Draws evenly over u64: each is chosen as often as its share of the 8 free
        // slots.
        let draws = 800u64;
        let mut counts = [0u64; 3];
        for i in 0..draws {
            let random = (u64::MAX / draws) * i + u64::MAX / (2 * draws);
            let at = Pick::Spread { random }.choose(&pool).unwrap();
            counts[at] += 1;
        }
        assert_eq!(counts, [400, 300, 100]);
        // The extremes of the draw stay in range.
        assert_eq!(Pick::Spread { random: 0 }.choose(&pool), Some(0));
        assert_eq!(Pick::Spread { random: u64::MAX }.choose(&pool), Some(2));
    }

    #[test]
    fn spread_over_nothing_free_or_nothing_at_all() {
        assert_eq!(Pick::Spread { random: 7 }.choose(&[]), None);
        // Not a pool's state (open ranks have room), but no panic: the first.
        let full = [rank(0, 0), rank(1, 0)];
        assert_eq!(Pick::Spread { random: 7 }.choose(&full), Some(0));
    }
}

//! How a reserving placement chooses the provider it reserves ([`Pick`]).
//!
//! Best first is right for routers that all place through one Control Plane: each
//! reservation is counted before the next placement reads the view. Routers that
//! place through several replicas at once read views that are alike — every replica
//! sees the whole fleet — and rank alike, so they all reserve the same best providers
//! before the replicas tell each other their picks; a provider overfilled that way
//! queues the surplus. Drawing the pick at random, weighted by free slots, spreads
//! their picks over every provider with room in proportion to that room (the routing
//! simulation in docs/benchmarks/load-plane.md §13c measures both).

use super::query::Candidate;

/// How a reserving placement chooses, among the candidates it lists, the one it
/// reserves (and lists first). A placement that does not reserve lists in rank order
/// whatever the pick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pick {
    /// The best candidate: the most free slots, then the shortest queue, then the
    /// freshest numbers.
    #[default]
    Best,
    /// One candidate at random, weighted by its free slots, among those whose numbers
    /// are current (among the stale ones when only stale ones are listed); the rest
    /// stay in rank order behind it. For routers placing through several replicas at
    /// once. `random` is the draw (uniform over `u64`): the fleet reads no randomness
    /// of its own.
    Spread {
        /// A uniformly random number.
        random: u64,
    },
}

impl Pick {
    /// Lists the candidate this pick chooses first; the others keep their order.
    pub(super) fn arrange(self, candidates: &mut [Candidate]) {
        let Pick::Spread { random } = self else {
            return;
        };
        // Stale candidates are listed after every current one.
        let current = candidates.iter().take_while(|c| !c.stale).count();
        let pool = match current {
            0 => candidates.len(),
            n => n,
        };
        let total: u64 = candidates
            .iter()
            .take(pool)
            .map(|c| u64::from(c.free))
            .sum();
        if total == 0 {
            return;
        }
        // A point in [0, total), scaled rather than reduced modulo total: no bias
        // towards the first candidates.
        let mut point = u64::try_from((u128::from(random) * u128::from(total)) >> 64).unwrap_or(0);
        for at in 0..pool {
            let free = candidates.get(at).map_or(0, |c| u64::from(c.free));
            if point < free {
                if let Some(front) = candidates.get_mut(..=at) {
                    front.rotate_right(1);
                }
                return;
            }
            point -= free;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn candidate(id: &str, free: u32, stale: bool) -> Candidate {
        Candidate {
            edge_id: Arc::from(id),
            node_id: "n".into(),
            provider_id: "p".into(),
            capacity: free,
            in_flight: 0,
            queued: 0,
            long_context_capacity: 0,
            long_context_in_flight: 0,
            long_context_queued: 0,
            admission_eligible: true,
            reserved: 0,
            free,
            age_ms: 0,
            stale,
        }
    }

    fn first(pick: Pick, list: &[Candidate]) -> (String, Vec<String>) {
        let mut list = list.to_vec();
        pick.arrange(&mut list);
        let ids: Vec<String> = list.iter().map(|c| c.edge_id.to_string()).collect();
        (ids.first().cloned().unwrap_or_default(), ids)
    }

    #[test]
    fn best_keeps_the_rank_order() {
        let list = [candidate("a", 3, false), candidate("b", 1, false)];
        assert_eq!(first(Pick::Best, &list).1, ["a", "b"]);
    }

    #[test]
    fn spread_draws_in_proportion_to_free_slots_and_keeps_the_rest_in_order() {
        let list = [
            candidate("a", 4, false),
            candidate("b", 3, false),
            candidate("c", 1, false),
            candidate("s", 9, true),
        ];
        // Draws evenly over u64: each candidate is first as often as its share of
        // the 8 free current slots; the stale one never.
        let mut counts = std::collections::BTreeMap::new();
        let draws = 800u64;
        for i in 0..draws {
            let random = (u64::MAX / draws) * i + u64::MAX / (2 * draws);
            let (id, order) = first(Pick::Spread { random }, &list);
            let mut rest: Vec<&String> = order.iter().skip(1).collect();
            rest.sort();
            assert_eq!(rest.len(), 3);
            assert_eq!(order.last().map(String::as_str), Some("s"), "{order:?}");
            *counts.entry(id).or_insert(0u64) += 1;
        }
        assert_eq!(counts.get("a"), Some(&400));
        assert_eq!(counts.get("b"), Some(&300));
        assert_eq!(counts.get("c"), Some(&100));
        assert_eq!(counts.get("s"), None);
        // The extremes of the draw stay in range.
        assert_eq!(first(Pick::Spread { random: 0 }, &list).0, "a");
        assert_eq!(first(Pick::Spread { random: u64::MAX }, &list).0, "c");
        assert_eq!(
            first(Pick::Spread { random: u64::MAX }, &list).1,
            ["c", "a", "b", "s"]
        );
    }

    #[test]
    fn spread_draws_among_the_stale_when_only_stale_are_listed() {
        let list = [candidate("x", 1, true), candidate("y", 1, true)];
        assert_eq!(first(Pick::Spread { random: u64::MAX }, &list).0, "y");
        assert_eq!(
            first(Pick::Spread { random: 0 }, &[]).1,
            Vec::<String>::new()
        );
        // Nothing free to weigh by (not a listed candidate's state, but no panic).
        let empty = [candidate("z", 0, false), candidate("w", 0, false)];
        assert_eq!(first(Pick::Spread { random: 7 }, &empty).1, ["z", "w"]);
    }
}

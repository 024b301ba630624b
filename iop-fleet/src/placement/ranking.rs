//! A ranking of open providers, best first, cheap to change at the fleet's rate.
//!
//! Every load update moves a changed provider from one place in its model's ranking to
//! another, so the ranking takes two changes per changed provider. A sorted tree of
//! every provider pays a search of a tree as deep as the fleet is large for each; here
//! providers are grouped by standing (free slots, queue), few groups, and within a group
//! kept in report order, newest first. A provider reported now goes to the front of its
//! group; one taken out is marked gone and swept when its group holds as many gone as
//! live — neither searches anything as large as the fleet.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use super::book::{Rank, Slot};

/// Where a provider stands: the most free slots first, then the shortest queue.
type Standing = (Reverse<u32>, u32);

/// Its place among those of the same standing: the newest report first, then slot and
/// index (unique).
type Place = (Reverse<u64>, Slot, u32);

/// The open providers of one model (or of its long-context pool), in [`Rank`] order.
#[derive(Debug, Default)]
pub(super) struct Ranking {
    groups: BTreeMap<Standing, Group>,
}

/// The providers of one standing: `places` in order, some of them gone.
#[derive(Debug, Default)]
struct Group {
    places: VecDeque<Place>,
    gone: HashSet<Place, BuildHasherDefault<PlaceHasher>>,
}

impl Ranking {
    /// Files `rank` (not filed already).
    pub(super) fn insert(&mut self, rank: Rank) {
        let (standing, place) = split(rank);
        let group = self.groups.entry(standing).or_default();
        if !group.gone.is_empty() && group.gone.remove(&place) {
            // Filed again where it was: its place stands.
            return;
        }
        match group.places.front() {
            Some(first) if place > *first => {
                let at = group.places.partition_point(|p| *p < place);
                group.places.insert(at, place);
            }
            _ => group.places.push_front(place),
        }
    }

    /// Takes `rank` (filed) out.
    pub(super) fn remove(&mut self, rank: Rank) {
        let (standing, place) = split(rank);
        let Some(group) = self.groups.get_mut(&standing) else {
            return;
        };
        if !group.gone.insert(place) {
            return;
        }
        let live = group.places.len().saturating_sub(group.gone.len());
        if live == 0 {
            self.groups.remove(&standing);
        } else if group.gone.len() > live + 16 {
            let gone = std::mem::take(&mut group.gone);
            group.places.retain(|p| !gone.contains(p));
        }
    }

    /// Those filed, best first.
    pub(super) fn iter(&self) -> impl Iterator<Item = Rank> + '_ {
        self.groups.iter().flat_map(|(&(free, queued), group)| {
            group
                .places
                .iter()
                .filter(|p| group.gone.is_empty() || !group.gone.contains(p))
                .map(move |&(reported, slot, index)| Rank {
                    free,
                    queued,
                    reported,
                    slot,
                    index,
                })
        })
    }
}

fn split(rank: Rank) -> (Standing, Place) {
    (
        (rank.free, rank.queued),
        (rank.reported, rank.slot, rank.index),
    )
}

/// Hashes a [`Place`] by multiplying its words: places are chosen by this Control Plane
/// (its clock, its slots), never by a peer, so no keyed hash is needed.
#[derive(Debug, Default)]
struct PlaceHasher(u64);

impl Hasher for PlaceHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn rank(free: u32, queued: u32, reported: u64, slot: Slot, index: u32) -> Rank {
        Rank {
            free: Reverse(free),
            queued,
            reported: Reverse(reported),
            slot,
            index,
        }
    }

    #[test]
    fn ranks_by_free_then_queue_then_newest_report() {
        let mut r = Ranking::default();
        let a = rank(2, 0, 10, 0, 0);
        let b = rank(3, 1, 5, 1, 0);
        let c = rank(2, 0, 20, 2, 0);
        let d = rank(2, 0, 20, 1, 3);
        for x in [a, b, c, d] {
            r.insert(x);
        }
        assert_eq!(r.iter().collect::<Vec<_>>(), [b, d, c, a]);
        r.remove(d);
        r.insert(d);
        r.remove(b);
        assert_eq!(r.iter().collect::<Vec<_>>(), [d, c, a]);
        assert_eq!(r.iter().count(), 3);
    }

    proptest! {
        /// Any sequence of filings and removals ranks as a sorted set of the same
        /// ranks would.
        #[test]
        fn ranks_as_a_sorted_set(ops in prop::collection::vec(
            (any::<bool>(), 0u32..3, 0u32..2, 0u64..6, 0u32..4, 0u32..2), 0..300)
        ) {
            let mut r = Ranking::default();
            let mut truth = BTreeSet::new();
            for (add, free, queued, reported, slot, index) in ops {
                let x = rank(free, queued, reported, slot, index);
                if add && truth.insert(x) {
                    r.insert(x);
                } else if !add && truth.remove(&x) {
                    r.remove(x);
                }
                prop_assert_eq!(r.iter().count(), truth.len());
            }
            prop_assert_eq!(r.iter().collect::<Vec<_>>(), truth.into_iter().collect::<Vec<_>>());
        }
    }
}

//! A ranking of open providers, best first, cheap to change at the fleet's rate.
//!
//! Every load update moves a changed provider from one place in its model's ranking to
//! another, so the ranking takes two changes per changed provider. A sorted tree of
//! every provider pays a search of a tree as deep as the fleet is large for each; here
//! providers are grouped by standing (free slots, queue), few groups, and within a group
//! kept in report order, newest first. A provider reported now goes to the front of its
//! group; one taken out is marked gone and swept when its group holds as many gone as
//! live (taken off instead at either end, where the best are taken from) — neither
//! searches anything as large as the fleet. One filed out of report
//! order (a reservation or its lapse moves a provider to another standing with the
//! report it had) waits in a small sorted set of its group's, read merged with the
//! rest, and is folded in once those outnumber an eighth of the group: a move into the
//! middle of a queue as long as the group would cost each reservation that much.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::iter::Peekable;

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

/// The providers of one standing: `places` in order, some of them gone, and `late`
/// ones filed out of order, kept apart.
#[derive(Debug, Default)]
struct Group {
    places: VecDeque<Place>,
    gone: HashSet<Place, BuildHasherDefault<PlaceHasher>>,
    late: BTreeSet<Place>,
}

impl Group {
    /// Providers filed.
    fn live(&self) -> usize {
        self.places.len().saturating_sub(self.gone.len()) + self.late.len()
    }

    /// Those filed, in order.
    fn iter(&self) -> impl Iterator<Item = Place> + '_ {
        let places = self
            .places
            .iter()
            .filter(|p| self.gone.is_empty() || !self.gone.contains(p))
            .copied();
        Merge {
            a: places.peekable(),
            b: self.late.iter().copied().peekable(),
        }
    }

    /// Takes `place` out; false when it was not filed. The best of the group (a pick
    /// reserved, mostly) comes off the front with the tombstones behind it, so that
    /// reads do not step over them; the last, off the back; any other is marked gone.
    fn take(&mut self, place: Place) -> bool {
        if self.late.remove(&place) {
            return true;
        }
        if self.places.front() == Some(&place) {
            self.places.pop_front();
            while self.places.front().is_some_and(|p| self.gone.remove(p)) {
                self.places.pop_front();
            }
            return true;
        }
        if self.places.back() == Some(&place) {
            self.places.pop_back();
            while self.places.back().is_some_and(|p| self.gone.remove(p)) {
                self.places.pop_back();
            }
            return true;
        }
        self.gone.insert(place)
    }

    /// Folds `late` into `places`, dropping the gone.
    fn fold(&mut self) {
        let merged: VecDeque<Place> = self.iter().collect();
        self.places = merged;
        self.gone.clear();
        self.late.clear();
    }
}

/// Two ascending sequences merged into one.
struct Merge<A: Iterator<Item = Place>, B: Iterator<Item = Place>> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<A: Iterator<Item = Place>, B: Iterator<Item = Place>> Iterator for Merge<A, B> {
    type Item = Place;

    fn next(&mut self) -> Option<Place> {
        match (self.a.peek(), self.b.peek()) {
            (Some(a), Some(b)) if b < a => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
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
        match (group.places.front(), group.places.back()) {
            (Some(first), _) if place <= *first => group.places.push_front(place),
            (None, _) => group.places.push_front(place),
            (_, Some(last)) if place > *last => group.places.push_back(place),
            _ => {
                group.late.insert(place);
                if group.late.len() > 32 + group.places.len() / 8 {
                    group.fold();
                }
            }
        }
    }

    /// Takes `rank` (filed) out.
    pub(super) fn remove(&mut self, rank: Rank) {
        let (standing, place) = split(rank);
        let Some(group) = self.groups.get_mut(&standing) else {
            return;
        };
        if !group.take(place) {
            return;
        }
        let placed = group.places.len().saturating_sub(group.gone.len());
        if group.live() == 0 {
            self.groups.remove(&standing);
        } else if group.gone.len() > placed + 16 {
            let gone = std::mem::take(&mut group.gone);
            group.places.retain(|p| !gone.contains(p));
        }
    }

    /// Those filed, best first.
    pub(super) fn iter(&self) -> impl Iterator<Item = Rank> + '_ {
        self.groups.iter().flat_map(|(&(free, queued), group)| {
            group.iter().map(move |(reported, slot, index)| Rank {
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

        /// Many providers of one standing filed out of report order (the reservations'
        /// way) and taken out again: those kept apart, folded in and swept rank as
        /// the sorted set does, at every step.
        #[test]
        fn out_of_order_filings_rank_as_a_sorted_set(ops in prop::collection::vec(
            (0u8..4, 0u64..400, 0u32..8, 0u32..2), 0..1500)
        ) {
            let mut r = Ranking::default();
            let mut truth = BTreeSet::new();
            for (i, (op, reported, slot, index)) in ops.into_iter().enumerate() {
                let x = rank(1, 0, reported, slot, index);
                if op > 0 && truth.insert(x) {
                    r.insert(x);
                } else if op == 0 && truth.remove(&x) {
                    r.remove(x);
                }
                if i % 97 == 0 {
                    prop_assert_eq!(r.iter().collect::<Vec<_>>(), truth.iter().copied().collect::<Vec<_>>());
                }
            }
            prop_assert_eq!(r.iter().collect::<Vec<_>>(), truth.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn filings_out_of_order_wait_apart_then_fold_in() {
        let mut r = Ranking::default();
        let standing = (Reverse(1), 0);
        // Reports 1000 and 0 bound the group; 200 filed between them wait apart.
        r.insert(rank(1, 0, 1000, 0, 0));
        r.insert(rank(1, 0, 0, 0, 1));
        for t in 1..=32 {
            r.insert(rank(1, 0, t, 1, 0));
        }
        assert_eq!(r.groups[&standing].late.len(), 32);
        // One more than 32 + 2/8 folds them all in.
        r.insert(rank(1, 0, 500, 1, 1));
        assert!(r.groups[&standing].late.is_empty());
        assert_eq!(r.groups[&standing].places.len(), 35);
        let reported: Vec<u64> = r.iter().map(|x| x.reported.0).collect();
        let mut want: Vec<u64> = [1000, 0, 500].into_iter().chain(1..=32).collect();
        want.sort_by(|a, b| b.cmp(a));
        assert_eq!(reported, want);
        // A late one taken out leaves no tombstone.
        r.insert(rank(1, 0, 700, 2, 0));
        assert_eq!(r.groups[&standing].late.len(), 1);
        r.remove(rank(1, 0, 700, 2, 0));
        assert!(r.groups[&standing].late.is_empty() && r.groups[&standing].gone.is_empty());
        // The best taken out again and again (routers reserving): off the front, with
        // a tombstone behind it, never left for reads to step over.
        r.remove(rank(1, 0, 30, 1, 0));
        assert_eq!(r.groups[&standing].gone.len(), 1);
        for _ in 0..5 {
            let best = r.iter().next().unwrap();
            r.remove(best);
        }
        assert!(r.groups[&standing].gone.is_empty());
        assert_eq!(r.groups[&standing].places.front().map(|p| p.0.0), Some(28));
        assert_eq!(r.iter().count(), 29);
    }
}

//! A ranking of open providers, best first, cheap to change at the fleet's rate.
//!
//! Every load update moves a changed provider from one place in its model's ranking to
//! another, so the ranking takes two changes per changed provider. A sorted tree of
//! every provider pays a search of a tree as deep as the fleet is large for each; here
//! providers are grouped by standing (free slots, queue), few groups, and within a group
//! kept in report order, newest first. A provider reported now goes to the front of its
//! group; one taken out is marked gone and swept when its group holds as many gone as
//! live (taken off instead at either end, where the best are taken from) — neither
//! searches anything as large as the fleet. One filed out of report order goes in its
//! place when that is near either end (a report a little older than the newest:
//! another replica's, told a batch later); further in (a reservation or its lapse
//! moves a provider to another standing with the report it had) it waits in a small
//! sorted set of its group's, read merged with the rest, and is folded in once those
//! outnumber an eighth of the group: a move into the middle of a queue as long as the
//! group would cost each reservation that much.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::iter::Peekable;

use super::book::{Rank, Slot};

/// How far from an end of its sorted queue a filing out of order is put in its
/// place (shifting at most this many) rather than kept apart (a ranking group's, a
/// lane of proofs).
pub(super) const NEAR_END: usize = 256;

/// The first places of a group, which reads walk most (a spread pick's draw walks up
/// to [`SPREAD_POOL`](super::SPREAD_POOL) candidates and takes its pick from among
/// them): tombstones there are swept once more than [`HEAD_GONE`] gathered, rather
/// than once they outnumber the group's live places — which, in a group as large as
/// a tenth of a 100 000-Edge fleet, left a draw stepping over thousands.
const HEAD: usize = 2 * super::SPREAD_POOL;
/// Tombstones tolerated among the first [`HEAD`] places.
const HEAD_GONE: usize = 256;

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
    /// Tombstones left among the first [`HEAD`] places since they were last swept.
    head_gone: usize,
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
        if !self.gone.insert(place) {
            return false;
        }
        if self.places.get(HEAD).is_some_and(|p| place < *p) {
            self.head_gone += 1;
            if self.head_gone > HEAD_GONE {
                self.sweep_head();
            }
        }
        true
    }

    /// Drops the tombstones among the first places, where reads walk.
    fn sweep_head(&mut self) {
        let n = (HEAD + self.head_gone).min(self.places.len());
        let gone = &mut self.gone;
        let head: Vec<Place> = self.places.drain(..n).filter(|p| !gone.remove(p)).collect();
        for p in head.into_iter().rev() {
            self.places.push_front(p);
        }
        self.head_gone = 0;
    }

    /// Folds `late` into `places`, dropping the gone.
    fn fold(&mut self) {
        let merged: VecDeque<Place> = self.iter().collect();
        self.places = merged;
        self.gone.clear();
        self.late.clear();
        self.head_gone = 0;
    }
}

/// Two ascending sequences merged into one.
pub(super) struct Merge<T: Ord, A: Iterator<Item = T>, B: Iterator<Item = T>> {
    pub(super) a: Peekable<A>,
    pub(super) b: Peekable<B>,
}

impl<T: Ord, A: Iterator<Item = T>, B: Iterator<Item = T>> Iterator for Merge<T, A, B> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
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
                // Near either end (a report a little older than the newest: another
                // replica's, mostly), a short shift puts it in its place.
                if let Some(at) = near_end(&group.places, &place) {
                    group.places.insert(at, place);
                    return;
                }
                group.late.insert(place);
                if fold_due(group.late.len(), group.places.len()) {
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
            group.head_gone = 0;
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

/// Where `x` goes in `items` (ascending) if that is at most [`NEAR_END`] from either
/// end; found without searching the middle.
fn near_end<T: Ord>(items: &VecDeque<T>, x: &T) -> Option<usize> {
    let n = items.len();
    let (lo, hi) = if n <= 2 * NEAR_END {
        (0, n)
    } else if items.get(NEAR_END).is_some_and(|p| x <= p) {
        (0, NEAR_END)
    } else if items.get(n - NEAR_END - 1).is_some_and(|p| x > p) {
        (n - NEAR_END, n)
    } else {
        return None;
    };
    Some(position(items, x, lo, hi))
}

/// Where `x` goes among `items[lo..hi]` (ascending): after every smaller one.
pub(super) fn position<T: Ord>(items: &VecDeque<T>, x: &T, lo: usize, hi: usize) -> usize {
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if items.get(mid).is_some_and(|p| p < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Whether `late` filings kept apart beside `placed` ones are to be folded in.
pub(super) fn fold_due(late: usize, placed: usize) -> bool {
    late > 32 + placed / 8
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
    fn filings_out_of_order_go_in_near_the_ends_and_wait_apart_between() {
        let mut r = Ranking::default();
        let standing = (Reverse(1), 0);
        let group = |r: &Ranking| {
            (
                r.groups[&standing].places.len(),
                r.groups[&standing].late.len(),
            )
        };
        // Places with reports 1000, 1002, …, newest first: the middle is further than
        // NEAR_END from either end.
        let n = 4 * NEAR_END as u64;
        let newest = 1000 + 2 * (n - 1);
        for k in 0..n {
            r.insert(rank(1, 0, 1000 + 2 * k, 0, k as u32));
        }
        // A report a little older than the newest, or a little newer than the
        // oldest, goes straight in.
        r.insert(rank(1, 0, newest - 3, 1, 0));
        r.insert(rank(1, 0, 1001, 1, 1));
        let n = n as usize + 2;
        assert_eq!(group(&r), (n, 0));
        // From the middle they wait apart, until they outnumber 32 + an eighth.
        let middle = 1000 + n as u64 - 1;
        let keep = 32 + n / 8;
        for t in 0..keep {
            r.insert(rank(1, 0, middle + 2 * t as u64, 2, t as u32));
        }
        assert_eq!(group(&r), (n, keep));
        assert_eq!(r.iter().count(), n + keep);
        r.insert(rank(1, 0, middle + 2 * keep as u64, 2, keep as u32));
        let n = n + keep + 1;
        assert_eq!(group(&r), (n, 0));
        let reported: Vec<u64> = r.iter().map(|x| x.reported.0).collect();
        let mut want = reported.clone();
        want.sort_by(|a, b| b.cmp(a));
        assert_eq!(reported, want);
        // A late one taken out leaves no tombstone.
        let late = rank(1, 0, middle + 1, 3, 0);
        r.insert(late);
        assert_eq!(group(&r), (n, 1));
        r.remove(late);
        assert_eq!(group(&r), (n, 0));
        assert!(r.groups[&standing].gone.is_empty());
        // One from the middle of the places leaves a tombstone; the best taken out
        // again and again (routers reserving) come off the front with the
        // tombstones behind them, never left for reads to step over.
        r.remove(rank(1, 0, newest - 8, 0, (NEAR_END * 4 - 5) as u32));
        assert_eq!(r.groups[&standing].gone.len(), 1);
        for _ in 0..6 {
            let best = r.iter().next().unwrap();
            r.remove(best);
        }
        // Taken: newest, -2, -3, -4, -6, (-8 gone with them), -10.
        assert!(r.groups[&standing].gone.is_empty());
        assert_eq!(r.iter().next().map(|x| x.reported.0), Some(newest - 12));
        assert_eq!(r.iter().count(), n - 7);
    }

    #[test]
    fn tombstones_near_the_front_are_swept_where_reads_walk() {
        let mut r = Ranking::default();
        let mut truth = BTreeSet::new();
        let standing = (Reverse(1), 0);
        let n = 2 * HEAD as u64;
        for k in 0..n {
            let x = rank(1, 0, k, 0, k as u32);
            r.insert(x);
            truth.insert(x);
        }
        // Picks from among the first places (newest first: the highest reports).
        let picks: Vec<Rank> = (0..HEAD_GONE as u64 + 40)
            .map(|i| rank(1, 0, n - 10 - 3 * i, 0, (n - 10 - 3 * i) as u32))
            .collect();
        for (i, &x) in picks.iter().enumerate() {
            r.remove(x);
            truth.remove(&x);
            let group = &r.groups[&standing];
            if i < HEAD_GONE {
                assert_eq!((group.gone.len(), group.head_gone), (i + 1, i + 1));
            }
        }
        // Swept once past HEAD_GONE; those since wait for the next sweep.
        let group = &r.groups[&standing];
        assert_eq!((group.gone.len(), group.head_gone), (39, 39));
        assert_eq!(group.places.len(), n as usize - HEAD_GONE - 1);
        // One from the far end leaves a tombstone that does not count.
        let far = rank(1, 0, 5, 0, 5);
        r.remove(far);
        truth.remove(&far);
        assert_eq!(r.groups[&standing].head_gone, 39);
        assert_eq!(
            r.iter().collect::<Vec<_>>(),
            truth.into_iter().collect::<Vec<_>>()
        );
    }
}

//! When each live Edge last proved its numbers current, oldest first, by how it
//! reports: the stale Edges are the oldest of each kind.
//!
//! Every load update, heartbeat and refresh proves an Edge's numbers again, so
//! re-filing a proof is the placement's most frequent step. Proofs come in time order,
//! so each is appended to a queue rather than moved within a sorted tree: the proof an
//! Edge replaces stays in the queue, outdated (its ticket no longer the Edge's), and is
//! skipped by readers and dropped from the front as it comes there, or all at once
//! when outdated entries outnumber the current ones — each entry is appended and
//! dropped once, so a proof costs O(1) amortised and the queue at most about twice
//! the live Edges. A proof older than the queue's newest (another replica's, told a
//! batch later; or the wall clock stepped back) is inserted in order when few are
//! newer, else kept apart in a small sorted set read merged with the queue and folded
//! in once it outnumbers an eighth of it: at 10 000 Edges a replica is told hundreds
//! of proofs newer than the one it files, and shifting them all cost 4 % of its time.

use std::collections::{BTreeSet, VecDeque};

use super::book::Slot;
use super::ranking::{Merge, NEAR_END, fold_due, position};

/// One filed proof, ordered by time, then filing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Proof {
    proved_ms: u64,
    ticket: u64,
    slot: Slot,
}

/// One kind's proofs: the queue, and those filed out of order kept apart.
#[derive(Debug, Default)]
struct Lane {
    queue: VecDeque<Proof>,
    late: BTreeSet<Proof>,
}

impl Lane {
    fn len(&self) -> usize {
        self.queue.len() + self.late.len()
    }

    /// Every entry, current or not, oldest first.
    fn iter(&self) -> impl Iterator<Item = Proof> + '_ {
        Merge {
            a: self.queue.iter().copied().peekable(),
            b: self.late.iter().copied().peekable(),
        }
    }

    fn file(&mut self, proof: Proof) {
        match self.queue.back() {
            // Older than the newest (its ticket is the newest: compared by time).
            Some(last) if *last > proof => {
                let n = self.queue.len();
                let from = n.saturating_sub(NEAR_END);
                if from == 0 || self.queue.get(from - 1).is_some_and(|p| *p < proof) {
                    // Few newer: found among the last NEAR_END, shifted in.
                    let at = position(&self.queue, &proof, from, n);
                    self.queue.insert(at, proof);
                } else {
                    self.late.insert(proof);
                    if fold_due(self.late.len(), self.queue.len()) {
                        self.queue = self.iter().collect();
                        self.late.clear();
                    }
                }
            }
            _ => self.queue.push_back(proof),
        }
    }
}

/// The proofs of the live Edges that push (`[1]`) and that are pulled (`[0]`).
#[derive(Debug, Default)]
pub(super) struct Proofs {
    lanes: [Lane; 2],
    /// Current proofs in each queue.
    current: [usize; 2],
    /// Slot → its current proof, if any (ticket 0: none).
    tickets: Vec<Ticket>,
    last_ticket: u64,
}

/// A slot's current proof: its ticket (0: none), whether it is filed under the Edges
/// that push, when.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ticket {
    ticket: u64,
    pushes: bool,
    proved_ms: u64,
}

/// Outdated entries tolerated in a queue beyond as many as its current ones.
const SLACK: usize = 64;

impl Proofs {
    /// Files `slot`'s proof at `proved_ms` under the Edges that push (`pushes`) or are
    /// pulled, in place of the one it had.
    pub(super) fn file(&mut self, slot: Slot, pushes: bool, proved_ms: u64) {
        if let Some(t) = self.tickets.get(slot as usize)
            && t.ticket != 0
            && (t.pushes, t.proved_ms) == (pushes, proved_ms)
        {
            return;
        }
        self.unfile(slot);
        self.last_ticket += 1;
        let proof = Proof {
            proved_ms,
            slot,
            ticket: self.last_ticket,
        };
        let at = slot as usize;
        if self.tickets.len() <= at {
            self.tickets.resize(at + 1, Ticket::default());
        }
        if let Some(t) = self.tickets.get_mut(at) {
            *t = Ticket {
                ticket: proof.ticket,
                pushes,
                proved_ms,
            };
        }
        let k = usize::from(pushes);
        let Some(lane) = self.lanes.get_mut(k) else {
            return;
        };
        lane.file(proof);
        if let Some(n) = self.current.get_mut(k) {
            *n += 1;
        }
        self.tidy(k);
    }

    /// Takes `slot`'s proof out, if filed.
    pub(super) fn unfile(&mut self, slot: Slot) {
        let Some(t) = self.tickets.get_mut(slot as usize) else {
            return;
        };
        let t = std::mem::take(t);
        if t.ticket != 0 {
            let k = usize::from(t.pushes);
            if let Some(n) = self.current.get_mut(k) {
                *n = n.saturating_sub(1);
            }
            self.tidy(k);
        }
    }

    /// Whether `slot`'s proof is filed, under the Edges that push.
    #[cfg(test)]
    fn filed(&self, slot: Slot) -> Option<bool> {
        self.tickets
            .get(slot as usize)
            .filter(|t| t.ticket != 0)
            .map(|t| t.pushes)
    }

    /// The current proofs of the Edges that push (or are pulled), oldest first, as
    /// (proved_ms, slot).
    pub(super) fn oldest(&self, pushes: bool) -> impl Iterator<Item = (u64, Slot)> + '_ {
        self.lanes
            .get(usize::from(pushes))
            .into_iter()
            .flat_map(Lane::iter)
            .filter(|p| self.is_current(p))
            .map(|p| (p.proved_ms, p.slot))
    }

    fn is_current(&self, p: &Proof) -> bool {
        self.tickets
            .get(p.slot as usize)
            .is_some_and(|t| t.ticket == p.ticket)
    }

    /// Drops outdated proofs from the front of queue `k`, and every outdated one when
    /// they outnumber the current ones.
    fn tidy(&mut self, k: usize) {
        let Some(mut lane) = self.lanes.get_mut(k).map(std::mem::take) else {
            return;
        };
        while lane.queue.front().is_some_and(|p| !self.is_current(p)) {
            lane.queue.pop_front();
        }
        let current = self.current.get(k).copied().unwrap_or_default();
        if lane.len() > current.saturating_mul(2) + SLACK {
            lane.queue.retain(|p| self.is_current(p));
            lane.late.retain(|p| self.is_current(p));
        }
        if let Some(l) = self.lanes.get_mut(k) {
            *l = lane;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Proofs filed at any time, mostly the newest, some a little or much older
        /// (another replica's, a clock stepped back), and taken out: each kind reads
        /// every current proof once, oldest first.
        #[test]
        fn proofs_filed_out_of_order_read_oldest_first(ops in prop::collection::vec(
            (0u8..6, 0u32..700, any::<bool>(), prop_oneof![Just(0u64), 0u64..50, 0u64..2000]),
            0..2000)
        ) {
            let mut p = Proofs::default();
            let mut truth: BTreeMap<Slot, (bool, u64)> = BTreeMap::new();
            for (t, (op, slot, pushes, back)) in ops.into_iter().enumerate() {
                if op == 0 {
                    p.unfile(slot);
                    truth.remove(&slot);
                } else {
                    let at = (t as u64 + 10_000).saturating_sub(back);
                    p.file(slot, pushes, at);
                    truth.insert(slot, (pushes, at));
                }
                if t % 101 != 0 {
                    continue;
                }
                for kind in [false, true] {
                    let read = oldest(&p, kind);
                    prop_assert!(read.windows(2).all(|w| w[0].0 <= w[1].0), "{read:?}");
                    let mut got = read.clone();
                    got.sort_unstable();
                    let mut want: Vec<(u64, Slot)> = truth
                        .iter()
                        .filter(|(_, (k, _))| *k == kind)
                        .map(|(&s, &(_, at))| (at, s))
                        .collect();
                    want.sort_unstable();
                    prop_assert_eq!(got, want);
                }
            }
        }
    }

    fn oldest(p: &Proofs, pushes: bool) -> Vec<(u64, Slot)> {
        p.oldest(pushes).collect()
    }

    #[test]
    fn proofs_read_oldest_first_each_edge_once_by_how_it_reports() {
        let mut p = Proofs::default();
        p.file(0, true, 10);
        p.file(1, false, 11);
        p.file(2, true, 12);
        p.file(0, true, 13);
        assert_eq!(oldest(&p, true), [(12, 2), (13, 0)]);
        assert_eq!(oldest(&p, false), [(11, 1)]);
        // An Edge that starts pushing moves over.
        p.file(1, true, 14);
        assert_eq!(oldest(&p, false), []);
        assert_eq!(oldest(&p, true), [(12, 2), (13, 0), (14, 1)]);
        assert_eq!(p.filed(1), Some(true));
        p.unfile(2);
        p.unfile(2);
        assert_eq!(oldest(&p, true), [(13, 0), (14, 1)]);
        assert_eq!(p.filed(2), None);
        assert_eq!(p.current, [0, 2]);
    }

    #[test]
    fn a_proof_from_a_clock_stepped_back_is_filed_in_order() {
        let mut p = Proofs::default();
        for (slot, at) in [(0, 100), (1, 200), (2, 300)] {
            p.file(slot, false, at);
        }
        p.file(3, false, 150);
        assert_eq!(oldest(&p, false), [(100, 0), (150, 3), (200, 1), (300, 2)]);
    }

    #[test]
    fn proofs_far_behind_the_newest_wait_apart_then_fold_in() {
        let mut p = Proofs::default();
        let lens = |p: &Proofs| (p.lanes[1].queue.len(), p.lanes[1].late.len());
        let n = 4 * NEAR_END as Slot;
        for slot in 0..n {
            p.file(slot, true, 1_000 + u64::from(slot));
        }
        // Few newer: put in place.
        p.file(n, true, 1_000 + u64::from(n) - 10);
        let queued = n as usize + 1;
        assert_eq!(lens(&p), (queued, 0));
        // Many newer: kept apart, until they outnumber 32 + an eighth of the queue.
        let keep = 32 + queued / 8;
        for k in 0..keep as Slot {
            p.file(n + 1 + k, true, 1_010 + u64::from(k));
        }
        assert_eq!(lens(&p), (queued, keep));
        let read = oldest(&p, true);
        assert_eq!(read.len(), queued + keep);
        assert!(read.windows(2).all(|w| w[0].0 <= w[1].0));
        let last = n + 1 + keep as Slot;
        p.file(last, true, 1_100);
        assert_eq!(lens(&p), (queued + keep + 1, 0));
        assert_eq!(oldest(&p, true), read_with(read, (1_100, last)));
    }

    fn read_with(mut read: Vec<(u64, Slot)>, one: (u64, Slot)) -> Vec<(u64, Slot)> {
        let at = read.partition_point(|r| r.0 <= one.0);
        read.insert(at, one);
        read
    }

    #[test]
    fn the_queue_stays_within_twice_the_live_edges() {
        let mut p = Proofs::default();
        // One Edge silent at the front; others proving over and over behind it.
        p.file(0, true, 0);
        for at in 1..100_000u64 {
            p.file(1 + (at % 10) as Slot, true, at);
        }
        let len = p.lanes[1].len();
        assert!(len <= 2 * 11 + SLACK + 1, "queue of {len}");
        let read = oldest(&p, true);
        assert_eq!(read.len(), 11);
        assert_eq!(read.first(), Some(&(0, 0)));
        assert!(read.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}

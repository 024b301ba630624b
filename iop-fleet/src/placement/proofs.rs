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
//! the live Edges. A proof older than the queue's newest (the wall clock stepped
//! back) is inserted in order instead.

use std::collections::VecDeque;

use super::book::Slot;

/// One filed proof.
#[derive(Debug, Clone, Copy)]
struct Proof {
    proved_ms: u64,
    slot: Slot,
    ticket: u64,
}

/// The proofs of the live Edges that push (`[1]`) and that are pulled (`[0]`).
#[derive(Debug, Default)]
pub(super) struct Proofs {
    queues: [VecDeque<Proof>; 2],
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
        let Some(queue) = self.queues.get_mut(k) else {
            return;
        };
        match queue.back() {
            Some(last) if last.proved_ms > proved_ms => {
                let i = queue.partition_point(|p| p.proved_ms <= proved_ms);
                queue.insert(i, proof);
            }
            _ => queue.push_back(proof),
        }
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
        self.queues
            .get(usize::from(pushes))
            .into_iter()
            .flatten()
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
        let Some(mut queue) = self.queues.get_mut(k).map(std::mem::take) else {
            return;
        };
        while queue.front().is_some_and(|p| !self.is_current(p)) {
            queue.pop_front();
        }
        let current = self.current.get(k).copied().unwrap_or_default();
        if queue.len() > current.saturating_mul(2) + SLACK {
            queue.retain(|p| self.is_current(p));
        }
        if let Some(q) = self.queues.get_mut(k) {
            *q = queue;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_queue_stays_within_twice_the_live_edges() {
        let mut p = Proofs::default();
        // One Edge silent at the front; others proving over and over behind it.
        p.file(0, true, 0);
        for at in 1..100_000u64 {
            p.file(1 + (at % 10) as Slot, true, at);
        }
        let len = p.queues[1].len();
        assert!(len <= 2 * 11 + SLACK + 1, "queue of {len}");
        let read = oldest(&p, true);
        assert_eq!(read.len(), 11);
        assert_eq!(read.first(), Some(&(0, 0)));
        assert!(read.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}

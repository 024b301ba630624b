//! Reservations: a reserving placement counts its pick as one more request in flight
//! until the provider's next report (a load update from after it, or a new view), or
//! until its numbers would be stale — on this replica, and on every other once it
//! publishes them (`LoadReservation`).

use super::Placement;
use super::book::{Reserved, Slot};
use super::query::Candidate;

impl Placement {
    /// Counts one more request in flight on `pick` until its next report.
    pub(super) fn reserve(&mut self, pick: &mut Candidate, long: bool, now_ms: u64) {
        let Some((slot, index)) = self.find(&pick.edge_id, &pick.node_id, &pick.provider_id) else {
            return;
        };
        if let Some(any) = self.count(slot, index, 1, u32::from(long), now_ms) {
            pick.reserved = any;
            pick.free = pick.free.saturating_sub(1);
        }
    }

    /// Counts `count` more requests in flight (`long` of them long-context) on
    /// provider `provider_id` of node `node_id` of `edge_id`, reserved at `at_ms`
    /// by another replica, until its next report here. False when this fleet does not
    /// hold that provider.
    pub(crate) fn reserved_elsewhere(
        &mut self,
        edge_id: &str,
        node_id: &str,
        provider_id: &str,
        (count, long): (u32, u32),
        at_ms: u64,
    ) -> bool {
        let Some((slot, index)) = self.find(edge_id, node_id, provider_id) else {
            return false;
        };
        let counted = self
            .count(slot, index, count, long.min(count), at_ms)
            .is_some();
        if counted {
            self.stats.reservations_elsewhere += u64::from(count);
        }
        counted
    }

    /// Where provider `provider_id` of node `node_id` of `edge_id` is filed.
    fn find(&self, edge_id: &str, node_id: &str, provider_id: &str) -> Option<(Slot, usize)> {
        let &slot = self.by_edge.get(edge_id)?;
        let e = self.slot(slot)?;
        let index = e.view.node(node_id)?.provider_indexes().find(|&i| {
            e.view
                .provider(i)
                .is_some_and(|p| p.provider_id() == provider_id)
        })?;
        Some((slot, index))
    }

    /// Counts `count` more reservations (`long` of them long-context) on provider
    /// `index` of `slot`, lapsing a staleness threshold after `at_ms`: its
    /// reservations now.
    fn count(
        &mut self,
        slot: Slot,
        index: usize,
        count: u32,
        long: u32,
        at_ms: u64,
    ) -> Option<u32> {
        if count == 0 || self.slot(slot).is_none_or(|e| index >= e.reserved.len()) {
            return None;
        }
        self.unfile(slot, index);
        let after = self
            .slot(slot)
            .map_or(0, |e| self.staleness.after_ms(e.pushes));
        let mut any = None;
        if let Some(r) = self.slot_mut(slot).and_then(|e| e.reserved.get_mut(index)) {
            let before = r.until_ms;
            r.any = r.any.saturating_add(count);
            r.long = r.long.saturating_add(long);
            // The latest reservation's lapse holds for all of them.
            r.until_ms = r.until_ms.max(at_ms.saturating_add(after));
            r.made_ms = r.made_ms.max(at_ms);
            let (until, n) = (r.until_ms, r.any);
            self.lapses.remove(&(before, slot, index as u32));
            self.lapses.insert((until, slot, index as u32));
            any = Some(n);
        }
        self.file(slot, index, true);
        any
    }

    /// Drops the reservations that lapsed by `now_ms`.
    pub(super) fn lapse(&mut self, now_ms: u64) {
        while let Some(&(until, slot, index)) = self.lapses.first() {
            if until > now_ms {
                break;
            }
            self.lapses.pop_first();
            let index = index as usize;
            // An entry left by a reservation that a new view, a disconnection or the
            // Edge's departure (its slot reused since) already dropped: nothing to do.
            let ours = self
                .slot(slot)
                .and_then(|e| e.reserved.get(index))
                .is_some_and(|r| r.until_ms == until);
            if !ours {
                continue;
            }
            self.unfile(slot, index);
            if let Some(r) = self.slot_mut(slot).and_then(|e| e.reserved.get_mut(index)) {
                *r = Reserved::default();
            }
            let live = self.slot(slot).is_some_and(|e| e.live);
            self.file(slot, index, live);
        }
    }

    /// Provider `index` was reported as of `at_ms`: that report overwrites its
    /// reservations, unless the latest was made after it (the report, from another
    /// replica, crossed it on the way and does not know of it).
    pub(super) fn clear_reservation(&mut self, slot: Slot, index: usize, at_ms: u64) {
        if let Some(r) = self.slot_mut(slot).and_then(|e| e.reserved.get_mut(index))
            && *r != Reserved::default()
            && r.made_ms <= at_ms
        {
            let until = std::mem::take(r).until_ms;
            self.lapses.remove(&(until, slot, index as u32));
        }
    }
}

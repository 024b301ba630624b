//! Reservations: a reserving placement counts its pick as one more request in flight
//! until the provider's next report, or until its numbers would be stale.

use super::Placement;
use super::book::{Reserved, Slot};
use super::query::Candidate;

impl Placement {
    /// Counts one more request in flight on `pick` until its next report.
    pub(super) fn reserve(&mut self, pick: &mut Candidate, long: bool, now_ms: u64) {
        let Some(&slot) = self.by_edge.get(&pick.edge_id) else {
            return;
        };
        let Some(index) = self.slot(slot).and_then(|e| {
            let at = e.view.node(&pick.node_id)?.provider_indexes();
            at.into_iter().find(|&i| {
                e.view
                    .provider(i)
                    .is_some_and(|p| p.provider_id() == pick.provider_id)
            })
        }) else {
            return;
        };
        self.unfile(slot, index);
        let after = self
            .slot(slot)
            .map_or(0, |e| self.staleness.after_ms(e.pushes));
        if let Some(r) = self.slot_mut(slot).and_then(|e| e.reserved.get_mut(index)) {
            let before = r.until_ms;
            r.any += 1;
            r.long += u32::from(long);
            r.until_ms = now_ms.saturating_add(after);
            let (until, any) = (r.until_ms, r.any);
            self.lapses.remove(&(before, slot, index as u32));
            self.lapses.insert((until, slot, index as u32));
            pick.reserved = any;
        }
        pick.free = pick.free.saturating_sub(1);
        self.file(slot, index, true);
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

    /// Provider `index`'s next report overwrote its reservations.
    pub(super) fn clear_reservation(&mut self, slot: Slot, index: usize) {
        if let Some(r) = self.slot_mut(slot).and_then(|e| e.reserved.get_mut(index))
            && *r != Reserved::default()
        {
            let until = std::mem::take(r).until_ms;
            self.lapses.remove(&(until, slot, index as u32));
        }
    }
}

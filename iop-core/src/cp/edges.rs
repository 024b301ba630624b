//! The Control Plane's table of Edges: each entry in a slot that sessions reach by
//! index, plus an index by Edge id for the application's calls.
//!
//! A session's frames (status answers, heartbeats) reach its Edge's entry through the
//! slot index the session keeps: no search keyed by the id string, whose cost grows
//! with the id's length and the number of Edges (at 10 000 Edges a B-tree search
//! compares about 14 ids).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::time::Instant;

use super::command::CommandBook;
use super::ids::ConnectionId;
use super::load::LoadState;
use iop_proto::EdgeHelloRequest;

use super::view::{EdgeView, Reachability, StatusSummary};

/// What the Control Plane holds about one Edge id.
#[derive(Debug)]
pub(crate) struct EdgeEntry {
    /// What the application reads; changed only through the methods below.
    view: EdgeView,
    /// The connection of its live session.
    live: Option<ConnectionId>,
    commands: CommandBook,
    flaps: FlapHistory,
    /// When its last session ended, while it has none.
    disconnected_at: Option<Instant>,
    /// When its unfinished commands are abandoned, while it has no session.
    abandon_at: Option<Instant>,
    /// Its load, once it answered a full status.
    load: Option<Box<LoadState>>,
}

impl EdgeEntry {
    /// A new Edge: never connected, no commands.
    pub(crate) fn new(edge_id: &str) -> Self {
        Self {
            view: EdgeView::new(edge_id),
            live: None,
            commands: CommandBook::default(),
            flaps: FlapHistory::default(),
            disconnected_at: None,
            abandon_at: None,
            load: None,
        }
    }

    /// Its load, if it ever answered a full status.
    pub(crate) fn load(&self) -> Option<&LoadState> {
        self.load.as_deref()
    }

    /// Its load, made empty when it has none yet.
    pub(crate) fn load_mut(&mut self) -> &mut LoadState {
        self.load.get_or_insert_with(Box::default)
    }

    /// Its load, if it has one, to change.
    pub(crate) fn load_if_any(&mut self) -> Option<&mut LoadState> {
        self.load.as_deref_mut()
    }

    /// The connection of its live session.
    pub(crate) fn live(&self) -> Option<ConnectionId> {
        self.live
    }

    /// What the application reads of it.
    pub(crate) fn view(&self) -> &EdgeView {
        &self.view
    }

    /// Its latest session's id (0: it never had one).
    pub(crate) fn session_id(&self) -> u64 {
        self.view.session_id
    }

    /// The operations its latest hello advertised.
    pub(crate) fn operations(&self) -> &[String] {
        &self.view.operations
    }

    /// Its commands (PROTOCOL.md §4.4), which outlive its sessions.
    pub(crate) fn commands(&self) -> &CommandBook {
        &self.commands
    }

    /// Its commands, to change.
    pub(crate) fn commands_mut(&mut self) -> &mut CommandBook {
        &mut self.commands
    }

    /// Supersessions of it so far.
    pub(crate) fn supersessions(&self) -> u64 {
        self.flaps.total
    }

    /// Its live session was superseded at `now`: counted, in the view too. True when it
    /// is flapping (at least `threshold` supersessions within `window`).
    pub(crate) fn superseded(&mut self, now: Instant, window: Duration, threshold: u32) -> bool {
        let flapping = self.flaps.record(now, window, threshold);
        self.view.supersessions = self.flaps.total;
        flapping
    }

    /// Session `session_id` of `hello`'s Edge is live on `conn` (accepted at Unix time
    /// `unix_ms`): the view takes the hello's identity. Returns the session id the view
    /// held before (0 for a new Edge).
    pub(crate) fn accepted(
        &mut self,
        conn: ConnectionId,
        session_id: u64,
        hello: &mut EdgeHelloRequest,
        unix_ms: u64,
    ) -> u64 {
        self.went_live(conn);
        let view = &mut self.view;
        let old_session_id = std::mem::replace(&mut view.session_id, session_id);
        view.software_version = std::mem::take(&mut hello.software_version);
        view.operations = std::mem::take(&mut hello.operations);
        view.metadata = std::mem::take(&mut hello.metadata).into_iter().collect();
        view.connected_since_unix_ms = unix_ms;
        old_session_id
    }

    /// A status answered: `summary` is the latest, and a `fresh` one (a full status,
    /// not truncated) makes the view fresh.
    pub(crate) fn status_answered(&mut self, summary: StatusSummary, fresh: bool) {
        self.view.last_status = Some(summary);
        if fresh {
            self.view.fresh = true;
        }
    }

    /// The view no longer matches the Edge (a resync): not fresh until a full status.
    pub(crate) fn stale(&mut self) {
        self.view.fresh = false;
    }

    /// Its live session went silent (`false`) or was heard from again (`true`).
    pub(crate) fn reachable(&mut self, reachable: bool) {
        self.view.reachability = if reachable {
            Reachability::Connected
        } else {
            Reachability::Unreachable
        };
    }

    /// Its id and its unfinished commands' ids, as it is forgotten.
    pub(crate) fn forgotten(self) -> (String, Vec<String>) {
        (self.view.edge_id, self.commands.unfinished_ids())
    }

    /// Its live session is on `conn` now: connected, and not fresh until a full status
    /// answers the new session.
    fn went_live(&mut self, conn: ConnectionId) {
        self.live = Some(conn);
        self.view.reachability = Reachability::Connected;
        self.view.fresh = false;
    }

    /// Its live session ended (or went to another Control Plane): disconnected, and no
    /// longer fresh.
    pub(crate) fn went_down(&mut self) {
        self.live = None;
        self.view.reachability = Reachability::Disconnected;
        self.view.fresh = false;
    }
}

/// Supersession history of one Edge id, for flapping detection.
#[derive(Debug, Default)]
pub(crate) struct FlapHistory {
    total: u64,
    recent: VecDeque<Instant>,
}

impl FlapHistory {
    /// Records a supersession at `now`; true when at least `threshold` happened within
    /// `window`.
    pub(crate) fn record(&mut self, now: Instant, window: Duration, threshold: u32) -> bool {
        self.total += 1;
        self.recent.push_back(now);
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > window)
        {
            self.recent.pop_front();
        }
        let keep = threshold.max(1) as usize;
        while self.recent.len() > keep {
            self.recent.pop_front();
        }
        threshold > 0 && self.recent.len() >= threshold as usize
    }
}

/// The slot of one Edge's entry in an [`EdgeTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct EdgeSlot(usize);

impl EdgeSlot {
    /// A slot no entry has: a session whose Edge is not registered yet.
    pub(crate) const NONE: EdgeSlot = EdgeSlot(usize::MAX);
}

/// Every Edge the Control Plane knows.
#[derive(Debug, Default)]
pub(crate) struct EdgeTable {
    /// By Edge id, in id order (the order of [`values`](Self::values)).
    index: BTreeMap<String, EdgeSlot>,
    slots: Vec<Option<Box<EdgeEntry>>>,
    /// Empty slots, reused before the table grows.
    free: Vec<EdgeSlot>,
    /// Entries without a live session, by when their last one ended (PROTOCOL.md §7 bounds
    /// how many are kept, and for how long).
    disconnected: BTreeSet<(Instant, EdgeSlot)>,
    /// Disconnected entries with unfinished commands, by when those are abandoned.
    abandon: BTreeSet<(Instant, EdgeSlot)>,
}

impl EdgeTable {
    /// The entry of `edge_id`.
    pub(crate) fn get(&self, edge_id: &str) -> Option<&EdgeEntry> {
        self.at(*self.index.get(edge_id)?)
    }

    /// The entry of `edge_id`, mutably.
    pub(crate) fn get_mut(&mut self, edge_id: &str) -> Option<&mut EdgeEntry> {
        let slot = *self.index.get(edge_id)?;
        self.at_mut(slot)
    }

    /// The entry in `slot`.
    pub(crate) fn at(&self, slot: EdgeSlot) -> Option<&EdgeEntry> {
        self.slots.get(slot.0)?.as_deref()
    }

    /// The entry in `slot`, mutably.
    pub(crate) fn at_mut(&mut self, slot: EdgeSlot) -> Option<&mut EdgeEntry> {
        self.slots.get_mut(slot.0)?.as_deref_mut()
    }

    /// The entry in `slot` if `conn` carries its live session: the way an accepted
    /// session reaches its Edge (an Edge with a live session is never removed, and
    /// the check keeps a stale slot from ever reaching another Edge's entry).
    pub(crate) fn live_at(&mut self, slot: EdgeSlot, conn: ConnectionId) -> Option<&mut EdgeEntry> {
        self.at_mut(slot).filter(|e| e.live == Some(conn))
    }

    /// The slot of `edge_id`, creating a [new](EdgeEntry::new) entry when it has none.
    pub(crate) fn slot_or_insert(&mut self, edge_id: &str) -> EdgeSlot {
        if let Some(slot) = self.index.get(edge_id) {
            return *slot;
        }
        let entry = Some(Box::new(EdgeEntry::new(edge_id)));
        let slot = match self.free.pop() {
            Some(slot) => {
                if let Some(place) = self.slots.get_mut(slot.0) {
                    *place = entry;
                }
                slot
            }
            None => {
                // `NONE` is never handed out: a `Vec` cannot hold `usize::MAX` boxes.
                let slot = EdgeSlot(self.slots.len());
                self.slots.push(entry);
                slot
            }
        };
        self.index.insert(edge_id.to_owned(), slot);
        slot
    }

    /// Removes the entry of `edge_id`.
    pub(crate) fn remove(&mut self, edge_id: &str) -> Option<Box<EdgeEntry>> {
        let slot = *self.index.get(edge_id)?;
        self.remove_slot(slot)
    }

    fn remove_slot(&mut self, slot: EdgeSlot) -> Option<Box<EdgeEntry>> {
        let entry = self.slots.get_mut(slot.0)?.take()?;
        self.index.remove(&entry.view.edge_id);
        if let Some(at) = entry.disconnected_at {
            self.disconnected.remove(&(at, slot));
        }
        if let Some(at) = entry.abandon_at {
            self.abandon.remove(&(at, slot));
        }
        self.free.push(slot);
        Some(entry)
    }

    /// The entry in `slot` lost its live session at `now`. With `retention` (how long
    /// an Edge remembers a finished command), its unfinished commands are due to be
    /// abandoned once the Edge can no longer know them.
    pub(crate) fn disconnected(
        &mut self,
        slot: EdgeSlot,
        now: Instant,
        retention: Option<Duration>,
    ) {
        if let Some(entry) = self.slots.get_mut(slot.0).and_then(|e| e.as_deref_mut()) {
            if let Some(old) = entry.disconnected_at.replace(now) {
                self.disconnected.remove(&(old, slot));
            }
            self.disconnected.insert((now, slot));
            let at = retention
                .and_then(|r| entry.commands.remembered_for(r))
                .map(|d| now + d);
            if let Some(old) = std::mem::replace(&mut entry.abandon_at, at) {
                self.abandon.remove(&(old, slot));
            }
            if let Some(at) = at {
                self.abandon.insert((at, slot));
            }
        }
    }

    /// The entry in `slot` has a live session again.
    pub(crate) fn connected(&mut self, slot: EdgeSlot) {
        if let Some(entry) = self.slots.get_mut(slot.0).and_then(|e| e.as_deref_mut()) {
            if let Some(at) = entry.disconnected_at.take() {
                self.disconnected.remove(&(at, slot));
            }
            if let Some(at) = entry.abandon_at.take() {
                self.abandon.remove(&(at, slot));
            }
        }
    }

    /// When the next disconnected entry's commands are abandoned.
    pub(crate) fn next_abandon(&self) -> Option<Instant> {
        self.abandon.first().map(|(at, _)| *at)
    }

    /// The entry whose commands are due to be abandoned at `now`, with when it
    /// disconnected; taken off the schedule.
    pub(crate) fn abandon_due(&mut self, now: Instant) -> Option<(&mut EdgeEntry, Instant)> {
        let &(at, slot) = self.abandon.first().filter(|(at, _)| *at <= now)?;
        self.abandon.remove(&(at, slot));
        let entry = self.slots.get_mut(slot.0)?.as_deref_mut()?;
        entry.abandon_at = None;
        let since = entry.disconnected_at.unwrap_or(now);
        Some((entry, since))
    }

    /// When the longest-disconnected entry lost its session.
    pub(crate) fn oldest_disconnected(&self) -> Option<Instant> {
        self.disconnected.first().map(|(at, _)| *at)
    }

    /// Entries without a live session.
    pub(crate) fn disconnected_count(&self) -> usize {
        self.disconnected.len()
    }

    /// Removes the longest-disconnected entry.
    pub(crate) fn remove_oldest_disconnected(&mut self) -> Option<Box<EdgeEntry>> {
        let (_, slot) = *self.disconnected.first()?;
        self.remove_slot(slot)
    }

    /// Edges with an entry.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Every entry, in Edge id order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &EdgeEntry> {
        self.index.values().filter_map(|slot| self.at(*slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flapping_needs_threshold_supersessions_within_the_window() {
        let mut h = FlapHistory::default();
        let w = Duration::from_secs(60);
        assert!(!h.record(Instant::from_millis(0), w, 3));
        assert!(!h.record(Instant::from_millis(1_000), w, 3));
        assert!(!h.record(Instant::from_millis(120_000), w, 3));
        assert!(!h.record(Instant::from_millis(121_000), w, 3));
        assert!(h.record(Instant::from_millis(122_000), w, 3));
        assert_eq!(h.total, 5);
    }

    #[test]
    fn slots_are_stable_and_reused_after_removal() {
        let mut t = EdgeTable::default();
        let b = t.slot_or_insert("b");
        let a = t.slot_or_insert("a");
        assert_ne!(a, b);
        assert_eq!(t.slot_or_insert("b"), b);
        assert_eq!(t.at(a).map(|e| e.view.edge_id.as_str()), Some("a"));
        assert_eq!(t.get("b").map(|e| e.view.edge_id.as_str()), Some("b"));
        let ids: Vec<&str> = t.values().map(|e| e.view.edge_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"], "in id order, not slot order");

        assert!(t.remove("b").is_some());
        assert!(t.at(b).is_none() && t.get("b").is_none());
        assert!(t.remove("b").is_none());
        let c = t.slot_or_insert("c");
        assert_eq!(c, b, "the freed slot is reused");
        assert_eq!(t.at(b).map(|e| e.view.edge_id.as_str()), Some("c"));
        assert!(t.at(EdgeSlot::NONE).is_none());
    }
}

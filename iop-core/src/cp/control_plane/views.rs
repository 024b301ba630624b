//! The Edges' views beyond their sessions: how long a disconnected Edge's view is kept
//! (24 h, and at most 100 000 of them, PROTOCOL.md §7), forgetting one, and the
//! queries that read the views.

use crate::time::Instant;

use super::ControlPlane;
use crate::cp::error::EdgeAbsent;
use crate::cp::ids::ConnectionId;
use crate::cp::view::EdgeView;
use crate::cp::{CpEvent, ForgetReason};

impl ControlPlane {
    /// Forgets the views whose last session ended `disconnected_view_ttl` ago.
    pub(super) fn expire_views(&mut self, now: Instant) {
        let ttl = self.config.disconnected_view_ttl;
        while self
            .edges
            .oldest_disconnected()
            .is_some_and(|at| at + ttl <= now)
        {
            self.forget_oldest(ForgetReason::Expired);
        }
    }

    /// Forgets the longest-disconnected views while there are too many.
    pub(super) fn evict_views(&mut self) {
        while self.edges.disconnected_count() > self.config.max_disconnected_views {
            self.forget_oldest(ForgetReason::Evicted);
        }
    }

    pub(super) fn forget_oldest(&mut self, reason: ForgetReason) {
        let Some(entry) = self.edges.remove_oldest_disconnected() else {
            return;
        };
        self.stats.views_forgotten += 1;
        self.records_gone(entry.commands());
        let (edge_id, unfinished_commands) = entry.forgotten();
        self.events.push_back(CpEvent::EdgeForgotten {
            unfinished_commands,
            edge_id,
            reason,
        });
    }

    /// Forgets a disconnected Edge: its view and its commands
    /// ([`CpEvent::EdgeForgotten`], [`ForgetReason::Asked`]). False when unknown or
    /// connected.
    pub fn forget_edge(&mut self, edge_id: &str) -> bool {
        if self.edges.get(edge_id).is_some_and(|e| e.live().is_none())
            && let Some(entry) = self.edges.remove(edge_id)
        {
            self.records_gone(entry.commands());
            let (edge_id, unfinished_commands) = entry.forgotten();
            self.events.push_back(CpEvent::EdgeForgotten {
                unfinished_commands,
                edge_id,
                reason: ForgetReason::Asked,
            });
            return true;
        }
        false
    }

    /// The view of one Edge.
    pub fn edge(&self, edge_id: &str) -> Option<&EdgeView> {
        self.edges.get(edge_id).map(|e| e.view())
    }

    /// The view of every Edge known, by id.
    pub fn edges(&self) -> impl Iterator<Item = &EdgeView> {
        self.edges.values().map(|e| e.view())
    }

    /// The Edge id and session id of the session accepted on `conn`, e.g. to label a
    /// connection task's logs. `None` before the hello and once closing.
    pub fn session_of(&self, conn: ConnectionId) -> Option<(&str, u64)> {
        let s = self.conns.get(&conn)?.established()?;
        Some((s.edge_id(), s.session_id()))
    }

    /// The connection of the live session of `edge_id`.
    pub fn live_conn(&self, edge_id: &str) -> Option<ConnectionId> {
        self.edges.get(edge_id)?.live()
    }

    /// [`live_conn`](Self::live_conn), or how the Edge is not there.
    pub(super) fn live_conn_or_absent(&self, edge_id: &str) -> Result<ConnectionId, EdgeAbsent> {
        match self.edges.get(edge_id) {
            None => Err(EdgeAbsent::unknown(edge_id)),
            Some(entry) => entry
                .live()
                .ok_or_else(|| EdgeAbsent::not_connected(edge_id)),
        }
    }
}

//! The Edges' views beyond one connection: reachability as their sessions are heard
//! from or go silent (PROTOCOL.md §4.2), and the retention of disconnected Edges'
//! views (§7).

use std::time::Duration;

use crate::time::Instant;

use super::ControlPlane;
use crate::cp::event::{CpEvent, ForgetReason};
use crate::cp::ids::ConnectionId;

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

    /// Abandons the unfinished commands of the Edges disconnected for longer than they
    /// remember them (PROTOCOL.md §4.4): FAILED, their outcome never to be learned.
    pub(super) fn abandon_commands(&mut self, now: Instant) {
        let retention = self.config.finished_command_retention;
        while let Some((entry, since)) = self.edges.abandon_due(now) {
            let edge_id = entry.view().edge_id.clone();
            let abandoned = entry.commands_mut().abandon(retention);
            let disconnected_for = now.saturating_duration_since(since);
            for command_id in abandoned {
                self.stats.commands_abandoned += 1;
                self.events.push_back(CpEvent::CommandAbandoned {
                    edge_id: edge_id.clone(),
                    command_id,
                    disconnected_for,
                });
            }
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
        let (edge_id, unfinished_commands) = entry.forgotten();
        self.events.push_back(CpEvent::EdgeForgotten {
            unfinished_commands,
            edge_id,
            reason,
        });
    }

    /// The session on `conn` was unreachable and was heard from again.
    pub(super) fn reachable_again(&mut self, conn: ConnectionId) {
        let Some(session) = self.conns.get(&conn).and_then(|s| s.established()) else {
            return;
        };
        let (edge_id, session_id) = (session.edge_id().to_owned(), session.session_id());
        if let Some(entry) = self.edges.live_at(session.edge(), conn) {
            entry.reachable(true);
        }
        self.events.push_back(CpEvent::EdgeReachable {
            edge_id,
            session_id,
        });
    }

    /// The session on `conn` was silent for `silent_for`: its Edge is unreachable (the
    /// CP's verdict; the nodes' `connected` flags are the Edge's and untouched).
    pub(super) fn unreachable(&mut self, conn: ConnectionId, silent_for: Duration) {
        let Some(session) = self.conns.get(&conn).and_then(|s| s.established()) else {
            return;
        };
        let (edge_id, session_id) = (session.edge_id().to_owned(), session.session_id());
        if let Some(entry) = self.edges.live_at(session.edge(), conn) {
            entry.reachable(false);
        }
        self.events.push_back(CpEvent::EdgeUnreachable {
            edge_id,
            session_id,
            silent_for,
        });
    }
}

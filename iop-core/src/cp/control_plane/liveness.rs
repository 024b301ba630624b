//! Reachability of an Edge (PROTOCOL.md §4.2): silent for the unreachable window, its
//! view says `Unreachable` (the Control Plane's verdict; node `connected` flags are the
//! Edge's and untouched), and heard from again, `Connected`.

use std::time::Duration;

use crate::cp::CpEvent;
use crate::cp::ids::ConnectionId;

use super::ControlPlane;

impl ControlPlane {
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

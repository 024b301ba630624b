//! What a connection's end does beyond the connection (PROTOCOL.md §11, §5.3): its
//! pending status requests are abandoned, the end of the Edge's *live* session marks
//! the Edge disconnected and ends the commands' delivery attempt on it, and the
//! connection emits its one [`CpEvent::Closed`].

use std::time::Duration;

use crate::Instant;

use super::ControlPlane;
use crate::cp::ids::ConnectionId;
use crate::cp::session::EndedSession;
use crate::cp::{CloseReason, CpEvent};

impl ControlPlane {
    /// Ends `conn`: queues the `GoAway` for `reason` (if any), ends its session, emits
    /// the one `Closed` event. No effect on a connection already closing.
    pub(super) fn close(&mut self, now: Instant, conn: ConnectionId, reason: CloseReason) {
        self.close_retrying(now, conn, reason, None);
    }

    /// [`close`](Self::close), its `GoAway{OVERLOADED}` naming `retry` instead of
    /// `retry_after_overloaded` when given.
    pub(super) fn close_retrying(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        reason: CloseReason,
        retry: Option<Duration>,
    ) {
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(ended) = s.end(&reason, retry, &self.config, &mut self.io) else {
            return;
        };
        if ended.awaited_hello {
            self.pending_hellos -= 1;
            self.claims.remove(&conn);
        }
        match &reason {
            CloseReason::ProtocolError(_) => self.stats.protocol_errors += 1,
            CloseReason::HelloTimeout => self.stats.hello_timeouts += 1,
            CloseReason::HeartbeatTimeout => self.stats.heartbeat_timeouts += 1,
            CloseReason::Overloaded => self.stats.overloaded += 1,
            CloseReason::SlowPeer => self.stats.slow_peers += 1,
            _ => {}
        }
        let (edge_id, session_id) = match ended.session {
            Some(session) => {
                self.session_ended(now, conn, &session, &reason);
                (Some(session.edge_id), Some(session.session_id))
            }
            None => (None, None),
        };
        self.events.push_back(CpEvent::Closed {
            conn,
            edge_id,
            session_id,
            reason,
            unix_ms: self.config.wall_clock.unix_ms(now),
        });
        self.reindex(conn);
    }

    /// The session on `conn` ended for `reason`.
    fn session_ended(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        session: &EndedSession,
        reason: &CloseReason,
    ) {
        self.status_abandoned(session);
        // Stale-close suppression: only the live session's end disconnects.
        let Some(entry) = self.edges.live_at(session.edge, conn) else {
            return;
        };
        entry.went_down();
        self.events.push_back(CpEvent::EdgeDisconnected {
            edge_id: session.edge_id.clone(),
            session_id: session.session_id,
            reason: reason.clone(),
        });
        self.unanswered_on(&session.edge_id, session.session_id);
        self.drop_load_build(&session.edge_id);
        let retention = self.config.edge_command_retention;
        self.edges.disconnected(session.edge, now, retention);
        self.evict_views();
    }
}

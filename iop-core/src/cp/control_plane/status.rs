//! Status across connections (PROTOCOL.md §4.3, §4.1.6): the application's requests,
//! issued on the Edge's live session; answers made into the Edge's view and
//! `StatusReceived`; requests that time out or are abandoned with their session; and
//! resync points, after which only a new full status makes a view fresh.

use iop_proto::limits::send;

use crate::cp::error::{EdgeAbsent, StatusError};
use crate::cp::event::{CloseReason, CpEvent, ResyncCause};
use crate::cp::ids::{ConnectionId, RequestId};
use crate::cp::session::{EndedSession, StatusAnswer};
use crate::cp::view::StatusSummary;
use crate::ids::validate_id;
use crate::time::Instant;

use super::{ControlPlane, reindex};

impl ControlPlane {
    /// The status requests `correlation_ids` of the session on `conn` timed out.
    pub(super) fn status_timed_out(&mut self, conn: ConnectionId, correlation_ids: &[u64]) {
        let session = self.conns.get(&conn).and_then(|s| s.established());
        let Some(session) = session.filter(|_| !correlation_ids.is_empty()) else {
            return;
        };
        let (edge_id, session_id) = (session.edge_id(), session.session_id());
        for &correlation_id in correlation_ids {
            self.stats.status_timeouts += 1;
            self.events.push_back(CpEvent::StatusTimedOut {
                edge_id: edge_id.to_owned(),
                request: RequestId {
                    session_id,
                    correlation_id,
                },
            });
        }
    }

    /// The session `session` ended with status requests pending: each is abandoned.
    pub(super) fn status_abandoned(&mut self, session: &EndedSession) {
        for &correlation_id in &session.abandoned {
            self.events.push_back(CpEvent::StatusAbandoned {
                edge_id: session.edge_id.clone(),
                request: RequestId {
                    session_id: session.session_id,
                    correlation_id,
                },
            });
        }
    }

    /// Asks `edge_id` for a status of `node_ids` (empty = every node). The outcome is
    /// exactly one of the events `StatusReceived`, `StatusTimedOut` or
    /// `StatusAbandoned` for the returned id.
    pub fn request_status(
        &mut self,
        now: Instant,
        edge_id: &str,
        node_ids: Vec<String>,
    ) -> Result<RequestId, StatusError> {
        // Within what the Edge decodes (PROTOCOL.md §4.6) before anything is queued.
        send::status_request(&node_ids)?;
        for id in &node_ids {
            validate_id("node_id", id).map_err(StatusError::InvalidNodeId)?;
        }
        let conn = self.live_conn_or_absent(edge_id)?;
        self.issue_status(now, conn, edge_id, &node_ids)
    }

    /// Issues a status request on the session of `conn`, the live one of `edge_id`.
    pub(super) fn issue_status(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        edge_id: &str,
        node_ids: &[String],
    ) -> Result<RequestId, StatusError> {
        let (timeout, limit) = (self.config.status_timeout, self.config.max_inflight_status);
        let not_connected = || StatusError::from(EdgeAbsent::not_connected(edge_id));
        let s = self.conns.get_mut(&conn).ok_or_else(not_connected)?;
        let issued = s
            .request_status(now, node_ids, timeout, limit, &mut self.io)?
            .ok_or_else(not_connected)?;
        if issued.slow_peer {
            // Its end abandons the request: the application hears of it as of any
            // other request that ends unanswered.
            self.close(now, conn, CloseReason::SlowPeer);
        } else {
            reindex(&mut self.timers, s);
        }
        Ok(RequestId {
            session_id: issued.session_id,
            correlation_id: issued.correlation_id,
        })
    }

    /// Marks the view of the Edge on `conn` stale, tells the application, and asks for a
    /// full status when configured to.
    pub(super) fn resync(&mut self, now: Instant, conn: ConnectionId, cause: ResyncCause) {
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        s.resync_point();
        let Some(session) = s.established() else {
            return;
        };
        let (edge_id, session_id) = (session.edge_id().to_owned(), session.session_id());
        if let Some(entry) = self.edges.live_at(session.edge(), conn) {
            entry.stale();
        }
        let request = if self.config.auto_status_on_resync {
            self.issue_status(now, conn, &edge_id, &[]).ok()
        } else {
            None
        };
        self.events.push_back(CpEvent::ResyncNeeded {
            edge_id,
            session_id,
            cause,
            request,
        });
    }
}

/// PROTOCOL.md §4.3: a status answer on `conn` updates the view of its Edge (when
/// `conn` carries the Edge's live session) and becomes [`CpEvent::StatusReceived`].
#[inline]
pub(super) fn status_received(
    edges: &mut crate::cp::edges::EdgeTable,
    events: &mut std::collections::VecDeque<CpEvent>,
    conn: ConnectionId,
    received_at_unix_ms: u64,
    answer: StatusAnswer,
) {
    let StatusAnswer {
        edge,
        session_id,
        correlation_id,
        fresh,
        response,
    } = answer;
    if let Some(entry) = edges.live_at(edge, conn) {
        let summary = StatusSummary {
            session_id,
            registry_revision: response.registry_revision,
            observed_at_unix_ms: response.observed_at_unix_ms,
            received_at_unix_ms,
            node_count: response.nodes.len(),
            connected_nodes: response.nodes.iter().filter(|n| n.connected).count(),
            truncated: response.truncated,
        };
        entry.status_answered(summary, fresh);
    }
    // The response's `edge_id` is the session's (checked): the event carries it in the
    // response only, which saves a copy of the id per status.
    events.push_back(CpEvent::StatusReceived {
        request: RequestId {
            session_id,
            correlation_id,
        },
        response,
    });
}

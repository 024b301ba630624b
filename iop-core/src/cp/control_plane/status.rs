//! Status across connections (PROTOCOL.md §4.3, §4.1.6): the application's requests,
//! issued on the Edge's live session; answers made into the Edge's view and
//! `StatusReceived`; requests that time out or are abandoned with their session; and
//! resync points, after which only a new full status makes a view fresh.

use iop_proto::limits::send;

use crate::cp::error::{EdgeAbsent, StatusError};
use crate::cp::ids::{ConnectionId, RequestId};
use crate::cp::session::{Ask, EndedSession};
use crate::cp::{CloseReason, CpEvent, ResyncCause};
use crate::ids::validate_id;
use crate::time::Instant;

use super::{ControlPlane, reindex};

impl ControlPlane {
    /// The status requests `expired` of the session on `conn` timed out: the
    /// application hears of its own; the control plane's own leave its view as it
    /// was.
    pub(super) fn status_timed_out(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        expired: &[(u64, Ask)],
    ) {
        for &(correlation_id, ask) in expired {
            self.stats.status_timeouts += 1;
            if ask.own() {
                self.own_request_ended(now, conn, ask);
                continue;
            }
            let session = self.conns.get(&conn).and_then(|s| s.established());
            if let Some(session) = session {
                self.events.push_back(CpEvent::StatusTimedOut {
                    edge_id: session.edge_id().to_owned(),
                    request: RequestId {
                        session_id: session.session_id(),
                        correlation_id,
                    },
                });
            }
        }
    }

    /// The session `session` ended with status requests pending: each is abandoned.
    pub(super) fn status_abandoned(&mut self, session: &EndedSession) {
        for &(correlation_id, ask) in &session.abandoned {
            if ask.own() {
                self.loads.own_pending = self.loads.own_pending.saturating_sub(1);
                continue;
            }
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
        send::status_request(&node_ids, "")?;
        for id in &node_ids {
            validate_id("node_id", id).map_err(StatusError::InvalidNodeId)?;
        }
        let conn = self.live_conn_or_absent(edge_id)?;
        let ask = if node_ids.is_empty() {
            Ask::Full
        } else {
            Ask::Nodes
        };
        self.issue_status(now, conn, edge_id, ask, &node_ids, "")
    }

    /// Asks `edge_id` for its nodes after `start_after_node_id` (PROTOCOL.md §4.3), to
    /// page a truncated answer oneself; the outcome is as for
    /// [`request_status`](Self::request_status). The Control Plane pages the answers
    /// to its own and to the application's full requests into the Edge's load view
    /// ([`edge_load`](Self::edge_load)) without this.
    pub fn request_status_after(
        &mut self,
        now: Instant,
        edge_id: &str,
        start_after_node_id: &str,
    ) -> Result<RequestId, StatusError> {
        send::status_request::<&str>(&[], start_after_node_id)?;
        validate_id("node_id", start_after_node_id).map_err(StatusError::InvalidNodeId)?;
        let conn = self.live_conn_or_absent(edge_id)?;
        self.issue_status(now, conn, edge_id, Ask::Nodes, &[], start_after_node_id)
    }

    /// Issues a status request on the session of `conn`, the live one of `edge_id`.
    pub(super) fn issue_status(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        edge_id: &str,
        ask: Ask,
        node_ids: &[String],
        start_after: &str,
    ) -> Result<RequestId, StatusError> {
        let (timeout, limit) = (self.config.status_timeout, self.config.max_inflight_status);
        let not_connected = || StatusError::from(EdgeAbsent::not_connected(edge_id));
        let s = self.conns.get_mut(&conn).ok_or_else(not_connected)?;
        let issued = s
            .request_status(
                now,
                ask,
                node_ids,
                start_after,
                timeout,
                limit,
                &mut self.io,
            )?
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
            self.issue_status(now, conn, &edge_id, Ask::Full, &[], "")
                .ok()
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

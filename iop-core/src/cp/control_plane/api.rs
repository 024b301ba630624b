//! Application calls: status requests, commands, drain, shutdown, revocation, queries.

use iop_proto::limits::send;

use crate::cp::command_state::CommandState;
use crate::cp::enrolment::EnrolmentPolicy;
use crate::cp::error::{EdgeAbsent, RevokeError, StatusError};
use crate::cp::event::CloseReason;
use crate::cp::ids::{ConnectionId, RequestId};
use crate::cp::view::EdgeView;
use crate::ids::validate_id;
use crate::time::Instant;

use super::{ControlPlane, reindex};

impl ControlPlane {
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

    /// Starts draining: new hellos are refused `DRAINING` with `retry_after_ms`;
    /// live sessions go on.
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// True once [`drain`](Self::drain) or [`shutdown`](Self::shutdown) was called.
    pub fn is_draining(&self) -> bool {
        self.draining
    }

    /// Sends `GoAway{SHUTDOWN}` to every connection and closes it; later connections
    /// are refused the same way.
    pub fn shutdown(&mut self, now: Instant) {
        self.draining = true;
        self.shut_down = true;
        let mut open: Vec<ConnectionId> = self
            .conns
            .iter()
            .filter(|(_, s)| s.is_open())
            .map(|(id, _)| *id)
            .collect();
        // In id order, whatever the table's.
        open.sort_unstable();
        for conn in open {
            self.close(now, conn, CloseReason::Shutdown);
        }
    }

    /// Revokes `edge_id`: removes it from the allow list (if the policy is one) and
    /// ends its live session with `GoAway{CREDENTIAL_REVOKED}`. With
    /// [`EnrolmentPolicy::AcceptAny`] the Edge may enrol again.
    pub fn revoke(&mut self, now: Instant, edge_id: &str) -> Result<(), RevokeError> {
        let listed = match &mut self.policy {
            EnrolmentPolicy::AllowList(list) => list.remove(edge_id),
            EnrolmentPolicy::AcceptAny => false,
        };
        let live = self.live_conn(edge_id);
        if let Some(conn) = live {
            self.close(now, conn, CloseReason::CredentialRevoked);
        }
        if listed || live.is_some() {
            Ok(())
        } else {
            Err(RevokeError::UnknownEdge(edge_id.to_owned()))
        }
    }

    /// Replaces the enrolment policy. Every live session whose Edge id and credential
    /// no longer pass it ends with `GoAway{CREDENTIAL_REVOKED}`.
    pub fn set_enrolment_policy(&mut self, now: Instant, policy: EnrolmentPolicy) {
        self.policy = policy;
        let revoked: Vec<ConnectionId> = self
            .edges
            .values()
            .filter_map(|e| e.live())
            .filter(|conn| {
                self.conns
                    .get(conn)
                    .and_then(|s| s.established())
                    .is_some_and(|s| self.policy.check(s.edge_id(), s.credential()).is_err())
            })
            .collect();
        for conn in revoked {
            self.close(now, conn, CloseReason::CredentialRevoked);
        }
    }

    /// The enrolment policy in force.
    pub fn enrolment_policy(&self) -> &EnrolmentPolicy {
        &self.policy
    }

    /// Forgets a disconnected Edge: its view and its commands. False when unknown or
    /// connected.
    pub fn forget_edge(&mut self, edge_id: &str) -> bool {
        if self.edges.get(edge_id).is_some_and(|e| e.live().is_none()) {
            self.edges.remove(edge_id);
            return true;
        }
        false
    }

    /// Ids of the commands of `edge_id` without an outcome yet, oldest first.
    pub fn unfinished_commands(&self, edge_id: &str) -> Vec<String> {
        self.edges
            .get(edge_id)
            .map(|e| e.commands().unfinished_ids())
            .unwrap_or_default()
    }

    /// The view of one Edge.
    pub fn edge(&self, edge_id: &str) -> Option<&EdgeView> {
        self.edges.get(edge_id).map(|e| e.view())
    }

    /// The view of every Edge known, by id.
    pub fn edges(&self) -> impl Iterator<Item = &EdgeView> {
        self.edges.values().map(|e| e.view())
    }

    /// What is known about one command of one Edge.
    pub fn command(&self, edge_id: &str, command_id: &str) -> Option<CommandState> {
        self.edges.get(edge_id)?.commands().state(command_id)
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

//! Application calls: status requests, commands, drain, shutdown, revocation, queries.

use iop_proto::limits::send;
use iop_proto::{EdgeCommandRequest, Envelope, Message, encode_status_request_frame};

use crate::ids::{MAX_ID_LEN, validate_id};
use crate::outbound::OutboundError;
use crate::time::Instant;

use super::command::CommandState;
use super::conn::ConnState;
use super::endpoint::{ControlPlane, queue_encoded, reindex_conn};
use super::enrolment::EnrolmentPolicy;
use super::error::{CommandError, CommandSpec, RevokeError, StatusError};
use super::event::CloseReason;
use super::ids::{ConnectionId, RequestId};
use super::timer::Timer;
use super::view::EdgeView;

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
        let Some(conn) = self.live_conn(edge_id) else {
            return Err(if self.edges.get(edge_id).is_some() {
                StatusError::NotConnected(edge_id.to_owned())
            } else {
                StatusError::UnknownEdge(edge_id.to_owned())
            });
        };
        self.issue_status(now, conn, node_ids)
    }

    pub(crate) fn issue_status(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        node_ids: Vec<String>,
    ) -> Result<RequestId, StatusError> {
        let limit = self.config.max_inflight_status;
        let timeout = self.config.status_timeout;
        // One lookup of the connection for the whole call: issue the id, queue the
        // request, arm the timer.
        let Some(c) = self.conns.get_mut(&conn) else {
            return Err(StatusError::SlowPeer);
        };
        let ConnState::Active(session) = &mut c.state else {
            return Err(StatusError::SlowPeer);
        };
        let full = node_ids.is_empty();
        let correlation_id = session
            .status
            .issue(now, timeout, limit, full)
            .ok_or(StatusError::TooManyInFlight { limit })?;
        let session_id = session.session_id;
        let deadline = session.status.next_deadline();
        // Written straight from the ids: no envelope to build and drop.
        let encode = |max, dst: &mut Vec<u8>| {
            encode_status_request_frame(correlation_id, &node_ids, max, dst)
        };
        match queue_encoded(
            c,
            conn,
            encode,
            &mut self.wakeups,
            self.handling,
            &mut self.stats,
        ) {
            Ok(()) => {
                c.timers.set_opt(Timer::Status, deadline);
                reindex_conn(&mut self.timers, conn, c);
            }
            Err(OutboundError::Full { .. }) => {
                self.close(conn, CloseReason::SlowPeer);
                return Err(StatusError::SlowPeer);
            }
            Err(e) => {
                if let Some(s) = c.session_mut() {
                    s.status.unissue(correlation_id);
                }
                return Err(StatusError::TooLarge(e));
            }
        }
        Ok(RequestId {
            session_id,
            correlation_id,
        })
    }

    /// Sends a command to `edge_id` and returns its id: `command_id` if given (1 to 128
    /// bytes, unique for this Edge), else a generated `cmd-<epoch hex>-<n>` with
    /// `config.command_id_epoch` and a per-CP counter from 1.
    ///
    /// The command is tracked until its terminal phase: responses and events arrive as
    /// events; if the session drops before a response, the command is re-sent on the
    /// Edge's next session (same id, idempotent). If the peer turns out too slow while
    /// sending, the session is dropped and the command is still kept for the next one.
    pub fn send_command(
        &mut self,
        _now: Instant,
        edge_id: &str,
        spec: CommandSpec,
        command_id: Option<String>,
    ) -> Result<String, CommandError> {
        let Some(entry) = self.edges.get(edge_id) else {
            return Err(CommandError::UnknownEdge(edge_id.to_owned()));
        };
        let Some(conn) = self.live_conn(edge_id) else {
            return Err(CommandError::NotConnected(edge_id.to_owned()));
        };
        if !entry.view.operations.contains(&spec.operation) {
            let mut advertised = entry.view.operations.clone();
            advertised.sort_unstable();
            return Err(CommandError::OperationNotAdvertised {
                operation: spec.operation,
                advertised,
            });
        }
        let mut next_n = self.last_command_n;
        let command_id = match command_id {
            Some(id) if id.is_empty() || id.len() > MAX_ID_LEN => {
                return Err(CommandError::InvalidCommandId { len: id.len() });
            }
            Some(id) => id,
            // Skip any id the application already chose itself.
            None => loop {
                next_n += 1;
                let id = format!("cmd-{:x}-{next_n}", self.config.command_id_epoch);
                if !entry.commands.contains(&id) {
                    break id;
                }
            },
        };
        if entry.commands.contains(&command_id) {
            return Err(CommandError::DuplicateCommandId(command_id));
        }
        let limit = self.config.max_inflight_commands;
        if entry.commands.unfinished() >= limit {
            return Err(CommandError::TooManyInFlight { limit });
        }
        let request = EdgeCommandRequest {
            command_id: command_id.clone(),
            operation: spec.operation,
            target_selector: spec.target_selector,
            metadata: spec.metadata,
            timeout_ms: spec.timeout_ms,
        };
        // Nothing the Edge's decoder refuses is ever queued (PROTOCOL.md §4.6): such a
        // command would end the session, and be re-sent on every next one.
        send::command_request(&request)?;
        let envelope = Envelope::new(request.clone());
        let len = envelope.encoded_len();
        if len > self.config.max_frame_len as usize {
            return Err(CommandError::TooLarge(OutboundError::FrameTooLarge {
                len,
                max: self.config.max_frame_len,
            }));
        }
        self.last_command_n = next_n;
        if let Some(entry) = self.edges.get_mut(edge_id) {
            entry.commands.insert(request);
        }
        // A full buffer drops the session; the command stays for the next one.
        let _ = self.send(conn, envelope);
        Ok(command_id)
    }

    /// Starts draining: new hellos are refused `DRAINING` with `retry_after_ms`;
    /// live sessions go on.
    pub fn drain(&mut self, _now: Instant) {
        self.draining = true;
    }

    /// True once [`drain`](Self::drain) or [`shutdown`](Self::shutdown) was called.
    pub fn is_draining(&self) -> bool {
        self.draining
    }

    /// Sends `GoAway{SHUTDOWN}` to every connection and closes it; later connections
    /// are refused the same way.
    pub fn shutdown(&mut self, _now: Instant) {
        self.draining = true;
        self.shut_down = true;
        let mut open: Vec<ConnectionId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_open())
            .map(|(id, _)| *id)
            .collect();
        // In id order, whatever the table's.
        open.sort_unstable();
        for conn in open {
            self.close(conn, CloseReason::Shutdown);
        }
    }

    /// Revokes `edge_id`: removes it from the allow list (if the policy is one) and
    /// ends its live session with `GoAway{CREDENTIAL_REVOKED}`. With
    /// [`EnrolmentPolicy::AcceptAny`] the Edge may enrol again.
    pub fn revoke(&mut self, _now: Instant, edge_id: &str) -> Result<(), RevokeError> {
        let listed = match &mut self.policy {
            EnrolmentPolicy::AllowList(list) => list.remove(edge_id),
            EnrolmentPolicy::AcceptAny => false,
        };
        let live = self.live_conn(edge_id);
        if let Some(conn) = live {
            self.close(conn, CloseReason::CredentialRevoked);
        }
        if listed || live.is_some() {
            Ok(())
        } else {
            Err(RevokeError::UnknownEdge(edge_id.to_owned()))
        }
    }

    /// Replaces the enrolment policy. Every live session whose Edge id and credential
    /// no longer pass it ends with `GoAway{CREDENTIAL_REVOKED}`.
    pub fn set_enrolment_policy(&mut self, _now: Instant, policy: EnrolmentPolicy) {
        self.policy = policy;
        let revoked: Vec<ConnectionId> = self
            .edges
            .values()
            .filter_map(|e| e.live)
            .filter(|conn| {
                self.conns
                    .get(conn)
                    .and_then(|c| c.session())
                    .is_some_and(|s| self.policy.check(&s.edge_id, &s.credential).is_err())
            })
            .collect();
        for conn in revoked {
            self.close(conn, CloseReason::CredentialRevoked);
        }
    }

    /// The enrolment policy in force.
    pub fn enrolment_policy(&self) -> &EnrolmentPolicy {
        &self.policy
    }

    /// Forgets a disconnected Edge: its view and its commands. False when unknown or
    /// connected.
    pub fn forget_edge(&mut self, edge_id: &str) -> bool {
        if self.edges.get(edge_id).is_some_and(|e| e.live.is_none()) {
            self.edges.remove(edge_id);
            return true;
        }
        false
    }

    /// Ids of the commands of `edge_id` without an outcome yet, oldest first.
    pub fn unfinished_commands(&self, edge_id: &str) -> Vec<String> {
        self.edges
            .get(edge_id)
            .map(|e| e.commands.unfinished_ids())
            .unwrap_or_default()
    }

    /// The view of one Edge.
    pub fn edge(&self, edge_id: &str) -> Option<&EdgeView> {
        self.edges.get(edge_id).map(|e| &e.view)
    }

    /// The view of every Edge known, by id.
    pub fn edges(&self) -> impl Iterator<Item = &EdgeView> {
        self.edges.values().map(|e| &e.view)
    }

    /// What is known about one command of one Edge.
    pub fn command(&self, edge_id: &str, command_id: &str) -> Option<CommandState> {
        self.edges.get(edge_id)?.commands.state(command_id)
    }

    /// The Edge id and session id of the session accepted on `conn`, e.g. to label a
    /// connection task's logs. `None` before the hello and once closing.
    pub fn session_of(&self, conn: ConnectionId) -> Option<(&str, u64)> {
        self.conns
            .get(&conn)?
            .session()
            .map(|s| (s.edge_id.as_str(), s.session_id))
    }

    /// The connection of the live session of `edge_id`.
    pub fn live_conn(&self, edge_id: &str) -> Option<ConnectionId> {
        self.edges.get(edge_id)?.live
    }
}

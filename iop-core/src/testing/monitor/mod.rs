//! The invariants of PROTOCOL.md §4–§5, checked on everything the harness sees.
//!
//! The monitor never panics: every broken rule becomes a [`Violation`] message, so a
//! simulation can report the seed and the first thing that went wrong. The rules of
//! commands are in `commands`, those of a snapshot in `snapshot`.

mod commands;
mod load;
mod snapshot;

pub use snapshot::snapshot_problems;

use commands::{CommandTrack, command_edge};

use std::collections::{BTreeMap, BTreeSet};

use crate::cp::{CloseReason, ConnectionId, CpEvent, RequestId};
use crate::edge::{self, EdgeEvent};
use crate::proto::{Body, EdgeStatusResponse, NodeEventKind};

/// One broken rule, with the simulated time (ms) it was seen at.
pub type Violation = String;

/// Tracks what both ends emitted and records every rule they break.
#[derive(Debug, Default)]
pub struct Monitor {
    violations: Vec<Violation>,
    last_session_id: u64,
    /// The live session of each Edge id: (connection, session id).
    live: BTreeMap<String, (ConnectionId, u64)>,
    /// The latest accepted session of each Edge id.
    latest: BTreeMap<String, u64>,
    /// The Edge id of every session accepted.
    session_edges: BTreeMap<u64, String>,
    closed_conns: BTreeSet<ConnectionId>,
    /// Status requests issued and not yet ended.
    pending_status: BTreeSet<RequestId>,
    /// Status requests that ended.
    ended_status: BTreeSet<RequestId>,
    last_correlation: BTreeMap<u64, u64>,
    commands: BTreeMap<(String, String), CommandTrack>,
    /// Last node-event sequence per session.
    node_events: BTreeMap<u64, u64>,
    /// Last status correlation id written per connection.
    wire_correlation: BTreeMap<ConnectionId, u64>,
    cp_protocol_errors: u64,
    edge_protocol_errors: u64,
    /// Panic at the first violation ([`Monitor::set_strict`]).
    strict: bool,
    /// Connections whose Edge end a test scripts: what the peer sends there is the
    /// test's choice, so only the CP's side of the rules is checked (see
    /// [`Monitor::on_scripted`]).
    scripted: BTreeSet<ConnectionId>,
    /// Edge processes whose Control Plane a test scripts
    /// ([`Monitor::on_scripted_cp`]).
    scripted_cp_processes: BTreeSet<usize>,
    /// Sessions accepted on scripted connections, and their Edge ids.
    scripted_sessions: BTreeSet<u64>,
    scripted_edges: BTreeSet<String>,
    /// Load updates per connection (PROTOCOL.md §4.8).
    loads: BTreeMap<ConnectionId, load::LoadTrack>,
}

impl Monitor {
    /// A monitor that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Panic at the first violation, where it is seen (`true`), instead of recording
    /// it for a report: for tests that must never see one, so that the backtrace
    /// points at its cause.
    pub fn set_strict(&mut self, strict: bool) {
        self.strict = strict;
    }

    /// Every violation so far, oldest first.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Records a violation.
    ///
    /// # Panics
    /// When [strict](Self::set_strict).
    pub fn fail(&mut self, at_ms: u64, what: impl Into<String>) {
        let violation = format!("t={at_ms}ms: {}", what.into());
        #[allow(clippy::panic)]
        if self.strict {
            panic!("invariant broken: {violation}");
        }
        self.violations.push(violation);
    }

    /// The highest session id the CP has accepted.
    pub fn last_session_id(&self) -> u64 {
        self.last_session_id
    }

    /// Status requests issued but not ended.
    pub fn pending_status(&self) -> usize {
        self.pending_status.len()
    }

    /// The live session the monitor believes each Edge id has.
    pub fn live_sessions(&self) -> &BTreeMap<String, (ConnectionId, u64)> {
        &self.live
    }

    /// Protocol errors reported by the CP and by Edges.
    pub fn protocol_errors(&self) -> (u64, u64) {
        (self.cp_protocol_errors, self.edge_protocol_errors)
    }

    /// A status request the application issued (or the CP issued on a resync).
    pub fn on_status_issued(&mut self, at_ms: u64, request: RequestId) {
        let last = self.last_correlation.entry(request.session_id).or_insert(0);
        if request.correlation_id <= *last {
            let (l, c) = (*last, request.correlation_id);
            self.fail(
                at_ms,
                format!(
                    "session {}: correlation id {c} after {l}",
                    request.session_id
                ),
            );
        } else {
            *last = request.correlation_id;
        }
        if self.ended_status.contains(&request) || !self.pending_status.insert(request) {
            self.fail(at_ms, format!("status request {request:?} issued twice"));
        }
    }

    fn end_status(&mut self, at_ms: u64, request: RequestId, how: &str) {
        if !self.pending_status.remove(&request) {
            self.fail(
                at_ms,
                format!("status request {request:?} ended ({how}) but was not pending"),
            );
        }
        self.ended_status.insert(request);
    }

    /// Connection `conn`'s Edge end is scripted by the test, which may send anything
    /// on it: from now on, what follows from the peer's frames alone is not a
    /// violation there — the CP refusing them (a protocol error), node events and
    /// command answers out of order, status answers to requests the test issued on
    /// the `ControlPlane` itself. Every rule of the CP's own conduct still holds:
    /// session ids, supersession, live sessions, correlation ids, the frames it
    /// writes.
    pub fn on_scripted(&mut self, conn: ConnectionId) {
        self.scripted.insert(conn);
    }

    /// Edge process `process` talks to a Control Plane the test scripts: a protocol
    /// error it sees there follows from the script, not a violation. The frames it
    /// writes are still checked.
    pub fn on_scripted_cp(&mut self, process: usize) {
        self.scripted_cp_processes.insert(process);
    }

    fn scripted_session(&self, session_id: u64) -> bool {
        self.scripted_sessions.contains(&session_id)
    }

    /// Checks one event of the CP.
    pub fn on_cp_event(&mut self, at_ms: u64, event: &CpEvent) {
        if let Some(edge_id) = command_edge(event)
            && self.scripted_edges.contains(edge_id)
        {
            return;
        }
        match event {
            CpEvent::SessionAccepted {
                conn,
                edge_id,
                session_id,
                superseded_session_id,
                ..
            } => {
                if *session_id <= self.last_session_id {
                    let last = self.last_session_id;
                    self.fail(at_ms, format!("session id {session_id} after {last}"));
                }
                self.last_session_id = self.last_session_id.max(*session_id);
                self.session_edges.insert(*session_id, edge_id.clone());
                if self.scripted.contains(conn) {
                    self.scripted_sessions.insert(*session_id);
                    self.scripted_edges.insert(edge_id.clone());
                }
                let old = self.live.get(edge_id).map(|(_, s)| *s);
                if old.is_some() && old != *superseded_session_id {
                    self.fail(
                        at_ms,
                        format!(
                            "{edge_id}: session {session_id} accepted while {old:?} is live \
                             (names {superseded_session_id:?} as superseded)"
                        ),
                    );
                }
                self.live.insert(edge_id.clone(), (*conn, *session_id));
                self.latest.insert(edge_id.clone(), *session_id);
            }
            CpEvent::EdgeDisconnected {
                edge_id,
                session_id,
                ..
            } => {
                if self.latest.get(edge_id) != Some(session_id) {
                    let latest = self.latest.get(edge_id).copied();
                    self.fail(
                        at_ms,
                        format!(
                            "{edge_id}: session {session_id} marked disconnected, \
                             but the latest session is {latest:?}"
                        ),
                    );
                }
                if self.live.get(edge_id).map(|(_, s)| s) == Some(session_id) {
                    self.live.remove(edge_id);
                }
            }
            CpEvent::Closed {
                conn,
                edge_id,
                session_id,
                reason,
                ..
            } => {
                if !self.closed_conns.insert(*conn) {
                    self.fail(at_ms, format!("{conn:?} closed twice"));
                }
                if let CloseReason::ProtocolError(v) = reason {
                    self.cp_protocol_errors += 1;
                    if !self.scripted.contains(conn) {
                        self.fail(at_ms, format!("CP saw a protocol error on {conn:?}: {v:?}"));
                    }
                }
                if let (Some(e), Some(s)) = (edge_id, session_id)
                    && self.live.get(e) == Some(&(*conn, *s))
                {
                    self.live.remove(e);
                }
            }
            CpEvent::ResyncNeeded {
                request: Some(r), ..
            } => self.on_status_issued(at_ms, *r),
            CpEvent::StatusReceived { request, .. }
            | CpEvent::StatusTimedOut { request, .. }
            | CpEvent::StatusAbandoned { request, .. }
                if self.scripted_session(request.session_id) =>
            {
                self.pending_status.remove(request);
                self.ended_status.insert(*request);
            }
            CpEvent::StatusReceived { request, response } => {
                self.end_status(at_ms, *request, "received");
                let edge_id = self.session_edges.get(&request.session_id).cloned();
                if edge_id.as_deref() != Some(response.edge_id.as_str()) {
                    self.fail(
                        at_ms,
                        format!(
                            "status for session {} of {edge_id:?} names {}",
                            request.session_id, response.edge_id
                        ),
                    );
                }
                let edge_id = &response.edge_id;
                for problem in snapshot_problems(response) {
                    self.fail(at_ms, format!("{edge_id} status: {problem}"));
                }
            }
            CpEvent::StatusTimedOut { request, .. } => {
                self.end_status(at_ms, *request, "timed out")
            }
            CpEvent::StatusAbandoned { request, .. } => {
                self.end_status(at_ms, *request, "abandoned")
            }
            CpEvent::CommandResponded { .. }
            | CpEvent::CommandEvent { .. }
            | CpEvent::CommandEnded { .. } => self.on_command(at_ms, event),
            CpEvent::NodeEvent { session_id, .. } if self.scripted_session(*session_id) => {}
            CpEvent::NodeEvent {
                edge_id,
                session_id,
                event,
            } => {
                if event.edge_id != *edge_id {
                    self.fail(
                        at_ms,
                        format!("node event of {edge_id} names {}", event.edge_id),
                    );
                }
                match self.node_events.get(session_id).copied() {
                    None => {
                        if event.sequence != 1 || event.kind != NodeEventKind::EdgeReady as i32 {
                            self.fail(
                                at_ms,
                                format!(
                                    "session {session_id}: first node event is #{} kind {}",
                                    event.sequence, event.kind
                                ),
                            );
                        }
                    }
                    Some(last) if event.sequence <= last => {
                        self.fail(
                            at_ms,
                            format!(
                                "session {session_id}: node event #{} after #{last}",
                                event.sequence
                            ),
                        );
                    }
                    Some(_) => {}
                }
                self.node_events.insert(*session_id, event.sequence);
            }
            _ => {}
        }
    }

    /// Checks one event of an Edge process.
    pub fn on_edge_event(&mut self, at_ms: u64, process: usize, event: &EdgeEvent) {
        if let EdgeEvent::Closed {
            reason: edge::CloseReason::ProtocolError(e),
            ..
        } = event
        {
            self.edge_protocol_errors += 1;
            // A scripted Control Plane may send what the Edge must refuse.
            if self.scripted_cp_processes.contains(&process) {
                return;
            }
            self.fail(
                at_ms,
                format!("Edge process {process} saw a protocol error: {e}"),
            );
        }
    }

    /// Checks one frame written on `conn`: its size against the receiver's limit, that
    /// it decodes, and the per-session order of status correlation ids.
    pub(crate) fn on_frame(
        &mut self,
        at_ms: u64,
        conn: ConnectionId,
        from_cp: bool,
        len: usize,
        limit: u32,
        envelope: Option<&crate::proto::Envelope>,
    ) {
        let who = if from_cp { "CP" } else { "Edge" };
        if len == 0 || len > limit as usize {
            self.fail(
                at_ms,
                format!("{who} wrote a {len}-byte frame on {conn:?} (limit {limit})"),
            );
        }
        let Some(envelope) = envelope else {
            self.fail(
                at_ms,
                format!("{who} wrote an undecodable frame on {conn:?}"),
            );
            return;
        };
        if !self.scripted.contains(&conn) {
            let track = self.loads.entry(conn).or_default();
            for broken in track.on_frame(at_ms, from_cp, envelope) {
                self.fail(at_ms, format!("{who} on {conn:?}: {broken}"));
            }
        }
        if from_cp && let Some(Body::StatusRequest(_)) = envelope.body {
            let last = self.wire_correlation.entry(conn).or_insert(0);
            let id = envelope.correlation_id;
            if id <= *last {
                let l = *last;
                self.fail(
                    at_ms,
                    format!("{conn:?}: status correlation id {id} after {l}"),
                );
            } else {
                *last = id;
            }
        }
    }

    /// Checks a registry snapshot taken straight from an Edge's registry.
    pub fn on_snapshot(&mut self, at_ms: u64, who: &str, snapshot: &EdgeStatusResponse) {
        for problem in snapshot_problems(snapshot) {
            self.fail(at_ms, format!("{who} snapshot: {problem}"));
        }
    }

    /// End-of-run checks once every fault has cleared and time has passed: every
    /// status request ended, every command ended.
    pub fn check_quiet(&mut self, at_ms: u64) {
        let pending: Vec<RequestId> = self.pending_status.iter().copied().collect();
        for r in pending {
            self.fail(at_ms, format!("status request {r:?} never ended"));
        }
        let open: Vec<(String, String)> = self
            .commands
            .iter()
            .filter(|(_, t)| !t.ended)
            .map(|(k, _)| k.clone())
            .collect();
        for (edge, id) in open {
            self.fail(at_ms, format!("{edge}: command {id} never ended"));
        }
    }

    /// The CP restarted: forget what its events established (sessions, requests,
    /// commands), keep the violations and the session-id floor.
    pub fn forget_cp(&mut self) {
        let violations = std::mem::take(&mut self.violations);
        let last_session_id = self.last_session_id;
        let edge_protocol_errors = self.edge_protocol_errors;
        *self = Self {
            violations,
            last_session_id,
            edge_protocol_errors,
            strict: self.strict,
            ..Self::default()
        };
    }

    /// Registers a command the CP sent, so the end-of-run check expects its end.
    pub fn on_command_sent(&mut self, edge_id: &str, command_id: &str) {
        self.commands
            .entry((edge_id.to_owned(), command_id.to_owned()))
            .or_default();
    }
}

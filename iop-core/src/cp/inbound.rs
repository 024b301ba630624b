//! Frames from an Edge: the hello (PROTOCOL.md §4.1) and everything after it (§4.2–§4.5).

use iop_proto::{
    Body, EdgeCommandEvent, EdgeCommandResponse, EdgeHelloRequest, EdgeHelloResponse,
    EdgeNodeEvent, Envelope, HelloRejectReason, NodeEventKind,
};

use crate::time::Instant;

use super::command::{EventEffect, ResponseEffect};
use super::config::{DuplicatePolicy, ms_u32};
use super::conn::{ConnState, PendingHello, Session};
use super::directory::{Claim, Directory};
use super::edges::EdgeSlot;
use super::endpoint::ControlPlane;
use super::enrolment::CredentialHash;
use super::event::{CloseReason, CpEvent, ProtocolViolation, ResyncCause};
use super::handover::CommandHandover;
use super::hello::{Rejection, check_hello};
use super::ids::ConnectionId;
use super::timer::Timer;
use super::view::Reachability;

use crate::limits::INSTANCE_ID_KEY;

impl ControlPlane {
    pub(crate) fn on_frame(&mut self, now: Instant, conn: ConnectionId, envelope: Envelope) {
        let kind = envelope.kind();
        match self.conns.get(&conn).map(|c| &c.state) {
            Some(ConnState::AwaitingHello) => {
                match envelope.body {
                    Some(Body::HelloRequest(hello)) => self.on_hello(now, conn, hello),
                    _ => self.protocol_error(conn, ProtocolViolation::BeforeHello(kind)),
                }
                return;
            }
            // The hello is not answered yet: nothing else may come.
            Some(ConnState::Claiming(_)) => {
                let violation = match envelope.body {
                    Some(Body::HelloRequest(_)) => ProtocolViolation::SecondHello,
                    _ => ProtocolViolation::BeforeHello(kind),
                };
                return self.protocol_error(conn, violation);
            }
            _ => {}
        }
        match envelope.body {
            // An accepted session's heartbeats, acks, status answers and unknown
            // bodies are handled in place by `handle_bytes` (`session_frames`), the
            // only caller, which passes on every other frame.
            None | Some(Body::Heartbeat(_) | Body::HeartbeatAck(_) | Body::StatusResponse(_)) => {}
            Some(Body::HelloRequest(_)) => {
                self.protocol_error(conn, ProtocolViolation::SecondHello);
            }
            Some(Body::CommandResponse(resp)) => self.on_command_response(conn, resp),
            Some(Body::CommandEvent(ev)) => self.on_command_event(conn, ev),
            Some(Body::NodeEvent(ev)) => self.on_node_event(now, conn, ev),
            Some(Body::GoAway(g)) => self.close(
                conn,
                CloseReason::PeerGoAway {
                    reason: g.reason_enum(),
                    message: g.message,
                },
            ),
            Some(Body::HelloResponse(_) | Body::StatusRequest(_) | Body::CommandRequest(_)) => {
                self.protocol_error(conn, ProtocolViolation::WrongDirection(kind));
            }
        }
    }

    fn hello_response(&self, rejection: Option<&Rejection>) -> EdgeHelloResponse {
        EdgeHelloResponse {
            accepted: rejection.is_none(),
            reject_reason: rejection.map_or(HelloRejectReason::Unspecified, |r| r.reason) as i32,
            message: rejection.map(|r| r.message.clone()).unwrap_or_default(),
            protocol_version: 0,
            heartbeat_interval_ms: 0,
            session_id: 0,
            retry_after_ms: rejection.map_or(0, |r| ms_u32(r.retry_after)),
            max_frame_len: self.config.max_frame_len,
            min_protocol_version: self.config.min_protocol_version,
            max_protocol_version: self.config.max_protocol_version,
        }
    }

    pub(crate) fn reject_hello(&mut self, conn: ConnectionId, rejection: Rejection) {
        self.stats.hello_rejections += 1;
        let response = self.hello_response(Some(&rejection));
        let _ = self.send(conn, Envelope::new(response));
        self.close(conn, CloseReason::HelloRejected(rejection.reason));
    }

    /// PROTOCOL.md §4.1.2, checks in order, then acceptance.
    fn on_hello(&mut self, now: Instant, conn: ConnectionId, hello: EdgeHelloRequest) {
        let version = match check_hello(&self.config, &hello) {
            Ok(v) => v,
            Err(rejection) => return self.reject_hello(conn, rejection),
        };
        let credential = CredentialHash::of(&hello.credential);
        if let Err(reason) = self.policy.check(&hello.edge_id, &credential) {
            let message = match reason {
                HelloRejectReason::UnknownEdge => "edge is not enrolled",
                _ => "credential does not match",
            };
            return self.reject_hello(conn, Rejection::new(reason, message));
        }
        let peer = self.conns.get_mut(&conn).and_then(|c| c.peer.take());
        if self.config.require_peer_identity {
            let message = match &peer {
                None => Some("no verified client certificate identity on this connection"),
                Some(p) if !p.names_edge(&hello.edge_id) => {
                    Some("client certificate identity does not match the edge id")
                }
                Some(_) => None,
            };
            if let Some(message) = message {
                let r = Rejection::new(HelloRejectReason::BadCredential, message);
                return self.reject_hello(conn, r);
            }
        }
        if self.draining {
            let mut r = Rejection::new(HelloRejectReason::Draining, "control plane is draining");
            r.retry_after = self.config.retry_after_draining;
            return self.reject_hello(conn, r);
        }
        // Step 6: the ownership claim (`directory`).
        let old = self.edges.get(&hello.edge_id).and_then(|e| e.live);
        match self.config.directory {
            Directory::Local => {
                if old.is_some() && self.config.duplicate_policy == DuplicatePolicy::Reject {
                    return self.reject_duplicate(conn);
                }
                self.last_session_id += 1;
                let session_id = self.last_session_id;
                self.accept_hello(
                    now,
                    conn,
                    hello,
                    credential,
                    version,
                    old,
                    session_id,
                    Vec::new(),
                );
            }
            Directory::External => {
                let claim = Claim {
                    conn,
                    edge_id: hello.edge_id.clone(),
                    policy: self.config.duplicate_policy,
                    local_session_id: old
                        .and_then(|c| self.conns.get(&c)?.session())
                        .map(|s| s.session_id),
                    last_session_id: self
                        .edges
                        .get(&hello.edge_id)
                        .map_or(0, |e| e.view.session_id),
                };
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.state = ConnState::Claiming(Box::new(PendingHello {
                        hello,
                        credential,
                        version,
                        adopted: Vec::new(),
                    }));
                }
                self.events.push_back(CpEvent::OwnershipClaim(claim));
            }
        }
    }

    pub(crate) fn reject_duplicate(&mut self, conn: ConnectionId) {
        let mut r = Rejection::new(
            HelloRejectReason::DuplicateEdge,
            "edge already has a live session",
        );
        r.retry_after = self.config.retry_after_duplicate;
        self.reject_hello(conn, r);
    }

    /// Accepts the hello on `conn` as session `session_id`; `old` is the Edge's live
    /// session here, superseded by it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn accept_hello(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        mut hello: EdgeHelloRequest,
        credential: CredentialHash,
        version: u32,
        old: Option<ConnectionId>,
        session_id: u64,
        adopted: Vec<CommandHandover>,
    ) {
        let interval = self.config.negotiated_heartbeat_interval();
        let instance_id = hello.metadata.get(INSTANCE_ID_KEY).cloned();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let unreachable_after = interval * self.config.unreachable_intervals;
        let liveness_after = interval * self.config.liveness_intervals;
        c.decoder.set_max_frame_len(self.config.max_frame_len);
        c.timers.stop(Timer::Hello);
        c.timers.set(Timer::Unreachable, now + unreachable_after);
        c.timers.set(Timer::Liveness, now + liveness_after);
        if matches!(c.state, ConnState::AwaitingHello | ConnState::Claiming(_)) {
            self.pending_hellos -= 1;
        }
        c.state = ConnState::Active(Box::new(Session {
            edge_id: hello.edge_id.clone(),
            edge: EdgeSlot::NONE,
            session_id,
            credential,
            instance_id: instance_id.clone(),
            unreachable_after,
            liveness_after,
            unreachable: false,
            status: Default::default(),
            last_event_seq: 0,
            fresh_floor: 0,
        }));
        let mut response = self.hello_response(None);
        response.protocol_version = version;
        response.heartbeat_interval_ms = ms_u32(interval);
        response.session_id = session_id;
        if self.send(conn, Envelope::new(response)).is_err() {
            return;
        }
        self.stats.sessions_accepted += 1;

        let old_session_id = self.register_session(now, conn, session_id, &mut hello);
        self.events.push_back(CpEvent::SessionAccepted {
            conn,
            edge_id: hello.edge_id.clone(),
            session_id,
            superseded_session_id: old.map(|_| old_session_id),
        });

        if let Some(old_conn) = old {
            self.supersede(
                now,
                &hello.edge_id,
                old_conn,
                old_session_id,
                session_id,
                instance_id,
            );
        }
        self.resync(now, conn, ResyncCause::NewSession);

        if !adopted.is_empty() {
            self.join_adopted(&hello.edge_id, adopted);
        }
        self.carry_over_commands(conn, &hello.edge_id, &hello.inflight_command_ids);
    }

    /// Makes `conn` the live session of the hello's Edge in the registry (creating its
    /// entry) and moves the hello's identity into the view. Returns the session id the
    /// view held before (0 for a new Edge).
    fn register_session(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        session_id: u64,
        hello: &mut EdgeHelloRequest,
    ) -> u64 {
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let slot = self.edges.slot_or_insert(&hello.edge_id);
        if let Some(session) = self.conns.get_mut(&conn).and_then(|c| c.session_mut()) {
            session.edge = slot;
        }
        self.edges.connected(slot);
        let Some(entry) = self.edges.at_mut(slot) else {
            return 0;
        };
        entry.live = Some(conn);
        let old_session_id = entry.view.session_id;
        let view = &mut entry.view;
        view.reachability = Reachability::Connected;
        view.session_id = session_id;
        view.software_version = std::mem::take(&mut hello.software_version);
        view.operations = std::mem::take(&mut hello.operations);
        view.metadata = std::mem::take(&mut hello.metadata).into_iter().collect();
        view.connected_since_unix_ms = unix_ms;
        view.fresh = false;
        old_session_id
    }

    /// PROTOCOL.md §4.4 on a new session: re-send every command never answered, mark lost
    /// every command believed accepted that the Edge no longer holds.
    fn carry_over_commands(&mut self, conn: ConnectionId, edge_id: &str, inflight: &[String]) {
        let retention = self.config.finished_command_retention;
        let Some(entry) = self.edges.get_mut(edge_id) else {
            return;
        };
        let (resend, lost) = entry.commands.on_new_session(inflight, retention);
        for command_id in lost {
            self.stats.commands_lost += 1;
            self.events.push_back(CpEvent::CommandLost {
                edge_id: edge_id.to_owned(),
                command_id,
            });
        }
        for request in resend {
            self.stats.commands_resent += 1;
            if self.send(conn, Envelope::new(request)).is_err()
                && !self.conns.get(&conn).is_some_and(|c| c.is_open())
            {
                break;
            }
        }
    }

    fn supersede(
        &mut self,
        now: Instant,
        edge_id: &str,
        old_conn: ConnectionId,
        old_session_id: u64,
        new_session_id: u64,
        new_instance_id: Option<String>,
    ) {
        let old_instance_id = self
            .conns
            .get(&old_conn)
            .and_then(|c| c.session())
            .and_then(|s| s.instance_id.clone());
        self.stats.supersessions += 1;
        let (total, flapping) = match self.edges.get_mut(edge_id) {
            Some(entry) => {
                let flapping =
                    entry
                        .flaps
                        .record(now, self.config.flap_window, self.config.flap_threshold);
                entry.view.supersessions = entry.flaps.total;
                (entry.flaps.total, flapping)
            }
            None => (0, false),
        };
        self.events.push_back(CpEvent::EdgeSuperseded {
            edge_id: edge_id.to_owned(),
            old_session_id,
            new_session_id,
            old_instance_id,
            new_instance_id,
            total_supersessions: total,
            flapping,
        });
        self.close(
            old_conn,
            CloseReason::Superseded {
                by_session_id: new_session_id,
            },
        );
    }

    /// Marks the view of the Edge on `conn` stale, tells the application, and asks for a
    /// full status when configured to.
    pub(crate) fn resync(&mut self, now: Instant, conn: ConnectionId, cause: ResyncCause) {
        let Some(session) = self.conns.get_mut(&conn).and_then(|c| c.session_mut()) else {
            return;
        };
        session.fresh_floor = session.status.last_issued() + 1;
        let (edge_id, session_id) = (session.edge_id.clone(), session.session_id);
        if let Some(entry) = self.edges.live_at(session.edge, conn) {
            entry.view.fresh = false;
        }
        let request = if self.config.auto_status_on_resync {
            self.issue_status(now, conn, Vec::new()).ok()
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

    fn session_ids(&self, conn: ConnectionId) -> Option<(String, u64, EdgeSlot)> {
        self.conns
            .get(&conn)
            .and_then(|c| c.session())
            .map(|s| (s.edge_id.clone(), s.session_id, s.edge))
    }

    fn on_command_response(&mut self, conn: ConnectionId, resp: EdgeCommandResponse) {
        let Some((edge_id, session_id, slot)) = self.session_ids(conn) else {
            return;
        };
        let retention = self.config.finished_command_retention;
        let effect = match self.edges.live_at(slot, conn) {
            Some(entry) => entry.commands.on_response(&resp, retention),
            None => Ok(ResponseEffect::Unknown),
        };
        match effect {
            Err(v) => self.protocol_error(conn, v),
            Ok(ResponseEffect::Unknown) => self.stats.unknown_command_ids += 1,
            Ok(ResponseEffect::Repeat) => {}
            Ok(ResponseEffect::First) => self.events.push_back(CpEvent::CommandResponded {
                edge_id,
                session_id,
                command_id: resp.command_id,
                accepted: resp.accepted,
                reject_reason: iop_proto::CommandRejectReason::try_from(resp.reject_reason)
                    .unwrap_or(iop_proto::CommandRejectReason::Unspecified),
                message: resp.message,
            }),
        }
    }

    fn on_command_event(&mut self, conn: ConnectionId, ev: EdgeCommandEvent) {
        let Some((edge_id, session_id, slot)) = self.session_ids(conn) else {
            return;
        };
        let retention = self.config.finished_command_retention;
        let effect = match self.edges.live_at(slot, conn) {
            Some(entry) => entry.commands.on_event(&ev, retention),
            None => Ok(EventEffect::Unknown),
        };
        match effect {
            Err(v) => self.protocol_error(conn, v),
            Ok(EventEffect::Unknown) => self.stats.unknown_command_ids += 1,
            Ok(EventEffect::Duplicate) => self.stats.duplicate_command_events += 1,
            Ok(EventEffect::New) => self.events.push_back(CpEvent::CommandEvent {
                edge_id,
                session_id,
                event: ev,
            }),
        }
    }

    /// PROTOCOL.md §4.5: sequence from 1 per session, first is `EDGE_READY`; a gap (or a
    /// missing `EDGE_READY`) is a resync point, not an error; going backwards is.
    fn on_node_event(&mut self, now: Instant, conn: ConnectionId, ev: EdgeNodeEvent) {
        let Some(session) = self.conns.get_mut(&conn).and_then(|c| c.session_mut()) else {
            return;
        };
        if ev.edge_id != session.edge_id {
            return self.protocol_error(conn, ProtocolViolation::NodeEventEdgeIdMismatch);
        }
        let last = session.last_event_seq;
        if ev.sequence <= last {
            return self.protocol_error(
                conn,
                ProtocolViolation::NodeEventSequence {
                    last,
                    got: ev.sequence,
                },
            );
        }
        session.last_event_seq = ev.sequence;
        let (edge_id, session_id) = (session.edge_id.clone(), session.session_id);
        let cause = if ev.sequence > last + 1 {
            self.stats.event_gaps += 1;
            Some(ResyncCause::EventGap {
                expected: last + 1,
                got: ev.sequence,
            })
        } else if last == 0 && ev.kind != NodeEventKind::EdgeReady as i32 {
            Some(ResyncCause::MissingEdgeReady)
        } else {
            None
        };
        if let Some(cause) = cause {
            self.resync(now, conn, cause);
        }
        self.events.push_back(CpEvent::NodeEvent {
            edge_id,
            session_id,
            event: ev,
        });
    }
}

//! A hello's checks that span connections (PROTOCOL.md §4.1.2 steps 4–6: enrolment, the
//! peer's identity, draining, the ownership claim), acceptance — the Edge's view, its
//! resync point, the commands its new session carries over — and supersession of the
//! Edge's older session (§5.3).

use iop_proto::{EdgeHelloRequest, HelloRejectReason};

use crate::limits::INSTANCE_ID_KEY;
use crate::time::Instant;

use super::ControlPlane;
use crate::cp::directory::Claim;
use crate::cp::enrolment::CredentialHash;
use crate::cp::ids::ConnectionId;
use crate::cp::session::{Acceptance, Rejection};
use crate::cp::{CloseReason, CpEvent, ResyncCause};
use crate::outbound::OutboundError;

use super::claim::PendingHello;

impl ControlPlane {
    /// Answers the hello on `conn` with `rejection`, then closes.
    pub(super) fn reject_hello(&mut self, now: Instant, conn: ConnectionId, rejection: Rejection) {
        self.stats.hello_rejections += 1;
        let reason = CloseReason::HelloRejected(rejection.reason);
        let queued = self
            .conns
            .get_mut(&conn)
            .map(|s| s.refuse(&rejection, &self.config, &mut self.io));
        match queued {
            Some(Err(OutboundError::Full { .. })) => self.close(now, conn, CloseReason::SlowPeer),
            _ => self.close(now, conn, reason),
        }
    }

    /// PROTOCOL.md §4.1.2 steps 4–6 for a hello that passed steps 1–3 (the session's
    /// own), then acceptance.
    pub(super) fn on_hello(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        hello: EdgeHelloRequest,
        version: u32,
    ) {
        let credential = CredentialHash::of(&hello.credential);
        if let Err(reason) = self.policy.check(&hello.edge_id, &credential) {
            let message = match reason {
                HelloRejectReason::UnknownEdge => "edge is not enrolled",
                _ => "credential does not match",
            };
            return self.reject_hello(now, conn, Rejection::new(reason, message));
        }
        let peer = self.conns.get_mut(&conn).and_then(|s| s.take_peer());
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
                return self.reject_hello(now, conn, r);
            }
        }
        if self.draining {
            let mut r = Rejection::new(HelloRejectReason::Draining, "control plane is draining");
            r.retry_after = self.config.retry_after_draining;
            return self.reject_hello(now, conn, r);
        }
        // Step 6: the ownership claim, put to the directory.
        let entry = self.edges.get(&hello.edge_id);
        let claim = Claim {
            conn,
            edge_id: hello.edge_id.clone(),
            policy: self.config.duplicate_policy,
            local_session_id: entry
                .and_then(|e| e.live())
                .and_then(|c| self.conns.get(&c)?.session_id()),
            last_session_id: entry.map_or(0, |e| e.session_id()),
        };
        let pending = PendingHello {
            claim: claim.clone(),
            hello,
            credential,
            version,
            adopted: Vec::new(),
        };
        self.hellos_checked += 1;
        match self.directory.claim(&claim) {
            Some(answer) => {
                // A stale grant ends the hello `OVERLOADED` (its `Closed` event says
                // so); with no caller to return the error to, it goes no further.
                let _ = self.answer_claim(now, conn, pending, answer);
            }
            None => {
                if let Some(s) = self.conns.get_mut(&conn) {
                    s.claim();
                    self.claims.insert(conn, pending);
                }
                self.events.push_back(CpEvent::OwnershipClaim(claim));
            }
        }
    }

    /// Refuses the hello on `conn` `DUPLICATE_EDGE`: its Edge has a live owner.
    pub(super) fn reject_duplicate(&mut self, now: Instant, conn: ConnectionId) {
        let mut r = Rejection::new(
            HelloRejectReason::DuplicateEdge,
            "edge already has a live session",
        );
        r.retry_after = self.config.retry_after_duplicate;
        self.reject_hello(now, conn, r);
    }

    /// Accepts the hello on `conn` as session `session_id`; `old` is the Edge's live
    /// session here, superseded by it.
    pub(super) fn accept_hello(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        pending: PendingHello,
        old: Option<ConnectionId>,
        session_id: u64,
    ) {
        let PendingHello {
            claim: _,
            mut hello,
            credential,
            version,
            adopted,
        } = pending;
        let instance_id = hello.metadata.get(INSTANCE_ID_KEY).cloned();
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        if s.awaits_hello() {
            self.pending_hellos -= 1;
        }
        let load_update_interval = self
            .config
            .load_update_interval
            .filter(|_| hello.load_updates);
        let acceptance = Acceptance {
            edge_id: hello.edge_id.clone(),
            session_id,
            credential,
            instance_id: instance_id.clone(),
            version,
            load_interval: load_update_interval,
        };
        if let Err(OutboundError::Full { .. }) =
            s.accept(now, acceptance, &self.config, &mut self.io)
        {
            return self.close(now, conn, CloseReason::SlowPeer);
        }
        self.stats.sessions_accepted += 1;

        let old_session_id = self.register_session(now, conn, session_id, &mut hello);
        self.events.push_back(CpEvent::SessionAccepted {
            conn,
            edge_id: hello.edge_id.clone(),
            session_id,
            superseded_session_id: old.map(|_| old_session_id),
            load_update_interval,
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
            // The old session's close no longer finds it live: its unanswered
            // requests count here, before the new session re-sends them.
            self.unanswered_on(&hello.edge_id, old_session_id);
        }
        self.drop_load_build(&hello.edge_id);
        self.resync(now, conn, ResyncCause::NewSession);
        self.arm_refresh(now, conn);

        if !adopted.is_empty() {
            self.join_adopted(&hello.edge_id, adopted);
        }
        self.carry_over_commands(now, conn, &hello.edge_id, &hello.inflight_command_ids);
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
        if let Some(session) = self.conns.get_mut(&conn).and_then(|s| s.established_mut()) {
            session.registered(slot);
        }
        self.edges.connected(slot);
        let Some(entry) = self.edges.at_mut(slot) else {
            return 0;
        };
        entry.accepted(conn, session_id, hello, unix_ms)
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
            .and_then(|s| s.established())
            .and_then(|s| s.instance_id().map(str::to_owned));
        self.stats.supersessions += 1;
        let (total, flapping) = match self.edges.get_mut(edge_id) {
            Some(entry) => {
                let (window, threshold) = (self.config.flap_window, self.config.flap_threshold);
                let flapping = entry.superseded(now, window, threshold);
                (entry.supersessions(), flapping)
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
            elsewhere: false,
        });
        self.close(
            now,
            old_conn,
            CloseReason::Superseded {
                by_session_id: new_session_id,
            },
        );
    }
}

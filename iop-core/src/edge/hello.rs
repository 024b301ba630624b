//! The Edge's hello (PROTOCOL.md §4.1): what it lists (every command it holds, its
//! operations, metadata and instance id), the Control Plane's answer — accepted, with
//! the negotiated heartbeat interval and frame limit, or refused with a reason and
//! `retry_after` — and the hello timeout.

use std::time::Duration;

use iop_proto::{
    DEFAULT_MAX_FRAME_LEN, EdgeHelloRequest, EdgeHelloResponse, Envelope, GoAwayReason,
    HelloRejectReason, NodeEventKind, PROTOCOL_VERSION,
};

use super::config::INSTANCE_ID_KEY;
use super::event::{CloseReason, EdgeEvent, ProtocolViolation};
use super::link::{Accepted, Conn, Edge, Timer};
use super::registry_seam::EdgeRegistry;
use crate::Instant;
use crate::limits::{MIN_PEER_MAX_FRAME_LEN, negotiated_heartbeat_interval};

impl<R: EdgeRegistry> Edge<R> {
    /// Ends a hello the Control Plane did not answer in time; true if it did.
    pub(super) fn hello_timed_out(&mut self, now: Instant) -> bool {
        if !self.timers.is_expired(Timer::Hello, now) {
            return false;
        }
        self.close(
            now,
            CloseReason::HelloTimeout,
            Some((GoAwayReason::HelloTimeout, "no hello response in time")),
        );
        true
    }

    /// Queues the hello on a transport just up and waits for its answer.
    pub(super) fn send_hello(&mut self, now: Instant) {
        let hello = self.build_hello();
        self.hello_listed = hello.inflight_command_ids.iter().cloned().collect();
        self.conn = Conn::AwaitingHello;
        self.timers
            .set(Timer::Hello, now + self.config.hello_timeout);
        self.stats.hellos_sent += 1;
        self.send(now, Envelope::new(hello));
    }

    /// The hello: every command the Edge holds is listed (PROTOCOL.md §4.4). The config was
    /// checked so that the largest such hello fits the pre-hello frame limit.
    fn build_hello(&self) -> EdgeHelloRequest {
        let mut metadata = self.config.metadata.clone();
        metadata.insert(INSTANCE_ID_KEY.to_owned(), self.instance_id.clone());
        EdgeHelloRequest {
            edge_id: self.config.edge_id.clone(),
            protocol_version: PROTOCOL_VERSION,
            software_version: self.config.software_version.clone(),
            operations: self.config.operations.keys().cloned().collect(),
            metadata,
            credential: self.config.credential.expose().to_vec(),
            inflight_command_ids: self.commands.held_ids(),
            load_updates: self.offers_load(),
        }
    }

    pub(super) fn handle_hello_response(&mut self, now: Instant, response: EdgeHelloResponse) {
        if !response.accepted {
            let reason = HelloRejectReason::try_from(response.reject_reason)
                .unwrap_or(HelloRejectReason::Unspecified);
            let retry_after = Duration::from_millis(u64::from(response.retry_after_ms));
            self.note_retry_after(now, retry_after);
            self.events.push_back(EdgeEvent::HelloRejected {
                reason,
                message: response.message,
                retry_after,
            });
            self.close(now, CloseReason::HelloRejected(reason), None);
            return;
        }
        // 0 is read as "the version we offered", for lenient peers.
        if response.protocol_version > PROTOCOL_VERSION {
            self.protocol_error(
                now,
                ProtocolViolation::ProtocolVersion(response.protocol_version),
            );
            return;
        }
        let interval = negotiated_heartbeat_interval(response.heartbeat_interval_ms);
        let max_frame_len = match response.max_frame_len {
            0 => DEFAULT_MAX_FRAME_LEN,
            n => n,
        };
        // Under a tiny limit every frame of the session would be dropped (found by the
        // `edge_session_bytes` fuzz target and the hostile-CP tests: a limit of 1 byte
        // left an accepted, mute session). The GoAway still goes out under the
        // pre-hello limit.
        if max_frame_len < MIN_PEER_MAX_FRAME_LEN {
            self.protocol_error(now, ProtocolViolation::FrameLimitTooSmall(max_frame_len));
            return;
        }
        self.activate(now, interval, max_frame_len);
        self.negotiate_load(now, response.load_update_interval_ms);
        self.events.push_back(EdgeEvent::Connected {
            session_id: response.session_id,
            heartbeat_interval: interval,
            max_frame_len,
        });
        // Transitions from before this session are not replayed; EDGE_READY comes first.
        self.send_edge_event(now, NodeEventKind::EdgeReady, "session accepted");
        if self.draining {
            self.send_edge_event(now, NodeEventKind::EdgeDraining, "edge is draining");
        }
        // Only commands the hello listed: the CP accepts replayed events before a
        // response only for those.
        let listed = std::mem::take(&mut self.hello_listed);
        for event in self.commands.latest_events(&listed) {
            self.send_command_event(now, event);
        }
    }

    /// Moves the session to `Active` after an accepted hello.
    pub(crate) fn activate(&mut self, now: Instant, interval: Duration, max_frame_len: u32) {
        self.outbound.set_max_frame_len(max_frame_len);
        self.peer_max_frame_len = max_frame_len;
        self.retry_not_before = None;
        self.conn = Conn::Active(Accepted {
            interval,
            accepted_at: now,
            heartbeat_seq: 0,
            node_event_seq: 0,
        });
        self.timers.stop(Timer::Hello);
        self.start_liveness(now, interval);
        self.stats.sessions_accepted += 1;
    }
}

//! Frames from the CP: hello answer, GoAway, status requests, command requests.

use std::time::Duration;

use iop_proto::limits::send;
use iop_proto::{
    Body, CommandRejectReason, DEFAULT_MAX_FRAME_LEN, DecodeLimits, EdgeCommandRequest,
    EdgeCommandResponse, EdgeHelloResponse, EdgeStatusRequest, Envelope, GoAway, GoAwayReason,
    HelloRejectReason, NodeEventKind, PROTOCOL_VERSION,
};

use super::commands::Known;
use super::event::{CloseReason, EdgeEvent, ProtocolViolation};
use super::registry_seam::EdgeRegistry;
use super::session::{Conn, Edge};
use crate::Instant;
use crate::limits::{MAX_COMMAND_ID_LEN, MIN_PEER_MAX_FRAME_LEN, negotiated_heartbeat_interval};
use crate::registry::{
    ResolveError, STATUS_ENVELOPE_OVERHEAD, Selector, Target, TargetError, TargetLevel,
};

/// Tries at writing a status response within the CP's decoded-size budget.
const STATUS_FIT_TRIES: usize = 6;

/// What one try at writing a status response came to.
enum Fit {
    Fits,
    /// The CP's decoder would find it too large to decode: try this byte budget.
    TooHeavy(usize),
    /// The registry wrote more than its budget, or what the limits refuse.
    Overshot,
}

impl<R: EdgeRegistry> Edge<R> {
    pub(crate) fn handle_envelope(&mut self, now: Instant, envelope: Envelope) {
        let awaiting = matches!(self.conn, Conn::AwaitingHello);
        let correlation_id = envelope.correlation_id;
        match envelope.body {
            Some(Body::GoAway(go_away)) => self.handle_go_away(now, go_away),
            Some(Body::HelloResponse(response)) if awaiting => {
                self.handle_hello_response(now, response)
            }
            None if awaiting => self.protocol_error(now, ProtocolViolation::EmptyBeforeHello),
            None => self.stats.ignored_frames += 1,
            Some(body) if awaiting => {
                self.protocol_error(now, ProtocolViolation::Unexpected(body.kind()))
            }
            Some(Body::HeartbeatAck(_)) => {}
            Some(Body::StatusRequest(request)) => {
                self.handle_status_request(now, correlation_id, request)
            }
            Some(Body::CommandRequest(request)) => self.handle_command_request(now, request),
            Some(body) => self.protocol_error(now, ProtocolViolation::Unexpected(body.kind())),
        }
    }

    fn handle_go_away(&mut self, now: Instant, go_away: GoAway) {
        let reason = GoAwayReason::try_from(go_away.reason).unwrap_or(GoAwayReason::Unspecified);
        let retry_after = Duration::from_millis(u64::from(go_away.retry_after_ms));
        self.note_retry_after(now, retry_after);
        if reason == GoAwayReason::Superseded {
            self.events.push_back(EdgeEvent::Superseded {
                message: go_away.message.clone(),
                retry_after,
            });
        }
        self.close(
            now,
            CloseReason::GoAway {
                reason,
                message: go_away.message,
            },
            None,
        );
    }

    fn note_retry_after(&mut self, now: Instant, retry_after: Duration) {
        if retry_after > Duration::ZERO {
            let until = now + retry_after;
            self.retry_not_before = Some(self.retry_not_before.map_or(until, |t| t.max(until)));
        }
    }

    fn handle_hello_response(&mut self, now: Instant, response: EdgeHelloResponse) {
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

    fn handle_status_request(
        &mut self,
        now: Instant,
        correlation_id: u64,
        request: EdgeStatusRequest,
    ) {
        // Everything the registry reported before this request goes out first:
        // `handle_bytes` relayed it before decoding, and decoding changes nothing in
        // the registry.
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let max = self.outbound.max_frame_len() as usize;
        let mut budget = max.saturating_sub(STATUS_ENVELOPE_OVERHEAD);
        // The envelope before its body: `correlation_id` (skipped when 0), then the
        // key of `status_response`; the response's bytes follow, written in place.
        let mut head = [0u8; 12];
        let head = iop_proto::encoding::status_response_head(correlation_id, &mut head);
        let (registry, edge_id) = (&self.registry, self.config.edge_id.as_str());
        let node_ids = request.node_ids.as_slice();
        let checked = registry.encodes_within_limits();
        // The CP's decoder also bounds the heap a frame decodes to (PROTOCOL.md §7). A
        // registry that does not keep to the limits by construction has its bytes
        // checked with the decoder's own walk before they are queued, and a response
        // over the budget is written again with fewer nodes (each try cuts the byte
        // budget in proportion to the overshoot).
        for _ in 0..STATUS_FIT_TRIES {
            let mut verdict = Fit::Fits;
            let queued = self.outbound.push_with(head, |out| {
                let start = out.len();
                registry.encode_snapshot(edge_id, node_ids, unix_ms, budget, out);
                let body = out.get(start..).unwrap_or_default();
                verdict = if body.len() > budget {
                    Fit::Overshot
                } else if checked {
                    Fit::Fits
                } else {
                    match send::status_response_heap(body) {
                        Ok(heap) if heap <= DecodeLimits::SPEC.decoded_budget(body.len()) => {
                            Fit::Fits
                        }
                        // Nine tenths of the bytes that would fit at this heap per byte.
                        Ok(heap) => {
                            let allowed = DecodeLimits::SPEC.decoded_budget(body.len()) as u128;
                            let fits = body.len() as u128 * allowed / heap as u128;
                            Fit::TooHeavy((fits * 9 / 10) as usize)
                        }
                        Err(_) => Fit::Overshot,
                    }
                };
                matches!(verdict, Fit::Fits)
            });
            match verdict {
                Fit::Fits => {
                    self.sent(now, queued.map(|_| ()));
                    return;
                }
                Fit::TooHeavy(smaller) => {
                    self.stats.statuses_reduced += 1;
                    budget = smaller;
                }
                Fit::Overshot => break,
            }
        }
        // The registry wrote what the limits cannot carry: send no nodes rather than
        // nothing. Rare, so built as a message.
        let mut response = registry.snapshot(edge_id, node_ids, unix_ms, 0);
        edge_id.clone_into(&mut response.edge_id);
        response.observed_at_unix_ms = unix_ms;
        response.nodes.clear();
        response.truncated = true;
        self.stats.unsendable_frames += 1;
        self.send(now, Envelope::correlated(correlation_id, response));
    }

    fn reject_command(
        &mut self,
        now: Instant,
        command_id: String,
        reason: CommandRejectReason,
        message: impl Into<String>,
    ) {
        // The message may quote what the CP sent (a selector): held to the cap.
        let mut message = message.into();
        send::truncate_text(&mut message, iop_proto::limits::MAX_TEXT_LEN);
        let response = EdgeCommandResponse {
            command_id,
            accepted: false,
            reject_reason: reason as i32,
            message,
        };
        self.send(now, Envelope::new(response));
    }

    fn handle_command_request(&mut self, now: Instant, request: EdgeCommandRequest) {
        self.commands.evict(now);
        let id = request.command_id.clone();
        if id.is_empty() || id.len() > MAX_COMMAND_ID_LEN {
            // Echo no more than a peer's decoder accepts (cut at a char boundary).
            let mut echo = id;
            let mut cut = MAX_COMMAND_ID_LEN.min(echo.len());
            while !echo.is_char_boundary(cut) {
                cut -= 1;
            }
            echo.truncate(cut);
            let message = "command_id must be 1-128 bytes";
            return self.reject_command(now, echo, CommandRejectReason::InvalidCommand, message);
        }
        match self.commands.known(&request) {
            Known::Same(response, latest) => {
                let (response, latest) = (response.clone(), latest.clone());
                if self.send(now, Envelope::new(response)) {
                    self.send(now, Envelope::new(latest));
                }
                return;
            }
            Known::Conflict => {
                let message = "command_id already used for a different request";
                return self.reject_command(now, id, CommandRejectReason::InvalidCommand, message);
            }
            Known::New => {}
        }
        if self.draining {
            return self.reject_command(now, id, CommandRejectReason::Draining, "edge is draining");
        }
        let Some(level) = self.config.operations.get(&request.operation).copied() else {
            let message = format!(
                "operation {:?} is not offered by this edge",
                request.operation
            );
            return self.reject_command(now, id, CommandRejectReason::UnknownOperation, message);
        };
        let target = match self.resolve_target(&request.target_selector, level) {
            Ok(target) => target,
            Err(err) => {
                // The selector is echoed: the operator sees what the Edge was given.
                let message = format!("selector {:?}: {err}", request.target_selector);
                return self.reject_command(now, id, err.reject_reason(), message);
            }
        };
        if self.commands.running() >= self.config.max_inflight_commands {
            let message = "too many commands in flight";
            return self.reject_command(now, id, CommandRejectReason::Busy, message);
        }
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let operation = request.operation.clone();
        let metadata = request.metadata.clone();
        let deadline = now + self.command_timeout(request.timeout_ms);
        let (response, accepted) = self.commands.accept(now, unix_ms, request);
        if self.send(now, Envelope::new(response)) {
            self.send(now, Envelope::new(accepted));
        }
        self.events.push_back(EdgeEvent::CommandReceived {
            command_id: id,
            operation,
            target,
            metadata,
            deadline,
        });
    }

    /// Parses `selector`, checks it against the operation's level (an edge-level
    /// operation takes empty or `*`), and resolves it against the registry.
    fn resolve_target(&self, selector: &str, level: TargetLevel) -> Result<Target, TargetError> {
        let parsed = Selector::parse(selector)?;
        match (level, &parsed) {
            (TargetLevel::Edge, Selector::Edge | Selector::All) => Ok(Target::Edge),
            (TargetLevel::Edge, _) | (TargetLevel::Node, Selector::Edge) => {
                Err(TargetError::WrongLevel { level })
            }
            (TargetLevel::Node, _) => self
                .registry
                .resolve(&parsed)
                .map_err(|ResolveError::NoMatchingTarget| TargetError::NoMatchingTarget),
        }
    }

    fn command_timeout(&self, timeout_ms: u32) -> Duration {
        match timeout_ms {
            0 => self.config.default_command_timeout,
            ms => Duration::from_millis(u64::from(ms)),
        }
    }
}

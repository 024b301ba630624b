//! The hello of one connection (PROTOCOL.md §4.1): the first frame, the checks that
//! depend only on the hello itself (§4.1.2 steps 1–3), the hello response, and the
//! session an accepted hello opens. Enrolment, the peer's identity, draining and the
//! ownership claim (steps 4–6) span connections: they are the control plane's.

use iop_proto::limits::send;
use iop_proto::{Body, BodyKind, EdgeHelloRequest, EdgeHelloResponse, Envelope, HelloRejectReason};

use crate::cp::ProtocolViolation;
use crate::cp::config::{CpConfig, ms_u32};
use crate::cp::edges::EdgeSlot;
use crate::ids::validate_id;
use crate::outbound::OutboundError;
use crate::time::Instant;

use super::event::{Acceptance, FromSession, Rejection};
use super::timer::Timer;
use super::{Established, Io, LoadIntake, Session, Stage, protocol_error};

impl Session {
    /// The first frame must be the hello.
    pub(super) fn first_frame(&mut self, config: &CpConfig, envelope: Envelope) -> FromSession {
        let hello = match envelope.body {
            Some(Body::HelloRequest(hello)) => hello,
            body => {
                let kind = body.as_ref().map_or(BodyKind::Empty, Body::kind);
                return protocol_error(ProtocolViolation::BeforeHello(kind));
            }
        };
        match check_hello(config, &hello) {
            Ok(version) => FromSession::Hello {
                hello: Box::new(hello),
                version,
            },
            Err(rejection) => FromSession::HelloRefused(rejection),
        }
    }

    /// The hello waits for the answer to its ownership claim: until then any other
    /// frame is a protocol error.
    pub(crate) fn claim(&mut self) {
        if matches!(self.stage, Stage::AwaitingHello) {
            self.stage = Stage::Claiming;
        }
    }

    /// The claim was answered: the connection awaits its hello again until the control
    /// plane accepts or refuses it. False when no claim was waiting.
    pub(crate) fn unclaim(&mut self) -> bool {
        let claiming = matches!(self.stage, Stage::Claiming);
        if claiming {
            self.stage = Stage::AwaitingHello;
        }
        claiming
    }

    /// Opens the session the control plane accepted and answers the hello.
    pub(crate) fn accept(
        &mut self,
        now: Instant,
        acceptance: Acceptance,
        config: &CpConfig,
        io: &mut Io,
    ) -> Result<(), OutboundError> {
        let interval = config.negotiated_heartbeat_interval();
        let unreachable_after = interval * config.unreachable_intervals;
        let liveness_after = interval * config.liveness_intervals;
        self.decoder.set_max_frame_len(config.max_frame_len);
        self.timers.stop(Timer::Hello);
        self.timers.set(Timer::Unreachable, now + unreachable_after);
        self.timers.set(Timer::Liveness, now + liveness_after);
        let session_id = acceptance.session_id;
        self.stage = Stage::Established(Box::new(Established {
            edge_id: acceptance.edge_id,
            edge: EdgeSlot::NONE,
            session_id,
            credential: acceptance.credential,
            instance_id: acceptance.instance_id,
            unreachable_after,
            liveness_after,
            unreachable: false,
            status: Default::default(),
            last_event_seq: 0,
            fresh_floor: 0,
            load: acceptance
                .load_interval
                .map(|i| Box::new(LoadIntake::new(i, liveness_after))),
        }));
        let mut response = hello_response(config, None);
        response.protocol_version = acceptance.version;
        response.heartbeat_interval_ms = ms_u32(interval);
        response.session_id = session_id;
        response.load_update_interval_ms = acceptance.load_interval.map_or(0, ms_u32);
        self.queue(&Envelope::new(response), io)
    }

    /// Answers the hello with `rejection` (the control plane then closes).
    pub(crate) fn refuse(
        &mut self,
        rejection: &Rejection,
        config: &CpConfig,
        io: &mut Io,
    ) -> Result<(), OutboundError> {
        let response = hello_response(config, Some(rejection));
        self.queue(&Envelope::new(response), io)
    }
}

/// The hello response: the limits this Control Plane decodes under, and the rejection
/// if there is one.
fn hello_response(config: &CpConfig, rejection: Option<&Rejection>) -> EdgeHelloResponse {
    EdgeHelloResponse {
        accepted: rejection.is_none(),
        reject_reason: rejection.map_or(HelloRejectReason::Unspecified, |r| r.reason) as i32,
        message: rejection.map(|r| r.message.clone()).unwrap_or_default(),
        protocol_version: 0,
        heartbeat_interval_ms: 0,
        session_id: 0,
        retry_after_ms: rejection.map_or(0, |r| ms_u32(r.retry_after)),
        max_frame_len: config.max_frame_len,
        min_protocol_version: config.min_protocol_version,
        max_protocol_version: config.max_protocol_version,
        load_update_interval_ms: 0,
    }
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::new(HelloRejectReason::InvalidHello, message)
}

/// Steps 1–3: empty id, then grammar and limits, then the version range. Returns the
/// negotiated protocol version.
fn check_hello(config: &CpConfig, hello: &EdgeHelloRequest) -> Result<u32, Rejection> {
    if hello.edge_id.trim().is_empty() {
        return Err(Rejection::new(
            HelloRejectReason::EmptyEdgeId,
            "edge_id is empty",
        ));
    }
    validate_id("edge_id", &hello.edge_id).map_err(|e| invalid(e.to_string()))?;
    if hello.protocol_version == 0 {
        return Err(invalid("protocol_version is 0"));
    }
    // The hello's own caps (PROTOCOL.md §7), the same check the Edge makes before sending.
    send::hello_request(hello).map_err(|e| invalid(e.to_string()))?;
    if hello.operations.iter().any(String::is_empty) {
        return Err(invalid("an operation name is empty"));
    }
    if hello.metadata.keys().any(String::is_empty) {
        return Err(invalid("a metadata key is empty"));
    }
    if hello.inflight_command_ids.iter().any(String::is_empty) {
        return Err(invalid("an inflight command id is empty"));
    }
    let negotiated = hello.protocol_version.min(config.max_protocol_version);
    if negotiated < config.min_protocol_version {
        return Err(Rejection::new(
            HelloRejectReason::UnsupportedProtocolVersion,
            format!(
                "protocol version {} is not in {}..={}",
                hello.protocol_version, config.min_protocol_version, config.max_protocol_version
            ),
        ));
    }
    Ok(negotiated)
}

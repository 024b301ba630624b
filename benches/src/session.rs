//! One Control Plane session driven in memory, following the core's driving contract
//! (after every input, pull every output), and the operations the instruction-count
//! bench measures on it.

use std::time::Duration;

use iop_core::Instant;
use iop_core::cp::{CommandSpec, ConnectionId, ControlPlane, CpConfig, CpEvent, EnrolmentPolicy};
use iop_core::proto::{
    self, CommandPhase, EdgeCommandEvent, EdgeCommandResponse, EdgeHelloRequest, EdgeNodeEvent,
    EdgeStatusResponse, Envelope, Heartbeat, Message, NodeEventKind,
};

use crate::fixtures::{EDGE_ID, NOW_UNIX_MS};

/// Operations the fake Edge advertises.
pub const OPERATIONS: [&str; 2] = ["edge.ping", "node.drain"];

/// Encodes `envelope` as one frame (length prefix included).
///
/// Panics only for an envelope that encodes to nothing, which no fixture is.
pub fn frame(envelope: &Envelope) -> Vec<u8> {
    let mut wire = Vec::with_capacity(proto::LENGTH_PREFIX_LEN + envelope.encoded_len());
    proto::encode_frame(envelope, u32::MAX, &mut wire).expect("fixture envelopes are not empty");
    wire
}

/// The heartbeat frame of sequence `sequence`.
pub fn heartbeat_frame(sequence: u64) -> Vec<u8> {
    frame(&Envelope::new(Heartbeat {
        sequence,
        sent_at_unix_ms: NOW_UNIX_MS + sequence * 5_000,
    }))
}

/// What the Edge sends back for one accepted `edge.ping` command: the response, then
/// events ACCEPTED, RUNNING and SUCCEEDED (sequences 1 to 3), one frame each.
pub fn command_envelopes(command_id: &str) -> Vec<Envelope> {
    let event = |sequence: u32, phase: CommandPhase, message: &str| {
        Envelope::new(EdgeCommandEvent {
            command_id: command_id.to_owned(),
            phase: phase as i32,
            sequence,
            message: message.to_owned(),
            detail: Default::default(),
            occurred_at_unix_ms: NOW_UNIX_MS + u64::from(sequence),
        })
    };
    vec![
        Envelope::new(EdgeCommandResponse {
            command_id: command_id.to_owned(),
            accepted: true,
            reject_reason: 0,
            message: String::new(),
        }),
        event(1, CommandPhase::Accepted, ""),
        event(2, CommandPhase::Running, "pinging"),
        event(3, CommandPhase::Succeeded, "pong"),
    ]
}

/// The command the bench sends: an edge-level `edge.ping`.
pub fn ping_spec() -> CommandSpec {
    CommandSpec::new("edge.ping").with_timeout_ms(5_000)
}

/// A Control Plane with one enrolled, idle, fresh session on one connection.
#[derive(Debug)]
pub struct CpSession {
    cp: ControlPlane,
    conn: ConnectionId,
    now: Instant,
    out: Vec<u8>,
    last_correlation_id: u64,
}

impl CpSession {
    /// Connects one Edge and brings its session to idle: hello accepted, the automatic
    /// status request answered (the view is fresh), `EDGE_READY` received, one
    /// heartbeat acked; every output pulled.
    ///
    /// Panics if the core does not accept that exchange (a bug the tests would show).
    pub fn enrolled() -> Self {
        Self::enrolled_among(0)
    }

    /// [`enrolled`](Self::enrolled), on a Control Plane that first enrolled `others`
    /// other Edges (`edge-fleet-00000`, ...), each on its own connection: the
    /// measured session's lookups then search a fleet-sized table.
    pub fn enrolled_among(others: u64) -> Self {
        let mut config = CpConfig::default();
        config.max_connections = config.max_connections.max(
            usize::try_from(others)
                .unwrap_or(usize::MAX)
                .saturating_add(1),
        );
        let mut cp =
            ControlPlane::new(config, EnrolmentPolicy::AcceptAny).expect("default config is valid");
        let now = Instant::from_millis(1_000);
        let mut sink = Vec::new();
        for i in 0..others {
            let conn = ConnectionId(1_000_000 + i);
            cp.handle_connect(now, conn).expect("a fresh connection id");
            for wire in enrolment_frames(&format!("edge-fleet-{i:05}"), i + 2) {
                cp.handle_bytes(now, conn, &wire);
                let _ =
                    iop_core::drain_transmits(&mut sink, usize::MAX, |b| cp.poll_transmit(conn, b));
                sink.clear();
            }
            while cp.poll_wakeup().is_some() {}
            while cp.poll_event().is_some() {}
        }
        let conn = ConnectionId(1);
        cp.handle_connect(now, conn).expect("first connection");
        let mut s = Self {
            cp,
            conn,
            now,
            out: Vec::with_capacity(64 * 1024),
            last_correlation_id: 0,
        };
        for wire in enrolment_frames(EDGE_ID, 1) {
            s.input(&wire);
        }
        // The resync status request (correlation id 1) was answered above.
        s.last_correlation_id = 1;
        while s.cp.poll_event().is_some() {}
        assert!(
            s.cp.edge(EDGE_ID).is_some_and(|v| v.fresh),
            "the session is enrolled and fresh"
        );
        s
    }

    /// The Control Plane.
    pub fn control_plane(&self) -> &ControlPlane {
        &self.cp
    }

    /// Bytes the last operation sent to the Edge.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// The correlation id the next status request will carry.
    pub fn next_correlation_id(&self) -> u64 {
        self.last_correlation_id + 1
    }

    fn input(&mut self, bytes: &[u8]) {
        self.cp.handle_bytes(self.now, self.conn, bytes);
        self.pull();
    }

    /// Pulls every transmit and wakeup (the events are left to the caller).
    fn pull(&mut self) {
        let _ = iop_core::drain_transmits(&mut self.out, usize::MAX, |b| {
            self.cp.poll_transmit(self.conn, b)
        });
        while self.cp.poll_wakeup().is_some() {}
    }

    /// One heartbeat, one interval after the previous input: `frame` in, the ack out.
    /// Returns the bytes sent.
    pub fn heartbeat(&mut self, frame: &[u8]) -> usize {
        self.now = self.now + Duration::from_secs(5);
        self.out.clear();
        self.input(frame);
        while self.cp.poll_event().is_some() {}
        self.out.len()
    }

    /// One status exchange: the application asks for a full status (the request is
    /// encoded out), the response `frame` comes in, the `StatusReceived` event goes out
    /// to the caller (after the Edge's view of its load, `LoadView`, which is pulled
    /// too). `frame` must carry [`next_correlation_id`](Self::next_correlation_id).
    pub fn status_exchange(&mut self, frame: &[u8]) -> Option<CpEvent> {
        self.now = self.now + Duration::from_millis(1);
        self.out.clear();
        let request = self.cp.request_status(self.now, EDGE_ID, Vec::new()).ok()?;
        self.last_correlation_id = request.correlation_id;
        self.pull();
        self.input(frame);
        let mut received = None;
        while let Some(event) = self.cp.poll_event() {
            if matches!(event, CpEvent::StatusReceived { .. }) {
                received = Some(event);
            }
        }
        received
    }

    /// One command's lifecycle: sent (encoded out), then the Edge's `frames` come in
    /// one read each (response, events); every event is pulled. Returns the events
    /// the application got.
    pub fn command_lifecycle(
        &mut self,
        spec: CommandSpec,
        command_id: String,
        frames: &[Vec<u8>],
    ) -> usize {
        self.now = self.now + Duration::from_millis(1);
        self.out.clear();
        if self
            .cp
            .send_command(self.now, EDGE_ID, spec.with_id(command_id))
            .is_err()
        {
            return 0;
        }
        self.pull();
        let mut events = 0;
        for wire in frames {
            self.input(wire);
            while let Some(event) = self.cp.poll_event() {
                drop(event);
                events += 1;
            }
        }
        events
    }
}

/// Everything edge `i` sends to become an idle, fresh, enrolled session whose status
/// request has correlation id 1: hello, status response, `EDGE_READY`, heartbeat.
pub fn enrolment_frames(edge_id: &str, instance: u64) -> Vec<Vec<u8>> {
    let mut hello = EdgeHelloRequest {
        edge_id: edge_id.to_owned(),
        protocol_version: proto::PROTOCOL_VERSION,
        software_version: "iop-edge/0.1.0".into(),
        operations: OPERATIONS.iter().map(|s| (*s).to_owned()).collect(),
        credential: b"enrolment-secret".to_vec(),
        ..Default::default()
    };
    hello.metadata.insert(
        iop_core::cp::INSTANCE_ID_KEY.into(),
        format!("{instance:016x}"),
    );
    [
        Envelope::new(hello),
        Envelope::correlated(
            1,
            EdgeStatusResponse {
                edge_id: edge_id.to_owned(),
                observed_at_unix_ms: NOW_UNIX_MS,
                registry_revision: 1,
                ..Default::default()
            },
        ),
        Envelope::new(EdgeNodeEvent {
            edge_id: edge_id.to_owned(),
            kind: NodeEventKind::EdgeReady as i32,
            sequence: 1,
            occurred_at_unix_ms: NOW_UNIX_MS,
            ..Default::default()
        }),
        Envelope::new(Heartbeat {
            sequence: 1,
            sent_at_unix_ms: NOW_UNIX_MS,
        }),
    ]
    .iter()
    .map(frame)
    .collect()
}

/// What this library's own codec does for one operation: decode (and drop) each
/// inbound body with the single-pass, limit-checking decoder the Control Plane uses
/// (`iop_proto::decode_envelope`, PROTOCOL.md §7 limits), and frame-encode each outbound
/// envelope. Returns the bytes encoded.
pub fn codec_share(inbound_bodies: &[&[u8]], outbound: &[Envelope], out: &mut Vec<u8>) -> usize {
    out.clear();
    let limits = proto::DecodeLimits::default();
    for body in inbound_bodies {
        if let Ok(envelope) = proto::decode_envelope(body, &limits) {
            drop(std::hint::black_box(envelope));
        }
    }
    for envelope in outbound {
        let _ = proto::encode_frame(envelope, u32::MAX, out);
    }
    out.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{registry, status_response_envelope};
    use iop_core::proto::{Body, FrameDecoder, HeartbeatAck};

    fn decode_all(bytes: &[u8]) -> Vec<Envelope> {
        let mut decoder = FrameDecoder::new(u32::MAX);
        let mut input = bytes;
        let mut frames = Vec::new();
        while let Some(e) = decoder.decode(&mut input).unwrap() {
            frames.push(e);
        }
        frames
    }

    #[test]
    fn a_heartbeat_is_acked() {
        let mut s = CpSession::enrolled();
        let n = s.heartbeat(&heartbeat_frame(2));
        assert!(n > 0);
        assert_eq!(
            decode_all(s.output()),
            vec![Envelope::new(HeartbeatAck { sequence: 2 })]
        );
    }

    #[test]
    fn a_status_exchange_sends_the_request_and_delivers_the_response() {
        let mut s = CpSession::enrolled();
        let reg = registry(10, 4);
        for _ in 0..3 {
            let id = s.next_correlation_id();
            let wire = frame(&status_response_envelope(&reg, id));
            let event = s.status_exchange(&wire);
            let sent = decode_all(s.output());
            assert_eq!(sent.len(), 1);
            assert_eq!(sent[0].correlation_id, id);
            assert!(matches!(sent[0].body, Some(Body::StatusRequest(_))));
            match event {
                Some(CpEvent::StatusReceived {
                    request, response, ..
                }) => {
                    assert_eq!(request.correlation_id, id);
                    assert_eq!(response.nodes.len(), 10);
                }
                other => panic!("expected StatusReceived, got {other:?}"),
            }
        }
        assert_eq!(s.control_plane().stats().protocol_errors, 0);
    }

    #[test]
    fn a_command_runs_to_success() {
        let mut s = CpSession::enrolled();
        for i in 0..3 {
            let id = format!("cmd-bench-{i}");
            let frames: Vec<Vec<u8>> = command_envelopes(&id).iter().map(frame).collect();
            let events = s.command_lifecycle(ping_spec(), id.clone(), &frames);
            // CommandResponded, then three CommandEvents.
            assert_eq!(events, 4);
            let state = s.control_plane().command(EDGE_ID, &id).expect("tracked");
            assert_eq!(state.phase, CommandPhase::Succeeded);
            assert!(state.outcome.is_some());
        }
        assert_eq!(s.control_plane().stats().protocol_errors, 0);
    }

    #[test]
    fn codec_share_decodes_and_frames() {
        let hb = heartbeat_frame(1);
        let mut out = Vec::new();
        let ack = Envelope::new(HeartbeatAck { sequence: 1 });
        let n = codec_share(&[&hb[4..]], std::slice::from_ref(&ack), &mut out);
        assert_eq!(n, 4 + ack.encoded_len());
        assert_eq!(decode_all(&out), vec![ack]);
    }
}

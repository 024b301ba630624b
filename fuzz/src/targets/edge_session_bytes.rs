//! `edge_session_bytes`: raw bytes, cut into fuzzer-chosen reads, into an [`Edge`]
//! right after `handle_connected`, or after an accepted hello response.
//!
//! Input: a [`Mode`] byte, a [`Splits`] header, then the CP's byte stream.
//!
//! Checked: no panic; every byte the Edge writes decodes as whole, valid frames under
//! the protocol's limits, of kinds an Edge may send: a hello first (within the 256 KiB
//! pre-hello cap) and once, nothing after a `GoAway`, node events numbered 1, 2, 3 …
//! per session starting with EDGE_READY (gaps allowed), a status response only for a
//! status request the Edge received (once each), a command response before any event
//! of that command; the connection ends with at most one `Closed` event (exactly one when the
//! transport closes), a protocol error is told to the CP with `GoAway{PROTOCOL_ERROR}`
//! and followed by `Transmit::Close`; an early `handle_timeout` does nothing; the same
//! input gives the same transcript, bit for bit.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use iop_core::Instant;
use iop_core::edge::{CloseReason, Edge, EdgeConfig, EdgeEvent, Outcome, TargetLevel, Transmit};
use iop_core::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};
use iop_proto::{
    Body, BodyKind, DEFAULT_MAX_FRAME_LEN, EdgeHelloResponse, Envelope, FrameDecoder, GoAwayReason,
    NodeEventKind, PRE_HELLO_MAX_FRAME_LEN, encode_frame,
};

use crate::frames::OutboundFrames;
use crate::session::{FrameLog, Mode, advance, go_away_reason, kind, read_delay};
use crate::split::Splits;

/// The Edge's id.
pub const EDGE_ID: &str = "edge-1";

/// The accepted hello response the "after hello" mode feeds first.
pub fn accepted_hello_response() -> Vec<u8> {
    let response = Envelope::new(EdgeHelloResponse {
        accepted: true,
        protocol_version: 1,
        heartbeat_interval_ms: 1_000,
        session_id: 7,
        min_protocol_version: 1,
        max_protocol_version: 1,
        ..Default::default()
    });
    let mut wire = Vec::new();
    if let Err(err) = encode_frame(&response, DEFAULT_MAX_FRAME_LEN, &mut wire) {
        panic!("hello response does not encode: {err}");
    }
    wire
}

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let first = Session::run(data);
    let second = Session::run(data);
    assert_eq!(first, second, "same input, different outputs");
}

fn registry() -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    for (id, zone) in [("node-a", "a"), ("node-b", "b")] {
        let node = NodeConfig::new(id)
            .with_label("zone", zone)
            .with_provider(ProviderConfig::new(
                "gpu-0",
                ProviderCategory::LocalInference,
                2,
                1,
            ));
        if let Err(err) = reg.configure(node, 0) {
            panic!("node config refused: {err}");
        }
    }
    reg
}

struct Session {
    edge: Edge<NodeRegistry>,
    now: Instant,
    out: OutboundFrames,
    /// A mirror of the Edge's decoder: what the Edge received, frame by frame.
    mirror: FrameDecoder,
    /// Status correlation ids the Edge received and has not answered yet, with how
    /// many times each was asked (a CP may repeat one; each request gets an answer).
    status_asked: BTreeMap<u64, usize>,
    /// Command ids the Edge answered.
    answered: BTreeSet<String>,
    /// Command ids the application was told about, not yet finished.
    running: Vec<String>,
    log: FrameLog,
    connected: bool,
    closed: Option<CloseReason>,
    /// `poll_transmit` said `Close`.
    close_asked: bool,
    node_event_seq: u64,
    transcript: String,
}

impl Session {
    fn run(data: &[u8]) -> String {
        let Some((&mode, rest)) = data.split_first() else {
            return String::new();
        };
        let mode = Mode::from_byte(mode);
        let (splits, stream) = Splits::parse(rest);
        let config = EdgeConfig::new(EDGE_ID, 0)
            .with_operation("edge.ping", TargetLevel::Edge)
            .with_operation("node.drain", TargetLevel::Node);
        let edge = match Edge::new(config, registry()) {
            Ok(edge) => edge,
            Err(err) => panic!("config refused: {err}"),
        };
        let mut s = Session {
            edge,
            now: Instant::ZERO,
            // Until a session is accepted the CP takes at most 256 KiB.
            out: OutboundFrames::new(PRE_HELLO_MAX_FRAME_LEN),
            mirror: FrameDecoder::new(DEFAULT_MAX_FRAME_LEN),
            status_asked: BTreeMap::new(),
            answered: BTreeSet::new(),
            running: Vec::new(),
            log: FrameLog::default(),
            connected: false,
            closed: None,
            close_asked: false,
            node_event_seq: 0,
            transcript: String::new(),
        };
        if let Err(err) = s.edge.handle_connected(s.now) {
            panic!("connect refused: {err}");
        }
        s.drain();
        let hello_len = s.out.frames().first().map(|f| {
            assert_eq!(
                kind(f),
                BodyKind::HelloRequest,
                "the first frame is the hello"
            );
            iop_proto::Message::encoded_len(f)
        });
        assert!(hello_len.is_some_and(|l| l <= PRE_HELLO_MAX_FRAME_LEN as usize));
        if mode.after_hello {
            s.feed(&accepted_hello_response());
            assert!(s.connected, "the accepted hello response was not taken");
        }
        for chunk in splits.chunks(stream) {
            if s.close_asked {
                break;
            }
            s.feed(chunk);
            if mode.time_passes {
                s.pass_time(read_delay(chunk.len()));
            }
            if mode.app_calls && !s.close_asked {
                s.app_call(chunk.first().copied().unwrap_or(0));
            }
        }
        if mode.close_at_end || s.close_asked {
            s.edge.handle_closed(s.now);
            s.drain();
            assert!(
                s.closed.is_some(),
                "no Closed event after the transport closed"
            );
            assert!(!s.edge.is_connected());
        }
        s.out.finish();
        s.transcript
    }

    fn feed(&mut self, chunk: &[u8]) {
        // What the Edge will decode, as far as the mirror can tell (it stops at the
        // first bad frame, as the Edge does).
        let mut input = chunk;
        while let Ok(Some(envelope)) = self.mirror.decode(&mut input) {
            if let Some(Body::StatusRequest(_)) = envelope.body {
                *self
                    .status_asked
                    .entry(envelope.correlation_id)
                    .or_default() += 1;
            }
        }
        self.edge.handle_bytes(self.now, chunk);
        self.drain();
    }

    fn drain(&mut self) {
        // Events first: `Connected` raises the frame limit the bytes are checked
        // against to the one the CP gave.
        self.drain_events();
        loop {
            let mut buf = Vec::new();
            match self.edge.poll_transmit(&mut buf) {
                Transmit::Bytes(n) => {
                    assert_eq!(n, buf.len());
                    assert!(n > 0, "Bytes(0)");
                    self.transcript.push_str(&hex(&buf));
                    self.out.feed(&buf);
                }
                Transmit::Idle => break,
                Transmit::Close => {
                    self.close_asked = true;
                    break;
                }
            }
        }
        self.drain_events();
        let _ = writeln!(self.transcript, "timeout {:?}", self.edge.poll_timeout());
        self.check_frames();
    }

    fn drain_events(&mut self) {
        while let Some(event) = self.edge.poll_event() {
            let _ = writeln!(self.transcript, "{event:?}");
            self.on_event(event);
        }
    }

    fn on_event(&mut self, event: EdgeEvent) {
        match event {
            EdgeEvent::Connected { max_frame_len, .. } => {
                assert!(!self.connected, "connected twice on one transport");
                self.connected = true;
                self.out.set_max_frame_len(max_frame_len);
            }
            EdgeEvent::CommandReceived { command_id, .. } => self.running.push(command_id),
            EdgeEvent::Closed { reason, .. } => {
                assert!(self.closed.is_none(), "a second Closed: {reason:?}");
                if let CloseReason::ProtocolError(_) = &reason {
                    let mut buf = Vec::new();
                    let edge = &mut self.edge;
                    let _ =
                        iop_core::drain_transmits(&mut buf, usize::MAX, |b| edge.poll_transmit(b));
                    self.transcript.push_str(&hex(&buf));
                    self.out.feed(&buf);
                    let last = self.out.frames().last();
                    assert_eq!(
                        last.and_then(go_away_reason),
                        Some(GoAwayReason::ProtocolError),
                        "a protocol error is told to the CP"
                    );
                    let mut probe = Vec::new();
                    assert_eq!(self.edge.poll_transmit(&mut probe), Transmit::Close);
                    self.close_asked = true;
                }
                self.closed = Some(reason);
            }
            _ => {}
        }
    }

    fn check_frames(&mut self) {
        for f in &self.log.new_frames(&self.out) {
            match &f.body {
                Some(Body::HelloRequest(_)) => {}
                Some(Body::Heartbeat(_)) | Some(Body::GoAway(_)) => {}
                Some(Body::StatusResponse(r)) => {
                    assert_eq!(r.edge_id, EDGE_ID);
                    let asked = self.status_asked.get_mut(&f.correlation_id);
                    match asked {
                        Some(n) if *n > 0 => *n -= 1,
                        _ => panic!(
                            "status response {} never asked, or answered twice",
                            f.correlation_id
                        ),
                    }
                }
                Some(Body::NodeEvent(e)) => {
                    assert_eq!(e.edge_id, EDGE_ID);
                    self.node_event_seq += 1;
                    if self.node_event_seq == 1 {
                        assert_eq!(e.kind(), NodeEventKind::EdgeReady, "first event");
                        assert_eq!(e.sequence, 1, "first event");
                    }
                    assert!(
                        e.sequence >= self.node_event_seq,
                        "event sequence went back"
                    );
                    self.node_event_seq = e.sequence;
                }
                Some(Body::CommandResponse(r)) => {
                    // A repeated request is answered again (idempotency, §4.4).
                    self.answered.insert(r.command_id.clone());
                }
                Some(Body::CommandEvent(e)) => assert!(
                    self.answered.contains(&e.command_id),
                    "event for {} before its response",
                    e.command_id
                ),
                other => panic!("an Edge does not send {:?}", other.as_ref().map(Body::kind)),
            }
        }
        let hellos = self.log.count(BodyKind::HelloRequest);
        assert!(hellos <= 1, "{hellos} hellos on one transport");
    }

    /// Lets `by` pass: an early `handle_timeout` first (must do nothing), then every
    /// due deadline.
    fn pass_time(&mut self, by: std::time::Duration) {
        let early = self.edge.poll_timeout().is_none_or(|at| self.now < at);
        if early {
            let before = self.transcript.len();
            let frames = self.out.frames().len();
            self.edge.handle_timeout(self.now);
            self.drain();
            let tail = self.transcript.get(before..).unwrap_or_default();
            assert_eq!(
                self.out.frames().len(),
                frames,
                "an early timeout sent frames"
            );
            assert!(
                tail.lines().all(|l| l.starts_with("timeout ")),
                "an early timeout did something: {tail}"
            );
        }
        self.now = advance(self.now, by);
        for _ in 0..64 {
            match self.edge.poll_timeout() {
                Some(at) if at <= self.now && !self.close_asked => {
                    self.edge.handle_timeout(self.now);
                    self.drain();
                }
                _ => break,
            }
        }
    }

    fn app_call(&mut self, byte: u8) {
        let label = match byte % 6 {
            0 | 1 => match self.running.first().cloned() {
                Some(id) if byte.is_multiple_of(6) => format!(
                    "running {:?}",
                    self.edge
                        .report_running(self.now, &id, "working", BTreeMap::new())
                ),
                Some(id) => {
                    self.running.remove(0);
                    format!(
                        "outcome {:?}",
                        self.edge.report_outcome(
                            self.now,
                            &id,
                            Outcome::Succeeded,
                            "done",
                            BTreeMap::new()
                        )
                    )
                }
                None => "no command".into(),
            },
            2 => {
                let mut reg = self.edge.registry_mut();
                let g = reg.connect("node-a", 1);
                let r = g.map(|g| reg.mark_ready("node-a", g, 2));
                format!("node-a up {r:?}")
            }
            3 => {
                let mut reg = self.edge.registry_mut();
                let state = reg.node_state("node-a");
                let r = state.map(|(_, g)| reg.close("node-a", g, "gone", 3));
                format!("node-a down {r:?}")
            }
            4 => {
                self.edge.drain(self.now);
                "drain".into()
            }
            _ => format!("{:?}", self.edge.stats()),
        };
        let _ = writeln!(self.transcript, "app {label}");
        self.drain();
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2 + 1);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s.push('\n');
    s
}

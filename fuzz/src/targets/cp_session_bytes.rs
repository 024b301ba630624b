//! `cp_session_bytes`: raw bytes, cut into fuzzer-chosen reads, into one
//! [`ControlPlane`] connection, right after connect or after an accepted hello.
//!
//! Input: a [`Mode`] byte, a [`Splits`] header, then the Edge's byte stream.
//!
//! Checked: no panic; every byte the CP writes decodes as whole, valid frames under
//! the protocol's limits, of kinds a CP may send, at most one hello response, nothing after
//! a `GoAway`; the connection ends with at most one `Closed` event (exactly one when
//! the transport closes), and when it ends for a reason the CP must tell the peer
//! (protocol error, hello rejection or timeout, heartbeat timeout) the last frame says
//! so; after `Closed`, `poll_transmit` hands out the last bytes then `Close`, and later
//! bytes change nothing; an early `handle_timeout` does nothing; the same input gives
//! the same transcript, bit for bit. In the rival variant a second connection enrols
//! [`EDGE_ID`] after the first read: it is accepted, a live first session of that
//! Edge is superseded (`GoAway{SUPERSEDED}` last), one of another Edge (the stream
//! may carry its own hello) is left alone, and each connection closes once.

use std::fmt::Write as _;

use iop_core::cp::{
    CloseReason, CommandSpec, ConnectionId, ControlPlane, CpConfig, CpEvent, EnrolmentPolicy,
    Transmit,
};
use iop_core::{Instant, drain_transmits};
use iop_proto::{
    Body, BodyKind, DEFAULT_MAX_FRAME_LEN, EdgeHelloRequest, Envelope, GoAwayReason,
    HelloRejectReason, PRE_HELLO_MAX_FRAME_LEN, PROTOCOL_VERSION, encode_frame,
};

use crate::frames::OutboundFrames;
use crate::session::{FrameLog, Mode, advance, go_away_reason, kind, read_delay};
use crate::split::Splits;

const CONN: ConnectionId = ConnectionId(1);
/// The rival connection of the supersede variant.
const RIVAL: ConnectionId = ConnectionId(2);
/// The Edge the valid hello prefix enrols.
pub const EDGE_ID: &str = "edge-1";

/// The hello the "after hello" mode sends first.
pub fn valid_hello() -> Vec<u8> {
    hello_of(EDGE_ID)
}

/// A valid hello of `edge_id` (as [`valid_hello`] is [`EDGE_ID`]'s).
pub fn hello_of(edge_id: &str) -> Vec<u8> {
    let hello = Envelope::new(EdgeHelloRequest {
        edge_id: edge_id.into(),
        protocol_version: PROTOCOL_VERSION,
        software_version: "fuzz".into(),
        operations: vec!["edge.ping".into(), "node.drain".into()],
        ..Default::default()
    });
    let mut wire = Vec::new();
    if let Err(err) = encode_frame(&hello, PRE_HELLO_MAX_FRAME_LEN, &mut wire) {
        panic!("hello does not encode: {err}");
    }
    wire
}

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let first = Session::run(data);
    let second = Session::run(data);
    assert_eq!(first, second, "same input, different outputs");
}

struct Session {
    cp: ControlPlane,
    now: Instant,
    out: OutboundFrames,
    /// Frames already checked.
    log: FrameLog,
    closed: Option<CloseReason>,
    /// `poll_transmit` said `Close`: the CP forgot the connection.
    forgotten: bool,
    /// The Edge the first connection's session was accepted for, once it was.
    accepted_edge: Option<String>,
    /// What the CP wrote on the rival connection, if one was opened.
    rival: Option<OutboundFrames>,
    /// The application put the CP in drain.
    draining: bool,
    /// `Closed` events of the rival connection.
    rival_closed: usize,
    /// The rival's connection was forgotten (`Transmit::Close`).
    rival_forgotten: bool,
    transcript: String,
}

impl Session {
    fn run(data: &[u8]) -> String {
        let Some((&mode, rest)) = data.split_first() else {
            return String::new();
        };
        let mode = Mode::from_byte(mode);
        let (splits, stream) = Splits::parse(rest);
        let cp = match ControlPlane::new(CpConfig::default(), EnrolmentPolicy::AcceptAny) {
            Ok(cp) => cp,
            Err(err) => panic!("default config refused: {err}"),
        };
        let mut s = Session {
            cp,
            now: Instant::ZERO,
            out: OutboundFrames::new(DEFAULT_MAX_FRAME_LEN),
            log: FrameLog::default(),
            closed: None,
            forgotten: false,
            accepted_edge: None,
            rival: None,
            draining: false,
            rival_closed: 0,
            rival_forgotten: false,
            transcript: String::new(),
        };
        if let Err(err) = s.cp.handle_connect(s.now, CONN) {
            panic!("connect refused: {err}");
        }
        s.drain();
        if mode.after_hello {
            s.cp.handle_bytes(s.now, CONN, &valid_hello());
            s.drain();
            assert!(
                s.accepted_edge.is_some(),
                "the valid hello was not accepted"
            );
        }
        for chunk in splits.chunks(stream) {
            if s.forgotten {
                // The driver would have closed; late bytes must change nothing.
                s.cp.handle_bytes(s.now, CONN, chunk);
                let mut buf = Vec::new();
                assert_eq!(s.cp.poll_transmit(CONN, &mut buf), Transmit::Close);
                assert!(buf.is_empty() && s.cp.poll_event().is_none());
                break;
            }
            s.cp.handle_bytes(s.now, CONN, chunk);
            s.drain();
            if mode.time_passes {
                s.pass_time(read_delay(chunk.len()));
            }
            if mode.app_calls && s.accepted_edge.is_some() && !s.forgotten {
                s.app_call(chunk.first().copied().unwrap_or(0));
            }
            if mode.rival && s.rival.is_none() {
                s.enrol_rival();
            }
        }
        if mode.close_at_end {
            s.cp.handle_closed(s.now, CONN);
            s.cp.handle_closed(s.now, RIVAL);
            s.drain();
            assert!(
                s.closed.is_some(),
                "no Closed event after the transport closed"
            );
            assert_eq!(s.rival_closed, usize::from(s.rival.is_some()));
        } else {
            let alive = usize::from(s.closed.is_none())
                + usize::from(s.rival.is_some() && s.rival_closed == 0);
            assert_eq!(s.cp.connection_count(), alive, "alive, yet forgotten");
        }
        assert!(
            s.rival_closed <= 1,
            "the rival closed {} times",
            s.rival_closed
        );
        s.out.finish();
        if let Some(rival) = &s.rival {
            rival.finish();
        }
        s.transcript
    }

    /// Pulls every output, checking each.
    fn drain(&mut self) {
        loop {
            let mut buf = Vec::new();
            match self.cp.poll_transmit(CONN, &mut buf) {
                Transmit::Bytes(n) => {
                    assert_eq!(n, buf.len());
                    assert!(n > 0, "Bytes(0)");
                    self.transcript.push_str(&hex(&buf));
                    self.out.feed(&buf);
                }
                Transmit::Idle => {
                    assert!(self.closed.is_none() || self.forgotten, "closed, yet Idle");
                    break;
                }
                Transmit::Close => {
                    self.forgotten = true;
                    break;
                }
            }
        }
        if let Some(rival) = &mut self.rival
            && !self.rival_forgotten
        {
            let mut buf = Vec::new();
            if drain_transmits(&mut buf, usize::MAX, |b| self.cp.poll_transmit(RIVAL, b))
                == Transmit::Close
            {
                self.rival_forgotten = true;
            }
            if !buf.is_empty() {
                self.transcript.push_str(&hex(&buf));
                rival.feed(&buf);
            }
        }
        while self.cp.poll_wakeup().is_some() {}
        while let Some(event) = self.cp.poll_event() {
            let _ = writeln!(self.transcript, "{event:?}");
            self.on_event(event);
        }
        let _ = writeln!(self.transcript, "timeout {:?}", self.cp.poll_timeout());
        self.check_frames();
    }

    fn on_event(&mut self, event: CpEvent) {
        match event {
            CpEvent::SessionAccepted { conn: RIVAL, .. } => {}
            CpEvent::SessionAccepted { edge_id, .. } => {
                assert!(
                    self.accepted_edge.is_none(),
                    "two sessions on one connection"
                );
                self.accepted_edge = Some(edge_id);
            }
            CpEvent::Closed { conn: RIVAL, .. } => self.rival_closed += 1,
            CpEvent::Closed { conn, reason, .. } => {
                assert_eq!(conn, CONN);
                assert!(self.closed.is_none(), "a second Closed: {reason:?}");
                // Flush what the close queued; it must end in `Close`, with the
                // frame that tells the peer why.
                let mut buf = Vec::new();
                let _ = drain_transmits(&mut buf, usize::MAX, |b| self.cp.poll_transmit(CONN, b));
                self.transcript.push_str(&hex(&buf));
                self.out.feed(&buf);
                let mut probe = Vec::new();
                assert_eq!(self.cp.poll_transmit(CONN, &mut probe), Transmit::Close);
                self.forgotten = true;
                self.check_last_frame(&reason);
                self.closed = Some(reason);
            }
            _ => {}
        }
    }

    fn check_last_frame(&self, reason: &CloseReason) {
        let last = self.out.frames().last();
        let wanted = match reason {
            CloseReason::ProtocolError(_) => Some(GoAwayReason::ProtocolError),
            CloseReason::HelloTimeout => Some(GoAwayReason::HelloTimeout),
            CloseReason::HeartbeatTimeout => Some(GoAwayReason::HeartbeatTimeout),
            CloseReason::Superseded { .. } => Some(GoAwayReason::Superseded),
            CloseReason::HelloRejected(r) => {
                match last.and_then(|f| f.body.as_ref()) {
                    Some(Body::HelloResponse(resp)) => {
                        assert!(!resp.accepted);
                        assert_eq!(resp.reject_reason(), *r);
                    }
                    other => panic!("rejected without a response: {other:?}"),
                }
                None
            }
            _ => None,
        };
        if let Some(wanted) = wanted {
            assert_eq!(
                last.and_then(go_away_reason),
                Some(wanted),
                "closed for {reason:?}"
            );
        }
    }

    fn check_frames(&mut self) {
        for f in &self.log.new_frames(&self.out) {
            let k = kind(f);
            assert!(
                matches!(
                    k,
                    BodyKind::HelloResponse
                        | BodyKind::StatusRequest
                        | BodyKind::CommandRequest
                        | BodyKind::HeartbeatAck
                        | BodyKind::GoAway
                ),
                "a CP does not send {k}"
            );
        }
        let responses = self.log.count(BodyKind::HelloResponse);
        assert!(responses <= 1, "{responses} hello responses");
    }

    /// A second connection enrols [`EDGE_ID`]. With the default `Replace` policy it is
    /// accepted, and a live first session of the same Edge is superseded (PROTOCOL.md §4.1,
    /// §5.3), while one of another Edge is left alone; a draining CP refuses it with
    /// DRAINING and leaves the first alone.
    fn enrol_rival(&mut self) {
        let live = self.accepted_edge.is_some() && self.closed.is_none();
        let same_edge = self.accepted_edge.as_deref() == Some(EDGE_ID);
        if let Err(err) = self.cp.handle_connect(self.now, RIVAL) {
            panic!("rival connect refused: {err}");
        }
        self.rival = Some(OutboundFrames::new(DEFAULT_MAX_FRAME_LEN));
        self.cp.handle_bytes(self.now, RIVAL, &valid_hello());
        self.drain();
        let answer = self
            .rival
            .as_ref()
            .and_then(|r| r.frames().first())
            .and_then(|f| f.body.as_ref());
        match answer {
            Some(Body::HelloResponse(r)) if self.draining => {
                assert_eq!(r.reject_reason(), HelloRejectReason::Draining);
                assert!(
                    !live || self.closed.is_none(),
                    "a refused rival closed the live one"
                );
                return;
            }
            Some(Body::HelloResponse(r)) => assert!(r.accepted, "rival refused: {r:?}"),
            other => panic!("the rival got {other:?}"),
        }
        if live && same_edge {
            assert!(
                matches!(self.closed, Some(CloseReason::Superseded { .. })),
                "a live session was not superseded: {:?}",
                self.closed
            );
        } else if live {
            assert!(
                self.closed.is_none(),
                "a rival for {EDGE_ID} closed {:?}'s session: {:?}",
                self.accepted_edge,
                self.closed
            );
        }
    }

    /// Lets `by` pass: an early `handle_timeout` first (must do nothing), then every
    /// due deadline.
    fn pass_time(&mut self, by: std::time::Duration) {
        let early = self.cp.poll_timeout().is_none_or(|at| self.now < at);
        if early && !self.forgotten {
            let before = self.transcript.len();
            let frames = self.out.frames().len();
            self.cp.handle_timeout(self.now);
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
            match self.cp.poll_timeout() {
                Some(at) if at <= self.now => {
                    self.cp.handle_timeout(self.now);
                    self.drain();
                }
                _ => break,
            }
        }
    }

    fn app_call(&mut self, byte: u8) {
        let result = match byte % 4 {
            0 => self
                .cp
                .request_status(self.now, EDGE_ID, Vec::new())
                .map(|id| format!("{id:?}"))
                .map_err(|e| e.to_string()),
            1 => self
                .cp
                .send_command(
                    self.now,
                    EDGE_ID,
                    CommandSpec::new("edge.ping").with_id(format!("cmd-{byte}")),
                )
                .map_err(|e| e.to_string()),
            2 => self
                .cp
                .revoke(self.now, EDGE_ID)
                .map(|()| "revoked".to_owned())
                .map_err(|e| e.to_string()),
            _ => {
                self.cp.drain();
                self.draining = true;
                Ok("draining".into())
            }
        };
        let _ = writeln!(self.transcript, "app {result:?}");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An input whose stream is one read holding `hello`, in the rival variant.
    fn rival_after(hello: &[u8]) -> Vec<u8> {
        let mut data = vec![16, 0];
        data.extend_from_slice(hello);
        data
    }

    /// The rival enrols the Edge the stream's own hello enrolled: the first session
    /// is superseded (the check in `enrol_rival` holds it to that).
    #[test]
    fn a_rival_of_the_same_edge_supersedes_the_first_session() {
        let data = rival_after(&hello_of(EDGE_ID));
        let transcript = Session::run(&data);
        assert!(transcript.contains("EdgeSuperseded"), "{transcript}");
        run(&data);
    }

    /// The stream enrols another Edge; the rival enrolling [`EDGE_ID`] must leave
    /// that session alone. The target's check once expected a supersession whatever
    /// Edge the first session was for, and `fuzz-deep` found an input (below) that
    /// enrolled `edge-2` first: the oracle was wrong, the core right.
    #[test]
    fn a_rival_of_another_edge_leaves_the_first_session_alone() {
        let data = rival_after(&hello_of("edge-2"));
        let transcript = Session::run(&data);
        assert!(!transcript.contains("EdgeSuperseded"), "{transcript}");
        assert_eq!(
            transcript.matches("SessionAccepted").count(),
            2,
            "{transcript}"
        );
        run(&data);
    }

    /// An input `scripts/fuzz-deep.sh` found, replayed as it was.
    #[test]
    fn the_input_fuzz_deep_found_passes() {
        const FOUND: &[u8] = &[
            0x10, 0x10, 0x00, 0x00, 0x00, 0x52, 0x12, 0x50, 0x0a, 0x06, 0x65, 0x64, 0x67, 0x65,
            0x2d, 0x32, 0x10, 0x01, 0x1a, 0x05, 0x30, 0x2e, 0x31, 0x2e, 0x30, 0x22, 0x09, 0x01,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x67, 0x22, 0x0a, 0x6e, 0x6f, 0x64, 0x65,
            0x2e, 0x64, 0x72, 0x61, 0x69, 0x6e, 0x2a, 0x17, 0x0a, 0x0f, 0x69, 0x6f, 0x70, 0x2e,
            0x69, 0x6e, 0x73, 0x74, 0x61, 0x6e, 0x63, 0x65, 0x5f, 0x69, 0x64, 0x12, 0x04, 0x37,
            0x66, 0x33, 0x61, 0x3a, 0x06, 0x73, 0x65, 0x63, 0x72, 0x65, 0x74, 0x3a, 0x05, 0x63,
            0x6d, 0x64, 0x2d, 0x01, 0x00, 0x00, 0x00, 0x55, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb,
            0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb,
            0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xfb, 0xb7, 0x00, 0x59, 0xfe, 0xf5, 0xf3,
            0x65, 0x2d, 0x61, 0x30, 0x10,
        ];
        run(FOUND);
    }
}

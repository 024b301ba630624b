//! Testing a Control Plane: the tester plays Edges, one connection per case (a few
//! for the duplicate case), under ids `<prefix>-<case>`. The Control Plane must accept
//! any valid id (an enrolment policy for trials).

mod cases;
mod commands;
mod load;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iop_proto::{
    Body, EdgeHelloRequest, EdgeHelloResponse, EdgeNodeEvent, Envelope, GoAwayReason, Heartbeat,
    NodeEventKind, PROTOCOL_VERSION,
};

use crate::fail;
use crate::report::{Case, CaseOutcome, CaseResult, NotPassed, Report, Verdict, case, selected};
use crate::wire::{Conn, Keepalive, unix_ms};

/// What the tester needs to know of the Control Plane under test.
#[derive(Debug, Clone)]
pub struct CpOptions {
    /// The Control Plane's address.
    pub target: SocketAddr,
    /// Prefix of the tester's Edge ids.
    pub edge_id_prefix: String,
    /// Cases to run: those whose id starts with one of these (all when empty).
    pub only: Vec<String>,
    /// An iop admin API (plain HTTP, no token) through which the tester has the
    /// Control Plane send commands; the command cases are skipped without one.
    pub admin: Option<SocketAddr>,
}

impl CpOptions {
    /// Options for the Control Plane at `target`.
    pub fn new(target: SocketAddr) -> Self {
        Self {
            target,
            edge_id_prefix: "conformance".into(),
            only: Vec::new(),
            admin: None,
        }
    }
}

/// Every case against a Control Plane, in the order they run.
pub const CASES: &[Case] = &[
    case(
        "cp.flow.hello",
        "4.1",
        "a valid hello is accepted with usable parameters, then a status request",
    ),
    case(
        "cp.flow.heartbeat",
        "4.2",
        "a heartbeat is acked with its sequence",
    ),
    case(
        "cp.hello.empty_id",
        "4.1",
        "an empty edge_id: EMPTY_EDGE_ID",
    ),
    case(
        "cp.hello.invalid",
        "4.1",
        "an id outside the grammar, version 0, 17 metadata entries: INVALID_HELLO",
    ),
    case(
        "cp.hello.version",
        "4.1",
        "a higher protocol_version is negotiated down",
    ),
    case(
        "cp.hello.first",
        "4.1",
        "a heartbeat before the hello is a protocol error",
    ),
    case(
        "cp.hello.second",
        "4.1",
        "a second hello is a protocol error",
    ),
    case(
        "cp.frame.zero_length",
        "2",
        "a length prefix of 0 is a protocol error",
    ),
    case(
        "cp.frame.too_large",
        "2",
        "a frame over 256 KiB before the hello is refused from its prefix",
    ),
    case(
        "cp.frame.undecodable",
        "2",
        "a body that is not an Envelope is a protocol error",
    ),
    case(
        "cp.frame.limit",
        "7",
        "a hello with an edge_id of 129 bytes is a protocol error, not answered",
    ),
    case(
        "cp.direction",
        "3",
        "a status request from an Edge is a protocol error",
    ),
    case(
        "cp.unknown_body",
        "3",
        "an unknown body after the hello is ignored",
    ),
    case(
        "cp.heartbeat_ack",
        "3",
        "a heartbeat ack from an Edge is tolerated",
    ),
    case(
        "cp.status.never_issued",
        "4.3",
        "a status response to an id never issued is a protocol error",
    ),
    case(
        "cp.status.edge_id",
        "4.3",
        "a status response naming another Edge is a protocol error",
    ),
    case(
        "cp.node_event.edge_id",
        "4.5",
        "a node event naming another Edge is a protocol error",
    ),
    case(
        "cp.node_event.sequence",
        "4.5",
        "a node event sequence repeated is a protocol error",
    ),
    case(
        "cp.node_event.gap",
        "4.5",
        "a gap in node event sequences makes the Control Plane ask for a fresh status",
    ),
    case(
        "cp.command.unknown_id",
        "4.4",
        "a response for an unknown command is counted and dropped",
    ),
    case(
        "cp.flow.command",
        "4.4",
        "a command's response then events ACCEPTED, SUCCEEDED are taken (needs --admin)",
    ),
    case(
        "cp.command.event_before_response",
        "4.4",
        "an event before the command's response is a protocol error (needs --admin)",
    ),
    case(
        "cp.command.response_unsolicited",
        "4.4",
        "a second response is a protocol error (needs --admin)",
    ),
    case(
        "cp.command.event_after_rejection",
        "4.4",
        "an event of a rejected command is a protocol error (needs --admin)",
    ),
    case(
        "cp.command.event_first_not_accepted",
        "4.4",
        "event 1 RUNNING is a protocol error (needs --admin)",
    ),
    case(
        "cp.command.event_phase",
        "4.4",
        "an UNSPECIFIED phase is a protocol error (needs --admin)",
    ),
    case(
        "cp.command.event_sequence",
        "4.4",
        "sequence 3 then 2 is a protocol error (needs --admin)",
    ),
    case(
        "cp.command.event_backwards",
        "4.4",
        "RUNNING then ACCEPTED is a protocol error (needs --admin)",
    ),
    case(
        "cp.command.event_after_terminal",
        "4.4",
        "an event after SUCCEEDED is a protocol error (needs --admin)",
    ),
    case(
        "cp.command.event_duplicate",
        "4.4",
        "an event repeated is counted and dropped (needs --admin)",
    ),
    case(
        "cp.hello.duplicate",
        "4.1",
        "a second session of one id: the first superseded, or the second rejected DUPLICATE_EDGE, with retry_after_ms",
    ),
    case(
        "cp.liveness",
        "4.2",
        "a silent Edge gets GoAway HEARTBEAT_TIMEOUT after 3 intervals",
    ),
    case(
        "cp.flow.load_update",
        "4.8",
        "load updates in sequence after a full status: the session goes on",
    ),
    case(
        "cp.load_update.not_negotiated",
        "4.8",
        "an update on a session whose hello did not offer them is a protocol error",
    ),
    case(
        "cp.load_update.before_status",
        "4.8",
        "an update before the first full status answer is a protocol error",
    ),
    case(
        "cp.load_update.rate",
        "4.8",
        "12 updates at once (past the burst of 4) is a protocol error",
    ),
    case(
        "cp.load_update.duplicate_provider",
        "4.8",
        "an update naming one provider twice is a protocol error",
    ),
    case(
        "cp.load_update.gap",
        "4.8",
        "an update whose sequence skips: a fresh status is asked for",
    ),
    case(
        "cp.load_update.unknown_provider",
        "4.8",
        "an update naming a provider the status did not hold: a fresh status is asked for",
    ),
    case(
        "cp.load_update.resync",
        "4.8",
        "an update with resync: a fresh status is asked for",
    ),
    case("cp.hello.timeout", "4.1", "no hello: GoAway HELLO_TIMEOUT"),
    case(
        "cp.send_limits",
        "4.6",
        "no frame of the whole run broke a limit of §7",
    ),
];

/// The tester's state over a run.
struct Tester {
    opts: CpOptions,
    refused: Vec<String>,
}

const ANSWER: Duration = Duration::from_secs(5);

impl Tester {
    fn hello(&self, name: &str) -> EdgeHelloRequest {
        EdgeHelloRequest {
            edge_id: format!("{}-{name}", self.opts.edge_id_prefix),
            protocol_version: PROTOCOL_VERSION,
            software_version: "iop-conformance".into(),
            operations: vec!["edge.ping".into()],
            ..Default::default()
        }
    }

    fn dial(&self) -> Result<Conn, NotPassed> {
        Conn::dial(self.opts.target)
            .map_err(|e| NotPassed::Fail(format!("cannot reach {}: {e}", self.opts.target)))
    }

    /// Says `hello` on a new connection; the connection and the answer.
    fn say(&mut self, hello: EdgeHelloRequest) -> Result<(Conn, EdgeHelloResponse), NotPassed> {
        let mut conn = self.dial()?;
        conn.send(&Envelope::new(hello))
            .map_err(|e| NotPassed::Fail(e.to_string()))?;
        let answer = conn.expect(ANSWER, |env| match &env.body {
            Some(Body::HelloResponse(r)) => Some(r.clone()),
            _ => None,
        });
        self.refused.append(&mut conn.refused);
        let answer = answer.map_err(|e| NotPassed::Fail(format!("no hello response: {e}")))?;
        Ok((conn, answer))
    }

    /// A session of `<prefix>-name`, accepted, with heartbeats kept and `EDGE_READY` sent.
    fn open(&mut self, name: &str) -> Result<(Conn, EdgeHelloResponse), NotPassed> {
        self.open_with(name, self.hello(name))
    }

    /// [`open`](Self::open) with a hello of the caller's.
    fn open_with(
        &mut self,
        name: &str,
        hello: EdgeHelloRequest,
    ) -> Result<(Conn, EdgeHelloResponse), NotPassed> {
        let (mut conn, r) = self.say(hello)?;
        if !r.accepted {
            fail!(
                "hello rejected {} {:?} (the Control Plane must accept any valid id)",
                r.reject_reason().as_str_name(),
                r.message
            );
        }
        conn.accept_frames(r.max_frame_len);
        let interval = match r.heartbeat_interval_ms {
            0 => 5_000,
            ms => ms,
        };
        conn.keep_alive(Keepalive::Beat(Duration::from_millis(u64::from(interval))));
        let ready = EdgeNodeEvent {
            edge_id: format!("{}-{name}", self.opts.edge_id_prefix),
            kind: NodeEventKind::EdgeReady as i32,
            sequence: 1,
            occurred_at_unix_ms: unix_ms(),
            ..Default::default()
        };
        let _ = conn.send(&Envelope::new(ready));
        Ok((conn, r))
    }

    fn keep(&mut self, mut conn: Conn) {
        self.refused.append(&mut conn.refused);
    }
}

/// The heartbeat interval of an accepted hello.
fn interval(r: &EdgeHelloResponse) -> Duration {
    Duration::from_millis(u64::from(match r.heartbeat_interval_ms {
        0 => 5_000,
        ms => ms,
    }))
}

/// Expects the Control Plane to close `conn` as a protocol error within 3 s.
fn closes(t: &mut Tester, mut conn: Conn, what: &str) -> CaseOutcome {
    let closed = conn.closes_within(Duration::from_secs(3));
    t.keep(conn);
    match closed {
        Ok(Some(g)) if g.reason() == GoAwayReason::ProtocolError => Ok(format!(
            "{what}: GoAway PROTOCOL_ERROR {:?}, closed",
            g.message
        )),
        Ok(Some(g)) => fail!(
            "{what}: GoAway {} (expected PROTOCOL_ERROR)",
            g.reason().as_str_name()
        ),
        Ok(None) => Ok(format!("{what}: closed (no GoAway)")),
        Err(e) => fail!("{what}: {e}"),
    }
}

/// Sends `bad` on an accepted session and expects a protocol error.
fn accepted_then(t: &mut Tester, name: &str, bad: &[u8], what: &str) -> CaseOutcome {
    let (mut conn, _) = t.open(name)?;
    let _ = conn.send_raw(bad);
    closes(t, conn, what)
}

/// Sends `env` on an accepted session and expects the session to go on: a heartbeat
/// sent after it is acked.
fn tolerated(t: &mut Tester, name: &str, raw: &[u8], what: &str) -> CaseOutcome {
    let (mut conn, _) = t.open(name)?;
    let _ = conn.send_raw(raw);
    let _ = conn.send(&Envelope::new(Heartbeat {
        sequence: 777,
        sent_at_unix_ms: unix_ms(),
    }));
    let acked = conn.expect(ANSWER, |env| match &env.body {
        Some(Body::HeartbeatAck(a)) if a.sequence == 777 => Some(()),
        _ => None,
    });
    t.keep(conn);
    acked.map_err(|e| NotPassed::Fail(format!("{what}: the session did not go on: {e}")))?;
    Ok(format!("{what}: ignored, the next heartbeat acked"))
}

/// Runs the selected cases against the Control Plane at `opts.target`, calling
/// `on_result` as each ends.
pub fn run(opts: CpOptions, mut on_result: impl FnMut(&CaseResult)) -> Report {
    let only = opts.only.clone();
    let mut t = Tester {
        opts,
        refused: Vec::new(),
    };
    let mut report = Report::default();
    for case in CASES.iter().filter(|c| selected(c, &only)) {
        let started = Instant::now();
        let (verdict, detail) = match cases::body(&mut t, case.id) {
            Ok(d) => (Verdict::Pass, d),
            Err(NotPassed::Fail(d)) => (Verdict::Fail, d),
            Err(NotPassed::Skip(d)) => (Verdict::Skip, d),
        };
        let result = CaseResult {
            case: *case,
            verdict,
            detail,
            elapsed: started.elapsed(),
        };
        on_result(&result);
        report.results.push(result);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_has_a_body_and_a_named_check_its_section() {
        // A port nothing listens on: every case fails at once, but none as unknown.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let mut t = Tester {
            opts: CpOptions::new(closed),
            refused: Vec::new(),
        };
        for c in CASES {
            if let Err(NotPassed::Fail(d)) = cases::body(&mut t, c.id) {
                assert!(!d.starts_with("no case"), "{}: {d}", c.id);
            }
            if let Some(check) = iop_proto::checks::find(c.id) {
                assert_eq!(check.section, c.section, "{}", c.id);
            }
        }
        assert!(
            matches!(cases::body(&mut t, "cp.no-such-case"), Err(NotPassed::Fail(d)) if d.starts_with("no case"))
        );
    }
}

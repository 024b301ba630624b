//! The cases' bodies, and which runs for which id.

use std::time::{Duration, Instant};

use iop_proto::CommandPhase::{self, Accepted, Running, Succeeded};
use iop_proto::{
    Body, EdgeCommandResponse, EdgeHelloRequest, EdgeNodeEvent, EdgeStatusRequest,
    EdgeStatusResponse, Envelope, GoAwayReason, Heartbeat, HeartbeatAck, HelloRejectReason,
    NodeEventKind, PROTOCOL_VERSION,
};

use super::commands::Say::{Event, Response};
use super::commands::{kept, refused};
use super::{ANSWER, Tester, accepted_then, closes, interval, tolerated};
use crate::report::{CaseOutcome, NotPassed};
use crate::wire::{Keepalive, frame, unix_ms};
use crate::{fail, skip};

fn flow_hello(t: &mut Tester) -> CaseOutcome {
    let (mut conn, r) = t.open("hello")?;
    if r.session_id == 0 {
        fail!("accepted with session_id 0");
    }
    let hb = r.heartbeat_interval_ms;
    if hb != 0 && !(1_000..=60_000).contains(&hb) {
        fail!("heartbeat_interval_ms {hb} outside 1 000–60 000");
    }
    if r.max_frame_len != 0 && r.max_frame_len < 65_536 {
        fail!("max_frame_len {} below 64 KiB", r.max_frame_len);
    }
    if r.protocol_version > PROTOCOL_VERSION {
        fail!(
            "protocol_version {} above the one offered",
            r.protocol_version
        );
    }
    let edge_id = t.hello("hello").edge_id;
    let asked = conn.expect(ANSWER, |env| match &env.body {
        Some(Body::StatusRequest(_)) => Some(env.correlation_id),
        _ => None,
    });
    let status = match asked {
        Ok(correlation_id) => {
            let answer = EdgeStatusResponse {
                edge_id,
                observed_at_unix_ms: unix_ms(),
                registry_revision: 1,
                ..Default::default()
            };
            let _ = conn.send(&Envelope::correlated(correlation_id, answer));
            "then a status request (answered)"
        }
        Err(_) => "no status request within 5 s (a SHOULD)",
    };
    let held = conn.idle(Duration::from_secs(1));
    t.keep(conn);
    held.map_err(|e| NotPassed::Fail(format!("the session ended: {e}")))?;
    Ok(format!(
        "session {}, heartbeat {hb} ms, max_frame_len {}; {status}",
        r.session_id, r.max_frame_len
    ))
}

fn flow_heartbeat(t: &mut Tester) -> CaseOutcome {
    let (mut conn, _) = t.open("heartbeat")?;
    conn.keep_alive(Keepalive::None);
    let _ = conn.send(&Envelope::new(Heartbeat {
        sequence: 41,
        sent_at_unix_ms: unix_ms(),
    }));
    let acked = conn.expect(ANSWER, |env| match &env.body {
        Some(Body::HeartbeatAck(a)) => Some(a.sequence),
        _ => None,
    });
    t.keep(conn);
    match acked {
        Ok(41) => Ok("heartbeat 41 acked 41".into()),
        Ok(other) => fail!("heartbeat 41 acked {other}"),
        Err(e) => fail!("{e}"),
    }
}

fn rejected(
    t: &mut Tester,
    hello: EdgeHelloRequest,
    reason: HelloRejectReason,
    what: &str,
) -> Result<String, NotPassed> {
    let (conn, r) = t.say(hello)?;
    t.keep(conn);
    if r.accepted {
        fail!("{what}: accepted (expected {})", reason.as_str_name());
    }
    if r.reject_reason() != reason {
        fail!(
            "{what}: rejected {} (expected {})",
            r.reject_reason().as_str_name(),
            reason.as_str_name()
        );
    }
    Ok(format!("{what}: {}", reason.as_str_name()))
}

fn empty_id(t: &mut Tester) -> CaseOutcome {
    let mut h = t.hello("x");
    h.edge_id = String::new();
    rejected(t, h, HelloRejectReason::EmptyEdgeId, "edge_id \"\"")
}

fn invalid(t: &mut Tester) -> CaseOutcome {
    let mut grammar = t.hello("x");
    grammar.edge_id = "not a valid id!".into();
    let mut version = t.hello("version-0");
    version.protocol_version = 0;
    let mut metadata = t.hello("metadata");
    metadata.metadata = (0..17)
        .map(|i| (format!("key-{i}"), "v".to_owned()))
        .collect();
    let mut seen = Vec::new();
    for (h, what) in [
        (grammar, "edge_id with spaces"),
        (version, "protocol_version 0"),
        (metadata, "17 metadata entries"),
    ] {
        seen.push(rejected(t, h, HelloRejectReason::InvalidHello, what)?);
    }
    Ok(seen.join("; "))
}

fn version(t: &mut Tester) -> CaseOutcome {
    let mut h = t.hello("version");
    h.protocol_version = 99;
    let (conn, r) = t.say(h)?;
    t.keep(conn);
    if !r.accepted {
        fail!(
            "protocol_version 99 rejected {} (expected min(99, the CP's highest))",
            r.reject_reason().as_str_name()
        );
    }
    let highest = if r.max_protocol_version == 0 {
        PROTOCOL_VERSION
    } else {
        r.max_protocol_version
    };
    if r.protocol_version != 0 && r.protocol_version != highest.min(99) {
        fail!(
            "negotiated {} (expected {})",
            r.protocol_version,
            highest.min(99)
        );
    }
    Ok(format!(
        "99 negotiated to {} (the CP's range {}–{})",
        r.protocol_version, r.min_protocol_version, r.max_protocol_version
    ))
}

fn first(t: &mut Tester) -> CaseOutcome {
    let mut conn = t.dial()?;
    let _ = conn.send(&Envelope::new(Heartbeat {
        sequence: 1,
        sent_at_unix_ms: unix_ms(),
    }));
    closes(t, conn, "a heartbeat first")
}

fn second(t: &mut Tester) -> CaseOutcome {
    let hello = t.hello("second");
    accepted_then(t, "second", &frame(&Envelope::new(hello)), "a second hello")
}

fn pre_hello(t: &mut Tester, bytes: &[u8], what: &str) -> CaseOutcome {
    let mut conn = t.dial()?;
    let _ = conn.send_raw(bytes);
    closes(t, conn, what)
}

fn limit(t: &mut Tester) -> CaseOutcome {
    let mut h = t.hello("x");
    h.edge_id = "e".repeat(129);
    let mut conn = t.dial()?;
    let _ = conn.send(&Envelope::new(h));
    let closed = conn.closes_within(Duration::from_secs(3));
    t.keep(conn);
    match closed {
        Ok(Some(g)) => Ok(format!("GoAway {}, closed", g.reason().as_str_name())),
        Ok(None) => Ok("closed".into()),
        Err(e) => fail!("{e} (a 129-byte id breaks the frame's caps: no hello response)"),
    }
}

fn never_issued(t: &mut Tester) -> CaseOutcome {
    let edge_id = t.hello("never-issued").edge_id;
    let bad = Envelope::correlated(
        424_242,
        EdgeStatusResponse {
            edge_id,
            ..Default::default()
        },
    );
    accepted_then(t, "never-issued", &frame(&bad), "status response 424242")
}

fn status_edge_id(t: &mut Tester) -> CaseOutcome {
    let (mut conn, _) = t.open("status-edge-id")?;
    let asked = conn.expect(ANSWER, |env| match &env.body {
        Some(Body::StatusRequest(_)) => Some(env.correlation_id),
        _ => None,
    });
    let Ok(correlation_id) = asked else {
        t.keep(conn);
        skip!("the Control Plane sent no status request within 5 s");
    };
    let other = EdgeStatusResponse {
        edge_id: "conformance-someone-else".into(),
        ..Default::default()
    };
    let _ = conn.send(&Envelope::correlated(correlation_id, other));
    closes(t, conn, "an answer naming another Edge")
}

/// Events lost (a gap in `node_event` sequences) make the Control Plane ask for a
/// fresh status (§4.5): the one it asks at the session's start is answered first.
fn gap(t: &mut Tester) -> CaseOutcome {
    let name = "event-gap";
    let (mut conn, _) = t.open(name)?;
    let edge_id = t.hello(name).edge_id;
    let answer = |conn: &mut crate::wire::Conn, correlation_id| {
        let r = EdgeStatusResponse {
            edge_id: edge_id.clone(),
            registry_revision: 1,
            ..Default::default()
        };
        let _ = conn.send(&Envelope::correlated(correlation_id, r));
    };
    let asked = |env: &Envelope| match &env.body {
        Some(Body::StatusRequest(_)) => Some(env.correlation_id),
        _ => None,
    };
    let Ok(first) = conn.expect(ANSWER, asked) else {
        t.keep(conn);
        skip!("the Control Plane sent no status request at the session's start");
    };
    answer(&mut conn, first);
    let _ = conn.send(&Envelope::new(event(t, name, None, 3)));
    let again = conn.expect(ANSWER, asked);
    t.keep(conn);
    match again {
        Ok(_) => Ok("sequence 1 then 3: a fresh status was asked for".into()),
        Err(e) => fail!("sequence 1 then 3, and no status request: {e}"),
    }
}

fn node_event(t: &mut Tester, name: &str, events: &[EdgeNodeEvent], what: &str) -> CaseOutcome {
    let bytes: Vec<u8> = events
        .iter()
        .flat_map(|e| frame(&Envelope::new(e.clone())))
        .collect();
    accepted_then(t, name, &bytes, what)
}

fn duplicate(t: &mut Tester) -> CaseOutcome {
    let (mut a, _) = t.open("duplicate")?;
    let (b, r) = t.say(t.hello("duplicate"))?;
    t.keep(b);
    if !r.accepted {
        t.keep(a);
        if r.reject_reason() == HelloRejectReason::DuplicateEdge && r.retry_after_ms > 0 {
            return Ok(format!(
                "the second rejected DUPLICATE_EDGE, retry_after_ms {}",
                r.retry_after_ms
            ));
        }
        fail!(
            "the second rejected {} retry_after_ms {}",
            r.reject_reason().as_str_name(),
            r.retry_after_ms
        );
    }
    let ended = a.closes_within(Duration::from_secs(3));
    t.keep(a);
    match ended {
        Ok(Some(g)) if g.reason() == GoAwayReason::Superseded && g.retry_after_ms > 0 => {
            Ok(format!(
                "the first got GoAway SUPERSEDED, retry_after_ms {}",
                g.retry_after_ms
            ))
        }
        Ok(Some(g)) => fail!(
            "the first got GoAway {} retry_after_ms {}",
            g.reason().as_str_name(),
            g.retry_after_ms
        ),
        Ok(None) => fail!("the first was closed without GoAway SUPERSEDED"),
        Err(e) => fail!("both accepted, and the first: {e}"),
    }
}

fn liveness(t: &mut Tester) -> CaseOutcome {
    let (mut conn, r) = t.open("liveness")?;
    conn.keep_alive(Keepalive::None);
    let every = interval(&r);
    let silent = Instant::now();
    let closed = conn.closes_within(every * 3 + Duration::from_secs(3));
    let after = silent.elapsed();
    t.keep(conn);
    match closed {
        Ok(Some(g)) if g.reason() == GoAwayReason::HeartbeatTimeout && after >= every * 2 => {
            Ok(format!(
                "GoAway HEARTBEAT_TIMEOUT after {} ms of silence (interval {} ms)",
                after.as_millis(),
                every.as_millis()
            ))
        }
        Ok(Some(g)) => fail!(
            "GoAway {} after {} ms",
            g.reason().as_str_name(),
            after.as_millis()
        ),
        Ok(None) => fail!(
            "closed after {} ms without GoAway HEARTBEAT_TIMEOUT",
            after.as_millis()
        ),
        Err(e) => fail!("{e}"),
    }
}

fn hello_timeout(t: &mut Tester) -> CaseOutcome {
    let mut conn = t.dial()?;
    let closed = conn.closes_within(Duration::from_secs(13));
    t.keep(conn);
    match closed {
        Ok(Some(g)) if g.reason() == GoAwayReason::HelloTimeout => {
            Ok("GoAway HELLO_TIMEOUT, closed".into())
        }
        Ok(Some(g)) => fail!("GoAway {}", g.reason().as_str_name()),
        Ok(None) => fail!("closed without GoAway HELLO_TIMEOUT"),
        Err(e) => fail!("{e}"),
    }
}

fn event(t: &Tester, name: &str, edge_id: Option<&str>, sequence: u64) -> EdgeNodeEvent {
    EdgeNodeEvent {
        edge_id: edge_id.map_or_else(
            || format!("{}-{name}", t.opts.edge_id_prefix),
            str::to_owned,
        ),
        node_id: "node-1".into(),
        kind: NodeEventKind::NodeConfigured as i32,
        sequence,
        occurred_at_unix_ms: unix_ms(),
        ..Default::default()
    }
}

pub(super) fn body(t: &mut Tester, id: &str) -> CaseOutcome {
    if let Some(outcome) = super::load::body(t, id) {
        return outcome;
    }
    match id {
        "cp.flow.hello" => flow_hello(t),
        "cp.flow.heartbeat" => flow_heartbeat(t),
        "cp.hello.empty_id" => empty_id(t),
        "cp.hello.invalid" => invalid(t),
        "cp.hello.version" => version(t),
        "cp.hello.first" => first(t),
        "cp.hello.second" => second(t),
        "cp.frame.zero_length" => accepted_then(t, "zero-length", &[0, 0, 0, 0], "length 0"),
        "cp.frame.too_large" => pre_hello(
            t,
            &(256 * 1024 + 1u32).to_be_bytes(),
            "length 256 KiB + 1 before the hello",
        ),
        "cp.frame.undecodable" => accepted_then(t, "undecodable", &[0, 0, 0, 1, 0x0f], "body 0x0f"),
        "cp.frame.limit" => limit(t),
        "cp.direction" => accepted_then(
            t,
            "direction",
            &frame(&Envelope::correlated(1, EdgeStatusRequest::default())),
            "a status request",
        ),
        "cp.unknown_body" => tolerated(
            t,
            "unknown-body",
            &[0, 0, 0, 3, 0x82, 0x01, 0x00],
            "body field 16",
        ),
        "cp.heartbeat_ack" => tolerated(
            t,
            "heartbeat-ack",
            &frame(&Envelope::new(HeartbeatAck { sequence: 5 })),
            "a heartbeat ack",
        ),
        "cp.status.never_issued" => never_issued(t),
        "cp.status.edge_id" => status_edge_id(t),
        "cp.node_event.edge_id" => {
            let e = event(t, "event-edge-id", Some("conformance-someone-else"), 2);
            node_event(t, "event-edge-id", &[e], "a node event of another Edge")
        }
        "cp.node_event.sequence" => {
            let e = event(t, "event-sequence", None, 2);
            node_event(
                t,
                "event-sequence",
                &[e.clone(), e],
                "node event sequence 2 twice",
            )
        }
        "cp.node_event.gap" => gap(t),
        "cp.command.unknown_id" => {
            let r = EdgeCommandResponse {
                command_id: "conformance-never-sent".into(),
                accepted: true,
                ..Default::default()
            };
            tolerated(
                t,
                "unknown-command",
                &frame(&Envelope::new(r)),
                "a response for an unknown command",
            )
        }
        "cp.flow.command" => kept(
            t,
            "cmd-flow",
            &[Response(true), Event(1, Accepted), Event(2, Succeeded)],
            "response, ACCEPTED, SUCCEEDED",
        ),
        "cp.command.event_before_response" => refused(
            t,
            "cmd-early",
            &[Event(1, Accepted)],
            "ACCEPTED before the response",
        ),
        "cp.command.response_unsolicited" => refused(
            t,
            "cmd-twice",
            &[Response(true), Response(true)],
            "a second response",
        ),
        "cp.command.event_after_rejection" => refused(
            t,
            "cmd-rejected",
            &[Response(false), Event(1, Accepted)],
            "an event after a rejection",
        ),
        "cp.command.event_first_not_accepted" => refused(
            t,
            "cmd-first",
            &[Response(true), Event(1, Running)],
            "event 1 RUNNING",
        ),
        "cp.command.event_phase" => refused(
            t,
            "cmd-phase",
            &[Response(true), Event(1, CommandPhase::Unspecified)],
            "phase UNSPECIFIED",
        ),
        "cp.command.event_sequence" => refused(
            t,
            "cmd-sequence",
            &[
                Response(true),
                Event(1, Accepted),
                Event(3, Running),
                Event(2, Running),
            ],
            "sequence 3 then 2",
        ),
        "cp.command.event_backwards" => refused(
            t,
            "cmd-backwards",
            &[
                Response(true),
                Event(1, Accepted),
                Event(2, Running),
                Event(3, Accepted),
            ],
            "RUNNING then ACCEPTED",
        ),
        "cp.command.event_after_terminal" => refused(
            t,
            "cmd-terminal",
            &[
                Response(true),
                Event(1, Accepted),
                Event(2, Succeeded),
                Event(3, Running),
            ],
            "an event after SUCCEEDED",
        ),
        "cp.command.event_duplicate" => kept(
            t,
            "cmd-duplicate",
            &[Response(true), Event(1, Accepted), Event(1, Accepted)],
            "ACCEPTED twice",
        ),
        "cp.hello.duplicate" => duplicate(t),
        "cp.liveness" => liveness(t),
        "cp.hello.timeout" => hello_timeout(t),
        "cp.send_limits" => match t.refused.first() {
            None => Ok("every frame within the limits".into()),
            Some(first) => fail!("{} frame(s) refused, the first: {first}", t.refused.len()),
        },
        other => fail!("no case {other}"),
    }
}

//! Commands against a Control Plane (PROTOCOL.md §4.4). A Control Plane sends a
//! command only when its operator asks, and no message on the wire asks it to: these
//! cases need `--admin URL`, an iop admin API (`POST /v1/edges/{id}/commands`) the
//! tester asks through; without one they are skipped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use iop_proto::{
    Body, CommandPhase, CommandRejectReason, EdgeCommandEvent, EdgeCommandRequest,
    EdgeCommandResponse, Envelope, Heartbeat,
};

use super::{ANSWER, Tester, closes};
use crate::report::{CaseOutcome, NotPassed};
use crate::wire::{Conn, unix_ms};
use crate::{fail, skip};

/// What the tester's Edge answers a command with, in order.
pub(super) enum Say {
    /// `command_response`, accepted or rejected.
    Response(bool),
    /// `command_event` with this sequence and phase.
    Event(u32, CommandPhase),
}

/// Asks the admin API at `admin` to send `edge.ping` to `edge_id` (in the background:
/// the API answers once the Edge has, which the case decides).
fn ask_admin(admin: SocketAddr, edge_id: &str) -> std::thread::JoinHandle<()> {
    let body = r#"{"operation":"edge.ping","timeoutMs":3000}"#;
    let request = format!(
        "POST /v1/edges/{edge_id}/commands HTTP/1.1\r\nHost: {admin}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    std::thread::spawn(move || {
        if let Ok(mut stream) = TcpStream::connect_timeout(&admin, Duration::from_secs(5)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = stream.write_all(request.as_bytes());
            let mut sink = Vec::new();
            let _ = stream.read_to_end(&mut sink);
        }
    })
}

/// A session of `<prefix>-name`, a command asked for through the admin API, and the
/// request as it reached the tester's Edge.
fn commanded(t: &mut Tester, name: &str) -> Result<(Conn, EdgeCommandRequest), NotPassed> {
    let Some(admin) = t.opts.admin else {
        skip!("no --admin: a Control Plane sends a command only when its operator asks");
    };
    let (mut conn, _) = t.open(name)?;
    let edge_id = t.hello(name).edge_id;
    let asked = ask_admin(admin, &edge_id);
    let request = conn.expect(ANSWER, |env| match &env.body {
        Some(Body::CommandRequest(r)) => Some(r.clone()),
        _ => None,
    });
    // The admin API waits for the answer the case gives; it is not read here.
    drop(asked);
    let request = request.map_err(|e| NotPassed::Fail(format!("no command_request: {e}")))?;
    if request.command_id.is_empty() || request.command_id.len() > 128 {
        fail!("command_id of {} bytes", request.command_id.len());
    }
    if request.operation != "edge.ping" {
        fail!("asked for edge.ping, the Edge got {:?}", request.operation);
    }
    Ok((conn, request))
}

fn send(conn: &mut Conn, command_id: &str, said: &[Say]) {
    for s in said {
        let env = match *s {
            Say::Response(accepted) => Envelope::new(EdgeCommandResponse {
                command_id: command_id.into(),
                accepted,
                reject_reason: if accepted {
                    0
                } else {
                    CommandRejectReason::Busy as i32
                },
                message: String::new(),
            }),
            Say::Event(sequence, phase) => Envelope::new(EdgeCommandEvent {
                command_id: command_id.into(),
                phase: phase as i32,
                sequence,
                occurred_at_unix_ms: unix_ms(),
                ..Default::default()
            }),
        };
        let _ = conn.send(&env);
    }
}

/// Answers a command as `said` does, and expects a protocol error.
pub(super) fn refused(t: &mut Tester, name: &str, said: &[Say], what: &str) -> CaseOutcome {
    let (mut conn, request) = commanded(t, name)?;
    send(&mut conn, &request.command_id, said);
    closes(t, conn, what)
}

/// Answers a command as `said` does, and expects the session to go on.
pub(super) fn kept(t: &mut Tester, name: &str, said: &[Say], what: &str) -> CaseOutcome {
    let (mut conn, request) = commanded(t, name)?;
    send(&mut conn, &request.command_id, said);
    let _ = conn.send(&Envelope::new(Heartbeat {
        sequence: 778,
        sent_at_unix_ms: unix_ms(),
    }));
    let acked = conn.expect(ANSWER, |env| match &env.body {
        Some(Body::HeartbeatAck(a)) if a.sequence == 778 => Some(()),
        _ => None,
    });
    let id = request.command_id;
    t.keep(conn);
    acked.map_err(|e| NotPassed::Fail(format!("{what}: the session did not go on: {e}")))?;
    Ok(format!("{what} ({id}): the session goes on"))
}

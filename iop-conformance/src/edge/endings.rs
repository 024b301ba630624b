//! What ends a session: a GoAway, a rejected hello, silence, and what the Edge must
//! refuse (PROTOCOL.md §2, §4.1, §4.2, §9).

use std::time::{Duration, Instant};

use iop_proto::{
    EdgeHelloResponse, EdgeStatusRequest, Envelope, GoAway, GoAwayReason, HelloRejectReason,
};

use super::{HEARTBEAT, Tester};
use crate::fail;
use crate::report::{CaseOutcome, NotPassed};
use crate::wire::frame;

/// The time from `sent` (just before the tester sent what carried `retry_after_ms`:
/// the Edge cannot have read it sooner) to the Edge's next dial.
fn redial_gap(t: &mut Tester, sent: Instant) -> Result<Duration, NotPassed> {
    let (mut conn, hello, at) = t.dial()?;
    t.accept(&mut conn, &hello, super::MAX_FRAME_LEN);
    t.ended(conn, Instant::now());
    Ok(at.saturating_duration_since(sent))
}

const RETRY_AFTER_MS: u32 = 2_000;

pub(super) fn go_away(t: &mut Tester) -> CaseOutcome {
    let g = GoAway {
        reason: GoAwayReason::Draining as i32,
        message: "conformance".into(),
        retry_after_ms: RETRY_AFTER_MS,
    };
    let sent = Instant::now();
    t.send(&Envelope::new(g))?;
    t.hang_up();
    let gap = redial_gap(t, sent)?;
    if gap < Duration::from_millis(u64::from(RETRY_AFTER_MS)) {
        fail!("dialled again after {} ms", gap.as_millis());
    }
    Ok(format!("dialled again after {} ms", gap.as_millis()))
}

pub(super) fn rejected(t: &mut Tester) -> CaseOutcome {
    t.hang_up();
    let (mut conn, _, _) = t.dialled()?;
    let response = EdgeHelloResponse {
        reject_reason: HelloRejectReason::DuplicateEdge as i32,
        message: "conformance".into(),
        retry_after_ms: RETRY_AFTER_MS,
        ..Default::default()
    };
    let sent = Instant::now();
    let _ = conn.send(&Envelope::new(response));
    t.ended(conn, Instant::now());
    let gap = redial_gap(t, sent)?;
    if gap < Duration::from_millis(u64::from(RETRY_AFTER_MS)) {
        fail!("dialled again after {} ms", gap.as_millis());
    }
    Ok(format!("dialled again after {} ms", gap.as_millis()))
}

pub(super) fn liveness(t: &mut Tester) -> CaseOutcome {
    let (mut conn, began) = t.take()?;
    conn.keep_alive(crate::wire::Keepalive::None);
    let silent = Instant::now();
    let closed = conn.closes_within(HEARTBEAT * 6);
    let after = silent.elapsed();
    t.ended(conn, began);
    let go_away = match closed {
        Ok(g) => g,
        Err(e) => fail!("{e} of silence (3 intervals are 3 s)"),
    };
    if after < HEARTBEAT * 2 {
        fail!(
            "left after {} ms of silence, before 3 intervals",
            after.as_millis()
        );
    }
    let how = go_away.map_or("no GoAway".to_owned(), |g| {
        format!("GoAway {}", g.reason().as_str_name())
    });
    Ok(format!(
        "closed after {} ms of silence ({how})",
        after.as_millis()
    ))
}

pub(super) fn direction(t: &mut Tester) -> CaseOutcome {
    let again = EdgeHelloResponse {
        accepted: true,
        session_id: 99,
        ..Default::default()
    };
    closes_on(t, &frame(&Envelope::new(again)), "a second hello_response")
}

pub(super) fn limit(t: &mut Tester) -> CaseOutcome {
    let request = EdgeStatusRequest {
        node_ids: vec!["n".repeat(129)],
        ..Default::default()
    };
    closes_on(
        t,
        &frame(&Envelope::correlated(12, request)),
        "node id of 129 bytes",
    )
}

pub(super) fn unexpected(t: &mut Tester) -> CaseOutcome {
    t.hang_up();
    let (mut conn, _, _) = t.dialled()?;
    let began = Instant::now();
    let _ = conn.send(&Envelope::correlated(13, EdgeStatusRequest::default()));
    let closed = conn.closes_within(Duration::from_secs(3));
    t.ended(conn, began);
    match closed {
        Ok(g) => Ok(format!(
            "closed ({})",
            g.map_or("no GoAway".into(), |g| g.reason().as_str_name().to_owned())
        )),
        Err(e) => fail!("{e}"),
    }
}

/// Accepts the next hello with `max_frame_len` and `version` (0: the tester's), and
/// expects the Edge to close.
pub(super) fn accepted_then_closes(
    t: &mut Tester,
    max_frame_len: u32,
    version: u32,
    what: &str,
) -> CaseOutcome {
    t.hang_up();
    let (mut conn, _, _) = t.dialled()?;
    let response = EdgeHelloResponse {
        accepted: true,
        protocol_version: version,
        heartbeat_interval_ms: HEARTBEAT.as_millis() as u32,
        session_id: 1_000,
        max_frame_len,
        ..Default::default()
    };
    let _ = conn.send(&Envelope::new(response));
    let began = Instant::now();
    let closed = conn.closes_within(Duration::from_secs(3));
    t.ended(conn, began);
    match closed {
        Ok(g) => Ok(format!(
            "{what}: closed ({})",
            g.map_or("no GoAway".into(), |g| g.reason().as_str_name().to_owned())
        )),
        Err(e) => fail!("{what}: {e}"),
    }
}

/// Sends `bad` on a live session and expects the Edge to close it as a protocol
/// error (a `GoAway{PROTOCOL_ERROR}` before is welcome, not required).
pub(super) fn closes_on(t: &mut Tester, bad: &[u8], what: &str) -> CaseOutcome {
    let (mut conn, began) = t.take()?;
    let _ = conn.send_raw(bad);
    let closed = conn.closes_within(Duration::from_secs(3));
    t.ended(conn, began);
    match closed {
        Ok(Some(g)) if g.reason() == iop_proto::GoAwayReason::ProtocolError => {
            Ok(format!("{what}: GoAway PROTOCOL_ERROR, closed"))
        }
        Ok(Some(g)) => Err(NotPassed::Fail(format!(
            "{what}: closed, but with GoAway {} (expected PROTOCOL_ERROR)",
            g.reason().as_str_name()
        ))),
        Ok(None) => Ok(format!("{what}: closed (no GoAway)")),
        Err(e) => Err(NotPassed::Fail(format!("{what}: {e}"))),
    }
}

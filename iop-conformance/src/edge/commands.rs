//! Commands: the flow of one, idempotency, rejections, and the replay after a
//! reconnect (PROTOCOL.md §4.4).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use iop_proto::{Body, CommandPhase, CommandRejectReason, EdgeCommandRequest, Envelope};

use super::Tester;
use crate::report::{CaseOutcome, NotPassed};
use crate::{fail, skip};

use super::flow::ANSWER;

fn request(t: &Tester, id: &str) -> EdgeCommandRequest {
    EdgeCommandRequest {
        command_id: id.into(),
        operation: t.opts.operation.clone(),
        timeout_ms: 10_000,
        ..Default::default()
    }
}

/// The response to command `id`, and the events up to its terminal phase when accepted.
pub(super) fn run_command(
    t: &mut Tester,
    req: EdgeCommandRequest,
) -> Result<
    (
        iop_proto::EdgeCommandResponse,
        Vec<iop_proto::EdgeCommandEvent>,
    ),
    NotPassed,
> {
    let id = req.command_id.clone();
    t.send(&Envelope::new(req))?;
    let mut events = Vec::new();
    let response = t.expect(ANSWER, |env| match &env.body {
        Some(Body::CommandResponse(r)) if r.command_id == id => Some(r.clone()),
        Some(Body::CommandEvent(e)) if e.command_id == id => {
            events.push(e.clone());
            None
        }
        _ => None,
    })?;
    if !events.is_empty() {
        fail!("{} event(s) of {id} before its response", events.len());
    }
    if !response.accepted {
        return Ok((response, events));
    }
    loop {
        let e = t.expect(Duration::from_secs(15), |env| match &env.body {
            Some(Body::CommandEvent(e)) if e.command_id == id => Some(e.clone()),
            _ => None,
        })?;
        let terminal = !matches!(e.phase(), CommandPhase::Accepted | CommandPhase::Running);
        events.push(e);
        if terminal {
            return Ok((response, events));
        }
    }
}

pub(super) fn advertised(t: &Tester) -> Result<(), NotPassed> {
    match &t.hello {
        Some(h) if h.operations.contains(&t.opts.operation) => Ok(()),
        _ => skip!(
            "the Edge does not advertise {:?} (--operation)",
            t.opts.operation
        ),
    }
}

pub(super) fn command(t: &mut Tester) -> CaseOutcome {
    advertised(t)?;
    let req = request(t, "conformance-1");
    let (response, events) = run_command(t, req.clone())?;
    if !response.accepted {
        fail!(
            "{:?} rejected: {} {:?}",
            t.opts.operation,
            response.reject_reason().as_str_name(),
            response.message
        );
    }
    let sequences: Vec<u32> = events.iter().map(|e| e.sequence).collect();
    if events
        .first()
        .is_none_or(|e| e.sequence != 1 || e.phase() != CommandPhase::Accepted)
    {
        fail!("the first event is not ACCEPTED with sequence 1: {sequences:?}");
    }
    if sequences.windows(2).any(|w| w[1] <= w[0]) {
        fail!("sequences {sequences:?} do not increase");
    }
    let last = events.last().map(|e| (e.sequence, e.phase()));
    t.command = last.map(|(seq, _)| (req, seq));
    // Nothing follows the terminal phase.
    if let Ok(extra) = t.expect(Duration::from_millis(500), |env| match &env.body {
        Some(Body::CommandEvent(e)) if e.command_id == "conformance-1" => Some(e.sequence),
        _ => None,
    }) {
        fail!("an event (sequence {extra}) after the terminal phase");
    }
    let phases: Vec<&str> = events.iter().map(|e| e.phase().as_str_name()).collect();
    Ok(format!("accepted; events {phases:?}"))
}

pub(super) fn held_command(t: &Tester) -> Result<(EdgeCommandRequest, u32), NotPassed> {
    match &t.command {
        Some(c) => Ok(c.clone()),
        None => skip!("the command case did not complete a command"),
    }
}

pub(super) fn repeat(t: &mut Tester) -> CaseOutcome {
    let (req, last) = held_command(t)?;
    let id = req.command_id.clone();
    t.send(&Envelope::new(req))?;
    let response = t.expect(ANSWER, |env| match &env.body {
        Some(Body::CommandResponse(r)) if r.command_id == id => Some(r.clone()),
        _ => None,
    })?;
    if !response.accepted {
        fail!(
            "the repeat was answered {} (the original was accepted)",
            response.reject_reason().as_str_name()
        );
    }
    let replayed = t.expect(ANSWER, |env| match &env.body {
        Some(Body::CommandEvent(e)) if e.command_id == id => Some(e.sequence),
        _ => None,
    })?;
    if replayed != last {
        fail!("the latest event was sequence {last}, the repeat got {replayed}");
    }
    Ok(format!("original response and event {last} again"))
}

/// Sends `req` and expects it rejected with `reason`.
pub(super) fn rejected_with(
    t: &mut Tester,
    req: EdgeCommandRequest,
    reason: CommandRejectReason,
) -> CaseOutcome {
    let (response, _) = run_command(t, req)?;
    if response.accepted {
        fail!("accepted (expected {})", reason.as_str_name());
    }
    if response.reject_reason() != reason {
        fail!(
            "rejected {} (expected {})",
            response.reject_reason().as_str_name(),
            reason.as_str_name()
        );
    }
    Ok(format!(
        "rejected {}: {:?}",
        reason.as_str_name(),
        response.message
    ))
}

pub(super) fn conflict(t: &mut Tester) -> CaseOutcome {
    let (mut req, _) = held_command(t)?;
    req.metadata = BTreeMap::from([("conformance".to_owned(), "other".to_owned())])
        .into_iter()
        .collect();
    rejected_with(t, req, CommandRejectReason::InvalidCommand)
}

pub(super) fn operation(t: &mut Tester) -> CaseOutcome {
    let mut req = request(t, "conformance-2");
    req.operation = "conformance.no-such-operation".into();
    rejected_with(t, req, CommandRejectReason::UnknownOperation)
}

pub(super) fn command_id(t: &mut Tester) -> CaseOutcome {
    let req = request(t, "");
    rejected_with(t, req, CommandRejectReason::InvalidCommand)
}

pub(super) fn selector(t: &mut Tester) -> CaseOutcome {
    advertised(t)?;
    let mut req = request(t, "conformance-3");
    req.target_selector = "conformance?!".into();
    rejected_with(t, req, CommandRejectReason::InvalidSelector)
}

pub(super) fn replay(t: &mut Tester) -> CaseOutcome {
    let (req, last) = held_command(t)?;
    t.hang_up();
    let (mut conn, hello, _) = t.dialled()?;
    if !hello.inflight_command_ids.contains(&req.command_id) {
        fail!(
            "the hello after a reconnect does not list {:?} (it lists {:?})",
            req.command_id,
            hello.inflight_command_ids
        );
    }
    t.accept(&mut conn, &hello, super::MAX_FRAME_LEN);
    let began = Instant::now();
    let id = req.command_id.clone();
    let replayed = conn.expect(ANSWER, |env| match &env.body {
        Some(Body::CommandEvent(e)) if e.command_id == id => Some(e.sequence),
        _ => None,
    });
    t.ended(conn, began);
    match replayed {
        Ok(seq) if seq == last => Ok(format!("listed in the hello; event {seq} sent again")),
        Ok(seq) => fail!("replayed sequence {seq}, the latest was {last}"),
        Err(e) => fail!("listed in the hello, but its latest event was not sent again: {e}"),
    }
}

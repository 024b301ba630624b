//! The session's flow: the hello, heartbeats, status, and the run-wide checks.

use std::time::{Duration, Instant};

use iop_proto::{
    Body, EdgeStatusRequest, EdgeStatusResponse, Envelope, ProviderHealth, ProviderStatus,
};

use super::{HEARTBEAT, Tester};
use crate::report::{CaseOutcome, NotPassed};
use crate::{fail, skip};

pub(super) const ANSWER: Duration = Duration::from_secs(5);

pub(super) fn hello(t: &mut Tester) -> CaseOutcome {
    t.session()?;
    let Some(h) = t.hello.clone() else {
        fail!("no hello")
    };
    let id_ok = !h.edge_id.is_empty()
        && h.edge_id.len() <= 128
        && h.edge_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !id_ok {
        fail!("edge_id {:?} breaks [A-Za-z0-9._-]{{1,128}}", h.edge_id);
    }
    if let Some(want) = &t.opts.edge_id
        && *want != h.edge_id
    {
        fail!("edge_id {:?}, expected {want:?}", h.edge_id);
    }
    if h.protocol_version == 0 {
        fail!("protocol_version 0");
    }
    if h.operations.iter().any(String::is_empty) {
        fail!("an empty operation name");
    }
    Ok(format!(
        "edge_id {:?}, protocol_version {}, {} operations",
        h.edge_id,
        h.protocol_version,
        h.operations.len()
    ))
}

pub(super) fn heartbeats(t: &mut Tester) -> CaseOutcome {
    let mut sequences = Vec::new();
    let until = Instant::now() + HEARTBEAT * 3 + HEARTBEAT / 2;
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        match t.expect(left, |env| match &env.body {
            Some(Body::Heartbeat(hb)) => Some(hb.sequence),
            _ => None,
        }) {
            Ok(seq) => sequences.push(seq),
            Err(NotPassed::Fail(e)) if e.starts_with("nothing within") => break,
            Err(e) => return Err(e),
        }
    }
    if sequences.len() < 2 {
        fail!(
            "{} heartbeats in 3.5 s at an interval of 1 s",
            sequences.len()
        );
    }
    if sequences.windows(2).any(|w| w[1] <= w[0]) {
        fail!("sequences {sequences:?} do not increase");
    }
    Ok(format!(
        "{} heartbeats in 3.5 s, sequences {sequences:?}",
        sequences.len()
    ))
}

/// Asks for a status and reads the answer.
pub(super) fn ask(
    t: &mut Tester,
    correlation_id: u64,
    request: EdgeStatusRequest,
) -> Result<EdgeStatusResponse, NotPassed> {
    t.send(&Envelope::correlated(correlation_id, request))?;
    t.expect(ANSWER, |env| match &env.body {
        Some(Body::StatusResponse(r)) if env.correlation_id == correlation_id => Some(r.clone()),
        _ => None,
    })
}

pub(super) fn status(t: &mut Tester) -> CaseOutcome {
    let r = ask(t, 7, EdgeStatusRequest::default())?;
    let edge_id = t
        .hello
        .as_ref()
        .map(|h| h.edge_id.clone())
        .unwrap_or_default();
    if r.edge_id != edge_id {
        fail!("edge_id {:?}, the hello said {edge_id:?}", r.edge_id);
    }
    if r.nodes.windows(2).any(|w| w[0].node_id >= w[1].node_id) {
        fail!("nodes not in strictly increasing id order");
    }
    let mut providers = 0;
    for n in &r.nodes {
        for p in &n.provider_snapshots {
            providers += 1;
            let numbers = p.numbers();
            let offline =
                p.health() == ProviderHealth::Offline || p.status() == ProviderStatus::Unavailable;
            if offline && (numbers.iter().any(|n| *n != 0) || p.admission_eligible) {
                fail!(
                    "{}/{} is offline but reports {numbers:?}, eligible {}",
                    n.node_id,
                    p.provider_id,
                    p.admission_eligible
                );
            }
            if p.long_context_in_flight > p.in_flight || p.long_context_capacity > p.capacity {
                fail!(
                    "{}/{}: long-context numbers above the totals",
                    n.node_id,
                    p.provider_id
                );
            }
            if p.admission_eligible && p.in_flight >= p.capacity {
                fail!(
                    "{}/{} is eligible with no room ({} of {})",
                    n.node_id,
                    p.provider_id,
                    p.in_flight,
                    p.capacity
                );
            }
        }
    }
    Ok(format!(
        "{} nodes, {providers} providers, truncated {}",
        r.nodes.len(),
        r.truncated
    ))
}

pub(super) fn scope(t: &mut Tester) -> CaseOutcome {
    let none = ask(
        t,
        8,
        EdgeStatusRequest {
            node_ids: vec!["conformance-no-such-node".into()],
            ..Default::default()
        },
    )?;
    if !none.nodes.is_empty() {
        fail!("asked for an unknown node, got {} nodes", none.nodes.len());
    }
    let all = ask(t, 9, EdgeStatusRequest::default())?;
    let Some(first) = all.nodes.first().map(|n| n.node_id.clone()) else {
        return Ok("an unknown node id left out (the Edge has no node to page after)".into());
    };
    let after = ask(
        t,
        10,
        EdgeStatusRequest {
            start_after_node_id: first.clone(),
            ..Default::default()
        },
    )?;
    if let Some(n) = after.nodes.iter().find(|n| n.node_id <= first) {
        fail!(
            "start_after_node_id {first:?} answered with {:?}",
            n.node_id
        );
    }
    if after.nodes.len() + 1 != all.nodes.len() && !after.truncated {
        fail!(
            "after {first:?}: {} nodes of the {} after it",
            after.nodes.len(),
            all.nodes.len() - 1
        );
    }
    Ok(format!(
        "unknown id left out; {} nodes after {first:?}",
        after.nodes.len()
    ))
}

pub(super) fn unknown_body(t: &mut Tester) -> CaseOutcome {
    // Field 16 of the envelope, an empty message: a body from a newer version.
    t.session()?
        .send_raw(&[0, 0, 0, 3, 0x82, 0x01, 0x00])
        .map_err(|e| NotPassed::Fail(e.to_string()))?;
    ask(t, 11, EdgeStatusRequest::default())?;
    Ok("ignored; the next status request was answered".into())
}

pub(super) fn send_limits(t: &mut Tester) -> CaseOutcome {
    if let Some((mut conn, began)) = t.live.take() {
        t.absorb(&mut conn);
        t.live = Some((conn, began));
    }
    match t.refused.first() {
        None => Ok(format!(
            "{} bytes read, every frame within the limits",
            t.read.len()
        )),
        Some(first) => fail!("{} frame(s) refused, the first: {first}", t.refused.len()),
    }
}

pub(super) fn redaction(t: &mut Tester) -> CaseOutcome {
    if t.opts.secrets.is_empty() {
        skip!("no --secret given");
    }
    for secret in &t.opts.secrets {
        if !secret.is_empty() && t.read.windows(secret.len()).any(|w| w == secret.as_bytes()) {
            fail!("a frame holds the secret {secret:?}");
        }
    }
    Ok(format!(
        "{} secrets absent from {} bytes",
        t.opts.secrets.len(),
        t.read.len()
    ))
}

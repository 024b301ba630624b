//! Load updates (PROTOCOL.md §4.8) from an Edge: the tester opens a session asking for
//! updates every 250 ms, watches that nothing is pushed before a full status answer,
//! then reads what the Edge pushes for three seconds. An Edge that does not offer
//! updates is reported as such (skipped); one that offers them and stays idle sends
//! none, which passes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use iop_proto::limits::{LOAD_UPDATE_BURST, MAX_LOAD_UPDATE_PROVIDERS};
use iop_proto::{Body, EdgeLoadUpdate, EdgeStatusRequest, Envelope};

use super::flow::ANSWER;
use super::{MAX_FRAME_LEN, Tester};
use crate::report::{CaseOutcome, NotPassed};
use crate::wire::{Conn, Got};
use crate::{fail, skip};

/// The interval the tester asks for.
const INTERVAL: Duration = Duration::from_millis(250);
/// How long the tester reads the Edge's updates.
const WATCH: Duration = Duration::from_secs(3);
/// Arrival jitter forgiven on loopback.
const SLACK: Duration = Duration::from_millis(60);

pub(super) fn load_updates(t: &mut Tester) -> CaseOutcome {
    t.hang_up();
    let (mut conn, hello, _) = t.dialled()?;
    let began = Instant::now();
    if !hello.load_updates {
        t.accept(&mut conn, &hello, MAX_FRAME_LEN);
        t.live = Some((conn, began));
        skip!("the Edge does not offer load updates (load_updates false in its hello)");
    }
    t.accept_with(
        &mut conn,
        &hello,
        MAX_FRAME_LEN,
        INTERVAL.as_millis() as u32,
    );
    let outcome = watch(&mut conn);
    t.live = Some((conn, began));
    outcome
}

fn watch(conn: &mut Conn) -> CaseOutcome {
    // Nothing before a full status answer.
    let early = conn
        .idle(Duration::from_millis(600))
        .map_err(|e| NotPassed::Fail(format!("the session ended: {e}")))?;
    if early
        .iter()
        .any(|e| matches!(e.body, Some(Body::LoadUpdate(_))))
    {
        fail!("a load update before any status request was answered");
    }
    base(conn)?;
    let mut updates: Vec<(Instant, EdgeLoadUpdate)> = Vec::new();
    let until = Instant::now() + WATCH;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match conn.recv(left) {
            Got::Frame(env) => {
                if let Some(Body::LoadUpdate(u)) = env.body {
                    updates.push((Instant::now(), u));
                }
            }
            Got::Silent => break,
            Got::Closed => fail!("the session ended while the tester watched its updates"),
            Got::Refused(e) => fail!("a frame the protocol refuses: {e}"),
        }
    }
    check(&updates)?;
    let providers: usize = updates.iter().map(|(_, u)| u.providers.len()).sum();
    let resyncs = updates.iter().filter(|(_, u)| u.resync).count();
    Ok(match updates.len() {
        0 => "no load changed while watched: nothing pushed (an idle Edge sends none)".into(),
        n => format!(
            "{n} updates in {} s after the full status ({providers} provider reports, {resyncs} resyncs), within one per {} ms",
            WATCH.as_secs(),
            INTERVAL.as_millis()
        ),
    })
}

/// Asks for every node, page after page, until an answer is not truncated.
fn base(conn: &mut Conn) -> Result<(), NotPassed> {
    let mut start_after = String::new();
    for correlation_id in 1..=64 {
        let request = EdgeStatusRequest {
            node_ids: Vec::new(),
            start_after_node_id: start_after.clone(),
        };
        let _ = conn.send(&Envelope::correlated(correlation_id, request));
        let r = conn
            .expect(ANSWER, |env| match &env.body {
                Some(Body::StatusResponse(r)) if env.correlation_id == correlation_id => {
                    Some(r.clone())
                }
                Some(Body::LoadUpdate(_)) if correlation_id == 1 => Some(Default::default()),
                _ => None,
            })
            .map_err(|e| NotPassed::Fail(format!("no status answer: {e}")))?;
        if r.edge_id.is_empty() && correlation_id == 1 {
            fail!("a load update before the first status request was answered");
        }
        match r.nodes.last() {
            Some(last) if r.truncated => start_after = last.node_id.clone(),
            _ => return Ok(()),
        }
    }
    fail!("64 pages and the status still truncated")
}

/// The §4.8 and §5 rules over what was pushed.
fn check(updates: &[(Instant, EdgeLoadUpdate)]) -> Result<(), NotPassed> {
    let mut tat: Option<Instant> = None;
    let tolerance = INTERVAL * (LOAD_UPDATE_BURST - 1) + SLACK;
    for (i, (at, u)) in updates.iter().enumerate() {
        let want = i as u64 + 1;
        if u.sequence != want {
            fail!("update sequence {} where {want} was due", u.sequence);
        }
        let due = tat.map_or(*at, |t| t.max(*at));
        if due.saturating_duration_since(*at) > tolerance {
            fail!(
                "update {} past the burst of {LOAD_UPDATE_BURST} at one per {} ms",
                u.sequence,
                INTERVAL.as_millis()
            );
        }
        tat = Some(due + INTERVAL);
        if u.providers.len() > MAX_LOAD_UPDATE_PROVIDERS {
            fail!("{} providers in update {}", u.providers.len(), u.sequence);
        }
        if u.resync && !u.providers.is_empty() {
            fail!("update {} says resync and carries providers", u.sequence);
        }
        if !u.resync && u.providers.is_empty() {
            fail!("update {} carries nothing", u.sequence);
        }
        let mut seen = BTreeSet::new();
        for p in &u.providers {
            if !seen.insert((p.node_id.as_str(), p.provider_id.as_str())) {
                fail!(
                    "{}/{} twice in update {}",
                    p.node_id,
                    p.provider_id,
                    u.sequence
                );
            }
            if !p.keeps_zero_rule() {
                fail!(
                    "{}/{} offline or its node not connected, yet {:?}, eligible {} (§5)",
                    p.node_id,
                    p.provider_id,
                    p.numbers(),
                    p.admission_eligible
                );
            }
        }
    }
    Ok(())
}

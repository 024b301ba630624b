//! Load updates (PROTOCOL.md §4.8) against a Control Plane: the tester offers them in
//! its hello, answers the first status with one node of one provider, then pushes. A
//! Control Plane that does not ask for them (`load_update_interval_ms` 0) is reported
//! as such: those cases are skipped, except the one that checks it refuses updates
//! nobody negotiated.

use std::time::Duration;

use iop_proto::{
    Body, EdgeHelloRequest, EdgeLoadUpdate, EdgeNodeSnapshot, EdgeStatusResponse, Envelope,
    Heartbeat, NodeState, ProviderHealth, ProviderLoad, ProviderSnapshot, ProviderStatus,
};

use super::{ANSWER, Tester, closes};
use crate::report::{CaseOutcome, NotPassed};
use crate::wire::{Conn, unix_ms};
use crate::{fail, skip};

const NODE: &str = "n-1";
const PROVIDER: &str = "p-1";

/// The numbers of the tester's one provider, `in_flight` of 4 taken.
fn load(provider: &str, in_flight: u32) -> ProviderLoad {
    ProviderLoad {
        node_id: NODE.into(),
        provider_id: provider.into(),
        status: ProviderStatus::Available as i32,
        health: ProviderHealth::Healthy as i32,
        capacity: 4,
        in_flight,
        admission_eligible: in_flight < 4,
        node_connected: true,
        ..Default::default()
    }
}

fn update(sequence: u64, providers: Vec<ProviderLoad>) -> Envelope {
    Envelope::new(EdgeLoadUpdate {
        sequence,
        observed_at_unix_ms: unix_ms(),
        providers,
        resync: false,
    })
}

fn hello(t: &Tester, name: &str, offer: bool) -> EdgeHelloRequest {
    let mut h = t.hello(name);
    h.load_updates = offer;
    h
}

/// A status request, by its correlation id.
fn asked(env: &Envelope) -> Option<u64> {
    match &env.body {
        Some(Body::StatusRequest(_)) => Some(env.correlation_id),
        _ => None,
    }
}

/// Answers status request `correlation_id` in full: one READY node, one provider.
fn answer(t: &Tester, name: &str, conn: &mut Conn, correlation_id: u64) {
    let numbers = load(PROVIDER, 0);
    let node = EdgeNodeSnapshot {
        node_id: NODE.into(),
        connected: true,
        state: NodeState::Ready as i32,
        generation: 1,
        provider_snapshots: vec![ProviderSnapshot {
            provider_id: PROVIDER.into(),
            status: numbers.status,
            health: numbers.health,
            capacity: numbers.capacity,
            admission_eligible: true,
            models: vec!["m".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    let r = EdgeStatusResponse {
        edge_id: t.hello(name).edge_id,
        nodes: vec![node],
        observed_at_unix_ms: unix_ms(),
        registry_revision: 1,
        truncated: false,
    };
    let _ = conn.send(&Envelope::correlated(correlation_id, r));
}

/// A session that negotiated load updates; with `based`, its first status request
/// answered in full. Skipped when the Control Plane does not ask for updates.
fn pushing(t: &mut Tester, name: &str, based: bool) -> Result<Conn, NotPassed> {
    let (mut conn, r) = t.open_with(name, hello(t, name, true))?;
    if r.load_update_interval_ms == 0 {
        t.keep(conn);
        skip!(
            "the Control Plane did not ask for load updates (load_update_interval_ms 0): it pulls status"
        );
    }
    if based {
        let Ok(first) = conn.expect(ANSWER, asked) else {
            t.keep(conn);
            skip!("the Control Plane sent no status request at the session's start");
        };
        answer(t, name, &mut conn, first);
    }
    Ok(conn)
}

/// The session goes on: a heartbeat sent after is acked, and the connection stays
/// up a second more. (Whether a status request follows says nothing: the Control
/// Plane may refresh its view at any time.)
fn goes_on(t: &mut Tester, mut conn: Conn, what: &str) -> CaseOutcome {
    let _ = conn.send(&Envelope::new(Heartbeat {
        sequence: 778,
        sent_at_unix_ms: unix_ms(),
    }));
    let acked = conn.expect(ANSWER, |env| match &env.body {
        Some(Body::HeartbeatAck(a)) if a.sequence == 778 => Some(()),
        _ => None,
    });
    let after = conn.idle(Duration::from_secs(1));
    t.keep(conn);
    acked.map_err(|e| NotPassed::Fail(format!("{what}: the session did not go on: {e}")))?;
    after.map_err(|e| NotPassed::Fail(format!("{what}: the session ended: {e}")))?;
    Ok(format!("{what}: the session goes on"))
}

/// Sends `env` after the base and expects a status request for it.
fn resyncs(t: &mut Tester, name: &str, env: &Envelope, what: &str) -> CaseOutcome {
    let mut conn = pushing(t, name, true)?;
    let _ = conn.send(env);
    let again = conn.expect(ANSWER, asked);
    t.keep(conn);
    match again {
        Ok(_) => Ok(format!("{what}: a fresh status was asked for")),
        Err(e) => fail!("{what}, and no status request: {e}"),
    }
}

/// Sends `frames` on a session and expects a protocol error.
fn refused(t: &mut Tester, mut conn: Conn, frames: &[Envelope], what: &str) -> CaseOutcome {
    for f in frames {
        let _ = conn.send(f);
    }
    closes(t, conn, what)
}

/// The case `id`, if it is one of these.
pub(super) fn body(t: &mut Tester, id: &str) -> Option<CaseOutcome> {
    let name = id.trim_start_matches("cp.").replace(['.', '_'], "-");
    let outcome = match id {
        "cp.flow.load_update" => (|| {
            let mut conn = pushing(t, &name, true)?;
            let _ = conn.send(&update(1, vec![load(PROVIDER, 2)]));
            let _ = conn.send(&update(2, vec![load(PROVIDER, 3)]));
            goes_on(t, conn, "two updates in sequence")
        })(),
        "cp.load_update.not_negotiated" => (|| {
            let (mut conn, _) = t.open_with(&name, hello(t, &name, false))?;
            if let Ok(first) = conn.expect(ANSWER, asked) {
                answer(t, &name, &mut conn, first);
            }
            let u = update(1, vec![load(PROVIDER, 1)]);
            refused(
                t,
                conn,
                &[u],
                "an update after a hello that did not offer them",
            )
        })(),
        "cp.load_update.before_status" => (|| {
            let conn = pushing(t, &name, false)?;
            let u = update(1, vec![load(PROVIDER, 1)]);
            refused(t, conn, &[u], "an update before any status answer")
        })(),
        "cp.load_update.rate" => (|| {
            let conn = pushing(t, &name, true)?;
            let flood: Vec<Envelope> = (1..=12)
                .map(|n| update(n, vec![load(PROVIDER, (n % 4) as u32)]))
                .collect();
            refused(t, conn, &flood, "12 updates at once")
        })(),
        "cp.load_update.duplicate_provider" => (|| {
            let conn = pushing(t, &name, true)?;
            let u = update(1, vec![load(PROVIDER, 1), load(PROVIDER, 2)]);
            refused(t, conn, &[u], "one provider twice in an update")
        })(),
        "cp.load_update.gap" => resyncs(
            t,
            &name,
            &update(2, vec![load(PROVIDER, 1)]),
            "sequence 2 first",
        ),
        "cp.load_update.unknown_provider" => resyncs(
            t,
            &name,
            &update(1, vec![load("p-unknown", 1)]),
            "a provider the status did not hold",
        ),
        "cp.load_update.resync" => {
            let mut u = update(1, Vec::new());
            if let Some(Body::LoadUpdate(l)) = u.body.as_mut() {
                l.resync = true;
            }
            resyncs(t, &name, &u, "resync")
        }
        _ => return None,
    };
    Some(outcome)
}

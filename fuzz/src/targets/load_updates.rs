//! `load_updates`: a scripted Edge that negotiated load updates (PROTOCOL.md §4.8)
//! answers its first status with two nodes of two providers, then sends
//! fuzzer-chosen updates — any sequence, times, providers (known, unknown, twice),
//! numbers and `resync` — with heartbeats, status answers and time between them.
//!
//! Checked: no panic; the Control Plane closes the session only for a load-update
//! rule of §11 (`cp.load_update.*`), never for anything else the script does; every
//! `LoadView` update it tells names providers its view holds, with the numbers the
//! latest applied update gave them; after a gap, an unknown provider or a resync a
//! status request is outstanding; and the view never holds a provider the status did
//! not.

use std::time::Duration;

use arbitrary::Arbitrary;
use iop_core::cp::load::LoadChange;
use iop_core::cp::{CloseReason, CpConfig, CpEvent, EnrolmentPolicy};
use iop_core::testing::Pair;
use iop_core::testing::scripted::edges::{ScriptedEdges, harness_with, hello};
use iop_proto::{
    Body, EdgeLoadUpdate, EdgeNodeSnapshot, EdgeStatusResponse, Envelope, Heartbeat, NodeState,
    ProviderHealth, ProviderLoad, ProviderSnapshot, ProviderStatus,
};

const EDGE: &str = "edge-l";
const NODES: [&str; 3] = ["n-0", "n-1", "n-unknown"];
const PROVIDERS: [&str; 3] = ["p-0", "p-1", "p-unknown"];

/// A whole input: at most 48 steps.
#[derive(Debug, Arbitrary)]
pub struct Input {
    steps: Vec<Step>,
}

/// One thing the scripted Edge does.
#[derive(Debug, Arbitrary)]
pub enum Step {
    /// An update: `skip` added to the next sequence, its time `ahead_ms` after the
    /// last one's (or behind, with `back`), these providers, `resync`.
    Update {
        skip: u8,
        ahead_ms: u16,
        back: bool,
        providers: Vec<(u8, u8, u8, u8)>,
        resync: bool,
    },
    /// Time passes, under 5 s (a heartbeat goes with it, so the session stays up).
    Advance(u16),
    /// Every status request pending is answered again (the base view).
    Answer,
}

fn snapshot(provider: &str) -> ProviderSnapshot {
    ProviderSnapshot {
        provider_id: provider.into(),
        status: ProviderStatus::Available as i32,
        health: ProviderHealth::Healthy as i32,
        capacity: 8,
        models: vec!["m".into()],
        admission_eligible: true,
        ..Default::default()
    }
}

fn base() -> EdgeStatusResponse {
    let node = |id: &str| EdgeNodeSnapshot {
        node_id: id.into(),
        connected: true,
        state: NodeState::Ready as i32,
        provider_snapshots: vec![snapshot(PROVIDERS[0]), snapshot(PROVIDERS[1])],
        ..Default::default()
    };
    EdgeStatusResponse {
        edge_id: EDGE.into(),
        nodes: vec![node(NODES[0]), node(NODES[1])],
        registry_revision: 1,
        ..Default::default()
    }
}

/// Runs one input.
pub fn run(input: Input) {
    let mut config = CpConfig::default();
    config.status_refresh = None;
    let mut t: Pair = harness_with(config, EnrolmentPolicy::AcceptAny);
    let mut h = hello(EDGE, &[]);
    h.load_updates = true;
    let (conn, resp) = t.hello_with(h);
    assert!(resp.accepted && resp.load_update_interval_ms > 0);
    let mut sequence = 0u64;
    let mut at_ms = 1_700_000_000_000u64;
    let mut heartbeat = 0u64;
    let mut pending: Vec<u64> = Vec::new();
    let mut answered = false;
    let mut applied: std::collections::BTreeMap<(String, String), u32> = Default::default();
    for step in input.steps.into_iter().take(48) {
        for f in t.take_frames(conn) {
            if matches!(f.body, Some(Body::StatusRequest(_))) {
                pending.push(f.correlation_id);
            }
        }
        if t.is_closed(conn) {
            break;
        }
        let mut expect_status = false;
        match step {
            Step::Update {
                skip,
                ahead_ms,
                back,
                providers,
                resync,
            } => {
                sequence += 1 + u64::from(skip % 3);
                at_ms = if back {
                    at_ms.saturating_sub(u64::from(ahead_ms))
                } else {
                    at_ms + u64::from(ahead_ms)
                };
                let providers: Vec<ProviderLoad> = providers
                    .iter()
                    .take(6)
                    .map(|&(n, p, in_flight, flags)| ProviderLoad {
                        node_id: NODES[usize::from(n) % 3].into(),
                        provider_id: PROVIDERS[usize::from(p) % 3].into(),
                        status: ProviderStatus::Available as i32,
                        health: ProviderHealth::Healthy as i32,
                        capacity: 8,
                        in_flight: u32::from(in_flight % 9),
                        admission_eligible: flags & 1 == 1,
                        node_connected: true,
                        ..Default::default()
                    })
                    .collect();
                let unknown = providers
                    .iter()
                    .any(|p| p.node_id == NODES[2] || p.provider_id == PROVIDERS[2]);
                let gap = skip % 3 != 0;
                expect_status = answered && (gap || unknown || resync);
                t.send(
                    conn,
                    Envelope::new(EdgeLoadUpdate {
                        sequence,
                        observed_at_unix_ms: at_ms,
                        providers,
                        resync,
                    }),
                );
            }
            Step::Advance(ms) => {
                // Within a heartbeat interval: the session stays up.
                let ms = ms % 5_000;
                heartbeat += 1;
                at_ms += u64::from(ms);
                t.send(
                    conn,
                    Envelope::new(Heartbeat {
                        sequence: heartbeat,
                        sent_at_unix_ms: at_ms,
                    }),
                );
                t.advance(Duration::from_millis(u64::from(ms)));
            }
            Step::Answer => {
                for id in pending.drain(..) {
                    t.send(conn, Envelope::correlated(id, base()));
                    answered = true;
                }
                // A new base: what updates said before is replaced.
                applied.clear();
            }
        }
        // What falls due now (a resync's status request) goes out.
        t.advance(Duration::ZERO);
        let mut asked = false;
        for event in t.take_events() {
            match event {
                CpEvent::Closed { reason, .. } => {
                    let rule = match &reason {
                        CloseReason::ProtocolError(v) => v.rule(),
                        _ => "",
                    };
                    assert!(
                        rule.starts_with("cp.load_update."),
                        "closed for {reason:?}, not a load-update rule"
                    );
                }
                CpEvent::LoadView {
                    change: LoadChange::Updated { view, changed },
                    ..
                } => {
                    for index in changed {
                        let p = view
                            .providers()
                            .nth(index as usize)
                            .expect("a changed provider the view holds");
                        assert!(PROVIDERS[..2].contains(&p.provider_id()));
                        for node in view.nodes() {
                            if node.provider_indexes().contains(&(index as usize)) {
                                applied.insert(
                                    (node.node_id().into(), p.provider_id().into()),
                                    p.in_flight(),
                                );
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for f in t.take_frames(conn) {
            if matches!(f.body, Some(Body::StatusRequest(_))) {
                pending.push(f.correlation_id);
                asked = true;
            }
        }
        // Asked now, or a request asked before is still unanswered (one is enough).
        if expect_status && !t.is_closed(conn) {
            assert!(
                asked || !pending.is_empty(),
                "a gap, an unknown provider or a resync asked for no status"
            );
        }
        if let Some(view) = t.cp.edge_load(EDGE) {
            for node in view.nodes() {
                assert!(NODES[..2].contains(&node.node_id()));
                for p in node.providers() {
                    assert!(PROVIDERS[..2].contains(&p.provider_id()));
                    let key = (node.node_id().to_owned(), p.provider_id().to_owned());
                    if let Some(in_flight) = applied.get(&key) {
                        assert_eq!(p.in_flight(), *in_flight, "{key:?}");
                    }
                }
            }
        }
    }
}

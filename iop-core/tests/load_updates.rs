//! Load updates (PROTOCOL.md §4.8) between a real Edge and a real Control Plane, and
//! a scripted Edge that breaks the rules: negotiation, the first full status before
//! any update, coalescing to one update per interval, nothing while idle, §5 inside
//! updates, `resync` on a structural change, and each protocol error and resync point
//! of the Control Plane.

use std::time::Duration;

use iop_core::cp::load::LoadChange;
use iop_core::cp::{CloseReason, ConnectionId, CpConfig, CpEvent, EnrolmentPolicy};
use iop_core::edge::EdgeConfig;
use iop_core::proto::{
    Body, EdgeLoadUpdate, EdgeNodeSnapshot, EdgeStatusResponse, Envelope, Heartbeat, NodeState,
    ProviderHealth, ProviderLoad, ProviderSnapshot, ProviderStatus,
};
use iop_core::registry::{LeaseKind, NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};
use iop_core::testing::scripted::edges::*;
use iop_core::testing::{NetConfig, Pair};

const INTERVAL: Duration = Duration::from_millis(250);

fn node(id: &str) -> NodeConfig {
    NodeConfig::new(id)
        .with_provider(
            ProviderConfig::new("llama", ProviderCategory::LocalInference, 4, 2)
                .with_model("llama-3"),
        )
        .with_provider(ProviderConfig::new("gpt", ProviderCategory::Api, 10, 0).with_model("gpt-4"))
}

/// One READY node `gpu-0` with two providers.
fn registry() -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    let _ = reg.configure(node("gpu-0"), 0).unwrap();
    let generation = reg.connect("gpu-0", 1).unwrap();
    let _ = reg.mark_ready("gpu-0", generation, 2);
    reg
}

fn config() -> CpConfig {
    let mut c = CpConfig::default();
    c.wall_clock = iop_core::WallClock::new(1_700_000_000_000);
    c
}

/// A pair whose one Edge is connected and has answered its first full status.
fn pair_with(c: CpConfig, edge: EdgeConfig) -> Pair {
    let mut p = Pair::new(0, c, NetConfig::default()).unwrap();
    p.monitor_mut().set_strict(true);
    p.add_edge(edge, registry()).unwrap();
    p.advance(Duration::from_millis(50));
    assert!(p.cp.edge_load("edge-1").is_some(), "a first full status");
    p
}

fn pair() -> Pair {
    pair_with(config(), EdgeConfig::new("edge-1", 1))
}

/// `in_flight` of `provider` on `gpu-0` as the Control Plane sees it.
fn cp_in_flight(p: &Pair, provider: &str) -> u32 {
    let view = p.cp.edge_load("edge-1").unwrap();
    let node = view.node("gpu-0").unwrap();
    node.providers()
        .find(|x| x.provider_id() == provider)
        .unwrap()
        .in_flight()
}

fn updates_sent(p: &Pair) -> u64 {
    p.edges[0].edge.stats().load_updates_sent
}

#[test]
fn a_change_reaches_the_view_within_one_interval() {
    let mut p = pair();
    assert_eq!(cp_in_flight(&p, "llama"), 0);
    let events = p.cp_events.len();
    let _lease = p.edges[0]
        .edge
        .registry_mut()
        .admit("gpu-0", "llama", LeaseKind::Normal)
        .unwrap();
    p.advance(INTERVAL);
    assert_eq!(cp_in_flight(&p, "llama"), 1);
    assert_eq!(updates_sent(&p), 1);
    assert_eq!(p.cp.stats().load_updates, 1);
    // Told as an update of the view, naming the provider that changed.
    let updated: Vec<&LoadChange> = p.cp_events[events..]
        .iter()
        .filter_map(|e| match e {
            CpEvent::LoadView { change, .. } => Some(change),
            _ => None,
        })
        .collect();
    match updated.as_slice() {
        [LoadChange::Updated { view, changed }] => {
            let index = view.provider_index("gpu-0", "llama").unwrap();
            assert_eq!(changed, &[index as u32]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn changes_within_an_interval_go_in_one_update_and_an_idle_edge_sends_none() {
    let mut p = pair();
    let mut leases = Vec::new();
    for _ in 0..3 {
        let lease = p.edges[0]
            .edge
            .registry_mut()
            .admit("gpu-0", "gpt", LeaseKind::Normal)
            .unwrap();
        leases.push(lease);
        p.advance(Duration::from_millis(10));
    }
    // The first change went at once, the two after it wait for the interval.
    assert_eq!(updates_sent(&p), 1);
    p.advance(INTERVAL);
    assert_eq!(updates_sent(&p), 2);
    assert_eq!(cp_in_flight(&p, "gpt"), 3);
    // Idle: refreshes and heartbeats go on, no update.
    p.advance(Duration::from_secs(60));
    assert_eq!(updates_sent(&p), 2);
    assert!(p.cp.stats().status_refreshes >= 5);
    // A change and its undoing within one interval: nothing to tell.
    let lease = leases.pop().unwrap();
    let _ = p.edges[0].edge.registry_mut().release(lease);
    p.advance(Duration::from_millis(1));
    assert_eq!(updates_sent(&p), 3);
    let lease = p.edges[0]
        .edge
        .registry_mut()
        .admit("gpu-0", "gpt", LeaseKind::Normal)
        .unwrap();
    let _ = p.edges[0].edge.registry_mut().release(lease);
    p.advance(INTERVAL * 2);
    assert_eq!(updates_sent(&p), 3);
    assert_eq!(cp_in_flight(&p, "gpt"), 2);
}

#[test]
fn a_node_going_down_reports_its_providers_not_connected_and_zero_in_that_update() {
    let mut p = pair();
    let (_, generation) = p.edges[0].edge.registry().node_state("gpu-0").unwrap();
    let _ = p.edges[0]
        .edge
        .registry_mut()
        .close("gpu-0", generation, "gone", 5);
    p.advance(INTERVAL);
    let view = p.cp.edge_load("edge-1").unwrap();
    let node = view.node("gpu-0").unwrap();
    assert_eq!(node.state(), NodeState::Disconnected);
    for provider in node.providers() {
        assert!(provider.is_offline());
        assert_eq!(provider.numbers(), [0; 6]);
        assert!(!provider.admission_eligible());
    }
    // The strict monitor checked §5 inside the update as it went out.
    assert_eq!(updates_sent(&p), 1);
}

#[test]
fn a_node_added_is_a_resync_and_the_view_is_rebuilt_from_status() {
    let mut p = pair();
    let _ = p.edges[0]
        .edge
        .registry_mut()
        .configure(node("gpu-1"), 5)
        .unwrap();
    p.advance(INTERVAL);
    assert_eq!(p.edges[0].edge.stats().load_resyncs_sent, 1);
    assert_eq!(p.cp.stats().load_update_resyncs, 1);
    let view = p.cp.edge_load("edge-1").unwrap();
    assert!(
        view.node("gpu-1").is_some(),
        "rebuilt from the status it asked for"
    );
    // Updates go on from the new view.
    let _lease = p.edges[0]
        .edge
        .registry_mut()
        .admit("gpu-0", "llama", LeaseKind::Normal)
        .unwrap();
    p.advance(INTERVAL);
    assert_eq!(cp_in_flight(&p, "llama"), 1);
    assert_eq!(updates_sent(&p), 1);
}

#[test]
fn nothing_is_pushed_unless_both_sides_want_it() {
    let mut c = config();
    c.load_update_interval = None;
    let mut p = pair_with(c, EdgeConfig::new("edge-1", 1));
    let _lease = p.edges[0]
        .edge
        .registry_mut()
        .admit("gpu-0", "llama", LeaseKind::Normal)
        .unwrap();
    p.advance(Duration::from_secs(2));
    assert_eq!(updates_sent(&p), 0);
    assert_eq!(
        cp_in_flight(&p, "llama"),
        0,
        "pulled only, on the refresh period"
    );
    p.advance(Duration::from_secs(15));
    assert_eq!(cp_in_flight(&p, "llama"), 1);

    let mut edge = EdgeConfig::new("edge-1", 1);
    edge.load_updates = false;
    let mut p = pair_with(config(), edge);
    let _lease = p.edges[0]
        .edge
        .registry_mut()
        .admit("gpu-0", "llama", LeaseKind::Normal)
        .unwrap();
    p.advance(Duration::from_secs(2));
    assert_eq!(updates_sent(&p), 0);
    assert_eq!(p.cp.stats().load_updates, 0);
}

#[test]
fn updates_go_on_across_a_reconnect_only_after_the_new_session_status() {
    let mut p = pair();
    p.disconnect(0);
    let _lease = p.edges[0]
        .edge
        .registry_mut()
        .admit("gpu-0", "llama", LeaseKind::Normal)
        .unwrap();
    p.advance(Duration::from_secs(5));
    // The new session's status carried the change; nothing was pushed before it (the
    // strict monitor would have failed).
    assert!(p.edges[0].edge.is_connected());
    assert_eq!(cp_in_flight(&p, "llama"), 1);
    let _lease = p.edges[0]
        .edge
        .registry_mut()
        .admit("gpu-0", "llama", LeaseKind::Normal)
        .unwrap();
    p.advance(INTERVAL);
    assert_eq!(cp_in_flight(&p, "llama"), 2);
}

// ----- a scripted Edge ---------------------------------------------------------------

fn provider(id: &str) -> ProviderSnapshot {
    ProviderSnapshot {
        provider_id: id.into(),
        status: ProviderStatus::Available as i32,
        health: ProviderHealth::Healthy as i32,
        capacity: 4,
        models: vec!["m".into()],
        admission_eligible: true,
        ..Default::default()
    }
}

fn load(node: &str, provider: &str, in_flight: u32) -> ProviderLoad {
    ProviderLoad {
        node_id: node.into(),
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

fn update(sequence: u64, at: u64, providers: Vec<ProviderLoad>) -> Envelope {
    Envelope::new(EdgeLoadUpdate {
        sequence,
        observed_at_unix_ms: at,
        providers,
        resync: false,
    })
}

/// A scripted Edge that offered load updates (`offer`), its hello answered; the first
/// status request is left unanswered. Returns the connection, the interval answered
/// and the status request's correlation id.
fn scripted(offer: bool) -> (Pair, ConnectionId, u32, u64) {
    let mut t = harness_with(config(), EnrolmentPolicy::AcceptAny);
    let mut h = hello("edge-s", &[]);
    h.load_updates = offer;
    let (conn, resp) = t.hello_with(h);
    assert!(resp.accepted);
    let request = t
        .take_frames(conn)
        .into_iter()
        .find(|f| matches!(f.body, Some(Body::StatusRequest(_))))
        .expect("the session's first status request");
    (
        t,
        conn,
        resp.load_update_interval_ms,
        request.correlation_id,
    )
}

/// Answers status request `id` with node `n` holding provider `p`.
fn answer(t: &mut Pair, conn: ConnectionId, id: u64) {
    let status = EdgeStatusResponse {
        edge_id: "edge-s".into(),
        nodes: vec![EdgeNodeSnapshot {
            node_id: "n".into(),
            connected: true,
            state: NodeState::Ready as i32,
            provider_snapshots: vec![provider("p")],
            ..Default::default()
        }],
        registry_revision: 1,
        ..Default::default()
    };
    t.send(conn, Envelope::correlated(id, status));
}

/// `in_flight` of the scripted Edge's one provider, as the Control Plane sees it.
fn scripted_in_flight(t: &Pair) -> u32 {
    let view = t.cp.edge_load("edge-s").unwrap();
    view.providers().next().unwrap().in_flight()
}

/// The rule the Control Plane closed `conn` for.
fn closed_for(t: &Pair, conn: ConnectionId) -> Option<&'static str> {
    t.cp_events.iter().find_map(|e| match e {
        CpEvent::Closed {
            conn: c,
            reason: CloseReason::ProtocolError(v),
            ..
        } if *c == conn => Some(v.rule()),
        _ => None,
    })
}

fn status_requests_on(t: &mut Pair, conn: ConnectionId) -> usize {
    t.take_frames(conn)
        .iter()
        .filter(|f| matches!(f.body, Some(Body::StatusRequest(_))))
        .count()
}

#[test]
fn the_interval_is_answered_only_to_an_edge_that_offers_updates() {
    let (_, _, interval, _) = scripted(true);
    assert_eq!(interval, 250);
    let (_, _, interval, _) = scripted(false);
    assert_eq!(interval, 0);
    let mut c = config();
    c.load_update_interval = Some(Duration::from_millis(40));
    assert!(c.validate().is_err(), "50 ms is the least");
}

#[test]
fn an_update_before_the_first_full_status_is_a_protocol_error() {
    let (mut t, conn, _, _) = scripted(true);
    t.send(conn, update(1, 1_700_000_000_000, vec![load("n", "p", 1)]));
    assert_eq!(closed_for(&t, conn), Some("cp.load_update.before_status"));
}

#[test]
fn an_update_nobody_negotiated_is_a_protocol_error() {
    let (mut t, conn, _, id) = scripted(false);
    answer(&mut t, conn, id);
    t.send(conn, update(1, 1_700_000_000_000, vec![load("n", "p", 1)]));
    assert_eq!(closed_for(&t, conn), Some("cp.load_update.not_negotiated"));
}

#[test]
fn updates_past_the_burst_are_a_protocol_error() {
    let (mut t, conn, _, id) = scripted(true);
    answer(&mut t, conn, id);
    for sequence in 1..=4 {
        t.send(
            conn,
            update(sequence, 1_700_000_000_000, vec![load("n", "p", 1)]),
        );
    }
    assert_eq!(closed_for(&t, conn), None);
    t.send(conn, update(5, 1_700_000_000_000, vec![load("n", "p", 2)]));
    assert_eq!(closed_for(&t, conn), Some("cp.load_update.rate"));
}

#[test]
fn a_provider_named_twice_is_a_protocol_error() {
    let (mut t, conn, _, id) = scripted(true);
    answer(&mut t, conn, id);
    let twice = vec![load("n", "p", 1), load("n", "p", 2)];
    t.send(conn, update(1, 1_700_000_000_000, twice));
    assert_eq!(
        closed_for(&t, conn),
        Some("cp.load_update.duplicate_provider")
    );
}

#[test]
fn a_gap_an_unknown_provider_or_a_resync_asks_for_status_and_the_rest_applies() {
    let (mut t, conn, _, id) = scripted(true);
    answer(&mut t, conn, id);
    let _ = t.take_frames(conn);
    let at = 1_700_000_000_000;
    t.send(conn, update(1, at, vec![load("n", "p", 1)]));
    assert_eq!(status_requests_on(&mut t, conn), 0);
    assert_eq!(scripted_in_flight(&t), 1);
    // A gap: applied, and a status asked for.
    t.advance(INTERVAL);
    t.send(conn, update(3, at + 250, vec![load("n", "p", 2)]));
    assert_eq!(status_requests_on(&mut t, conn), 1);
    assert_eq!(t.cp.stats().load_update_gaps, 1);
    assert_eq!(scripted_in_flight(&t), 2);
    // A provider the view does not hold: the known one applies, a status is asked for.
    t.advance(INTERVAL);
    t.send(
        conn,
        update(4, at + 500, vec![load("n", "p", 3), load("n", "q", 1)]),
    );
    assert_eq!(status_requests_on(&mut t, conn), 1);
    assert_eq!(t.cp.stats().load_update_unknown_providers, 1);
    assert_eq!(scripted_in_flight(&t), 3);
    // A resync.
    t.advance(INTERVAL);
    let resync = Envelope::new(EdgeLoadUpdate {
        sequence: 5,
        observed_at_unix_ms: at + 750,
        providers: Vec::new(),
        resync: true,
    });
    t.send(conn, resync);
    assert_eq!(status_requests_on(&mut t, conn), 1);
    assert_eq!(t.cp.stats().load_update_resyncs, 1);
    assert_eq!(closed_for(&t, conn), None);
}

#[test]
fn updates_held_back_by_a_stall_are_not_a_rate_error() {
    let (mut t, conn, _, id) = scripted(true);
    answer(&mut t, conn, id);
    let at = 1_700_000_000_000;
    t.send(conn, update(1, at, vec![load("n", "p", 1)]));
    // Two seconds pass on the way; eight updates sent 250 ms apart arrive at once.
    t.advance(Duration::from_secs(2));
    let mut burst = Vec::new();
    for n in 1..=8u64 {
        let env = update(n + 1, at + n * 250, vec![load("n", "p", n as u32 % 4)]);
        burst.extend(iop_core::testing::scripted::wire::frame(&env));
    }
    t.send_raw(conn, &burst);
    assert_eq!(closed_for(&t, conn), None);
    assert_eq!(t.cp.stats().load_updates, 9);
}

#[test]
fn an_update_with_no_view_to_apply_to_asks_for_status() {
    // The first status answer comes after its request timed out: the Edge may push
    // (it answered in full), but the Control Plane made no view of it.
    let (mut t, conn, _, id) = scripted(true);
    t.send(
        conn,
        Envelope::new(Heartbeat {
            sequence: 1,
            sent_at_unix_ms: 1,
        }),
    );
    t.advance(Duration::from_secs(11));
    let _ = t.take_frames(conn);
    answer(&mut t, conn, id);
    assert!(t.cp.edge_load("edge-s").is_none());
    t.send(conn, update(1, 1_700_000_000_000, vec![load("n", "p", 1)]));
    assert_eq!(status_requests_on(&mut t, conn), 1);
    assert_eq!(closed_for(&t, conn), None);
    // Answered in time, it makes the view the updates apply to.
    let asked = t.cp_events.iter().rev().find_map(|e| match e {
        CpEvent::ResyncNeeded {
            request: Some(r), ..
        } => Some(r.correlation_id),
        _ => None,
    });
    answer(&mut t, conn, asked.unwrap());
    t.advance(INTERVAL);
    t.send(conn, update(2, 1_700_000_000_250, vec![load("n", "p", 2)]));
    assert_eq!(scripted_in_flight(&t), 2);
}

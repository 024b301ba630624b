//! Each Edge's view of its load as the Control Plane keeps it (PROTOCOL.md §4.3,
//! §5.2): the periodic refresh and its bound, truncated answers paged with
//! `start_after_node_id` (and an Edge that ignores it), and the
//! [`CpEvent::LoadView`] each change raises. What a fleet makes of the views is
//! `iop-fleet`'s (its tests fold these events).

use std::time::Duration;

use iop_core::cp::load::LoadChange;
use iop_core::cp::{CpConfig, CpEvent};
use iop_core::edge::EdgeConfig;
use iop_core::proto::{
    Body, EdgeNodeSnapshot, EdgeStatusResponse, Envelope, NodeState, ProviderCategory as Wire,
    ProviderHealth, ProviderSnapshot, ProviderStatus,
};
use iop_core::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};
use iop_core::testing::scripted::edges::*;
use iop_core::testing::{NetConfig, Pair};

/// Node `i` of a registry: `gpu-i` in zone `zone`, with a local `llama` provider of
/// capacity 4 (long-context 2) and an API `gpt` provider of capacity 10.
fn node(i: usize, zone: &str) -> NodeConfig {
    NodeConfig::new(format!("gpu-{i}"))
        .with_label("zone", zone)
        .with_provider(
            ProviderConfig::new("llama", ProviderCategory::LocalInference, 4, 2)
                .with_model("llama-3"),
        )
        .with_provider(ProviderConfig::new("gpt", ProviderCategory::Api, 10, 0).with_model("gpt-4"))
}

/// A registry of `nodes` nodes in `zone`, each READY.
fn registry(nodes: usize, zone: &str) -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    for i in 0..nodes {
        let _ = reg.configure(node(i, zone), 0).unwrap();
        let generation = reg.connect(&format!("gpu-{i}"), 1).unwrap();
        let _ = reg.mark_ready(&format!("gpu-{i}"), generation, 2);
    }
    reg
}

fn config() -> CpConfig {
    let mut c = CpConfig::default();
    // Wall-clock time = simulated time, from a round origin.
    c.wall_clock = iop_core::WallClock::new(1_700_000_000_000);
    c
}

fn pair(c: CpConfig) -> Pair {
    Pair::new(0, c, NetConfig::default()).unwrap()
}

#[test]
fn every_connected_edge_is_refreshed_on_its_own_and_an_unchanged_revision_is_not_merged() {
    // Pulled only: a pushing Edge's heartbeats confirm its view too (below).
    let mut c = config();
    c.load_update_interval = None;
    let mut p = pair(c);
    for i in 0..20 {
        p.add_edge(
            EdgeConfig::new(format!("edge-{i:02}"), i),
            registry(1, "eu-1"),
        )
        .unwrap();
    }
    p.advance(Duration::from_millis(50));
    let period = p.cp.config().status_refresh.unwrap();
    let before = p.cp.stats();
    let events = p.cp_events.len();
    p.advance(period * 3);
    let after = p.cp.stats();
    // About three refreshes each, the first half a period to one and a half on.
    let refreshes = after.status_refreshes - before.status_refreshes;
    assert!((40..=60).contains(&refreshes), "{refreshes} refreshes");
    // Nothing changed on the Edges: no view was merged again.
    assert_eq!(after.status_unchanged - before.status_unchanged, refreshes);
    // The application asked for none of them, and heard of none.
    assert!(
        !p.cp_events[events..]
            .iter()
            .any(|e| matches!(e, CpEvent::StatusReceived { .. }))
    );
    // Each refresh confirmed its Edge's view, and said so: no view was replaced.
    let changes: Vec<&LoadChange> = p.cp_events[events..]
        .iter()
        .filter_map(|e| match e {
            CpEvent::LoadView { change, .. } => Some(change),
            _ => None,
        })
        .collect();
    assert_eq!(changes.len() as u64, refreshes);
    assert!(changes.iter().all(|c| **c == LoadChange::Confirmed));
    // Every Edge confirmed within the last period and a half.
    let now_unix = p.cp.config().wall_clock.unix_ms(p.now);
    for v in p.cp.edges() {
        let last = p.cp_events.iter().rev().find_map(|e| match e {
            CpEvent::LoadView {
                edge_id,
                at_unix_ms,
                ..
            } if *edge_id == v.edge_id => Some(*at_unix_ms),
            _ => None,
        });
        assert!(now_unix - last.unwrap() <= period.as_millis() as u64 * 3 / 2);
    }
}

/// The `at_unix_ms` of every [`LoadChange::Confirmed`] of `edge_id` from event `from` on.
fn confirmations(p: &Pair, from: usize, edge_id: &str) -> Vec<u64> {
    p.cp_events[from..]
        .iter()
        .filter_map(|e| match e {
            CpEvent::LoadView {
                edge_id: id,
                at_unix_ms,
                change: LoadChange::Confirmed,
                ..
            } if id == edge_id => Some(*at_unix_ms),
            _ => None,
        })
        .collect()
}

#[test]
fn a_pushing_edges_heartbeats_confirm_its_view_and_a_pulled_ones_do_not() {
    // No refreshes: only heartbeats can confirm a view.
    let mut c = config();
    c.status_refresh = None;
    let heartbeat = c.heartbeat_interval;
    let mut p = pair(c);
    p.add_edge(EdgeConfig::new("pushes", 1), registry(2, "eu-1"))
        .unwrap();
    let mut pulled = EdgeConfig::new("pulled", 2);
    pulled.load_updates = false;
    p.add_edge(pulled, registry(2, "eu-1")).unwrap();
    p.advance(Duration::from_millis(50));
    let intervals: Vec<(String, Option<Duration>)> = p
        .cp_events
        .iter()
        .filter_map(|e| match e {
            CpEvent::SessionAccepted {
                edge_id,
                load_update_interval,
                ..
            } => Some((edge_id.clone(), *load_update_interval)),
            _ => None,
        })
        .collect();
    assert!(intervals.contains(&("pushes".into(), p.cp.config().load_update_interval)));
    assert!(intervals.contains(&("pulled".into(), None)));

    let from = p.cp_events.len();
    p.advance(heartbeat * 6);
    let pushed = confirmations(&p, from, "pushes");
    assert!((5..=7).contains(&pushed.len()), "{pushed:?}");
    // At most a heartbeat interval (and a round trip) apart.
    let every = heartbeat.as_millis() as u64 + 100;
    assert!(
        pushed.windows(2).all(|w| w[1] - w[0] <= every),
        "{pushed:?}"
    );
    assert_eq!(confirmations(&p, from, "pulled"), Vec::<u64>::new());
}

#[test]
fn refreshes_in_flight_are_bounded_over_all_edges() {
    // Scripted Edges that never answer a status: every refresh stays in flight until
    // it times out.
    let mut c = config();
    c.max_refreshes_in_flight = 4;
    c.status_timeout = Duration::from_secs(30);
    let mut t = harness_with(c, iop_core::cp::EnrolmentPolicy::AcceptAny);
    let mut conns = Vec::new();
    for i in 0..10 {
        let (conn, _) = t.enrol(&format!("edge-{i}"), &[]);
        conns.push(conn);
    }
    let period = t.cp.config().status_refresh.unwrap();
    t.advance(period * 2);
    let mut own = 0;
    for conn in &conns {
        // The resync's own request (id 1) was the application's; later ones are
        // refreshes.
        own += status_requests(&t.take_frames(*conn))
            .iter()
            .filter(|id| **id > 1)
            .count();
    }
    assert_eq!(own, 4, "at most 4 of the control plane's own in flight");
    assert!(t.cp.stats().status_refreshes_deferred > 0);
}

/// A response of `ids`' nodes, `truncated` when more are left.
fn page(
    correlation_id: u64,
    edge_id: &str,
    revision: u64,
    ids: &[&str],
    truncated: bool,
) -> Envelope {
    let node = |id: &str| EdgeNodeSnapshot {
        node_id: id.into(),
        connected: true,
        state: NodeState::Ready as i32,
        provider_snapshots: vec![ProviderSnapshot {
            provider_id: "p".into(),
            category: Wire::Cli as i32,
            status: ProviderStatus::Available as i32,
            health: ProviderHealth::Healthy as i32,
            capacity: 2,
            admission_eligible: true,
            ..Default::default()
        }],
        ..Default::default()
    };
    Envelope::correlated(
        correlation_id,
        EdgeStatusResponse {
            edge_id: edge_id.into(),
            nodes: ids.iter().map(|id| node(id)).collect(),
            registry_revision: revision,
            truncated,
            ..Default::default()
        },
    )
}

/// The `start_after_node_id` of every status request in `frames`, by correlation id.
fn page_requests(frames: &[Envelope]) -> Vec<(u64, String)> {
    frames
        .iter()
        .filter_map(|f| match &f.body {
            Some(Body::StatusRequest(r)) => Some((f.correlation_id, r.start_after_node_id.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_truncated_answer_is_paged_after_its_last_node_into_one_fresh_view() {
    let mut t = harness_with(config(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.hello_with(hello("edge-1", &[]));
    assert_eq!(page_requests(&t.take_frames(conn)), [(1, String::new())]);
    t.send(conn, page(1, "edge-1", 7, &["a", "b"], true));
    assert_eq!(page_requests(&t.take_frames(conn)), [(2, "b".to_owned())]);
    assert!(!t.cp.edge("edge-1").unwrap().fresh, "a page is not a view");
    assert!(t.cp.edge_load("edge-1").is_none());
    t.send(conn, page(2, "edge-1", 7, &["c"], true));
    assert_eq!(page_requests(&t.take_frames(conn)), [(3, "c".to_owned())]);
    t.send(conn, page(3, "edge-1", 7, &["d", "e"], false));
    assert!(t.take_frames(conn).is_empty(), "the last page");
    let view = t.cp.edge("edge-1").unwrap();
    assert!(view.fresh, "every page came: the view is fresh");
    let summary = view.last_status.clone().unwrap();
    assert_eq!((summary.node_count, summary.truncated), (5, false));
    let load = t.cp.edge_load("edge-1").unwrap();
    let ids: Vec<&str> = load.nodes().map(|n| n.node_id()).collect();
    assert_eq!(ids, ["a", "b", "c", "d", "e"]);
    assert_eq!(load.pages(), 3);
    assert_eq!(load.providers().map(|p| p.capacity()).sum::<u32>(), 10);
    assert_eq!(t.cp.stats().status_pages, 2);
    // Only the application's own request was heard of: the first page; and the view,
    // once, when complete.
    let events = t.take_events();
    let received = events
        .iter()
        .filter(|e| matches!(e, CpEvent::StatusReceived { .. }))
        .count();
    assert_eq!(received, 1);
    let views: Vec<&LoadChange> = events
        .iter()
        .filter_map(|e| match e {
            CpEvent::LoadView { change, .. } => Some(change),
            _ => None,
        })
        .collect();
    assert!(matches!(views.as_slice(), [LoadChange::Replaced(v)] if v.pages() == 3));

    // The next refresh finds the revision unchanged on its first page: no paging.
    let (id, after) = loop {
        t.advance(Duration::from_secs(1));
        if let Some(request) = page_requests(&t.take_frames(conn)).pop() {
            break request;
        }
        assert!(t.now.as_millis() < 60_000, "no refresh came");
    };
    assert_eq!((id, after.as_str()), (4, ""));
    t.send(conn, page(id, "edge-1", 7, &["a", "b"], true));
    assert!(page_requests(&t.take_frames(conn)).is_empty());
    assert_eq!(t.cp.stats().status_unchanged, 1);
    assert_eq!(t.cp.edge_load("edge-1").unwrap().nodes().len(), 5);
    assert!(t.take_events().iter().any(|e| matches!(
        e,
        CpEvent::LoadView {
            change: LoadChange::Confirmed,
            ..
        }
    )));
}

#[test]
fn an_edge_that_ignores_the_cursor_leaves_the_view_partial_and_paging_stops() {
    let mut t = harness_with(config(), iop_core::cp::EnrolmentPolicy::AcceptAny);
    let (conn, _) = t.hello_with(hello("edge-1", &[]));
    t.take_frames(conn);
    t.send(conn, page(1, "edge-1", 3, &["a", "b"], true));
    assert_eq!(page_requests(&t.take_frames(conn)), [(2, "b".to_owned())]);
    // An Edge older than start_after_node_id: from the first node again.
    t.send(conn, page(2, "edge-1", 3, &["a", "b"], true));
    assert!(
        t.take_frames(conn).is_empty(),
        "no page asked for after that"
    );
    assert!(t.cp.edge_load_partial("edge-1"));
    assert!(t.cp.edge_load("edge-1").is_none());
    assert!(!t.cp.edge("edge-1").unwrap().fresh);
    assert_eq!(t.cp.stats().status_views_partial, 1);
    assert!(t.take_events().iter().any(|e| matches!(
        e,
        CpEvent::LoadView {
            change: LoadChange::Partial,
            ..
        }
    )));
    assert!(t.monitor().violations().is_empty());
}

#[test]
fn a_view_is_paged_with_real_edges_whose_status_does_not_fit_a_frame() {
    // A frame limit a few nodes fill: each answer is truncated.
    let mut c = config();
    c.max_frame_len = 256 * 1024;
    let mut p = pair(c);
    let mut reg = NodeRegistry::new();
    for i in 0..1_200 {
        let mut n = NodeConfig::new(format!("node-{i:04}")).with_label("zone", "eu-1");
        for j in 0..8 {
            n = n.with_provider(
                ProviderConfig::new(format!("p{j}"), ProviderCategory::Cli, 1, 0)
                    .with_model(format!("model-with-a-long-name-{j:02}")),
            );
        }
        let _ = reg.configure(n, 0).unwrap();
    }
    p.add_edge(EdgeConfig::new("edge-1", 1), reg).unwrap();
    p.advance(Duration::from_millis(100));
    let load = p.cp.edge_load("edge-1").expect("a complete view");
    assert!(load.pages() > 1, "{} pages", load.pages());
    assert_eq!(load.nodes().len(), 1_200);
    assert!(p.cp.edge("edge-1").unwrap().fresh);
    assert_eq!(load.providers().len(), 9_600);
    assert!(
        p.monitor().violations().is_empty(),
        "{:?}",
        p.monitor().violations()
    );
}

//! The fleet's load folded from a Control Plane's events (PROTOCOL.md §4.3, §5.2),
//! from real Edges whose numbers are known: totals by category, model and label,
//! what is offline at the capacity it last had online, an Edge live on another Control
//! Plane, and the history of it all.

use std::time::Duration;

use iop_core::cp::{CpConfig, Reachability};
use iop_core::edge::EdgeConfig;
use iop_core::proto::ProviderCategory as Wire;
use iop_core::registry::{
    Candidate, LeaseKind, NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig,
};
use iop_core::testing::{NetConfig, Pair};
use iop_fleet::{Fleet, FleetConfig, LoadTotals};

/// Wall-clock time = simulated time, from a round origin.
const ORIGIN_UNIX_MS: u64 = 1_700_000_000_000;

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

/// A Control Plane with real Edges in memory, and a fleet folding its events as a
/// driver does: after every step, with the step's time.
struct World {
    p: Pair,
    fleet: Fleet,
}

impl World {
    fn new() -> Self {
        let mut c = CpConfig::default();
        c.wall_clock = iop_core::WallClock::new(ORIGIN_UNIX_MS);
        let mut f = FleetConfig::default();
        f.wall_clock = c.wall_clock;
        Self {
            p: Pair::new(0, c, NetConfig::default()).unwrap(),
            fleet: Fleet::new(f).unwrap(),
        }
    }

    /// Lets `d` pass in steps of at most a second, folding the events of each and
    /// firing the fleet's deadline.
    fn advance(&mut self, d: Duration) {
        let end = self.p.now + d;
        while self.p.now < end {
            let step = end
                .saturating_duration_since(self.p.now)
                .min(Duration::from_secs(1));
            self.p.advance(step);
            self.fold();
            self.fleet.handle_timeout(self.p.now);
        }
    }

    fn fold(&mut self) {
        for event in self.p.cp_events.drain(..) {
            self.fleet.handle_event(&event);
        }
    }

    /// The application forgets a disconnected Edge.
    fn forget(&mut self, edge_id: &str) -> bool {
        let forgotten = self.p.cp.forget_edge(edge_id);
        // The Pair pulls the Control Plane's events on its next step.
        self.advance(Duration::from_millis(1));
        forgotten
    }
}

#[test]
fn the_fleet_sums_its_edges_by_category_model_and_label_and_counts_the_offline_at_their_last_capacity()
 {
    let mut w = World::new();
    w.p.add_edge(EdgeConfig::new("edge-a", 1), registry(2, "eu-1"))
        .unwrap();
    w.p.add_edge(EdgeConfig::new("edge-b", 2), registry(1, "us-1"))
        .unwrap();
    w.advance(Duration::from_millis(50));
    let fleet = w.fleet.load();
    // 3 nodes × (4 + 10) capacity, nothing held, everything eligible.
    assert_eq!(fleet.edges_live(), 2);
    assert_eq!(fleet.nodes().ready, 3);
    let t = *fleet.total();
    assert_eq!(
        (t.providers, t.capacity, t.in_flight, t.available),
        (6, 42, 0, 42)
    );
    assert_eq!(t.long_context_capacity, 6);

    // Load on edge-a: two leases (one long-context) and a queued request on llama.
    {
        let mut reg = w.p.edges[0].edge.registry_mut();
        let _a = reg.admit("gpu-0", "llama", LeaseKind::Normal).unwrap();
        let _b = reg.admit("gpu-0", "llama", LeaseKind::LongContext).unwrap();
        let _q = reg
            .enqueue(LeaseKind::Normal, vec![Candidate::new("gpu-1", "llama")])
            .unwrap();
        // And gpu-1's API provider goes offline: it reports zeros from now on.
        assert!(reg.set_provider_online("gpu-1", "gpt", false).unwrap());
    }
    let refresh = w.p.cp.config().status_refresh.unwrap();
    w.advance(refresh * 2);
    let fleet = w.fleet.load();
    let t = *fleet.total();
    assert_eq!((t.in_flight, t.long_context_in_flight, t.queued), (2, 1, 1));
    // gpu-1/gpt is offline: its 10 no longer count, but count offline.
    assert_eq!(
        (t.capacity, t.offline_capacity, t.providers_offline),
        (32, 10, 1)
    );
    assert_eq!(t.available, 32 - 2);
    let by_category: Vec<(Wire, u64)> = fleet.by_category().map(|(c, t)| (c, t.capacity)).collect();
    assert!(by_category.contains(&(Wire::LocalInference, 12)));
    assert!(by_category.contains(&(Wire::Api, 20)));
    let models: Vec<(&str, u64, u64)> = fleet
        .by_model()
        .map(|(m, t)| (m, t.capacity, t.offline_capacity))
        .collect();
    assert_eq!(models, [("gpt-4", 20, 10), ("llama-3", 12, 0)]);
    let zones: Vec<(&str, &str, u64, u64)> = fleet
        .by_label()
        .map(|(k, v, t)| (k, v, t.capacity, t.in_flight))
        .collect();
    assert_eq!(zones, [("zone", "eu-1", 18, 2), ("zone", "us-1", 14, 0)]);

    // The Edge's own view says when it saw the offline provider online, and with what.
    let view = w.fleet.edge("edge-a").unwrap();
    let load = view.load();
    assert_eq!(load.edge_id(), "edge-a");
    let gpu_1 = load.node("gpu-1").unwrap();
    let (index, gpt) = gpu_1
        .provider_indexes()
        .zip(gpu_1.providers())
        .find(|(_, p)| p.provider_id() == "gpt")
        .unwrap();
    assert!(gpt.is_offline());
    assert_eq!(gpt.capacity(), 0, "offline reports zero (§5.2)");
    assert_eq!(view.last_online(index).map(|l| l.capacity), Some(10));
    assert_eq!(view.totals().offline_capacity, 10);
    // As the replica holding the Edge tells another, and as that one reads it back.
    let told = iop_fleet::LoadView::from_message(&view.to_message()).unwrap();
    assert_eq!(&told, view);
    // Compact: its names once, fixed-size records for 2 nodes and 4 providers.
    let names: usize = load
        .nodes()
        .map(|n| {
            n.node_id().len()
                + n.labels().map(|(k, v)| k.len() + v.len()).sum::<usize>()
                + n.providers()
                    .map(|p| p.provider_id().len() + p.models().map(str::len).sum::<usize>())
                    .sum::<usize>()
        })
        .sum();
    assert!(
        (names..names + 512).contains(&load.heap_bytes()),
        "{} heap bytes for {names} bytes of names",
        load.heap_bytes()
    );

    // edge-b disconnects: all of its capacity is offline now, none of it live.
    w.p.crash(1, true);
    w.advance(Duration::from_millis(10));
    assert_eq!(
        w.p.cp.edge("edge-b").unwrap().reachability,
        Reachability::Disconnected
    );
    let fleet = w.fleet.load();
    assert_eq!((fleet.edges_live(), fleet.edges_offline()), (1, 1));
    let t = *fleet.total();
    assert_eq!((t.capacity, t.offline_capacity), (18, 10 + 14));
    assert_eq!(fleet.nodes().ready, 2);
    assert_eq!(fleet.nodes_offline(), 1);
    // Forgotten, it counts for nothing.
    assert!(w.forget("edge-b"));
    let t = *w.fleet.load().total();
    assert_eq!((t.capacity, t.offline_capacity, t.providers), (18, 10, 4));
    assert!(
        w.p.monitor().violations().is_empty(),
        "{:?}",
        w.p.monitor().violations()
    );
}

#[test]
fn the_history_samples_the_fleet_and_each_edge_at_wall_clock_multiples() {
    let mut w = World::new();
    w.p.add_edge(EdgeConfig::new("edge-a", 1), registry(2, "eu-1"))
        .unwrap();
    w.advance(Duration::from_millis(50));
    w.advance(Duration::from_secs(60));
    let every = w.fleet.config().fleet_history_interval.as_millis() as u64;
    let samples: Vec<_> = w.fleet.history().samples().copied().collect();
    assert!(
        (5..=7).contains(&samples.len()),
        "{} samples",
        samples.len()
    );
    for s in &samples {
        assert_eq!(s.at_unix_ms % every, 0);
        assert_eq!(s.totals.capacity, 28);
        assert_eq!(s.edges_live, 1);
    }
    // Per Edge, every two minutes.
    w.advance(Duration::from_secs(300));
    let h = w.fleet.edge_history("edge-a").unwrap();
    let edge_samples: Vec<_> = h.samples().collect();
    assert!((2..=3).contains(&edge_samples.len()), "{edge_samples:?}");
    assert!(
        edge_samples
            .iter()
            .all(|s| s.capacity == 28 && s.in_flight == 0)
    );
    assert_eq!(h.providers(), 4);
    assert!(h.uses(0).all(|u| u == Some(0.0)));
    // The ring is bounded: an hour of 10 s samples.
    w.advance(Duration::from_secs(7_200));
    assert_eq!(w.fleet.history().samples().len(), 360);
    assert!(w.fleet.edge_history("edge-a").unwrap().samples().len() <= 30);
}

#[test]
fn an_edge_live_elsewhere_counts_for_nothing_here() {
    let mut w = World::new();
    w.p.add_edge(EdgeConfig::new("edge-a", 1), registry(1, "eu-1"))
        .unwrap();
    w.advance(Duration::from_millis(50));
    w.p.crash(0, true);
    w.advance(Duration::from_millis(10));
    assert_eq!(w.fleet.load().total().offline_capacity, 14);
    // A cluster's records say another Control Plane holds it now.
    assert!(w.fleet.set_elsewhere("edge-a"));
    assert_eq!(*w.fleet.load().total(), LoadTotals::default());
    assert_eq!(w.fleet.load().edges_offline(), 0);
    assert!(!w.fleet.set_elsewhere("nobody"));
}

#[test]
fn an_edge_whose_session_moves_to_another_control_plane_counts_for_nothing_here() {
    let mut w = World::new();
    w.p.add_edge(EdgeConfig::new("edge-a", 1), registry(1, "eu-1"))
        .unwrap();
    w.advance(Duration::from_millis(50));
    assert_eq!(w.fleet.load().edges_live(), 1);
    // Connected here, the cluster cannot say it is elsewhere.
    assert!(!w.fleet.set_elsewhere("edge-a"));
    // Its ownership record moves to a newer session on another replica.
    let session_id = w.p.cp.edge("edge-a").unwrap().session_id;
    let now = w.p.now;
    assert!(
        w.p.cp
            .handle_ownership_lost(now, "edge-a", session_id, session_id + 1)
    );
    w.advance(Duration::from_millis(1));
    assert_eq!(*w.fleet.load().total(), LoadTotals::default());
    assert_eq!(
        (w.fleet.load().edges_live(), w.fleet.load().edges_offline()),
        (0, 0)
    );
    assert!(!w.fleet.edge("edge-a").unwrap().live());
}

#[test]
fn a_load_update_moves_the_totals_long_before_the_next_refresh() {
    let mut w = World::new();
    w.p.add_edge(EdgeConfig::new("edge-a", 1), registry(2, "eu-1"))
        .unwrap();
    w.advance(Duration::from_millis(50));
    let refreshes = w.p.cp.stats().status_refreshes;
    let _lease = w.p.edges[0]
        .edge
        .registry_mut()
        .admit("gpu-1", "gpt", LeaseKind::Normal)
        .unwrap();
    let interval = w.p.cp.config().load_update_interval.unwrap();
    w.advance(interval);
    assert!(w.p.cp.stats().load_updates >= 1, "pushed, not pulled");
    assert_eq!(w.p.cp.stats().status_refreshes, refreshes);
    let t = *w.fleet.load().total();
    assert_eq!((t.in_flight, t.available), (1, 27));
    assert_eq!(
        w.fleet
            .load()
            .by_label()
            .map(|(_, _, t)| t.in_flight)
            .sum::<u64>(),
        1
    );
}

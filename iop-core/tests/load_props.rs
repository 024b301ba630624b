//! Load updates (PROTOCOL.md §4.8) under any interleaving: load changes, structural
//! changes, nodes going down and up, lost connections, a stalled Control Plane, a
//! suspended host and status pulls. The Control Plane is given no periodic refresh,
//! so its view can only be right through the push (updates, and the status a resync
//! or a new session asks for). Properties:
//! * once the changes stop, after one interval (and a reconnect, when the last
//!   connection was lost) the Control Plane's view of every provider equals the
//!   Edge's truth, the numbers of §5.2 and each node's `connected`;
//! * no update breaks a rule of §4.8 or §5 (the pair's monitor checks every frame
//!   written: negotiated, after a full status, the burst and interval at write time,
//!   each provider once, zeros when offline or not connected);
//! * the Control Plane never closes the session for it (no protocol error).

use std::collections::BTreeMap;
use std::time::Duration;

use iop_core::cp::CpConfig;
use iop_core::edge::EdgeConfig;
use iop_core::registry::{
    Candidate, Lease, LeaseKind, NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig,
};
use iop_core::testing::{NetConfig, Pair};
use proptest::prelude::*;

const NODES: usize = 3;
const PROVIDERS: [&str; 2] = ["llama", "gpt"];
const INTERVAL: Duration = Duration::from_millis(250);

fn node_id(i: usize) -> String {
    format!("gpu-{i}")
}

fn node(i: usize, extra: bool) -> NodeConfig {
    let mut n = NodeConfig::new(node_id(i))
        .with_provider(
            ProviderConfig::new("llama", ProviderCategory::LocalInference, 3, 1)
                .with_model("llama-3"),
        )
        .with_provider(ProviderConfig::new("gpt", ProviderCategory::Api, 4, 0).with_model("gpt-4"));
    if extra {
        n = n.with_provider(ProviderConfig::new("extra", ProviderCategory::Cli, 1, 0));
    }
    n
}

/// One step of the Edge's world, or of the network between it and the CP.
#[derive(Debug, Clone)]
enum Op {
    Admit {
        node: usize,
        provider: usize,
        long: bool,
    },
    Release(usize),
    Enqueue {
        node: usize,
        provider: usize,
    },
    Online {
        node: usize,
        provider: usize,
        online: bool,
    },
    Healthy {
        node: usize,
        provider: usize,
        healthy: bool,
    },
    /// The node's connection closes (its leases go) or it connects and becomes READY.
    NodeDown(usize),
    NodeUp(usize),
    /// A provider added to, or taken from, a node (a structural change).
    Reconfigure {
        node: usize,
        extra: bool,
    },
    /// The Edge's connection is lost; it dials again.
    Disconnect,
    /// The CP reads nothing for a while (its updates arrive together after).
    Stall(u64),
    /// The host sleeps: every timer fires late.
    Jump(u64),
    /// The application asks for status.
    Pull,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let n = 0..NODES;
    let p = 0..PROVIDERS.len();
    prop_oneof![
        6 => (n.clone(), p.clone(), any::<bool>())
            .prop_map(|(node, provider, long)| Op::Admit { node, provider, long }),
        4 => (0usize..16).prop_map(Op::Release),
        1 => (n.clone(), p.clone()).prop_map(|(node, provider)| Op::Enqueue { node, provider }),
        2 => (n.clone(), p.clone(), any::<bool>())
            .prop_map(|(node, provider, online)| Op::Online { node, provider, online }),
        1 => (n.clone(), p.clone(), any::<bool>())
            .prop_map(|(node, provider, healthy)| Op::Healthy { node, provider, healthy }),
        1 => n.clone().prop_map(Op::NodeDown),
        1 => n.clone().prop_map(Op::NodeUp),
        1 => (n, any::<bool>()).prop_map(|(node, extra)| Op::Reconfigure { node, extra }),
        1 => Just(Op::Disconnect),
        1 => (100u64..3_000).prop_map(Op::Stall),
        1 => (100u64..3_000).prop_map(Op::Jump),
        1 => Just(Op::Pull),
        6 => (1u64..600).prop_map(Op::Advance),
    ]
}

struct World {
    p: Pair,
    leases: Vec<Lease>,
}

impl World {
    fn new(seed: u64) -> Self {
        let mut c = CpConfig::default();
        c.wall_clock = iop_core::WallClock::new(1_700_000_000_000);
        c.status_refresh = None;
        c.load_update_interval = Some(INTERVAL);
        let net = NetConfig {
            latency_min: Duration::from_millis(1),
            latency_max: Duration::from_millis(40),
            split_reads: true,
        };
        let mut p = Pair::new(seed, c, net).unwrap();
        p.monitor_mut().set_strict(true);
        let mut reg = NodeRegistry::new();
        for i in 0..NODES {
            let _ = reg.configure(node(i, false), 0).unwrap();
            let generation = reg.connect(&node_id(i), 1).unwrap();
            let _ = reg.mark_ready(&node_id(i), generation, 2);
        }
        p.add_edge(EdgeConfig::new("edge-1", 1), reg).unwrap();
        p.advance(Duration::from_millis(100));
        Self {
            p,
            leases: Vec::new(),
        }
    }

    fn apply(&mut self, op: &Op) {
        let now_ms = 1_000;
        let p = &mut self.p;
        match *op {
            Op::Admit {
                node,
                provider,
                long,
            } => {
                let kind = if long {
                    LeaseKind::LongContext
                } else {
                    LeaseKind::Normal
                };
                let admitted =
                    p.edges[0]
                        .edge
                        .registry_mut()
                        .admit(&node_id(node), PROVIDERS[provider], kind);
                if let Ok(lease) = admitted {
                    self.leases.push(lease);
                }
            }
            Op::Release(i) => {
                if !self.leases.is_empty() {
                    let lease = self.leases.swap_remove(i % self.leases.len());
                    let _ = p.edges[0].edge.registry_mut().release(lease);
                }
            }
            Op::Enqueue { node, provider } => {
                let candidate = Candidate::new(node_id(node), PROVIDERS[provider]);
                let _ = p.edges[0]
                    .edge
                    .registry_mut()
                    .enqueue(LeaseKind::Normal, vec![candidate]);
            }
            Op::Online {
                node,
                provider,
                online,
            } => {
                let _ = p.edges[0].edge.registry_mut().set_provider_online(
                    &node_id(node),
                    PROVIDERS[provider],
                    online,
                );
            }
            Op::Healthy {
                node,
                provider,
                healthy,
            } => {
                let _ = p.edges[0].edge.registry_mut().set_provider_healthy(
                    &node_id(node),
                    PROVIDERS[provider],
                    healthy,
                );
            }
            Op::NodeDown(node) => {
                let mut reg = p.edges[0].edge.registry_mut();
                if let Some((_, generation)) = reg.node_state(&node_id(node)) {
                    let _ = reg.close(&node_id(node), generation, "gone", now_ms);
                }
            }
            Op::NodeUp(node) => {
                let mut reg = p.edges[0].edge.registry_mut();
                if let Ok(generation) = reg.connect(&node_id(node), now_ms) {
                    let _ = reg.mark_ready(&node_id(node), generation, now_ms);
                }
            }
            Op::Reconfigure { node, extra } => {
                let _ = p.edges[0]
                    .edge
                    .registry_mut()
                    .configure(self::node(node, extra), now_ms);
            }
            Op::Disconnect => p.disconnect(0),
            Op::Stall(ms) => p.silence_cp(Duration::from_millis(ms)),
            Op::Jump(ms) => p.jump(Duration::from_millis(ms)),
            Op::Pull => {
                let _ = p.request_status("edge-1", Vec::new());
            }
            Op::Advance(ms) => p.advance(Duration::from_millis(ms)),
        }
        // Leases of a node that went down were released by the registry.
        let reg = p.edges[0].edge.registry();
        self.leases.retain(|l| {
            reg.node_state(l.node_id())
                .is_some_and(|(_, generation)| generation == l.generation())
        });
    }

    /// The Edge's truth and the CP's view, provider by provider: `(status, health, the
    /// six numbers, eligible, node connected)`.
    fn truth_and_view(&self) -> (Numbers, Numbers) {
        let mut truth = BTreeMap::new();
        self.p.edges[0]
            .edge
            .registry()
            .visit_loads(&mut |node, provider, n| {
                let key = (node.to_owned(), provider.to_owned());
                let value = (
                    n.status as i32,
                    n.health as i32,
                    n.numbers,
                    n.admission_eligible,
                    n.node_connected,
                );
                truth.insert(key, value);
            });
        let mut view = BTreeMap::new();
        if let Some(load) = self.p.cp.edge_load("edge-1") {
            for node in load.nodes() {
                let connected = node.state() == iop_core::proto::NodeState::Ready;
                for p in node.providers() {
                    let key = (node.node_id().to_owned(), p.provider_id().to_owned());
                    let value = (
                        p.status() as i32,
                        p.health() as i32,
                        p.numbers(),
                        p.admission_eligible(),
                        connected,
                    );
                    view.insert(key, value);
                }
            }
        }
        (truth, view)
    }
}

type Numbers = BTreeMap<(String, String), (i32, i32, [u32; 6], bool, bool)>;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_view_equals_the_truth_one_interval_after_the_changes_stop(
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let mut w = World::new(seed);
        for op in &ops {
            w.apply(op);
        }
        // Long enough for a reconnect (backoff is capped at 30 s, and the CP may have
        // been stalled) and the first status after it.
        let disconnected = matches!(ops.last(), Some(Op::Disconnect));
        let settle = if disconnected || w.p.conn_of(0).is_none() {
            Duration::from_secs(45)
        } else {
            Duration::from_secs(4)
        };
        w.p.advance(settle);
        prop_assert!(w.p.conn_of(0).is_some(), "the Edge is connected again");
        // The last word the Edge said, after the last change: one more interval, plus
        // the network's latency.
        w.p.advance(INTERVAL + Duration::from_millis(100));
        let (truth, view) = w.truth_and_view();
        prop_assert_eq!(&truth, &view);
        let stats = w.p.cp.stats();
        prop_assert_eq!(stats.protocol_errors, 0);
        prop_assert!(w.p.monitor().violations().is_empty(), "{:?}", w.p.monitor().violations());
    }
}

#[test]
fn a_stall_then_a_burst_of_changes_is_never_a_rate_error() {
    let mut w = World::new(7);
    for round in 0..40 {
        w.apply(&Op::Admit {
            node: round % NODES,
            provider: round % 2,
            long: false,
        });
        w.apply(&Op::Advance(60));
        if round % 10 == 0 {
            w.apply(&Op::Stall(2_000));
        }
        w.apply(&Op::Release(round));
    }
    w.p.advance(Duration::from_secs(3));
    assert_eq!(w.p.cp.stats().protocol_errors, 0);
    assert!(w.p.cp.stats().load_updates > 10);
    let (truth, view) = w.truth_and_view();
    assert_eq!(truth, view);
}

//! The Edge binary's building blocks on a registry, without sockets: the config
//! refresh of `provider-pool.refresh` and the simulated nodes of `--simulate`.

use std::path::Path;

use iop_core::NodeRegistry;
use iop_core::proto::NodeState;
use iop_core::registry::{LeaseKind, Target};
use iop_server::EdgeFile;
use iop_server::edge_ops::{apply_refresh, plan_refresh, target_nodes};
use iop_server::simulate::{SimRates, Simulator};

fn file(text: &str) -> EdgeFile {
    EdgeFile::parse(Path::new("edge.toml"), text).unwrap()
}

const TWO: &str = r#"
[[nodes]]
id = "n1"
[[nodes.providers]]
id = "p"
category = "cli"
capacity = 2

[[nodes]]
id = "n2"
[[nodes.providers]]
id = "p"
category = "api"
capacity = 1
"#;

#[test]
fn refresh_adds_updates_removes_and_keeps_ownership() {
    let mut reg = NodeRegistry::new();
    let first = file(TWO);
    assert_eq!(plan_refresh(&reg, &first), (2, 0, 0));
    let s = apply_refresh(&mut reg, &first, 1);
    assert_eq!((s.added, s.updated, s.unchanged, s.removed), (2, 0, 0, 0));

    // n1 is live; the next file changes n1's capacity, drops n2, adds n3.
    let g = reg.connect("n1", 2).unwrap();
    let _ = reg.mark_ready("n1", g, 3);
    let next = file(
        r#"
[[nodes]]
id = "n1"
[[nodes.providers]]
id = "p"
category = "cli"
capacity = 5

[[nodes]]
id = "n3"
"#,
    );
    assert_eq!(plan_refresh(&reg, &next), (1, 1, 1));
    let s = apply_refresh(&mut reg, &next, 4);
    assert_eq!((s.added, s.updated, s.unchanged, s.removed), (1, 1, 0, 1));
    assert!(s.refused.is_empty());
    assert_eq!(reg.node_ids().collect::<Vec<_>>(), ["n1", "n3"]);
    // Ownership survives an update.
    assert_eq!(reg.node_state("n1"), Some((NodeState::Ready, g)));
    // Applying the same file again changes nothing.
    assert_eq!(plan_refresh(&reg, &next), (0, 0, 0));
    let s = apply_refresh(&mut reg, &next, 5);
    assert_eq!((s.added, s.updated, s.unchanged, s.removed), (0, 0, 2, 0));
    assert_eq!(s.detail().get("unchanged").map(String::as_str), Some("2"));
}

#[test]
fn refresh_refuses_to_cut_capacity_below_leases_held() {
    let mut reg = NodeRegistry::new();
    let _ = apply_refresh(&mut reg, &file(TWO), 1);
    let g = reg.connect("n1", 2).unwrap();
    let _ = reg.mark_ready("n1", g, 3);
    let _a = reg.admit("n1", "p", LeaseKind::Normal).unwrap();
    let _b = reg.admit("n1", "p", LeaseKind::Normal).unwrap();
    let smaller = TWO.replacen("capacity = 2", "capacity = 1", 1);
    let s = apply_refresh(&mut reg, &file(&smaller), 4);
    assert_eq!(s.refused.len(), 1);
    assert_eq!(s.refused[0].0, "n1");
    assert_eq!(s.detail().get("refused").map(String::as_str), Some("1"));
}

#[test]
fn target_nodes_of_each_target() {
    assert!(target_nodes(&Target::Edge).is_empty());
    assert_eq!(
        target_nodes(&Target::Nodes(vec!["a".into(), "b".into()])),
        ["a", "b"]
    );
    let provider = Target::Provider {
        node_id: "a".into(),
        provider_id: "p".into(),
    };
    assert_eq!(target_nodes(&provider), ["a"]);
}

fn run(seed: u64, steps: u64) -> (u64, Vec<(String, NodeState)>) {
    let mut reg = NodeRegistry::new();
    let _ = apply_refresh(&mut reg, &file(TWO), 0);
    let mut sim = Simulator::new(seed, SimRates::default());
    for t in 0..steps {
        sim.step(&mut reg, t);
    }
    let states = reg
        .node_ids()
        .map(str::to_owned)
        .collect::<Vec<_>>()
        .into_iter()
        .map(|id| {
            let state = reg.node_state(&id).unwrap().0;
            (id, state)
        })
        .collect();
    (reg.revision(), states)
}

#[test]
fn simulation_is_seeded_and_brings_nodes_to_life() {
    assert_eq!(run(42, 200), run(42, 200), "same seed, same run");
    assert_ne!(run(1, 200).0, run(2, 200).0, "another seed, another run");
    // Nodes connect, take leases, and come and go: many registry changes.
    let (revision, _) = run(3, 200);
    assert!(revision > 100, "revision {revision}");
}

#[test]
fn a_simulated_disconnect_zeroes_the_node_and_a_reconnect_restores_it() {
    let mut reg = NodeRegistry::new();
    let _ = apply_refresh(&mut reg, &file(TWO), 0);
    let mut sim = Simulator::new(5, SimRates::default());
    assert!(sim.connect(&mut reg, "n1", 1));
    sim.hold("n1");
    let _lease = reg.admit("n1", "p", LeaseKind::Normal).unwrap();
    assert!(sim.disconnect(&mut reg, "n1", "test", 2));
    let snap = reg.snapshot("e", 3, &["n1"], usize::MAX);
    let node = &snap.nodes[0];
    assert!(!node.connected);
    assert_eq!(node.state, NodeState::Disconnected as i32);
    let p = &node.provider_snapshots[0];
    assert_eq!(
        (p.capacity, p.in_flight, p.admission_eligible),
        (0, 0, false)
    );
    // Held: random steps leave it alone.
    for t in 0..50 {
        sim.step(&mut reg, 10 + t);
    }
    assert_eq!(reg.node_state("n1").unwrap().0, NodeState::Disconnected);
    assert!(sim.connect(&mut reg, "n1", 100));
    let snap = reg.snapshot("e", 101, &["n1"], usize::MAX);
    let p = &snap.nodes[0].provider_snapshots[0];
    assert_eq!((p.capacity, p.admission_eligible), (2, true));
}

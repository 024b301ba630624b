//! Identical inputs give identical outputs for the CP and Edges as a whole: two pairs
//! driven through the same calls emit the same events and bytes (same hash), and a
//! different network seed changes only timings, never the rules kept.

use std::time::Duration;

use iop_core::WallClock;
use iop_core::cp::{CommandSpec, CpConfig};
use iop_core::edge::{EdgeConfig, Outcome, TargetLevel};
use iop_core::registry::NodeRegistry;
use iop_core::testing::{NetConfig, Pair, Side};

fn scripted(seed: u64) -> Pair {
    let net = NetConfig {
        latency_min: Duration::from_millis(1),
        latency_max: Duration::from_millis(80),
        split_reads: true,
    };
    let mut p = Pair::new(seed, CpConfig::default(), net).unwrap();
    for (k, s) in [(0u64, 11u64), (1, 12)] {
        let mut c =
            EdgeConfig::new(format!("edge-{k}"), s).with_operation("edge.ping", TargetLevel::Edge);
        c.wall_clock = WallClock::new(1_800_000_000_000);
        p.add_edge(c, NodeRegistry::new()).unwrap();
    }
    p.advance(Duration::from_secs(1));
    let spec = CommandSpec::new("edge.ping");
    let id = p.send_command("edge-0", spec).unwrap();
    p.request_status("edge-1", vec![]).unwrap();
    p.advance(Duration::from_millis(500));
    p.half_open(0, Side::Edge);
    p.advance(Duration::from_secs(20));
    let now = p.now;
    let _ = p.edges[0]
        .edge
        .report_outcome(now, &id, Outcome::Succeeded, "", Default::default());
    p.jump(Duration::from_secs(12));
    p.cut(1);
    p.advance(Duration::from_secs(60));
    p
}

#[test]
fn the_same_calls_give_the_same_events_and_bytes() {
    let a = scripted(5);
    let b = scripted(5);
    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.cp_events, b.cp_events);
    for (x, y) in a.edges.iter().zip(&b.edges) {
        assert_eq!(x.events, y.events);
    }
    assert!(
        a.monitor().violations().is_empty(),
        "{:#?}",
        a.monitor().violations()
    );
}

#[test]
fn another_network_seed_changes_timings_not_the_rules() {
    let a = scripted(5);
    let c = scripted(6);
    assert_ne!(a.hash(), c.hash(), "latencies and read splits differ");
    assert!(
        c.monitor().violations().is_empty(),
        "{:#?}",
        c.monitor().violations()
    );
    for p in [&a, &c] {
        assert_eq!(p.cp.stats().protocol_errors, 0);
        assert!(p.cp.live_conn("edge-0").is_some() && p.cp.live_conn("edge-1").is_some());
    }
}

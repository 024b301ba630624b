//! The server's lock, combining: input read while another task holds the lock is
//! applied by that task, in its connection's order, and none is left waiting.

mod support;

use std::time::{Duration, Instant};

use iop_tokio::core::registry::{
    Lease, LeaseKind, NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig,
};
use iop_tokio::fleet::PlacementQuery;
use iop_tokio::{ControlPlaneServer, EdgeClient};
use support::*;

const EDGES: usize = 24;
const BOUND: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_read_while_the_lock_is_held_is_applied_in_order_and_none_waits() {
    let mut config = fast_server();
    config.cp.load_update_interval = Some(Duration::from_millis(50));
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut edges = Vec::new();
    for i in 0..EDGES {
        let edge = EdgeClient::new(fast_edge(&format!("edge-{i:02}")))
            .connect(server.local_addr())
            .unwrap();
        edge.with_registry(|reg: &mut NodeRegistry, now| {
            let node = NodeConfig::new("n0").with_provider(
                ProviderConfig::new("llama", ProviderCategory::LocalInference, 1_000, 0)
                    .with_model("m"),
            );
            reg.configure(node, now).unwrap();
            reg.connect_ready("n0", now).unwrap();
        });
        edges.push((edge, Vec::<Lease>::new()));
    }
    let start = Instant::now();
    while cp.placement(&PlacementQuery::new("m")).unwrap().serving < EDGES as u64 {
        assert!(start.elapsed() < BOUND, "every Edge's view in placement");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Another task holds the lock over and over (listing every view), while every
    // Edge pushes its changes: until enough input found the lock
    // taken, each Edge one more request in flight per round.
    let hammer = {
        let cp = cp.clone();
        tokio::spawn(async move {
            for _ in 0..1_000_000 {
                std::hint::black_box(cp.edge_loads());
                tokio::task::yield_now().await;
            }
        })
    };
    let before = cp.inputs_deferred();
    let start = Instant::now();
    let mut rounds = 0;
    while (cp.inputs_deferred() - before < 50 || rounds < 20) && rounds < 900 {
        assert!(
            start.elapsed() < BOUND,
            "input deferred while the lock was held"
        );
        for (edge, held) in &mut edges {
            edge.with_registry(|reg: &mut NodeRegistry, _| {
                held.push(reg.admit("n0", "llama", LeaseKind::Normal).unwrap());
            });
        }
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    hammer.abort();
    assert!(
        cp.inputs_deferred() - before >= 50,
        "input found the lock held: {}",
        cp.inputs_deferred() - before
    );

    // Every Edge's last change is applied, with nothing more to come: none was left
    // in the inbox, and each Edge's were applied in order (the last is the largest).
    let start = Instant::now();
    loop {
        let answer = cp.placement(&PlacementQuery::new("m")).unwrap();
        let in_flight: Vec<u32> = answer.candidates.iter().map(|c| c.in_flight).collect();
        if answer.candidates.len() == 10 && in_flight.iter().all(|&n| n == rounds) {
            break;
        }
        assert!(
            start.elapsed() < BOUND,
            "every Edge at {rounds} in flight: {in_flight:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // In order: no update came before one sent ahead of it on its connection.
    assert_eq!(
        cp.stats().load_update_gaps,
        0,
        "updates applied out of order"
    );
    let loads = cp.edge_loads();
    assert_eq!(loads.len(), EDGES);
    for view in loads {
        let p = view.load().provider(0).unwrap();
        assert_eq!(p.in_flight(), rounds, "{}", view.load().edge_id());
    }
    for (edge, _) in edges {
        edge.shutdown().await;
    }
    server.shutdown().await;
}

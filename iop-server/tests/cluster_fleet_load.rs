//! The fleet's load over a real nats-server (PROTOCOL.md §8 "Routing"): any replica's
//! admin API answers for the whole fleet, each replica summing the Edges it holds; an
//! Edge that moved to another replica counts once, never also offline where it was;
//! an Edge's history comes from the replica holding it.

mod cluster_support;

use std::net::SocketAddr;
use std::time::Duration;

use cluster_support::*;
use iop_tokio::core::cp::DuplicatePolicy;
use iop_tokio::core::registry::{NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::prelude::*;
use serde_json::Value;

/// An Edge of one READY node whose provider has capacity `capacity`, on `node`.
async fn loaded_edge(node: &Node, edge_id: &str, capacity: u32) -> EdgeHandle {
    let edge = EdgeClient::new(fast_edge(edge_id))
        .connect(node.addr())
        .unwrap();
    edge.with_registry(move |reg: &mut NodeRegistry, now| {
        let n = NodeConfig::new("gpu-1").with_provider(
            ProviderConfig::new("llama", ProviderCategory::LocalInference, capacity, 0)
                .with_model("llama-3"),
        );
        let _ = reg.configure(n, now).unwrap();
        reg.connect_ready("gpu-1", now).unwrap();
    });
    bounded("its session", edge.connected()).await.unwrap();
    edge
}

async fn get(admin: SocketAddr, path: &str) -> Value {
    http(admin, "GET", path, None).await.1
}

/// Polls `path` on `admin` until `done` holds.
async fn get_until(admin: SocketAddr, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    bounded(path, async {
        loop {
            let v = get(admin, path).await;
            if done(&v) {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn any_replica_answers_for_the_whole_fleet_and_a_moved_edge_counts_once() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let admin_a = admin_of(&a).await;
    let admin_b = admin_of(&b).await;
    let on_a = loaded_edge(&a, "edge-1", 4).await;
    let on_b = loaded_edge(&b, "edge-2", 10).await;

    // cp-b answers for both: its own share and cp-a's.
    let load = get_until(admin_b, "/v1/fleet/load", |v| v["total"]["capacity"] == 14).await;
    assert_eq!(load["replicas"]["asked"], 2);
    assert_eq!(load["replicas"]["answered"], 2);
    assert_eq!(load["edges"]["live"], 2);
    assert_eq!(load["byModel"]["llama-3"]["capacity"], 14);
    let local = get(admin_b, "/v1/fleet/load?scope=local").await;
    assert_eq!(local["total"]["capacity"], 10);

    // edge-1's history, asked of cp-b, comes from cp-a.
    let history = get_until(admin_b, "/v1/edges/edge-1/history", |v| {
        v["samples"].as_array().is_some_and(|s| !s.is_empty())
    })
    .await;
    assert_eq!(history["edgeId"], "edge-1");
    assert_eq!(history["samples"][0]["capacity"], 4);
    // And the fleet's history sums both replicas' samples at the same instants.
    get_until(admin_a, "/v1/fleet/history", |v| {
        v["samples"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["capacity"] == 14))
    })
    .await;

    // edge-1 moves to cp-b: cp-a's view of it, disconnected, is not counted offline
    // (cp-b counts it live).
    let moved = loaded_edge(&b, "edge-1", 4).await;
    on_a.shutdown().await;
    get_until(admin_a, "/v1/fleet/load", |v| {
        v["edges"]["live"] == 2 && v["replicas"]["answered"] == 2
    })
    .await;
    let load = get_until(admin_a, "/v1/fleet/load", |v| {
        v["total"]["offlineCapacity"] == 0
    })
    .await;
    assert_eq!(load["total"]["capacity"], 14);
    assert_eq!(load["edges"]["offline"], 0);

    // edge-2 leaves for good: its capacity is offline, once.
    on_b.shutdown().await;
    let load = get_until(admin_a, "/v1/fleet/load", |v| v["edges"]["offline"] == 1).await;
    assert_eq!(load["total"]["offlineCapacity"], 10);
    assert_eq!(load["total"]["capacity"], 4);

    moved.shutdown().await;
    a.stop().await;
    b.stop().await;
}

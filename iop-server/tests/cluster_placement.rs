//! Placement and the load watch across replicas, over a real nats-server with the
//! replicas' account and permissions: a load update an Edge pushes to one replica is
//! in the placement of the two others within moments, and in their load watch,
//! naming the replica that applied it; a replica that stops takes its Edges out of
//! the others' candidates.

mod cluster_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cluster_support::*;
use iop_tokio::WatchItem;
use iop_tokio::core::cp::DuplicatePolicy;
use iop_tokio::core::registry::{LeaseKind, NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::fleet::ChangeKind;
use iop_tokio::prelude::*;
use serde_json::Value;

/// An Edge on `node` with `nodes` READY nodes, each a `llama` provider of `capacity`
/// serving `llama-3`.
async fn loaded_edge(node: &Node, edge_id: &str, nodes: usize, capacity: u32) -> EdgeHandle {
    let edge = EdgeClient::new(fast_edge(edge_id))
        .connect(node.addr())
        .unwrap();
    edge.with_registry(move |reg: &mut NodeRegistry, now| {
        for i in 0..nodes {
            let n = NodeConfig::new(format!("gpu-{i}")).with_provider(
                ProviderConfig::new("llama", ProviderCategory::LocalInference, capacity, 0)
                    .with_model("llama-3"),
            );
            let _ = reg.configure(n, now).unwrap();
            reg.connect_ready(&format!("gpu-{i}"), now).unwrap();
        }
    });
    bounded("its session", edge.connected()).await.unwrap();
    edge
}

/// The candidates of `answer` as `edge/node:free`, sorted.
fn picks(answer: &Value) -> Vec<String> {
    let mut out: Vec<String> = answer["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let (edge, node) = (c["edgeId"].as_str().unwrap(), c["nodeId"].as_str().unwrap());
            format!("{edge}/{node}:{}", c["free"])
        })
        .collect();
    out.sort();
    out
}

/// Polls `GET /v1/placement?model=llama-3` on `admin` until its picks are `want`.
async fn placed(admin: SocketAddr, want: &[&str]) -> Value {
    bounded(&format!("placement {want:?}"), async {
        loop {
            let (status, v) =
                http(admin, "GET", "/v1/placement?model=llama-3&limit=50", None).await;
            assert_eq!(status, 200, "{v}");
            if picks(&v) == want {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn an_update_pushed_to_one_replica_is_placed_on_every_other() {
    let nats = NatsServer::start_with_accounts();
    let policy = DuplicatePolicy::Replace;
    let a = node(&nats, "cp-a", policy).await;
    let b = node(&nats, "cp-b", policy).await;
    let c = node(&nats, "cp-c", policy).await;
    let (admin_a, admin_b, admin_c) = (admin_of(&a).await, admin_of(&b).await, admin_of(&c).await);
    let mut watch_c = c.cp().watch_load();

    let on_a = loaded_edge(&a, "edge-1", 2, 4).await;
    let _on_b = loaded_edge(&b, "edge-2", 1, 2).await;
    let all = ["edge-1/gpu-0:4", "edge-1/gpu-1:4", "edge-2/gpu-0:2"];
    for admin in [admin_a, admin_b, admin_c] {
        placed(admin, &all).await;
    }

    // Three requests admitted on edge-1's gpu-0: the Edge pushes them to cp-a, which
    // tells cp-b and cp-c.
    let pushed = Instant::now();
    let _leases = on_a.with_registry(|reg: &mut NodeRegistry, _| {
        (0..3)
            .map(|_| reg.admit("gpu-0", "llama", LeaseKind::Normal).unwrap())
            .collect::<Vec<_>>()
    });
    let after = ["edge-1/gpu-0:1", "edge-1/gpu-1:4", "edge-2/gpu-0:2"];
    let on_c = placed(admin_c, &after).await;
    let seen = pushed.elapsed();
    placed(admin_b, &after).await;
    placed(admin_a, &after).await;
    let first = &on_c["candidates"][0];
    assert_eq!(first["edgeId"], "edge-1");
    assert!(first["ageMs"].as_u64().unwrap() < 5_000, "{first}");
    eprintln!("a lease on cp-a's Edge placed on cp-c after {seen:?}");

    // cp-c's watch saw the numbers change, applied by cp-a.
    bounded("the change on cp-c's watch", async {
        loop {
            match watch_c.next().await.unwrap() {
                WatchItem::Changes(changes) => {
                    // The leases, as a load update or a new view, applied by cp-a.
                    let leased = changes.iter().find(|c| {
                        let view = match &c.kind {
                            ChangeKind::Numbers { view, .. } | ChangeKind::View(view) => view,
                            _ => return false,
                        };
                        &*c.edge_id == "edge-1" && view.providers().next().unwrap().in_flight() == 3
                    });
                    if let Some(change) = leased {
                        assert_eq!(change.replica.as_deref(), Some("cp-a"));
                        return;
                    }
                }
                WatchItem::Snapshot { .. } | WatchItem::Gap(_) => {}
                _ => {}
            }
        }
    })
    .await;
    // A snapshot taken now on cp-b holds both Edges.
    let mut watch_b = b.cp().watch_load();
    match watch_b.next().await.unwrap() {
        WatchItem::Snapshot { views, .. } => {
            let ids: Vec<&str> = views.iter().map(|v| v.load().edge_id()).collect();
            assert_eq!(ids, ["edge-1", "edge-2"]);
        }
        other => panic!("a snapshot first, not {other:?}"),
    }
    assert_eq!(c.cp().remote_load_edges(), 2);
    let text = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(admin_c).unwrap();
        let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    })
    .await
    .unwrap();
    assert!(
        text.contains("iop_cluster_remote_load_edges 2"),
        "{}",
        text.lines()
            .filter(|l| l.contains("remote"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // cp-a stops: edge-1 is no candidate on cp-b any more (offline, or stale, then
    // forgotten with its replica).
    a.stop().await;
    drop(on_a);
    placed(admin_b, &["edge-2/gpu-0:2"]).await;
    b.stop().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_reservation_on_one_replica_counts_on_every_other() {
    let nats = NatsServer::start_with_accounts();
    let policy = DuplicatePolicy::Replace;
    let a = node(&nats, "cp-a", policy).await;
    let b = node(&nats, "cp-b", policy).await;
    let c = node(&nats, "cp-c", policy).await;
    let (admin_a, admin_b, admin_c) = (admin_of(&a).await, admin_of(&b).await, admin_of(&c).await);
    let on_a = loaded_edge(&a, "edge-1", 2, 4).await;
    for admin in [admin_a, admin_b, admin_c] {
        placed(admin, &["edge-1/gpu-0:4", "edge-1/gpu-1:4"]).await;
    }

    // Three routers reserve on cp-b; a replica spreads its picks by default (drawn by
    // free slots), so whichever provider each took counts.
    let mut free = [4u32, 4];
    for _ in 0..3 {
        let (status, v) = http(admin_b, "POST", "/v1/placement?model=llama-3&limit=1", None).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["reserved"], true, "{v}");
        assert_eq!(v["pick"], "spread", "{v}");
        let node = v["candidates"][0]["nodeId"].as_str().unwrap();
        let at = if node == "gpu-0" { 0 } else { 1 };
        assert_eq!(v["candidates"][0]["free"], free[at] - 1, "{v}");
        free[at] -= 1;
    }
    let want = [
        format!("edge-1/gpu-0:{}", free[0]),
        format!("edge-1/gpu-1:{}", free[1]),
    ];
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    // cp-a (which holds the Edge) and cp-c count them as cp-b does.
    let told = Instant::now();
    for admin in [admin_b, admin_a, admin_c] {
        placed(admin, &want).await;
    }
    eprintln!(
        "cp-b's reservations counted on cp-a and cp-c after {:?}",
        told.elapsed()
    );

    // The Edge reports gpu-0 with one request in flight: that report overwrites gpu-0's
    // reservations on every replica; gpu-1's stand until its own next report.
    let _lease = on_a.with_registry(|reg: &mut NodeRegistry, _| {
        reg.admit("gpu-0", "llama", LeaseKind::Normal).unwrap()
    });
    let after = [
        "edge-1/gpu-0:3".to_owned(),
        format!("edge-1/gpu-1:{}", free[1]),
    ];
    let after: Vec<&str> = after.iter().map(String::as_str).collect();
    for admin in [admin_a, admin_b, admin_c] {
        placed(admin, &after).await;
    }
    a.stop().await;
    b.stop().await;
    c.stop().await;
}

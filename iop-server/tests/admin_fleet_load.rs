//! The fleet's load through the admin API, from real Edges whose numbers are known:
//! `GET /v1/fleet/load` (totals by category, model and label, an offline provider at
//! the capacity it last had, a disconnected Edge all offline), an Edge whose status
//! does not fit a frame paged into one view, the histories, and the list of Edges
//! paged and filtered.

mod cli_support;

use std::time::Duration;

use cli_support::in_process::Cp;
use iop_core::NodeRegistry;
use iop_core::edge::EdgeConfig;
use iop_core::registry::{LeaseKind, NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::{EdgeClient, EdgeHandle, EnrolmentPolicy, ServerConfig};
use serde_json::Value;

fn server() -> ServerConfig {
    let mut c = ServerConfig::new(EnrolmentPolicy::AcceptAny);
    c.cp.heartbeat_interval = Duration::from_secs(1);
    // Fresh views within a second; samples every second for a minute.
    c.cp.status_refresh = Some(Duration::from_secs(1));
    c.fleet.fleet_history_interval = Duration::from_secs(1);
    c.fleet.edge_history_interval = Duration::from_secs(1);
    c.fleet.load_history = Duration::from_secs(60);
    // Small enough that the big Edge's status takes several pages.
    c.cp.max_frame_len = 256 * 1024;
    c
}

/// An Edge `edge_id` of `nodes` READY nodes in `zone`, each with a local `llama`
/// provider (capacity 4) and an API `gpt` one (capacity 10).
async fn edge(cp: &Cp, edge_id: &str, nodes: usize, zone: &str) -> EdgeHandle {
    edge_serving(cp, edge_id, nodes, zone, "gpt-4").await
}

/// [`edge`], its API provider serving `model`.
async fn edge_serving(cp: &Cp, edge_id: &str, nodes: usize, zone: &str, model: &str) -> EdgeHandle {
    let handle = EdgeClient::new(EdgeConfig::new(edge_id, 5))
        .connect(cp.edges())
        .unwrap();
    let (zone, model) = (zone.to_owned(), model.to_owned());
    handle.with_registry(move |reg: &mut NodeRegistry, now| {
        for i in 0..nodes {
            let node = NodeConfig::new(format!("gpu-{i:04}"))
                .with_label("zone", zone.clone())
                .with_provider(
                    ProviderConfig::new("llama", ProviderCategory::LocalInference, 4, 2)
                        .with_model("llama-3"),
                )
                .with_provider(
                    ProviderConfig::new("gpt", ProviderCategory::Api, 10, 0)
                        .with_model(model.clone()),
                );
            let _ = reg.configure(node, now).unwrap();
            reg.connect_ready(&format!("gpu-{i:04}"), now).unwrap();
        }
    });
    handle
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reads_the_fleets_capacity_queues_and_what_is_offline() {
    let cp = Cp::start(server()).await;
    let a = edge(&cp, "edge-a", 2, "eu-1").await;
    let b = edge(&cp, "edge-b", 1, "us-1").await;
    let load = cp
        .get_until("three nodes ready", "/v1/fleet/load", |v| {
            v["nodes"]["ready"] == 3
        })
        .await;
    assert_eq!(load["total"]["capacity"], 42);
    assert_eq!(load["replicas"]["answered"], 1);

    // Two leases on edge-a's llama, one queued request, and its gpu-0001/gpt offline.
    let _leases = a.with_registry(|reg: &mut NodeRegistry, _| {
        let l1 = reg.admit("gpu-0000", "llama", LeaseKind::Normal).unwrap();
        let l2 = reg
            .admit("gpu-0000", "llama", LeaseKind::LongContext)
            .unwrap();
        let _ = reg
            .enqueue(
                LeaseKind::Normal,
                vec![iop_core::registry::Candidate::new("gpu-0001", "llama")],
            )
            .unwrap();
        assert!(reg.set_provider_online("gpu-0001", "gpt", false).unwrap());
        (l1, l2)
    });
    let load = cp
        .get_until("the refresh saw it", "/v1/fleet/load", |v| {
            v["total"]["offlineCapacity"] == 10
        })
        .await;
    let t = &load["total"];
    assert_eq!(
        (t["capacity"].as_u64(), t["inFlight"].as_u64()),
        (Some(32), Some(2))
    );
    assert_eq!(
        (t["queued"].as_u64(), t["longContextInFlight"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(t["available"], 30);
    assert_eq!(load["byCategory"]["local_inference"]["capacity"], 12);
    assert_eq!(load["byCategory"]["api"]["offlineCapacity"], 10);
    assert_eq!(load["byModel"]["gpt-4"]["capacity"], 20);
    assert_eq!(load["byLabel"]["zone"]["eu-1"]["inFlight"], 2);
    assert_eq!(load["byLabel"]["zone"]["us-1"]["capacity"], 14);

    // The Edge's own view: the offline provider at zero, with what it last had online.
    let view = cp.get("/v1/edges/edge-a").await.json();
    assert!(view["loadAgeMs"].as_u64().unwrap() < 10_000);
    let gpt = view["loadView"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["nodeId"] == "gpu-0001")
        .and_then(|n| {
            n["providers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["providerId"] == "gpt")
        })
        .cloned()
        .unwrap();
    assert_eq!(
        (gpt["offline"].as_bool(), gpt["capacity"].as_u64()),
        (Some(true), Some(0))
    );
    assert_eq!(gpt["lastOnline"]["capacity"], 10);
    assert_eq!(view["load"]["inFlight"], 2);

    // edge-b leaves: its capacity counts offline, none of it live.
    b.shutdown().await;
    let load = cp
        .get_until("edge-b offline", "/v1/fleet/load", |v| {
            v["edges"]["offline"] == 1
        })
        .await;
    assert_eq!(load["total"]["offlineCapacity"], 10 + 14);
    assert_eq!(load["total"]["capacity"], 18);

    // The history: a sample a second, each at a wall-clock multiple.
    let history = cp
        .get_until("a few samples", "/v1/fleet/history", |v| {
            v["samples"].as_array().is_some_and(|s| s.len() >= 3)
        })
        .await;
    assert_eq!(history["intervalMs"], 1_000);
    for s in history["samples"].as_array().unwrap() {
        assert_eq!(s["atUnixMs"].as_u64().unwrap() % 1_000, 0);
    }
    let edge_history = cp
        .get_until("edge-a's samples", "/v1/edges/edge-a/history", |v| {
            v["samples"].as_array().is_some_and(|s| s.len() >= 2)
        })
        .await;
    let uses = edge_history["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["nodeId"] == "gpu-0000" && p["providerId"] == "llama")
        .map(|p| p["uses"].as_array().unwrap().clone())
        .unwrap();
    // Two of four leases: half used.
    assert_eq!(uses.last().and_then(Value::as_f64), Some(0.5));
    assert_eq!(cp.get("/v1/edges/nobody/history").await.status, 404);

    a.shutdown().await;
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_whose_status_does_not_fit_a_frame_is_paged_into_one_view() {
    let cp = Cp::start(server()).await;
    // Over 100 bytes a node: 5 000 nodes take more than two frames of 256 KiB.
    let big = edge(&cp, "edge-big", 5_000, "eu-1").await;
    let view = cp
        .get_until("a complete view", "/v1/edges/edge-big", |v| {
            v["loadView"]["nodes"]
                .as_array()
                .is_some_and(|n| n.len() == 5_000)
        })
        .await;
    assert!(view["loadView"]["pages"].as_u64().unwrap() >= 2);
    assert_eq!(view["loadView"]["partial"], false);
    assert_eq!(view["fresh"], true);
    // The status route pages as well: every node, one answer.
    let status = cp.get("/v1/edges/edge-big/status").await.json();
    assert_eq!(status["nodes"].as_array().unwrap().len(), 5_000);
    assert!(status.get("truncated").is_none_or(|t| t == false));
    let load = cp.get("/v1/fleet/load").await.json();
    assert_eq!(load["total"]["capacity"], 5_000 * 14);
    big.shutdown().await;
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_of_edges_pages_and_filters() {
    let cp = Cp::start(server()).await;
    let mut edges = Vec::new();
    for i in 0..7 {
        edges.push(edge(&cp, &format!("edge-{i}"), 1, "eu-1").await);
    }
    cp.get_until("seven edges", "/v1/edges?state=connected", |v| {
        v["total"] == 7
    })
    .await;
    let first = cp.get("/v1/edges?limit=3").await.json();
    let ids = |v: &Value| -> Vec<String> {
        v["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["edgeId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&first), ["edge-0", "edge-1", "edge-2"]);
    assert_eq!(
        (first["total"].as_u64(), first["next"].as_str()),
        (Some(7), Some("edge-2"))
    );
    let last = cp.get("/v1/edges?limit=3&after=edge-5").await.json();
    assert_eq!(ids(&last), ["edge-6"]);
    assert!(last.get("next").is_none());
    // A page that ends exactly at the last Edge says nothing follows.
    let full = cp.get("/v1/edges?limit=3&after=edge-3").await.json();
    assert_eq!(ids(&full), ["edge-4", "edge-5", "edge-6"]);
    assert!(full.get("next").is_none(), "{full}");
    let some = cp.get("/v1/edges?q=EDGE-4").await.json();
    assert_eq!(ids(&some), ["edge-4"]);
    assert_eq!(
        cp.get("/v1/edges?state=disconnected").await.json()["total"],
        0
    );
    assert_eq!(cp.get("/v1/edges?limit=0").await.status, 400);
    assert_eq!(cp.get("/v1/edges?state=asleep").await.status, 400);
    // Every view carries its load's summary.
    let all = cp.get("/v1/edges").await.json();
    assert!(
        all["edges"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["load"]["capacity"] == 14)
    );
    for e in edges {
        e.shutdown().await;
    }
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_every_provider_until_the_series_cap_then_each_edge_then_the_fleet() {
    for (cap, detail) in [(50_000, 2), (20, 1), (5, 0)] {
        let cp = Cp::start_with(server(), |s| s.metrics_max_series = cap).await;
        let a = edge(&cp, "edge-a", 2, "eu-1").await;
        // A model name a peer could write to break the exposition's quoting.
        let b = edge_serving(&cp, "edge-b", 1, "us-1", r#"gpt "4" \ mini"#).await;
        cp.get_until("three nodes ready", "/v1/fleet/load", |v| {
            v["nodes"]["ready"] == 3
        })
        .await;
        let m = cp.get("/metrics").await;
        let has = |line: &str| m.body.lines().any(|l| l == line);
        // The fleet's totals, whatever the cap.
        assert!(
            has(r#"iop_fleet_capacity{category="local_inference"} 12"#),
            "{}",
            m.body
        );
        assert!(
            has(r#"iop_fleet_model_capacity{model="gpt-4"} 20"#),
            "{}",
            m.body
        );
        assert!(
            has(r#"iop_fleet_model_capacity{model="gpt \"4\" \\ mini"} 10"#),
            "{}",
            m.body
        );
        assert!(has(
            r#"iop_fleet_label_capacity{label="zone",value="eu-1"} 28"#
        ));
        assert!(has(r#"iop_fleet_nodes{state="ready"} 3"#));
        assert!(
            has(&format!("iop_metrics_fleet_detail {detail}")),
            "{}",
            m.body
        );
        let edge_line = r#"iop_edge_capacity{edge="edge-a"} 28"#;
        let provider_line = r#"iop_provider_capacity{edge="edge-a",node="gpu-0000",provider="llama",category="local_inference"} 4"#;
        let node_line = r#"iop_node_state{edge="edge-b",node="gpu-0000",state="ready"} 1"#;
        assert_eq!(has(edge_line), detail >= 1, "cap {cap}");
        assert_eq!(
            has(provider_line) && has(node_line),
            detail == 2,
            "cap {cap}"
        );
        // 2 Edges × 4 series; 6 providers × 9 and 3 nodes.
        let dropped = match detail {
            2 => 0,
            1 => 6 * 9 + 3,
            _ => 2 * 4 + 6 * 9 + 3,
        };
        assert!(
            has(&format!("iop_metrics_series_dropped {dropped}")),
            "{}",
            m.body
        );
        a.shutdown().await;
        b.shutdown().await;
        cp.stop().await;
    }
}

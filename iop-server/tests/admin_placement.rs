//! The router's API end to end, from real Edges that push their load updates:
//! `GET /v1/placement` ranks providers by free slots and follows a lease within the
//! update interval (the Control Plane never refreshes here, so only the push can show
//! it), filters by label, says why the others are not candidates, refuses bad
//! parameters typed; `POST /v1/placement` spreads routers asking at once; `/metrics`
//! counts placements.

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
    // No refreshes: after the first status, only pushed updates change the views.
    c.cp.status_refresh = None;
    c.cp.load_update_interval = Some(Duration::from_millis(100));
    c
}

/// An Edge of `nodes` READY nodes in `zone`, each with a `llama` provider of
/// `capacity` serving `llama-3`.
async fn edge(cp: &Cp, edge_id: &str, nodes: usize, zone: &str, capacity: u32) -> EdgeHandle {
    let handle = EdgeClient::new(EdgeConfig::new(edge_id, 5))
        .connect(cp.edges())
        .unwrap();
    let zone = zone.to_owned();
    handle.with_registry(move |reg: &mut NodeRegistry, now| {
        for i in 0..nodes {
            let node = NodeConfig::new(format!("gpu-{i}"))
                .with_label("zone", zone.clone())
                .with_provider(
                    ProviderConfig::new("llama", ProviderCategory::LocalInference, capacity, 0)
                        .with_model("llama-3"),
                );
            let _ = reg.configure(node, now).unwrap();
            reg.connect_ready(&format!("gpu-{i}"), now).unwrap();
        }
    });
    handle
}

fn picks(answer: &Value) -> Vec<String> {
    answer["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}/{}:{}",
                c["edgeId"].as_str().unwrap(),
                c["nodeId"].as_str().unwrap(),
                c["free"]
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_places_requests_on_pushed_numbers_and_reservations_spread_them() {
    let cp = Cp::start(server()).await;
    let a = edge(&cp, "edge-a", 2, "eu-1", 4).await;
    let b = edge(&cp, "edge-b", 1, "us-1", 3).await;
    let answer = cp
        .get_until("three candidates", "/v1/placement?model=llama-3", |v| {
            v["candidates"].as_array().is_some_and(|c| c.len() == 3)
        })
        .await;
    assert_eq!(
        picks(&answer),
        ["edge-a/gpu-0:4", "edge-a/gpu-1:4", "edge-b/gpu-0:3"]
    );
    assert_eq!(answer["serving"], 3);
    assert!(answer["staleAfterMs"]["pushed"].as_u64().unwrap() >= 1_100);
    assert!(answer["candidates"][0]["ageMs"].as_u64().unwrap() < 2_000);

    // Three leases on edge-a's gpu-0: pushed within the interval, placed last.
    let _leases = a.with_registry(|reg: &mut NodeRegistry, _| {
        (0..3)
            .map(|_| reg.admit("gpu-0", "llama", LeaseKind::Normal).unwrap())
            .collect::<Vec<_>>()
    });
    let answer = cp
        .get_until("the leases pushed", "/v1/placement?model=llama-3", |v| {
            v["candidates"][2]["edgeId"] == "edge-a" && v["candidates"][2]["free"] == 1
        })
        .await;
    assert_eq!(
        picks(&answer),
        ["edge-a/gpu-1:4", "edge-b/gpu-0:3", "edge-a/gpu-0:1"]
    );
    assert_eq!(answer["candidates"][2]["inFlight"], 3);

    // Labels narrow the list; a model nobody serves is an empty list with reasons.
    let eu = cp
        .get("/v1/placement?model=llama-3&labels=zone=us-1&limit=5")
        .await
        .json();
    assert_eq!(picks(&eu), ["edge-b/gpu-0:3"]);
    assert_eq!(eu["excluded"]["labels"], 2);
    let none = cp.get("/v1/placement?model=gpt-5").await;
    assert_eq!(none.status, 200);
    let none = none.json();
    assert_eq!(none["candidates"], Value::Array(vec![]));
    assert_eq!(none["excluded"]["notServing"], 3);

    // Bad parameters: 400 with their code.
    for (query, code) in [
        ("limit=3", "bad_model"),
        ("model=llama-3&limit=0", "bad_limit"),
        ("model=llama-3&labels=zone", "bad_labels"),
        ("model=llama-3&long_context=maybe", "bad_request"),
    ] {
        let answer = cp.get(&format!("/v1/placement?{query}")).await;
        assert_eq!(answer.status, 400, "{query}");
        assert_eq!(answer.json()["error"]["code"], code, "{query}");
    }

    // Three routers at once reserve: each pick counts, so they spread instead of all
    // taking edge-a/gpu-1.
    let mut reserved = Vec::new();
    for _ in 0..3 {
        let answer = cp.post("/v1/placement?model=llama-3&limit=1", "").await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let answer = answer.json();
        assert_eq!(answer["reserved"], true);
        // One Control Plane: the best, unless asked otherwise.
        assert_eq!(answer["pick"], "best");
        reserved.push(picks(&answer).remove(0));
    }
    // 4 against 3: gpu-1; then 3 and 3 (the tie goes to the newer report): one each.
    assert_eq!(reserved[0], "edge-a/gpu-1:3");
    reserved.sort();
    assert_eq!(
        reserved,
        ["edge-a/gpu-1:2", "edge-a/gpu-1:3", "edge-b/gpu-0:2"]
    );

    // A spread pick reserves a candidate drawn by free slots and lists it first; a
    // pick that is neither best nor spread is refused with its code.
    let before = cp.get("/v1/placement?model=llama-3&limit=3").await.json();
    let spread = cp
        .post("/v1/placement?model=llama-3&limit=3&pick=spread", "")
        .await;
    assert_eq!(spread.status, 200, "{}", spread.body);
    let spread = spread.json();
    assert_eq!(spread["reserved"], true);
    assert_eq!(spread["pick"], "spread");
    let first = &spread["candidates"][0];
    let was = before["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["edgeId"] == first["edgeId"] && c["nodeId"] == first["nodeId"])
        .unwrap_or_else(|| panic!("{first} not among {before}"));
    assert_eq!(
        first["reserved"].as_u64(),
        was["reserved"].as_u64().map(|n| n + 1),
        "{spread}"
    );
    let bad = cp.post("/v1/placement?model=llama-3&pick=random", "").await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"]["code"], "bad_pick");

    // edge-b leaves: its provider counts offline.
    b.shutdown().await;
    let answer = cp
        .get_until("edge-b offline", "/v1/placement?model=llama-3", |v| {
            v["excluded"]["offline"] == 1
        })
        .await;
    assert!(picks(&answer).iter().all(|p| p.starts_with("edge-a")));

    let metrics = cp.get("/metrics").await.body;
    let value = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
    };
    assert!(value("iop_placements_total") >= 8);
    assert_eq!(value("iop_placement_reservations_total"), 4);
    assert!(value("iop_placements_empty_total") >= 1);
    assert!(metrics.contains("iop_placement_age_seconds_bucket{le=\"0.025\"}"));

    a.shutdown().await;
    cp.stop().await;
}

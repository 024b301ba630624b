//! `GET /v1/edges` on a cluster of three replica processes over a real nats-server:
//! each page is asked of every replica with the same filter and cursor and merged;
//! a replica that does not answer (SIGSTOPped) is named in a partial answer, never
//! waited for.

mod cli_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cli_support::{control_plane, get, signal, wait_until};
use iop_cluster::testing::NatsServer;
use iop_core::edge::EdgeConfig;
use iop_tokio::EdgeClient;
use serde_json::Value;

const EDGES: usize = 30;
const REPLICAS: [&str; 3] = ["cp-a", "cp-b", "cp-c"];

/// Every page of `path` (which asks for `limit=`), following `next`.
fn pages(admin: std::net::SocketAddr, path: &str) -> (Vec<Value>, Value) {
    let mut all = Vec::new();
    let mut after = String::new();
    for _ in 0..=EDGES {
        let page = get(admin, &format!("{path}&after={after}")).json();
        all.extend(page["edges"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) => after = next.to_owned(),
            None => return (all, page),
        }
    }
    panic!("the pages of {path} never end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_page_of_the_fleet_is_merged_from_every_replica_and_a_silent_one_is_named() {
    let nats = NatsServer::start_with_accounts();
    let url = nats.url();
    let seed = &nats.accounts().expect("the replicas' account").replica;
    let nkey = cli_support::secret_file("replica.nk", seed)
        .display()
        .to_string();
    let cps: Vec<_> = REPLICAS
        .iter()
        .map(|id| {
            control_plane(&[
                "--cluster",
                &url,
                "--replica-id",
                id,
                "--cluster-nkey",
                &nkey,
            ])
        })
        .collect();
    // Edge `edge-NN` on replica NN % 3.
    let mut edges = Vec::new();
    for n in 0..EDGES {
        let config = EdgeConfig::new(format!("edge-{n:02}"), n as u64 + 1);
        let addr = cps[n % 3].edges;
        edges.push(EdgeClient::new(config).connect(addr).unwrap());
    }
    let a = cps[0].admin;
    tokio::task::spawn_blocking(move || {
        wait_until("every Edge listed on cp-a", || {
            let page = get(a, "/v1/edges?limit=5&state=connected").json();
            (page["total"] == EDGES).then_some(())
        });
        // Paged through in sevens: every Edge once, in order, with its holder.
        let (all, last) = pages(a, "/v1/edges?limit=7");
        let ids: Vec<&str> = all.iter().map(|v| v["edgeId"].as_str().unwrap()).collect();
        let expected: Vec<String> = (0..EDGES).map(|n| format!("edge-{n:02}")).collect();
        assert_eq!(ids, expected, "{last}");
        for (n, view) in all.iter().enumerate() {
            assert_eq!(view["replica"], REPLICAS[n % 3], "{view}");
        }
        assert_eq!(last["total"], EDGES);
        assert!(last.get("partial").is_none(), "{last}");
        // Filtered on every replica alike: by holder, by state.
        let (held_by_b, page) = pages(a, "/v1/edges?limit=4&q=CP-B");
        assert_eq!(
            (held_by_b.len(), page["total"].as_u64()),
            (10, Some(10)),
            "{page}"
        );
        assert!(held_by_b.iter().all(|v| v["replica"] == "cp-b"));
        let none = get(a, "/v1/edges?limit=4&state=disconnected").json();
        assert_eq!(none["total"], 0, "{none}");
    })
    .await
    .unwrap();

    // cp-c stops answering: the page comes without its Edges, naming it, at once.
    signal(&cps[2].proc, "-STOP");
    let page = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let page = get(a, "/v1/edges?limit=100").json();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        page
    })
    .await
    .unwrap();
    assert_eq!(page["partial"], true, "{page}");
    assert_eq!(
        page["silentReplicas"],
        serde_json::json!(["cp-c"]),
        "{page}"
    );
    let listed: BTreeSet<&str> = page["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["replica"].as_str().unwrap())
        .collect();
    assert_eq!(listed, BTreeSet::from(["cp-a", "cp-b"]), "{page}");
    assert_eq!(page["total"], 20, "{page}");
    signal(&cps[2].proc, "-CONT");
    tokio::task::spawn_blocking(move || {
        wait_until("cp-c answering again", || {
            let page = get(a, "/v1/edges?limit=100").json();
            (page["total"] == EDGES && page.get("partial").is_none()).then_some(())
        })
    })
    .await
    .unwrap();
    drop(edges);
}

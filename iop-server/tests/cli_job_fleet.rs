//! A fleet-wide job from the shell at the scale it is for: `iopctl job run` drains the
//! `tier=gpu` nodes of 200 Edges, 20 Edges at a time, through the admin API, with its
//! progress bar; the job's progress on `/v1/events` never shows more than 20 running.

mod cli_support;

use std::process::Command;
use std::time::Duration;

use cli_support::in_process::Cp;
use iop_core::NodeRegistry;
use iop_core::edge::EdgeConfig;
use iop_core::registry::{NodeConfig, ProviderCategory, ProviderConfig};
use iop_server::edge_ops;
use iop_tokio::{EdgeClient, EdgeHandle, EnrolmentPolicy, ServerConfig};

use cli_support::CTL_BIN;
const EDGES: usize = 200;

fn node(id: &str, tier: &str) -> NodeConfig {
    NodeConfig::new(id)
        .with_label("tier", tier)
        .with_provider(ProviderConfig::new(
            "llama",
            ProviderCategory::LocalInference,
            2,
            1,
        ))
}

/// An Edge with the built-in operations, a ready `gpu-1` (tier=gpu) and `cpu-1`
/// (tier=cpu).
fn edge(cp: &Cp, i: usize) -> EdgeHandle {
    let config = EdgeConfig::new(format!("edge-{i:03}"), 100 + i as u64);
    let edge = edge_ops::register(EdgeClient::new(config), None)
        .connect(cp.edges())
        .unwrap();
    edge.with_registry(|reg: &mut NodeRegistry, now| {
        for (id, tier) in [("gpu-1", "gpu"), ("cpu-1", "cpu")] {
            let _ = reg.configure(node(id, tier), now).unwrap();
            reg.connect_ready(id, now).unwrap();
        }
    });
    edge
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iopctl_drains_the_gpu_nodes_of_200_edges_20_at_a_time() {
    let mut config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
    // Every Edge dials from 127.0.0.1 at once: none is refused for its address, and
    // one refused over a loaded machine's hello burst is back within half a second
    // (not after the default's 10 s, as long as the test waits).
    config.max_pending_hellos_per_ip = EDGES;
    config.cp.retry_after_overloaded = Duration::from_millis(500);
    let cp = Cp::start(config).await;
    let edges: Vec<EdgeHandle> = (0..EDGES).map(|i| edge(&cp, i)).collect();
    cp.get_until("every Edge connected", "/v1/edges", |v| {
        v["edges"]
            .as_array()
            .is_some_and(|all| all.len() == EDGES && all.iter().all(|e| e["connected"] == true))
    })
    .await;
    let admin = format!("http://{}", cp.admin);

    // The job's progress, as a script following the event stream sees it.
    let (follower, progress) = cli_support::follow_events(cp.admin, "job_progress");

    let run_admin = admin.clone();
    let ran = tokio::task::spawn_blocking(move || {
        Command::new(CTL_BIN)
            .args(["--admin", &run_admin])
            .args(["job", "run", "node.drain", "--edges", "*"])
            .args(["--selector", "label:tier=gpu", "--max-concurrent", "20"])
            .args(["--id", "drain-gpus", "--wait"])
            .output()
            .expect("run iopctl job")
    })
    .await
    .unwrap();
    let (out, bar) = (
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr),
    );
    assert_eq!(ran.status.code(), Some(0), "{out}\n{bar}");
    // The bar ends full.
    assert!(
        bar.contains(&format!("{EDGES}/{EDGES}")) && bar.contains(&format!("succeeded {EDGES}")),
        "{bar}"
    );
    assert!(out.contains("job drain-gpus node.drain (done)"), "{out}");

    // Every gpu node drained, no cpu node.
    for edge in &edges {
        let (gpu, cpu) = edge.with_registry(|reg: &mut NodeRegistry, _| {
            (reg.is_drained("gpu-1"), reg.is_drained("cpu-1"))
        });
        assert_eq!((gpu, cpu), (Some(true), Some(false)));
    }

    // Every change on the stream; never more than 20 Edges running at once.
    let mut seen: Vec<serde_json::Value> = Vec::new();
    while seen.last().is_none_or(|e| e["data"]["state"] != "done") {
        let event = progress
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the job's end on the stream after {}", seen.len()));
        seen.push(event);
    }
    let running = |e: &serde_json::Value| e["data"]["progress"]["running"].as_u64().unwrap();
    let most = seen.iter().map(running).max().unwrap();
    assert!(most <= 20, "{most} Edges ran at once");
    // The limit is what held it back: 200 Edges would otherwise all start at once.
    assert!(most >= 2, "never more than {most} at once");
    assert_eq!(
        seen.last().unwrap()["data"]["progress"]["succeeded"],
        EDGES,
        "{:?}",
        seen.last()
    );
    drop(follower);
    cp.stop().await;
}

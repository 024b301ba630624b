//! The engine's contract (PROTOCOL.md §8): the example nats-server configurations are
//! valid, flush every write before acknowledging it, and replicas run over them — one
//! server, and three with three copies of every bucket; and a test's server goes
//! with the test's process, however that ends.

mod cluster_support;

use std::path::PathBuf;
use std::process::Command;

use cluster_support::*;
use iop_tokio::core::cp::DuplicatePolicy;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/nats")
        .join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn the_example_engine_configurations_are_valid_durable_and_serve_replicas() {
    let bin = iop_cluster::testing::find_nats_server()
        .unwrap_or_else(|why| panic!("{why}; scripts/test.sh installs it"));
    for name in ["nats-server.conf", "cluster-node.conf"] {
        let text = std::fs::read_to_string(example(name)).unwrap();
        assert!(text.contains("sync_interval: always"), "{name}");
        let checked = Command::new(&bin)
            .arg("-c")
            .arg(example(name))
            .arg("-t")
            .output()
            .unwrap();
        assert!(
            checked.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&checked.stderr)
        );
    }

    // One server with the example's JetStream settings.
    let nats = NatsServer::try_start_with_config(&example("nats-server.conf")).unwrap();
    let a = node(&nats, "cp-a", DuplicatePolicy::Replace).await;
    let (edge, s1) = edge_on(&a, "edge-1").await;
    assert_eq!(live_session(&a.cp(), "edge-1"), Some(s1));
    edge.shutdown().await;
    a.stop().await;

    // Three, every bucket in three copies: the production setting.
    let cluster = NatsServer::try_start_cluster(3, Some(&example("nats-server.conf"))).unwrap();
    let servers: Vec<&NatsServer> = cluster.iter().collect();
    let a = node_on(&servers, "cp-a", DuplicatePolicy::Replace, 3).await;
    let b = node_on(&servers, "cp-b", DuplicatePolicy::Replace, 3).await;
    let (edge, s1) = edge_on(&a, "edge-1").await;
    let owner = bounded(
        "the record through cp-b",
        b.replica.router().owner("edge-1"),
    )
    .await;
    assert_eq!(owner.unwrap(), Some(("cp-a".into(), s1)));
    edge.shutdown().await;
    a.stop().await;
    b.stop().await;
}

/// Closes `nats`'s guard and waits (at most 10 s) for the server to die of it.
fn dies_with_its_guard(nats: &mut NatsServer, what: &str) {
    nats.close_guard();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !nats.exited() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} outlived its guard"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn a_test_server_dies_with_the_test_process_that_started_it() {
    // What the test's process dying does to the server's guard: its pipe closes.
    let mut nats = NatsServer::start();
    assert!(!nats.exited(), "the server runs");
    dies_with_its_guard(&mut nats, "the server");
    // A server killed and started again is guarded again.
    nats.restart();
    assert!(!nats.exited(), "the server runs again");
    dies_with_its_guard(&mut nats, "the restarted server");
}

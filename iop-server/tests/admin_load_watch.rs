//! `GET /v1/load/watch` end to end, from an Edge that pushes its load updates: a
//! snapshot, then each change as it is applied; a reconnect with `Last-Event-ID`
//! resumes after it, and one the fleet's bounded log no longer covers (or another
//! process's id) gets `resync` and a fresh snapshot.

mod cli_support;

use std::time::Duration;

use cli_support::Sse;
use cli_support::in_process::Cp;
use iop_core::NodeRegistry;
use iop_core::edge::EdgeConfig;
use iop_core::registry::{LeaseKind, NodeConfig, ProviderCategory, ProviderConfig};
use iop_tokio::{EdgeClient, EdgeHandle, EnrolmentPolicy, ServerConfig};

fn server() -> ServerConfig {
    let mut c = ServerConfig::new(EnrolmentPolicy::AcceptAny);
    c.cp.status_refresh = None;
    c.cp.load_update_interval = Some(Duration::from_millis(50));
    // A short log, so that a watcher is easily left behind.
    c.fleet.watch_changes = 4;
    c
}

async fn edge(cp: &Cp) -> EdgeHandle {
    let handle = EdgeClient::new(EdgeConfig::new("edge-a", 5))
        .connect(cp.edges())
        .unwrap();
    handle.with_registry(|reg: &mut NodeRegistry, now| {
        for (node, model) in [("gpu-0", "llama-3"), ("gpu-1", "mistral")] {
            let config = NodeConfig::new(node).with_provider(
                ProviderConfig::new("p", ProviderCategory::LocalInference, 8, 0).with_model(model),
            );
            let _ = reg.configure(config, now).unwrap();
            reg.connect_ready(node, now).unwrap();
        }
    });
    handle
}

/// The id of the last event `sse` has shown.
fn last_id(sse: &Sse) -> String {
    sse.seen
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("an event id")
        .to_owned()
}

/// Takes one lease on `node`'s provider and waits until the stream shows it.
async fn lease(edge: &EdgeHandle, node: &'static str, in_flight: u32, sse: Sse) -> Sse {
    let _lease = edge.with_registry(move |reg: &mut NodeRegistry, _| {
        reg.admit(node, "p", LeaseKind::Normal).unwrap()
    });
    tokio::task::spawn_blocking(move || {
        let mut sse = sse;
        sse.wait_for(&format!("\"inFlight\":{in_flight}"));
        sse
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_sees_a_snapshot_then_each_change_and_resumes_or_resyncs() {
    let cp = Cp::start(server()).await;
    let a = edge(&cp).await;
    cp.get_until("the view", "/v1/placement?model=llama-3", |v| {
        v["serving"] == 1
    })
    .await;
    let admin = cp.admin;
    let mut sse = tokio::task::spawn_blocking(move || {
        let mut sse = Sse::open(admin, "/v1/load/watch?model=llama-3");
        sse.wait_for("event: snapshot");
        sse
    })
    .await
    .unwrap();
    assert!(sse.seen.contains("\"edgeId\":\"edge-a\""));
    assert!(
        !sse.seen.contains("mistral"),
        "the model filter: {}",
        sse.seen
    );

    // A lease on the watched model's provider: a change with the new numbers. One on
    // the other model's is filtered out.
    sse = lease(&a, "gpu-0", 1, sse).await;
    assert!(sse.seen.contains("event: change"));
    assert!(sse.seen.contains("\"kind\":\"numbers\""));
    let resume_from = last_id(&sse);
    let _other = a.with_registry(|reg: &mut NodeRegistry, _| {
        reg.admit("gpu-1", "p", LeaseKind::Normal).unwrap()
    });
    sse = lease(&a, "gpu-0", 2, sse).await;
    assert!(!sse.seen.contains("mistral"));
    drop(sse);

    // Resumed right after a change the log still holds: no snapshot, the next change.
    let id = resume_from.clone();
    let resumed = tokio::task::spawn_blocking(move || {
        let mut sse = Sse::open_with(
            admin,
            "/v1/load/watch?model=llama-3",
            &[("Last-Event-ID", &id)],
        );
        sse.wait_for("\"inFlight\":2");
        sse
    })
    .await
    .unwrap();
    assert!(
        !resumed.seen.contains("event: snapshot"),
        "{}",
        resumed.seen
    );
    assert!(!resumed.seen.contains("event: resync"));
    drop(resumed);

    // Another process's id: told, then a snapshot.
    let other = tokio::task::spawn_blocking(move || {
        let mut sse = Sse::open_with(admin, "/v1/load/watch", &[("Last-Event-ID", "1.1")]);
        sse.wait_for("event: snapshot");
        sse
    })
    .await
    .unwrap();
    assert!(other.seen.contains("event: resync"));
    drop(other);

    // Six more changes: the log keeps four, so the old id is past it.
    let mut watcher = tokio::task::spawn_blocking(move || {
        let mut sse = Sse::open(admin, "/v1/load/watch?edge=edge-a");
        sse.wait_for("event: snapshot");
        sse
    })
    .await
    .unwrap();
    for n in 3..9 {
        watcher = lease(&a, "gpu-0", n, watcher).await;
    }
    let behind = tokio::task::spawn_blocking(move || {
        let mut sse = Sse::open_with(admin, "/v1/load/watch", &[("Last-Event-ID", &resume_from)]);
        sse.wait_for("event: snapshot");
        sse
    })
    .await
    .unwrap();
    assert!(behind.seen.contains("event: resync"), "{}", behind.seen);
    assert!(behind.seen.contains("\"inFlight\":8"));

    // Unknown parameters are refused.
    assert_eq!(cp.get("/v1/load/watch?modle=x").await.status, 400);
    a.shutdown().await;
    cp.stop().await;
}

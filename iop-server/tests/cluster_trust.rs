//! The cluster's trust boundary (PROTOCOL.md §8 "The engine's contract"), on a real
//! nats-server running `examples/nats/accounts.conf`: the replicas, each with its own
//! NKey, route commands, record them, supersede sessions and publish events under
//! exactly the permissions the example grants; a client without their credentials —
//! one with none, an observer, another account's user — can neither command an Edge,
//! nor kick it off, nor write a record.

mod cluster_support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cluster_support::*;
use futures_lite::StreamExt;
use iop_cluster::events::FleetItem;
use iop_tokio::core::cp::{CpEvent, CpEventKind, DuplicatePolicy};
use iop_tokio::prelude::*;

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../examples/nats/accounts.conf"
);

/// The users of the example: replicas a and b (c is never started), an observer,
/// another account's application. Each a fresh key pair.
struct Users {
    keys: BTreeMap<&'static str, nkeys::KeyPair>,
}

impl Users {
    fn new() -> Self {
        let keys = [
            "REPLICA_A",
            "REPLICA_B",
            "REPLICA_C",
            "OBSERVER",
            "ADMIN",
            "APP",
        ]
        .into_iter()
        .map(|name| (name, nkeys::KeyPair::new_user()))
        .collect();
        Self { keys }
    }

    fn seed(&self, name: &str) -> String {
        self.keys[name].seed().unwrap()
    }

    /// The example with these users' public keys written in.
    fn config(&self) -> PathBuf {
        let mut text = std::fs::read_to_string(EXAMPLE).unwrap();
        for (name, key) in &self.keys {
            text = text.replace(
                &format!("$IOP_NKEY_{name} "),
                &format!("{} ", key.public_key()),
            );
            text = text.replace(
                &format!("$IOP_NKEY_{name},"),
                &format!("{},", key.public_key()),
            );
        }
        assert!(!text.contains("$IOP_NKEY_"), "every key written in");
        let path = std::env::temp_dir().join(format!(
            "iop-accounts-{}-{}.conf",
            std::process::id(),
            self.keys["APP"].public_key()
        ));
        std::fs::write(&path, text).unwrap();
        path
    }

    async fn client(&self, name: &str, url: &str) -> Result<async_nats::Client, String> {
        self.options(name)
            .connect(url)
            .await
            .map_err(|e| e.to_string())
    }

    fn options(&self, name: &str) -> async_nats::ConnectOptions {
        let options = async_nats::ConnectOptions::new().nkey(self.seed(name));
        if name == "OBSERVER" {
            options.custom_inbox_prefix(iop_cluster::permissions::OBSERVER_INBOX_PREFIX)
        } else {
            options
        }
    }

    /// Whether user `name` is refused a subscription to `subject` (the server says
    /// so), and received nothing on it while `meanwhile` ran.
    async fn cannot_read(
        &self,
        name: &str,
        url: &str,
        subject: &str,
        meanwhile: impl std::future::Future<Output = ()>,
    ) -> bool {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let client = self
            .options(name)
            .event_callback(move |event| {
                let tx = tx.clone();
                async move {
                    if let async_nats::Event::ServerError(e) = event {
                        let _ = tx.send(e.to_string());
                    }
                }
            })
            .connect(url)
            .await
            .unwrap();
        let mut sub = client.subscribe(subject.to_owned()).await.unwrap();
        client.flush().await.unwrap();
        let refused = bounded("the server's refusal", async {
            loop {
                let e = rx.recv().await.expect("events");
                if e.contains("Permissions Violation") && e.contains(subject) {
                    return true;
                }
            }
        })
        .await;
        meanwhile.await;
        let got = tokio::time::timeout(Duration::from_millis(500), sub.next()).await;
        refused && !matches!(got, Ok(Some(_)))
    }
}

async fn replica(nats: &NatsServer, users: &Users, id: &str, name: &str) -> Node {
    let seed = users.seed(name);
    node_authed(
        &[nats],
        id,
        DuplicatePolicy::Replace,
        |_| {},
        |o| o.nkey(seed),
    )
    .await
}

/// An Edge `edge_id` advertising `edge.ping`, counting the commands it runs.
fn counting_edge(edge_id: &str, runs: Arc<AtomicUsize>) -> EdgeClient {
    EdgeClient::new(fast_edge(edge_id)).operation("edge.ping", TargetLevel::Edge, move |_ctx| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            CommandResult::succeeded("pong")
        }
    })
}

fn connected(event: &CpEvent) -> Option<(&'static str, serde_json::Value)> {
    match event {
        CpEvent::SessionAccepted { edge_id, .. } => {
            Some(("connected", serde_json::json!({ "edge": edge_id })))
        }
        _ => None,
    }
}

/// The request the issue's attacker sent: a command to `edge_id`'s session on
/// replica `a`, as a replica would route it.
fn forged_command(edge_id: &str, session: u64) -> async_nats::Request {
    routed_command(edge_id, session, "edge.ping", None, Duration::from_secs(2))
}

#[test]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
fn the_example_grants_replicas_and_observers_exactly_the_generated_permissions() {
    let example = std::fs::read_to_string(EXAMPLE).unwrap();
    let block = iop_cluster::permissions::config_block(
        &iop_cluster::ClusterConfig::new("a"),
        &["a", "b", "c"],
    );
    assert!(
        example.contains(&block),
        "examples/nats/accounts.conf must hold `iop-control-plane cluster-permissions`'s block"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn replicas_with_their_own_nkeys_work_and_no_other_client_reaches_an_edge() {
    let users = Users::new();
    let config = users.config();
    let nats = NatsServer::start_with_config(&config);
    let _ = std::fs::remove_file(&config);
    let url = nats.url();
    let mut a = replica(&nats, &users, "a", "REPLICA_A").await;
    let b = replica(&nats, &users, "b", "REPLICA_B").await;
    a.replica.publish_events(
        a.cp(),
        vec![CpEventKind::SessionAccepted],
        Arc::new(connected),
    );

    // The replicas, under the example's permissions: events, routing, records, views.
    let router = b.replica.router();
    let mut events = bounded("the fleet's events", router.events(None))
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let edge = counting_edge("edge-1", runs.clone())
        .connect(a.addr())
        .unwrap();
    let session = bounded("edge-1 on a", edge.connected())
        .await
        .unwrap()
        .session_id;
    match bounded("edge-1's event", events.next()).await {
        Some(FleetItem::Event { name, data, .. }) => {
            assert_eq!(
                (name.as_str(), data["edge"].as_str()),
                ("connected", Some("edge-1"))
            )
        }
        other => panic!("{other:?}"),
    }
    eventually("b seeing a's record", || {
        router
            .other_replicas()
            .contains(&"a".to_owned())
            .then_some(())
    })
    .await;
    let sent = bounded(
        "a command routed through b",
        router.command(
            "edge-1",
            CommandSpec::new("edge.ping"),
            Duration::from_secs(5),
        ),
    )
    .await
    .unwrap();
    assert!(sent.response.accepted, "{sent:?}");
    let record = bounded("its record", router.commands().get(&sent.command_id))
        .await
        .unwrap();
    assert!(record.is_some(), "the command's record is in the engine");
    bounded("a status through b", router.status("edge-1", Vec::new()))
        .await
        .unwrap();
    let views = bounded("the fleet's views", router.remote_views()).await;
    let ids: Vec<&str> = views.iter().map(|v| v.view.edge_id.as_str()).collect();
    assert_eq!(ids, ["edge-1"]);
    assert_eq!(views[0].replica.as_deref(), Some("a"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // Without credentials: refused at the door.
    assert!(
        anonymous_is_refused(&url).await,
        "a client without credentials connected"
    );

    // Another account's user sees none of it: no replica answers, no bucket exists.
    let app = users.client("APP", &url).await.unwrap();
    let e = app
        .send_request("iop.cluster.a.edge", forged_command("edge-1", session))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), async_nats::RequestErrorKind::NoResponders, "{e}");
    let app_js = async_nats::jetstream::new(app.clone());
    assert!(app_js.get_key_value("iop-owners").await.is_err());

    // An observer reads the records, and may neither command, kick off nor write.
    let observer = users.client("OBSERVER", &url).await.unwrap();
    let js = async_nats::jetstream::new(observer.clone());
    let owners = js.get_key_value("iop-owners").await.unwrap();
    let entry = owners
        .entry("edge-1")
        .await
        .unwrap()
        .expect("edge-1's record");
    assert_eq!(entry.revision, session);
    assert!(
        observer
            .send_request("iop.cluster.a.edge", forged_command("edge-1", session))
            .await
            .is_err(),
        "a routed command from an observer is never answered"
    );
    let _ = observer
        .publish("iop.cluster.a.superseded", "edge-1".into())
        .await;
    assert!(
        tokio::time::timeout(
            Duration::from_secs(3),
            owners.put(
                "edge-1",
                br#"{"replica":"ghost","live":true}"#.to_vec().into()
            )
        )
        .await
        .map_or(true, |put| put.is_err()),
        "an observer's write is refused"
    );
    let _ = observer.flush().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "no stranger's command ran");
    assert_eq!(
        live_session(&a.cp(), "edge-1"),
        Some(session),
        "edge-1 kept its session"
    );
    let after = owners.entry("edge-1").await.unwrap().unwrap();
    assert_eq!(after.revision, session, "its record unchanged");

    // What is routed to a replica, and the replies to a replica's requests, are read
    // by that replica alone: not by another replica's user, not by an observer.
    let route = || async {
        let sent = router
            .command(
                "edge-1",
                CommandSpec::new("edge.ping"),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert!(sent.response.accepted);
    };
    assert!(
        users
            .cannot_read("REPLICA_B", &url, "iop.cluster.a.edge", route())
            .await,
        "replica b's user reads what is routed to a"
    );
    assert!(
        users
            .cannot_read("REPLICA_A", &url, "_INBOX_IOP.b.>", route())
            .await,
        "replica a's user reads b's replies"
    );
    for inbox in ["_INBOX_IOP.>", "_INBOX.>"] {
        assert!(
            users.cannot_read("OBSERVER", &url, inbox, route()).await,
            "an observer reads the replies under {inbox}"
        );
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        5,
        "the routed commands ran once each"
    );

    // A second process with the same id on b supersedes it through the notice
    // subject, which the replicas may use.
    let second = counting_edge("edge-1", runs.clone())
        .connect(b.addr())
        .unwrap();
    let moved = bounded("edge-1 on b", second.connected())
        .await
        .unwrap()
        .session_id;
    assert!(moved > session);
    eventually("a to drop the superseded session", || {
        (live_session(&a.cp(), "edge-1").is_none()).then_some(())
    })
    .await;
    drop((edge, second));
    a.stop().await;
    b.stop().await;
}

/// Whether a client without credentials is refused (the connect fails, or the first
/// round trip does).
async fn anonymous_is_refused(url: &str) -> bool {
    match async_nats::connect(url).await {
        Err(_) => true,
        Ok(client) => client.flush().await.is_err(),
    }
}

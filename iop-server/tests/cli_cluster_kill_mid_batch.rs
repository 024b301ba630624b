//! A replica process SIGKILLed with a batch of ownership claims in flight, on the
//! durable engine (`examples/nats/nats-server.conf`): a crowd of Edges moves to it
//! while the engine is stalled, so their claims wait in its group commit; it dies
//! before the engine answers. No Edge is enrolled while its claim is not durable, and
//! once the engine is back and replicas run again on the same ports, every Edge is
//! enrolled exactly once: its one live record names the replica holding its session,
//! with the session's id as its revision, and that replica holds the session —
//! whatever of the dead replica's batch landed.

mod cli_support;

use std::path::PathBuf;
use std::time::Duration;

use cli_support::{control_plane, control_plane_on, get, signal, wait_until};
use iop_cluster::key::edge_key;
use iop_cluster::ownership::OwnershipStore;
use iop_cluster::testing::NatsServer;
use iop_cluster::{ClusterConfig, NatsStore};
use iop_core::edge::EdgeConfig;
use iop_tokio::{EdgeClient, EdgeHandle};

const CROWD: usize = 60;

fn durable() -> NatsServer {
    let config: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "examples",
        "nats",
        "nats-server.conf",
    ]
    .iter()
    .collect();
    NatsServer::start_with_config(&config)
}

/// The value of gauge `name` in `admin`'s `/metrics`.
fn gauge(admin: std::net::SocketAddr, name: &str) -> f64 {
    let text = get(admin, "/metrics").body;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Polls `f` until it holds, at most `bound`; fails with what it last said.
fn within<E: std::fmt::Debug>(bound: Duration, what: &str, mut f: impl FnMut() -> Result<(), E>) {
    let deadline = std::time::Instant::now() + bound;
    loop {
        match f() {
            Ok(()) => return,
            Err(e) if std::time::Instant::now() > deadline => {
                panic!("timed out waiting for {what}: {e:?}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[test]
#[ignore = "needs nats-server 2.12+: scripts/test.sh runs it"]
fn a_replica_killed_with_claims_in_flight_leaves_every_edge_enrolled_once() {
    let nats = durable();
    let url = nats.url();
    let flags = |id: &'static str| ["--cluster", url.as_str(), "--replica-id", id];
    let a = control_plane(&flags("cp-a"));
    let b = control_plane(&flags("cp-b"));

    // The crowd dials cp-b first, cp-a after.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let crowd: Vec<EdgeHandle> = rt.block_on(async {
        (0..CROWD)
            .map(|i| {
                let mut config = EdgeConfig::new(format!("crowd-{i:03}"), i as u64 + 1);
                config.backoff_base = Duration::from_millis(100);
                config.backoff_max = Duration::from_secs(1);
                EdgeClient::new(config)
                    .fallback_addrs([a.edges])
                    .connect(b.edges)
                    .unwrap()
            })
            .collect()
    });
    let connected = || crowd.iter().filter(|e| e.is_connected()).count();
    wait_until("the crowd on cp-b", || (connected() == CROWD).then_some(()));

    // The engine stalls and cp-b dies: its Edges dial cp-a, whose claims wait.
    nats.pause();
    signal(&b.proc, "-KILL");
    wait_until("the crowd's hellos waiting on cp-a", || {
        (gauge(a.admin, "iop_connections") >= (CROWD / 2) as f64).then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    // Nothing is enrolled while the engine cannot make it durable.
    assert_eq!(
        connected(),
        0,
        "an Edge enrolled while the engine was stalled"
    );
    // cp-a dies with the claims in flight; the engine comes back.
    signal(&a.proc, "-KILL");
    nats.resume();
    let store = rt.block_on(async {
        let client = async_nats::connect(&url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        NatsStore::open(&js, &ClusterConfig::new("observer"))
            .await
            .unwrap()
    });
    // What of cp-a's batch the engine made durable after cp-a died (any of it may
    // have: its writes were sent): records naming cp-a that no Edge was told of.
    std::thread::sleep(Duration::from_millis(300));
    let landed = (0..CROWD)
        .filter(|i| {
            let key = edge_key(&format!("crowd-{i:03}"));
            let current = rt.block_on(store.entry(&key)).unwrap();
            current
                .and_then(|c| c.record)
                .is_some_and(|r| r.replica == "cp-a")
        })
        .count();
    eprintln!("records of cp-a's batch that landed after it died: {landed} of {CROWD}");

    // Replicas again on the crowd's two ports (new ids: the dead ones' records are
    // taken over once their liveness expires).
    let c = control_plane_on(a.edges, &flags("cp-c"));
    let d = control_plane_on(b.edges, &flags("cp-d"));
    within(Duration::from_secs(30), "the crowd enrolled again", || {
        (connected() == CROWD).then_some(()).ok_or(connected())
    });

    // Each Edge: one live record, naming the replica that holds its session, whose
    // revision is that session's id.
    within(
        Duration::from_secs(15),
        "every record naming its session's holder",
        || {
            let mut wrong = Vec::new();
            for (i, edge) in crowd.iter().enumerate() {
                let Some(session) = rt
                    .block_on(async {
                        tokio::time::timeout(Duration::from_secs(1), edge.connected()).await
                    })
                    .ok()
                    .and_then(Result::ok)
                else {
                    wrong.push("a session gone".to_owned());
                    continue;
                };
                let id = format!("crowd-{i:03}");
                let current = rt
                    .block_on(store.entry(&edge_key(&id)))
                    .unwrap()
                    .expect("a record");
                let record = current.record.expect("readable");
                let (holder, admin) = if edge.control_plane_addr() == a.edges {
                    ("cp-c", c.admin)
                } else {
                    ("cp-d", d.admin)
                };
                let view = get(admin, &format!("/v1/edges/{id}")).json();
                let held = view["replica"] == holder
                    && view["sessionId"].as_str() == Some(&session.session_id.to_string());
                if !(held
                    && record.live
                    && record.replica == holder
                    && current.revision == session.session_id)
                {
                    wrong.push(format!(
                        "{id}: {record:?} rev {} vs {session:?}, {view}",
                        current.revision
                    ));
                }
            }
            wrong.is_empty().then_some(()).ok_or(wrong)
        },
    );
    drop(crowd);
    drop(rt);
}

//! Replicas over a real nats-server ([`NatsServer`]). Every wait is bounded.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use iop_cluster::testing::NatsServer;
use iop_cluster::{ClusterConfig, Replica};
use iop_tokio::DirectoryFactory;
use iop_tokio::core::cp::{CpConfig, DuplicatePolicy};
use iop_tokio::prelude::*;

pub const WAIT: Duration = Duration::from_secs(30);

pub async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// Polls `f` every 20 ms until it is `Some` (at most [`WAIT`]).
pub async fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    bounded(what, async {
        loop {
            if let Some(v) = f() {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// A Control Plane server whose ownership decisions go to a replica of the cluster.
pub struct Node {
    pub server: ControlPlaneServer,
    pub replica: Replica,
}

impl Node {
    pub fn cp(&self) -> ControlPlaneHandle {
        self.server.handle()
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub async fn stop(self) {
        self.server.shutdown().await;
        self.replica.shutdown().await;
    }
}

/// A server config with short timers and the external directory (a replica's own,
/// [`ClusterConfig::directory`], replaces it where the replica is at hand).
pub fn cluster_server(policy: DuplicatePolicy) -> ServerConfig {
    let mut cp = CpConfig::default();
    cp.heartbeat_interval = Duration::from_secs(1);
    cp.status_timeout = Duration::from_secs(2);
    cp.hello_timeout = Duration::from_secs(3);
    cp.duplicate_policy = policy;
    cp.retry_after_duplicate = Duration::from_millis(200);
    cp.retry_after_superseded = Duration::from_secs(30);
    cp.retry_after_overloaded = Duration::from_millis(300);
    let mut config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
    config.cp = cp;
    // The load's samples every second, for a minute.
    config.fleet.fleet_history_interval = Duration::from_secs(1);
    config.fleet.edge_history_interval = Duration::from_secs(1);
    config.fleet.load_history = Duration::from_secs(60);
    config.directory = Some(DirectoryFactory::external());
    config.shutdown_grace = Duration::from_secs(2);
    // Every Edge of a test dials from 127.0.0.1.
    config.max_pending_hellos_per_ip = config.cp.max_pending_hellos;
    config
}

/// Replica `id` on `nats`, with a short heartbeat (liveness expires after 3 × 300 ms).
pub async fn node(nats: &NatsServer, id: &str, policy: DuplicatePolicy) -> Node {
    node_on(&[nats], id, policy, 1).await
}

/// Replica `id` on the NATS servers `nats` (one cluster), its buckets with `copies`
/// copies. A NATS cluster that is still electing its JetStream leader is waited for.
pub async fn node_on(
    nats: &[&NatsServer],
    id: &str,
    policy: DuplicatePolicy,
    copies: usize,
) -> Node {
    node_with(nats, id, policy, |config| config.bucket_replicas = copies).await
}

/// Replica `id` on the NATS servers `nats`, its config changed by `tweak` first.
pub async fn node_with(
    nats: &[&NatsServer],
    id: &str,
    policy: DuplicatePolicy,
    tweak: impl FnOnce(&mut ClusterConfig),
) -> Node {
    node_authed(nats, id, policy, tweak, |options| options).await
}

/// [`node_with`], its NATS client's options (credentials, say) changed by `auth`.
pub async fn node_authed(
    nats: &[&NatsServer],
    id: &str,
    policy: DuplicatePolicy,
    tweak: impl FnOnce(&mut ClusterConfig),
    auth: impl FnOnce(async_nats::ConnectOptions) -> async_nats::ConnectOptions,
) -> Node {
    let mut config = ClusterConfig::new(id);
    config.heartbeat = Duration::from_millis(300);
    tweak(&mut config);
    let mut server_config = cluster_server(policy);
    config.configure(&mut server_config);
    let server = ControlPlaneServer::bind("127.0.0.1:0".parse().unwrap(), server_config)
        .await
        .expect("bind");
    let addrs: Vec<async_nats::ServerAddr> =
        nats.iter().map(|n| n.url().parse().unwrap()).collect();
    // The replicas' credentials when the servers have their account.
    let client = auth(nats[0].authorize(config.connect_options()))
        .connect(addrs)
        .await
        .expect("connect nats");
    let replica = bounded("the replica's buckets", async {
        loop {
            match Replica::start(client.clone(), server.handle(), config.clone()).await {
                Ok(replica) => return replica,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await;
    Node { server, replica }
}

/// An Edge whose `model.load` reports RUNNING, then waits for `release`.
pub fn loading_edge(edge_id: &str, release: Arc<tokio::sync::Notify>) -> EdgeClient {
    EdgeClient::new(fast_edge(edge_id)).operation("model.load", TargetLevel::Edge, move |ctx| {
        let release = release.clone();
        async move {
            let _ = ctx.running("loading", BTreeMap::new());
            release.notified().await;
            CommandResult::succeeded("loaded")
        }
    })
}

/// An Edge config that reconnects quickly.
pub fn fast_edge(edge_id: &str) -> EdgeConfig {
    let mut config = EdgeConfig::new(edge_id, process_seed());
    config.backoff_base = Duration::from_millis(20);
    config.backoff_max = Duration::from_millis(200);
    config
}

/// A nats-server with the replicas' account and two replicas on it, `cp-a` and
/// `cp-b`, under `policy`.
pub async fn two_replicas(policy: DuplicatePolicy) -> (NatsServer, Node, Node) {
    let nats = NatsServer::start_with_accounts();
    let a = node(&nats, "cp-a", policy).await;
    let b = node(&nats, "cp-b", policy).await;
    (nats, a, b)
}

/// An Edge `edge_id` connected to `node`, and its session id once it has one.
pub async fn edge_on(node: &Node, edge_id: &str) -> (EdgeHandle, u64) {
    let edge = EdgeClient::new(fast_edge(edge_id))
        .connect(node.addr())
        .unwrap();
    let what = format!("{edge_id}'s session on {}", node.replica.replica_id());
    let session = bounded(&what, edge.connected()).await.unwrap();
    (edge, session.session_id)
}

/// The live session id of `edge_id` on `cp`, if it has one.
pub fn live_session(cp: &ControlPlaneHandle, edge_id: &str) -> Option<u64> {
    cp.edge(edge_id)
        .filter(|v| v.reachability != iop_tokio::core::cp::Reachability::Disconnected)
        .map(|v| v.session_id)
}

/// A command request for `operation` to `edge_id`'s session `session`, as another
/// replica routes it (headers and body), waiting `wait_ms` if given; asked for at most
/// `timeout`.
pub fn routed_command(
    edge_id: &str,
    session: u64,
    operation: &str,
    wait_ms: Option<&str>,
    timeout: Duration,
) -> async_nats::Request {
    use iop_tokio::core::proto::{EdgeCommandRequest, Message as _};
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Iop-Kind", "command");
    headers.insert("Iop-Edge-Id", edge_id);
    headers.insert("Iop-Session-Id", session.to_string().as_str());
    if let Some(wait_ms) = wait_ms {
        headers.insert("Iop-Wait-Ms", wait_ms);
    }
    let body = EdgeCommandRequest {
        operation: operation.into(),
        ..Default::default()
    };
    async_nats::Request::new()
        .headers(headers)
        .payload(body.encode_to_vec().into())
        .timeout(Some(timeout))
}

/// `node`'s admin API on loopback, with its replica id and router as the binary sets
/// them.
pub async fn admin_of(node: &Node) -> SocketAddr {
    use std::future::IntoFuture as _;
    let mut state = iop_server::admin::AdminState::new(node.cp());
    state.replica_id = Some(node.replica.replica_id().to_owned());
    state.router = Some(node.replica.router());
    state.cluster_stats = Some(node.replica.stats());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(axum::serve(listener, iop_server::admin::router(state)).into_future());
    addr
}

/// One HTTP/1.1 request to `admin`: its status and JSON body (`Null` when none).
pub async fn http(
    admin: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let request = match body {
        Some(b) => format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        ),
        None => format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    };
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(admin).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        (
            status,
            serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
        )
    })
    .await
    .unwrap()
}

//! `iop-demo --cluster`: three Control Plane replicas over one nats-server in this
//! process, two Edges; which replica holds each, a command routed across replicas,
//! and a replica failing while its Edge moves to another.

use std::io::Write;
use std::time::{Duration, Instant};

use iop_cluster::testing::NatsServer;
use iop_cluster::{ClusterConfig, Replica, Router};
use iop_core::cp::CommandSpec;

use super::super::edge_ops;
use super::super::table::Table;
use super::{Failure, io, section};
use iop_tokio::{
    ControlPlaneServer, EdgeClient, EdgeConfig, EdgeHandle, EnrolmentPolicy, ServerConfig,
};

/// Section titles, in order (tests look for them).
pub const SECTIONS: [&str; 4] = [
    "1. Replicas and who holds each Edge",
    "2. A command through a replica that does not hold the Edge",
    "3. A replica fails",
    "4. Summary",
];

const WAIT: Duration = Duration::from_secs(10);

struct DemoReplica {
    id: &'static str,
    server: ControlPlaneServer,
    replica: Replica,
}

async fn start_replica(nats: &NatsServer, id: &'static str) -> Result<DemoReplica, Failure> {
    let mut cluster = ClusterConfig::new(id);
    cluster.heartbeat = Duration::from_millis(500);
    let mut config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
    cluster.configure(&mut config);
    config.cp.heartbeat_interval = Duration::from_secs(1);
    config.shutdown_grace = Duration::from_secs(1);
    let server = ControlPlaneServer::bind(([127, 0, 0, 1], 0).into(), config)
        .await
        .map_err(|e| Failure::Runtime(format!("replica {id}: {e}")))?;
    let client = async_nats::connect(nats.url())
        .await
        .map_err(|e| Failure::Runtime(format!("replica {id}: NATS: {e}")))?;
    let replica = Replica::start(client, server.handle(), cluster)
        .await
        .map_err(|e| Failure::Runtime(format!("replica {id}: {e}")))?;
    Ok(DemoReplica {
        id,
        server,
        replica,
    })
}

/// The replica holding `edge_id`'s live session and its session id, once one does.
async fn holder(
    router: &Router,
    edge_id: &str,
    not: Option<&str>,
) -> Result<(String, u64), Failure> {
    let deadline = Instant::now() + WAIT;
    loop {
        match router.owner(edge_id).await {
            Ok(Some((replica, session))) if Some(replica.as_str()) != not => {
                return Ok((replica, session));
            }
            _ if Instant::now() > deadline => {
                return Err(Failure::Runtime(format!(
                    "no replica took {edge_id} in time"
                )));
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Runs the cluster walkthrough, writing to `out`.
pub async fn run(out: &mut dyn Write) -> Result<(), Failure> {
    let started = Instant::now();
    let nats = NatsServer::try_start().map_err(Failure::Usage)?;
    writeln!(
        out,
        "iop demo --cluster: three replicas over nats-server {} and two edges on 127.0.0.1",
        nats.url()
    )
    .map_err(io)?;
    let mut replicas = Vec::new();
    for id in ["cp-a", "cp-b", "cp-c"] {
        replicas.push(start_replica(&nats, id).await?);
    }
    let addrs: Vec<_> = replicas.iter().map(|r| r.server.local_addr()).collect();

    // Each Edge knows every replica, first its own.
    let mut edges: Vec<(&str, EdgeHandle)> = Vec::new();
    for (i, edge_id) in ["edge-1", "edge-2"].into_iter().enumerate() {
        let mut config = EdgeConfig::new(edge_id, iop_tokio::process_seed());
        config.backoff_base = Duration::from_millis(50);
        config.backoff_max = Duration::from_millis(500);
        let others = addrs
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, a)| *a);
        let edge = edge_ops::register(EdgeClient::new(config), None)
            .fallback_addrs(others)
            .connect(addrs[i])
            .map_err(|e| Failure::Runtime(format!("{edge_id}: {e}")))?;
        tokio::time::timeout(WAIT, edge.connected())
            .await
            .map_err(|_| Failure::Runtime(format!("{edge_id} did not connect")))?
            .map_err(|e| Failure::Runtime(format!("{edge_id}: {e}")))?;
        edges.push((edge_id, edge));
    }

    section(out, SECTIONS[0])?;
    let router = replicas[2].replica.router();
    let mut table = Table::new(["edge", "held by", "session (the record's revision)"]);
    let mut first = None;
    for (edge_id, _) in &edges {
        let (replica, session) = holder(&router, edge_id, None).await?;
        first.get_or_insert((replica.clone(), session));
        table.row([edge_id.to_string(), replica, session.to_string()]);
    }
    write!(out, "{table}").map_err(io)?;
    let (held_by, s1) = first.unwrap_or_default();

    section(out, SECTIONS[1])?;
    let sent = router
        .command("edge-1", CommandSpec::new(edge_ops::EDGE_PING), WAIT)
        .await
        .map_err(|e| Failure::Runtime(format!("routed command: {e}")))?;
    let mut table = Table::new(["sent by", "edge", "held by", "command", "answer"]);
    table.row([
        replicas[2].id.to_owned(),
        "edge-1".to_owned(),
        held_by.clone(),
        sent.command_id.clone(),
        if sent.response.accepted {
            "accepted".to_owned()
        } else {
            format!("rejected: {}", sent.response.message)
        },
    ]);
    write!(out, "{table}").map_err(io)?;

    section(out, SECTIONS[2])?;
    // The replica holding edge-1 dies: no release of its records, no goodbye.
    let Some(i) = replicas.iter().position(|r| r.id == held_by) else {
        return Err(Failure::Runtime(format!("unknown replica {held_by}")));
    };
    let dead = replicas.remove(i);
    dead.replica.abort();
    dead.server.shutdown().await;
    let (now_by, s2) = holder(&router, "edge-1", Some(&held_by)).await?;
    let mut table = Table::new(["edge", "was held by", "session", "now held by", "session"]);
    table.row([
        "edge-1".to_owned(),
        held_by.clone(),
        s1.to_string(),
        now_by.clone(),
        s2.to_string(),
    ]);
    write!(out, "{table}").map_err(io)?;
    if s2 <= s1 {
        return Err(Failure::Runtime(format!(
            "session ids went back: {s1} then {s2}"
        )));
    }

    section(out, SECTIONS[3])?;
    writeln!(
        out,
        "{} replicas left, edge-1 moved from {held_by} to {now_by} with a higher session id, in {:.1} s",
        replicas.len(),
        started.elapsed().as_secs_f64()
    )
    .map_err(io)?;
    for (_, edge) in edges {
        edge.shutdown().await;
    }
    for r in replicas {
        r.server.shutdown().await;
        r.replica.shutdown().await;
    }
    Ok(())
}

//! 45 000 Edges over three Control Plane replicas on this machine (one process holds
//! at most ~20 000 sockets, so each replica and each third of the Edges is a process
//! of its own) with one nats-server: every Edge enrolled, none dropped while they
//! heartbeat for 30 s, and every replica's fleet listing (its own views and the other
//! replicas', through the cluster) showing all of them.
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin cluster_scale [-- EDGES_PER_REPLICA]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use iop_bench_socket::fleet::{self, Role, System, report};
use iop_bench_socket::process::rss_bytes;
use iop_bench_socket::{Row, Table};
use iop_cluster::testing::NatsServer;
use iop_cluster::{ClusterConfig, Replica};
use iop_tokio::ControlPlaneServer;
use iop_tokio::core::cp::Reachability;

const REPLICAS: usize = 3;
const HOLD: Duration = Duration::from_secs(30);
const BOUND: Duration = Duration::from_secs(300);

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("replica") => replica(args[1].parse()?, args[2].parse()?, &args[3], &args[4]),
        Some("edges") => {
            fleet::run_named_edges(System::Ours, args[1].parse()?, args[2].parse()?, &args[3])?;
            Ok(())
        }
        _ => orchestrate(args.first().and_then(|n| n.parse().ok()).unwrap_or(15_000)),
    }
}

fn orchestrate(per_replica: usize) -> Result<(), BoxError> {
    let nats = NatsServer::try_start()?;
    let total = per_replica * REPLICAS;
    let mut replicas = Vec::new();
    let mut edges = Vec::new();
    for i in 0..REPLICAS {
        let args = [
            "replica".to_owned(),
            per_replica.to_string(),
            total.to_string(),
            nats.url(),
            format!("cp-{i}"),
        ];
        let mut r = Role::spawn(&args)?;
        let addr = r.expect("addr")?;
        let prefix = format!("edge{i}");
        edges.push(Role::spawn(&[
            "edges".into(),
            per_replica.to_string(),
            addr,
            prefix,
        ])?);
        replicas.push(r);
    }
    let mut table = Table::new(
        format!("{total} Edges over {REPLICAS} replicas and one nats-server (127.0.0.1)"),
        "measured",
        "—",
    );
    for (i, r) in replicas.iter_mut().enumerate() {
        let enrolled: f64 = r.expect("enrolled")?.parse()?;
        let line = r.expect("fleet")?;
        let mut f = line.split_whitespace();
        let (listed, secs) = (
            f.next().unwrap_or("0").parse::<usize>()?,
            f.next().unwrap_or("0"),
        );
        let held: usize = r.expect("held")?.parse()?;
        let rss: f64 = r.expect("rss")?.parse()?;
        let rows = [
            (
                format!("cp-{i}: its {per_replica} Edges enrolled"),
                format!("{enrolled:.1} s"),
                None,
            ),
            (
                format!("cp-{i}: Edges its fleet listing shows (of {total})"),
                format!("{listed} (after {secs} s)"),
                Some(listed == total),
            ),
            (
                format!(
                    "cp-{i}: live sessions, least seen over {} s of heartbeats",
                    HOLD.as_secs()
                ),
                format!("{held} of {per_replica}"),
                Some(held == per_replica),
            ),
            (
                format!("cp-{i}: process RSS per Edge held"),
                format!("{:.1} KiB", rss / per_replica as f64 / 1024.0),
                None,
            ),
        ];
        for (what, value, met) in rows {
            table.push(Row::new(what, value, "—", "—", "—", met));
        }
    }
    println!("{table}");
    drop(edges);
    Ok(())
}

/// One replica for `per_replica` Edges of `total`; reports its address, the time to
/// enrol its Edges, how many its fleet listing shows, the fewest live sessions over
/// [`HOLD`], and its RSS.
fn replica(per_replica: usize, total: usize, url: &str, id: &str) -> Result<(), BoxError> {
    fleet::check_fd_limit(per_replica)?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let cluster = ClusterConfig::new(id);
        let config = fleet::server_config(Some(&cluster));
        let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
        let client = async_nats::connect(url).await?;
        let replica = Replica::start(client, server.handle(), cluster).await?;
        let cp = server.handle();
        report("addr", server.local_addr());
        let enrolled = fleet::wait_for(per_replica, BOUND, || cp.stats().live_sessions).await?;
        report("enrolled", enrolled.as_secs_f64());

        // Its own views and every other replica's, as the admin API lists them.
        let router = replica.router();
        let listing = Instant::now();
        let mut listed = 0;
        while listing.elapsed() < BOUND {
            let local = cp
                .edges()
                .iter()
                .filter(|v| v.reachability != Reachability::Disconnected)
                .count();
            listed = local + router.remote_views().await.len();
            if listed >= total {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        report(
            "fleet",
            format!("{listed} {:.1}", listing.elapsed().as_secs_f64()),
        );

        let hold = Instant::now();
        let mut least = usize::MAX;
        while hold.elapsed() < HOLD {
            least = least.min(cp.stats().live_sessions);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        report("held", least);
        report("rss", rss_bytes());
        // Wait for the parent to read everything, then go (stdin closes with it).
        let _ = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        })
        .await;
        Ok(())
    })
}

//! Control Plane replicas over NATS JetStream, against a single Control Plane in the
//! same run:
//!
//! The engine is one nats-server with the example configuration (`sync_interval:
//! always`, PROTOCOL.md §8's contract).
//!
//! * a command's answer through a replica that does not hold the Edge (routed by
//!   `iop_cluster::Router`) against one through the replica that does, both recorded
//!   before they are sent and answered once the record holds the answer; goal: at
//!   most 1.5× plus one NATS request/reply round trip, measured alongside; and the
//!   record's own price (against no record at all);
//! * the time for N Edges (default 10 000; they dial at once, from a second process)
//!   to enrol with the cluster on (every hello claims its record by compare-and-set)
//!   against off; goal: at most 2×; and the same over a second nats-server left at
//!   JetStream's default flush, for the price of the durable one;
//! * the Control Plane process's RSS growth per enrolled Edge (from before the first
//!   Edge dials), on against off; goal: at most 1.5×; and the whole process's RSS
//!   over N, fixed costs included. Both processes allocate with jemalloc, as the
//!   `iop-control-plane` binary does.
//!
//! Needs nats-server 2.10 or newer (`IOP_NATS_SERVER`, else the PATH).
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin cluster [-- N]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use iop_bench_socket::fleet::{self, Role, System, report};
use iop_bench_socket::process::rss_bytes;
use iop_bench_socket::{Row, Table};
use iop_cluster::testing::NatsServer;
use iop_cluster::{ClusterConfig, Replica};
use iop_tokio::core::cp::CommandSpec;
use iop_tokio::core::edge::{EdgeConfig, TargetLevel};
use iop_tokio::{CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient};

/// Commands per measured series (after as many warm-up ones).
const COMMANDS: usize = 300;
const ENROL_BOUND: Duration = Duration::from_secs(120);

type BoxError = Box<dyn std::error::Error>;

/// As in `iop-control-plane`: with glibc's malloc, fragmentation rather than what the
/// cluster holds decides the RSS (BENCHMARKS.md §9).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => server(args[1].parse()?, &args[2]),
        Some("edges") => {
            fleet::run_edges(System::Ours, args[1].parse()?, args[2].parse()?)?;
            Ok(())
        }
        _ => orchestrate(args.first().and_then(|n| n.parse().ok()).unwrap_or(10_000)),
    }
}

async fn replica(
    nats: &NatsServer,
    cluster: ClusterConfig,
    server: &ControlPlaneServer,
) -> Result<Replica, BoxError> {
    let client = async_nats::connect(nats.url()).await?;
    Ok(Replica::start(client, server.handle(), cluster).await?)
}

/// Mean microseconds of `n` sequential calls of `f`, after `n` warm-up calls.
async fn mean_us<F, Fut>(n: usize, mut f: F) -> Result<f64, BoxError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), BoxError>>,
{
    for _ in 0..n {
        f().await?;
    }
    let start = Instant::now();
    for _ in 0..n {
        f().await?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// (through the owner, through another replica, one NATS round trip), in µs.
async fn commands(nats: &NatsServer) -> Result<(f64, f64, f64, f64), BoxError> {
    let (ca, cb) = (ClusterConfig::new("cp-a"), ClusterConfig::new("cp-b"));
    let a =
        ControlPlaneServer::bind("127.0.0.1:0".parse()?, fleet::server_config(Some(&ca))).await?;
    let b =
        ControlPlaneServer::bind("127.0.0.1:0".parse()?, fleet::server_config(Some(&cb))).await?;
    let ra = replica(nats, ca, &a).await?;
    let rb = replica(nats, cb, &b).await?;
    let edge = EdgeClient::new(EdgeConfig::new("edge-1", iop_tokio::process_seed()))
        .operation("edge.ping", TargetLevel::Edge, |_ctx| async {
            CommandResult::succeeded("pong")
        })
        .connect(a.local_addr())?;
    edge.connected().await?;
    let cp = a.handle();
    cp.wait_for_edge("edge-1", Duration::from_secs(5)).await?;

    // Through the holder: as its admin API sends a command in a cluster — recorded
    // before it is sent (write-ahead), answered once the record holds the answer —
    // and with no record at all (the journal unset).
    let records = ra.commands().clone();
    let journal: std::sync::Arc<dyn iop_tokio::CommandJournal> =
        std::sync::Arc::new(records.clone());
    let mut owner = [0.0; 2];
    for (i, recorded) in [true, false].into_iter().enumerate() {
        cp.set_command_journal(recorded.then(|| journal.clone()));
        owner[i] = mean_us(COMMANDS, || {
            let (cp, records) = (cp.clone(), records.clone());
            async move {
                let mut tracker = cp.send_command("edge-1", CommandSpec::new("edge.ping"))?;
                let id = tracker.command_id().to_owned();
                while let Some(update) = tracker.next().await {
                    if let CommandUpdate::Response(r) = update {
                        if recorded && !records.flushed("edge-1", &id).await {
                            return Err("answer not recorded".into());
                        }
                        return if r.accepted {
                            Ok(())
                        } else {
                            Err("rejected".into())
                        };
                    }
                }
                Err("no answer".into())
            }
        })
        .await?;
    }
    cp.set_command_journal(Some(journal));
    let [owner, unrecorded] = owner;
    let router = rb.router();
    let routed = mean_us(COMMANDS, || {
        let router = router.clone();
        async move {
            let sent = router
                .command(
                    "edge-1",
                    CommandSpec::new("edge.ping"),
                    Duration::from_secs(5),
                )
                .await?;
            if sent.response.accepted {
                Ok(())
            } else {
                Err("rejected".into())
            }
        }
    })
    .await?;
    // One request/reply round trip through the same NATS server, between two
    // connections as between two replicas.
    let client = async_nats::connect(nats.url()).await?;
    let responder = async_nats::connect(nats.url()).await?;
    let mut echo = responder.subscribe("bench.echo").await?;
    responder.flush().await?;
    let echo_task = tokio::spawn(async move {
        while let Some(m) = echo.next().await {
            if let Some(reply) = m.reply {
                let _ = responder.publish(reply, m.payload).await;
            }
        }
    });
    // `flush` sends the subscription without waiting for the server to take it: ask
    // until the echo answers (a few ms at most).
    for _ in 0..500 {
        if client.request("bench.echo", "x".into()).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rtt = mean_us(COMMANDS, || {
        let client = client.clone();
        async move {
            client.request("bench.echo", "x".into()).await?;
            Ok(())
        }
    })
    .await?;
    echo_task.abort();
    edge.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    ra.shutdown().await;
    rb.shutdown().await;
    Ok((owner, unrecorded, routed, rtt))
}

fn orchestrate(n: usize) -> Result<(), BoxError> {
    // The engine as the replicas need it: every write flushed before it is acknowledged.
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/nats/nats-server.conf");
    let nats = NatsServer::try_start_with_config(&config)?;
    let (owner, unrecorded, routed, rtt) = fleet::runtime()?.block_on(commands(&nats))?;
    // The same over an engine left at JetStream's default flush (every two minutes:
    // acknowledged writes a crash can take back), to show what the durability costs.
    let lax = NatsServer::try_start()?;
    let mut enrol = Vec::new();
    for url in ["-".to_owned(), nats.url(), lax.url()] {
        let mut server = Role::spawn(&["server".into(), n.to_string(), url])?;
        let addr = server.expect("addr")?;
        let _edges = Role::spawn(&["edges".into(), n.to_string(), addr])?;
        let [secs, rss, before] = server.numbers("enrolled")?;
        enrol.push((secs, rss / n as f64, (rss - before) / n as f64));
    }
    let ((off, rss_off, grown_off), (on, rss_on, grown_on)) = (enrol[0], enrol[1]);
    let (lax_on, _, _) = enrol[2];
    let mut table = Table::new(
        "Control Plane replicas over NATS JetStream (127.0.0.1, 2 tokio workers)",
        "cluster",
        "baseline",
    );
    let bound = 1.5 * owner + rtt;
    table.push(Row::new(
        format!("command answer through a replica not holding the Edge (baseline: through the holder, both answered once recorded; NATS round trip {rtt:.0} µs)"),
        format!("{routed:.0} µs"),
        format!("{owner:.0} µs"),
        format!("{:.2}", routed / owner),
        format!("≤ 1.5× + one NATS round trip ({bound:.0} µs)"),
        Some(routed <= bound),
    ));
    table.push(Row::new(
        "command answer through the holder: answered once recorded (baseline: not recorded)",
        format!("{owner:.0} µs"),
        format!("{unrecorded:.0} µs"),
        format!("{:.2}", owner / unrecorded),
        "none: the price of a record that survives the replica",
        None,
    ));
    table.push(Row::new(
        format!("{n} Edges dialling at once, the engine flushing every write (sync_interval: always): time to enrol all (baseline: one Control Plane, no cluster)"),
        format!("{on:.2} s"),
        format!("{off:.2} s"),
        format!("{:.2}", on / off),
        "≤ 2.00",
        Some(on <= 2.0 * off),
    ));
    table.push(Row::new(
        format!("{n} Edges dialling at once, the engine at JetStream's default flush (every 2 min; risk: PROTOCOL.md §8): time to enrol all"),
        format!("{lax_on:.2} s"),
        format!("{off:.2} s"),
        format!("{:.2}", lax_on / off),
        "≤ 2.00",
        Some(lax_on <= 2.0 * off),
    ));
    table.push(Row::new(
        format!("{n} Edges enrolled: Control Plane RSS growth per Edge (baseline: no cluster)"),
        format!("{:.1} KiB", grown_on / 1024.0),
        format!("{:.1} KiB", grown_off / 1024.0),
        format!("{:.2}", grown_on / grown_off),
        "≤ 1.50",
        Some(grown_on <= 1.5 * grown_off),
    ));
    table.push(Row::new(
        format!("{n} Edges enrolled: whole process RSS over {n} (fixed costs included)"),
        format!("{:.1} KiB", rss_on / 1024.0),
        format!("{:.1} KiB", rss_off / 1024.0),
        format!("{:.2}", rss_on / rss_off),
        "—",
        None,
    ));
    println!("{table}");
    Ok(())
}

/// A Control Plane for `n` Edges, alone (`url` `-`) or a replica on `url`; reports its
/// address, then the seconds until every Edge is enrolled.
fn server(n: usize, url: &str) -> Result<(), BoxError> {
    fleet::check_fd_limit(n)?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let cluster = (url != "-").then(|| ClusterConfig::new("cp-bench"));
        let config = fleet::server_config(cluster.as_ref());
        let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
        let replica = match cluster {
            Some(cluster) => {
                let client = cluster.connect_options().connect(url).await?;
                Some(Replica::start(client, server.handle(), cluster).await?)
            }
            None => None,
        };
        let cp = server.handle();
        // Before any Edge: the process with its runtime (and, on, the NATS client and
        // the replica's tasks).
        let rss_before = rss_bytes();
        report("addr", server.local_addr());
        let enrolled = fleet::wait_for(n, ENROL_BOUND, || cp.stats().live_sessions)
            .await?
            .as_secs_f64();
        let stats = cp.stats();
        eprintln!(
            "{}: {n} enrolled in {enrolled:.2} s; hellos refused OVERLOADED at the pending cap {}, claims unavailable {}, hello timeouts {}, connections refused {}, overloaded {}",
            if replica.is_some() { "cluster" } else { "alone" },
            stats.pending_hellos_refused,
            replica.as_ref().map_or(0, |r| r.stats().snapshot().claims_unavailable),
            stats.hello_timeouts,
            stats.connections_refused,
            stats.overloaded,
        );
        // Settled: the heap the sessions (and, on, the cluster's records) hold.
        tokio::time::sleep(Duration::from_secs(2)).await;
        report("enrolled", format!("{enrolled} {} {rss_before}", rss_bytes()));
        Ok(())
    })
}

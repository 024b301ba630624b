//! Failover of a Control Plane replica: three replica processes holding N Edges each
//! (default 10 000; each third of the Edges is a process of its own, dialling its
//! replica first and the other two after), one nats-server with the example
//! configuration (`sync_interval: always`). 1 000 commands that take 5 s on their Edge
//! are sent through one replica, which is SIGKILLed while they run. Measured: the time
//! from the kill until all of its Edges hold sessions on the other two, as the Edges
//! themselves tell (goal: 5 s), and the commands whose outcome the cluster lost (goal:
//! 0) — every one must end SUCCEEDED in the engine's records, carried on by the
//! replicas the Edges moved to.
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin cluster_failover [-- EDGES_PER_REPLICA]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iop_bench_socket::fleet::{self, Role, report};
use iop_bench_socket::{Row, Table};
use iop_cluster::testing::NatsServer;
use iop_cluster::{ClusterConfig, Replica};
use iop_tokio::core::cp::CommandSpec;
use iop_tokio::core::edge::{EdgeConfig, TargetLevel};
use iop_tokio::{CommandResult, ControlPlaneServer, EdgeClient};

const REPLICAS: usize = 3;
/// Commands in flight on the victim's Edges when it dies.
const COMMANDS: usize = 1_000;
/// How long each runs on its Edge.
const RUNS_FOR: Duration = Duration::from_secs(5);
const BOUND: Duration = Duration::from_secs(300);

type BoxError = Box<dyn std::error::Error>;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("replica") => replica(args[1].parse()?, &args[2], &args[3]),
        Some("edges") => edges(args[1].parse()?, &args[2], &args[3..]),
        _ => orchestrate(args.first().and_then(|n| n.parse().ok()).unwrap_or(10_000)),
    }
}

fn orchestrate(per_replica: usize) -> Result<(), BoxError> {
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/nats/nats-server.conf");
    let nats = NatsServer::try_start_with_config(&config)?;
    let mut replicas = Vec::new();
    let mut addrs = Vec::new();
    for i in 0..REPLICAS {
        let mut r = Role::spawn(&[
            "replica".into(),
            per_replica.to_string(),
            nats.url(),
            format!("cp-{i}"),
        ])?;
        addrs.push(r.expect("addr")?);
        replicas.push(r);
    }
    let mut edge_fleets = Vec::new();
    for i in 0..REPLICAS {
        let mut args = vec![
            "edges".to_owned(),
            per_replica.to_string(),
            format!("edge{i}"),
        ];
        args.extend((0..REPLICAS).map(|k| addrs[(i + k) % REPLICAS].clone()));
        edge_fleets.push(Role::spawn(&args)?);
    }
    let mut enrolled = Vec::new();
    for r in &mut replicas {
        enrolled.push(r.expect("enrolled")?.parse::<f64>()?);
    }
    // cp-0 sends the commands, then dies while they run.
    let sent: f64 = replicas[0].expect("sent")?.parse()?;
    let victim = replicas.remove(0);
    victim.kill();
    // The victim's Edges say when every one of them holds a session again (timed
    // from this line); then cp-1 checks the commands' records.
    edge_fleets[0].send("killed")?;
    let [moved, half] = edge_fleets[0].numbers("back")?;
    replicas[0].send("killed")?;
    let [ok, lost, took] = replicas[0].numbers("commands")?;
    let mut table = Table::new(
        format!(
            "{} Edges over {REPLICAS} replicas, one nats-server (sync_interval: always); cp-0 SIGKILLed with {COMMANDS} commands running",
            per_replica * REPLICAS
        ),
        "measured",
        "—",
    );
    let rows = [
        (
            format!("Edges enrolled (each replica's {per_replica})"),
            format!("{:.1}–{:.1} s", min(&enrolled), max(&enrolled)),
            "—".to_owned(),
            None,
        ),
        (
            format!("{COMMANDS} commands of {RUNS_FOR:?} sent through cp-0, each recorded first"),
            format!("{sent:.2} s"),
            "—".to_owned(),
            None,
        ),
        (
            format!("cp-0's {per_replica} Edges holding sessions on cp-1 and cp-2, after the kill"),
            format!("{moved:.1} s (half of them {half:.1} s)"),
            "≤ 5 s".to_owned(),
            Some(moved <= 5.0),
        ),
        (
            format!("of the {COMMANDS} commands: SUCCEEDED in the engine's records / lost"),
            format!("{ok} / {lost} (after {took:.1} s)"),
            "0 lost".to_owned(),
            Some(lost == 0.0 && ok as usize == COMMANDS),
        ),
    ];
    for (what, value, goal, met) in rows {
        table.push(Row::new(what, value, "—", "—", goal, met));
    }
    println!("{table}");
    drop(edge_fleets);
    Ok(())
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// One replica: reports its address and the time to enrol its Edges; cp-0 then sends
/// the commands; cp-1, told the victim's Edges are back, how the commands ended.
fn replica(per_replica: usize, url: &str, id: &str) -> Result<(), BoxError> {
    // Its own Edges, and half of the victim's after the failover.
    fleet::check_fd_limit(per_replica * 3 / 2)?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let cluster = ClusterConfig::new(id);
        let config = fleet::server_config(Some(&cluster));
        let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
        let client = cluster.connect_options().connect(url).await?;
        let replica = Replica::start(client, server.handle(), cluster).await?;
        let cp = server.handle();
        report("addr", server.local_addr());
        let enrolled = fleet::wait_for(per_replica, BOUND, || cp.stats().live_sessions).await?;
        report("enrolled", enrolled.as_secs_f64());
        if id == "cp-0" {
            let start = Instant::now();
            let mut trackers = Vec::new();
            for i in 0..COMMANDS {
                let spec = CommandSpec::new("bench.sleep").with_id(format!("fo-{i}"));
                trackers.push(cp.send_command(&format!("edge0-{i:05}"), spec)?);
            }
            // Sent: each answered by its Edge (so recorded, then sent).
            for t in &mut trackers {
                use futures_lite::StreamExt;
                let _ = tokio::time::timeout(BOUND, t.next()).await;
            }
            report("sent", start.elapsed().as_secs_f64());
            std::future::pending::<()>().await;
        }
        if wait_line().await.as_deref() != Some("killed") {
            return Ok(());
        }
        let router = replica.router();
        if id == "cp-1" {
            let records = router.commands();
            let start = Instant::now();
            let mut ok = 0;
            while start.elapsed() < BOUND {
                ok = 0;
                let mut lost = 0;
                for i in 0..COMMANDS {
                    let record = records.get(&format!("fo-{i}")).await.ok().flatten();
                    match record.and_then(|r| r.outcome) {
                        Some(iop_tokio::core::cp::CommandOutcome::Finished(
                            iop_tokio::core::proto::CommandPhase::Succeeded,
                        )) => ok += 1,
                        Some(other) => {
                            lost += 1;
                            eprintln!("fo-{i}: {other:?}");
                        }
                        None => {}
                    }
                }
                if ok + lost == COMMANDS {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let lost = COMMANDS - ok;
            if lost > 0 {
                // Name a few of them, as the engine holds them, to say where they stopped.
                let mut named = 0;
                for i in 0..COMMANDS {
                    let record = records.get(&format!("fo-{i}")).await.ok().flatten();
                    if named < 5 && record.as_ref().is_none_or(|r| r.outcome.is_none()) {
                        named += 1;
                        eprintln!("fo-{i} unfinished: {record:?}");
                    }
                }
                eprintln!("{id}: {:?}", replica.stats().snapshot());
            }
            report(
                "commands",
                format!("{ok} {lost} {:.1}", start.elapsed().as_secs_f64()),
            );
        }
        // A survivor that went away now would be a second failover, its Edges and
        // their running commands moving again while cp-1 reads the records.
        fleet::until_parent_goes().await;
        Ok(())
    })
}

/// `n` Edges `{prefix}-00000`… with a `bench.sleep` operation ([`RUNS_FOR`]), dialling
/// `addrs[0]` first and the others after, every other Edge in the reverse order, so a
/// dead replica's Edges spread over the survivors as Edges with shuffled fallbacks do.
fn edges(n: usize, prefix: &str, addrs: &[String]) -> Result<(), BoxError> {
    fleet::check_fd_limit(n)?;
    let addrs: Vec<SocketAddr> = addrs.iter().map(|a| a.parse()).collect::<Result<_, _>>()?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let mut held = Vec::with_capacity(n);
        for i in 0..n {
            let mut config = EdgeConfig::new(format!("{prefix}-{i:05}"), iop_tokio::process_seed());
            config.backoff_base = Duration::from_millis(100);
            config.backoff_max = Duration::from_secs(1);
            let edge = EdgeClient::<()>::with_edge_registry(config, ())
                .operation("bench.sleep", TargetLevel::Edge, |_ctx| async {
                    tokio::time::sleep(RUNS_FOR).await;
                    CommandResult::succeeded("slept")
                })
                .fallback_addrs(match i % 2 {
                    0 => addrs[1..].to_vec(),
                    _ => addrs[1..].iter().rev().copied().collect(),
                })
                .connect(addrs[0])?;
            held.push(edge);
        }
        // Told of the kill, the time until every Edge holds a session again: its second
        // one accepted, and up (not one whose first has not yet seen its end).
        if wait_line().await.as_deref() == Some("killed") {
            let start = Instant::now();
            // When half of them, then all, were back.
            let mut half = None;
            loop {
                let back = held
                    .iter()
                    .filter(|e| e.stats().sessions_accepted >= 2 && e.is_connected())
                    .count();
                if back * 2 >= n && half.is_none() {
                    half = Some(start.elapsed().as_secs_f64());
                }
                if back == n || start.elapsed() > BOUND {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let all = start.elapsed().as_secs_f64();
            report("back", format!("{all} {}", half.unwrap_or(all)));
        }
        fleet::until_parent_goes().await;
        drop(held);
        Ok(())
    })
}

/// The next line from the parent (`None`: it went away).
async fn wait_line() -> Option<String> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(n) if n > 0 => Some(line.trim().to_owned()),
            _ => None,
        }
    })
    .await
    .ok()
    .flatten()
}

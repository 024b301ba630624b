//! The load plane across replicas: how fresh one replica's placement is for Edges
//! another replica holds, against Edges it holds itself, measured in the same run.
//!
//! - One nats-server, three replica processes (`cp-0`, `cp-1`, `cp-2`, load updates
//!   every 250 ms) and a fleet process per replica of Edges × 4 nodes × 2 providers,
//!   each provider's numbers changing at random about once a second.
//! - In `cp-0`'s process (one clock), busy probe Edges: half connected to `cp-0`
//!   itself (the baseline), half to `cp-1`. Every 50 ms plus a random part of an
//!   interval one takes a lease, and the time until the change is in `cp-0`'s
//!   placement index (seen on its load watch, applied with it) is its freshness: for
//!   a probe on `cp-1`, Edge → `cp-1` → the cluster bus → `cp-0`.
//! - `cp-0`'s and `cp-1`'s CPU over the window, and the Edges `cp-0` places (its own
//!   and the other replicas').
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin load_replicas [-- EDGES [WINDOW_S]]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iop_bench_socket::churn;
use iop_bench_socket::fleet::{self, Role, report};
use iop_bench_socket::process::{cpu_time, machine_ticks};
use iop_bench_socket::stats::quantile;
use iop_bench_socket::{Row, Table};
use iop_cluster::testing::NatsServer;
use iop_cluster::{ClusterConfig, Replica};
use iop_tokio::ControlPlaneServer;
use iop_tokio::core::registry::Lease;

type BoxError = Box<dyn std::error::Error>;

const REPLICAS: usize = 3;
/// Probes on each side (on `cp-0`, on `cp-1`).
const PROBES: usize = 10;
const PROBE_EVERY: Duration = Duration::from_millis(50);
const INTERVAL: Duration = Duration::from_millis(250);
const CONNECT_BOUND: Duration = Duration::from_secs(240);
const SETTLE: Duration = Duration::from_secs(5);

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("replica") => replica(&args[1..]),
        Some("edges") => churn::edges(args[1].parse()?, args[2].parse()?, true, &args[3]),
        _ => orchestrate(&args),
    }
}

fn orchestrate(args: &[String]) -> Result<(), BoxError> {
    let n: usize = args.first().map_or(Ok(10_000), |a| a.parse())?;
    let window: u64 = args.get(1).map_or(Ok(20), |a| a.parse())?;
    let nats = NatsServer::try_start()?;
    let per = n / REPLICAS;
    let total = per * REPLICAS + 2 * PROBES;
    let spawn = |id: &str, peer: &str| {
        Role::spawn(&[
            "replica".into(),
            id.into(),
            nats.url(),
            peer.into(),
            total.to_string(),
            window.to_string(),
        ])
    };
    let mut cp1 = spawn("cp-1", "-")?;
    let addr1 = cp1.expect("addr")?;
    let mut cp2 = spawn("cp-2", "-")?;
    let addr2 = cp2.expect("addr")?;
    let mut cp0 = spawn("cp-0", &addr1)?;
    let addr0 = cp0.expect("addr")?;
    let mut fleets = Vec::new();
    for (i, addr) in [addr0, addr1, addr2].into_iter().enumerate() {
        let edges = ["edges".into(), per.to_string(), addr, format!("e{i}")];
        fleets.push(Role::spawn(&edges)?);
    }
    let [cpu0, busy, known, r50, r99, l50, l99, rn, ln, rmiss, lmiss] =
        cp0.numbers::<11>("result")?;
    let [cpu1] = cp1.numbers::<1>("result")?;
    let ms = |x: f64| format!("{x:.1} ms");
    let mut table = Table::new(
        format!(
            "Load across {REPLICAS} replicas: {} Edges × 4 nodes × 2 providers, each provider changing ~1/s, interval 250 ms",
            per * REPLICAS
        ),
        "ours (held by cp-1)",
        "baseline (held by cp-0)",
    );
    table.push(Row::new(
        "freshness p50 in cp-0's placement",
        ms(r50),
        ms(l50),
        format!("{:.2}", r50 / l50),
        "—",
        None,
    ));
    table.push(Row::new(
        "freshness p99 in cp-0's placement",
        ms(r99),
        ms(l99),
        format!("{:.2}", r99 / l99),
        "≤ 600 ms",
        Some(r99 <= 600.0),
    ));
    table.push(Row::new(
        "Edges cp-0 places (its own and the other replicas')",
        format!("{known:.0} of {total}"),
        "—",
        "—",
        "all",
        Some(known as usize == total),
    ));
    table.push(Row::new(
        "CPU (share of one core): cp-0 / cp-1",
        format!("{:.1} % / {:.1} %", cpu0 * 100.0, cpu1 * 100.0),
        "—",
        "—",
        "—",
        None,
    ));
    table.push(Row::new(
        format!(
            "the machine's CPU over the window ({} cores: replicas, Edges, nats-server)",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ),
        format!("{:.0} % busy", busy * 100.0),
        "—",
        "—",
        "—",
        None,
    ));
    table.push(Row::new(
        "probes measured (missed after 5 s)",
        format!("{rn:.0} ({rmiss:.0})"),
        format!("{ln:.0} ({lmiss:.0})"),
        "—",
        "—",
        None,
    ));
    println!("{table}");
    drop(fleets);
    Ok(())
}

/// Replica `id` on the nats-server at `url`; `cp-0` runs the probes, half of them on
/// the replica at `peer`. Reports its address, then `result` after the window.
fn replica(args: &[String]) -> Result<(), BoxError> {
    let (id, url, peer) = (args[0].as_str(), args[1].as_str(), args[2].as_str());
    let total: usize = args[3].parse()?;
    let window = Duration::from_secs(args[4].parse()?);
    fleet::check_fd_limit(total / REPLICAS + PROBES)?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let cluster = ClusterConfig::new(id);
        let mut config = fleet::server_config(Some(&cluster));
        config.cp.load_update_interval = Some(INTERVAL);
        let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
        let client = async_nats::connect(url).await?;
        let _replica = Replica::start(client, server.handle(), cluster).await?;
        let cp = server.handle();
        report("addr", server.local_addr());
        let observer = peer != "-";
        let mut probes: Vec<(String, iop_tokio::EdgeHandle, Vec<Lease>)> = Vec::new();
        if observer {
            let peer: SocketAddr = peer.parse()?;
            for p in 0..PROBES {
                for (side, addr) in [("l", server.local_addr()), ("r", peer)] {
                    let name = format!("probe-{side}-{p:02}");
                    probes.push((name.clone(), churn::probe_edge(&name, addr)?, Vec::new()));
                }
            }
        }
        fleet::wait_for(total, CONNECT_BOUND, || {
            cp.fleet_load().edges_live() as usize + cp.remote_load_edges()
        })
        .await?;
        tokio::time::sleep(SETTLE).await;
        let (mut seen, watcher) = churn::watch_probes(&cp);
        let noise = churn::noise(probes.iter().map(|(_, h, _)| h.clone()).collect());
        let (cpu0, machine0, start) = (cpu_time(), machine_ticks(), Instant::now());
        let (mut remote, mut local, mut misses) = (Vec::new(), Vec::new(), [0u64; 2]);
        let mut jitter = 0x2545_f491_u64;
        let mut k = 0;
        while start.elapsed() < window {
            if !observer {
                tokio::time::sleep(PROBE_EVERY).await;
                continue;
            }
            let at = k % probes.len();
            k += 1;
            let (name, handle, held) = &mut probes[at];
            let is_remote = name.starts_with("probe-r");
            match churn::probe_once(handle, held, name, &mut seen).await {
                Some(ms) if is_remote => remote.push(ms),
                Some(ms) => local.push(ms),
                None => misses[usize::from(is_remote)] += 1,
            }
            tokio::time::sleep(churn::pause(&mut jitter, PROBE_EVERY, INTERVAL)).await;
        }
        let cpu = (cpu_time() - cpu0).as_secs_f64() / start.elapsed().as_secs_f64();
        let machine = machine_ticks();
        let busy = (machine.0 - machine0.0) as f64 / (machine.1 - machine0.1).max(1) as f64;
        watcher.abort();
        noise.abort();
        if observer {
            let known = cp.fleet_load().edges_live() as usize + cp.remote_load_edges();
            report(
                "result",
                format!(
                    "{cpu} {busy} {known} {} {} {} {} {} {} {} {}",
                    quantile(&mut remote, 0.5),
                    quantile(&mut remote, 0.99),
                    quantile(&mut local, 0.5),
                    quantile(&mut local, 0.99),
                    remote.len(),
                    local.len(),
                    misses[1],
                    misses[0],
                ),
            );
        } else {
            report("result", cpu);
        }
        fleet::until_parent_goes().await;
        drop(probes);
        server.shutdown().await;
        Ok::<_, BoxError>(())
    })
}

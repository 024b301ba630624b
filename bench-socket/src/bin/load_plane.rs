//! The load plane over sockets: how fresh the Control Plane's per-provider numbers
//! are when Edges push their load updates (PROTOCOL.md §4.8), against pulling status
//! at the same period, measured in the same run.
//!
//! - A fleet of Edges × 4 nodes × 2 providers (one process), each provider's numbers
//!   changing at random about once a second.
//! - Probe Edges in the Control Plane's own process (one clock), busy (another provider
//!   of each changes every 100 ms): every 50 ms one takes a lease, and the time until
//!   the change is in the fleet's placement index (seen on the load watch, applied
//!   with it) is its **freshness**.
//! - The Control Plane's CPU and bytes received per second over the window; the
//!   baseline pulls every Edge's full status every 250 ms instead (the application
//!   asks, 256 at once: the Control Plane's own refresh is 1 s at the shortest).
//! - An idle fleet (no churn, no probes): update frames received (goal: none).
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin load_plane [-- EDGES [WINDOW_S]]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use iop_bench_socket::churn;
use iop_bench_socket::fleet::{self, Role, report};
use iop_bench_socket::process::cpu_time;
use iop_bench_socket::stats::quantile;
use iop_bench_socket::{Row, Table};
use iop_tokio::ControlPlaneServer;
use iop_tokio::core::registry::Lease;

type BoxError = Box<dyn std::error::Error>;

const PROBES: usize = 20;
const PROBE_EVERY: Duration = Duration::from_millis(50);
const CONNECT_BOUND: Duration = Duration::from_secs(180);
const SETTLE: Duration = Duration::from_secs(5);

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => server(&args[1..]),
        Some("edges") => churn::edges(
            args[1].parse()?,
            args[2].parse()?,
            args[3] == "churn",
            "edge",
        ),
        _ => orchestrate(&args),
    }
}

/// The server: a Control Plane (`push INTERVAL_MS` or `pull PERIOD_MS`), its probes,
/// and the window's figures.
fn server(args: &[String]) -> Result<(), BoxError> {
    let n: usize = args[0].parse()?;
    let mode = args[1].as_str();
    let period = Duration::from_millis(args[2].parse()?);
    let window = Duration::from_secs(args[3].parse()?);
    let probes = args[4] == "probes";
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let mut config = fleet::server_config(None);
        // Pulled: no updates, and the application asks every Edge for its full status
        // every `period` (the Control Plane's own refresh is 1 s at the shortest).
        let pull = mode == "pull";
        if pull {
            config.cp.load_update_interval = None;
            config.cp.status_refresh = None;
        } else {
            config.cp.load_update_interval = Some(period);
        }
        let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
        let cp = server.handle();
        report("addr", server.local_addr());
        let want = n + if probes { PROBES } else { 0 };
        let mut probe_edges = Vec::new();
        if probes {
            for p in 0..PROBES {
                let handle = churn::probe_edge(&format!("probe-{p:02}"), server.local_addr())?;
                probe_edges.push((handle, Vec::<Lease>::new()));
            }
        }
        fleet::wait_for(want, CONNECT_BOUND, || {
            cp.fleet_load().edges_live() as usize
        })
        .await?;
        tokio::time::sleep(SETTLE).await;

        // The watch, for the probes: (edge, in_flight of its provider 0) → when seen.
        let (mut seen_rx, watcher) = churn::watch_probes(&cp);

        let puller = pull.then(|| {
            let cp = cp.clone();
            let ids: Vec<String> = (0..n)
                .map(|i| format!("edge-{i:05}"))
                .chain((0..if probes { PROBES } else { 0 }).map(|p| format!("probe-{p:02}")))
                .collect();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(256));
                // Bounded: an hour of periods.
                for _ in 0..3_600_000 / period.as_millis().max(1) as usize {
                    tick.tick().await;
                    let mut round = tokio::task::JoinSet::new();
                    for id in &ids {
                        let (cp, id) = (cp.clone(), id.clone());
                        let Ok(permit) = limit.clone().acquire_owned().await else {
                            return;
                        };
                        round.spawn(async move {
                            let _ = cp.request_status(&id, vec![]).await;
                            drop(permit);
                        });
                    }
                    while round.join_next().await.is_some() {}
                }
            })
        });
        // The probe Edges are busy too.
        let noise = churn::noise(probe_edges.iter().map(|(h, _)| h.clone()).collect());
        let (cpu0, stats0, start) = (cpu_time(), cp.stats(), Instant::now());
        let mut fresh = Vec::new();
        let mut misses = 0u64;
        let mut k = 0usize;
        let mut jitter = 0x2545_f491_u64;
        while start.elapsed() < window {
            if !probes {
                tokio::time::sleep(PROBE_EVERY).await;
                continue;
            }
            let (handle, held) = &mut probe_edges[k % PROBES];
            let id = format!("probe-{:02}", k % PROBES);
            k += 1;
            match churn::probe_once(handle, held, &id, &mut seen_rx).await {
                Some(ms) => fresh.push(ms),
                None => misses += 1,
            }
            tokio::time::sleep(churn::pause(&mut jitter, PROBE_EVERY, period)).await;
        }
        let secs = start.elapsed().as_secs_f64();
        let (cpu, stats) = (cpu_time() - cpu0, cp.stats());
        watcher.abort();
        noise.abort();
        if let Some(puller) = puller {
            puller.abort();
        }
        let per_s = |a: u64, b: u64| (a - b) as f64 / secs;
        report(
            "result",
            format!(
                "{} {} {} {} {} {} {}",
                cpu.as_secs_f64() / secs,
                per_s(stats.bytes_in, stats0.bytes_in),
                per_s(stats.load_updates, stats0.load_updates),
                quantile(&mut fresh, 0.5),
                quantile(&mut fresh, 0.99),
                fresh.len(),
                misses,
            ),
        );
        fleet::until_parent_goes().await;
        drop(probe_edges);
        server.shutdown().await;
        Ok::<_, BoxError>(())
    })
}

/// One run's figures.
struct Figures {
    cpu: f64,
    bytes_in: f64,
    updates: f64,
    p50: f64,
    p99: f64,
    samples: f64,
    misses: f64,
}

fn run(
    n: usize,
    mode: &str,
    period_ms: u64,
    window_s: u64,
    churn: bool,
) -> Result<Figures, BoxError> {
    let probes = if churn { "probes" } else { "none" };
    let mut server = Role::spawn(&[
        "server".into(),
        n.to_string(),
        mode.into(),
        period_ms.to_string(),
        window_s.to_string(),
        probes.into(),
    ])?;
    let addr = server.expect("addr")?;
    let _edges = Role::spawn(&[
        "edges".into(),
        n.to_string(),
        addr,
        if churn { "churn" } else { "idle" }.into(),
    ])?;
    let [cpu, bytes_in, updates, p50, p99, samples, misses] = server.numbers::<7>("result")?;
    Ok(Figures {
        cpu,
        bytes_in,
        updates,
        p50,
        p99,
        samples,
        misses,
    })
}

fn orchestrate(args: &[String]) -> Result<(), BoxError> {
    let n: usize = args.first().map_or(Ok(10_000), |a| a.parse())?;
    let window: u64 = args.get(1).map_or(Ok(20), |a| a.parse())?;
    let small = (n / 10).max(1);
    let push = run(n, "push", 250, window, true)?;
    let pull = run(n, "pull", 250, window, true)?;
    let fast = run(small, "push", 50, window, true)?;
    let idle = run(n, "push", 250, window, false)?;
    let ms = |x: f64| format!("{x:.1} ms");
    let mut table = Table::new(
        format!(
            "Load plane over sockets: {n} Edges × 4 nodes × 2 providers, each provider changing ~1/s"
        ),
        "ours (push)",
        "baseline (pull)",
    );
    table.push(Row::new(
        "freshness p50, interval 250 ms (pull: status every 250 ms)",
        ms(push.p50),
        ms(pull.p50),
        format!("{:.2}", push.p50 / pull.p50),
        "—",
        None,
    ));
    table.push(Row::new(
        "freshness p99, interval 250 ms",
        ms(push.p99),
        ms(pull.p99),
        format!("{:.2}", push.p99 / pull.p99),
        "≤ 400 ms",
        Some(push.p99 <= 400.0),
    ));
    table.push(Row::new(
        format!("freshness p50 / p99, interval 50 ms, {small} Edges"),
        format!("{} / {}", ms(fast.p50), ms(fast.p99)),
        "—",
        "—",
        "p99 ≤ 150 ms",
        Some(fast.p99 <= 150.0),
    ));
    table.push(Row::new(
        "Control Plane CPU (share of one core)",
        format!("{:.1} %", push.cpu * 100.0),
        format!("{:.1} %", pull.cpu * 100.0),
        format!("{:.2}", push.cpu / pull.cpu),
        "≤ 30 %",
        Some(push.cpu <= 0.30),
    ));
    table.push(Row::new(
        "bytes received by the Control Plane per second",
        format!("{:.0}", push.bytes_in),
        format!("{:.0}", pull.bytes_in),
        format!("{:.3}", push.bytes_in / pull.bytes_in),
        "≤ 0.1",
        Some(push.bytes_in / pull.bytes_in <= 0.1),
    ));
    table.push(Row::new(
        "load update frames per second, fleet changing / idle",
        format!("{:.0} / {:.0}", push.updates, idle.updates),
        "—",
        "—",
        "idle: 0",
        Some(idle.updates == 0.0),
    ));
    table.push(Row::new(
        "probes measured (missed after 5 s)",
        format!("{} ({})", push.samples, push.misses),
        format!("{} ({})", pull.samples, pull.misses),
        "—",
        "—",
        None,
    ));
    println!("{table}");
    Ok(())
}

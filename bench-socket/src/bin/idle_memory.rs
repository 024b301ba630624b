//! Control Plane memory per idle connected Edge, ours vs tonic (one idle bidirectional
//! stream per Edge, each on its own HTTP/2 connection), for 1 000 and 10 000 Edges.
//!
//! Each measurement is a fresh Control Plane process (this binary, role `server`)
//! with a counting global allocator, and a second process holding the Edges (role
//! `edges`). The server measures its net heap (allocated − freed) and its `VmRSS`
//! growth from just before the Edges dial until all are connected and settled (3 s:
//! hello, automatic status request, EDGE_READY, a heartbeat), divided by the count.
//! Runs alternate ours / tonic; the table shows medians of the repetitions.
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin idle_memory [-- REPS [N...]]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::alloc::System as SystemAlloc;
use std::time::Duration;

use iop_bench_socket::fleet::{self, Role, System, report};
use iop_bench_socket::grpc::EdgeLinkServer;
use iop_bench_socket::process::rss_bytes;
use iop_bench_socket::stats::median;
use iop_bench_socket::{Row, Table};
use iop_tokio::{ControlPlaneServer, ServerConfig};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<SystemAlloc> = &INSTRUMENTED_SYSTEM;

/// Per-Edge heap budget (the goal).
const GOAL: f64 = 4_096.0;
const SETTLE: Duration = Duration::from_secs(3);
const CONNECT_BOUND: Duration = Duration::from_secs(150);

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => server(&args[1..]),
        Some("edges") => {
            let system = System::parse(&args[1]).ok_or("system")?;
            fleet::run_edges(system, args[2].parse()?, args[3].parse()?)?;
            Ok(())
        }
        _ => orchestrate(&args),
    }
}

fn orchestrate(args: &[String]) -> Result<(), BoxError> {
    let reps: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(3);
    let counts: Vec<usize> = if args.len() > 1 {
        args[1..].iter().filter_map(|a| a.parse().ok()).collect()
    } else {
        vec![1_000, 10_000]
    };
    let mut table = Table::new(
        format!("Control Plane memory per idle connected Edge (medians of {reps} runs)"),
        "ours",
        "tonic",
    );
    for &n in &counts {
        let mut heap = [Vec::new(), Vec::new()];
        let mut rss = [Vec::new(), Vec::new()];
        for rep in 0..reps {
            let order = if rep % 2 == 0 {
                [System::Ours, System::Tonic]
            } else {
                [System::Tonic, System::Ours]
            };
            for system in order {
                let (h, r) = run_once(system, n)?;
                let i = usize::from(system == System::Tonic);
                heap[i].push(h);
                rss[i].push(r);
                eprintln!(
                    "{} × {n}: heap {h:.0} B/edge, RSS {r:.0} B/edge",
                    system.name()
                );
            }
        }
        let [mut ho, mut ht] = heap;
        let [mut ro, mut rt] = rss;
        let (ho, ht, ro, rt) = (
            median(&mut ho),
            median(&mut ht),
            median(&mut ro),
            median(&mut rt),
        );
        table.push(Row::new(
            format!("heap per idle edge, {n} edges"),
            format!("{ho:.0} B"),
            format!("{ht:.0} B"),
            format!("{:.3}", ho / ht),
            format!("≤ {GOAL:.0} B per edge"),
            Some(ho <= GOAL),
        ));
        table.push(Row::new(
            format!("RSS growth per idle edge, {n} edges"),
            format!("{ro:.0} B"),
            format!("{rt:.0} B"),
            format!("{:.3}", ro / rt),
            "—",
            None,
        ));
    }
    println!("{table}");
    Ok(())
}

/// One server process and one Edge process: (heap, RSS) per Edge at the server.
fn run_once(system: System, n: usize) -> Result<(f64, f64), BoxError> {
    let mut server = Role::spawn(&["server".into(), system.name().into(), n.to_string()])?;
    let addr = server.expect("addr")?;
    let _edges = Role::spawn(&["edges".into(), system.name().into(), n.to_string(), addr])?;
    let [heap, rss] = server.numbers("result")?;
    Ok((heap / n as f64, rss / n as f64))
}

fn server(args: &[String]) -> Result<(), BoxError> {
    let system = System::parse(&args[0]).ok_or("system")?;
    let n: usize = args[1].parse()?;
    fleet::check_fd_limit(n)?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let localhost = "127.0.0.1:0".parse()?;
        match system {
            System::Ours => {
                let server = ControlPlaneServer::bind(
                    localhost,
                    ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny),
                )
                .await?;
                let cp = server.handle();
                let (rss0, region) = (rss_bytes(), Region::new(GLOBAL));
                report("addr", server.local_addr());
                fleet::wait_for(n, CONNECT_BOUND, || cp.stats().live_sessions).await?;
                tokio::time::sleep(SETTLE).await;
                measure(rss0, &region);
                Ok(())
            }
            System::Tonic => {
                let (service, mut streams) = EdgeLinkServer::new();
                let counter = service.clone();
                let (rss0, region) = (rss_bytes(), Region::new(GLOBAL));
                let addr = service.serve(localhost)?;
                // Hold every stream open, idle.
                let holder = tokio::spawn(async move {
                    let mut held = Vec::new();
                    while let Some(s) = futures_lite::StreamExt::next(&mut streams).await {
                        held.push(s);
                    }
                    held.len()
                });
                report("addr", addr);
                fleet::wait_for(n, CONNECT_BOUND, || counter.accepted()).await?;
                tokio::time::sleep(SETTLE).await;
                measure(rss0, &region);
                holder.abort();
                Ok(())
            }
        }
    })
}

fn measure(rss0: u64, region: &Region<'_, SystemAlloc>) {
    let change = region.change();
    let heap = change.bytes_allocated as isize - change.bytes_deallocated as isize
        + change.bytes_reallocated;
    let rss = rss_bytes().saturating_sub(rss0);
    report("result", format!("{} {rss}", heap.max(0)));
}

//! Many Edges against one Control Plane: time to enrol them all, CPU while they idle
//! (heartbeating every second), and a status fan-out to every one of them.
//!
//! The Control Plane is a fresh process per count (this binary, role `server`, two
//! tokio workers); the Edges (`EdgeClient`s with no nodes) run in a second process
//! (role `edges`) and all dial at once, as after a Control Plane restart.
//!
//! * enrol: from the server printing its address (the Edge process starts then) until
//!   every session is live;
//! * idle CPU: user + system time of the server process (`/proc/self/stat`) over 10 s
//!   of heartbeats at a 1 s interval, per second; normalised to the default 5 s
//!   interval by dividing by 5 (the idle work is one heartbeat and its ack per Edge
//!   per interval);
//! * fan-out: one `request_status` per Edge, all at once; completions per second, and
//!   the bench fails unless every one completed.
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin scale [-- N...]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::time::{Duration, Instant};

use iop_bench_socket::fleet::{self, Role, System, report};
use iop_bench_socket::process::{cpu_time, rss_bytes};
use iop_bench_socket::{Row, Table};
use iop_tokio::ControlPlaneServer;

const HEARTBEAT: Duration = Duration::from_secs(1);
const DEFAULT_HEARTBEAT_SECS: f64 = 5.0;
const WINDOW: Duration = Duration::from_secs(10);
const SETTLE: Duration = Duration::from_secs(3);
const ENROL_BOUND: Duration = Duration::from_secs(120);

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => server(args[1].parse()?),
        Some("edges") => {
            fleet::run_edges(System::Ours, args[1].parse()?, args[2].parse()?)?;
            Ok(())
        }
        _ => orchestrate(&args),
    }
}

struct Outcome {
    enrol: Duration,
    cpu_per_s: f64,
    frames_per_s: f64,
    fanout: Duration,
    completed: usize,
    rss: u64,
}

fn orchestrate(args: &[String]) -> Result<(), BoxError> {
    let counts: Vec<usize> = if args.is_empty() {
        vec![1_000, 5_000, 10_000]
    } else {
        args.iter().filter_map(|a| a.parse().ok()).collect()
    };
    let mut table = Table::new(
        "Edges at once against one Control Plane (2 tokio workers, 127.0.0.1)",
        "measured",
        "—",
    );
    for &n in &counts {
        let mut server = Role::spawn(&["server".into(), n.to_string()])?;
        let addr = server.expect("addr")?;
        let _edges = Role::spawn(&["edges".into(), n.to_string(), addr])?;
        let [enrol, cpu_per_s, frames_per_s, fanout, completed, rss] = server.numbers("result")?;
        let o = Outcome {
            enrol: Duration::from_secs_f64(enrol),
            cpu_per_s,
            frames_per_s,
            fanout: Duration::from_secs_f64(fanout),
            completed: completed as usize,
            rss: rss as u64,
        };
        assert_eq!(o.completed, n, "status fan-out lost answers");
        let per_s = n as f64 / o.fanout.as_secs_f64();
        let rows = [
            (
                format!("{n} edges: time to enrol all"),
                format!("{:.2} s", o.enrol.as_secs_f64()),
            ),
            (
                format!("{n} edges: CP CPU while idle, heartbeat 1 s"),
                format!(
                    "{:.1} % of a core ({:.0} frames in/s)",
                    o.cpu_per_s * 100.0,
                    o.frames_per_s
                ),
            ),
            (
                format!("{n} edges: CP CPU while idle, normalised to the default 5 s"),
                format!(
                    "{:.2} % of a core",
                    o.cpu_per_s * 100.0 / DEFAULT_HEARTBEAT_SECS
                ),
            ),
            (
                format!("{n} edges: status fan-out to all"),
                format!(
                    "{} / {n} completed in {:.0} ms: {per_s:.0} /s, 0 lost",
                    o.completed,
                    o.fanout.as_secs_f64() * 1e3
                ),
            ),
            (
                format!("{n} edges: CP process RSS"),
                format!("{:.1} MiB", o.rss as f64 / (1024.0 * 1024.0)),
            ),
        ];
        for (what, value) in rows {
            table.push(Row::new(what, value, "—", "—", "—", None));
        }
        eprintln!("{n}: done");
    }
    println!("{table}");
    Ok(())
}

fn server(n: usize) -> Result<(), BoxError> {
    fleet::check_fd_limit(n)?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let mut config = fleet::server_config(None);
        config.cp.heartbeat_interval = HEARTBEAT;
        let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
        let cp = server.handle();
        report("addr", server.local_addr());
        let enrol = fleet::wait_for(n, ENROL_BOUND, || cp.stats().live_sessions).await?;
        tokio::time::sleep(SETTLE).await;

        let (cpu0, frames0, t0) = (cpu_time(), cp.stats().frames_in, Instant::now());
        tokio::time::sleep(WINDOW).await;
        let (cpu1, frames1, elapsed) = (cpu_time(), cp.stats().frames_in, t0.elapsed());
        let cpu_per_s = (cpu1 - cpu0).as_secs_f64() / elapsed.as_secs_f64();
        let frames_per_s = (frames1 - frames0) as f64 / elapsed.as_secs_f64();

        let ids: Vec<String> = cp.edges().into_iter().map(|e| e.edge_id).collect();
        let mut tasks = tokio::task::JoinSet::new();
        let fan = Instant::now();
        for id in ids {
            let cp = cp.clone();
            tasks.spawn(async move { cp.request_status(&id, vec![]).await.is_ok() });
        }
        let mut completed = 0usize;
        while let Some(done) = tasks.join_next().await {
            completed += usize::from(matches!(done, Ok(true)));
        }
        let fanout = fan.elapsed();
        report(
            "result",
            format!(
                "{} {cpu_per_s} {frames_per_s} {} {completed} {}",
                enrol.as_secs_f64(),
                fanout.as_secs_f64(),
                rss_bytes()
            ),
        );
        Ok(())
    })
}

//! 45 000 Edges over three Control Plane replicas on this machine (one process holds
//! at most ~20 000 sockets, so each replica and each third of the Edges is a process
//! of its own) with one nats-server: every Edge enrolled, none dropped while they
//! heartbeat for 30 s, and every replica's fleet listing (its own views and the other
//! replicas', through the cluster) showing all of them; then the first replica pages
//! through the whole fleet 100 Edges at a time as `GET /v1/edges?limit=100` does (its
//! own page, and every other replica's for the same cursor, merged), against the same
//! page cut from every view pulled from every replica (the baseline).
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
use iop_tokio::fleet::EdgeFilter;

const REPLICAS: usize = 3;
const HOLD: Duration = Duration::from_secs(30);
const BOUND: Duration = Duration::from_secs(300);
/// Edges a page of the listing holds, as a router or the dashboard asks for them.
const PAGE: usize = 100;
/// Pages of the baseline (each pulls the whole fleet).
const BASELINE_PAGES: usize = 10;

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
        let pages = r.expect("pages")?;
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
        // `pages COUNT SEEN P50 P99 BASELINE_P50 BASELINE_P99` (ms), on cp-0 only.
        let f: Vec<&str> = pages.split_whitespace().collect();
        if let [count, seen, p50, p99, b50, b99] = f[..] {
            let (p99, b99): (f64, f64) = (p99.parse()?, b99.parse()?);
            table.push(Row::new(
                format!("cp-{i}: a page of {PAGE} of the fleet's list, p50 / p99 over {count} pages ({seen} Edges seen; goal p99 ≤ 50 ms)"),
                format!("{p50} / {p99:.1} ms"),
                format!("{b50} / {b99:.1} ms"),
                format!("{:.3}", p99 / b99),
                "≤ 50 ms",
                Some(p99 <= 50.0 && seen.parse::<usize>()? == total),
            ));
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
        let pages = if id == "cp-0" {
            list_pages(&cp, &router).await
        } else {
            "-".to_owned()
        };
        report("pages", pages);

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

/// One page of the fleet's list as the admin API makes it in a cluster: this replica's
/// own page, then every other replica's for the same cursor, merged; its Edge ids and
/// whether more follow.
async fn page(
    cp: &iop_tokio::ControlPlaneHandle,
    router: &iop_cluster::Router,
    after: &str,
) -> (Vec<String>, bool) {
    let filter = EdgeFilter::default();
    let own = router.own_page(cp, &filter, after, PAGE);
    let mut mine: Vec<String> = own.views.into_iter().map(|v| v.edge_id).collect();
    let theirs = router.list_edges(&filter, after, PAGE).await;
    mine.extend(theirs.edges.into_iter().map(|l| l.view.edge_id));
    mine.sort_unstable();
    mine.dedup();
    let more = mine.len() > PAGE || theirs.more || own.more;
    mine.truncate(PAGE);
    (mine, more)
}

/// The baseline: the same page cut from every view of this replica and every other
/// replica's, pulled whole (as the listing did before it asked each for a page).
async fn baseline_page(
    cp: &iop_tokio::ControlPlaneHandle,
    router: &iop_cluster::Router,
    after: &str,
) -> Vec<String> {
    let mut all: Vec<String> = cp
        .edges()
        .into_iter()
        .filter(|v| v.reachability != Reachability::Disconnected)
        .map(|v| v.edge_id)
        .collect();
    all.extend(
        router
            .remote_views()
            .await
            .into_iter()
            .map(|l| l.view.edge_id),
    );
    all.sort_unstable();
    all.dedup();
    all.into_iter()
        .filter(|id| id.as_str() > after)
        .take(PAGE)
        .collect()
}

/// Pages through the whole fleet; `COUNT SEEN P50 P99 BASELINE_P50 BASELINE_P99` (ms).
async fn list_pages(cp: &iop_tokio::ControlPlaneHandle, router: &iop_cluster::Router) -> String {
    let mut took = Vec::new();
    let mut seen = 0;
    let mut after = String::new();
    for _ in 0..100_000 / PAGE + 10 {
        let started = Instant::now();
        let (ids, more) = page(cp, router, &after).await;
        took.push(started.elapsed().as_secs_f64() * 1e3);
        seen += ids.len();
        match ids.last() {
            Some(last) if more => after = last.clone(),
            _ => break,
        }
    }
    let mut baseline = Vec::new();
    for k in 0..BASELINE_PAGES {
        let started = Instant::now();
        let ids = baseline_page(cp, router, &format!("edge{}", k % REPLICAS)).await;
        baseline.push(started.elapsed().as_secs_f64() * 1e3);
        assert!(!ids.is_empty());
    }
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    let count = took.len();
    format!(
        "{count} {seen} {:.1} {:.1} {:.1} {:.1}",
        pct(&mut took, 0.5),
        pct(&mut took, 0.99),
        pct(&mut baseline, 0.5),
        pct(&mut baseline, 0.99)
    )
}

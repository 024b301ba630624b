//! A fleet-wide reconnect as a new user meets it: N Edges (default 10 000) dialling at
//! once from one address (127.0.0.1, as behind a NAT or an L4 load balancer) to three
//! Control Plane replicas on the durable engine (one nats-server with the example
//! configuration, `sync_interval: always`), every flag of replica and Edge at its
//! default — the per-address cap on pending hellos and the Edges' reconnect backoff
//! included. Baseline: one Control Plane, no cluster, the same defaults, in the same
//! run. Reports the time until every Edge is enrolled (goal ≤ 2× the baseline), how
//! many are enrolled 60 s after the storm began, and the hellos refused per enrolled
//! Edge. With `--engine 3` the engine is three nats-servers forming one cluster on
//! loopback, each with the example configuration, every bucket in three copies (R3):
//! the production setting; each replica talks to a server of its own.
//!
//! Needs nats-server 2.10 or newer (`IOP_NATS_SERVER`, else the PATH).
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin cluster_storm [-- [--engine 3] N]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use iop_bench_socket::fleet::{self, Role, report};
use iop_bench_socket::{Row, Table};
use iop_cluster::testing::NatsServer;
use iop_cluster::{ClusterConfig, Replica};
use iop_tokio::{ControlPlaneServer, EnrolmentPolicy, ServerConfig};

const REPLICAS: usize = 3;
/// How long a storm may take before the run gives up on it.
const BOUND: Duration = Duration::from_secs(180);
/// When the share enrolled is read ("half the fleet out after a minute").
const MINUTE: Duration = Duration::from_secs(60);

type BoxError = Box<dyn std::error::Error>;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("server") => server(
            args[1].parse()?,
            &args[2],
            &args[3],
            args[4].parse()?,
            args[5].parse()?,
        ),
        Some("edges") => {
            fleet::run_edges_as_shipped(args[1].parse()?, args[2].parse()?, &args[3])?;
            Ok(())
        }
        _ => {
            let (engine, rest) = match args.first().map(String::as_str) {
                Some("--engine") => (args.get(1).map_or(Ok(1), |n| n.parse())?, &args[2..]),
                _ => (1, &args[..]),
            };
            if engine != 1 && engine != 3 {
                return Err("--engine takes 1 or 3 (servers)".into());
            }
            let n = rest.first().and_then(|n| n.parse().ok()).unwrap_or(10_000);
            orchestrate(n, engine)
        }
    }
}

/// What one storm came to.
struct Storm {
    /// Seconds until every Edge was enrolled (`None`: not within [`BOUND`]).
    all: Option<f64>,
    /// Edges enrolled [`MINUTE`] after the storm began (all of them if sooner).
    at_minute: usize,
    /// Hellos refused (per-address cap, pending cap, claims the engine could not
    /// take in time) over the whole storm.
    refused: u64,
    /// Ownership records written, and the engine commits they took (atomic batches
    /// plus single writes).
    writes: u64,
    commits: u64,
    /// The most writes one batch carried.
    largest: u64,
}

/// The engine: one nats-server, or `engine` of them in one cluster.
fn orchestrate(n: usize, engine: usize) -> Result<(), BoxError> {
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/nats/nats-server.conf");
    let nats = if engine == 1 {
        vec![NatsServer::try_start_with_config(&config)?]
    } else {
        NatsServer::try_start_cluster(engine, Some(&config))?
    };
    let engine = Engine {
        urls: nats.iter().map(NatsServer::url).collect(),
        copies: engine,
    };
    let alone = storm(n, 1, None, 0)?;
    let cluster = storm(
        n,
        REPLICAS,
        Some(&engine),
        iop_cluster::group_commit::ATOMIC_MIN,
    )?;
    // The same with every claim written on its own (no atomic batches), for the
    // group commit's share.
    let singles = storm(n, REPLICAS, Some(&engine), usize::MAX)?;
    let mut table = Table::new(
        format!(
            "{n} Edges reconnecting at once from one address, every flag at its default (127.0.0.1, 2 tokio workers per process)"
        ),
        if engine.copies == 1 {
            "3 replicas, durable engine"
        } else {
            "3 replicas, durable engine of 3 servers (R3)"
        },
        "one Control Plane",
    );
    let secs = |s: &Storm| {
        s.all
            .map_or(format!("> {} s", BOUND.as_secs()), |t| format!("{t:.2} s"))
    };
    // Of a storm's time to the lone Control Plane's.
    let ratio = |s: &Storm| match (s.all, alone.all) {
        (Some(c), Some(a)) => format!("{:.2}", c / a),
        _ => "—".into(),
    };
    let met = match (cluster.all, alone.all) {
        (Some(c), Some(a)) => Some(c <= 2.0 * a),
        _ => Some(false),
    };
    table.push(Row::new(
        "time until every Edge is enrolled",
        secs(&cluster),
        secs(&alone),
        ratio(&cluster),
        "≤ 2.00",
        met,
    ));
    table.push(Row::new(
        format!(
            "Edges enrolled {} s after the storm began",
            MINUTE.as_secs()
        ),
        format!("{} of {n}", cluster.at_minute),
        format!("{} of {n}", alone.at_minute),
        "—",
        "all",
        Some(cluster.at_minute == n),
    ));
    let per = |s: &Storm| s.refused as f64 / n as f64;
    table.push(Row::new(
        "hellos refused per enrolled Edge",
        format!("{:.2}", per(&cluster)),
        format!("{:.2}", per(&alone)),
        "—",
        "—",
        None,
    ));
    table.push(Row::new(
        "engine commits per ownership write (batches reached: largest)",
        format!(
            "{:.3} ({} writes, largest batch {})",
            cluster.commits as f64 / cluster.writes.max(1) as f64,
            cluster.writes,
            cluster.largest
        ),
        "—",
        "—",
        "—",
        None,
    ));
    table.push(Row::new(
        "the same replicas writing every claim on its own: time until all enrolled",
        secs(&singles),
        secs(&alone),
        ratio(&singles),
        "—",
        None,
    ));
    table.push(Row::new(
        "the same, hellos refused per enrolled Edge",
        format!("{:.2}", per(&singles)),
        format!("{:.2}", per(&alone)),
        "—",
        "—",
        None,
    ));
    println!("{table}");
    Ok(())
}

/// The engine's servers, and the copies each bucket keeps.
struct Engine {
    urls: Vec<String>,
    copies: usize,
}

/// `n` Edges storming `replicas` Control Planes (on `engine`, or alone without), each
/// replica's share from a process of its own; replica `i` talks to server `i` first.
fn storm(
    n: usize,
    replicas: usize,
    engine: Option<&Engine>,
    batch_min: usize,
) -> Result<Storm, BoxError> {
    let share = n / replicas;
    let mut servers = Vec::new();
    let mut addrs = Vec::new();
    for i in 0..replicas {
        let count = if i + 1 == replicas {
            n - share * i
        } else {
            share
        };
        let (urls, copies) = engine.map_or(("-".to_owned(), 1), |e| {
            let k = e.urls.len();
            let mine: Vec<&str> = (0..k).map(|j| e.urls[(i + j) % k].as_str()).collect();
            (mine.join(","), e.copies)
        });
        let mut s = Role::spawn(&[
            "server".into(),
            count.to_string(),
            urls,
            format!("cp-{i}"),
            batch_min.to_string(),
            copies.to_string(),
        ])?;
        addrs.push((s.expect("addr")?, count));
        servers.push(s);
    }
    // Every share dials at once, once every server listens.
    let mut edges = Vec::new();
    for (i, (addr, count)) in addrs.into_iter().enumerate() {
        edges.push(Role::spawn(&[
            "edges".into(),
            count.to_string(),
            addr,
            format!("e{i}"),
        ])?);
    }
    let mut storm = Storm {
        all: Some(0.0),
        at_minute: 0,
        refused: 0,
        writes: 0,
        commits: 0,
        largest: 0,
    };
    for s in &mut servers {
        let [all, at_minute, refused, writes, commits, largest] = s.numbers("storm")?;
        storm.writes += writes as u64;
        storm.commits += commits as u64;
        storm.largest = storm.largest.max(largest as u64);
        storm.all = match (storm.all, all) {
            (Some(t), all) if all >= 0.0 => Some(t.max(all)),
            _ => None,
        };
        storm.at_minute += at_minute as usize;
        storm.refused += refused as u64;
    }
    drop(edges);
    drop(servers);
    Ok(storm)
}

/// A Control Plane for `n` Edges with every default, alone (`urls` `-`) or replica
/// `id` on the servers `urls` (comma-separated; atomic batches of at least
/// `batch_min` claims, buckets in `copies` copies); reports its address,
/// then `storm SECONDS_TO_ALL AT_MINUTE REFUSED WRITES COMMITS LARGEST_BATCH` (seconds
/// −1: not all within [`BOUND`]).
fn server(n: usize, urls: &str, id: &str, batch_min: usize, copies: usize) -> Result<(), BoxError> {
    fleet::check_fd_limit(n)?;
    let rt = fleet::runtime()?;
    rt.block_on(async {
        let cluster = (urls != "-").then(|| {
            let mut cluster = ClusterConfig::new(id);
            cluster.atomic_batch_min = batch_min;
            cluster.bucket_replicas = copies;
            cluster
        });
        let mut config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
        if let Some(cluster) = &cluster {
            cluster.configure(&mut config);
        }
        let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
        let replica = match cluster {
            Some(cluster) => {
                let addrs = urls
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<Vec<async_nats::ServerAddr>, _>>()?;
                let options = cluster.connect_options().retain_servers_order();
                let client = options.connect(addrs).await?;
                Some(Replica::start(client, server.handle(), cluster).await?)
            }
            None => None,
        };
        let cp = server.handle();
        report("addr", server.local_addr());
        // The storm begins when the first Edge dials.
        while cp.stats().connections_accepted == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let start = Instant::now();
        let mut at_minute = None;
        let mut all = None;
        while start.elapsed() < BOUND {
            let live = cp.stats().live_sessions;
            if at_minute.is_none() && (start.elapsed() >= MINUTE || live >= n) {
                at_minute = Some(live);
            }
            if live >= n {
                all = Some(start.elapsed().as_secs_f64());
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let stats = cp.stats();
        let snapshot = replica.as_ref().map(|r| r.stats().snapshot());
        let unavailable = snapshot.map_or(0, |s| s.claims_unavailable);
        let (writes, commits, largest) = snapshot.map_or((0, 0, 0), |s| {
            (
                s.owner_writes,
                s.owner_batches + s.owner_single_writes,
                s.owner_largest_batch,
            )
        });
        let refused = stats.pending_hellos_refused + stats.connections_refused + unavailable;
        eprintln!(
            "{id}: {n} Edges: all enrolled after {all:?} s; refused at the address cap {}, at the pending cap {}, claims unavailable {unavailable}, hello timeouts {}",
            stats.connections_refused, stats.pending_hellos_refused, stats.hello_timeouts,
        );
        report(
            "storm",
            format!(
                "{} {} {refused} {writes} {commits} {largest}",
                all.unwrap_or(-1.0),
                at_minute.unwrap_or(stats.live_sessions)
            ),
        );
        fleet::until_parent_goes().await;
        drop(replica);
        Ok(())
    })
}

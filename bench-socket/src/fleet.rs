//! Many Edges in one process, and the plumbing between the bench's processes.
//!
//! The Control Plane and its Edges run in two processes (the bench binary re-runs
//! itself): each then needs one file descriptor per connection (10 000 fit the
//! machine's `ulimit -n` of 20 000, both ends in one process would not), and the
//! Control Plane process's heap and RSS hold its side only.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use iop_tokio::core::edge::EdgeConfig;
use iop_tokio::core::proto::EdgeStatusResponse;
use iop_tokio::{EdgeClient, ServerConfig};

use crate::grpc::EdgeStream;

/// Which implementation a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// iop-tokio.
    Ours,
    /// tonic, one bidirectional stream per Edge.
    Tonic,
}

impl System {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ours => "ours",
            Self::Tonic => "tonic",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ours" => Some(Self::Ours),
            "tonic" => Some(Self::Tonic),
            _ => None,
        }
    }
}

/// A multi-thread runtime with two workers (the machine has two cores).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// Fails early when this process may not open `connections` sockets.
pub fn check_fd_limit(connections: usize) -> Result<(), String> {
    match crate::process::open_files_limit() {
        Some(limit) if (limit as usize) < connections + 64 => Err(format!(
            "ulimit -n is {limit}: {connections} connections need {} (raise it with `ulimit -n`)",
            connections + 64
        )),
        _ => Ok(()),
    }
}

/// Runs `n` Edges of `system` against `addr` until standard input closes (the parent
/// ended or killed us). Edges connect all at once, as after a Control Plane restart.
pub fn run_edges(system: System, n: usize, addr: SocketAddr) -> Result<(), String> {
    run_named_edges(system, n, addr, "edge")
}

/// [`run_edges`] with ids `{prefix}-00000`, ...: fleets of several processes must not
/// share ids.
pub fn run_named_edges(
    system: System,
    n: usize,
    addr: SocketAddr,
    prefix: &str,
) -> Result<(), String> {
    run_edges_configured(system, n, addr, prefix, |config| {
        config.backoff_base = Duration::from_millis(100);
        config.backoff_max = Duration::from_secs(1);
    })
}

/// [`run_named_edges`] with our Edges' config as it ships (their reconnect backoff
/// included), as a new user runs them.
pub fn run_edges_as_shipped(n: usize, addr: SocketAddr, prefix: &str) -> Result<(), String> {
    run_edges_configured(System::Ours, n, addr, prefix, |_| {})
}

fn run_edges_configured(
    system: System,
    n: usize,
    addr: SocketAddr,
    prefix: &str,
    tune: fn(&mut EdgeConfig),
) -> Result<(), String> {
    check_fd_limit(n)?;
    let rt = runtime().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut held = Vec::with_capacity(n);
        for i in 0..n {
            let edge_id = format!("{prefix}-{i:05}");
            match system {
                System::Ours => {
                    let mut config = EdgeConfig::new(edge_id, iop_tokio::process_seed());
                    tune(&mut config);
                    let edge = EdgeClient::<()>::with_edge_registry(config, ())
                        .connect(addr)
                        .map_err(|e| e.to_string())?;
                    held.push(edge);
                }
                System::Tonic => {
                    tokio::spawn(async move {
                        // Retry: the listener's backlog overflows when all dial at once.
                        for _ in 0..50 {
                            match EdgeStream::connect(addr).await {
                                Ok(stream) => {
                                    stream.answer(EdgeStatusResponse::default()).await;
                                    return;
                                }
                                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                            }
                        }
                        eprintln!("tonic edge {i} never connected");
                    });
                }
            }
        }
        until_parent_goes().await;
        drop(held);
        Ok(())
    })
}

/// Returns when standard input closes: the parent ended, or dropped its [`Role`].
pub async fn until_parent_goes() {
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        while std::io::stdin()
            .read_line(&mut sink)
            .map(|n| n > 0)
            .unwrap_or(false)
        {}
    })
    .await;
}

/// A child process of this bench: a Control Plane or an Edge fleet.
pub struct Role {
    child: Child,
    stdout: std::io::BufReader<ChildStdout>,
}

impl Role {
    /// Re-runs this binary with `args`; its standard input stays open until drop.
    pub fn spawn(args: &[String]) -> std::io::Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .map(std::io::BufReader::new)
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(Self { child, stdout })
    }

    /// The next line it prints that starts with `tag `, without the tag.
    pub fn expect(&mut self, tag: &str) -> std::io::Result<String> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                return Err(std::io::Error::other(format!(
                    "child ended before printing `{tag}`"
                )));
            }
            if let Some(rest) = line.trim_end().strip_prefix(tag) {
                return Ok(rest.trim().to_owned());
            }
        }
    }

    /// Writes `line` to its standard input.
    pub fn send(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self
            .child
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin closed"))?;
        writeln!(stdin, "{line}")?;
        stdin.flush()
    }

    /// Kills it at once (SIGKILL): no goodbye, nothing released.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The `N` numbers of the next line tagged `tag`.
    pub fn numbers<const N: usize>(&mut self, tag: &str) -> std::io::Result<[f64; N]> {
        let line = self.expect(tag)?;
        let numbers: Vec<f64> = line
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        numbers
            .try_into()
            .map_err(|_| std::io::Error::other(format!("bad `{tag}` line: {line}")))
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        // Closing stdin ends an Edge fleet; kill is the backstop (our own child, by
        // pid) after 5 s.
        drop(self.child.stdin.take());
        for _ in 0..250 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Control Plane's config for a bench fleet, alone or (`cluster`) a replica's, with
/// that replica's directory.
/// Every Edge dials from 127.0.0.1 here, a real fleet's from many addresses: the
/// per-address cap on hellos pending (64) would refuse the burst `OVERLOADED`, so it
/// is the global one (1 024), as a fleet behind one NAT address needs.
pub fn server_config(cluster: Option<&iop_cluster::ClusterConfig>) -> ServerConfig {
    let mut config = ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny);
    config.max_pending_hellos_per_ip = config.cp.max_pending_hellos;
    if let Some(cluster) = cluster {
        cluster.configure(&mut config);
    }
    config
}

/// Waits until `count()` reaches `n`, at most `bound`; how long that took.
pub async fn wait_for(
    n: usize,
    bound: Duration,
    count: impl Fn() -> usize,
) -> Result<Duration, String> {
    let start = Instant::now();
    while count() < n {
        if start.elapsed() > bound {
            return Err(format!("only {} of {n} there after {bound:?}", count()));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(start.elapsed())
}

/// Prints `tag value` on standard output for the parent, flushed.
pub fn report(tag: &str, value: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{tag} {value}");
    let _ = out.flush();
}

//! `iop-edge`: an IOP Edge that dials its Control Plane, reports the nodes of its
//! config file, and runs the built-in operations.
#![forbid(unsafe_code)]

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use iop_core::NodeRegistry;
use iop_core::edge::Secret;
use iop_server::exit::{Failure, finish, shutdown_signal};
use iop_server::private_file::{check_private, read_private};
use iop_server::simulate::{self, SimRates, Simulator};
use iop_server::{EdgeFile, credential_bytes, edge_ops, logging, startup};
use iop_tokio::{ClientTls, EdgeClient, EdgeConfig};

/// An IOP Edge: dials the Control Plane (and redials forever with backoff), owns the
/// node registry described by its config file, answers status requests from it, and
/// runs the built-in operations `edge.ping`, `provider-pool.refresh` (re-reads the
/// config file), `node.drain` and `node.resume`.
///
/// Node addresses and tokens from the config file never leave this process. With a
/// credential, a Control Plane not on this host must be dialled with TLS (--tls-ca)
/// unless --allow-plaintext; the credential and key files must be readable by their
/// owner only. Stops gracefully on Ctrl-C or SIGTERM. Exit codes: 0 stopped cleanly, 1 runtime error,
/// 2 usage error (bad flag, unusable config or credential file).
#[derive(Debug, Parser)]
#[command(name = "iop-edge", version)]
struct Args {
    /// Control Plane address to dial, HOST:PORT (a name is resolved once, at start).
    /// Repeat it (or separate with commas) for the replicas of a cluster: when one
    /// cannot be reached, the next dial tries the next.
    #[arg(long, value_name = "ADDR", required = true, value_delimiter = ',')]
    control_plane: Vec<String>,

    /// This Edge's id ([A-Za-z0-9._-]{1,128}); an empty or invalid id is refused at
    /// start (exit code 2), before dialling.
    #[arg(long, value_name = "ID")]
    edge_id: String,

    /// The Edge's config file (TOML): nodes, labels, models, providers and their
    /// private connection details (see examples/edge.toml).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,

    /// File holding the enrolment credential sent in the hello (one trailing newline
    /// is ignored). Its SHA-256 goes in the Control Plane's enrolment file.
    #[arg(long, value_name = "FILE")]
    credential_file: Option<PathBuf>,

    /// PEM file with the CA(s) the Control Plane's certificate must chain to. Turns TLS
    /// on (framing is the same inside).
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,

    /// Name the Control Plane's certificate must be valid for (DNS name or IP).
    /// Default: the host part of --control-plane.
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    tls_server_name: Option<String>,

    /// PEM file with this Edge's client certificate, for mutual TLS (a Control Plane
    /// with --require-client-identity wants it valid for --edge-id as a DNS name).
    /// Needs --tls-key and --tls-ca.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    tls_cert: Option<PathBuf>,

    /// PEM file with the private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Send the credential without TLS to a Control Plane that is not on this host
    /// (refused otherwise: anyone on the path could take it and the Edge's place).
    #[arg(long)]
    allow_plaintext: bool,

    /// Never push load updates (PROTOCOL.md §4.8), even to a Control Plane that asks
    /// for them: the providers' numbers then reach it only when it pulls a status.
    #[arg(long)]
    no_load_updates: bool,

    /// Run simulated nodes: the configured nodes connect, become ready, take and
    /// release leases, queue requests, disconnect and reconnect. Adds the operations
    /// `sim.disconnect` (drop the selected nodes and keep them down) and `sim.connect`.
    #[arg(long)]
    simulate: bool,

    /// Seed of the simulation (the same seed replays the same choices).
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,

    /// Milliseconds between two simulation steps.
    #[arg(long, value_name = "N", default_value_t = 500)]
    simulate_interval_ms: u64,

    /// Log filter: a level (error, warn, info, debug, trace) or `RUST_LOG`-style
    /// directives. Default: `RUST_LOG`, else `info`. Logs go to stderr.
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
}

/// The shortest enrolment credential an Edge sends: a guessable one is no secret.
const MIN_CREDENTIAL_LEN: usize = 16;

fn main() -> ExitCode {
    let args = Args::parse();
    finish("iop-edge", run(args))
}

fn resolve(addr: &str) -> Result<SocketAddr, Failure> {
    addr.to_socket_addrs()
        .map_err(|e| Failure::Usage(format!("--control-plane {addr:?}: {e}")))?
        .next()
        .ok_or_else(|| Failure::Usage(format!("--control-plane {addr:?}: no address")))
}

/// The host part of `HOST:PORT` (`[v6]:port` too), the default TLS server name.
fn host_of(addr: &str) -> String {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned()
}

fn run(args: Args) -> Result<(), Failure> {
    logging::init(args.log_level.as_deref(), "info").map_err(Failure::Usage)?;
    let cp_addrs = args
        .control_plane
        .iter()
        .map(|a| resolve(a))
        .collect::<Result<Vec<_>, _>>()?;
    let (cp_addr, fallbacks) = match cp_addrs.split_first() {
        Some((first, rest)) => (*first, rest.to_vec()),
        None => return Err(Failure::Usage("--control-plane is required".into())),
    };
    let first_cp = args.control_plane.first().cloned().unwrap_or_default();
    let file = EdgeFile::load(&args.config).map_err(|e| Failure::Usage(e.to_string()))?;
    let mut config = EdgeConfig::new(args.edge_id.clone(), iop_tokio::process_seed());
    config.software_version = format!("iop-edge {}", env!("CARGO_PKG_VERSION"));
    config.load_updates = !args.no_load_updates;
    if let Some(path) = &args.credential_file {
        // The credential in clear: zeroed when dropped (Secret keeps its own copy).
        let raw = read_private(path).map_err(|e| Failure::Usage(e.to_string()))?;
        let credential = credential_bytes(&raw);
        if credential.len() < MIN_CREDENTIAL_LEN {
            return Err(Failure::Usage(format!(
                "{}: a credential must be at least {MIN_CREDENTIAL_LEN} bytes \
                 (e.g. `openssl rand -hex 24`)",
                path.display()
            )));
        }
        config.credential = Secret::new(credential.to_vec());
    }
    // Every address the credential may be sent to.
    for addr in &cp_addrs {
        match startup::check_edge_plaintext(
            addr.ip(),
            args.tls_ca.is_some(),
            args.credential_file.is_some(),
            args.allow_plaintext,
        ) {
            Ok(Some(warning)) => tracing::warn!("{warning}"),
            Ok(None) => {}
            Err(usage) => return Err(Failure::Usage(usage)),
        }
    }
    let tls = match &args.tls_ca {
        Some(ca) => {
            let name = args
                .tls_server_name
                .clone()
                .unwrap_or_else(|| host_of(&first_cp));
            let client = args.tls_cert.as_deref().zip(args.tls_key.as_deref());
            if let Some((_, key)) = client {
                check_private(key).map_err(|e| Failure::Usage(format!("TLS: {e}")))?;
            }
            let tls = ClientTls::from_pem_files(ca, &name, client)
                .map_err(|e| Failure::Usage(format!("TLS: {e}")))?;
            tracing::info!(server_name = %name, client_certificate = client.is_some(), "TLS on");
            Some(tls)
        }
        None => None,
    };
    let mut registry = NodeRegistry::new();
    let now = iop_server::unix_ms();
    for node in &file.nodes {
        let _added = registry.configure(node.clone(), now).map_err(|e| {
            Failure::Usage(format!(
                "{}: node {}: {e}",
                args.config.display(),
                node.node_id
            ))
        })?;
    }
    tracing::info!(nodes = file.nodes.len(), config = %args.config.display(), "edge config loaded");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async move {
        let mut client = EdgeClient::new(config).with_node_registry(registry);
        if let Some(tls) = tls {
            client = client.with_tls(tls);
        }
        let mut client = edge_ops::register(client, Some(args.config.clone()));
        let sim = args
            .simulate
            .then(|| Arc::new(Mutex::new(Simulator::new(args.seed, SimRates::default()))));
        if let Some(sim) = &sim {
            client = simulate::register(client, sim.clone());
        }
        let edge = client
            .fallback_addrs(fallbacks)
            .connect(cp_addr)
            .map_err(|e| Failure::Usage(format!("edge config: {e}")))?;
        tracing::info!(control_plane = %cp_addr, edge_id = %args.edge_id, "edge started");
        let sim = sim.map(|sim| {
            tracing::info!(seed = args.seed, "simulated nodes running");
            simulate::spawn(
                edge.clone(),
                sim,
                Duration::from_millis(args.simulate_interval_ms.max(10)),
            )
        });
        shutdown_signal().await;
        tracing::info!("stopping");
        if let Some(task) = sim {
            task.abort();
        }
        edge.shutdown().await;
        Ok(())
    })
}

//! `iop-control-plane`: an IOP Control Plane with an HTTP admin API.
#![forbid(unsafe_code)]

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use iop_cluster::ClusterConfig;
use iop_server::admin::{self, AdminAccess, AdminServerConfig, AdminState, AdminTokens, TokenBook};
use iop_server::cluster::ClusterArgs;
use iop_server::exit::{Failure, finish, shutdown_signal};
use iop_server::reload::{Reloadable, TlsFiles};
use iop_server::{EnrolFile, credential_bytes, credential_hash_hex, logging, startup};
use iop_tokio::{ControlPlaneServer, DuplicatePolicy, EnrolmentPolicy, ServerConfig};

/// Many connections' buffers live among the short-lived allocations of hellos and, in a
/// cluster, engine messages; glibc's malloc leaves that heap fragmented (a replica's RSS
/// per Edge 1.26-1.79x a lone Control Plane's), jemalloc much less (1.12-1.28x;
/// BENCHMARKS.md §9).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long open admin connections may take to finish once stopping.
const ADMIN_GRACE: Duration = Duration::from_secs(3);

/// An IOP Control Plane: accepts Edge connections (TCP, length-prefixed protobuf
/// frames) and serves an HTTP admin API (`/v1/edges`, `/v1/commands`, `/v1/events`,
/// `/metrics`, `/healthz`).
///
/// On start it prints one line to stdout, `iop-control-plane listening edges=ADDR
/// admin=ADDR`, with the bound addresses (useful with port 0). Stops gracefully on
/// Ctrl-C or SIGTERM. On SIGHUP it re-reads the --enroll file and the TLS files without
/// dropping connected Edges: an Edge whose entry was removed or whose credential
/// changed is disconnected with GoAway{CREDENTIAL_REVOKED}; new handshakes use the new
/// certificate; a file that does not load is logged and what was in force stays. Exit
/// codes: 0 stopped cleanly, 1 runtime error, 2 usage error (bad flag, unusable
/// enrolment, token or TLS file, an exposed admin API without tokens).
///
/// Admin API security: every route but /healthz needs `Authorization: Bearer TOKEN`
/// with --admin-token-file; without one the API is served on a loopback --admin address
/// only. Always: requests from other sites' pages (foreign Origin or Host) are 403,
/// changes need `Content-Type: application/json`, bodies are at most 64 KiB. Files
/// holding secrets (--tls-key, --admin-token-file) must be readable by their owner only.
///
/// TLS: with --tls-cert and --tls-key Edges must connect with TLS (framing is the same
/// inside). With --tls-client-ca they must also present a client certificate signed by
/// that CA (mutual TLS); with --require-client-identity that certificate must name the
/// Edge: it must be valid for the hello's edge id as a DNS name (a subjectAltName DNS
/// entry; the CN is not used), else the hello is refused BAD_CREDENTIAL.
#[derive(Debug, Parser)]
#[command(name = "iop-control-plane", version, subcommand_negates_reqs = true)]
struct Args {
    /// Address to accept Edge connections on, e.g. 0.0.0.0:7700 (port 0: any free port).
    #[arg(long, value_name = "ADDR", required = true)]
    listen: Option<SocketAddr>,

    /// Address of the HTTP admin API, e.g. 127.0.0.1:7701 (port 0: any free port).
    #[arg(long, value_name = "ADDR", required = true)]
    admin: Option<SocketAddr>,

    /// Enrolment file (TOML) listing the Edge ids allowed to enrol with the SHA-256 of
    /// their credential (see examples/enroll.toml). Without it any valid edge id may
    /// enrol (development only).
    #[arg(long, value_name = "FILE")]
    enroll: Option<PathBuf>,

    /// Accept an enrolment file that lists no Edge at all when SIGHUP re-reads it
    /// (nobody may then enrol, and every enrolled Edge is disconnected). Without it
    /// such a file — empty, or truncated by an editor — is refused and the allow list
    /// in force stays.
    #[arg(long, requires = "enroll")]
    allow_empty_enrolment: bool,

    /// PEM file with the Control Plane's TLS certificate chain (server certificate
    /// first). Turns TLS on; needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// PEM file with the private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// PEM file with the CA(s) that Edge client certificates must chain to: mutual TLS,
    /// an Edge without a valid client certificate fails the handshake. Needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,

    /// Refuse a hello (BAD_CREDENTIAL) unless the Edge's client certificate is valid
    /// for its edge id as a DNS name (subjectAltName). Needs --tls-client-ca.
    #[arg(long, requires = "tls_client_ca")]
    require_client_identity: bool,

    /// What to do when an Edge id that already has a live session says hello again:
    /// `replace` the old session (default: a reconnecting Edge whose old connection is
    /// half-open is never locked out) or `reject` the new one.
    #[arg(long, value_name = "POLICY", default_value = "replace")]
    duplicate_policy: DuplicateArg,

    /// Heartbeat interval offered to Edges, in ms (clamped to 1000..=60000). An Edge
    /// silent for 3 intervals is disconnected.
    #[arg(long, value_name = "N", default_value_t = 5_000)]
    heartbeat_interval_ms: u64,

    /// How long a new connection may take to send its hello, in ms.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    hello_timeout_ms: u64,

    /// How long an Edge remembers a finished command (its finished-id retention), in
    /// ms: a command whose Edge stays disconnected longer than its timeout plus this
    /// is FAILED as abandoned, its outcome never to be learned. 0: never abandon one.
    /// A cluster's replica never abandons (the Edge may be live on another replica).
    #[arg(long, value_name = "N", default_value_t = 600_000)]
    edge_command_retention_ms: u64,

    /// How long a status request may stay unanswered, in ms.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    status_timeout_ms: u64,

    /// How often every connected Edge's status is refreshed, in ms, so that the fleet's
    /// load (dashboard, /v1/fleet/load, /metrics) stays this fresh: each Edge at a phase
    /// of its own within the period, at most 256 refreshes in flight at once. At least
    /// 1000; 0: never (views then change only when someone asks for a status).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    status_refresh_ms: u64,

    /// The least time between two load updates an Edge pushes (PROTOCOL.md §4.8), in
    /// ms, asked of every Edge that offers them: their providers' numbers then reach
    /// the views within about this long of a change. 50..=60000; 0: ask for none
    /// (Edges are only pulled, every --status-refresh-ms).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 250,
        visible_alias = "load-update-interval"
    )]
    load_update_interval_ms: u64,

    /// How often the fleet's totals are sampled for its history (/v1/fleet/history,
    /// the dashboard's charts), in ms; the history holds the last --load-history-ms.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    fleet_history_interval_ms: u64,

    /// How often each Edge's totals are sampled (/v1/edges/{id}/history), in ms.
    #[arg(long, value_name = "N", default_value_t = 120_000)]
    edge_history_interval_ms: u64,

    /// How far back the fleet's and each Edge's history reach, in ms (at most 10 000
    /// samples each; 0: no history).
    #[arg(long, value_name = "N", default_value_t = 3_600_000)]
    load_history_ms: u64,

    /// Connections held at once (pending hellos included); past it a new connection
    /// gets `GoAway{OVERLOADED}` with a retry-after of 10 s and is closed. Default: the
    /// protocol's 20 000, or what the process's open-files limit leaves after 300 for
    /// listeners, admin connections, logs and the engine, if that is lower (a value
    /// given past that limit is warned about at start).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,

    /// Admin tokens, one per line with an optional role (`read`: views, statuses,
    /// events and metrics; `operate`, the default: also commands). Every admin route
    /// but /healthz then needs `Authorization: Bearer TOKEN`. The file must be readable
    /// by its owner only; SIGHUP re-reads it (a token removed is refused at once, and
    /// its event streams end). Without it --admin must be a loopback address.
    #[arg(long, value_name = "FILE", env = "IOP_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,

    /// PEM certificate chain of the admin API: it then speaks HTTPS only (the
    /// dashboard too). Needs --admin-tls-key; SIGHUP re-reads both.
    #[arg(long, value_name = "FILE", requires = "admin_tls_key")]
    admin_tls_cert: Option<PathBuf>,

    /// PEM private key of --admin-tls-cert (readable by its owner only).
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_tls_key: Option<PathBuf>,

    /// A host name the admin API answers to, besides IP addresses and localhost (the
    /// name operators use in their browser or behind a proxy). Repeatable. Requests
    /// with any other Host are refused (DNS rebinding).
    #[arg(long = "admin-host", value_name = "NAME")]
    admin_hosts: Vec<String>,

    /// Serve /metrics without a token (for a scraper on a trusted network).
    #[arg(long)]
    metrics_public: bool,

    /// The most per-Edge and per-provider series /metrics shows: past it the
    /// per-provider series are left out, then the per-Edge ones (the fleet's totals by
    /// category, model and label always stay), and `iop_metrics_fleet_detail` says so.
    #[arg(long, value_name = "N", default_value_t = admin::DEFAULT_METRICS_MAX_SERIES)]
    metrics_max_series: usize,

    /// Admin connections held at once; past it a new one is closed at once.
    #[arg(long, value_name = "N", default_value_t = 256)]
    admin_max_connections: usize,

    /// Admin connections held at once from one IP address; past it a new one from
    /// that address is closed at once.
    #[arg(long, value_name = "N", default_value_t = 32)]
    admin_max_connections_per_address: usize,

    /// How long an admin request's headers may take to arrive, in ms.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    admin_header_timeout_ms: u64,

    /// How long an admin connection may go without a byte read or written before it is
    /// closed, in ms (an event stream sends a keep-alive every 15 s).
    #[arg(long, value_name = "N", default_value_t = 60_000)]
    admin_idle_timeout_ms: u64,

    /// Connections from one IP address that may await their hello at once; past it a
    /// new one gets GoAway{OVERLOADED}. A hello waiting only on the cluster's claim
    /// (it passed its checks) does not count.
    #[arg(long, value_name = "N", default_value_t = 64)]
    max_pending_hellos_per_ip: usize,

    /// Read a PROXY protocol header (v1 or v2) from each Edge connection of a peer in
    /// this range (an address or CIDR, e.g. 10.0.0.0/8; repeatable): a load balancer
    /// that names each Edge's real address, which the per-address cap and the logs
    /// then use. Such a peer must send the header; other peers are served as they are.
    #[arg(long = "proxy-protocol-from", value_name = "RANGE")]
    proxy_protocol_from: Vec<String>,

    /// Log filter: a level (error, warn, info, debug, trace) or `RUST_LOG`-style
    /// directives. Default: `RUST_LOG`, else `info`. Logs go to stderr.
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,

    #[command(flatten)]
    cluster: ClusterArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Reads a credential on stdin and prints its SHA-256 (hex), the form the
    /// enrolment file stores. One trailing newline is ignored, as `iop-edge
    /// --credential-file` does: `iop-control-plane hash-credential < edge-1.secret`.
    HashCredential,
    /// Writes a throw-away test PKI into DIR, for trials only: ca.pem, server.pem and
    /// server.key (valid for localhost and 127.0.0.1), and <EDGE_ID>.pem/.key client
    /// certificates naming each --edge-id (key files mode 0600). The CA key is not kept.
    GenTestCerts {
        /// Directory to write into (created if missing).
        dir: PathBuf,
        /// An Edge id to issue a client certificate for (repeatable).
        #[arg(long = "edge-id", value_name = "ID")]
        edge_ids: Vec<String>,
    },
    /// Prints the nats-server permission blocks the replicas' NATS users and a
    /// read-only observer's need (variables `IOP_REPLICA_<ID>` for each replica id given,
    /// IOP_REPLICA_PUBLISH and IOP_OBSERVER, as examples/nats/accounts.conf uses them),
    /// to check an engine's configuration by. Each replica reads only what is routed
    /// to it, its own replies and every replica's load changes; an observer's client
    /// uses the inbox prefix
    /// _INBOX_IOP_OBSERVER (`nats --inbox-prefix`).
    ClusterPermissions {
        /// The replicas' ids (their --replica-id), each a user of its own.
        #[arg(value_name = "REPLICA_ID", default_values_t = ["a".to_owned(), "b".to_owned(), "c".to_owned()])]
        replica_ids: Vec<String>,
    },
    /// Writes a new NATS user NKey seed to FILE (mode 0600; an existing file is never
    /// overwritten), for --cluster-nkey, and prints its public key for the engine's
    /// configuration.
    ClusterNkey {
        /// Where the seed goes.
        file: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DuplicateArg {
    /// Accept the new session; the old one gets GoAway{SUPERSEDED}.
    Replace,
    /// Refuse the new hello with DUPLICATE_EDGE.
    Reject,
}

fn main() -> ExitCode {
    let args = Args::parse();
    finish("iop-control-plane", run(args))
}

fn run(args: Args) -> Result<(), Failure> {
    match &args.command {
        Some(Command::HashCredential) => return hash_credential(),
        Some(Command::GenTestCerts { dir, edge_ids }) => {
            let written = iop_server::test_certs::write_test_certs(dir, edge_ids)
                .map_err(Failure::Runtime)?;
            let mut out = std::io::stdout().lock();
            for path in written {
                let _ = writeln!(out, "{}", path.display());
            }
            return Ok(());
        }
        Some(Command::ClusterPermissions { replica_ids }) => {
            let ids: Vec<&str> = replica_ids.iter().map(String::as_str).collect();
            let block =
                iop_cluster::permissions::config_block(&ClusterConfig::new("replica"), &ids);
            let _ = write!(std::io::stdout().lock(), "{block}");
            return Ok(());
        }
        Some(Command::ClusterNkey { file }) => {
            let public = iop_server::cluster::write_nkey(file).map_err(Failure::Runtime)?;
            let _ = writeln!(std::io::stdout().lock(), "{public}");
            return Ok(());
        }
        None => {}
    }
    logging::init(args.log_level.as_deref(), "info").map_err(Failure::Usage)?;
    let (Some(listen), Some(admin_addr)) = (args.listen, args.admin) else {
        return Err(Failure::Usage("--listen and --admin are required".into()));
    };
    let tokens = match &args.admin_token_file {
        Some(path) => {
            let tokens = AdminTokens::load(path).map_err(|e| Failure::Usage(e.to_string()))?;
            tracing::info!(tokens = tokens.len(), file = %path.display(), "admin tokens loaded");
            Some(tokens)
        }
        None => None,
    };
    startup::check_admin_exposure(admin_addr, tokens.is_some()).map_err(Failure::Usage)?;
    let admin_tls_files = match (&args.admin_tls_cert, &args.admin_tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: None,
        }),
        _ => None,
    };
    let admin_tls = match &admin_tls_files {
        Some(files) => Some(admin::serve::AdminTls::new(
            files
                .load()
                .map_err(|e| Failure::Usage(format!("admin TLS: {e}")))?,
        )),
        None => None,
    };
    let admin_warnings: Vec<String> =
        startup::admin_plaintext_warning(admin_addr, tokens.is_some(), admin_tls.is_some())
            .into_iter()
            .collect();
    for warning in &admin_warnings {
        tracing::warn!("{warning}");
    }
    let enrolment = match &args.enroll {
        Some(path) => {
            let file = EnrolFile::load(path).map_err(|e| Failure::Usage(e.to_string()))?;
            tracing::info!(edges = file.edge_ids.len(), file = %path.display(), "enrolment allow list loaded");
            EnrolmentPolicy::AllowList(file.allow_list)
        }
        None => {
            tracing::warn!("no --enroll file: any edge id may enrol (development mode)");
            EnrolmentPolicy::AcceptAny
        }
    };
    let cluster = args.cluster.config().map_err(Failure::Usage)?;
    let mut config = ServerConfig::new(enrolment);
    if let Some(cluster) = &cluster {
        cluster.configure(&mut config);
    }
    let tls_files = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        }),
        _ => None,
    };
    if let Some(files) = &tls_files {
        let tls = files
            .load()
            .map_err(|e| Failure::Usage(format!("TLS: {e}")))?;
        tracing::info!(
            cert = %files.cert.display(),
            mutual = tls.requires_client_certificates(),
            require_client_identity = args.require_client_identity,
            "TLS on"
        );
        config.tls = Some(tls);
        config.cp.require_peer_identity = args.require_client_identity;
    }
    if let Some(warning) =
        startup::plaintext_enrolment_warning(listen, tls_files.is_some(), args.enroll.is_some())
    {
        tracing::warn!("{warning}");
    }
    let files = startup::open_files_limit();
    let max_connections = match args.max_connections {
        Some(n) => {
            if let Some(warning) = startup::open_files_warning(files, n) {
                tracing::warn!("{warning}");
            }
            n
        }
        None => startup::default_max_connections(files),
    };
    config.cp.duplicate_policy = match args.duplicate_policy {
        DuplicateArg::Replace => DuplicatePolicy::Replace,
        DuplicateArg::Reject => DuplicatePolicy::Reject,
    };
    config.cp.heartbeat_interval =
        Duration::from_millis(args.heartbeat_interval_ms.clamp(1_000, 60_000));
    config.cp.hello_timeout = Duration::from_millis(args.hello_timeout_ms);
    config.cp.status_timeout = Duration::from_millis(args.status_timeout_ms);
    config.cp.status_refresh =
        (args.status_refresh_ms > 0).then(|| Duration::from_millis(args.status_refresh_ms));
    config.cp.load_update_interval = (args.load_update_interval_ms > 0)
        .then(|| Duration::from_millis(args.load_update_interval_ms));
    config.fleet.fleet_history_interval = Duration::from_millis(args.fleet_history_interval_ms);
    config.fleet.edge_history_interval = Duration::from_millis(args.edge_history_interval_ms);
    config.fleet.load_history = Duration::from_millis(args.load_history_ms);
    if cluster.is_none() {
        config.cp.edge_command_retention = (args.edge_command_retention_ms > 0)
            .then(|| Duration::from_millis(args.edge_command_retention_ms));
    }
    config.cp.max_connections = max_connections;
    config.max_pending_hellos_per_ip = args.max_pending_hellos_per_ip;
    if !args.proxy_protocol_from.is_empty() {
        let proxies = iop_tokio::ProxyProtocol::trusting(&args.proxy_protocol_from)
            .map_err(|e| Failure::Usage(format!("--proxy-protocol-from: {e}")))?;
        config.proxy_protocol = Some(proxies);
    }
    let tokens = tokens.map(TokenBook::new);
    let access = AdminAccess {
        tokens: tokens.clone(),
        hosts: args.admin_hosts.clone(),
        metrics_public: args.metrics_public,
    };
    let mut admin_config = AdminServerConfig::default();
    admin_config.max_connections = args.admin_max_connections;
    admin_config.max_connections_per_address = args.admin_max_connections_per_address;
    admin_config.header_read_timeout = Duration::from_millis(args.admin_header_timeout_ms);
    admin_config.idle_timeout = Duration::from_millis(args.admin_idle_timeout_ms);
    let reloadable = Reloadable {
        enroll: args.enroll.clone(),
        allow_empty_enrolment: args.allow_empty_enrolment,
        tls: tls_files,
        admin_tokens: args.admin_token_file.clone().zip(tokens),
        admin_tls: admin_tls_files.zip(admin_tls.clone()),
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the runtime: {e}")))?;
    let cluster = cluster.map(|c| (args.cluster.clone(), c));
    runtime.block_on(serve(
        listen,
        admin_addr,
        config,
        (
            access,
            admin_config,
            admin_tls,
            admin_warnings,
            args.metrics_max_series,
        ),
        reloadable,
        cluster,
    ))
}

async fn serve(
    listen: SocketAddr,
    admin_addr: SocketAddr,
    config: ServerConfig,
    (access, admin_config, admin_tls, admin_warnings, metrics_max_series): (
        AdminAccess,
        AdminServerConfig,
        Option<admin::serve::AdminTls>,
        Vec<String>,
        usize,
    ),
    reloadable: Reloadable,
    cluster: Option<(ClusterArgs, ClusterConfig)>,
) -> Result<(), Failure> {
    let server = ControlPlaneServer::bind(listen, config)
        .await
        .map_err(|e| Failure::Runtime(format!("edge listener {listen}: {e}")))?;
    let replica = match cluster {
        Some((args, config)) => {
            // The events `/v1/events` shows, on the fleet's stream: the feed taken
            // before the replica starts granting claims, so every session's are.
            let kinds = admin::STREAM_KINDS.iter().map(|(_, k)| *k);
            let feed = iop_cluster::events::event_feed(&server.handle(), kinds);
            let mut replica = args.start(config, server.handle()).await?;
            replica.publish_feed(feed, std::sync::Arc::new(admin::cp_event));
            tracing::info!(replica = replica.replica_id(), "cluster replica started");
            Some(replica)
        }
        None => None,
    };
    reloadable
        .on_sighup(server.handle())
        .map_err(|e| Failure::Runtime(format!("cannot watch SIGHUP: {e}")))?;
    let admin_listener = tokio::net::TcpListener::bind(admin_addr)
        .await
        .map_err(|e| Failure::Runtime(format!("admin listener {admin_addr}: cannot bind: {e}")))?;
    let admin_bound = admin_listener
        .local_addr()
        .map_err(|e| Failure::Runtime(format!("admin listener: {e}")))?;
    let mut state = AdminState::with_access(server.handle(), access);
    state.warnings = admin_warnings;
    state.metrics_max_series = metrics_max_series;
    state.replica_id = replica.as_ref().map(|r| r.replica_id().to_owned());
    state.router = replica.as_ref().map(|r| r.router());
    state.cluster_stats = replica.as_ref().map(|r| r.stats());
    tracing::info!(edges = %server.local_addr(), admin = %admin_bound, "control plane listening");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "iop-control-plane listening edges={} admin={admin_bound}",
        server.local_addr()
    );
    let _ = out.flush();
    drop(out);

    let app = admin::router(state);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut admin_task = match admin_tls {
        Some(tls) => tokio::spawn(admin::serve::serve_tls(
            admin_listener,
            app,
            admin_config,
            stop_rx,
            tls,
        )),
        None => tokio::spawn(admin::serve::serve(
            admin_listener,
            app,
            admin_config,
            stop_rx,
        )),
    };
    let early = tokio::select! {
        () = shutdown_signal() => None,
        ended = &mut admin_task => Some(ended),
    };
    tracing::info!("stopping");
    // Shutting the control plane down first ends the event streams, so the admin
    // server's graceful shutdown does not wait on them.
    let cp = server.handle();
    cp.shutdown().await;
    let result = match early {
        Some(ended) => ended,
        None => {
            let _ = stop_tx.send(true);
            match tokio::time::timeout(ADMIN_GRACE, &mut admin_task).await {
                Ok(ended) => ended,
                Err(_) => {
                    tracing::warn!("admin connections still open after the grace period: dropped");
                    admin_task.abort();
                    Ok(())
                }
            }
        }
    };
    server.shutdown().await;
    // After the sessions' closes, so that their records are released.
    if let Some(replica) = replica {
        replica.shutdown().await;
    }
    result.map_err(|e| Failure::Runtime(format!("admin API task: {e}")))
}

fn hash_credential() -> Result<(), Failure> {
    // The credential in clear: zeroed when dropped.
    let mut raw = zeroize::Zeroizing::new(Vec::new());
    std::io::stdin()
        .read_to_end(&mut raw)
        .map_err(|e| Failure::Runtime(format!("reading stdin: {e}")))?;
    let credential = credential_bytes(&raw);
    if credential.is_empty() {
        return Err(Failure::Usage("empty credential on stdin".into()));
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", credential_hash_hex(credential));
    Ok(())
}

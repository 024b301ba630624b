//! `iop-control-plane`: an IOP Control Plane with an HTTP admin API.
#![forbid(unsafe_code)]

use std::future::IntoFuture as _;
use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use iop_tokio::cli::admin::{self, AdminState};
use iop_tokio::cli::exit::{Failure, finish, shutdown_signal};
use iop_tokio::cli::{EnrolFile, credential_bytes, credential_hash_hex, logging};
use iop_tokio::{
    ControlPlaneHandle, ControlPlaneServer, DuplicatePolicy, EnrolmentPolicy, ServerConfig,
    ServerTls,
};

/// How long open admin connections may take to finish once stopping.
const ADMIN_GRACE: Duration = Duration::from_secs(3);

/// An IOP Control Plane: accepts Edge connections (TCP, length-prefixed protobuf
/// frames) and serves an HTTP admin API (`/v1/edges`, `/v1/commands`, `/v1/events`,
/// `/metrics`, `/healthz`).
///
/// On start it prints one line to stdout, `iop-control-plane listening edges=ADDR
/// admin=ADDR`, with the bound addresses (useful with port 0). Stops gracefully on
/// Ctrl-C or SIGTERM. On SIGHUP it re-reads the --enroll file without dropping
/// connected Edges: an Edge whose entry was removed or whose credential changed is
/// disconnected with GoAway{CREDENTIAL_REVOKED}; a file that does not load is logged
/// and the previous allow list stays in force. Exit codes: 0 stopped cleanly, 1
/// runtime error, 2 usage error (bad flag, unusable enrolment or TLS file).
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

    /// How long a status request may stay unanswered, in ms.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    status_timeout_ms: u64,

    /// Connections held at once (pending hellos included); past it a new connection
    /// gets `GoAway{OVERLOADED}` with a retry-after of 10 s and is closed.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    max_connections: usize,

    /// Log filter: a level (error, warn, info, debug, trace) or `RUST_LOG`-style
    /// directives. Default: `RUST_LOG`, else `info`. Logs go to stderr.
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,

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
            let written = iop_tokio::cli::test_certs::write_test_certs(dir, edge_ids)
                .map_err(Failure::Runtime)?;
            let mut out = std::io::stdout().lock();
            for path in written {
                let _ = writeln!(out, "{}", path.display());
            }
            return Ok(());
        }
        None => {}
    }
    logging::init(args.log_level.as_deref(), "info").map_err(Failure::Usage)?;
    let (Some(listen), Some(admin_addr)) = (args.listen, args.admin) else {
        return Err(Failure::Usage("--listen and --admin are required".into()));
    };
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
    let mut config = ServerConfig::new(enrolment);
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let tls = ServerTls::from_pem_files(cert, key, args.tls_client_ca.as_deref())
            .map_err(|e| Failure::Usage(format!("TLS: {e}")))?;
        tracing::info!(
            cert = %cert.display(),
            mutual = tls.requires_client_certificates(),
            require_client_identity = args.require_client_identity,
            "TLS on"
        );
        config.tls = Some(tls);
        config.cp.require_peer_identity = args.require_client_identity;
    }
    config.cp.duplicate_policy = match args.duplicate_policy {
        DuplicateArg::Replace => DuplicatePolicy::Replace,
        DuplicateArg::Reject => DuplicatePolicy::Reject,
    };
    config.cp.heartbeat_interval =
        Duration::from_millis(args.heartbeat_interval_ms.clamp(1_000, 60_000));
    config.cp.hello_timeout = Duration::from_millis(args.hello_timeout_ms);
    config.cp.status_timeout = Duration::from_millis(args.status_timeout_ms);
    config.cp.max_connections = args.max_connections;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(serve(listen, admin_addr, config, args.enroll))
}

async fn serve(
    listen: SocketAddr,
    admin_addr: SocketAddr,
    config: ServerConfig,
    enroll: Option<PathBuf>,
) -> Result<(), Failure> {
    let server = ControlPlaneServer::bind(listen, config)
        .await
        .map_err(|e| Failure::Runtime(format!("edge listener {listen}: {e}")))?;
    reload_on_sighup(server.handle(), enroll)?;
    let admin_listener = tokio::net::TcpListener::bind(admin_addr)
        .await
        .map_err(|e| Failure::Runtime(format!("admin listener {admin_addr}: cannot bind: {e}")))?;
    let admin_bound = admin_listener
        .local_addr()
        .map_err(|e| Failure::Runtime(format!("admin listener: {e}")))?;
    let state = AdminState::new(server.handle());
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
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let mut admin_task = tokio::spawn(
        axum::serve(admin_listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.wait_for(|stop| *stop).await;
            })
            .into_future(),
    );
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
                    Ok(Ok(()))
                }
            }
        }
    };
    server.shutdown().await;
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Failure::Runtime(format!("admin API: {e}"))),
        Err(e) => Err(Failure::Runtime(format!("admin API task: {e}"))),
    }
}

/// Re-reads the enrolment file on every SIGHUP (Unix), for the life of the process.
#[cfg(unix)]
fn reload_on_sighup(cp: ControlPlaneHandle, enroll: Option<PathBuf>) -> Result<(), Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    // Installed before the "listening" line, so a SIGHUP sent after it is never fatal.
    let mut hangups = signal(SignalKind::hangup())
        .map_err(|e| Failure::Runtime(format!("cannot watch SIGHUP: {e}")))?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(path) = &enroll else {
                tracing::warn!("SIGHUP: no --enroll file to reload");
                continue;
            };
            match EnrolFile::load(path) {
                Ok(file) => {
                    cp.set_enrolment_policy(EnrolmentPolicy::AllowList(file.allow_list));
                    tracing::info!(
                        edges = file.edge_ids.len(),
                        file = %path.display(),
                        "enrolment file reloaded"
                    );
                }
                Err(e) => tracing::error!(
                    error = %e,
                    "enrolment file reload failed; the previous allow list stays in force"
                ),
            }
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn reload_on_sighup(_cp: ControlPlaneHandle, _enroll: Option<PathBuf>) -> Result<(), Failure> {
    Ok(())
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

//! `iopctl`: the command-line client of the Control Plane's admin API.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use iop_server::ctl::{
    self, Admin, AdminUrl, CtlError, EventsArgs, Output, PlaceArgs, SendArgs, TopArgs,
};
use iop_server::private_file::read_private;
use iop_tokio::ClientTls;
use zeroize::Zeroizing;

/// Drives an IOP Control Plane from the shell through its admin API: lists Edges,
/// reads their status, sends commands (and waits for them), cancels them, follows the
/// event stream. Tables for people; `-o json` prints the API's JSON for scripts.
///
/// Exit codes: 0 done; 1 the command failed (rejected, or ended other than
/// SUCCEEDED), or `place` found no provider; 2 usage; 3 the Edge or command is unknown, or the Edge not connected;
/// 4 refused by the admin API (token, conflict, a finished command, a limit); 5 the
/// admin API unreachable, failing or too slow.
#[derive(Debug, Parser)]
#[command(name = "iopctl", version)]
struct Args {
    /// The admin API: http://HOST:PORT, or https://HOST:PORT with --ca-file.
    #[arg(
        long,
        global = true,
        env = "IOP_ADMIN_URL",
        default_value = "http://127.0.0.1:7701",
        value_name = "URL"
    )]
    admin: AdminUrl,

    /// File holding the admin token (one line; readable by its owner only). Else the
    /// IOP_ADMIN_TOKEN environment variable, else no token.
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,

    /// PEM file with the CA(s) the admin API's certificate must chain to (https://).
    #[arg(long, global = true, value_name = "FILE")]
    ca_file: Option<PathBuf>,

    /// Output: `table` for people, `json` for scripts.
    #[arg(short, long, global = true, value_enum, default_value_t = Format::Table)]
    output: Format,

    /// How long one call to the admin API may take, in milliseconds.
    #[arg(long, global = true, default_value_t = 30_000, value_name = "MS")]
    request_timeout_ms: u64,

    #[command(subcommand)]
    command: Subcommands,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
enum Subcommands {
    /// Every Edge the Control Plane knows (every replica's in a cluster).
    Edges {
        /// Keep watching: print the list again on every Edge's change.
        #[arg(short, long)]
        watch: bool,
        /// Only Edges in these states (connected, unreachable, disconnected).
        #[arg(
            long,
            value_name = "STATE",
            value_delimiter = ',',
            value_parser = ["connected", "unreachable", "disconnected"]
        )]
        state: Vec<String>,
        /// Only Edges whose id, version, metadata or replica holds this text.
        #[arg(short = 'q', long, value_name = "TEXT")]
        query: Option<String>,
        /// At most this many Edges (a page; the admin API allows 1 to 1000).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Edges after this id (the `more:` line of the page before).
        #[arg(long, value_name = "EDGE")]
        after: Option<String>,
    },
    /// One Edge's view: state, session, version, operations, metadata.
    Edge {
        /// The Edge's id.
        edge_id: String,
    },
    /// A live status round trip: the Edge's nodes and providers.
    Status {
        /// The Edge's id.
        edge_id: String,
        /// Some nodes only (repeat, or separate with commas).
        #[arg(long = "node", value_name = "NODE", value_delimiter = ',')]
        nodes: Vec<String>,
    },
    /// Sends a command and prints the Edge's answer (with --wait, every phase).
    Send {
        /// The Edge's id.
        edge_id: String,
        /// An operation the Edge advertises (e.g. node.drain).
        operation: String,
        /// Target selector: `*`, `node:ID`, `provider:NODE/PROVIDER`, `label:K=V`.
        #[arg(long, value_name = "SELECTOR")]
        selector: Option<String>,
        /// Metadata for the handler, KEY=VALUE (repeatable).
        #[arg(long = "meta", value_name = "KEY=VALUE", value_parser = key_value)]
        metadata: Vec<(String, String)>,
        /// The command's timeout on the Edge, in milliseconds (0: the Edge's default).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u32>,
        /// The command's id, an idempotency key: sending again under it is the same
        /// command, never a second run.
        #[arg(long, value_name = "KEY")]
        id: Option<String>,
        /// Follow the command to its end; the exit code says how it ended.
        #[arg(short, long)]
        wait: bool,
    },
    /// Asks the Edge to stop a running command (`command.cancel`).
    Cancel {
        /// The command's id.
        command_id: String,
        /// Follow the cancellation to its end and print how the command ended.
        #[arg(short, long)]
        wait: bool,
    },
    /// A command's record: the Edge's answer, every phase, the outcome.
    Command {
        /// The command's id.
        command_id: String,
    },
    /// Fleet-wide jobs: one command on many Edges, with a progress bar.
    #[command(subcommand)]
    Job(JobCommand),
    /// The Control Plane's event stream (Edges, nodes, commands).
    Events {
        /// Keep reading until interrupted (else stop once the stream is quiet for 1 s).
        #[arg(short, long)]
        follow: bool,
        /// With --cluster: resume after the event with this id.
        #[arg(long, value_name = "ID")]
        since: Option<String>,
        /// Some kinds only, comma-separated (e.g. node_event,command_event).
        #[arg(long, value_name = "KINDS")]
        kinds: Option<String>,
    },
    /// The providers that can take one more request of MODEL now, best first (exit 1
    /// when none can), and why the others cannot.
    Place {
        /// The model.
        model: String,
        /// A long-context request.
        #[arg(long)]
        long_context: bool,
        /// Candidates at most (default 10).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Node labels the provider's node must carry, KEY=VALUE (repeat, or commas).
        #[arg(long = "label", value_name = "KEY=VALUE", value_delimiter = ',')]
        labels: Vec<String>,
        /// List providers whose numbers are stale too (marked).
        #[arg(long)]
        include_stale: bool,
        /// Count the first candidate as one more request in flight until its Edge
        /// next reports it (a router's reservation).
        #[arg(long)]
        reserve: bool,
        /// Reserve a candidate drawn at random by free slots instead of the best (for
        /// routers placing through several replicas at once).
        #[arg(long, requires = "reserve")]
        spread: bool,
    },
    /// A live view of the fleet's load by model and by Edge (busiest first),
    /// following the load watch.
    Top {
        /// Only providers of this model.
        #[arg(long, value_name = "MODEL")]
        model: Option<String>,
        /// Redraw at most once per this many milliseconds.
        #[arg(long, default_value_t = 1_000, value_name = "MS")]
        interval_ms: u64,
        /// Edges listed at most.
        #[arg(long, default_value_t = 20, value_name = "N")]
        edges: usize,
        /// Stop after this many redraws (for scripts; default: until interrupted).
        #[arg(long, value_name = "N")]
        frames: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
enum JobCommand {
    /// Starts a job (with --wait, a progress bar until it ends; exit 1 if an Edge
    /// failed or was skipped).
    Run {
        /// An operation the Edges advertise (e.g. node.drain).
        operation: String,
        /// Which Edges: `*`, comma-separated ids, `meta:KEY=VALUE`, `version:V`.
        #[arg(long, value_name = "EDGES")]
        edges: String,
        /// Target selector on each Edge: `*`, `node:ID`, `label:K=V`, ...
        #[arg(long, value_name = "SELECTOR")]
        selector: Option<String>,
        /// Metadata for the handler, KEY=VALUE (repeatable).
        #[arg(long = "meta", value_name = "KEY=VALUE", value_parser = key_value)]
        metadata: Vec<(String, String)>,
        /// Each command's timeout on its Edge, in milliseconds.
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u32>,
        /// Edges at once (default 10).
        #[arg(long, value_name = "N")]
        max_concurrent: Option<u64>,
        /// Failed Edges tolerated before no more start (default 0).
        #[arg(long, value_name = "N")]
        max_failures: Option<u64>,
        /// Wait this long for offline Edges to connect (else they are skipped).
        #[arg(long, value_name = "MS")]
        offline_wait_ms: Option<u64>,
        /// The job's id, an idempotency key.
        #[arg(long, value_name = "KEY")]
        id: Option<String>,
        /// Follow the job to its end with a progress bar.
        #[arg(short, long)]
        wait: bool,
    },
    /// A job's progress and per-Edge outcomes.
    Get {
        /// The job's id.
        job_id: String,
        /// Edges after this one (the `more:` line of the last page).
        #[arg(long, value_name = "EDGE")]
        after: Option<String>,
        /// Edges per page.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Cancels a job: no more Edges start, the running commands are cancelled.
    Cancel {
        /// The job's id.
        job_id: String,
    },
}

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let code = match run(args) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "iopctl: {e}");
            e.code()
        }
    };
    ExitCode::from(code)
}

fn token(args: &Args) -> Result<Option<Zeroizing<String>>, CtlError> {
    if let Some(path) = &args.token_file {
        let bytes = read_private(path).map_err(|e| CtlError::Usage(e.to_string()))?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| CtlError::Usage(format!("{}: not UTF-8", path.display())))?;
        let token = text.lines().next().unwrap_or("").trim();
        if token.is_empty() {
            return Err(CtlError::Usage(format!("{}: no token", path.display())));
        }
        return Ok(Some(Zeroizing::new(token.to_owned())));
    }
    Ok(std::env::var("IOP_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .map(|t| Zeroizing::new(t.trim().to_owned())))
}

fn run(args: Args) -> Result<u8, CtlError> {
    let tls = match &args.ca_file {
        Some(ca) => Some(
            ClientTls::from_pem_files(ca, &args.admin.host, None)
                .map_err(|e| CtlError::Usage(format!("--ca-file: {e}")))?,
        ),
        None => None,
    };
    let admin = Admin::new(
        args.admin.clone(),
        token(&args)?,
        tls,
        Duration::from_millis(args.request_timeout_ms.max(1)),
    )?;
    let out = match args.output {
        Format::Table => Output::Table,
        Format::Json => Output::Json,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CtlError::Usage(format!("cannot start: {e}")))?;
    runtime.block_on(async {
        match args.command {
            Subcommands::Edges {
                watch,
                state,
                query,
                limit,
                after,
            } => {
                let filter = ctl::EdgeFilter {
                    states: state,
                    query,
                    limit,
                    after,
                };
                ctl::run_edges(&admin, out, watch, &filter).await
            }
            Subcommands::Edge { edge_id } => ctl::run_edge(&admin, out, &edge_id).await,
            Subcommands::Status { edge_id, nodes } => {
                ctl::run_status(&admin, out, &edge_id, &nodes).await
            }
            Subcommands::Send {
                edge_id,
                operation,
                selector,
                metadata,
                timeout_ms,
                id,
                wait,
            } => {
                let send = SendArgs {
                    edge_id,
                    operation,
                    selector,
                    metadata: metadata.into_iter().collect::<BTreeMap<_, _>>(),
                    timeout_ms,
                    id,
                    wait,
                };
                ctl::run_send(&admin, out, &send).await
            }
            Subcommands::Cancel { command_id, wait } => {
                ctl::run_cancel(&admin, out, &command_id, wait).await
            }
            Subcommands::Command { command_id } => ctl::run_command(&admin, out, &command_id).await,
            Subcommands::Job(JobCommand::Run {
                operation,
                edges,
                selector,
                metadata,
                timeout_ms,
                max_concurrent,
                max_failures,
                offline_wait_ms,
                id,
                wait,
            }) => {
                let job = ctl::JobArgs {
                    command: SendArgs {
                        operation,
                        selector,
                        metadata: metadata.into_iter().collect(),
                        timeout_ms,
                        id,
                        wait,
                        ..SendArgs::default()
                    },
                    edges,
                    max_concurrent,
                    max_failures,
                    offline_wait_ms,
                };
                ctl::run_job(&admin, out, &job).await
            }
            Subcommands::Job(JobCommand::Get {
                job_id,
                after,
                limit,
            }) => ctl::run_job_get(&admin, out, &job_id, after.as_deref(), limit).await,
            Subcommands::Job(JobCommand::Cancel { job_id }) => {
                ctl::run_job_cancel(&admin, out, &job_id).await
            }
            Subcommands::Events {
                follow,
                since,
                kinds,
            } => {
                let events = EventsArgs {
                    follow,
                    since,
                    kinds,
                    quiet: Duration::from_secs(1),
                };
                ctl::run_events(&admin, out, &events).await
            }
            Subcommands::Place {
                model,
                long_context,
                limit,
                labels,
                include_stale,
                reserve,
                spread,
            } => {
                let place = PlaceArgs {
                    model,
                    long_context,
                    limit,
                    labels,
                    include_stale,
                    reserve,
                    spread,
                };
                ctl::run_place(&admin, out, &place).await
            }
            Subcommands::Top {
                model,
                interval_ms,
                edges,
                frames,
            } => {
                let top = TopArgs {
                    model,
                    every: Duration::from_millis(interval_ms.max(50)),
                    frames,
                    edges,
                };
                ctl::run_top(&admin, out, &top).await
            }
        }
    })
}

//! `iop-conformance`: tests an IOP Edge or Control Plane over TCP against PROTOCOL.md.
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use iop_conformance::{Case, CaseResult, Report, control_plane, edge};

/// Tests an implementation of the IOP Control Plane ⇄ Edge protocol over TCP.
///
/// Each case names its rule (a check of PROTOCOL.md §11, or a flow of §4) and prints
/// PASS, FAIL with what it saw, or SKIP; the run ends with a summary. Exit codes: 0
/// every case passed or was skipped, 1 a case failed, 2 usage or I/O error.
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Plays a Control Plane: listens, and tests the Edge that dials it (start the
    /// Edge pointed at this address; it is dialled many times, as sessions end).
    Edge(EdgeArgs),
    /// Plays Edges against the Control Plane at --target.
    ControlPlane(CpArgs),
}

#[derive(Args)]
struct Common {
    /// Run only the cases whose id starts with one of these (repeat or comma-separate).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// List the cases (id, section, what they check) and exit.
    #[arg(long)]
    list: bool,
    /// Write the report as JSON to this file (`-`: standard output, after the run).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct EdgeArgs {
    /// Address to listen on for the Edge, HOST:PORT.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7700")]
    connect_to_me: SocketAddr,
    /// The id the Edge must say in its hello.
    #[arg(long)]
    edge_id: Option<String>,
    /// An edge-level operation the Edge advertises that succeeds on its own.
    #[arg(long, default_value = "edge.ping")]
    operation: String,
    /// A value that must never leave the Edge (a node address or token of its
    /// configuration); repeat for several.
    #[arg(long)]
    secret: Vec<String>,
    /// Seconds to wait for each dial of the Edge (its backoff may reach 30 s).
    #[arg(long, default_value_t = 45)]
    dial_timeout_s: u64,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct CpArgs {
    /// The Control Plane's address, HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    target: SocketAddr,
    /// Prefix of the Edge ids the tester says hello with (the Control Plane must
    /// accept them: an enrolment policy that accepts any valid id).
    #[arg(long, default_value = "conformance")]
    edge_id_prefix: String,
    /// An iop admin API (HOST:PORT, plain HTTP, no token) through which the tester has
    /// the Control Plane send commands, for the command cases (skipped without it).
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
    #[command(flatten)]
    common: Common,
}

fn list(cases: &[Case]) {
    for c in cases {
        println!("{:<40} §{:<5} {}", c.id, c.section, c.title);
    }
}

fn print(result: &CaseResult) {
    println!("{result}");
}

fn finish(report: &Report, common: &Common, mode: &str, target: &str) -> ExitCode {
    println!("{}", report.summary());
    if let Some(path) = &common.json {
        let json = report.to_json(mode, target).to_string();
        if path.as_os_str() == "-" {
            println!("{json}");
        } else if let Err(e) = std::fs::write(path, json) {
            eprintln!("iop-conformance: writing {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.mode {
        Mode::Edge(args) => {
            if args.common.list {
                list(edge::CASES);
                return ExitCode::SUCCESS;
            }
            let mut opts = edge::EdgeOptions::new(args.connect_to_me);
            opts.edge_id = args.edge_id;
            opts.operation = args.operation;
            opts.secrets = args.secret;
            opts.only = args.common.only.clone();
            opts.dial_timeout = Duration::from_secs(args.dial_timeout_s);
            println!(
                "listening on {} for the Edge under test",
                args.connect_to_me
            );
            match edge::run(opts, print) {
                Ok(report) => finish(
                    &report,
                    &args.common,
                    "edge",
                    &args.connect_to_me.to_string(),
                ),
                Err(e) => {
                    eprintln!("iop-conformance: listening on {}: {e}", args.connect_to_me);
                    ExitCode::from(2)
                }
            }
        }
        Mode::ControlPlane(args) => {
            if args.common.list {
                list(control_plane::CASES);
                return ExitCode::SUCCESS;
            }
            let mut opts = control_plane::CpOptions::new(args.target);
            opts.edge_id_prefix = args.edge_id_prefix;
            opts.admin = args.admin;
            opts.only = args.common.only.clone();
            let report = control_plane::run(opts, print);
            finish(
                &report,
                &args.common,
                "control-plane",
                &args.target.to_string(),
            )
        }
    }
}

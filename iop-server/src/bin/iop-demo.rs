//! `iop-demo`: a Control Plane and three Edges with simulated nodes in one process,
//! walked through enrolment, status, commands, a node disconnect and its reconnect.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use iop_server::exit::{Failure, finish};
use iop_server::{demo, logging};

/// Runs a Control Plane and three Edges with simulated nodes on 127.0.0.1 (ports
/// chosen by the system), walks through enrolment (including rejected hellos), status,
/// commands with their phases, a node disconnect and its reconnect, and prints what
/// happened as tables. Exits 0 when every step behaved as the protocol says, 1
/// otherwise.
#[derive(Debug, Parser)]
#[command(name = "iop-demo", version)]
struct Args {
    /// Seed of the simulated nodes.
    #[arg(long, value_name = "N", default_value_t = 7)]
    seed: u64,

    /// Three Control Plane replicas over a nats-server (2.10+, on the PATH or
    /// IOP_NATS_SERVER) instead: who holds each Edge, a command routed across
    /// replicas, a replica failing and its Edge moving.
    #[arg(long)]
    cluster: bool,

    /// Log filter for the libraries' logs on stderr (default: `RUST_LOG`, else `warn`,
    /// to keep the tables readable).
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    finish("iop-demo", run(args))
}

fn run(args: Args) -> Result<(), Failure> {
    logging::init(args.log_level.as_deref(), "warn").map_err(Failure::Usage)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the runtime: {e}")))?;
    let mut out = std::io::stdout().lock();
    if args.cluster {
        return runtime.block_on(demo::cluster::run(&mut out));
    }
    runtime.block_on(demo::run(&mut out, args.seed))
}

//! How much of a status round trip is the Edge's: our Control Plane
//! (`ControlPlaneHandle::request_status`, 0 nodes) against our `EdgeClient`, and
//! against a minimal hand-written Edge on a plain tokio `TcpStream` (`TCP_NODELAY`):
//! it sends a hello, then answers each status request with an empty status, decoded
//! with `FrameDecoder` and encoded with `encode_frame`, one read and one write per
//! request. Same process layout as `roundtrip` (Control Plane on this thread, both
//! Edges on a second current-thread runtime); each round times a batch of 200 round
//! trips to each Edge in alternating order; the table shows the medians.
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin edge_floor [-- ROUNDS]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iop_bench_socket::floor::answer_status;
use iop_bench_socket::stats::{median, ratio_cell};
use iop_tokio::core::edge::EdgeConfig;
use iop_tokio::core::proto::{self, EdgeHelloRequest, Envelope};
use iop_tokio::{ControlPlaneHandle, ControlPlaneServer, EdgeClient, ServerConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const BATCH: usize = 200;
const OURS: &str = "edge-ours";
const MINIMAL: &str = "edge-minimal";

fn main() -> Result<(), BoxError> {
    let spinners = iop_bench_socket::Spinners::start_or_spin();
    let rounds: usize = iop_bench_socket::arg(1, 31);
    let rts = iop_bench_socket::TwoRuntimes::start()?;
    let result = rts.cp().block_on(measure(rounds, rts.edge()));
    drop(rts);
    drop(spinners);
    println!("{}", result?);
    Ok(())
}

async fn measure(rounds: usize, edge: &tokio::runtime::Handle) -> Result<String, BoxError> {
    let server = ControlPlaneServer::bind(
        "127.0.0.1:0".parse()?,
        ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny),
    )
    .await?;
    let cp = server.handle();
    let addr = server.local_addr();
    let client = {
        let _in_edge_runtime = edge.enter();
        EdgeClient::new(EdgeConfig::new(OURS, iop_tokio::process_seed())).connect(addr)?
    };
    edge.spawn(async move {
        if let Err(e) = minimal_edge(addr).await {
            eprintln!("minimal edge failed: {e}");
        }
    });
    let start = Instant::now();
    while cp.stats().live_sessions < 2 {
        if start.elapsed() > Duration::from_secs(10) {
            return Err("the edges never enrolled".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for _ in 0..BATCH {
        rt(&cp, OURS).await?;
        rt(&cp, MINIMAL).await?;
    }
    let (mut ours, mut minimal, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut per = [0.0; 2];
        for k in 0..2 {
            let which = (round + k) % 2;
            let id = [OURS, MINIMAL][which];
            let t = Instant::now();
            for _ in 0..BATCH {
                rt(&cp, id).await?;
            }
            per[which] = t.elapsed().as_nanos() as f64 / BATCH as f64;
        }
        ours.push(per[0]);
        minimal.push(per[1]);
        ratios.push(per[0] / per[1]);
    }
    {
        let _in_edge_runtime = edge.enter();
        client.shutdown().await;
    }
    server.shutdown().await;
    Ok(format!(
        "### Status round trip, 0 nodes, our Control Plane ({rounds} rounds, medians)\n\n\
         | against | per round trip |\n|---|---:|\n\
         | our `EdgeClient` | {:.2} µs |\n| a minimal hand-written Edge | {:.2} µs |\n\
         | ratio ours / minimal | {} |\n",
        median(&mut ours) / 1e3,
        median(&mut minimal) / 1e3,
        ratio_cell(&mut ratios),
    ))
}

async fn rt(cp: &ControlPlaneHandle, edge_id: &str) -> Result<(), BoxError> {
    std::hint::black_box(cp.request_status(edge_id, vec![]).await?);
    Ok(())
}

/// Hello, then an empty status for every status request; nothing else.
async fn minimal_edge(addr: SocketAddr) -> Result<(), BoxError> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let hello = EdgeHelloRequest {
        edge_id: MINIMAL.into(),
        protocol_version: proto::PROTOCOL_VERSION,
        ..Default::default()
    };
    let mut out = Vec::new();
    proto::encode_frame(&Envelope::new(hello), u32::MAX, &mut out)?;
    stream.write_all(&out).await?;
    answer_status(&mut stream, MINIMAL).await
}

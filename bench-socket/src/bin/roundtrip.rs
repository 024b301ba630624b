//! Status round trip on 127.0.0.1, one Edge, sequential: ours (`ControlPlaneHandle::
//! request_status` against an `EdgeClient`) vs a raw tokio TCP echo of the same byte
//! counts (the floor) vs the same exchange on a tonic gRPC bidirectional stream.
//!
//! The Control Plane side of all three runs on one current-thread runtime (this
//! thread), the Edge side on another (a second thread), as two processes would. Each
//! round times a batch of sequential round trips of each system, in a rotating order;
//! the ratios are per round, the table shows their medians.
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin roundtrip [-- ROUNDS [NAME]]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;

use iop_bench::fixtures;
use iop_bench_socket::grpc::{CpStream, EdgeLinkServer, EdgeStream};
use iop_bench_socket::ours::Ours;
use iop_bench_socket::stats::{median, ratio_cell, ratios};
use iop_bench_socket::{Row, Spinners, Table, TwoRuntimes, arg, echo};
use iop_tokio::core::proto::EdgeStatusRequest;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

struct Scenario {
    name: &'static str,
    nodes: usize,
    providers: usize,
    /// Round trips per system per round.
    batch: usize,
    goal_tonic: f64,
}

static SCENARIOS: [Scenario; 3] = [
    Scenario {
        name: "status, 0 nodes",
        nodes: 0,
        providers: 4,
        batch: 200,
        goal_tonic: 0.75,
    },
    Scenario {
        name: "status, 8 nodes × 4 providers",
        nodes: 8,
        providers: 4,
        batch: 200,
        goal_tonic: 0.75,
    },
    Scenario {
        name: "status, 1 000 nodes × 4 providers",
        nodes: 1_000,
        providers: 4,
        batch: 4,
        goal_tonic: 0.75,
    },
];

fn main() -> Result<(), BoxError> {
    let spinners = Spinners::start_or_spin();
    let rounds: usize = arg(1, 31);
    let rts = TwoRuntimes::start()?;

    let mut table = Table::new(
        format!("Status round trip on 127.0.0.1, one Edge, sequential ({rounds} rounds, medians)"),
        "ours",
        "baseline",
    );
    // A second argument keeps only the scenarios whose name contains it.
    let only = std::env::args().nth(2).unwrap_or_default();
    for (i, scenario) in SCENARIOS.iter().enumerate() {
        if !scenario.name.contains(only.as_str()) {
            continue;
        }
        // The Control Plane side of every system runs in a spawned task, as a server's
        // request handler would, not as the `block_on` future: tokio's current-thread
        // scheduler polls its I/O driver before it re-polls a `block_on` future that
        // another task woke, an extra `epoll_wait` per round trip that a system whose
        // answer arrives through its connection task (ours, tonic) would pay and the
        // echo never.
        let task = measure(scenario, rounds, rts.edge().clone(), i as u16);
        let rows = rts.cp().block_on(async { tokio::spawn(task).await })??;
        for row in rows {
            table.push(row);
        }
    }
    drop(spinners);
    println!("{table}");
    Ok(())
}

async fn measure(
    s: &'static Scenario,
    rounds: usize,
    edge_rt: tokio::runtime::Handle,
    index: u16,
) -> Result<Vec<Row>, BoxError> {
    let localhost: SocketAddr = "127.0.0.1:0".parse()?;
    let registry = fixtures::registry(s.nodes, s.providers);
    // The byte counts the echo moves: our request and response frames.
    let (request_frame, response_frame) = echo::frames(&registry)?;
    let response = fixtures::status_response(&registry);

    // Ours.
    let edge_id = format!("edge-rt-{index}");
    let ours = Ours::start(&edge_rt, &edge_id, registry).await?;
    let cp = ours.cp();

    // Raw echo: the Edge side reads the request bytes and writes the response bytes.
    let mut echo = echo::connect(&edge_rt, request_frame.len(), response_frame.clone()).await?;
    let mut echo_buf = vec![0u8; response_frame.len()];

    // tonic.
    let (grpc_server, mut streams) = EdgeLinkServer::new();
    let grpc_addr = grpc_server.serve(localhost)?;
    let answer = response.clone();
    edge_rt.spawn(async move {
        match EdgeStream::connect(grpc_addr).await {
            Ok(stream) => stream.answer(answer).await,
            Err(e) => eprintln!("tonic edge failed: {e}"),
        }
    });
    let mut grpc: CpStream = futures_lite::StreamExt::next(&mut streams)
        .await
        .ok_or("no tonic stream")?;
    let grpc_request = EdgeStatusRequest::default();

    // Sanity, and warm-up.
    let ours_answer = cp.request_status(&edge_id, vec![]).await?;
    assert_eq!(ours_answer.nodes.len(), s.nodes);
    let tonic_answer = grpc.request_status(&grpc_request).await?;
    assert_eq!(tonic_answer.nodes.len(), s.nodes);
    for _ in 0..s.batch.max(10) {
        cp.request_status(&edge_id, vec![]).await?;
        echo::round_trip(&mut echo, &request_frame, &mut echo_buf).await?;
        grpc.request_status(&grpc_request).await?;
    }

    let [ours_ns, echo_ns, tonic_ns] = iop_bench_socket::rotating!(
        rounds,
        s.batch,
        [
            cp.request_status(&edge_id, vec![]).await?,
            echo::round_trip(&mut echo, &request_frame, &mut echo_buf).await?,
            grpc.request_status(&grpc_request).await?,
        ]
    );
    ours.shutdown(&edge_rt).await?;

    let us = fmt_time(median(&mut ours_ns.clone()));
    let tonic_ratio = median(&mut ratios(&ours_ns, &tonic_ns));
    let rows = vec![
        Row::new(
            format!(
                "{}: vs raw TCP echo ({} B out, {} B back)",
                s.name,
                request_frame.len(),
                response_frame.len()
            ),
            us.clone(),
            format!("{} (echo)", fmt_time(median(&mut echo_ns.clone()))),
            ratio_cell(&mut ratios(&ours_ns, &echo_ns)),
            // The driver is judged against the cores floor (`floors`), the cores
            // against the echo; this ratio is for scale.
            "—",
            None,
        ),
        Row::new(
            format!("{}: vs tonic bidi stream", s.name),
            us,
            format!("{} (tonic)", fmt_time(median(&mut tonic_ns.clone()))),
            ratio_cell(&mut ratios(&ours_ns, &tonic_ns)),
            format!("≤ {:.2}", s.goal_tonic),
            Some(tonic_ratio <= s.goal_tonic),
        ),
    ];
    Ok(rows)
}

fn fmt_time(ns: f64) -> String {
    iop_bench::table::format_ns(ns)
}

//! The floor under the 0-node status round trip, against the raw TCP echo and
//! against ours, on the same harness as `roundtrip` (BENCHMARKS.md §6): what our two
//! Sans-IO cores cost with the least driving they allow.
//!
//! * **Cores floor**: our two Sans-IO cores (`ControlPlane`, `Edge`), each driven by
//!   a hand-written loop in one task (the Control Plane's in the caller's), with no
//!   driver: no connection task, handle, server lock, waiter table or timers.
//! * **Raw echo**: the same bytes, moved without encoding or decoding.
//! * **Ours**: `ControlPlaneHandle::request_status` against an `EdgeClient`.
//!
//! Same layout as `roundtrip` (the Control Plane sides in a spawned task on this
//! thread's current-thread runtime, the Edge sides on a second thread's, the
//! spinners running); each round times a batch of 200 round trips of each system in a
//! rotating order; the table shows the medians of the per-round ratios.
//!
//! ```text
//! cargo run --release --manifest-path bench-socket/Cargo.toml --bin floors [-- ROUNDS]
//! ```
#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use iop_bench::fixtures;
use iop_bench_socket::core_floor::CoreFloorCp;
use iop_bench_socket::ours::Ours;
use iop_bench_socket::stats::{median, ratio_cell, ratios};
use iop_bench_socket::{Spinners, TwoRuntimes, arg, echo};
use iop_tokio::core::registry::NodeRegistry;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const BATCH: usize = 200;
/// Both round-trip goals: the cores against the echo, the driver against the cores.
const GOAL: f64 = 1.10;
const EDGE_ID: &str = fixtures::EDGE_ID;

fn main() -> Result<(), BoxError> {
    let spinners = Spinners::start_or_spin();
    let rounds: usize = arg(1, 31);
    let rts = TwoRuntimes::start()?;
    let edge = rts.edge().clone();
    let result = rts
        .cp()
        .block_on(async { tokio::spawn(measure(rounds, edge)).await });
    drop(rts);
    drop(spinners);
    println!("{}", result??);
    Ok(())
}

async fn measure(rounds: usize, edge_rt: tokio::runtime::Handle) -> Result<String, BoxError> {
    let ours = Ours::start(&edge_rt, EDGE_ID, NodeRegistry::default()).await?;
    let cp = ours.cp();
    // The echo of the same bytes.
    let (request_frame, response_frame) = echo::frames(&fixtures::registry(0, 4))?;
    let mut echo = echo::connect(&edge_rt, request_frame.len(), response_frame.clone()).await?;
    let mut echo_buf = vec![0u8; response_frame.len()];
    let mut cores = CoreFloorCp::connect(&edge_rt, EDGE_ID).await?;

    let answer = cp.request_status(EDGE_ID, vec![]).await?;
    if answer.nodes.len() != cores.round_trip().await?.nodes.len() {
        return Err("the floor's answer differs from ours".into());
    }
    for _ in 0..BATCH {
        std::hint::black_box(cp.request_status(EDGE_ID, vec![]).await?);
        echo::round_trip(&mut echo, &request_frame, &mut echo_buf).await?;
        std::hint::black_box(cores.round_trip().await?);
    }

    // Per round, ns per round trip: ours, echo, cores floor.
    let per = iop_bench_socket::rotating!(
        rounds,
        BATCH,
        [
            cp.request_status(EDGE_ID, vec![]).await?,
            echo::round_trip(&mut echo, &request_frame, &mut echo_buf).await?,
            cores.round_trip().await?,
        ]
    );
    ours.shutdown(&edge_rt).await?;

    let [ours, echo, cores] = per;
    let us = |xs: &[f64]| median(&mut xs.to_vec()) / 1e3;
    // The settled round-trip goals: the cores within 1.10× the echo, and the driver
    // within 1.10× the cores driven by hand.
    let judged = |a: &[f64], b: &[f64]| {
        let mut r = ratios(a, b);
        let met = if median(&mut r.clone()) <= GOAL {
            "met"
        } else {
            "**not met**"
        };
        format!("{} | ≤ {GOAL:.2} | {met}", ratio_cell(&mut r))
    };
    Ok(format!(
        "### Status round trip, 0 nodes: the cores floor ({rounds} rounds, medians)\n\n\
         | what | per round trip | ratio | goal | met |\n|---|---:|---:|---|---|\n\
         | raw TCP echo ({} B out, {} B back) | {:.2} µs | — | — | — |\n\
         | cores floor: our two cores, hand-written loops, no driver, vs the echo | {:.2} µs | {} |\n\
         | ours: `request_status` against `EdgeClient`, vs the cores floor | {:.2} µs | {} |\n\
         | ours vs the echo | — | {} | — | — |\n",
        request_frame.len(),
        response_frame.len(),
        us(&echo),
        us(&cores),
        judged(&cores, &echo),
        us(&ours),
        judged(&ours, &cores),
        ratio_cell(&mut ratios(&ours, &echo)),
    ))
}

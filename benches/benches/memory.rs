//! Control Plane heap per idle enrolled edge, core only (no sockets), with a counting
//! global allocator.
//!
//! Run: `cargo bench -p iop-bench --bench memory`. Each edge connects, sends its
//! hello, answers the automatic status request, sends `EDGE_READY` and one
//! heartbeat; every output is pulled. The figure is the net heap the Control Plane
//! grew by (allocated − freed, reallocations included), divided by the edges: its
//! connection, session, Edge view, timers and indexes. The inputs and the transmit
//! buffer are made before the measured region.
#![allow(clippy::print_stdout)]

use std::alloc::System;

use iop_bench::session::enrolment_frames;
use iop_bench::table::{Row, Table, format_count};
use iop_core::cp::{ConnectionId, ControlPlane, CpConfig, EnrolmentPolicy};
use iop_core::{Instant, drain_transmits};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Goal: at most 4 KiB of Control Plane heap per idle enrolled edge.
const GOAL_BYTES: i64 = 4 * 1024;

/// Net heap bytes per edge and the Control Plane's own check that all are live.
fn idle_edges(n: usize) -> (i64, usize) {
    let inputs: Vec<Vec<u8>> = (0..n)
        .map(|i| enrolment_frames(&format!("edge-{i:05}"), i as u64).concat())
        .collect();
    let mut buf = Vec::with_capacity(64 * 1024);
    let now = Instant::from_millis(1_000);

    let region = Region::new(GLOBAL);
    let mut cp = match ControlPlane::new(CpConfig::default(), EnrolmentPolicy::AcceptAny) {
        Ok(cp) => cp,
        Err(e) => panic!("default config refused: {e}"),
    };
    for (i, wire) in inputs.iter().enumerate() {
        let conn = ConnectionId(i as u64);
        if cp.handle_connect(now, conn).is_err() {
            continue;
        }
        cp.handle_bytes(now, conn, wire);
        let _ = drain_transmits(&mut buf, usize::MAX, |b| cp.poll_transmit(conn, b));
        buf.clear();
        while cp.poll_event().is_some() {}
        while cp.poll_wakeup().is_some() {}
    }
    let change = region.change();
    let net = change.bytes_allocated as i64 - change.bytes_deallocated as i64
        + change.bytes_reallocated as i64;
    let live = cp.stats().live_sessions;
    let fresh = cp.edges().filter(|v| v.fresh).count();
    assert_eq!(
        (live, fresh),
        (n, n),
        "every edge is enrolled, idle and fresh"
    );
    (net / n as i64, live)
}

fn main() {
    let mut table = Table::new(
        "Control Plane heap per idle enrolled edge (core only, counting allocator)",
        "bytes per edge",
        "baseline",
    );
    for n in [1_000, 10_000] {
        let (per_edge, live) = idle_edges(n);
        table.push(Row::new(
            format!(
                "{} idle edges ({} live sessions)",
                format_count(n as u64),
                format_count(live as u64)
            ),
            format_count(per_edge.max(0) as u64),
            "—",
            format!("{:.2} of goal", per_edge as f64 / GOAL_BYTES as f64),
            "≤ 4 096 B per edge",
            Some(per_edge <= GOAL_BYTES),
        ));
    }
    println!("{table}");
    println!(
        "Net heap (allocated − freed) of the Control Plane from its creation, divided by the edges."
    );
}

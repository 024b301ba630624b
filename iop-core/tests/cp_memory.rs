//! An idle enrolled session must cost well under 4 KiB of heap, measured with a
//! counting global allocator.
//!
//! The counter is process-wide, so this file holds a single test.

use std::alloc::System;

use iop_core::Instant;
use iop_core::cp::{ConnectionId, ControlPlane, CpConfig, EnrolmentPolicy, Transmit};
use iop_core::proto::{
    self, EdgeHelloRequest, EdgeNodeEvent, EdgeStatusResponse, Envelope, Heartbeat, NodeEventKind,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Everything one Edge sends to become an idle, fresh, enrolled session.
fn session_bytes(i: usize) -> Vec<u8> {
    let edge_id = format!("edge-{i:05}");
    let mut hello = EdgeHelloRequest {
        edge_id: edge_id.clone(),
        protocol_version: proto::PROTOCOL_VERSION,
        software_version: "iop-edge/0.1.0".into(),
        operations: vec!["edge.ping".into(), "node.drain".into()],
        credential: b"secret".to_vec(),
        ..Default::default()
    };
    hello
        .metadata
        .insert("iop.instance_id".into(), format!("{i:016x}"));
    let frames = [
        Envelope::new(hello),
        Envelope::correlated(
            1,
            EdgeStatusResponse {
                edge_id: edge_id.clone(),
                registry_revision: 1,
                ..Default::default()
            },
        ),
        Envelope::new(EdgeNodeEvent {
            edge_id,
            kind: NodeEventKind::EdgeReady as i32,
            sequence: 1,
            ..Default::default()
        }),
        Envelope::new(Heartbeat {
            sequence: 1,
            sent_at_unix_ms: 0,
        }),
    ];
    let mut wire = Vec::new();
    for f in &frames {
        proto::encode_frame(f, u32::MAX, &mut wire).unwrap();
    }
    wire
}

#[test]
fn an_idle_enrolled_session_costs_well_under_4_kib() {
    const N: usize = 2_000;
    let inputs: Vec<Vec<u8>> = (0..N).map(session_bytes).collect();
    let mut cp = ControlPlane::new(CpConfig::default(), EnrolmentPolicy::AcceptAny).unwrap();
    let mut buf = Vec::with_capacity(64 * 1024);
    let now = Instant::from_millis(1);

    let region = Region::new(GLOBAL);
    for (i, wire) in inputs.iter().enumerate() {
        let conn = ConnectionId(i as u64);
        cp.handle_connect(now, conn).unwrap();
        cp.handle_bytes(now, conn, wire);
        while let Transmit::Bytes(_) = cp.poll_transmit(conn, &mut buf) {
            buf.clear();
        }
        while cp.poll_event().is_some() {}
        while cp.poll_wakeup().is_some() {}
    }
    let change = region.change();
    let net = change.bytes_allocated as isize - change.bytes_deallocated as isize
        + change.bytes_reallocated;
    let per_session = net / N as isize;

    assert_eq!(cp.stats().live_sessions, N);
    assert!(cp.edges().all(|v| v.fresh));
    println!("heap per idle enrolled session, edge view included: {per_session} bytes");
    // About 1.6 KiB: the connection, the session and the Edge's view, its load view
    // (with no nodes) among it.
    assert!(per_session < 1792, "{per_session} bytes per idle session");
}

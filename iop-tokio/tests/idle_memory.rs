//! Measures the heap an idle, enrolled connection holds on the Control Plane side:
//! the core's session and Edge view, the connection task with its driver, the tokio
//! registration. One test in its own binary: nothing else allocates while it measures.
//! Measured: about 2.2 KiB per connection (about 1.1 KiB of it the core).

use std::alloc::System;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use iop_tokio::core::proto::{self, EdgeHelloRequest, Envelope};
use iop_tokio::{ControlPlaneServer, ServerConfig};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CONNECTIONS: usize = 200;
/// Upper bound asserted per idle connection.
const BUDGET: usize = 3 * 1024;

#[tokio::test]
async fn an_idle_enrolled_connection_holds_a_few_kib() {
    let server = ControlPlaneServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny),
    )
    .await
    .unwrap();
    let cp = server.handle();
    // Hellos encoded up front; the peers are plain blocking sockets (no heap).
    let hellos: Vec<Vec<u8>> = (0..CONNECTIONS)
        .map(|i| {
            let hello = Envelope::new(EdgeHelloRequest {
                edge_id: format!("edge-{i:04}"),
                protocol_version: proto::PROTOCOL_VERSION,
                ..Default::default()
            });
            let mut wire = Vec::new();
            proto::encode_frame(&hello, proto::PRE_HELLO_MAX_FRAME_LEN, &mut wire).unwrap();
            wire
        })
        .collect();
    let mut peers = Vec::with_capacity(CONNECTIONS);
    // Warm up the runtime's lazily allocated structures with one connection first.
    let mut warm = TcpStream::connect(server.local_addr()).unwrap();
    warm.write_all(&hellos[0]).unwrap();
    wait_sessions(&cp, 1).await;

    let region = Region::new(GLOBAL);
    // In small batches: the runtime (this thread) must accept before the backlog fills.
    for (i, hello) in hellos.iter().enumerate().skip(1) {
        let mut peer = TcpStream::connect(server.local_addr()).unwrap();
        peer.write_all(hello).unwrap();
        peers.push(peer);
        if i % 16 == 0 {
            wait_sessions(&cp, i + 1).await;
        }
    }
    wait_sessions(&cp, CONNECTIONS).await;
    // Let every connection task settle (hello answered, status request written).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let change = region.change();
    let held = change.bytes_allocated as isize - change.bytes_deallocated as isize
        + change.bytes_reallocated;
    let per_connection = held.max(0) as usize / (CONNECTIONS - 1);
    assert!(
        per_connection <= BUDGET,
        "{per_connection} bytes per idle connection (budget {BUDGET})"
    );
    drop(peers);
    drop(warm);
    server.shutdown().await;
}

async fn wait_sessions(cp: &iop_tokio::ControlPlaneHandle, n: usize) {
    let start = Instant::now();
    while cp.stats().live_sessions < n {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "sessions did not come up"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

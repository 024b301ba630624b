//! Measures what TLS adds to the heap of an idle connection: N plain Edge ⇄ Control
//! Plane pairs, then N TLS pairs, all in this process (both ends counted), and the
//! difference per pair. One test in its own binary: nothing else allocates while it
//! measures. Measured: about 17.5 KiB more per TLS pair (both ends together: rustls
//! buffers after the handshake) than per plain pair (plain 7.0 KiB, TLS 24.5 KiB per
//! pair, the Edge side included).

use std::alloc::System;
use std::time::{Duration, Instant};

use iop_server::test_certs::TestPki;
use iop_tokio::core::edge::EdgeConfig;
use iop_tokio::{ClientTls, ControlPlaneServer, EdgeClient, EdgeHandle, ServerConfig, ServerTls};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const PAIRS: usize = 40;
/// Upper bound asserted for the TLS overhead of one idle pair (both ends).
const TLS_BUDGET: usize = 32 * 1024;

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

/// Bytes held after `PAIRS` Edges connected to `server` (with `tls`) and settled.
async fn held_by_pairs(
    server: &ControlPlaneServer,
    tls: Option<&ClientTls>,
    prefix: &str,
) -> (isize, Vec<EdgeHandle>) {
    let cp = server.handle();
    let base = cp.stats().live_sessions;
    let region = Region::new(GLOBAL);
    let mut edges = Vec::new();
    for i in 0..PAIRS {
        let mut client = EdgeClient::new(EdgeConfig::new(
            format!("{prefix}-{i:03}"),
            iop_tokio::process_seed(),
        ));
        if let Some(tls) = tls {
            client = client.with_tls(tls.clone());
        }
        edges.push(client.connect(server.local_addr()).unwrap());
    }
    wait_sessions(&cp, base + PAIRS).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let change = region.change();
    let held = change.bytes_allocated as isize - change.bytes_deallocated as isize
        + change.bytes_reallocated;
    (held, edges)
}

#[tokio::test(flavor = "current_thread")]
async fn tls_adds_tens_of_kib_per_idle_connection() {
    let pki = TestPki::new("memory CA").unwrap();
    let cert = pki.server(&["localhost"]).unwrap();
    let ca = pki.ca_pem();
    let client_tls = ClientTls::from_pem(ca.as_bytes(), "localhost", None).unwrap();
    let mut tls_config = ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny);
    tls_config.tls =
        Some(ServerTls::from_pem(cert.cert_pem.as_bytes(), cert.key_pem.as_bytes(), None).unwrap());
    let plain_server = ControlPlaneServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny),
    )
    .await
    .unwrap();
    let tls_server = ControlPlaneServer::bind("127.0.0.1:0".parse().unwrap(), tls_config)
        .await
        .unwrap();
    // Warm up lazily allocated runtime and rustls structures.
    let (_, warm_plain) = held_by_pairs(&plain_server, None, "warm-plain").await;
    let (_, warm_tls) = held_by_pairs(&tls_server, Some(&client_tls), "warm-tls").await;

    let (plain, plain_edges) = held_by_pairs(&plain_server, None, "plain").await;
    let (tls, tls_edges) = held_by_pairs(&tls_server, Some(&client_tls), "tls").await;
    let plain_per_pair = plain.max(0) as usize / PAIRS;
    let tls_per_pair = tls.max(0) as usize / PAIRS;
    let overhead = tls_per_pair.saturating_sub(plain_per_pair);
    assert!(
        overhead <= TLS_BUDGET,
        "TLS adds {overhead} bytes per idle pair (plain {plain_per_pair}, TLS {tls_per_pair}; budget {TLS_BUDGET})"
    );
    assert!(
        overhead > 0,
        "plain {plain_per_pair} TLS {tls_per_pair}: measurement is broken"
    );
    for e in warm_plain
        .iter()
        .chain(&warm_tls)
        .chain(&plain_edges)
        .chain(&tls_edges)
    {
        e.shutdown().await;
    }
    plain_server.shutdown().await;
    tls_server.shutdown().await;
}

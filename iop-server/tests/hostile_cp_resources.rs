//! Hostile peers against the Control Plane's resource caps, in process (small caps
//! via `ServerConfig`): a peer that never reads, and more connections than the cap.

mod hostile_support;
// The runtime tests' helpers, shared with iop-tokio's own tests.
#[path = "../../iop-tokio/tests/support/mod.rs"]
mod support;

use hostile_support::*;
use iop_tokio::ControlPlaneServer;
use iop_tokio::core::cp::{CloseReason, CommandSpec, CpEvent};
use iop_tokio::core::proto::{Body, GoAwayReason};
use support::*;
use tokio::net::TcpSocket;

#[tokio::test]
async fn a_peer_that_never_reads_is_dropped_at_the_outbound_cap() {
    let mut config = fast_server();
    config.cp.outbound_cap = 256 * 1024;
    config.cp.max_inflight_commands = 10_000;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let good = good_edge(server.local_addr(), "good").await;
    let mut events = cp.subscribe();

    // A small receive buffer: the kernel absorbs little of what the CP sends.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4 * 1024).unwrap();
    let stream = bounded("connect", socket.connect(server.local_addr()))
        .await
        .unwrap();
    let mut attacker = Attacker::from_stream(stream);
    attacker
        .write(&envelope_frame(&iop_tokio::core::proto::Envelope::new(
            iop_tokio::core::proto::EdgeHelloRequest {
                edge_id: "deaf".into(),
                protocol_version: iop_tokio::core::proto::PROTOCOL_VERSION,
                operations: vec!["edge.ping".into()],
                ..Default::default()
            },
        )))
        .await;
    assert!(matches!(attacker.next_body().await, Some(Body::HelloResponse(r)) if r.accepted));

    // 16 KiB commands to a peer that reads nothing more, until it is dropped.
    let mut spec = CommandSpec::new("edge.ping");
    // Four values at the 4 KiB cap (PROTOCOL.md §7).
    for i in 0..4 {
        spec.metadata
            .insert(format!("blob-{i}"), "x".repeat(4 * 1024));
    }
    let mut sent = 0;
    while cp.send_command("deaf", spec.clone()).is_ok() {
        sent += 1;
        assert!(sent < 5_000, "never dropped");
        // Let the connection task write what it can: the kernel's buffers fill first,
        // then the task's own write buffer, then the core's queue.
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let reason = next_cp(&mut events, "deaf peer closed", |e| match e {
        CpEvent::Closed {
            edge_id, reason, ..
        } if edge_id.as_deref() == Some("deaf") => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert_eq!(reason, CloseReason::SlowPeer);
    assert_eq!(cp.stats().slow_peers, 1);
    // Far fewer commands than the kernel buffers plus the cap could hold were needed.
    assert!(sent * 16 * 1024 < 64 * 1024 * 1024, "{sent} commands sent");
    eprintln!("deaf peer dropped after {sent} commands of 16 KiB");
    // The deaf peer stays connected and reads nothing: the Control Plane still lets
    // go of the connection (its task, buffers and slot under the cap).
    bounded("deaf connection released", async {
        while cp.connection_count() > 1 || cp.stats().connections > 1 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    drop(attacker);
    good.assert_undisturbed(&cp).await;
    good.edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn connections_past_the_cap_get_go_away_overloaded_with_retry_after() {
    let mut config = fast_server();
    config.cp.max_connections = 4;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let good = good_edge(server.local_addr(), "good").await;
    let mut holders = Vec::new();
    for i in 0..3 {
        let mut holder = Attacker::connect(server.local_addr()).await;
        holder.hello(&format!("holder-{i}")).await;
        holders.push(holder);
    }
    let mut events = cp.subscribe();
    // Twenty more at once: each is refused, none is held.
    let mut extra = Vec::new();
    for _ in 0..20 {
        extra.push(Attacker::connect(server.local_addr()).await);
    }
    for attacker in &mut extra {
        let bodies = attacker.expect_go_away(GoAwayReason::Overloaded).await;
        assert!(
            matches!(bodies.as_slice(), [Body::GoAway(g)] if g.retry_after_ms == 10_000),
            "{bodies:?}"
        );
        let reason = next_cp(&mut events, "overloaded close", |e| match e {
            CpEvent::Closed { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .await;
        assert_eq!(reason, CloseReason::Overloaded);
    }
    assert_eq!(cp.stats().overloaded, 20);
    assert_eq!(cp.connection_count(), 4);
    for (i, holder) in holders.iter_mut().enumerate() {
        holder.ping(i as u64 + 1).await;
    }
    // A slot freed is a slot usable again.
    drop(holders.pop());
    bounded("slot freed", async {
        while cp.connection_count() > 3 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    let mut newcomer = Attacker::connect(server.local_addr()).await;
    newcomer.hello("newcomer").await;
    good.assert_undisturbed(&cp).await;
    good.edge.shutdown().await;
    server.shutdown().await;
}

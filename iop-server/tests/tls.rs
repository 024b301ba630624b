//! TLS and mutual TLS on tokio (certificates generated in the test): a full session
//! (status, command) inside TLS, and every way a connection can be refused — wrong CA,
//! expired certificate, client identity mismatch, plain TCP to the TLS port — with a
//! typed error, while a good Edge keeps its session and answers status.

// The runtime tests' helpers, shared with iop-tokio's own tests.
#[path = "../../iop-tokio/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use futures_lite::StreamExt;
use iop_server::test_certs::{CertAndKey, TestPki};
use iop_tokio::core::cp::{CommandSpec, CpEvent};
use iop_tokio::core::edge::{CloseReason, EdgeEvent, TargetLevel};
use iop_tokio::core::proto::HelloRejectReason;
use iop_tokio::{
    ClientTls, CommandResult, CommandUpdate, ControlPlaneHandle, ControlPlaneServer, DialError,
    EdgeClient, EdgeHandle, HandshakeFailure, ServerTls,
};
use support::*;

struct Pki {
    pki: TestPki,
    server: CertAndKey,
}

fn pki() -> Pki {
    let pki = TestPki::new("test CA").unwrap();
    let server = pki.server(&["localhost", "127.0.0.1"]).unwrap();
    Pki { pki, server }
}

/// A TLS Control Plane; with `mutual`, client certificates from the same CA are
/// required and must name the hello's edge id.
async fn tls_server(p: &Pki, mutual: bool) -> ControlPlaneServer {
    let ca = p.pki.ca_pem();
    let tls = ServerTls::from_pem(
        p.server.cert_pem.as_bytes(),
        p.server.key_pem.as_bytes(),
        mutual.then_some(ca.as_bytes()),
    )
    .unwrap();
    let mut config = fast_server();
    config.tls = Some(tls);
    config.cp.require_peer_identity = mutual;
    ControlPlaneServer::bind(localhost(), config).await.unwrap()
}

/// The test PKI's server certificate, without client certificates.
fn server_tls(p: &Pki) -> ServerTls {
    ServerTls::from_pem(
        p.server.cert_pem.as_bytes(),
        p.server.key_pem.as_bytes(),
        None,
    )
    .unwrap()
}

fn client_tls(ca_pem: &str, client: Option<&CertAndKey>) -> ClientTls {
    ClientTls::from_pem(
        ca_pem.as_bytes(),
        "localhost",
        client.map(|c| (c.cert_pem.as_bytes(), c.key_pem.as_bytes())),
    )
    .unwrap()
}

fn edge(edge_id: &str, tls: Option<ClientTls>, cp: &ControlPlaneServer) -> EdgeHandle {
    let mut client = EdgeClient::new(fast_edge(edge_id)).operation(
        "edge.ping",
        TargetLevel::Edge,
        |_ctx| async { CommandResult::succeeded("pong") },
    );
    if let Some(tls) = tls {
        client = client.with_tls(tls);
    }
    client.connect(cp.local_addr()).unwrap()
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    bounded(what, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// The good Edge still has its session and answers status and commands.
async fn good_edge_unaffected(cp: &ControlPlaneHandle, edge: &EdgeHandle) {
    assert!(edge.is_connected());
    let status = bounded("status", cp.request_status("good", vec![]))
        .await
        .unwrap();
    assert_eq!(status.edge_id, "good");
    let spec = CommandSpec::new("edge.ping");
    let mut tracker = cp.send_command("good", spec).unwrap();
    let mut last = None;
    while let Some(update) = bounded("command update", tracker.next()).await {
        last = Some(update);
    }
    assert!(matches!(last, Some(CommandUpdate::Event(e)) if e.message == "pong"));
}

/// A CP with TLS (mutual when asked) and one good Edge with a session.
async fn setup(p: &Pki, mutual: bool) -> (ControlPlaneServer, EdgeHandle) {
    let server = tls_server(p, mutual).await;
    let mut events = server.handle().subscribe();
    let client = mutual.then(|| p.pki.client("good").unwrap());
    let good = edge(
        "good",
        Some(client_tls(&p.pki.ca_pem(), client.as_ref())),
        &server,
    );
    next_cp(&mut events, "good session", |e| {
        matches!(e, CpEvent::SessionAccepted { edge_id, .. } if edge_id == "good").then_some(())
    })
    .await;
    wait_until("good edge connected", || good.is_connected()).await;
    (server, good)
}

#[tokio::test]
async fn a_session_runs_inside_tls() {
    let p = pki();
    let (server, good) = setup(&p, false).await;
    good_edge_unaffected(&server.handle(), &good).await;
    assert_eq!(server.handle().tls_stats().handshakes_completed, 1);
    good.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn over_the_connection_cap_a_tls_edge_is_told_overloaded() {
    let p = pki();
    let ca = p.pki.ca_pem();
    let mut config = fast_server();
    config.tls = Some(server_tls(&p));
    config.cp.max_connections = 1;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let good = edge("edge-good", Some(client_tls(&ca, None)), &server);
    wait_until("the good edge connects", || good.is_connected()).await;

    // Past the cap the handshake still completes, and the Edge is told why it cannot
    // stay, and when to come back (PROTOCOL.md §4.1), as over plain TCP.
    let mut client = EdgeClient::new(fast_edge("edge-over")).with_tls(client_tls(&ca, None));
    let mut events = client.events();
    let over = client.connect(server.local_addr()).unwrap();
    let reason = next_edge(&mut events, "the refusal", |e| match e {
        EdgeEvent::Closed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        matches!(
            reason,
            CloseReason::GoAway {
                reason: iop_tokio::core::proto::GoAwayReason::Overloaded,
                ..
            }
        ),
        "{reason:?}"
    );
    let stats = server.handle().tls_stats();
    assert!(stats.refused_over_capacity >= 1, "{stats:?}");
    assert!(good.is_connected());
    over.shutdown().await;
    good.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn mutual_tls_accepts_the_named_edge_and_refuses_a_mismatched_identity() {
    let p = pki();
    let (server, good) = setup(&p, true).await;
    // A valid certificate of the same CA, but for another edge id than the hello's.
    let other = p.pki.client("someone-else").unwrap();
    let mut client = EdgeClient::new(fast_edge("impostor"));
    let mut events = client.events();
    client = client.with_tls(client_tls(&p.pki.ca_pem(), Some(&other)));
    let impostor = client.connect(server.local_addr()).unwrap();
    let (reason, message) = next_edge(&mut events, "hello rejected", |e| match e {
        EdgeEvent::HelloRejected {
            reason, message, ..
        } => Some((*reason, message.clone())),
        _ => None,
    })
    .await;
    assert_eq!(reason, HelloRejectReason::BadCredential);
    assert_eq!(
        message,
        "client certificate identity does not match the edge id"
    );
    assert!(!impostor.is_connected());
    good_edge_unaffected(&server.handle(), &good).await;
    impostor.shutdown().await;
    good.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_edge_without_a_client_certificate_fails_the_mutual_handshake() {
    let p = pki();
    let (server, good) = setup(&p, true).await;
    let cp = server.handle();
    let bare = edge("bare", Some(client_tls(&p.pki.ca_pem(), None)), &server);
    wait_until("handshake failure", || cp.tls_stats().handshakes_failed > 0).await;
    let failure = cp.tls_stats().last_failure.unwrap();
    assert_eq!(failure.kind, HandshakeFailure::NoCertificate, "{failure}");
    assert!(!bare.is_connected());
    good_edge_unaffected(&cp, &good).await;
    bare.shutdown().await;
    good.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_server_from_another_ca_is_refused_by_the_edge() {
    let p = pki();
    let (server, good) = setup(&p, false).await;
    let stranger = TestPki::new("another CA").unwrap();
    let lost = edge("lost", Some(client_tls(&stranger.ca_pem(), None)), &server);
    wait_until("dial error", || lost.last_dial_error().is_some()).await;
    let Some(DialError::Tls(error)) = lost.last_dial_error() else {
        panic!("expected a TLS error, got {:?}", lost.last_dial_error());
    };
    assert_eq!(error.kind, HandshakeFailure::UnknownIssuer, "{error}");
    assert!(
        error.to_string().contains("not signed by a trusted CA"),
        "{error}"
    );
    // The Control Plane saw the Edge's alert (or, when the close overtakes it, the
    // connection ending mid-handshake).
    let cp = server.handle();
    wait_until("CP failure", || cp.tls_stats().handshakes_failed > 0).await;
    let failure = cp.tls_stats().last_failure.unwrap();
    assert!(
        matches!(
            failure.kind,
            HandshakeFailure::RejectedByPeer | HandshakeFailure::Io
        ),
        "{failure}"
    );
    good_edge_unaffected(&cp, &good).await;
    lost.shutdown().await;
    good.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_expired_server_certificate_is_refused() {
    let p = pki();
    let expired = p.pki.expired_server(&["localhost"]).unwrap();
    let tls = ServerTls::from_pem(
        expired.cert_pem.as_bytes(),
        expired.key_pem.as_bytes(),
        None,
    )
    .unwrap();
    let mut config = fast_server();
    config.tls = Some(tls);
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let e = edge("e", Some(client_tls(&p.pki.ca_pem(), None)), &server);
    wait_until("dial error", || e.last_dial_error().is_some()).await;
    let Some(DialError::Tls(error)) = e.last_dial_error() else {
        panic!("expected a TLS error, got {:?}", e.last_dial_error());
    };
    assert_eq!(error.kind, HandshakeFailure::Expired, "{error}");
    e.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_expired_client_certificate_is_refused_and_others_go_on() {
    let p = pki();
    let (server, good) = setup(&p, true).await;
    let cp = server.handle();
    let old = p.pki.expired_client("old").unwrap();
    let stale = edge(
        "old",
        Some(client_tls(&p.pki.ca_pem(), Some(&old))),
        &server,
    );
    wait_until("handshake failure", || cp.tls_stats().handshakes_failed > 0).await;
    let failure = cp.tls_stats().last_failure.unwrap();
    assert_eq!(failure.kind, HandshakeFailure::Expired, "{failure}");
    assert!(!stale.is_connected());
    good_edge_unaffected(&cp, &good).await;
    stale.shutdown().await;
    good.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn plain_tcp_to_the_tls_port_is_refused() {
    let p = pki();
    let (server, good) = setup(&p, false).await;
    let cp = server.handle();
    let mut client = EdgeClient::new(fast_edge("plain"));
    let mut events = client.events();
    let plain = client.connect(server.local_addr()).unwrap();
    wait_until("handshake failure", || cp.tls_stats().handshakes_failed > 0).await;
    let failure = cp.tls_stats().last_failure.unwrap();
    assert_eq!(failure.kind, HandshakeFailure::NotTls, "{failure}");
    assert!(failure.to_string().contains("plain TCP"), "{failure}");
    // The Edge reads the TLS alert as a broken frame and closes; it never enrols.
    let reason = next_edge(&mut events, "edge closed", |e| match e {
        EdgeEvent::Closed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        !matches!(reason, CloseReason::HelloRejected(_)),
        "{reason:?}"
    );
    assert!(!plain.is_connected());
    good_edge_unaffected(&cp, &good).await;
    plain.shutdown().await;
    good.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_tls_edge_to_a_plain_port_fails_clearly() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let p = pki();
    let e = edge("e", Some(client_tls(&p.pki.ca_pem(), None)), &server);
    wait_until("dial error", || e.last_dial_error().is_some()).await;
    let Some(DialError::Tls(error)) = e.last_dial_error() else {
        panic!("expected a TLS error, got {:?}", e.last_dial_error());
    };
    assert_eq!(error.kind, HandshakeFailure::NotTls, "{error}");
    e.shutdown().await;
    server.shutdown().await;
}

#[test]
fn bad_pem_inputs_are_clear_errors() {
    let p = pki();
    let err = ServerTls::from_pem(b"not a pem", p.server.key_pem.as_bytes(), None).unwrap_err();
    assert!(err.to_string().contains("no PEM certificate"), "{err}");
    let err = ServerTls::from_pem(p.server.cert_pem.as_bytes(), b"", None).unwrap_err();
    assert!(
        err.to_string().contains("no usable PEM private key"),
        "{err}"
    );
    let other = p.pki.server(&["x"]).unwrap();
    let err = ServerTls::from_pem(p.server.cert_pem.as_bytes(), other.key_pem.as_bytes(), None)
        .unwrap_err();
    assert!(
        err.to_string().contains("TLS configuration rejected"),
        "{err}"
    );
    let err = ClientTls::from_pem(p.pki.ca_pem().as_bytes(), "bad name!", None).unwrap_err();
    assert!(err.to_string().contains("invalid TLS server name"), "{err}");
    let err = ServerTls::from_pem_files(
        std::path::Path::new("/nonexistent/cert.pem"),
        std::path::Path::new("/nonexistent/key.pem"),
        None,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/cert.pem: cannot read"),
        "{err}"
    );
    // Debug of a config never shows the key.
    let tls = ServerTls::from_pem(
        p.server.cert_pem.as_bytes(),
        p.server.key_pem.as_bytes(),
        None,
    )
    .unwrap();
    let body: String = p.server.key_pem.lines().nth(1).unwrap().to_owned();
    assert!(!format!("{tls:?} {:?}", p.server).contains(&body));
}

/// The client identity rule: a SAN DNS entry equal to the edge id byte for byte.
#[test]
fn a_client_certificate_names_exactly_its_edge_id() {
    use iop_tokio::core::cp::PeerIdentity;
    use iop_tokio::tls::CertIdentity;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    let pki = TestPki::new("test CA").unwrap();
    let identity = |san: &str| {
        let pem = pki.client(san).unwrap().cert_pem;
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        CertIdentity::new(der)
    };
    assert!(identity("edge-1").names_edge("edge-1"));
    // No case folding: another Edge.
    assert!(!identity("edge-1").names_edge("EDGE-1"));
    assert!(!identity("EDGE-1").names_edge("edge-1"));
    // No trailing dot.
    assert!(!identity("edge-1.").names_edge("edge-1"));
    assert!(!identity("edge-1").names_edge("edge-1."));
    // No wildcard.
    assert!(!identity("*.fleet").names_edge("a.fleet"));
    assert!(identity("a.fleet").names_edge("a.fleet"));
}

#[tokio::test]
async fn one_address_holding_its_share_of_tls_handshakes_leaves_another_address_served() {
    let p = pki();
    let ca = p.pki.ca_pem();
    let mut config = fast_server();
    config.tls = Some(server_tls(&p));
    // Handshakes are let wait long: the attacker's hold their slots all test long.
    config.cp.hello_timeout = Duration::from_secs(60);
    config.cp.max_connections = 32;
    config.max_pending_hellos_per_ip = 4;
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();

    // 127.0.0.2 opens more connections than the server handshakes with, under its
    // cap (32) and over it (64 more, to be told OVERLOADED), and never says a word.
    let mut held = Vec::new();
    for _ in 0..100 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        held.push(socket.connect(server.local_addr()).await.unwrap());
    }
    wait_until("the attacker's connections seen", || {
        server.handle().tls_stats().refused_per_address >= 96
    })
    .await;

    // An Edge from 127.0.0.1 still completes its handshake and its hello, at once.
    let good = edge("edge-good", Some(client_tls(&ca, None)), &server);
    wait_until("the edge from another address holds a session", || {
        server.handle().stats().live_sessions == 1
    })
    .await;
    let stats = server.handle().tls_stats();
    assert_eq!(stats.refused_per_address, 96, "{stats:?}");
    assert_eq!(stats.refused_over_capacity, 0, "{stats:?}");
    drop(held);
    good.shutdown().await;
    server.shutdown().await;
}

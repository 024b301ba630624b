//! TLS and mutual TLS on smol (the driver's one TLS implementation, over async-io
//! sockets): a session inside TLS, an identity mismatch refused BAD_CREDENTIAL, a
//! server from another CA refused by the Edge, plain TCP to the TLS port refused — and
//! a good Edge keeps its session and answers status throughout.

use std::time::Duration;

use futures_lite::{StreamExt, future};
use iop_smol::core::cp::{CommandSpec, CpEvent};
use iop_smol::core::edge::{EdgeConfig, EdgeEvent, TargetLevel};
use iop_smol::core::proto::HelloRejectReason;
use iop_smol::{
    ClientTls, CommandResult, CommandUpdate, ControlPlaneHandle, ControlPlaneServer, DialError,
    EdgeClient, EdgeHandle, HandshakeFailure, Notice, ServerConfig, ServerTls,
};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};

async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    future::or(async { Some(fut.await) }, async {
        smol::Timer::after(Duration::from_secs(10)).await;
        None
    })
    .await
    .unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    bounded(what, async {
        while !check() {
            smol::Timer::after(Duration::from_millis(10)).await;
        }
    })
    .await;
}

struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        Self(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }
    /// (certificate PEM, key PEM) for `name`.
    fn issue(&self, name: &str, usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.0).unwrap();
        (cert.pem(), key.serialize_pem())
    }
    fn pem(&self) -> String {
        self.0.pem()
    }
}

fn fast_edge(id: &str) -> EdgeConfig {
    let mut c = EdgeConfig::new(id, iop_smol::process_seed());
    c.backoff_base = Duration::from_millis(20);
    c.backoff_max = Duration::from_millis(200);
    c
}

fn client_tls(ca: &str, client: Option<&(String, String)>) -> ClientTls {
    ClientTls::from_pem(
        ca.as_bytes(),
        "localhost",
        client.map(|(c, k)| (c.as_bytes(), k.as_bytes())),
    )
    .unwrap()
}

async fn server(ca: &Ca, mutual: bool) -> ControlPlaneServer {
    let (cert, key) = ca.issue("localhost", ExtendedKeyUsagePurpose::ServerAuth);
    let ca_pem = ca.pem();
    let mut config = ServerConfig::new(iop_smol::EnrolmentPolicy::AcceptAny);
    config.tls = Some(
        ServerTls::from_pem(
            cert.as_bytes(),
            key.as_bytes(),
            mutual.then_some(ca_pem.as_bytes()),
        )
        .unwrap(),
    );
    config.cp.require_peer_identity = mutual;
    config.cp.hello_timeout = Duration::from_secs(2);
    config.shutdown_grace = Duration::from_secs(2);
    ControlPlaneServer::bind("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap()
}

fn edge(id: &str, tls: Option<ClientTls>, cp: &ControlPlaneServer) -> EdgeHandle {
    let mut client =
        EdgeClient::new(fast_edge(id)).operation("edge.ping", TargetLevel::Edge, |_| async {
            CommandResult::succeeded("pong")
        });
    if let Some(tls) = tls {
        client = client.with_tls(tls);
    }
    client.connect(cp.local_addr()).unwrap()
}

async fn good_edge(ca: &Ca, cp: &ControlPlaneServer, mutual: bool) -> EdgeHandle {
    let mut events = cp.handle().subscribe();
    let cert = mutual.then(|| ca.issue("good", ExtendedKeyUsagePurpose::ClientAuth));
    let good = edge("good", Some(client_tls(&ca.pem(), cert.as_ref())), cp);
    bounded("good session", async {
        loop {
            if let Some(Notice::Event(CpEvent::SessionAccepted { edge_id, .. })) =
                events.next().await
                && edge_id == "good"
            {
                return;
            }
        }
    })
    .await;
    wait_until("good connected", || good.is_connected()).await;
    good
}

async fn good_edge_unaffected(cp: &ControlPlaneHandle, good: &EdgeHandle) {
    assert!(good.is_connected());
    let status = bounded("status", cp.request_status("good", vec![]))
        .await
        .unwrap();
    assert_eq!(status.edge_id, "good");
    let spec = CommandSpec::new("edge.ping");
    let mut tracker = cp.send_command("good", spec).unwrap();
    let mut last = None;
    while let Some(u) = bounded("command update", tracker.next()).await {
        last = Some(u);
    }
    assert!(matches!(last, Some(CommandUpdate::Event(e)) if e.message == "pong"));
}

#[test]
fn mutual_tls_on_smol_refuses_a_mismatched_identity_and_keeps_the_good_edge() {
    smol::block_on(async {
        let ca = Ca::new("test CA");
        let cp = server(&ca, true).await;
        let good = good_edge(&ca, &cp, true).await;
        good_edge_unaffected(&cp.handle(), &good).await;

        let other = ca.issue("someone-else", ExtendedKeyUsagePurpose::ClientAuth);
        let mut client =
            EdgeClient::new(fast_edge("impostor")).with_tls(client_tls(&ca.pem(), Some(&other)));
        let mut events = client.events();
        let impostor = client.connect(cp.local_addr()).unwrap();
        let (reason, message) = bounded("rejection", async {
            loop {
                if let Some(Notice::Event(EdgeEvent::HelloRejected {
                    reason, message, ..
                })) = events.next().await
                {
                    return (reason, message);
                }
            }
        })
        .await;
        assert_eq!(reason, HelloRejectReason::BadCredential);
        assert_eq!(
            message,
            "client certificate identity does not match the edge id"
        );
        good_edge_unaffected(&cp.handle(), &good).await;
        impostor.shutdown().await;
        good.shutdown().await;
        cp.shutdown().await;
    });
}

#[test]
fn wrong_ca_and_plain_tcp_fail_clearly_on_smol() {
    smol::block_on(async {
        let ca = Ca::new("test CA");
        let cp = server(&ca, false).await;
        let handle = cp.handle();
        let good = good_edge(&ca, &cp, false).await;

        let stranger = Ca::new("another CA");
        let lost = edge("lost", Some(client_tls(&stranger.pem(), None)), &cp);
        wait_until("dial error", || lost.last_dial_error().is_some()).await;
        match lost.last_dial_error() {
            Some(DialError::Tls(e)) => assert_eq!(e.kind, HandshakeFailure::UnknownIssuer, "{e}"),
            other => panic!("expected a TLS error, got {other:?}"),
        }
        lost.shutdown().await;

        let before = handle.tls_stats().handshakes_failed;
        let plain = edge("plain", None, &cp);
        wait_until("not TLS", || {
            handle
                .tls_stats()
                .last_failure
                .is_some_and(|f| f.kind == HandshakeFailure::NotTls)
        })
        .await;
        assert!(handle.tls_stats().handshakes_failed > before);
        assert!(!plain.is_connected());
        plain.shutdown().await;

        good_edge_unaffected(&handle, &good).await;
        good.shutdown().await;
        cp.shutdown().await;
    });
}

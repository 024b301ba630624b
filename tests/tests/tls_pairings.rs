//! Mutual TLS across every tokio/smol pairing: the one TLS implementation of
//! `iop-driver` on both ends, a session with status and a command inside TLS, and an
//! Edge whose certificate names another id refused `BAD_CREDENTIAL` while the good
//! Edge keeps its session.

use futures_lite::StreamExt;
use iop_driver::iop_core::cp::CommandSpec;
use iop_driver::iop_core::edge::{EdgeEvent, TargetLevel};
use iop_driver::iop_core::proto::HelloRejectReason;
use iop_driver::tls::{ClientTls, ServerTls};
use iop_driver::{CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient};
use iop_tests::{
    Host, bounded, every_pairing, fast_edge, fast_server, localhost, next_event, session_accepted,
};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A test CA issuing (certificate PEM, key PEM) pairs whose DNS name is `name`.
struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "pairing CA");
        Self(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }

    fn issue(&self, name: &str, usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.0).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

async fn mutual_tls_session_and_identity_check<C: Host, E: Host>() {
    let pki = Ca::new();
    let (server_cert, server_key) = pki.issue("localhost", ExtendedKeyUsagePurpose::ServerAuth);
    let ca = pki.0.pem();
    let mut config = fast_server();
    config.tls = Some(
        ServerTls::from_pem(
            server_cert.as_bytes(),
            server_key.as_bytes(),
            Some(ca.as_bytes()),
        )
        .unwrap(),
    );
    config.cp.require_peer_identity = true;
    let server = ControlPlaneServer::<C>::bind(localhost(), config)
        .await
        .unwrap();
    let cp = server.handle();
    let mut cp_events = cp.subscribe();
    let tls_for = |edge_id: &str| {
        let (cert, key) = pki.issue(edge_id, ExtendedKeyUsagePurpose::ClientAuth);
        ClientTls::from_pem(
            ca.as_bytes(),
            "localhost",
            Some((cert.as_bytes(), key.as_bytes())),
        )
        .unwrap()
    };

    let good = EdgeClient::<E>::new(fast_edge("good"))
        .with_tls(tls_for("good"))
        .operation("edge.ping", TargetLevel::Edge, |_| async {
            CommandResult::succeeded("pong")
        })
        .connect(server.local_addr())
        .unwrap();
    session_accepted(&mut cp_events, "good").await;

    let mut impostor = EdgeClient::<E>::new(fast_edge("impostor")).with_tls(tls_for("good-too"));
    let mut impostor_events = impostor.events();
    let impostor = impostor.connect(server.local_addr()).unwrap();
    let (reason, message) = next_event(&mut impostor_events, "rejection", |e| match e {
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

    let status = bounded("status", cp.request_status("good", vec![]))
        .await
        .unwrap();
    assert_eq!(status.edge_id, "good");
    let spec = CommandSpec::new("edge.ping");
    let mut tracker = cp.send_command("good", spec).unwrap();
    let mut last = None;
    while let Some(u) = bounded("command", tracker.next()).await {
        last = Some(u);
    }
    assert!(
        matches!(last, Some(CommandUpdate::Event(e)) if e.message == "pong"),
        "{} CP, {} Edge",
        C::NAME,
        E::NAME
    );
    assert!(good.is_connected());
    impostor.shutdown().await;
    good.shutdown().await;
    server.shutdown().await;
}

every_pairing!(mutual_tls_session_and_identity_check);

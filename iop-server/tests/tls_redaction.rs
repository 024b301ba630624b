//! PROTOCOL.md §5.4 with TLS: a full scenario (mutual-TLS hello, status, command, enrolment
//! reload that revokes the Edge) logged at TRACE into a buffer, in process; then the
//! logs and the `Debug` of every config are scanned for each secret — the enrolment
//! credential, both private keys' PEM bodies, the node token. None may appear.

// The runtime tests' helpers, shared with iop-tokio's own tests.
#[path = "../../iop-tokio/tests/support/mod.rs"]
mod support;

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_lite::StreamExt;
use iop_server::EnrolFile;
use iop_server::test_certs::TestPki;
use iop_tokio::core::NodeRegistry;
use iop_tokio::core::cp::{CommandSpec, CpEvent};
use iop_tokio::core::edge::{CloseReason, EdgeEvent, Secret, TargetLevel};
use iop_tokio::core::proto::GoAwayReason;
use iop_tokio::core::registry::{NodeConfig, NodeEndpoint};
use iop_tokio::{
    ClientTls, CommandResult, CommandUpdate, ControlPlaneServer, EdgeClient, EnrolmentPolicy,
    ServerTls,
};
use support::*;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}{nanos:x}{}", std::process::id())
}

/// The base64 lines of a PEM body (what would leak if a key were printed).
fn pem_body_lines(pem: &str) -> Vec<String> {
    pem.lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 16)
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_trace_logs_or_debug_output() {
    let logs = Buffer::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init()
        .expect("the only subscriber of this test binary");

    let credential = unique("credSECRET");
    let token = unique("tokenSECRET");
    let pki = TestPki::new("redaction CA").unwrap();
    let server_cert = pki.server(&["localhost"]).unwrap();
    let client_cert = pki.client("edge-1").unwrap();
    let mut secrets: Vec<String> = vec![credential.clone(), token.clone()];
    secrets.extend(pem_body_lines(&server_cert.key_pem));
    secrets.extend(pem_body_lines(&client_cert.key_pem));

    // Control Plane: mutual TLS with identity, enrolment file with edge-1.
    let enrol = |secret: &str| {
        let text = format!(
            "[[edges]]\nid = \"edge-1\"\ncredential_sha256 = \"{}\"\n",
            iop_server::credential_hash_hex(secret.as_bytes())
        );
        EnrolFile::parse(Path::new("enroll.toml"), &text).unwrap()
    };
    let ca = pki.ca_pem();
    let mut config = fast_server();
    config.enrolment = EnrolmentPolicy::AllowList(enrol(&credential).allow_list);
    config.tls = Some(
        ServerTls::from_pem(
            server_cert.cert_pem.as_bytes(),
            server_cert.key_pem.as_bytes(),
            Some(ca.as_bytes()),
        )
        .unwrap(),
    );
    config.cp.require_peer_identity = true;
    let config_debug = format!("{config:?}");
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let mut cp_events = cp.subscribe();

    // Edge: credential, client certificate, one node with a token.
    let mut edge_config = fast_edge("edge-1");
    edge_config.credential = Secret::from(credential.as_str());
    let node =
        NodeConfig::new("gpu-1").with_endpoint(NodeEndpoint::new("10.9.8.7:9000", token.clone()));
    let node_debug = format!("{node:?}");
    let mut registry = NodeRegistry::new();
    let _ = registry.configure(node, 1).unwrap();
    let tls = ClientTls::from_pem(
        ca.as_bytes(),
        "localhost",
        Some((
            client_cert.cert_pem.as_bytes(),
            client_cert.key_pem.as_bytes(),
        )),
    )
    .unwrap();
    let mut client = EdgeClient::new(edge_config.clone())
        .with_node_registry(registry)
        .with_tls(tls.clone())
        .operation("edge.ping", TargetLevel::Edge, |_| async {
            CommandResult::succeeded("pong")
        });
    let mut edge_events = client.events();
    let client_debug = format!("{client:?}");
    let edge = client.connect(server.local_addr()).unwrap();
    next_cp(&mut cp_events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;

    // Status and a command.
    let status = bounded("status", cp.request_status("edge-1", vec![]))
        .await
        .unwrap();
    assert_eq!(status.nodes.len(), 1);
    let spec = CommandSpec::new("edge.ping");
    let mut tracker = cp.send_command("edge-1", spec).unwrap();
    let mut last = None;
    while let Some(u) = bounded("command", tracker.next()).await {
        last = Some(u);
    }
    assert!(matches!(last, Some(CommandUpdate::Event(e)) if e.message == "pong"));

    // Reload with a changed credential: the live session is revoked.
    cp.set_enrolment_policy(EnrolmentPolicy::AllowList(enrol("rotated").allow_list));
    next_edge(&mut edge_events, "revocation", |e| match e {
        EdgeEvent::Closed {
            reason: CloseReason::GoAway { reason, .. },
            ..
        } => (*reason == GoAwayReason::CredentialRevoked).then_some(()),
        _ => None,
    })
    .await;
    edge.shutdown().await;
    server.shutdown().await;
    tokio::time::sleep(Duration::from_millis(50)).await;

    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    // The capture really is at TRACE and covers TLS and the protocol.
    assert!(text.contains("TRACE"), "no trace lines captured");
    assert!(text.contains("TLS handshake completed"));
    assert!(text.contains("edge session accepted"));
    // rustls logs through `log`, bridged into the capture too.
    assert!(text.contains("rustls"), "rustls logs not captured");
    let debug = format!(
        "{config_debug}\n{node_debug}\n{client_debug}\n{edge_config:?}\n{tls:?}\n{server_cert:?}\n{client_cert:?}\n{:?}",
        enrol(&credential)
    );
    for secret in &secrets {
        assert!(!text.contains(secret.as_str()), "a secret is in the logs");
        assert!(
            !debug.contains(secret.as_str()),
            "a secret is in a Debug output"
        );
    }
    assert!(
        text.len() > 10_000,
        "suspiciously few logs: {} bytes",
        text.len()
    );
}

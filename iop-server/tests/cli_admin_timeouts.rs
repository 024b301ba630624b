//! The admin API's timeouts, in process: an Edge that enrols but never answers
//! (a raw socket speaking only the hello) gets 504s with the command id kept.

mod cli_support;

use std::time::Duration;

use iop_core::proto::{self, EdgeHelloRequest, Envelope};
use iop_server::admin::{self, AdminState};
use iop_tokio::{ControlPlaneServer, ServerConfig};
use std::future::IntoFuture as _;

use tokio::io::AsyncWriteExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_edge_gets_504s_and_the_command_stays_tracked() {
    let mut config = ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny);
    config.cp.status_timeout = Duration::from_millis(200);
    let server = ControlPlaneServer::bind("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap();
    let mut state = AdminState::new(server.handle());
    state.command_answer_timeout = Duration::from_millis(200);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = listener.local_addr().unwrap();
    let http = tokio::spawn(axum::serve(listener, admin::router(state)).into_future());

    // An Edge that says hello, advertises edge.ping, and then says nothing more.
    let mut edge = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    let hello = Envelope::new(EdgeHelloRequest {
        edge_id: "mute".into(),
        protocol_version: proto::PROTOCOL_VERSION,
        operations: vec!["edge.ping".into()],
        ..Default::default()
    });
    let mut wire = Vec::new();
    proto::encode_frame(&hello, proto::PRE_HELLO_MAX_FRAME_LEN, &mut wire).unwrap();
    edge.write_all(&wire).await.unwrap();

    let answers = tokio::task::spawn_blocking(move || {
        cli_support::wait_connected(admin_addr, "mute");
        let status = cli_support::get(admin_addr, "/v1/edges/mute/status");
        let command = cli_support::post(
            admin_addr,
            "/v1/edges/mute/commands",
            r#"{"operation":"edge.ping"}"#,
        );
        let id = command.json()["error"]["commandId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let record = cli_support::get(admin_addr, &format!("/v1/commands/{id}"));
        let metrics = cli_support::get(admin_addr, "/metrics");
        (status, command, record, metrics)
    })
    .await
    .unwrap();
    let (status, command, record, metrics) = answers;

    assert_eq!(status.status, 504, "{}", status.body);
    assert_eq!(status.json()["error"]["code"], "timeout");
    assert_eq!(command.status, 504, "{}", command.body);
    let error = &command.json()["error"];
    assert_eq!(error["code"], "timeout");
    assert!(error["commandId"].as_str().unwrap().starts_with("cmd-"));
    // Still tracked: no answer yet, not terminal.
    assert_eq!(record.status, 200, "{}", record.body);
    let r = record.json();
    assert_eq!(
        (r["terminal"].as_bool(), r["response"].is_null()),
        (Some(false), true)
    );
    assert!(
        metrics
            .body
            .contains("iop_admin_status_request_duration_seconds_count{result=\"error\"} 1"),
        "{}",
        metrics.body
    );

    drop(edge);
    http.abort();
    server.shutdown().await;
}

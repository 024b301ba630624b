//! Cancelling a running command through the admin API (PROTOCOL.md §4.4): a
//! `node.drain` waiting for a lease is stopped by `POST /v1/commands/{id}/cancel`, ends
//! CANCELLED saying what it did, and every refusal of the route has its own code.

mod cli_support;

use cli_support::in_process::Cp;
use cli_support::scripted_edge::ScriptedEdge;
use iop_core::NodeRegistry;
use iop_core::edge::EdgeConfig;
use iop_core::registry::{LeaseKind, NodeConfig, ProviderCategory, ProviderConfig};
use iop_server::edge_ops;
use iop_tokio::{EdgeClient, EdgeHandle, EnrolmentPolicy, ServerConfig};
use serde_json::Value;

/// The built-in operations' Edge with `gpu-1` ready and one lease held on it, so that
/// a drain of it waits.
async fn edge_with_a_lease(cp: &Cp) -> (EdgeHandle, iop_core::registry::Lease) {
    let edge = edge_ops::register(EdgeClient::new(EdgeConfig::new("edge-1", 11)), None)
        .connect(cp.edges())
        .unwrap();
    let lease = edge.with_registry(|reg: &mut NodeRegistry, now| {
        let node = NodeConfig::new("gpu-1").with_provider(ProviderConfig::new(
            "llama",
            ProviderCategory::LocalInference,
            2,
            1,
        ));
        let _ = reg.configure(node, now).unwrap();
        reg.connect_ready("gpu-1", now).unwrap();
        reg.admit("gpu-1", "llama", LeaseKind::Normal).unwrap()
    });
    cp.get_until("edge-1 connected", "/v1/edges/edge-1", |v| {
        v["connected"] == true
    })
    .await;
    (edge, lease)
}

fn phases(record: &Value) -> Vec<String> {
    record["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter_map(|e| e["phase"].as_str())
                .map(|p| p.trim_start_matches("COMMAND_PHASE_").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_drain_is_cancelled_and_says_what_it_did() {
    let cp = Cp::start(ServerConfig::new(EnrolmentPolicy::AcceptAny)).await;
    let (edge, _lease) = edge_with_a_lease(&cp).await;
    let sent = cp
        .post(
            "/v1/edges/edge-1/commands",
            r#"{"operation":"node.drain","targetSelector":"node:gpu-1","timeoutMs":30000}"#,
        )
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let id = sent.json()["commandId"].as_str().unwrap().to_owned();
    let path = format!("/v1/commands/{id}");
    // Draining, and waiting for the lease.
    cp.get_until("the drain running", &path, |r| {
        phases(r).contains(&"RUNNING".to_owned())
    })
    .await;

    let cancel = cp.post(&format!("/v1/commands/{id}/cancel"), "").await;
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    let cancel = cancel.json();
    let cancel_id = format!("{id}.cancel");
    assert_eq!(cancel["commandId"], cancel_id.as_str());
    assert_eq!(cancel["cancels"], id.as_str());
    assert_eq!(cancel["edgeId"], "edge-1");
    assert_eq!(cancel["response"]["accepted"], true, "{cancel}");

    let record = cp
        .get_until("the drain ended", &path, |r| r["outcome"].is_string())
        .await;
    assert_eq!(record["outcome"], "COMMAND_PHASE_CANCELLED", "{record}");
    let ends: Vec<String> = phases(&record)
        .into_iter()
        .filter(|p| p != "ACCEPTED" && p != "RUNNING")
        .collect();
    assert_eq!(ends, ["CANCELLED"], "{record}");
    let last = record["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["message"], "stopped waiting: 1 node(s) stay drained, 1 lease(s) still in flight",
        "{last}"
    );
    assert_eq!(last["detail"]["in_flight"], "1");
    let cancel_record = cp
        .get_until(
            "the cancellation ended",
            &format!("/v1/commands/{cancel_id}"),
            |r| r["outcome"].is_string(),
        )
        .await;
    assert_eq!(
        cancel_record["outcome"], "COMMAND_PHASE_SUCCEEDED",
        "{cancel_record}"
    );
    // The node stays drained: a new lease is refused.
    let refused =
        edge.with_registry(|reg, _| reg.admit("gpu-1", "llama", LeaseKind::Normal).is_err());
    assert!(refused, "the cancelled drain left gpu-1 drained");

    // Nothing left to cancel: 409 with the record.
    let again = cp.post(&format!("/v1/commands/{id}/cancel"), "").await;
    assert_eq!(again.status, 409, "{}", again.body);
    let again = again.json();
    assert_eq!(again["error"]["code"], "already_finished");
    assert_eq!(again["record"]["outcome"], "COMMAND_PHASE_CANCELLED");
    // A command nobody sent.
    let unknown = cp.post("/v1/commands/never-sent/cancel", "").await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_eq!(unknown.json()["error"]["code"], "unknown_command");
    edge.shutdown().await;
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_of_an_edge_without_command_cancel_is_not_cancellable() {
    let cp = Cp::start(ServerConfig::new(EnrolmentPolicy::AcceptAny)).await;
    // An Edge written without `command.cancel`: the Control Plane never sends an
    // operation the Edge did not advertise.
    let mut edge = ScriptedEdge::hello_with(cp.edges(), "plain", &["slow"], &[]).await;
    let (admin, body) = (cp.admin, r#"{"operation":"slow"}"#);
    let sent = tokio::task::spawn_blocking(move || {
        cli_support::post(admin, "/v1/edges/plain/commands", body)
    });
    let id = edge.command_request().await.command_id;
    edge.accept(&id).await;
    let sent = sent.await.unwrap();
    assert_eq!(sent.status, 200, "{}", sent.body);
    let cancel = cp.post(&format!("/v1/commands/{id}/cancel"), "").await;
    assert_eq!(cancel.status, 422, "{}", cancel.body);
    let error = cancel.json()["error"].clone();
    assert_eq!(error["code"], "not_cancellable");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("command.cancel"),
        "{error}"
    );
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_cancels_the_drain_it_runs_and_starts_no_other() {
    let cp = Cp::start(ServerConfig::new(EnrolmentPolicy::AcceptAny)).await;
    let (edge, _lease) = edge_with_a_lease(&cp).await;
    // edge-1's drain waits for its lease; `ghost` is offline and waited for.
    let job = cp
        .post(
            "/v1/jobs",
            r#"{"jobId":"drain-all","operation":"node.drain","targetSelector":"node:gpu-1",
                "timeoutMs":30000,"edges":["edge-1","ghost"],"maxConcurrent":1,
                "offline":"wait","offlineWaitMs":60000}"#,
        )
        .await;
    assert_eq!(job.status, 200, "{}", job.body);
    assert_eq!(job.json()["jobId"], "drain-all");
    cp.get_until("the drain running", "/v1/commands/drain-all-0", |r| {
        phases(r).contains(&"RUNNING".to_owned())
    })
    .await;
    let cancelled = cp.post("/v1/jobs/drain-all/cancel", "").await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(cancelled.json()["stopped"], "cancelled");
    let done = cp
        .get_until("the job done", "/v1/jobs/drain-all", |j| {
            j["state"] == "done"
        })
        .await;
    assert_eq!(done["progress"]["failed"], 1, "{done}");
    assert_eq!(done["progress"]["skipped"], 1, "{done}");
    assert_eq!(done["edges"][1]["edgeId"], "ghost");
    assert_eq!(done["edges"][1]["message"], "the job was cancelled");
    let record = cp
        .get_until("the drain ended", "/v1/commands/drain-all-0", |r| {
            r["outcome"].is_string()
        })
        .await;
    assert_eq!(record["outcome"], "COMMAND_PHASE_CANCELLED", "{record}");
    let unknown = cp.post("/v1/jobs/nope/cancel", "").await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["error"]["code"], "unknown_job");
    edge.shutdown().await;
    cp.stop().await;
}

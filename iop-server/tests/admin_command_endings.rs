//! Every way a command goes unanswered, through the admin API (PROTOCOL.md §4.4): a
//! scripted Edge (a raw socket speaking the wire by hand) makes each ending happen,
//! and `POST /v1/edges/{id}/commands` answers with that ending's own status and code,
//! never "shutting down" for a Control Plane that runs on.

mod cli_support;

use std::sync::Arc;
use std::time::Duration;

use cli_support::in_process::Cp;
use cli_support::scripted_edge::ScriptedEdge;
use iop_core::proto::{CommandPhase, EdgeCommandRequest};
use iop_tokio::{CommandJournal, JournalError, Recording, ServerConfig};

fn config() -> ServerConfig {
    let mut config = ServerConfig::new(iop_tokio::EnrolmentPolicy::AcceptAny);
    config.cp.status_timeout = Duration::from_secs(30);
    config
}

/// The answer's `(status, error code)`, and its error object.
fn ending(answer: &cli_support::Answer) -> (u16, String, serde_json::Value) {
    let json = answer.json();
    let error = json["error"].clone();
    let code = error["code"].as_str().unwrap_or_default().to_owned();
    (answer.status, code, error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_that_drops_every_session_on_the_command_makes_it_undeliverable() {
    let cp = Cp::start(config()).await;
    let mut edge = ScriptedEdge::hello(cp.edges(), "poison", &[]).await;
    let answer = cp.post_ping("poison");
    // Three sessions, each closed the moment the command arrives.
    let mut sessions = Vec::new();
    let mut command_id = String::new();
    for _ in 0..3 {
        command_id = edge.command_request().await.command_id;
        sessions.push(edge.session_id);
        // No wait for the close to be seen: the next hello may supersede the
        // session first, which counts it as well.
        drop(edge);
        edge = ScriptedEdge::hello(cp.edges(), "poison", &[]).await;
    }
    let answer = answer.await.unwrap();
    let (status, code, error) = ending(&answer);
    assert_eq!(
        (status, code.as_str()),
        (422, "undeliverable"),
        "{}",
        answer.body
    );
    assert_eq!(error["commandId"], command_id.as_str());
    let message = error["message"].as_str().unwrap();
    let named = sessions.iter().map(u64::to_string).collect::<Vec<_>>();
    assert!(
        message.contains(&format!("3 sessions of the edge ({})", named.join(", "))),
        "{message}"
    );
    // Never sent again: the fourth session stays free of it.
    assert!(!edge.sees_command_within(Duration::from_millis(500)).await);
    let record = cp.get(&format!("/v1/commands/{command_id}")).await.json();
    assert_eq!(record["terminal"], true, "{record}");
    assert_eq!(record["outcome"], "UNDELIVERABLE", "{record}");
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_that_comes_back_without_a_command_it_took_lost_it() {
    let cp = Cp::start(config()).await;
    let mut edge = ScriptedEdge::hello(cp.edges(), "forgetful", &[]).await;
    let answer = cp.post_ping("forgetful");
    let id = edge.command_request().await.command_id;
    drop(edge);
    cp.wait_disconnected("forgetful").await;
    // It held the command: its replayed ACCEPTED comes before the re-sent request's
    // answer, which it never gives.
    let mut edge = ScriptedEdge::hello(cp.edges(), "forgetful", &[&id]).await;
    edge.event(&id, 1, CommandPhase::Accepted).await;
    edge.command_request().await;
    drop(edge);
    cp.wait_disconnected("forgetful").await;
    // It restarted: the command is gone from its hello.
    let _edge = ScriptedEdge::hello(cp.edges(), "forgetful", &[]).await;
    let answer = answer.await.unwrap();
    let (status, code, error) = ending(&answer);
    assert_eq!(
        (status, code.as_str()),
        (503, "command_lost"),
        "{}",
        answer.body
    );
    assert_eq!(error["commandId"], id.as_str());
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_finished_through_replayed_events_is_finished_unanswered() {
    let cp = Cp::start(config()).await;
    let mut edge = ScriptedEdge::hello(cp.edges(), "replayer", &[]).await;
    let answer = cp.post_ping("replayer");
    let id = edge.command_request().await.command_id;
    drop(edge);
    cp.wait_disconnected("replayer").await;
    // The Edge ran it to the end meanwhile: its latest event, replayed, is terminal.
    let mut edge = ScriptedEdge::hello(cp.edges(), "replayer", &[&id]).await;
    edge.event(&id, 3, CommandPhase::Succeeded).await;
    let answer = answer.await.unwrap();
    let (status, code, error) = ending(&answer);
    assert_eq!(
        (status, code.as_str()),
        (422, "finished_unanswered"),
        "{}",
        answer.body
    );
    assert!(
        error["message"].as_str().unwrap().contains("Succeeded"),
        "{error}"
    );
    drop(edge);
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_of_an_edge_forgotten_before_it_answered_is_gone() {
    let mut config = config();
    config.cp.disconnected_view_ttl = Duration::from_millis(300);
    let cp = Cp::start(config).await;
    let mut edge = ScriptedEdge::hello(cp.edges(), "vanished", &[]).await;
    let answer = cp.post_ping("vanished");
    let id = edge.command_request().await.command_id;
    drop(edge);
    let answer = answer.await.unwrap();
    let (status, code, error) = ending(&answer);
    assert_eq!(
        (status, code.as_str()),
        (410, "forgotten"),
        "{}",
        answer.body
    );
    assert_eq!(error["commandId"], id.as_str());
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_plane_that_stops_says_so() {
    let cp = Cp::start(config()).await;
    let mut edge = ScriptedEdge::hello(cp.edges(), "silent", &[]).await;
    let answer = cp.post_ping("silent");
    edge.command_request().await;
    cp.handle.shutdown().await;
    let answer = answer.await.unwrap();
    let (status, code, _) = ending(&answer);
    assert_eq!(
        (status, code.as_str()),
        (503, "shutting_down"),
        "{}",
        answer.body
    );
    cp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_record_left_the_book_is_untracked() {
    let mut config = config();
    config.cp.command_records.records = 1;
    let cp = Cp::start(config).await;
    let mut edge = ScriptedEdge::hello(cp.edges(), "busy", &[]).await;
    let first = cp.post_ping("busy");
    edge.command_request().await;
    // A second command takes the only record the core keeps.
    let second = cp.post_ping("busy");
    edge.command_request().await;
    let first = first.await.unwrap();
    let (status, code, _) = ending(&first);
    assert_eq!(
        (status, code.as_str()),
        (503, "untracked"),
        "{}",
        first.body
    );
    drop(edge);
    second.abort();
    cp.stop().await;
}

/// A journal that refuses every record with `error`.
#[derive(Debug)]
struct Refusing(JournalError);

impl CommandJournal for Refusing {
    fn record(&self, _edge_id: &str, _request: &EdgeCommandRequest) -> Recording {
        let error = self.0.clone();
        Box::pin(async move { Err(error) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_its_journal_cannot_record_is_never_sent() {
    for (error, status, code) in [
        (
            JournalError::Unavailable("engine down".into()),
            503,
            "engine_unavailable",
        ),
        (JournalError::Conflict, 409, "conflict"),
    ] {
        let cp = Cp::start(config()).await;
        cp.handle
            .set_command_journal(Some(Arc::new(Refusing(error.clone()))));
        let mut edge = ScriptedEdge::hello(cp.edges(), "journaled", &[]).await;
        let answer = cp.post_ping("journaled").await.unwrap();
        let (got, got_code, _) = ending(&answer);
        assert_eq!(
            (got, got_code.as_str()),
            (status, code),
            "{error:?}: {}",
            answer.body
        );
        assert!(!edge.sees_command_within(Duration::from_millis(300)).await);
        cp.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_edge_stays_away_longer_than_it_remembers_is_abandoned() {
    let mut config = config();
    config.cp.edge_command_retention = Some(Duration::from_millis(200));
    let cp = Cp::start(config).await;
    let mut edge = ScriptedEdge::hello(cp.edges(), "gone", &[]).await;
    let (admin, path) = (cp.admin, "/v1/edges/gone/commands");
    // A 100 ms command, and the Edge leaves as it arrives: away for longer than the
    // command's timeout and the retention, it can never tell what became of it.
    let answer = tokio::task::spawn_blocking(move || {
        cli_support::post(admin, path, r#"{"operation":"edge.ping","timeoutMs":100}"#)
    });
    let id = edge.command_request().await.command_id;
    drop(edge);
    let answer = answer.await.unwrap();
    let (status, code, error) = ending(&answer);
    assert_eq!(
        (status, code.as_str()),
        (410, "abandoned"),
        "{}",
        answer.body
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("its outcome can never be learned"),
        "{error}"
    );
    let record = tokio::task::spawn_blocking(move || {
        cli_support::wait_until("the command abandoned", || {
            let r = cli_support::get(admin, &format!("/v1/commands/{id}")).json();
            (r["terminal"] == true).then_some(r)
        })
    })
    .await
    .unwrap();
    assert_eq!(record["outcome"], "ABANDONED", "{record}");
    assert_eq!(record["phase"], "COMMAND_PHASE_FAILED", "{record}");
    let message = record["outcomeMessage"].as_str().unwrap_or_default();
    assert!(message.contains("never be learned"), "{record}");
    let metrics = cp.get("/metrics").await;
    assert!(
        metrics.body.contains("iop_commands_abandoned_total 1"),
        "{}",
        metrics.body
    );
    cp.stop().await;
}

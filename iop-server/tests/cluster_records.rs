//! Command records that never lie (PROTOCOL.md §8), against a real nats-server: the
//! remains of a write-ahead that landed after its replica refused the command — a
//! record never answered, its pointer, and no line in the Edge's index, so that no
//! replica carries it on — are finished UNRECORDED and read so through every replica,
//! never as a command running; a command its replica refused while the engine was
//! down reaches its end in the engine once it is back, however busy the replica is;
//! and a command's first ending in the engine is its ending through every replica,
//! the one whose own ending came second included.

mod cluster_support;

use std::sync::Arc;
use std::time::Duration;

use cluster_support::*;
use iop_cluster::key::edge_key;
use iop_cluster::stored::StoredCommand;
use iop_tokio::CommandFailure;
use iop_tokio::core::cp::{CommandOutcome, CommandState, DuplicatePolicy, Ending};
use iop_tokio::core::proto::{CommandPhase, EdgeCommandRequest, Message};
use iop_tokio::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn an_orphan_record_is_finished_unrecorded_through_every_replica() {
    let nats = NatsServer::start_with_accounts();
    // Engine operations of 500 ms: a record is an orphan 3 s after it was written.
    let quick = |c: &mut iop_cluster::ClusterConfig| c.op_timeout = Duration::from_millis(500);
    let a = node_with(&[&nats], "cp-a", DuplicatePolicy::Replace, quick).await;
    let b = node_with(&[&nats], "cp-b", DuplicatePolicy::Replace, quick).await;
    let (_edge, session) = edge_on(&a, "edge-1").await;
    let (admin_a, admin_b) = (admin_of(&a).await, admin_of(&b).await);

    // What a refused write-ahead left behind when its writes landed late.
    let client = nats.connect().await.unwrap();
    let kv = async_nats::jetstream::new(client)
        .get_key_value("iop-commands")
        .await
        .unwrap();
    let request = EdgeCommandRequest {
        command_id: "orphan-1".into(),
        operation: "model.load".into(),
        ..Default::default()
    };
    let stored = StoredCommand::new("edge-1", session, CommandState::new(request), None);
    let record = format!("c.{}.{}", edge_key("edge-1"), edge_key("orphan-1"));
    kv.put(&record, stored.encode_to_vec().into())
        .await
        .unwrap();
    kv.put(format!("i.{}", edge_key("orphan-1")), "edge-1".into())
        .await
        .unwrap();

    // Through either replica, within a few seconds: ended, never sent.
    for admin in [admin_a, admin_b] {
        let ended = bounded("the orphan finished", async {
            loop {
                let (status, body) = http(admin, "GET", "/v1/commands/orphan-1", None).await;
                assert_eq!(status, 200, "{body}");
                if body["terminal"] == true {
                    return body;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await;
        assert_eq!(ended["outcome"], "UNRECORDED", "{ended}");
        assert_eq!(ended["phase"], "COMMAND_PHASE_FAILED", "{ended}");
    }
    // In the engine too, where a late write cannot reopen it.
    let entry = kv.entry(&record).await.unwrap().unwrap();
    let finished = StoredCommand::decode_value(&entry.value).unwrap();
    assert!(finished.finished() && finished.unrecorded_ending());
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_refused_commands_end_reaches_every_replica_while_its_replica_stays_busy() {
    let mut nats = NatsServer::start_with_accounts();
    // Engine operations of 500 ms: the refusing replica retries its pending ends
    // every 500 ms, while new commands reach it every 100 ms.
    let quick = |c: &mut iop_cluster::ClusterConfig| c.op_timeout = Duration::from_millis(500);
    let a = node_with(&[&nats], "cp-a", DuplicatePolicy::Replace, quick).await;
    let b = node_with(&[&nats], "cp-b", DuplicatePolicy::Replace, quick).await;
    let edge = EdgeClient::new(fast_edge("edge-1"))
        .operation("model.load", TargetLevel::Edge, |_ctx| async {
            CommandResult::succeeded("loaded")
        })
        .connect(a.addr())
        .unwrap();
    bounded("the session on cp-a", edge.connected())
        .await
        .unwrap();
    let admin_b = admin_of(&b).await;

    // The engine gone: cp-a refuses a command, which must end UNRECORDED everywhere.
    nats.kill();
    eventually("cp-a to see the engine down", || {
        (!a.replica.stats().snapshot().engine_up).then_some(())
    })
    .await;
    let refused = a
        .cp()
        .send_command("edge-1", CommandSpec::new("model.load"))
        .unwrap();
    let id = refused.command_id().to_owned();
    let outcome = bounded("the refusal", refused.outcome()).await;
    assert!(
        matches!(
            outcome,
            Err(CommandFailure::Ended(Ending::Unrecorded { .. }))
        ),
        "{outcome:?}"
    );

    // Back, and kept busy: a command every 100 ms, never 500 ms of quiet.
    nats.restart();
    let cp = a.cp();
    let busy = tokio::spawn(async move {
        for _ in 0..1_000 {
            let _ = cp.send_command("edge-1", CommandSpec::new("model.load"));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let ended = bounded("the refused command's end through cp-b", async {
        loop {
            let (status, body) = http(admin_b, "GET", &format!("/v1/commands/{id}"), None).await;
            if status == 200 && body["terminal"] == true {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(!busy.is_finished(), "the replica was not busy throughout");
    busy.abort();
    assert_eq!(ended["outcome"], "UNRECORDED", "{ended}");
    edge.shutdown().await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_commands_first_ending_in_the_engine_is_read_through_every_replica() {
    let nats = NatsServer::start_with_accounts();
    let a = node(&nats, "cp-a", DuplicatePolicy::Replace).await;
    let b = node(&nats, "cp-b", DuplicatePolicy::Replace).await;
    let release = Arc::new(tokio::sync::Notify::new());
    let edge = loading_edge("edge-1", release.clone())
        .connect(a.addr())
        .unwrap();
    let session = bounded("the session on cp-a", edge.connected())
        .await
        .unwrap()
        .session_id;
    let (admin_a, admin_b) = (admin_of(&a).await, admin_of(&b).await);

    // cp-a sends the command; the Edge takes it and runs it.
    let mut tracker = a
        .cp()
        .send_command("edge-1", CommandSpec::new("model.load"))
        .unwrap();
    let id = tracker.command_id().to_owned();
    let answer = bounded("the answer", tracker.first_answer(Duration::from_secs(5))).await;
    assert!(answer.unwrap().accepted);
    let client = nats.connect().await.unwrap();
    let kv = async_nats::jetstream::new(client)
        .get_key_value("iop-commands")
        .await
        .unwrap();
    let key = format!("c.{}.{}", edge_key("edge-1"), edge_key(&id));
    let (revision, running) = bounded("the answer in the engine", async {
        loop {
            if let Some(entry) = kv.entry(&key).await.unwrap()
                && let Some(stored) = StoredCommand::decode_value(&entry.value)
                && stored.answer == 1
            {
                return (entry.revision, stored);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;

    // Another replica's ending lands first: one that took the Edge over in a newer
    // session, whose Edge came back without the command.
    let mut lost = running.clone();
    lost.session_id = session + 1;
    (lost.outcome, lost.outcome_value) = CommandOutcome::Ended(Ending::Lost).encode();
    kv.update(&key, lost.encode_to_vec().into(), revision)
        .await
        .unwrap();

    // The Edge's SUCCEEDED reaches cp-a, whose own record ends so; its write gives way.
    release.notify_one();
    eventually("SUCCEEDED on cp-a", || {
        a.cp()
            .command(&id)
            .filter(|r| r.outcome == Some(CommandOutcome::Finished(CommandPhase::Succeeded)))
    })
    .await;
    let flushed = a.replica.router().commands().flushed("edge-1", &id).await;
    assert!(!flushed, "cp-a's ending must not be written over the first");
    let entry = kv.entry(&key).await.unwrap().unwrap();
    assert_eq!(StoredCommand::decode_value(&entry.value), Some(lost));

    // Every replica reads the first ending, cp-a too.
    for admin in [admin_a, admin_b] {
        let (status, body) = http(admin, "GET", &format!("/v1/commands/{id}"), None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["terminal"], true, "{body}");
        assert_eq!(body["outcome"], "LOST", "{body}");
    }
    edge.shutdown().await;
    a.stop().await;
    b.stop().await;
}

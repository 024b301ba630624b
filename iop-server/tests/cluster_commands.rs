//! Command records in the engine (PROTOCOL.md §8): a command sent through one replica
//! keeps its outcome when the replica holding the Edge crashes and the Edge moves to
//! another, which carries the command on from the record and writes its outcome back;
//! a retry under the caller's key runs once, and a cancellation goes through any replica.

mod cluster_support;

use std::sync::Arc;
use std::time::Duration;

use cluster_support::*;
use iop_tokio::CommandFailure;
use iop_tokio::core::cp::{CommandOutcome, DuplicatePolicy};
use iop_tokio::core::proto::CommandPhase;
use iop_tokio::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_command_keeps_its_outcome_when_the_replica_holding_its_edge_crashes() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let release = Arc::new(tokio::sync::Notify::new());
    let edge = loading_edge("edge-1", release.clone())
        .fallback_addrs([b.addr()])
        .connect(a.addr())
        .unwrap();
    let first = bounded("the session on cp-a", edge.connected())
        .await
        .unwrap()
        .session_id;

    // Through cp-b, which does not hold the Edge: cp-a sends it and records it.
    let via_b = b.replica.router();
    let sent = bounded(
        "a routed command",
        via_b.command(
            "edge-1",
            CommandSpec::new("model.load"),
            Duration::from_secs(5),
        ),
    )
    .await
    .unwrap();
    assert!(sent.response.accepted, "{:?}", sent.response);
    let id = sent.command_id.clone();
    // The answer came back only once the record held it.
    let stored = bounded("the stored record", via_b.commands().get(&id))
        .await
        .unwrap()
        .expect("a record in the engine");
    assert!(stored.response().is_some_and(|r| r.accepted), "{stored:?}");
    assert_eq!(
        (stored.edge_id.as_str(), stored.operation.as_str()),
        ("edge-1", "model.load")
    );
    assert_eq!(stored.outcome, None);
    assert_eq!(b.cp().command(&id), None, "cp-b never sent it itself");

    // cp-a crashes: its replica stops without releasing anything, its sessions end.
    a.replica.abort();
    a.server.shutdown().await;
    let second = eventually("the Edge on cp-b", || {
        live_session(&b.cp(), "edge-1").filter(|s| *s > first)
    })
    .await;
    // cp-b adopted the command from its record: it knows the answer and the events.
    let adopted = eventually("the adopted command on cp-b", || b.cp().command(&id)).await;
    assert!(
        adopted.response().is_some_and(|r| r.accepted),
        "{adopted:?}"
    );
    assert_eq!(adopted.outcome, None);
    assert!(b.replica.stats().snapshot().commands_adopted >= 1);

    // The Edge still runs it; its outcome reaches cp-b and the engine.
    release.notify_one();
    let done = eventually("the outcome on cp-b", || {
        b.cp().command(&id).filter(|r| r.outcome.is_some())
    })
    .await;
    assert_eq!(
        done.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded)),
        "{done:?}"
    );
    let phases: Vec<i32> = done.events().map(|e| e.phase).collect();
    assert_eq!(phases.last(), Some(&(CommandPhase::Succeeded as i32)));
    let mut written = None;
    for _ in 0..250 {
        let r = via_b.commands().get(&id).await.unwrap();
        if r.as_ref().is_some_and(|r| r.outcome.is_some()) {
            written = r;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let written = written.expect("the outcome written back to the engine");
    assert_eq!(written.outcome, done.outcome);
    assert!(second > first);
    edge.shutdown().await;
    b.stop().await;
}

/// An Edge whose `model.load` tells `seen` its command id, then waits for `release`.
fn telling_edge(
    edge_id: &str,
    seen: tokio::sync::mpsc::UnboundedSender<String>,
    release: Arc<tokio::sync::Notify>,
) -> EdgeClient {
    EdgeClient::new(fast_edge(edge_id)).operation("model.load", TargetLevel::Edge, move |ctx| {
        let (seen, release) = (seen.clone(), release.clone());
        async move {
            let _ = seen.send(ctx.command_id().to_owned());
            release.notified().await;
            CommandResult::succeeded("loaded")
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_command_is_in_the_engine_before_its_edge_sees_it_and_never_sent_without_it() {
    let (mut nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let edge = telling_edge("edge-1", seen_tx, release.clone())
        .connect(a.addr())
        .unwrap();
    bounded("the session on cp-a", edge.connected())
        .await
        .unwrap();

    // Through cp-a's handle: when the Edge runs it, cp-b finds its record already.
    let tracker = a
        .cp()
        .send_command("edge-1", CommandSpec::new("model.load"))
        .unwrap();
    let id = tracker.command_id().to_owned();
    let ran = bounded("the edge running it", seen.recv()).await.unwrap();
    assert_eq!(ran, id);
    let stored = bounded("the record", b.replica.router().commands().get(&id))
        .await
        .unwrap()
        .expect("written before the command was sent");
    assert_eq!(stored.operation, "model.load");
    release.notify_one();
    let done = bounded("the outcome", tracker.outcome()).await;
    assert!(done.is_ok(), "{done:?}");

    // The engine gone: a command is refused, and the Edge never sees it.
    nats.kill();
    eventually("cp-a to see the engine down", || {
        (!a.replica.stats().snapshot().engine_up).then_some(())
    })
    .await;
    let tracker = a
        .cp()
        .send_command("edge-1", CommandSpec::new("model.load"))
        .unwrap();
    let refused = bounded("the refusal", tracker.outcome()).await;
    assert!(
        matches!(
            refused,
            Err(CommandFailure::Ended(Ending::Unrecorded { .. }))
        ),
        "{refused:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        seen.try_recv().is_err(),
        "an unrecorded command reached the edge"
    );

    // Back: commands are recorded and sent again.
    nats.restart();
    eventually("cp-a to see the engine back", || {
        a.replica.stats().snapshot().engine_up.then_some(())
    })
    .await;
    let tracker = bounded("a command again", async {
        loop {
            let t = a
                .cp()
                .send_command("edge-1", CommandSpec::new("model.load"))
                .unwrap();
            let id = t.command_id().to_owned();
            match tokio::time::timeout(Duration::from_secs(3), seen.recv()).await {
                Ok(Some(ran)) if ran == id => return t,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })
    .await;
    // An earlier attempt recorded late may be running too: release them all.
    let releasing = tokio::spawn(async move {
        loop {
            release.notify_waiters();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    assert!(bounded("its outcome", tracker.outcome()).await.is_ok());
    releasing.abort();
    edge.shutdown().await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_retry_under_the_same_key_through_any_replica_runs_the_command_once() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let edge = EdgeClient::new(fast_edge("edge-1"))
        .operation("edge.ping", TargetLevel::Edge, move |_ctx| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { CommandResult::succeeded("pong") }
        })
        .fallback_addrs([b.addr()])
        .connect(a.addr())
        .unwrap();
    let first = bounded("the session on cp-a", edge.connected())
        .await
        .unwrap()
        .session_id;
    let spec = || CommandSpec::new("edge.ping").with_id("key-1");
    let wait = Duration::from_secs(5);
    let via_b = b.replica.router();
    let sent = bounded("a routed command", via_b.command("edge-1", spec(), wait))
        .await
        .unwrap();
    assert_eq!(sent.command_id, "key-1");
    assert!(sent.response.accepted);
    // Again through cp-b, and through cp-a's own handle: the same command.
    let again = bounded("again", via_b.command("edge-1", spec(), wait))
        .await
        .unwrap();
    assert_eq!(again, sent);
    let local = a.cp().send_command("edge-1", spec()).unwrap();
    assert_eq!(local.command_id(), "key-1");
    assert!(bounded("its outcome", local.outcome()).await.is_ok());
    // Other content under the key: a conflict.
    let other = via_b
        .command("edge-1", spec().with_timeout_ms(9), wait)
        .await
        .unwrap_err();
    assert_eq!(other.kind.code(), "conflict");

    // cp-a dies; the Edge moves to cp-b, which never sent the command and does not
    // hold it (it finished): the engine's record answers the retry.
    a.replica.abort();
    a.server.shutdown().await;
    eventually("the Edge on cp-b", || {
        live_session(&b.cp(), "edge-1").filter(|s| *s > first)
    })
    .await;
    let retried = b.cp().send_command("edge-1", spec()).unwrap();
    let outcome = bounded("the recorded outcome", retried.outcome()).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "run once"
    );
    edge.shutdown().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn a_running_command_is_cancelled_through_a_replica_that_does_not_hold_its_edge() {
    let (_nats, a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let release = Arc::new(tokio::sync::Notify::new());
    // `model.load` never looks at its context: the Edge ends it after the grace.
    let edge = loading_edge("edge-1", release.clone())
        .with_cancel_grace(Duration::from_millis(200))
        .connect(a.addr())
        .unwrap();
    bounded("the session on cp-a", edge.connected())
        .await
        .unwrap();
    let tracker = a
        .cp()
        .send_command("edge-1", CommandSpec::new("model.load"))
        .unwrap();
    let id = tracker.command_id().to_owned();
    eventually("model.load RUNNING", || {
        a.cp()
            .command(&id)
            .filter(|r| r.events().any(|e| e.phase() == CommandPhase::Running))
    })
    .await;
    // cp-b does not hold the Edge: the cancellation is routed to cp-a.
    let wait = Duration::from_secs(5);
    let sent = bounded(
        "a routed cancellation",
        b.replica
            .router()
            .command("edge-1", CommandSpec::cancel(&id), wait),
    )
    .await
    .unwrap();
    assert_eq!(sent.command_id, format!("{id}.cancel"));
    assert!(sent.response.accepted, "{sent:?}");
    let ended = bounded("the target's end", tracker.outcome()).await;
    match ended {
        Err(CommandFailure::Failed { phase, message, .. }) => {
            assert_eq!(phase, CommandPhase::Cancelled);
            assert!(message.contains("did not stop within 200 ms"), "{message}");
        }
        other => panic!("not cancelled: {other:?}"),
    }
    // The cancellation's own record is in the engine, SUCCEEDED.
    let stored = eventually("the cancellation's record", || {
        a.cp()
            .command(&sent.command_id)
            .filter(|r| r.outcome.is_some())
    })
    .await;
    assert_eq!(
        stored.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded))
    );
    release.notify_waiters();
    edge.shutdown().await;
    a.stop().await;
    b.stop().await;
}

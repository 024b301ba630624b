//! The fleet's events on the engine (PROTOCOL.md §8 "Events"): published at least
//! once through a bounded outbox that outlives an engine outage, each once on the
//! stream, and resumable from any event's id.

mod cluster_support;

use std::sync::Arc;
use std::time::Duration;

use cluster_support::*;
use futures_lite::StreamExt;
use iop_cluster::events::FleetItem;
use iop_tokio::core::cp::{CpEvent, CpEventKind, DuplicatePolicy};

/// Session events as the stream carries them: `connected` / `disconnected`, with
/// the Edge id and session id.
fn encode(event: &CpEvent) -> Option<(&'static str, serde_json::Value)> {
    match event {
        CpEvent::SessionAccepted {
            edge_id,
            session_id,
            ..
        } => Some((
            "connected",
            serde_json::json!({ "edge": edge_id, "session": session_id }),
        )),
        CpEvent::EdgeDisconnected {
            edge_id,
            session_id,
            ..
        } => Some((
            "disconnected",
            serde_json::json!({ "edge": edge_id, "session": session_id }),
        )),
        _ => None,
    }
}

/// The next event of `stream` (at most 30 s: after an engine restart the client
/// reconnects and the outbox retries on their own backoffs), as (id, name, edge).
async fn next(
    stream: &mut (impl futures_lite::Stream<Item = FleetItem> + Unpin),
) -> (u64, String, String) {
    match tokio::time::timeout(WAIT, stream.next()).await {
        Ok(Some(FleetItem::Event {
            sequence,
            name,
            data,
        })) => (sequence, name, data["edge"].as_str().unwrap().to_owned()),
        other => panic!("no event: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.10+: scripts/test.sh runs it"]
async fn events_outlive_an_engine_outage_reach_the_stream_once_and_resume_from_their_id() {
    let (mut nats, mut a, b) = two_replicas(DuplicatePolicy::Replace).await;
    let kinds = vec![CpEventKind::SessionAccepted, CpEventKind::EdgeDisconnected];
    a.replica.publish_events(a.cp(), kinds, Arc::new(encode));
    let router = b.replica.router();
    let mut live = router.events(None).await.unwrap();

    let (first, _) = edge_on(&a, "edge-1").await;
    let (up, name, edge) = next(&mut live).await;
    assert_eq!((name.as_str(), edge.as_str()), ("connected", "edge-1"));

    // The engine goes away; the Edge leaves meanwhile: its event waits in the outbox.
    nats.kill();
    eventually("cp-a to see the engine down", || {
        (!a.replica.stats().snapshot().engine_up).then_some(())
    })
    .await;
    first.shutdown().await;
    eventually("the event held in the outbox, its publish failed", || {
        let s = a.replica.stats().snapshot();
        (s.events_outbox >= 1 && s.events_retried >= 1).then_some(())
    })
    .await;
    nats.restart();

    // Back: it reaches the stream, once, after the first; a subscriber that saw the
    // first resumes from its id and gets it too, and nothing twice.
    let mut resumed = bounded("a resumed subscription", async {
        loop {
            if let Ok(s) = router.events(Some(up)).await {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let (down, name, edge) = next(&mut resumed).await;
    assert_eq!((name.as_str(), edge.as_str()), ("disconnected", "edge-1"));
    assert!(down > up);
    assert_eq!(a.replica.stats().snapshot().events_lost, 0);
    // Nothing else on the stream: the retried publishes were one event.
    let (again, _) = edge_on(&a, "edge-2").await;
    let (_, name, edge) = next(&mut resumed).await;
    assert_eq!((name.as_str(), edge.as_str()), ("connected", "edge-2"));
    // From the start: every event once.
    let mut all = router.events(Some(0)).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(next(&mut all).await);
    }
    let names: Vec<(&str, &str)> = seen
        .iter()
        .map(|(_, n, e)| (n.as_str(), e.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("connected", "edge-1"),
            ("disconnected", "edge-1"),
            ("connected", "edge-2")
        ]
    );
    // Events the stream no longer holds (purged here; aged out in production): a
    // subscriber resuming before them is told how many it missed, then goes on.
    // The operator purges: a replica may not.
    let operator = async_nats::ConnectOptions::new();
    let operator = match nats.accounts() {
        Some(accounts) => operator.nkey(accounts.admin.clone()),
        None => operator,
    };
    let js = async_nats::jetstream::new(operator.connect(nats.url()).await.unwrap());
    let mut stream = js.get_stream(iop_cluster::events::STREAM).await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    stream.purge().await.unwrap();
    let mut late = router.events(Some(up)).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(10), late.next()).await {
        Ok(Some(FleetItem::Missed { count })) => assert_eq!(count, last - up),
        other => panic!("no missed count: {other:?}"),
    }
    again.shutdown().await;
    let (_, name, edge) = next(&mut late).await;
    assert_eq!((name.as_str(), edge.as_str()), ("disconnected", "edge-2"));
    a.stop().await;
    b.stop().await;
}

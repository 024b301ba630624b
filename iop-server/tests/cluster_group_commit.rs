//! The group commit of ownership records on a real nats-server with the project's
//! durable configuration (`sync_interval: always`): concurrent writes share atomic
//! batches and each learns its own revision; a batch with one stale write stores
//! nothing and its writes go again one by one, so only the stale one conflicts; a
//! write whose claim stopped waiting while the engine stalled is never made; and a
//! crowd of Edges enrols through batched claims, each session named by its record.

mod cluster_support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cluster_support::*;
use iop_cluster::key::edge_key;
use iop_cluster::ownership::{OwnershipStore, WriteError};
use iop_cluster::testing::NatsServer;
use iop_cluster::{NatsStore, OwnerRecord};
use iop_tokio::core::cp::DuplicatePolicy;
use iop_tokio::prelude::*;

fn durable() -> NatsServer {
    let config: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "examples",
        "nats",
        "nats-server.conf",
    ]
    .iter()
    .collect();
    NatsServer::start_with_config(&config)
}

type Answer = (String, Result<u64, WriteError>);

/// Writes a live record at `key` in a task of its own (create when `expected` is 0).
fn spawn_write(
    store: &Arc<NatsStore>,
    key: String,
    expected: u64,
) -> tokio::task::JoinHandle<Answer> {
    let store = store.clone();
    tokio::spawn(async move {
        let record = OwnerRecord::live("cp-test");
        let r = if expected == 0 {
            store.create(&key, &record).await
        } else {
            store.update(&key, &record, expected).await
        };
        (key, r)
    })
}

/// Writes `keys` concurrently (create when `expected` is 0) while the engine is paused,
/// so that every one of them is queued before the first is answered; the answers.
async fn burst(
    nats: &NatsServer,
    store: &NatsStore,
    writes: Vec<(String, u64)>,
    pause: Duration,
) -> Vec<Answer> {
    let store = Arc::new(store.clone());
    nats.pause();
    let tasks: Vec<_> = writes
        .into_iter()
        .map(|(key, expected)| spawn_write(&store, key, expected))
        .collect();
    tokio::time::sleep(pause).await;
    nats.resume();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.expect("write task"));
    }
    answers
}

async fn revision(store: &NatsStore, key: &str) -> Option<u64> {
    store.entry(key).await.expect("engine").map(|c| c.revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.12+: scripts/test.sh runs it"]
async fn concurrent_claims_share_durable_commits_and_a_stale_one_fails_alone() {
    let nats = durable();
    let node = node(&nats, "cp-a", DuplicatePolicy::Replace).await;
    let store = node.replica.store();
    let before = node.replica.stats().snapshot();

    // 300 new records at once: every write answered with the revision its record has.
    let keys: Vec<(String, u64)> = (0..300).map(|i| (format!("gc-{i}"), 0)).collect();
    let answers = burst(&nats, store, keys, Duration::from_millis(300)).await;
    let mut revisions = Vec::new();
    for (key, r) in &answers {
        let rev = r.clone().unwrap_or_else(|e| panic!("{key}: {e:?}"));
        assert_eq!(revision(store, key).await, Some(rev), "{key}");
        revisions.push(rev);
    }
    revisions.sort_unstable();
    revisions.dedup();
    assert_eq!(revisions.len(), 300, "each write its own revision");
    let after = node.replica.stats().snapshot();
    let writes = after.owner_writes - before.owner_writes;
    let commits = (after.owner_batches - before.owner_batches)
        + (after.owner_single_writes - before.owner_single_writes);
    assert_eq!(writes, 300);
    assert!(
        commits * 10 <= writes,
        "300 queued writes in at most 30 engine commits, not {commits}"
    );
    assert!(after.owner_largest_batch >= 100, "{after:?}");

    // Again over the same records, one of them stale: the batch stores nothing, its
    // writes go again one by one, and only the stale one conflicts.
    let mut updates: Vec<(String, u64)> = answers
        .iter()
        .map(|(key, r)| (key.clone(), *r.as_ref().unwrap()))
        .collect();
    updates[150].1 -= 1;
    let stale = updates[150].0.clone();
    let refused_before = node.replica.stats().snapshot().owner_batches_refused;
    let answers = burst(&nats, store, updates, Duration::from_millis(300)).await;
    for (key, r) in &answers {
        if *key == stale {
            assert_eq!(r, &Err(WriteError::Conflict), "{key}");
        } else {
            let rev = r.clone().unwrap_or_else(|e| panic!("{key}: {e:?}"));
            assert_eq!(revision(store, key).await, Some(rev), "{key}");
        }
    }
    let after = node.replica.stats().snapshot();
    assert!(after.owner_batches_refused > refused_before, "{after:?}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.12+: scripts/test.sh runs it"]
async fn writes_whose_claims_stopped_waiting_on_a_stalled_engine_are_never_made() {
    let nats = durable();
    let node = node(&nats, "cp-a", DuplicatePolicy::Replace).await;
    let store = node.replica.store();

    // The engine stalls past the writes' timeout (2 s) with one group in flight
    // and 99 writes queued behind it: every one fails; the queued ones are dropped
    // when their claims give up, not made once the engine is back.
    let store = Arc::new(store.clone());
    let write = |key: String| spawn_write(&store, key, 0);
    nats.pause();
    let mut tasks = vec![write("in-flight".to_owned())];
    tokio::time::sleep(Duration::from_millis(100)).await;
    tasks.extend((0..99).map(|i| write(format!("queued-{i}"))));
    tokio::time::sleep(Duration::from_secs(3)).await;
    nats.resume();
    for t in tasks {
        let (key, r) = t.await.expect("write task");
        assert!(matches!(r, Err(WriteError::Store(_))), "{key}: {r:?}");
    }
    // The write in flight may land once the engine resumes (an acknowledgement lost
    // as far as its claim knows: the holder reads that record again); none queued.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut landed = Vec::new();
    for i in 0..99 {
        let key = format!("queued-{i}");
        if revision(&store, &key).await.is_some() {
            landed.push(key);
        }
    }
    assert!(
        landed.is_empty(),
        "written after their claims gave up: {landed:?}"
    );
    // The engine takes writes again.
    let r = store.create("after", &OwnerRecord::live("cp-test")).await;
    assert!(r.is_ok(), "{r:?}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nats-server 2.12+: scripts/test.sh runs it"]
async fn a_crowd_of_edges_enrols_through_batched_claims() {
    let nats = durable();
    // Every group of two or more claims goes as a batch.
    let node = node_with(&[&nats], "cp-a", DuplicatePolicy::Replace, |c| {
        c.atomic_batch_min = 2;
    })
    .await;
    let edges: Vec<EdgeHandle> = (0..200)
        .map(|i| {
            EdgeClient::new(fast_edge(&format!("crowd-{i}")))
                .connect(node.addr())
                .unwrap()
        })
        .collect();
    let sessions = bounded("200 sessions", async {
        let mut sessions = Vec::new();
        for edge in &edges {
            sessions.push(edge.connected().await.expect("a session").session_id);
        }
        sessions
    })
    .await;
    // Each session is the revision of its Edge's live record, and is held here.
    for (i, session) in sessions.iter().enumerate() {
        let edge_id = format!("crowd-{i}");
        let current = node
            .replica
            .store()
            .entry(&edge_key(&edge_id))
            .await
            .expect("engine")
            .expect("a record");
        let record = current.record.expect("readable");
        assert!(record.live && record.replica == "cp-a", "{edge_id}");
        assert_eq!(current.revision, *session, "{edge_id}");
        assert_eq!(node.replica.owned_session(&edge_id), Some(*session));
    }
    let stats = node.replica.stats().snapshot();
    assert!(stats.owner_batches >= 1, "{stats:?}");
    assert!(stats.commits_per_owner_write() < 1.0, "{stats:?}");
    for edge in edges {
        edge.shutdown().await;
    }
    node.stop().await;
}

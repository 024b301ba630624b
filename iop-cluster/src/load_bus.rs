//! Placement and the load watch across replicas (PROTOCOL.md §8 "Routing"): each
//! replica publishes the load changes of the Edges it holds, as it applies them, and
//! folds in every other replica's, so that a placement or a watch on any replica sees
//! every Edge's load, whoever holds it.
//!
//! * **Publish** — every [`LINGER`], what changed of the replica's own Edges since
//!   (coalesced per Edge by its fleet: a new view, the providers whose numbers
//!   changed, a confirmation, offline, gone — each as the Edge stands then) goes out
//!   as one `LoadBatch` on `iop.cluster.<replica>.load` (split past
//!   [`MAX_BATCH_BYTES`]), numbered per run: a publisher that falls behind sends
//!   less, never loses track. With it, the reservations placed on the replica since,
//!   per provider, which every replica counts as the publisher does (so routers on
//!   different replicas do not herd either); those go out every
//!   [`RESERVATION_LINGER`], in a batch of their own between two of changes, since
//!   routers on other replicas may meet a pick within a batch's linger. An empty one
//!   every [`KEEPALIVE`] when
//!   nothing changed, so the others know the replica is there. Observation, not
//!   records: nothing is written to the engine.
//! * **Follow** — every replica subscribes to `iop.cluster.*.load` and applies each
//!   batch under its server's lock (`ControlPlaneHandle::apply_remote_load`). A
//!   missed batch, a restarted or lagging publisher, or a change that does not fit
//!   asks the publisher for a snapshot: pages of every Edge it holds (the `load-views`
//!   request on its routing subject), applied whole. A snapshot that fails is asked
//!   for again each second; a publisher silent for [`FORGET_AFTER`] is forgotten with
//!   its Edges (until then their numbers age and go stale in placement, never read as
//!   idle).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use futures_lite::StreamExt;
use iop_driver::iop_core::proto::Message;
use iop_driver::iop_core::proto::cluster::{EdgeLoadChange, LoadBatch};
use iop_driver::iop_fleet::MAX_REMOTE_REPLICAS;
use iop_driver::{ControlPlaneHandle, Runtime};

use crate::key::edge_key;
use crate::route::{Server, subject};
use crate::route_load::{decode, request_headers};

/// A batch's bytes at most (NATS's default message limit is 1 MiB).
pub const MAX_BATCH_BYTES: usize = 512 * 1024;
/// Views a page of a snapshot holds at most.
pub const LOAD_PAGE: usize = 400;
/// Pages one snapshot may have at most (a million Edges at [`LOAD_PAGE`]).
const MAX_PAGES: usize = 10_000;
/// How often a publisher sends what changed: far below a load update's interval, and
/// one batch for all a busy replica applies meanwhile.
pub const LINGER: Duration = Duration::from_millis(20);
/// How often a publisher sends the reservations placed on it since: sooner than its
/// changes, since each one untold lets a router on another replica reserve the same
/// slot (in the routing simulation, every 5 ms rather than 20 halves the requests
/// that wait; docs/benchmarks/load-plane.md §13c). A batch of reservations alone is
/// a few hundred bytes.
pub const RESERVATION_LINGER: Duration = Duration::from_millis(5);
/// Edges' changes taken into one publishing at most (then split by bytes).
const MAX_BATCH_CHANGES: usize = 16_384;
/// Providers' reservations a batch carries at most: each at most ~420 bytes (three
/// ids of 128), so they fill less than half of [`MAX_BATCH_BYTES`]; the rest wait for
/// the next batch.
const MAX_BATCH_RESERVATIONS: usize = 512;
/// The longest a replica stays silent: an empty batch then.
pub const KEEPALIVE: Duration = Duration::from_secs(1);
/// A publisher silent this long is forgotten with its Edges.
pub const FORGET_AFTER: Duration = Duration::from_secs(10);
/// How long a publisher has to answer for a page of its snapshot.
const PAGE_WAIT: Duration = Duration::from_secs(2);
/// The cursor of a snapshot's pages: the last Edge id of the page before (a request),
/// or of the last Edge considered for this one (its answer).
const AFTER: &str = "Iop-After";

/// The subjects every replica's load changes are published on.
pub const LOAD_SUBJECTS: &str = "iop.cluster.*.load";

/// The subject replica `replica` publishes its load changes on.
pub(crate) fn load_subject(replica: &str) -> String {
    format!("iop.cluster.{}.load", edge_key(replica))
}

/// Where this replica's publishing stands, shared with the answers to snapshot
/// requests.
#[derive(Debug)]
pub(crate) struct LoadBus {
    /// This run of the replica (its load watch's epoch).
    pub(crate) epoch: u64,
    /// The latest batch published.
    pub(crate) seq: AtomicU64,
}

/// Publishes the load changes of the Edges `cp` holds every [`LINGER`] (the replica's
/// tasks stop it).
pub(crate) async fn publish<R: Runtime>(
    client: async_nats::Client,
    cp: ControlPlaneHandle<R>,
    me: String,
    bus: Arc<LoadBus>,
) {
    let subject = load_subject(&me);
    cp.publish_load(true);
    let mut tick = tokio::time::interval(RESERVATION_LINGER);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_sent = Instant::now();
    let mut last_changes = Instant::now();
    loop {
        tick.tick().await;
        // Changes every LINGER (less half a tick, so that ticks a little late keep
        // the pace); reservations every tick.
        let changes = if last_changes.elapsed() + RESERVATION_LINGER / 2 >= LINGER {
            last_changes = Instant::now();
            cp.take_load_changes(MAX_BATCH_CHANGES)
        } else {
            Vec::new()
        };
        let mut reservations = cp.take_load_reservations(MAX_BATCH_RESERVATIONS);
        if changes.is_empty() && reservations.is_empty() && last_sent.elapsed() < KEEPALIVE {
            continue;
        }
        let held: usize = reservations.iter().map(|r| r.encoded_len() + 4).sum();
        for batch in split(changes, held) {
            let seq = bus.seq.fetch_add(1, Ordering::SeqCst) + 1;
            let batch = LoadBatch {
                replica: me.clone(),
                epoch: bus.epoch,
                seq,
                changes: batch,
                // All in the first batch (counted against its bytes).
                reservations: std::mem::take(&mut reservations),
                ..Default::default()
            };
            let body = batch.encode_to_vec();
            if let Err(e) = client.publish(subject.clone(), body.into()).await {
                tracing::debug!(error = %e, "cannot publish a load batch");
            }
        }
        last_sent = Instant::now();
    }
}

/// `changes` in batches of at most [`MAX_BATCH_BYTES`] (one change past it alone),
/// the first holding `first` bytes besides; one empty batch when there are none.
fn split(changes: Vec<EdgeLoadChange>, first: usize) -> Vec<Vec<EdgeLoadChange>> {
    let mut out = vec![Vec::new()];
    let mut bytes = first;
    for change in changes {
        let len = change.encoded_len() + 4;
        if bytes + len > MAX_BATCH_BYTES && out.last().is_some_and(|b| !b.is_empty()) {
            out.push(Vec::new());
            bytes = 0;
        }
        bytes += len;
        if let Some(batch) = out.last_mut() {
            batch.push(change);
        }
    }
    out
}

/// Follows every other replica's load changes on `sub` (`iop.cluster.*.load`) into
/// `cp`, asking for snapshots when out of step, until the subscription ends.
pub(crate) async fn follow<R: Runtime>(
    client: async_nats::Client,
    mut sub: async_nats::Subscriber,
    cp: ControlPlaneHandle<R>,
    me: String,
) {
    let mut heard: HashMap<String, Instant> = HashMap::new();
    let mut fetching: HashSet<String> = HashSet::new();
    let mut fetches = tokio::task::JoinSet::new();
    let mut tick = tokio::time::interval(KEEPALIVE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let fetch =
        |replica: String, fetching: &mut HashSet<String>, fetches: &mut tokio::task::JoinSet<_>| {
            if fetching.insert(replica.clone()) {
                let client = client.clone();
                fetches.spawn(async move {
                    let pages = snapshot(&client, &replica).await;
                    (replica, pages)
                });
            }
        };
    loop {
        tokio::select! {
            message = sub.next() => {
                let Some(message) = message else { return };
                let Some(batch) = batch_of(&message, &me) else { continue };
                if heard.len() >= MAX_REMOTE_REPLICAS && !heard.contains_key(&batch.replica) {
                    continue;
                }
                heard.insert(batch.replica.clone(), Instant::now());
                if cp.apply_remote_load(&batch).resync {
                    fetch(batch.replica, &mut fetching, &mut fetches);
                }
            }
            _ = tick.tick() => {
                for replica in cp.remote_load_syncing() {
                    fetch(replica, &mut fetching, &mut fetches);
                }
                heard.retain(|replica, at| {
                    let silent = at.elapsed() >= FORGET_AFTER;
                    if silent {
                        let gone = cp.forget_remote_replica(replica);
                        tracing::info!(%replica, edges = gone, "a replica's load went silent: forgotten");
                    }
                    !silent
                });
            }
            Some(done) = fetches.join_next(), if !fetches.is_empty() => {
                let Ok((replica, pages)) = done else { continue };
                fetching.remove(&replica);
                if let Some(pages) = pages
                    && cp.apply_load_snapshot(&pages).resync
                {
                    fetch(replica, &mut fetching, &mut fetches);
                }
            }
        }
    }
}

/// The batch `message` carries, when it is another replica's, of this schema, and on
/// that replica's own subject.
fn batch_of(message: &async_nats::Message, me: &str) -> Option<LoadBatch> {
    let batch = LoadBatch::decode(message.payload.as_ref()).ok()?;
    let own = message.subject.as_str() == load_subject(&batch.replica);
    (own && batch.replica != me && !batch.snapshot).then_some(batch)
}

/// Every page of `replica`'s snapshot, in order; `None` when one does not come in
/// time, or is not a page of one snapshot of this schema.
async fn snapshot(client: &async_nats::Client, replica: &str) -> Option<Vec<LoadBatch>> {
    let mut pages: Vec<LoadBatch> = Vec::new();
    let mut after = String::new();
    for _ in 0..MAX_PAGES {
        let mut headers = request_headers("load-views");
        headers.insert(AFTER, after.as_str());
        let request = async_nats::Request::new()
            .headers(headers)
            .timeout(Some(PAGE_WAIT));
        let reply = client.send_request(subject(replica), request);
        let reply = tokio::time::timeout(PAGE_WAIT * 2, reply)
            .await
            .ok()?
            .ok()?;
        let page: LoadBatch = decode(reply.headers.as_ref(), &reply.payload)?;
        let first = pages.first().unwrap_or(&page);
        if !page.snapshot || page.replica != replica || page.epoch != first.epoch {
            return None;
        }
        let next = reply
            .headers
            .as_ref()
            .and_then(|h| h.get(AFTER))
            .map(|v| v.as_str().to_owned())?;
        let more = page.more;
        pages.push(page);
        if !more {
            return Some(pages);
        }
        if next <= after {
            return None;
        }
        after = next;
    }
    None
}

/// This replica's page of its snapshot after the request's cursor: up to
/// [`LOAD_PAGE`] Edges it holds, each a whole view, within [`MAX_BATCH_BYTES`] (a view
/// alone past it is left out), numbered with the latest batch published (every
/// change it carries is in the page).
pub(crate) fn own_page<R: Runtime>(
    server: &Server<R>,
    headers: &HeaderMap,
) -> (HeaderMap, Vec<u8>) {
    let after = headers.get(AFTER).map(|v| v.as_str()).unwrap_or_default();
    let seq = server.load_bus.seq.load(Ordering::SeqCst);
    let (mut changes, mut more) = server.cp.load_page(after, LOAD_PAGE);
    let next = changes
        .last()
        .map_or_else(|| after.to_owned(), |c| c.edge_id.clone());
    let mut bytes = 0;
    let fits = changes.iter().take_while(|c| {
        bytes += c.encoded_len() + 4;
        bytes <= MAX_BATCH_BYTES
    });
    let fit = fits.count();
    let next = if fit < changes.len() {
        // The rest on the next page; a first view alone too big is skipped.
        let kept = fit.max(1);
        more = true;
        let cursor = changes.get(kept - 1).map(|c| c.edge_id.clone());
        changes.truncate(fit);
        cursor.unwrap_or(next)
    } else {
        next
    };
    let page = LoadBatch {
        replica: server.me.clone(),
        epoch: server.load_bus.epoch,
        seq,
        snapshot: true,
        more,
        changes,
        ..Default::default()
    };
    let mut out = HeaderMap::new();
    out.insert(AFTER, next.as_str());
    (out, page.encode_to_vec())
}

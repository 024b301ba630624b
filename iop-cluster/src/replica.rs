//! One Control Plane replica of a cluster: the ownership-claim seam of its core
//! answered from the engine (PROTOCOL.md §8).
//!
//! A replica runs six tasks (on tokio) beside its Control Plane server, whose core
//! defers claims to it: [`ClusterConfig::directory`] (or
//! [`ExternalDirectory`](iop_driver::iop_core::cp::ExternalDirectory), which defers
//! them even when the replica cannot decide them):
//! * **claims** — each [`CpEvent::OwnershipClaim`] is decided against the owners
//!   bucket ([`ownership::claim`]) and answered; a granted session whose hello went away
//!   meanwhile is released at once. Each `EdgeDisconnected` of a session it was granted
//!   releases the record by compare-and-set on that session's id, so a stale close
//!   never touches a newer owner's record;
//! * **supersede inbox** — the winner of a record held by another replica sends that
//!   replica a message (`iop.cluster.<replica>.superseded`, again after 1, 5 and 15 s
//!   in case the former owner was reconnecting); the former owner's session gets
//!   `GoAway{SUPERSEDED}`;
//! * **watch** — every replica also watches the owners bucket and closes a session
//!   of its own whose record moved on, so a lost message never leaves two live
//!   sessions for long;
//! * **routes** — answers status requests, commands and view requests for the Edges
//!   it holds, from any replica's [`Router`] ([`route`]);
//! * **commands** — writes the records of the commands sent to its Edges, and hands
//!   an Edge's unfinished ones to the core when it wins the Edge from another replica
//!   ([`commands`](crate::commands));
//! * **heartbeat** — renews the replica's liveness entry (expiring after three
//!   heartbeats), and releases records of sessions that are no longer live here (a
//!   disconnect event lost to a slow subscription).
//!
//! At start a replica releases the records that name it from an earlier run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use async_nats::jetstream::{self, kv};
use futures_lite::StreamExt;
use iop_driver::iop_core::cp::{Claim, ClaimAnswer, CpEvent, CpEventKind};
use iop_driver::{ControlPlaneHandle, Notice, Runtime, SubscribeOptions, Subscription};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::commands::CommandLog;
use crate::key::{edge_id_of, edge_key};
use crate::nats::{ClusterConfig, NatsStore};
use crate::ownership::{self, ClaimContext, Claimed, Former, StoreError};
use crate::record::{Current, OwnerRecord};
use crate::route::{self, Fleet, Router, ViewEncoder};
use crate::stats::ClusterStats;

/// Why a replica could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The engine could not be reached or refused an operation.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The supersede inbox could not be subscribed.
    #[error("cluster engine: cannot subscribe: {0}")]
    Subscribe(String),
}

/// The message that tells a replica it lost an Edge.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Superseded {
    edge_id: String,
    session_id: u64,
    by_session_id: u64,
}

fn inbox(replica: &str) -> String {
    format!("iop.cluster.{}.superseded", edge_key(replica))
}

/// The sessions this replica was granted: Edge id → (session id, whether the core
/// took the grant). A grant not yet taken is left alone by the heartbeat's sweep.
pub(crate) type Owned = Arc<Mutex<HashMap<String, (u64, bool)>>>;

pub(crate) fn owned_get(owned: &Owned, edge_id: &str) -> Option<u64> {
    owned
        .lock()
        .ok()
        .and_then(|o| o.get(edge_id).map(|(s, _)| *s))
}

fn owned_put(owned: &Owned, edge_id: &str, session_id: u64, taken: bool) {
    if let Ok(mut o) = owned.lock() {
        o.insert(edge_id.to_owned(), (session_id, taken));
    }
}

/// Removes `edge_id` from `owned` if it is at `session_id`; true when it was.
fn owned_take(owned: &Owned, edge_id: &str, session_id: u64) -> bool {
    let Ok(mut o) = owned.lock() else {
        return false;
    };
    if o.get(edge_id).map(|(s, _)| *s) == Some(session_id) {
        o.remove(edge_id);
        true
    } else {
        false
    }
}

/// A running replica; see the [module docs](self).
pub struct Replica {
    config: ClusterConfig,
    stats: Arc<ClusterStats>,
    js: jetstream::Context,
    cp_events: Option<JoinHandle<()>>,
    store: NatsStore,
    owned: Owned,
    views: Arc<OnceLock<ViewEncoder>>,
    router: Router,
    commands: CommandLog,
    claims: JoinHandle<()>,
    others: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("replica_id", &self.config.replica_id)
            .finish_non_exhaustive()
    }
}

impl Replica {
    /// Starts replica `config.replica_id` of the cluster on `client` for the Control
    /// Plane behind `cp`.
    pub async fn start<R: Runtime>(
        client: async_nats::Client,
        cp: ControlPlaneHandle<R>,
        config: ClusterConfig,
    ) -> Result<Replica, ClusterError> {
        let js = jetstream::new(client.clone());
        let store = NatsStore::open(&js, &config).await?;
        crate::events::open_stream(&js, config.bucket_replicas).await?;
        let me = config.replica_id.clone();
        store.heartbeat(&me).await?;
        // Records naming this replica are from an earlier run: none of its sessions
        // is live now.
        for key in store.keys().await? {
            if let Some(current) = ownership::OwnershipStore::entry(&store, &key).await?
                && current
                    .record
                    .as_ref()
                    .is_some_and(|r| r.live && r.replica == me)
            {
                ownership::release(&store, &me, &key, current.revision).await?;
            }
        }
        let owned: Owned = Arc::default();
        let inbox_sub = client
            .subscribe(inbox(&me))
            .await
            .map_err(|e| ClusterError::Subscribe(e.to_string()))?;
        // Every record's latest value first, then each change.
        let watch = store
            .owners
            .watch_with_history(">")
            .await
            .map_err(|e| StoreError(e.to_string()))?;
        let routes = client
            .subscribe(route::subject(&me))
            .await
            .map_err(|e| ClusterError::Subscribe(e.to_string()))?;
        let fleet: Fleet = Arc::default();
        let views: Arc<OnceLock<ViewEncoder>> = Arc::default();
        let stats = config.stats.clone();
        let bucket = crate::commands::open_bucket(&js, &config).await?;
        let (commands, command_tasks) = CommandLog::start(
            bucket,
            cp.clone(),
            owned.clone(),
            stats.clone(),
            config.op_timeout,
        );
        let router = Router::new(
            client.clone(),
            js.clone(),
            store.clone(),
            me.clone(),
            fleet.clone(),
            stats.clone(),
            commands.clone(),
        );
        let server = Arc::new(route::Server {
            client: client.clone(),
            cp: cp.clone(),
            owned: owned.clone(),
            views: views.clone(),
            commands: commands.clone(),
        });
        let events = cp.subscribe_with(
            SubscribeOptions::default()
                .kinds([CpEventKind::OwnershipClaim, CpEventKind::EdgeDisconnected]),
        );
        stats.heartbeat(true, std::time::Duration::ZERO);
        stats.serving(true);
        let ctx = Arc::new(Ctx {
            cp: cp.clone(),
            store: store.clone(),
            client: client.clone(),
            me: me.clone(),
            owned: owned.clone(),
            fleet: fleet.clone(),
            stats: stats.clone(),
            commands: commands.clone(),
        });
        let claims = tokio::spawn(claim_loop(events, ctx.clone()));
        let mut others = command_tasks;
        others.extend([
            tokio::spawn(inbox_loop(inbox_sub, ctx.clone())),
            tokio::spawn(watch_loop(watch, ctx.clone())),
            tokio::spawn(route::serve(routes, server)),
            tokio::spawn(heartbeat_loop(ctx, config.heartbeat)),
        ]);
        Ok(Replica {
            config,
            stats,
            js,
            cp_events: None,
            store,
            owned,
            views,
            router,
            commands,
            claims,
            others,
        })
    }

    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        &self.config.replica_id
    }

    /// The session id of `edge_id`'s live session on this replica, if it holds one.
    pub fn owned_session(&self, edge_id: &str) -> Option<u64> {
        owned_get(&self.owned, edge_id)
    }

    /// The replica's counters (also the router's and the event publisher's).
    pub fn stats(&self) -> Arc<ClusterStats> {
        self.stats.clone()
    }

    /// Reaches any Edge of the cluster through the replica holding it.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// Answers other replicas' view requests with `encoder`'s JSON (the admin API's
    /// shape, say); until it is set, they get none. Set once: a second call is ignored.
    pub fn serve_views(
        &self,
        encoder: impl Fn(&iop_driver::iop_core::cp::EdgeView) -> serde_json::Value
        + Send
        + Sync
        + 'static,
    ) {
        let _ = self.views.set(Box::new(encoder));
    }

    /// Publishes this Control Plane's events of `kinds` on the fleet's stream, as
    /// `encode` writes them ([`events`](crate::events)); any replica's
    /// [`Router::events`] reads them. Called once: a second call replaces the first.
    pub fn publish_events<R: Runtime>(
        &mut self,
        cp: ControlPlaneHandle<R>,
        kinds: Vec<CpEventKind>,
        encode: crate::events::EventEncoder,
    ) {
        if let Some(task) = self.cp_events.take() {
            task.abort();
        }
        self.cp_events = Some(tokio::spawn(crate::events::publish_loop(
            self.js.clone(),
            cp,
            self.config.replica_id.clone(),
            kinds,
            encode,
            self.stats.clone(),
        )));
    }

    /// The command records this replica writes ([`commands`](crate::commands)).
    pub fn commands(&self) -> &CommandLog {
        &self.commands
    }

    /// The engine's records, for inspection.
    pub fn store(&self) -> &NatsStore {
        &self.store
    }

    /// Stops at once, releasing nothing: the records stay as they are and the liveness
    /// entry expires on its own — what a crash of the process leaves behind.
    pub fn abort(self) {
        self.stats.serving(false);
        self.claims.abort();
        if let Some(task) = self.cp_events {
            task.abort();
        }
        for task in self.others {
            task.abort();
        }
    }

    /// Stops the replica. Call it after the Control Plane's own shutdown: the
    /// sessions' closes are released first (waited for at most one heartbeat), then
    /// the liveness entry is removed.
    pub async fn shutdown(self) {
        self.stats.serving(false);
        let _ = tokio::time::timeout(self.config.heartbeat, self.claims).await;
        if let Some(task) = self.cp_events {
            // Its subscription ends with the Control Plane, after the last events.
            let _ = tokio::time::timeout(self.config.heartbeat, task).await;
        }
        for task in self.others {
            task.abort();
        }
        let _ = self.store.retire(&self.config.replica_id).await;
    }
}

/// What the replica's tasks share.
struct Ctx<R: Runtime> {
    cp: ControlPlaneHandle<R>,
    store: NatsStore,
    client: async_nats::Client,
    me: String,
    owned: Owned,
    fleet: Fleet,
    stats: Arc<ClusterStats>,
    commands: CommandLog,
}

/// Answers claims and releases the records of ended sessions.
async fn claim_loop<R: Runtime>(mut events: Subscription<CpEvent>, ctx: Arc<Ctx<R>>) {
    while let Some(notice) = events.next().await {
        match notice {
            Notice::Event(CpEvent::OwnershipClaim(claim)) => {
                let ctx = ctx.clone();
                // Claims of different Edges go on side by side; one Edge's are ordered
                // by the compare-and-set.
                tokio::spawn(async move { answer(claim, &ctx).await });
            }
            Notice::Event(CpEvent::EdgeDisconnected {
                edge_id,
                session_id,
                ..
            }) if owned_take(&ctx.owned, &edge_id, session_id) => {
                let key = edge_key(&edge_id);
                if let Err(e) = ownership::release(&ctx.store, &ctx.me, &key, session_id).await {
                    tracing::warn!(%edge_id, session_id, error = %e, "cannot release the ownership record");
                }
            }
            // A lost disconnect is caught by the heartbeat's sweep, a lost claim by the
            // hello timeout.
            _ => {}
        }
    }
}

async fn answer<R: Runtime>(claim: Claim, ctx: &Ctx<R>) {
    let key = edge_key(&claim.edge_id);
    let context = ClaimContext {
        policy: claim.policy,
        local_session_id: claim.local_session_id,
    };
    let stats = &ctx.stats;
    // The record as the watch mirrors it: one write, not a read and a write, when it
    // is current.
    let hint = ctx.fleet.lock().ok().map(|f| {
        f.get(&claim.edge_id)
            .map(|(replica, live, revision)| Current {
                record: Some(OwnerRecord {
                    replica: replica.clone(),
                    live: *live,
                }),
                revision: *revision,
            })
    });
    let claimed = ownership::claim_counting(&ctx.store, &ctx.me, &key, context, hint, || {
        stats.conflict()
    })
    .await;
    let answer = match claimed {
        Ok(Claimed::Granted {
            session_id,
            former,
            returning,
        }) => {
            // Known before the core takes it: a close that follows at once releases it.
            owned_put(&ctx.owned, &claim.edge_id, session_id, false);
            if returning {
                adopt(ctx, &claim).await;
            }
            if ctx
                .cp
                .answer_claim(claim.conn, ClaimAnswer::Granted { session_id })
                .is_err()
            {
                // The hello is gone (closed, timed out): the record is released.
                if owned_take(&ctx.owned, &claim.edge_id, session_id) {
                    let _ = ownership::release(&ctx.store, &ctx.me, &key, session_id).await;
                }
                return;
            }
            stats.granted();
            if let Ok(mut o) = ctx.owned.lock()
                && let Some(entry) = o.get_mut(&claim.edge_id)
                && entry.0 == session_id
            {
                entry.1 = true;
            }
            if let Some(former) = former {
                tell_former(&ctx.client, &claim.edge_id, &former, session_id).await;
            }
            return;
        }
        Ok(Claimed::Held) => {
            stats.held();
            ClaimAnswer::Held
        }
        Ok(Claimed::Contended) => {
            stats.unavailable();
            ClaimAnswer::Unavailable
        }
        Err(e) => {
            tracing::warn!(edge_id = %claim.edge_id, error = %e, "ownership claim failed");
            stats.unavailable();
            ClaimAnswer::Unavailable
        }
    };
    let _ = ctx.cp.answer_claim(claim.conn, answer);
}

/// Hands the core the unfinished commands the engine holds for the claim's Edge (sent
/// by whichever replica held it before). Without the engine the claim goes on without
/// them: the Edge's replays of commands it holds are then counted and dropped.
async fn adopt<R: Runtime>(ctx: &Ctx<R>, claim: &Claim) {
    match ctx.commands.unfinished(&claim.edge_id).await {
        Ok(unfinished) => {
            ctx.commands.seed(&claim.edge_id, &unfinished).await;
            if unfinished.commands.is_empty() {
                return;
            }
            // An error means the hello went away; `answer_claim` finds that too.
            if let Ok(kept) = ctx.cp.adopt_commands(claim.conn, unfinished.commands) {
                ctx.stats.adopted(kept.len());
            }
        }
        Err(e) => {
            tracing::warn!(edge_id = %claim.edge_id, error = %e, "cannot read the edge's command records");
        }
    }
}

async fn tell_former(client: &async_nats::Client, edge_id: &str, former: &Former, by: u64) {
    let message = Superseded {
        edge_id: edge_id.to_owned(),
        session_id: former.session_id,
        by_session_id: by,
    };
    let payload: bytes::Bytes = serde_json::to_vec(&message).unwrap_or_default().into();
    let subject = inbox(&former.replica);
    let _ = client.publish(subject.clone(), payload.clone()).await;
    // A core NATS message is lost when the former owner is reconnecting (a NATS server
    // of the cluster died, say), and its watch may take a while to recover then: the
    // message goes again a few times (closing is idempotent: only that session closes).
    let client = client.clone();
    tokio::spawn(async move {
        for after in RETELL {
            tokio::time::sleep(after).await;
            let _ = client.publish(subject.clone(), payload.clone()).await;
        }
    });
}

/// When a supersede message is sent again, each after the one before.
const RETELL: [std::time::Duration; 3] = [
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(4),
    std::time::Duration::from_secs(10),
];

/// Closes `session_id` of `edge_id` here: `by` took the Edge elsewhere.
fn lose<R: Runtime>(ctx: &Ctx<R>, edge_id: &str, session_id: u64, by: u64) {
    if owned_take(&ctx.owned, edge_id, session_id) {
        ctx.stats.lost();
        ctx.cp.ownership_lost(edge_id, session_id, by);
    }
}

async fn inbox_loop<R: Runtime>(mut sub: async_nats::Subscriber, ctx: Arc<Ctx<R>>) {
    while let Some(message) = sub.next().await {
        if let Ok(m) = serde_json::from_slice::<Superseded>(&message.payload) {
            lose(&ctx, &m.edge_id, m.session_id, m.by_session_id);
        }
    }
}

async fn watch_loop<R: Runtime>(mut watch: kv::Watch, ctx: Arc<Ctx<R>>) {
    while let Some(Ok(entry)) = watch.next().await {
        let Some(edge_id) = edge_id_of(&entry.key) else {
            continue;
        };
        let record = match entry.operation {
            kv::Operation::Put => OwnerRecord::decode(&entry.value),
            kv::Operation::Delete | kv::Operation::Purge => None,
        };
        if let Ok(mut f) = ctx.fleet.lock() {
            match &record {
                Some(r) => {
                    f.insert(edge_id.clone(), (r.replica.clone(), r.live, entry.revision));
                }
                None => {
                    f.remove(&edge_id);
                }
            }
        }
        let Some(ours) = owned_get(&ctx.owned, &edge_id) else {
            continue;
        };
        // A newer record: another replica's, or a stranger's write. Our own newer
        // records are grants of a local duplicate, which the core supersedes itself.
        if entry.revision > ours && record.as_ref().is_none_or(|r| r.replica != ctx.me) {
            lose(&ctx, &edge_id, ours, entry.revision);
        }
    }
}

async fn heartbeat_loop<R: Runtime>(ctx: Arc<Ctx<R>>, every: std::time::Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let started = std::time::Instant::now();
        let renewed = ctx.store.heartbeat(&ctx.me).await;
        ctx.stats.heartbeat(renewed.is_ok(), started.elapsed());
        if let Err(e) = renewed {
            tracing::warn!(error = %e, "cannot renew this replica's liveness entry");
        }
        // Sessions granted here that are no longer live (their disconnect event was
        // lost): their records are released. Only those are copied out (the lock
        // order is `owned`, then the Control Plane's state; nothing takes them the other
        // way round).
        let stale: Vec<(String, u64)> = ctx
            .owned
            .lock()
            .map(|o| {
                o.iter()
                    .filter(|(k, (s, taken))| *taken && !ctx.cp.session_live(k, *s))
                    .map(|(k, (s, _))| (k.clone(), *s))
                    .collect()
            })
            .unwrap_or_default();
        for (edge_id, session_id) in stale {
            if owned_take(&ctx.owned, &edge_id, session_id) {
                let key = edge_key(&edge_id);
                let _ = ownership::release(&ctx.store, &ctx.me, &key, session_id).await;
            }
        }
    }
}

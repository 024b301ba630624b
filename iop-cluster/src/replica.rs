//! One Control Plane replica of a cluster: the ownership-claim seam of its core
//! answered from the engine (PROTOCOL.md §8).
//!
//! A replica runs beside its Control Plane server, whose core defers claims to it
//! ([`ClusterConfig::directory`], or
//! [`ExternalDirectory`](iop_driver::iop_core::cp::ExternalDirectory), which defers
//! them even when the replica cannot decide them). Its ownership rules are its
//! [`Holder`]'s, a deterministic state machine; these tasks
//! drive it:
//! * **claims** — each [`CpEvent::OwnershipClaim`](iop_driver::iop_core::cp::CpEvent::OwnershipClaim) is decided against the owners
//!   bucket and answered, unless its record moved on while it was pending; each
//!   `EdgeDisconnected` of a session it was granted releases the record by
//!   compare-and-set on that session's id (retried until done), so a stale close never
//!   touches a newer owner's record;
//! * **supersede notices** — the winner of a record held by another replica tells
//!   that replica (`iop.cluster.<replica>.superseded`, again after 1, 5 and 15 s); its
//!   session gets `GoAway{SUPERSEDED}`;
//! * **watch** — every replica watches the owners bucket, keeping its map of the fleet
//!   and closing a session of its own whose record moved on; a watch that ends or fails
//!   is restarted with backoff;
//! * **reconcile** — on every watch restart, every reconnect to the engine and every
//!   30 s, the record of every held session is read from the stream's leader (sessions
//!   whose record moved on are closed), records naming this replica without a session
//!   here are released, and the fleet map is rebuilt;
//! * **routes** — answers status requests, commands and view requests for the Edges
//!   it holds, from any replica's [`Router`] ([`route`]);
//! * **commands** — writes the records of the commands sent to its Edges, and hands
//!   an Edge's unfinished ones to the core when it wins the Edge from another replica
//!   ([`commands`](crate::commands));
//! * **load** — publishes the load changes of the Edges it holds and follows every
//!   other replica's, so that placement and the load watch see the whole fleet
//!   ([`load_bus`]);
//! * **heartbeat** — renews the replica's liveness entry (expiring after three
//!   heartbeats).
//!
//! Records naming this replica from an earlier run are released as its first watch
//! finds them.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use async_nats::jetstream;
use iop_driver::iop_core::cp::CpEventKind;
use iop_driver::{ControlPlaneHandle, Runtime};
use tokio::task::JoinHandle;

use crate::commands::CommandLog;
use crate::driver::{Driver, HolderRef, held_session, inbox};
use crate::holder::Holder;
use crate::liveness::{Liveness, LivenessError, Renewal};
use crate::load_bus::{self, LOAD_SUBJECTS, LoadBus};
use crate::nats::{ClusterConfig, NatsStore};
use crate::ownership::StoreError;
use crate::route::{self, Router};
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
    /// Another process runs with this replica id, or its liveness entry could not be
    /// written.
    #[error(transparent)]
    Liveness(#[from] LivenessError),
}

/// A running replica; see the [module docs](self).
pub struct Replica {
    config: ClusterConfig,
    stats: Arc<ClusterStats>,
    js: jetstream::Context,
    cp_events: Option<JoinHandle<()>>,
    store: NatsStore,
    holder: HolderRef,
    router: Router,
    commands: CommandLog,
    claims: JoinHandle<()>,
    others: Vec<JoinHandle<()>>,
    liveness: Arc<Liveness>,
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
        let liveness = Arc::new(
            Liveness::take(
                store.replicas.clone(),
                &me,
                config.heartbeat,
                config.op_timeout,
            )
            .await?,
        );
        let inbox_sub = client
            .subscribe(inbox(&me))
            .await
            .map_err(|e| ClusterError::Subscribe(e.to_string()))?;
        let routes = client
            .subscribe(route::subject(&me))
            .await
            .map_err(|e| ClusterError::Subscribe(e.to_string()))?;
        let origin = std::time::Instant::now();
        let stats = config.stats.clone();
        let holder: HolderRef = Arc::new(Mutex::new(Holder::new(
            me.clone(),
            config.holder,
            stats.clone(),
            iop_driver::iop_core::Instant::ZERO,
        )));
        let bucket = crate::commands::open_bucket(&js, &config).await?;
        let (commands, command_tasks) = CommandLog::start(
            bucket,
            cp.clone(),
            holder.clone(),
            stats.clone(),
            config.op_timeout,
        );
        // Every command is recorded in the engine before it is sent.
        cp.set_command_journal(Some(Arc::new(commands.clone())));
        let router = Router::new(
            client.clone(),
            js.clone(),
            store.clone(),
            me.clone(),
            holder.clone(),
            stats.clone(),
            commands.clone(),
        );
        let load_bus = Arc::new(LoadBus {
            epoch: cp.load_watch_epoch(),
            seq: AtomicU64::new(0),
        });
        let loads = client
            .subscribe(LOAD_SUBJECTS)
            .await
            .map_err(|e| ClusterError::Subscribe(e.to_string()))?;
        let server = Arc::new(route::Server {
            client: client.clone(),
            cp: cp.clone(),
            holder: holder.clone(),
            me: me.clone(),
            commands: commands.clone(),
            stats: stats.clone(),
            permits: Arc::new(tokio::sync::Semaphore::new(
                config.max_routed_requests.max(1),
            )),
            max_wait: config.max_routed_wait,
            load_bus: load_bus.clone(),
        });
        let driver = Arc::new(Driver {
            cp: cp.clone(),
            store: store.clone(),
            client: client.clone(),
            holder: holder.clone(),
            commands: commands.clone(),
            stats: stats.clone(),
            wake: Arc::default(),
            watch: Default::default(),
            origin,
            me: me.clone(),
            ops: Default::default(),
            replayed: tokio::sync::watch::channel(false).0,
            replayed_generation: AtomicU64::new(0),
            liveness: liveness.clone(),
        });
        // Claims are heard before the directory defers any: one deferred before the
        // subscription would wait for its hello's timeout.
        let claim_events = driver.claim_events();
        stats.heartbeat(true, std::time::Duration::ZERO);
        stats.serving(true);
        // The holder's first action starts the watch.
        driver.with(|_, _, _| {});
        let claims = tokio::spawn(driver.clone().cp_events(claim_events));
        let mut others = command_tasks;
        others.extend([
            tokio::spawn(driver.clone().inbox(inbox_sub)),
            tokio::spawn(driver.clone().timer()),
            tokio::spawn(route::serve(routes, server)),
            tokio::spawn(load_bus::publish(
                client.clone(),
                cp.clone(),
                me.clone(),
                load_bus,
            )),
            tokio::spawn(load_bus::follow(
                client.clone(),
                loads,
                cp.clone(),
                me.clone(),
            )),
            tokio::spawn(heartbeat_loop(
                driver.clone(),
                client,
                liveness.clone(),
                config.heartbeat,
            )),
            tokio::spawn({
                let (driver, connected) = (driver.clone(), config.connected.clone());
                async move {
                    loop {
                        connected.notified().await;
                        driver.reconnected();
                    }
                }
            }),
        ]);
        // Serving already; the records an earlier run left live are released before
        // this returns.
        driver.settled(config.op_timeout * 5).await;
        Ok(Replica {
            config,
            stats,
            js,
            cp_events: None,
            store,
            holder,
            router,
            commands,
            claims,
            others,
            liveness,
        })
    }

    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        &self.config.replica_id
    }

    /// The session id of `edge_id`'s live session on this replica, if it holds one.
    pub fn owned_session(&self, edge_id: &str) -> Option<u64> {
        held_session(&self.holder, edge_id)
    }

    /// The replica's counters (also the router's and the event publisher's).
    pub fn stats(&self) -> Arc<ClusterStats> {
        self.stats.clone()
    }

    /// Reaches any Edge of the cluster through the replica holding it.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// Publishes this Control Plane's events of `kinds` on the fleet's stream, as
    /// `encode` writes them ([`events`](crate::events)); any replica's
    /// [`Router::events`] reads them. Called once: a second call replaces the first.
    /// Sessions the replica accepted before the call are not published: to publish
    /// every one, take an [`event_feed`](crate::events::event_feed) before
    /// [`start`](Self::start) and hand it to [`publish_feed`](Self::publish_feed).
    pub fn publish_events<R: Runtime>(
        &mut self,
        cp: ControlPlaneHandle<R>,
        kinds: Vec<CpEventKind>,
        encode: crate::events::EventEncoder,
    ) {
        self.publish_feed(crate::events::event_feed(&cp, kinds), encode);
    }

    /// Publishes the events of `feed` (taken before the replica started) on the
    /// fleet's stream, as `encode` writes them. Called once: a second call replaces
    /// the first.
    pub fn publish_feed(
        &mut self,
        feed: crate::events::EventFeed,
        encode: crate::events::EventEncoder,
    ) {
        if let Some(task) = self.cp_events.take() {
            task.abort();
        }
        self.cp_events = Some(tokio::spawn(crate::events::publish_loop(
            self.js.clone(),
            feed,
            self.config.replica_id.clone(),
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
        self.liveness.retire().await;
    }
}

/// Renews the replica's liveness entry every `every`, and reconciles when the engine
/// comes back: the client reconnected, or renewals succeed again after failing.
async fn heartbeat_loop<R: Runtime>(
    driver: Arc<Driver<R>>,
    client: async_nats::Client,
    liveness: Arc<Liveness>,
    every: std::time::Duration,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut was_up = true;
    let mut was_connected = true;
    loop {
        ticker.tick().await;
        let started = std::time::Instant::now();
        let renewed = liveness.renew().await;
        driver.stats.heartbeat(renewed.is_ok(), started.elapsed());
        match &renewed {
            Ok(Renewal::Fenced) if !driver.stats.snapshot().fenced => {
                tracing::error!(
                    replica = %driver.me,
                    "another process took this replica's liveness entry: this one is fenced \
                     and decides no more claims"
                );
                driver.stats.fence();
            }
            Err(e) => tracing::warn!(error = %e, "cannot renew this replica's liveness entry"),
            _ => {}
        }
        let connected = client.connection_state() == async_nats::connection::State::Connected;
        if (renewed.is_ok() && !was_up) || (connected && !was_connected) {
            driver.reconnected();
        }
        was_up = renewed.is_ok();
        was_connected = connected;
    }
}

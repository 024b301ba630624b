//! The tasks that run a replica's [`Holder`] against the engine: its Control Plane's
//! claims and disconnects in, engine operations, the supervised watch, supersede
//! notices and the timer; every [`Action`] carried out.
//!
//! The holder is behind one lock, taken before the Control Plane's own (never the
//! other way round): a grant and its check against the records seen are one step.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_nats::jetstream::kv;
use futures_lite::StreamExt;
use iop_driver::iop_core::Instant;
use iop_driver::iop_core::cp::{ClaimAnswer, ConnectionId, CpEvent, CpEventKind};
use iop_driver::{ControlPlaneHandle, Notice, Runtime, SubscribeOptions, Subscription};

use crate::commands::CommandLog;
use crate::holder::{Action, Holder, Op, OpId, OpResult, Sessions, Superseded};
use crate::key::{edge_id_of, edge_key};
use crate::nats::NatsStore;
use crate::ownership::{OwnershipStore, StoreError};
use crate::record::OwnerRecord;
use crate::stats::ClusterStats;
use iop_driver::iop_core::proto::Message as _;

/// A replica's holder, shared by its tasks, its router and its route server.
pub(crate) type HolderRef = Arc<Mutex<Holder>>;

/// Locks the holder (a poisoned lock is taken over: the holder's state stays
/// consistent between its calls).
pub(crate) fn lock(holder: &HolderRef) -> MutexGuard<'_, Holder> {
    holder.lock().unwrap_or_else(|p| p.into_inner())
}

/// The session of `edge_id` the replica holds.
pub(crate) fn held_session(holder: &HolderRef, edge_id: &str) -> Option<u64> {
    lock(holder).session(edge_id)
}

/// The subject of `replica`'s supersede notices.
pub(crate) fn inbox(replica: &str) -> String {
    format!("iop.cluster.{}.superseded", edge_key(replica))
}

/// Claims and disconnects the replica's subscription holds undelivered at most, and
/// the bytes they may take (a claim is an id, a connection and a few numbers: well
/// under 512 bytes).
const CLAIM_BACKLOG: usize = 65_536;
const CLAIM_BACKLOG_BYTES: usize = CLAIM_BACKLOG * 512;

/// When a supersede notice is sent again, each after the one before: a core NATS
/// message is lost while its receiver reconnects (its watch and reconcile close the
/// session all the same; the notice is only the fast path).
const RETELL: [Duration; 3] = [
    Duration::from_secs(1),
    Duration::from_secs(4),
    Duration::from_secs(10),
];

/// Engine operations of the holder in flight at once.
pub(crate) const MAX_IN_FLIGHT: usize = 128;

/// The holder's engine operations waiting to run, and the runners taking them.
#[derive(Default)]
pub(crate) struct OpQueue {
    waiting: VecDeque<(OpId, Op)>,
    /// Runner tasks alive (at most [`MAX_IN_FLIGHT`]).
    runners: usize,
}

/// The Control Plane as the holder reaches it.
pub(crate) struct Core<'a, R: Runtime>(&'a ControlPlaneHandle<R>);

impl<R: Runtime> Sessions for Core<'_, R> {
    fn answer(&mut self, conn: ConnectionId, answer: ClaimAnswer) -> bool {
        self.0.answer_claim(conn, answer).is_ok()
    }

    fn waiting(&self, conn: ConnectionId) -> bool {
        self.0.claim_waiting(conn)
    }

    fn lose(&mut self, edge_id: &str, session_id: u64, by: u64) -> bool {
        let closed = self.0.ownership_lost(edge_id, session_id, by);
        if closed {
            tracing::info!(
                edge_id,
                session_id,
                by,
                "session closed: its ownership record moved on"
            );
        }
        closed
    }

    fn live(&self, edge_id: &str, session_id: u64) -> bool {
        self.0.session_live(edge_id, session_id)
    }

    fn elsewhere(&mut self, edge_id: &str) {
        self.0.load_elsewhere(edge_id);
    }
}

/// What the tasks share.
pub(crate) struct Driver<R: Runtime> {
    pub(crate) cp: ControlPlaneHandle<R>,
    pub(crate) store: NatsStore,
    pub(crate) client: async_nats::Client,
    pub(crate) holder: HolderRef,
    pub(crate) commands: CommandLog,
    pub(crate) stats: Arc<ClusterStats>,
    /// The holder's timer may have moved.
    pub(crate) wake: Arc<tokio::sync::Notify>,
    /// The current watch's number: an older one stops and its end is not reported.
    pub(crate) watch: AtomicU64,
    pub(crate) origin: std::time::Instant,
    /// This replica's id.
    pub(crate) me: String,
    /// Engine operations waiting for one of the [`MAX_IN_FLIGHT`] runners.
    pub(crate) ops: Mutex<OpQueue>,
    /// Set once a watch has delivered every record's latest value.
    pub(crate) replayed: tokio::sync::watch::Sender<bool>,
    /// The last watch that did.
    pub(crate) replayed_generation: AtomicU64,
    /// This process's liveness entry: no ownership record is written unless it is
    /// confirmed, nor once another process took it.
    pub(crate) liveness: Arc<crate::liveness::Liveness>,
}

impl<R: Runtime> Driver<R> {
    fn now(&self) -> Instant {
        Instant::from_elapsed(self.origin.elapsed())
    }

    /// Runs `f` on the holder and carries out what it asks for.
    pub(crate) fn with(self: &Arc<Self>, f: impl FnOnce(&mut Holder, Instant, &mut Core<'_, R>)) {
        let actions: Vec<Action> = {
            let mut holder = lock(&self.holder);
            let mut core = Core(&self.cp);
            f(&mut holder, self.now(), &mut core);
            std::iter::from_fn(|| holder.poll_action()).collect()
        };
        for action in actions {
            self.act(action);
        }
        self.wake.notify_one();
    }

    fn act(self: &Arc<Self>, action: Action) {
        match action {
            Action::Run { id, op } => {
                let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
                ops.waiting.push_back((id, op));
                // Bounded: a burst of claims queued inside the engine would hold up
                // the liveness renewal behind it, and the replica would take itself
                // for cut off. A storm's claims wait as queued operations (a few
                // hundred bytes each), not as tasks (an engine operation's future is
                // kilobytes): the replica's memory stays with its sessions.
                if ops.runners < MAX_IN_FLIGHT {
                    ops.runners += 1;
                    tokio::spawn(self.clone().run_ops());
                }
            }
            Action::Adopt {
                claim,
                edge_id,
                conn,
            } => {
                let this = self.clone();
                tokio::spawn(async move {
                    this.adopt(&edge_id, conn).await;
                    this.with(|h, now, core| h.adopted(now, claim, core));
                });
            }
            Action::Tell { replica, notice } => {
                let client = self.client.clone();
                tokio::spawn(tell(client, replica, notice));
            }
            Action::Watch => {
                let generation = self.watch.fetch_add(1, Ordering::Relaxed) + 1;
                tokio::spawn(self.clone().watch(generation));
            }
        }
    }

    /// One runner: runs the queued operations in turn until none is left.
    async fn run_ops(self: Arc<Self>) {
        loop {
            let next = {
                let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
                let next = ops.waiting.pop_front();
                if next.is_none() {
                    ops.runners -= 1;
                }
                next
            };
            let Some((id, op)) = next else { return };
            let result = self.execute(op).await;
            self.with(|h, now, core| h.op_done(now, id, result, core));
        }
    }

    async fn execute(&self, op: Op) -> OpResult {
        match op {
            Op::Read { edge_id, leader } => {
                let key = edge_key(&edge_id);
                OpResult::Read(if leader {
                    self.store.leader_entry(&key).await
                } else {
                    self.store.entry(&key).await
                })
            }
            Op::Write { .. } if self.stats.snapshot().fenced => OpResult::Written(Err(StoreError(
                "another process runs as this replica: it writes nothing".into(),
            )
            .into())),
            Op::Write { .. } if !self.liveness.confirmed() => OpResult::Written(Err(StoreError(
                "this replica's liveness is not confirmed (paused, or cut off from the engine)"
                    .into(),
            )
            .into())),
            Op::Write {
                edge_id,
                record,
                expected,
            } => {
                let key = edge_key(&edge_id);
                OpResult::Written(match expected {
                    None => self.store.create(&key, &record).await,
                    Some(revision) => self.store.update(&key, &record, revision).await,
                })
            }
            Op::Alive { replica } => OpResult::Alive(self.store.replica_alive(&replica).await),
        }
    }

    /// Hands the core the unfinished commands the engine holds for `edge_id` (sent by
    /// whichever replica held it before). Without the engine the claim goes on
    /// without them: the Edge's replays of commands it holds are then counted and
    /// dropped.
    async fn adopt(&self, edge_id: &str, conn: ConnectionId) {
        match self.commands.unfinished(edge_id).await {
            Ok(unfinished) => {
                self.commands.seed(edge_id, &unfinished).await;
                if unfinished.commands.is_empty() {
                    return;
                }
                // An error means the hello went away; the grant finds that too.
                if let Ok(kept) = self.cp.adopt_commands(conn, unfinished.commands) {
                    self.stats.adopted(kept.len());
                }
            }
            Err(e) => {
                tracing::warn!(edge_id, error = %e, "cannot read the edge's command records");
            }
        }
    }

    /// Runs watch number `generation` of the owners bucket (every record's latest
    /// value first, then each change) until it ends or a newer one replaces it.
    async fn watch(self: Arc<Self>, generation: u64) {
        let current = |this: &Self| this.watch.load(Ordering::Relaxed) == generation;
        // An empty bucket replays nothing: there is no last entry to wait for.
        let mut stream = self.store.owners.stream.clone();
        if stream.info().await.is_ok_and(|i| i.state.messages == 0) {
            self.caught_up(generation);
        }
        let started = self.store.owners.watch_with_history(">").await;
        let mut watch = match started {
            Ok(watch) => watch,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the ownership records");
                if current(&self) {
                    self.with(|h, now, _| h.watch_ended(now));
                }
                return;
            }
        };
        let ended = loop {
            let Some(entry) = watch.next().await else {
                break "it ended".to_owned();
            };
            if !current(&self) {
                return;
            }
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => break e.to_string(),
            };
            let Some(edge_id) = edge_id_of(&entry.key) else {
                if entry.delta == 0 {
                    self.caught_up(generation);
                }
                continue;
            };
            let record = match entry.operation {
                kv::Operation::Put => OwnerRecord::decode(&entry.value),
                kv::Operation::Delete | kv::Operation::Purge => None,
            };
            self.with(|h, now, core| h.observed(now, &edge_id, entry.revision, record, core));
            if entry.delta == 0 {
                self.caught_up(generation);
            }
        };
        if current(&self) {
            tracing::warn!(why = %ended, "the watch of the ownership records stopped; restarting it");
            self.with(|h, now, _| h.watch_ended(now));
        }
    }

    /// Watch number `generation` replayed every record: its map replaces the fleet
    /// map (once per watch).
    fn caught_up(self: &Arc<Self>, generation: u64) {
        if self.watch.load(Ordering::Relaxed) == generation
            && self.replayed_generation.swap(generation, Ordering::Relaxed) != generation
        {
            self.with(|h, now, _| h.replayed(now));
            self.replayed.send_replace(true);
        }
    }

    /// The Control Plane's claims and disconnects, for [`cp_events`](Self::cp_events).
    pub(crate) fn claim_events(&self) -> Subscription<CpEvent> {
        // Sized for a storm: every Edge of a drained or dead replica claims within a
        // second or two; claims lost to a lagging subscription are taken up again.
        self.cp.subscribe_with(
            SubscribeOptions::default()
                .kinds([CpEventKind::OwnershipClaim, CpEventKind::EdgeDisconnected])
                .capacity(CLAIM_BACKLOG)
                .byte_budget(CLAIM_BACKLOG_BYTES),
        )
    }

    /// Feeds the Control Plane's claims and disconnects (`events`, from
    /// [`claim_events`](Self::claim_events), taken before the directory defers any
    /// claim) to the holder, until it stops.
    pub(crate) async fn cp_events(self: Arc<Self>, mut events: Subscription<CpEvent>) {
        while let Some(notice) = events.next().await {
            match notice {
                Notice::Event(CpEvent::OwnershipClaim(claim)) => {
                    self.with(|h, now, core| h.claim(now, claim, core));
                }
                Notice::Event(CpEvent::EdgeDisconnected {
                    edge_id,
                    session_id,
                    ..
                }) => self.with(|h, now, _| h.session_ended(now, &edge_id, session_id)),
                // Claims lost with them are taken up from the core's list; disconnects
                // are found by the reconcile's sweep, run now.
                Notice::Lagged(n) => {
                    tracing::warn!(
                        lost = n,
                        "the replica fell behind its control plane's events"
                    );
                    self.take_waiting_claims();
                    self.with(|h, now, core| h.engine_reconnected(now, core));
                }
                _ => {}
            }
        }
    }

    /// Hands the holder every claim the core waits on an answer to (those it decides
    /// already, or answered meanwhile, it leaves alone).
    fn take_waiting_claims(self: &Arc<Self>) {
        let waiting = self.cp.claims_waiting();
        if waiting.is_empty() {
            return;
        }
        self.with(|h, now, core| {
            for claim in waiting {
                h.claim(now, claim, core);
            }
        });
    }

    /// Feeds supersede notices to the holder.
    pub(crate) async fn inbox(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(message) = sub.next().await {
            if let Ok(notice) = Superseded::decode(message.payload.clone()) {
                self.with(|h, now, core| h.told(now, notice, core));
            }
        }
    }

    /// Runs the holder's timer.
    pub(crate) async fn timer(self: Arc<Self>) {
        loop {
            let due = lock(&self.holder).poll_timeout();
            let sleep = match due {
                Some(at) => at.saturating_duration_since(self.now()),
                None => Duration::from_secs(3600),
            };
            tokio::select! {
                () = tokio::time::sleep(sleep) => {}
                () = self.wake.notified() => continue,
            }
            self.with(|h, now, core| h.handle_timeout(now, core));
        }
    }

    /// Waits (at most `bound`) until the first watch has replayed every record and the
    /// checks and releases that replay started are done: the records an earlier run of
    /// this replica left live are released.
    pub(crate) async fn settled(&self, bound: Duration) {
        let mut replayed = self.replayed.subscribe();
        let _ = tokio::time::timeout(bound, async {
            let _ = replayed.wait_for(|done| *done).await;
            loop {
                let (_, owed, reads) = lock(&self.holder).backlog();
                if owed == 0 && reads == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }

    /// The engine came back (the client reconnected, or liveness renewals succeed
    /// again): reconcile at once.
    pub(crate) fn reconnected(self: &Arc<Self>) {
        tracing::info!("the cluster engine is reachable again: reconciling ownership");
        self.with(|h, now, core| h.engine_reconnected(now, core));
    }
}

/// Tells `replica` it lost an Edge, and again after [`RETELL`].
async fn tell(client: async_nats::Client, replica: String, notice: Superseded) {
    let payload: bytes::Bytes = notice.encode_to_vec().into();
    let subject = inbox(&replica);
    let _ = client.publish(subject.clone(), payload.clone()).await;
    for after in RETELL {
        tokio::time::sleep(after).await;
        let _ = client.publish(subject.clone(), payload.clone()).await;
    }
}

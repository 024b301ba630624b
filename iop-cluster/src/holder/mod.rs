//! What one replica holds, as a deterministic state machine (PROTOCOL.md §8
//! "Ownership", "Duplicates across replicas", "Watches are supervised, ownership is
//! reconciled").
//!
//! A [`Holder`] knows the sessions its Control Plane was granted, the claims it is
//! deciding, the releases it still owes, and what it last saw of every ownership
//! record (its *fleet* map). It never touches the engine, a clock or a runtime: its
//! driver ([`Replica`](crate::Replica), or a seeded simulation) feeds it inputs — a
//! claim from the core, the result of an engine operation, a watch entry, a supersede
//! notice, the time — and carries out the [`Action`]s it asks for. It talks to its
//! Control Plane through [`Sessions`], called while the driver holds the holder, so
//! that a grant and the loss of its record are never decided on two sides of a race.
//!
//! The rules it keeps:
//! * **No grant after loss.** A claim registers with its Edge before it writes; every
//!   revision of the record seen from then on (watch, supersede notice, read, a write's
//!   acknowledgement) is remembered, and a claim whose write is older than one of them
//!   is refused `Unavailable` instead of granted. A grant goes to the core in the same
//!   step as that check.
//! * **A session whose record moved on is closed** (`GoAway{SUPERSEDED}`), as soon as
//!   a newer revision is seen — unless it may be this replica's own pending claim.
//! * **Releases are owed until done**: a release that failed is retried with backoff
//!   until it is written or the record moved on; a write whose outcome is unknown (a
//!   timeout) is checked by a read and released if it landed.
//! * **Supervised watch, periodic reconcile.** The watch is restarted (with backoff)
//!   when it ends, and on every restart, every reconnect to the engine and every
//!   [`HolderConfig::reconcile_every`] the holder reads the record of every session it
//!   holds from the engine's leader (closing those whose record moved on, or fell
//!   behind them: a store that lost writes), releases records naming it for Edges it
//!   does not hold (phantoms), sweeps sessions its core no longer has, and rebuilds
//!   its fleet map from a fresh watch.

mod claims;
mod reconcile;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use iop_driver::iop_core::Instant;
use iop_driver::iop_core::cp::{ClaimAnswer, ConnectionId};

use crate::ownership::{StoreError, WriteError};
use crate::record::{Current, OwnerRecord};
use crate::stats::ClusterStats;

pub use claims::ClaimId;

/// The Control Plane as a [`Holder`] reaches it (implemented over
/// `ControlPlaneHandle` by the replica, and by the simulation's fake cores).
pub trait Sessions {
    /// Answers the claim waiting on `conn`; false when none waits there any more (the
    /// hello closed or timed out, or the granted id is not above the Edge's last one).
    fn answer(&mut self, conn: ConnectionId, answer: ClaimAnswer) -> bool;
    /// Whether the hello on `conn` still waits on the answer to its claim.
    fn waiting(&self, conn: ConnectionId) -> bool;
    /// Closes session `session_id` of `edge_id` with `GoAway{SUPERSEDED}`: its record
    /// moved on to `by`. False when that session is not live.
    fn lose(&mut self, edge_id: &str, session_id: u64, by: u64) -> bool;
    /// Whether session `session_id` of `edge_id` is live.
    fn live(&self, edge_id: &str, session_id: u64) -> bool;
    /// Another replica holds `edge_id` now: a view of it here (of an earlier session)
    /// no longer counts in this replica's share of the fleet's load.
    fn elsewhere(&mut self, _edge_id: &str) {}
}

/// The notice that tells a replica it lost an Edge (`iop.cluster.<replica>.superseded`),
/// one of the replicas' typed messages (`proto/iop/cluster.proto`).
pub use iop_driver::iop_core::proto::cluster::Superseded;

/// Names one engine operation of a holder.
pub type OpId = u64;

/// An engine operation a holder asks its driver to run, answered with
/// [`Holder::op_done`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read `edge_id`'s record; `leader`: from the stream's leader (never a follower's
    /// copy), for a read that decides whether a session stays.
    Read {
        /// The Edge.
        edge_id: String,
        /// Read from the leader.
        leader: bool,
    },
    /// Write `record` for `edge_id` if the record is at `expected` (`None`: create).
    Write {
        /// The Edge.
        edge_id: String,
        /// What to write.
        record: OwnerRecord,
        /// The revision it must be at (`None`: it must not exist).
        expected: Option<u64>,
    },
    /// Whether `replica`'s liveness entry is there.
    Alive {
        /// The replica.
        replica: String,
    },
}

/// The result of an [`Op`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// Of [`Op::Read`].
    Read(Result<Option<Current>, StoreError>),
    /// Of [`Op::Write`]: the new revision.
    Written(Result<u64, WriteError>),
    /// Of [`Op::Alive`].
    Alive(Result<bool, StoreError>),
}

/// What a holder asks its driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run `op` and answer with [`Holder::op_done`]`(id, …)`.
    Run {
        /// Its id.
        id: OpId,
        /// The operation.
        op: Op,
    },
    /// Hand the core the unfinished commands the engine holds for `edge_id` (whose
    /// claim waits on `conn`), then call [`Holder::adopted`]`(claim)`.
    Adopt {
        /// The claim.
        claim: ClaimId,
        /// Its Edge.
        edge_id: String,
        /// Its connection.
        conn: ConnectionId,
    },
    /// Tell `replica` it lost an Edge.
    Tell {
        /// The former owner.
        replica: String,
        /// The notice.
        notice: Superseded,
    },
    /// (Re)start the watch of the owners bucket with every record's latest value first
    /// ([`Holder::observed`] for each entry, [`Holder::replayed`] once every record's
    /// latest value came, [`Holder::watch_ended`] when it ends). A watch running
    /// already is replaced.
    Watch,
}

/// A holder's timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderConfig {
    /// How often every held record is read from the leader, phantoms released and the
    /// fleet map rebuilt (30 s).
    pub reconcile_every: Duration,
    /// The first wait before a failed release is retried or an ended watch restarted
    /// (200 ms); it doubles up to [`retry_max`](Self::retry_max).
    pub retry_base: Duration,
    /// The longest such wait (5 s).
    pub retry_max: Duration,
    /// Reconcile and check reads in flight at most (64).
    pub max_reads_in_flight: usize,
}

impl Default for HolderConfig {
    fn default() -> Self {
        Self {
            reconcile_every: Duration::from_secs(30),
            retry_base: Duration::from_millis(200),
            retry_max: Duration::from_secs(5),
            max_reads_in_flight: 64,
        }
    }
}

/// One Edge this replica holds a session of, or is claiming.
#[derive(Debug, Default, Clone, Copy)]
struct Held {
    /// The highest session granted here and taken by the core, while it is live.
    session: Option<u64>,
    /// Claims of the Edge being decided.
    pending: u32,
}

/// Why an operation runs.
#[derive(Debug, Clone)]
enum Purpose {
    Claim(ClaimId),
    Release {
        edge_id: String,
        session_id: u64,
    },
    /// A read of a record that may name this replica without a session here.
    Check {
        edge_id: String,
    },
    /// A leader read of a held session's record.
    Reconcile {
        edge_id: String,
        session_id: u64,
    },
}

/// A release still owed.
#[derive(Debug, Clone, Copy)]
struct Owed {
    due: Instant,
    delay: Duration,
    in_flight: bool,
}

/// The watch's supervision.
#[derive(Debug, Clone, Copy)]
struct WatchState {
    started: Instant,
    restart_at: Option<Instant>,
    delay: Duration,
}

/// The ownership state of one replica; see the [module docs](self).
#[derive(Debug)]
pub struct Holder {
    me: String,
    config: HolderConfig,
    stats: Arc<ClusterStats>,
    held: HashMap<String, Held>,
    /// Every record as last seen: watch, notices, reads, acknowledgements.
    fleet: HashMap<String, Current>,
    /// The fleet map a watch's replay is building, to replace `fleet` once it has
    /// replayed every record ([`Holder::replayed`]): a map kept only by "higher
    /// revision wins" would never forget a revision an engine that lost writes no
    /// longer has.
    rebuild: Option<HashMap<String, Current>>,
    runs: HashMap<ClaimId, claims::Run>,
    /// The connections of the claims in `runs`: a claim taken up twice (from its event
    /// and from the core's list of claims waiting) is decided once.
    claiming: HashSet<ConnectionId>,
    next_claim: ClaimId,
    ops: HashMap<OpId, Purpose>,
    next_op: OpId,
    actions: VecDeque<Action>,
    owed: BTreeMap<(String, u64), Owed>,
    /// Edges with a check read in flight.
    checking: BTreeSet<String>,
    /// Leader reads (checks, reconciles) waiting for a place.
    to_read: VecDeque<Purpose>,
    reads_in_flight: usize,
    watch: WatchState,
    next_reconcile: Instant,
}

impl Holder {
    /// The holder of replica `me`, starting at `now`: its first action starts the
    /// watch (whose replay finds the records an earlier run of `me` left live).
    pub fn new(
        me: impl Into<String>,
        config: HolderConfig,
        stats: Arc<ClusterStats>,
        now: Instant,
    ) -> Self {
        let mut holder = Self {
            me: me.into(),
            config,
            stats,
            held: HashMap::new(),
            fleet: HashMap::new(),
            rebuild: None,
            runs: HashMap::new(),
            claiming: HashSet::new(),
            next_claim: 0,
            ops: HashMap::new(),
            next_op: 0,
            actions: VecDeque::new(),
            owed: BTreeMap::new(),
            checking: BTreeSet::new(),
            to_read: VecDeque::new(),
            reads_in_flight: 0,
            watch: WatchState {
                started: now,
                restart_at: None,
                delay: config.retry_base,
            },
            next_reconcile: now + config.reconcile_every,
        };
        holder.start_watch(now);
        holder
    }

    /// This replica's id.
    pub fn replica_id(&self) -> &str {
        &self.me
    }

    /// The session of `edge_id` this replica holds (granted and taken by its core).
    pub fn session(&self, edge_id: &str) -> Option<u64> {
        self.held.get(edge_id).and_then(|h| h.session)
    }

    /// Every session held here: `(edge_id, session_id)`, in no order.
    pub fn sessions(&self) -> impl Iterator<Item = (&str, u64)> {
        self.held
            .iter()
            .filter_map(|(e, h)| h.session.map(|s| (e.as_str(), s)))
    }

    /// `edge_id`'s record as last seen.
    pub fn record(&self, edge_id: &str) -> Option<&Current> {
        self.fleet.get(edge_id)
    }

    /// The live owner of `edge_id` by the records seen: replica and session id.
    pub fn owner(&self, edge_id: &str) -> Option<(String, u64)> {
        let current = self.fleet.get(edge_id)?;
        match &current.record {
            Some(r) if r.live => Some((r.replica.clone(), current.revision)),
            _ => None,
        }
    }

    /// The replicas other than this one that hold a live session by the records
    /// seen, sorted.
    pub fn other_replicas(&self) -> Vec<String> {
        self.others_live().into_keys().collect()
    }

    /// How many live sessions each replica other than this one holds by the records
    /// seen.
    pub fn others_live(&self) -> BTreeMap<String, usize> {
        let mut others = BTreeMap::<String, usize>::new();
        for r in self.fleet.values().filter_map(|c| c.record.as_ref()) {
            if r.live && r.replica != self.me {
                *others.entry(r.replica.clone()).or_default() += 1;
            }
        }
        others
    }

    /// The next thing to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let owed = self
            .owed
            .values()
            .filter(|o| !o.in_flight)
            .map(|o| o.due)
            .min();
        [Some(self.next_reconcile), self.watch.restart_at, owed]
            .into_iter()
            .flatten()
            .min()
    }

    /// The watch started by the last [`Action::Watch`] has delivered every record's
    /// latest value: the map it built replaces the fleet map.
    pub fn replayed(&mut self, _now: Instant) {
        if let Some(rebuilt) = self.rebuild.take() {
            self.fleet = rebuilt;
        }
    }

    /// Another replica says it took `notice.edge_id` from this one.
    pub fn told(&mut self, now: Instant, notice: Superseded, core: &mut impl Sessions) {
        if notice.by_replica.is_empty() {
            // An older replica's notice, without the winner's name: it still closes.
            if let Some(session) = self.session(&notice.edge_id)
                && notice.by_session_id > session
            {
                self.lose(&notice.edge_id, session, notice.by_session_id, core);
            }
            return;
        }
        let record = OwnerRecord::live(&notice.by_replica);
        self.observed(
            now,
            &notice.edge_id,
            notice.by_session_id,
            Some(record),
            core,
        );
    }

    /// A record seen at `revision` (`record` `None`: deleted, purged or unreadable):
    /// an entry of the watch, or a read. A session held here whose record moved on is
    /// closed; a live record naming this replica without a session here is checked.
    pub fn observed(
        &mut self,
        now: Instant,
        edge_id: &str,
        revision: u64,
        record: Option<OwnerRecord>,
        core: &mut impl Sessions,
    ) {
        if self.remember(edge_id, revision, record, core) {
            self.check(now, edge_id);
        }
    }

    /// Remembers what a record says and closes the session held of its Edge if the
    /// record moved on from it. True when the record is a live one of this replica's
    /// that no session or claim here stands for: a phantom, if it is still there.
    fn remember(
        &mut self,
        edge_id: &str,
        revision: u64,
        record: Option<OwnerRecord>,
        core: &mut impl Sessions,
    ) -> bool {
        let ours_live = record
            .as_ref()
            .is_some_and(|r| r.live && r.replica == self.me);
        if record
            .as_ref()
            .is_some_and(|r| r.live && r.replica != self.me)
            && self
                .fleet
                .get(edge_id)
                .is_none_or(|c| revision > c.revision)
        {
            core.elsewhere(edge_id);
        }
        let current = Current { record, revision };
        if let Some(rebuild) = &mut self.rebuild
            && rebuild.get(edge_id).is_none_or(|c| revision > c.revision)
        {
            rebuild.insert(edge_id.to_owned(), current.clone());
        }
        if self
            .fleet
            .get(edge_id)
            .is_none_or(|c| revision > c.revision)
        {
            self.fleet.insert(edge_id.to_owned(), current);
        }
        let held = self.held.get(edge_id).copied().unwrap_or_default();
        if let Some(session) = held.session
            && revision > session
            // A live record of ours, newer than the session: a claim of this Edge
            // here may have written it, and decides when it is answered.
            && !(ours_live && held.pending > 0)
        {
            self.lose(edge_id, session, revision, core);
        }
        let held = self.held.get(edge_id).copied().unwrap_or_default();
        let latest = self
            .fleet
            .get(edge_id)
            .is_some_and(|c| c.revision == revision);
        ours_live && latest && held.pending == 0 && held.session.is_none()
    }

    /// Closes the session held of `edge_id`: its record moved on to `by`.
    fn lose(&mut self, edge_id: &str, session_id: u64, by: u64, core: &mut impl Sessions) {
        if let Some(h) = self.held.get_mut(edge_id)
            && h.session == Some(session_id)
        {
            h.session = None;
            self.forget_if_idle(edge_id);
            self.stats.lost();
            core.lose(edge_id, session_id, by);
        }
    }

    fn forget_if_idle(&mut self, edge_id: &str) {
        if self
            .held
            .get(edge_id)
            .is_some_and(|h| h.session.is_none() && h.pending == 0)
        {
            self.held.remove(edge_id);
        }
    }

    fn run(&mut self, purpose: Purpose, op: Op) {
        self.next_op += 1;
        let id = self.next_op;
        if matches!(purpose, Purpose::Check { .. } | Purpose::Reconcile { .. }) {
            self.reads_in_flight += 1;
        }
        self.ops.insert(id, purpose);
        self.actions.push_back(Action::Run { id, op });
    }

    /// The result of operation `id`.
    pub fn op_done(&mut self, now: Instant, id: OpId, result: OpResult, core: &mut impl Sessions) {
        let Some(purpose) = self.ops.remove(&id) else {
            return;
        };
        match purpose {
            Purpose::Claim(claim) => self.claim_step(now, claim, result, core),
            Purpose::Release {
                edge_id,
                session_id,
            } => self.released(now, edge_id, session_id, result, core),
            Purpose::Check { edge_id } => {
                self.read_done();
                self.checked(now, edge_id, result, core);
            }
            Purpose::Reconcile {
                edge_id,
                session_id,
            } => {
                self.read_done();
                self.reconciled(now, edge_id, session_id, result, core);
            }
        }
        self.next_reads();
    }

    fn read_done(&mut self) {
        self.reads_in_flight = self.reads_in_flight.saturating_sub(1);
    }

    /// A session granted here ended (its core's `EdgeDisconnected`): its record is
    /// released, by compare-and-set on its id.
    pub fn session_ended(&mut self, now: Instant, edge_id: &str, session_id: u64) {
        let Some(h) = self.held.get_mut(edge_id) else {
            return;
        };
        if h.session != Some(session_id) {
            return;
        }
        h.session = None;
        self.forget_if_idle(edge_id);
        self.owe_release(now, edge_id, session_id);
    }

    /// What this holder is doing, for tests and metrics: claims being decided,
    /// releases owed, reads in flight.
    pub fn backlog(&self) -> (usize, usize, usize) {
        (self.runs.len(), self.owed.len(), self.reads_in_flight)
    }
}

//! A seeded simulation of three replicas' [`Holder`]s — the state machines
//! `iop-cluster`'s replicas run — over an in-memory engine, with the faults real
//! deployments have: operations applied but reported failed (a lost acknowledgement),
//! stale reads from a follower, watches that die, supersede notices lost, replicas
//! paused (their liveness expiring), cut off from the engine, crashed and restarted,
//! and, in some runs, an engine that loses its last acknowledged writes. Edge
//! processes (two of them sharing one id) say hello, disconnect and time out.
//!
//! Checked at every step, and after the faults heal:
//! * each Edge process sees its session ids strictly increase (not in runs where the
//!   engine loses writes: fencing then rests on the engine, PROTOCOL.md §8);
//! * two live sessions of one Edge id on two replicas exist only while the older one's
//!   replica cannot reach the engine (paused, cut off), plus one reconcile interval;
//! * once healed and settled: at most one live session per Edge id, its record names
//!   it, no live record names a replica without that session, and every replica's
//!   fleet map is the engine's records.

mod checks;
mod steps;
mod world;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use iop_cluster::holder::{Action, ClaimId, Holder, HolderConfig, Op, OpId, OpResult, Superseded};
use iop_cluster::ownership::{StoreError, WriteError};
use iop_cluster::{ClusterStats, Current};
use iop_core::testing::SimRng;
use iop_driver::iop_core::Instant;
use iop_driver::iop_core::cp::{Claim, ConnectionId, DuplicatePolicy};
use world::{Core, Seen, Store};

const REPLICAS: usize = 3;
const EDGES: usize = 4;
/// Edge processes: one per id, and a second one for edge-0.
const PROCS: usize = EDGES + 1;
const HEARTBEAT: Duration = Duration::from_secs(2);
const RECONCILE: Duration = Duration::from_secs(30);
/// Time for what a healthy replica learns to reach it (operations, watch entries) on
/// top of the reconcile interval, in simulated time.
const SLACK: Duration = Duration::from_secs(15);
/// Steps of one run before its faults heal.
const STEPS: usize = 500;

fn name(r: usize) -> String {
    format!("cp-{r}")
}

fn edge(p: usize) -> String {
    format!("edge-{}", p % EDGES)
}

struct Node {
    holder: Option<Holder>,
    /// The counters of every holder this replica ran.
    stats: Arc<ClusterStats>,
    core: Core,
    paused_until: Option<Instant>,
    cut_off_until: Option<Instant>,
    /// The watch's undelivered entries (`None`: no watch runs).
    watch: Option<VecDeque<(String, Current)>>,
    /// Entries of the watch's replay not delivered yet: `replayed` is due once 0.
    replay_left: usize,
    inbox: VecDeque<Superseded>,
    adopts: VecDeque<ClaimId>,
    renewed: Instant,
    /// Since when it can reach the engine (the start of the two-sessions bound).
    healthy_since: Instant,
    /// The highest revision of each record its holder was given (watch, notices,
    /// reads, acknowledgements): a grant below it is a grant after loss.
    told: BTreeMap<String, u64>,
}

impl Node {
    fn reachable(&self) -> bool {
        self.holder.is_some() && self.paused_until.is_none() && self.cut_off_until.is_none()
    }
}

struct Pending {
    node: usize,
    id: OpId,
    op: Op,
    result: Option<OpResult>,
}

struct Sim {
    rng: SimRng,
    now: Instant,
    store: Store,
    nodes: Vec<Node>,
    ops: Vec<Pending>,
    policy: DuplicatePolicy,
    loses_writes: bool,
    next_conn: u64,
    /// Edge process → (replica, connection) of its hello or session.
    procs: Vec<Option<(usize, ConnectionId)>>,
    last_session: Vec<u64>,
    /// Edge id → when two live sessions of it were first seen, and which.
    overlaps: BTreeMap<String, (Instant, (usize, u64))>,
    grants: usize,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = SimRng::new(seed);
        let policy = if rng.chance(1, 2) {
            DuplicatePolicy::Replace
        } else {
            DuplicatePolicy::Reject
        };
        let loses_writes = rng.chance(1, 5);
        let mut sim = Sim {
            rng,
            now: Instant::ZERO,
            store: Store::default(),
            nodes: Vec::new(),
            ops: Vec::new(),
            policy,
            loses_writes,
            next_conn: 0,
            procs: vec![None; PROCS],
            last_session: vec![0; PROCS],
            overlaps: BTreeMap::new(),
            grants: 0,
        };
        for r in 0..REPLICAS {
            sim.nodes.push(Node {
                holder: None,
                stats: Arc::default(),
                core: Core::default(),
                paused_until: None,
                cut_off_until: None,
                watch: None,
                replay_left: 0,
                inbox: VecDeque::new(),
                adopts: VecDeque::new(),
                renewed: Instant::ZERO,
                healthy_since: Instant::ZERO,
                told: BTreeMap::new(),
            });
            sim.boot(r);
        }
        sim
    }

    fn config() -> HolderConfig {
        let mut config = HolderConfig::default();
        config.reconcile_every = RECONCILE;
        config
    }

    fn boot(&mut self, r: usize) {
        let stats = self.nodes[r].stats.clone();
        let holder = Holder::new(name(r), Self::config(), stats, self.now);
        let node = &mut self.nodes[r];
        node.holder = Some(holder);
        node.core = Core::default();
        node.renewed = self.now;
        node.healthy_since = self.now;
        node.told.clear();
        self.pump(r);
    }

    /// Runs `f` on replica `r`'s holder and carries out its actions.
    fn with(&mut self, r: usize, f: impl FnOnce(&mut Holder, Instant, &mut Core)) {
        let now = self.now;
        let node = &mut self.nodes[r];
        let Some(holder) = node.holder.as_mut() else {
            return;
        };
        f(holder, now, &mut node.core);
        self.pump(r);
    }

    fn pump(&mut self, r: usize) {
        while let Some(action) = self.nodes[r].holder.as_mut().and_then(Holder::poll_action) {
            match action {
                Action::Run { id, op } => self.ops.push(Pending {
                    node: r,
                    id,
                    op,
                    result: None,
                }),
                Action::Adopt { claim, .. } => self.nodes[r].adopts.push_back(claim),
                Action::Tell { replica, notice } => {
                    let to: usize = replica[3..].parse().unwrap();
                    // A core NATS message: lost when either end is out of reach, and
                    // now and then anyway.
                    if self.nodes[r].reachable()
                        && self.nodes[to].reachable()
                        && !self.rng.chance(1, 3)
                    {
                        self.nodes[to].inbox.push_back(notice);
                    }
                }
                Action::Watch => self.start_watch(r),
            }
        }
        self.edges_see(r);
    }

    fn start_watch(&mut self, r: usize) {
        if self.nodes[r].cut_off_until.is_some() {
            self.nodes[r].watch = None;
            if let Some(h) = self.nodes[r].holder.as_mut() {
                h.watch_ended(self.now);
            }
            return;
        }
        let replay: VecDeque<(String, Current)> = self
            .store
            .history
            .iter()
            .filter_map(|(e, h)| h.last().map(|c| (e.clone(), c.clone())))
            .collect();
        self.nodes[r].replay_left = replay.len();
        self.nodes[r].watch = Some(replay);
        if self.nodes[r].replay_left == 0 {
            self.with(r, |h, now, _| h.replayed(now));
        }
    }

    /// Replica `r`'s holder is given revision `revision` of `edge`'s record.
    fn tell(&mut self, r: usize, edge: &str, revision: u64) {
        let told = self.nodes[r].told.entry(edge.to_owned()).or_default();
        *told = (*told).max(revision);
    }

    /// What replica `r`'s core did, as its Edge processes see it.
    fn edges_see(&mut self, r: usize) {
        for seen in std::mem::take(&mut self.nodes[r].core.seen) {
            match seen {
                Seen::Accepted {
                    edge,
                    proc,
                    session,
                } => {
                    self.grants += 1;
                    let told = self.nodes[r].told.get(&edge).copied().unwrap_or(0);
                    assert!(
                        self.loses_writes || session >= told,
                        "cp-{r} granted {edge} session {session} after it was told of revision {told}"
                    );
                    if !self.loses_writes {
                        assert!(
                            session > self.last_session[proc],
                            "process {proc} of {edge}: session {session} after {}",
                            self.last_session[proc]
                        );
                    }
                    self.last_session[proc] = session;
                }
                Seen::Ended { proc } => {
                    if self.procs[proc].is_some_and(|(on, _)| on == r) {
                        self.procs[proc] = None;
                    }
                }
            }
        }
    }
}

#[test]
fn replicas_keep_one_live_session_per_edge_under_faults() {
    let var = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    // IOP_SIM_SEED=N replays one run.
    let (first, seeds) = match var("IOP_SIM_SEED") {
        Some(seed) => (seed, 1),
        None => (0, var("IOP_SIM_SEEDS").unwrap_or(10_000)),
    };
    let (mut grants, mut losing) = (0, 0);
    let mut seen = iop_cluster::ClusterSnapshot::default();
    for seed in first..first + seeds {
        let run = std::panic::catch_unwind(|| {
            let mut sim = Sim::new(seed);
            for _ in 0..STEPS {
                sim.step();
            }
            sim.settle();
            let snapshots: Vec<_> = sim.nodes.iter().map(|n| n.stats.snapshot()).collect();
            (sim.grants, sim.loses_writes, snapshots)
        });
        match run {
            Ok((g, l, snapshots)) => {
                grants += g;
                losing += usize::from(l);
                for s in snapshots {
                    seen.claims_overtaken += s.claims_overtaken;
                    seen.phantoms_released += s.phantoms_released;
                    seen.rollbacks += s.rollbacks;
                    seen.releases_failed += s.releases_failed;
                    seen.watch_restarts += s.watch_restarts;
                    seen.ownership_lost += s.ownership_lost;
                }
            }
            Err(_) => panic!("seed {seed} failed (IOP_SIM_SEED={seed} replays it)"),
        }
    }
    // The runs did claim Edges, and every rule had faults to act on.
    assert!(
        grants as u64 > seeds * EDGES as u64,
        "only {grants} grants in {seeds} runs"
    );
    if seeds >= 1_000 {
        assert!(losing > 0);
        for (what, n) in [
            ("claims overtaken while pending", seen.claims_overtaken),
            ("phantoms released", seen.phantoms_released),
            ("rolled-back sessions closed", seen.rollbacks),
            ("failed releases retried", seen.releases_failed),
            ("watches restarted", seen.watch_restarts),
            (
                "sessions closed as their record moved on",
                seen.ownership_lost,
            ),
        ] {
            assert!(n > 0, "no {what} in {seeds} runs");
        }
    }
}

//! [`Sim`]: a seeded random fault schedule run on a [`Pair`], every invariant checked.

use std::collections::BTreeMap;
use std::time::Duration;

use super::handlers::Plan;
use super::monitor::Violation;
use super::node_side::NodeSide;
use super::pair::{NetConfig, Pair, Side};
use super::rng::SimRng;
use crate::WallClock;
use crate::cp::{CommandOutcome, CommandSpec, ConfigError, CpConfig, CpEvent};
use crate::edge::{EdgeConfig, EdgeEvent, Outcome, TargetLevel};
use crate::proto::CommandPhase;
use crate::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};

/// Wall-clock origin of every simulated Edge and CP.
pub(super) const ORIGIN_UNIX_MS: u64 = 1_800_000_000_000;
pub(super) const NODES: [&str; 2] = ["n0", "n1"];
const SELECTORS: [&str; 5] = ["*", "node:n0", "node:n1", "node:gone", "not a selector"];

/// What one simulation run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Everything random comes from it.
    pub seed: u64,
    /// Random steps before the faults stop.
    pub steps: usize,
    /// Distinct Edge ids (each with one main process).
    pub edges: usize,
}

impl SimConfig {
    /// `steps` steps of two Edges from `seed`.
    pub fn new(seed: u64, steps: usize) -> Self {
        Self {
            seed,
            steps,
            edges: 2,
        }
    }
}

/// How a run went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Hash of every event and byte emitted, in order.
    pub hash: u64,
    /// Broken rules, oldest first (empty when the run is clean).
    pub violations: Vec<Violation>,
    /// Simulated time at the end, in ms.
    pub sim_ms: u64,
    /// Commands the CP sent.
    pub commands: usize,
    /// Sessions the CP (or CPs, across restarts) accepted.
    pub sessions: u64,
    /// How often each thing happened: CP events by kind (`cp.<Variant>`), command
    /// ends by phase (`end.<PHASE>`, `end.Lost`, `end.Rejected`), rejections by reason
    /// (`reject.<REASON>`), Edge closes by
    /// reason (`edge.close.<Reason>`). Shows what a run exercised.
    pub tally: BTreeMap<String, u64>,
}

/// A seeded simulation: a [`Pair`] with `edges` Edge ids, driven through random steps
/// of application activity and faults, then left to settle; the
/// [`Monitor`](super::Monitor) checks every invariant throughout and at the end.
#[derive(Debug)]
pub struct Sim {
    pub(super) pair: Pair,
    pub(super) rng: SimRng,
    pub(super) config: SimConfig,
    /// Process index → the commands its handler holds.
    pub(super) held: BTreeMap<usize, Vec<(String, Plan)>>,
    /// Process index → events already read.
    pub(super) cursor: BTreeMap<usize, usize>,
    pub(super) nodes: BTreeMap<usize, NodeSide>,
    /// Process index of each Edge id's main process.
    pub(super) mains: Vec<usize>,
    /// Duplicate processes alive now: (Edge id index, process index).
    pub(super) duplicates: Vec<(usize, usize)>,
    pub(super) commands: usize,
    /// Edge id index → commands sent to it.
    pub(super) sent: BTreeMap<usize, Vec<String>>,
    /// CP restarts so far.
    cp_restarts: u64,
}

pub(super) fn edge_id(k: usize) -> String {
    format!("edge-{k}")
}

pub(super) fn edge_config(k: usize, seed: u64) -> EdgeConfig {
    let mut c = EdgeConfig::new(edge_id(k), seed)
        .with_operation("edge.ping", TargetLevel::Edge)
        .with_operation("node.restart", TargetLevel::Node);
    c.wall_clock = WallClock::new(ORIGIN_UNIX_MS);
    c
}

pub(super) fn node_config(id: &str) -> NodeConfig {
    NodeConfig::new(id)
        .with_label("zone", "a")
        .with_provider(ProviderConfig::new(
            "p0",
            ProviderCategory::LocalInference,
            2,
            1,
        ))
}

pub(super) fn registry() -> NodeRegistry {
    let mut r = NodeRegistry::new();
    for id in NODES {
        let _ = r.configure(node_config(id), ORIGIN_UNIX_MS);
    }
    r
}

impl Sim {
    /// A new simulation; nothing has run yet.
    pub fn new(config: SimConfig) -> Result<Self, ConfigError> {
        let mut rng = SimRng::new(config.seed);
        let net = NetConfig {
            latency_min: Duration::from_millis(rng.range(0, 5)),
            latency_max: Duration::from_millis(rng.range(5, 200)),
            split_reads: rng.chance(1, 2),
        };
        let cp = CpConfig {
            wall_clock: WallClock::new(ORIGIN_UNIX_MS),
            command_id_epoch: config.seed,
            ..CpConfig::default()
        };
        let mut sim = Self {
            pair: Pair::new(rng.next_u64(), cp, net)?,
            rng,
            config,
            held: BTreeMap::new(),
            cursor: BTreeMap::new(),
            nodes: BTreeMap::new(),
            mains: Vec::new(),
            duplicates: Vec::new(),
            commands: 0,
            sent: BTreeMap::new(),
            cp_restarts: 0,
        };
        for k in 0..config.edges.max(1) {
            if let Some(i) = sim.spawn(k) {
                sim.mains.push(i);
            }
        }
        Ok(sim)
    }

    /// Runs `config.steps` random steps, then lets every fault clear and checks the
    /// end-of-run invariants.
    pub fn run(config: SimConfig) -> SimReport {
        match Self::new(config) {
            Ok(mut sim) => sim.execute(),
            Err(e) => SimReport {
                seed: config.seed,
                hash: 0,
                violations: vec![format!("CP config refused: {e}")],
                sim_ms: 0,
                commands: 0,
                sessions: 0,
                tally: BTreeMap::new(),
            },
        }
    }

    /// Runs this simulation (see [`Sim::run`]); the pair stays for inspection.
    pub fn execute(&mut self) -> SimReport {
        self.pair.advance(Duration::from_millis(10));
        for _ in 0..self.config.steps {
            self.step();
            if !self.pair.monitor().violations().is_empty() {
                break;
            }
        }
        if self.pair.monitor().violations().is_empty() {
            self.settle();
        }
        let tally = self.tally();
        SimReport {
            seed: self.config.seed,
            hash: self.pair.hash(),
            violations: self.pair.monitor().violations().to_vec(),
            sim_ms: self.pair.now.as_millis(),
            commands: self.commands,
            sessions: tally.get("cp.SessionAccepted").copied().unwrap_or(0),
            tally,
        }
    }

    fn tally(&self) -> BTreeMap<String, u64> {
        let mut t = BTreeMap::new();
        let mut bump = |k: String| *t.entry(k).or_insert(0) += 1;
        for e in &self.pair.cp_events {
            let kind = format!("{e:?}");
            let name = kind.split([' ', '(', '{']).next().unwrap_or("");
            bump(format!("cp.{name}"));
            match e {
                CpEvent::CommandEvent { event, .. } => {
                    if let Ok(phase) = CommandPhase::try_from(event.phase)
                        && !matches!(phase, CommandPhase::Accepted | CommandPhase::Running)
                    {
                        bump(format!("end.{}", phase.as_str_name()));
                    }
                }
                CpEvent::CommandEnded { ending, .. } => bump(format!("end.{:?}", ending.kind())),
                CpEvent::CommandResponded {
                    outcome: Some(CommandOutcome::Rejected(reason)),
                    ..
                } => {
                    bump("end.Rejected".into());
                    bump(format!("reject.{}", reason.as_str_name()));
                }
                _ => {}
            }
        }
        for p in &self.pair.edges {
            for e in &p.events {
                if let EdgeEvent::Closed { reason, .. } = e {
                    let kind = format!("{reason:?}");
                    let name = kind.split([' ', '(', '{']).next().unwrap_or("");
                    bump(format!("edge.close.{name}"));
                }
            }
        }
        let stats = self.pair.cp.stats();
        t.insert("load.updates".into(), stats.load_updates);
        t.insert("load.resyncs".into(), stats.load_update_resyncs);
        t
    }

    /// The pair, to look at after a run.
    pub fn pair(&self) -> &Pair {
        &self.pair
    }

    fn spawn(&mut self, k: usize) -> Option<usize> {
        let seed = self.rng.next_u64();
        self.pair.add_edge(edge_config(k, seed), registry()).ok()
    }

    pub(super) fn any_process(&mut self) -> usize {
        let alive: Vec<usize> = (0..self.pair.edges.len())
            .filter(|i| self.pair.edges.get(*i).is_some_and(|p| p.alive))
            .collect();
        alive.get(self.rng.index(alive.len())).copied().unwrap_or(0)
    }

    /// One random step.
    fn step(&mut self) {
        let roll = self.rng.range(0, 99);
        match roll {
            0..=24 => {
                let ms = self.rng.range(1, 2_000);
                self.advance_ms(ms);
            }
            25..=31 => {
                let ms = self.rng.range(2_000, 20_000);
                self.advance_ms(ms);
            }
            32..=43 => self.send_command(),
            44..=57 => self.work(),
            58..=63 => {
                let k = self.rng.index(self.mains.len());
                let nodes = if self.rng.chance(1, 2) {
                    Vec::new()
                } else {
                    vec![self.node().to_owned()]
                };
                let _ = self.pair.request_status(&edge_id(k), nodes);
                self.advance_ms(1);
            }
            64..=77 => self.node_activity(),
            78..=79 => {
                let i = self.any_process();
                self.pair.disconnect(i);
            }
            80..=81 => {
                let i = self.any_process();
                self.pair.cut(i);
            }
            82..=83 => {
                let i = self.any_process();
                let side = if self.rng.chance(1, 2) {
                    Side::Cp
                } else {
                    Side::Edge
                };
                self.pair.half_open(i, side);
            }
            84..=85 => {
                let i = self.any_process();
                let on = !self.pair.edges.get(i).is_some_and(|p| p.partitioned);
                self.pair.partition(i, on);
            }
            86..=87 => self.duplicate(),
            88..=89 => self.pair.stale_close(),
            90..=91 => {
                let ms = self.rng.range(100, 20_000);
                self.pair.silence_cp(Duration::from_millis(ms));
            }
            92..=94 => {
                let ms = self.rng.range(1_000, 30_000);
                self.pair.jump(Duration::from_millis(ms));
                self.read_edge_events();
            }
            95..=96 => self.restart(false),
            97..=98 => self.restart(true),
            _ => self.restart_cp(),
        }
    }

    fn send_command(&mut self) {
        let k = self.rng.index(self.mains.len());
        if self.duplicate_of(k) {
            // Two live processes with one id would both run it (PROTOCOL.md §4.4: "runs
            // once" holds within one process); the sim keeps commands away from them.
            return;
        }
        let (operation, target_selector) = if self.rng.chance(1, 2) {
            ("edge.ping", String::new())
        } else {
            let s = SELECTORS
                .get(self.rng.index(SELECTORS.len()))
                .copied()
                .unwrap_or("*");
            ("node.restart", s.to_owned())
        };
        let timeout_ms = [0, 3_000, 20_000]
            .get(self.rng.index(3))
            .copied()
            .unwrap_or(0);
        let spec = CommandSpec::new(operation)
            .with_target(target_selector)
            .with_timeout_ms(timeout_ms);
        if let Ok(id) = self.pair.send_command(&edge_id(k), spec) {
            self.commands += 1;
            self.sent.entry(k).or_default().push(id);
        }
        self.advance_ms(1);
    }

    /// Starts a second process with a main process's id, or kills one.
    fn duplicate(&mut self) {
        if let Some((_, i)) = self.duplicates.pop() {
            let fin = self.rng.chance(1, 2);
            self.pair.crash(i, fin);
            self.held.remove(&i);
        } else {
            // Only once every command of that id has ended at the CP, so none is
            // re-sent to (and run by) both processes.
            let k = self.rng.index(self.mains.len());
            let id = edge_id(k);
            let all_ended = self.sent.get(&k).is_none_or(|ids| {
                ids.iter().all(|c| {
                    self.pair
                        .cp
                        .command(&id, c)
                        .is_none_or(|st| st.outcome.is_some())
                })
            });
            if all_ended && let Some(i) = self.spawn(k) {
                self.duplicates.push((k, i));
            }
        }
        self.advance_ms(1);
    }

    /// A main process restarts: it crashes (`graceful == false`) or shuts down
    /// (cancelling what it runs), and a fresh process with the same id starts.
    fn restart(&mut self, graceful: bool) {
        let k = self.rng.index(self.mains.len());
        let Some(&i) = self.mains.get(k) else {
            return;
        };
        if graceful {
            if self.rng.chance(1, 2) {
                // Drains first: new commands are refused DRAINING, EDGE_DRAINING is sent.
                let now = self.pair.now;
                if let Some(p) = self.pair.edges.get_mut(i) {
                    p.edge.drain(now);
                }
                let ms = self.rng.range(100, 10_000);
                self.advance_ms(ms);
            }
            let now = self.pair.now;
            if let Some(p) = self.pair.edges.get_mut(i) {
                p.edge.shutdown(now);
            }
            let ms = self.rng.range(1, 300);
            self.advance_ms(ms);
        }
        let seed = self.rng.next_u64();
        let _ = self.pair.restart_edge(i, edge_config(k, seed), registry());
        self.held.remove(&i);
        self.nodes.remove(&i);
        self.cursor.remove(&i);
        self.advance_ms(1);
    }

    /// The CP restarts: every connection drops, and the new CP knows no session or
    /// command (replays of old commands are counted and dropped). Session ids stay
    /// above the old ones, command ids come from a new epoch.
    fn restart_cp(&mut self) {
        self.cp_restarts += 1;
        let cp = CpConfig {
            wall_clock: WallClock::new(ORIGIN_UNIX_MS),
            command_id_epoch: self
                .config
                .seed
                .wrapping_mul(1_000)
                .wrapping_add(self.cp_restarts),
            session_id_floor: self.pair.monitor().last_session_id() + 1,
            ..CpConfig::default()
        };
        if let Err(e) = self.pair.restart_cp(cp) {
            let at = self.pair.now.as_millis();
            self.pair
                .monitor_mut()
                .fail(at, format!("CP restart refused: {e}"));
        }
        self.sent.clear();
        self.advance_ms(1);
    }

    fn duplicate_of(&self, k: usize) -> bool {
        self.duplicates.iter().any(|(d, _)| *d == k)
    }

    /// Faults stop: partitions heal, duplicates die, the CP wakes, handlers finish;
    /// then time passes until every command and status request must have ended.
    fn settle(&mut self) {
        for i in 0..self.pair.edges.len() {
            self.pair.partition(i, false);
        }
        while let Some((_, i)) = self.duplicates.pop() {
            self.pair.crash(i, true);
            self.held.remove(&i);
        }
        for _ in 0..2 {
            self.advance_ms(60_000);
            let now = self.pair.now;
            for (i, held) in std::mem::take(&mut self.held) {
                if let Some(p) = self.pair.edges.get_mut(i) {
                    for (id, _) in held {
                        let _ = p.edge.report_outcome(
                            now,
                            &id,
                            Outcome::Succeeded,
                            "",
                            BTreeMap::new(),
                        );
                    }
                }
            }
        }
        self.advance_ms(120_000);
        let at = self.pair.now.as_millis();
        for k in 0..self.mains.len() {
            if self.pair.cp.live_conn(&edge_id(k)).is_none() {
                self.pair.monitor_mut().fail(
                    at,
                    format!("{} not connected once faults cleared", edge_id(k)),
                );
            }
        }
        self.pair.monitor_mut().check_quiet(at);
        self.check_load_views(at);
    }
}

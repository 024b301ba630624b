//! [`Sim`]: a seeded random fault schedule run on a [`Pair`], every invariant checked.

use std::collections::BTreeMap;
use std::time::Duration;

use super::monitor::Violation;
use super::pair::{NetConfig, Pair, Side};
use super::rng::SimRng;
use crate::cp::{CommandSpec, CpConfig, CpConfigError, CpEvent};
use crate::edge::{EdgeConfig, EdgeEvent, Outcome, TargetLevel};
use crate::proto::CommandPhase;
use crate::registry::{
    Candidate, Generation, Lease, LeaseKind, NodeConfig, NodeRegistry, ProviderCategory,
    ProviderConfig, QueueTicket,
};
use crate::{Instant, WallClock};

/// Wall-clock origin of every simulated Edge and CP.
const ORIGIN_UNIX_MS: u64 = 1_800_000_000_000;
const NODES: [&str; 2] = ["n0", "n1"];
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
    /// Sessions the CP accepted.
    pub sessions: u64,
    /// How often each thing happened: CP events by kind (`cp.<Variant>`), command
    /// ends by phase (`end.<PHASE>`, `end.Lost`, `end.Rejected`), Edge closes by
    /// reason (`edge.close.<Reason>`). Shows what a run exercised.
    pub tally: BTreeMap<String, u64>,
}

/// How the simulated handler runs one command.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// When the handler reports next.
    next_at: Instant,
    running_reports: u8,
    /// `None`: the handler hangs and the Edge times the command out.
    outcome: Option<Outcome>,
}

/// What the simulated node side of one Edge process holds.
#[derive(Debug, Default)]
struct NodeSide {
    generations: BTreeMap<&'static str, Vec<Generation>>,
    leases: Vec<Lease>,
    tickets: Vec<QueueTicket>,
}

/// A seeded simulation: a [`Pair`] with `edges` Edge ids, driven through random steps
/// of application activity and faults, then left to settle; the
/// [`Monitor`](super::Monitor) checks every invariant throughout and at the end.
#[derive(Debug)]
pub struct Sim {
    pair: Pair,
    rng: SimRng,
    config: SimConfig,
    /// Process index → the commands its handler holds.
    held: BTreeMap<usize, Vec<(String, Plan)>>,
    /// Process index → events already read.
    cursor: BTreeMap<usize, usize>,
    nodes: BTreeMap<usize, NodeSide>,
    /// Process index of each Edge id's main process.
    mains: Vec<usize>,
    /// Duplicate processes alive now: (Edge id index, process index).
    duplicates: Vec<(usize, usize)>,
    commands: usize,
    /// Edge id index → commands sent to it.
    sent: BTreeMap<usize, Vec<String>>,
}

fn edge_id(k: usize) -> String {
    format!("edge-{k}")
}

fn edge_config(k: usize, seed: u64) -> EdgeConfig {
    let mut c = EdgeConfig::new(edge_id(k))
        .with_operation("edge.ping", TargetLevel::Edge)
        .with_operation("node.restart", TargetLevel::Node);
    c.seed = seed;
    c.wall_clock = WallClock::new(ORIGIN_UNIX_MS);
    c
}

fn node_config(id: &str) -> NodeConfig {
    NodeConfig::new(id)
        .with_label("zone", "a")
        .with_provider(ProviderConfig::new(
            "p0",
            ProviderCategory::LocalInference,
            2,
            1,
        ))
}

fn registry() -> NodeRegistry {
    let mut r = NodeRegistry::new();
    for id in NODES {
        let _ = r.configure(node_config(id), ORIGIN_UNIX_MS);
    }
    r
}

impl Sim {
    /// A new simulation; nothing has run yet.
    pub fn new(config: SimConfig) -> Result<Self, CpConfigError> {
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
        SimReport {
            seed: self.config.seed,
            hash: self.pair.hash(),
            violations: self.pair.monitor().violations().to_vec(),
            sim_ms: self.pair.now.as_millis(),
            commands: self.commands,
            sessions: self.pair.cp.stats().sessions_accepted,
            tally: self.tally(),
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
                CpEvent::CommandLost { .. } => bump("end.Lost".into()),
                CpEvent::CommandResponded {
                    accepted: false, ..
                } => bump("end.Rejected".into()),
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

    /// Lets `ms` pass; handlers report when their plans say.
    fn advance_ms(&mut self, ms: u64) {
        let end = self.pair.now + Duration::from_millis(ms);
        loop {
            self.read_edge_events();
            let due = self
                .held
                .values()
                .flatten()
                .map(|(_, plan)| plan.next_at)
                .min();
            match due {
                Some(at) if at <= end => {
                    let wait = at.saturating_duration_since(self.pair.now);
                    if !wait.is_zero() {
                        self.pair.advance(wait);
                    }
                    self.run_due_handlers();
                }
                _ => break,
            }
        }
        self.pair
            .advance(end.saturating_duration_since(self.pair.now));
        self.read_edge_events();
    }

    fn run_due_handlers(&mut self) {
        let now = self.pair.now;
        let due: Vec<(usize, String)> = self
            .held
            .iter()
            .flat_map(|(i, held)| {
                held.iter()
                    .filter(|(_, plan)| plan.next_at <= now)
                    .map(|(id, _)| (*i, id.clone()))
            })
            .collect();
        for (i, id) in due {
            self.act(i, &id);
        }
        self.pair.pump();
    }

    /// The handler of `id` on process `i` takes its next step: a RUNNING report, its
    /// outcome, or (a hung handler) nothing ever again.
    fn act(&mut self, i: usize, id: &str) {
        let now = self.pair.now;
        let delay = self.rng.range(50, 4_000);
        let Some(held) = self.held.get_mut(&i) else {
            return;
        };
        let Some(j) = held.iter().position(|(h, _)| h == id) else {
            return;
        };
        let Some((_, plan)) = held.get_mut(j) else {
            return;
        };
        let Some(p) = self.pair.edges.get_mut(i) else {
            held.remove(j);
            return;
        };
        let done = if plan.running_reports > 0 {
            plan.running_reports -= 1;
            plan.next_at = now + Duration::from_millis(delay);
            p.edge
                .report_running(now, id, "working", BTreeMap::new())
                .is_err()
        } else if let Some(outcome) = plan.outcome {
            let _ = p
                .edge
                .report_outcome(now, id, outcome, "done", BTreeMap::new());
            true
        } else {
            // A hung handler: the Edge's own deadline ends it.
            true
        };
        if done {
            held.remove(j);
        }
    }

    fn any_process(&mut self) -> usize {
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
            _ => self.restart(true),
        }
    }

    fn send_command(&mut self) {
        let k = self.rng.index(self.mains.len());
        if self.duplicate_of(k) {
            // Two live processes with one id would both run it (SPEC §4.4: "runs
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
        let spec = CommandSpec {
            operation: operation.into(),
            target_selector,
            timeout_ms,
            ..Default::default()
        };
        if let Ok(id) = self.pair.send_command(&edge_id(k), spec, None) {
            self.commands += 1;
            self.sent.entry(k).or_default().push(id);
        }
        self.advance_ms(1);
    }

    /// A handler makes progress on one command it holds, ahead of its plan.
    fn work(&mut self) {
        let i = self.any_process();
        let Some(held) = self.held.get(&i).filter(|h| !h.is_empty()) else {
            return;
        };
        let Some(id) = held
            .get(self.rng.index(held.len()))
            .map(|(id, _)| id.clone())
        else {
            return;
        };
        self.act(i, &id);
        self.advance_ms(1);
    }

    /// Node connect / ready / close (current or stale) / lease / queue / provider
    /// marks / remove and reconfigure, on one process's registry.
    fn node_activity(&mut self) {
        let i = self.any_process();
        let node = self.node();
        let op = self.rng.range(0, 11);
        let kind = if self.rng.chance(1, 3) {
            LeaseKind::LongContext
        } else {
            LeaseKind::Normal
        };
        let pick = self.rng.next_u64() as usize;
        let side = self.nodes.entry(i).or_default();
        let Some(p) = self.pair.edges.get_mut(i) else {
            return;
        };
        let reg = p.edge.registry_mut();
        let ms = ORIGIN_UNIX_MS + self.pair.now.as_millis();
        let gens = side.generations.entry(node).or_default();
        match op {
            0 | 1 => {
                if let Ok(g) = reg.connect(node, ms) {
                    gens.push(g);
                }
            }
            2 | 3 => {
                if let Some(g) = gens.last() {
                    let _ = reg.mark_ready(node, *g, ms);
                }
            }
            4 => {
                if let Some(g) = gens.last() {
                    let _ = reg.close(node, *g, "node went away", ms);
                }
            }
            5 => {
                // A stale close: a generation that is not (or no longer) the owner's.
                if let Some(g) = gens.first() {
                    let _ = reg.close(node, *g, "stale", ms);
                }
            }
            6 | 7 => {
                if let Ok(lease) = reg.admit(node, "p0", kind) {
                    side.leases.push(lease);
                }
            }
            8 => {
                if !side.leases.is_empty() {
                    let lease = side.leases.swap_remove(pick % side.leases.len());
                    let _ = reg.release(lease);
                }
            }
            9 => {
                if !side.tickets.is_empty() && pick.is_multiple_of(2) {
                    let t = side.tickets.swap_remove(pick % side.tickets.len());
                    let _ = reg.dequeue(t);
                } else if let Ok(t) = reg.enqueue(kind, vec![Candidate::new(node, "p0")]) {
                    side.tickets.push(t);
                }
            }
            10 => {
                if pick.is_multiple_of(2) {
                    let _ = reg.set_provider_online(node, "p0", pick.is_multiple_of(4));
                } else {
                    let _ = reg.set_provider_healthy(node, "p0", pick % 4 == 1);
                }
            }
            _ => {
                if reg.contains(node) {
                    let _ = reg.remove(node, ms);
                } else {
                    let _ = reg.configure(node_config(node), ms);
                }
            }
        }
        let edge = p
            .edge
            .registry()
            .snapshot("sim", ms, &[] as &[&str], usize::MAX);
        let at = self.pair.now.as_millis();
        self.pair
            .monitor_mut()
            .on_snapshot(at, &format!("process {i}"), &edge);
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

    fn node(&mut self) -> &'static str {
        NODES
            .get(self.rng.index(NODES.len()))
            .copied()
            .unwrap_or("n0")
    }

    fn duplicate_of(&self, k: usize) -> bool {
        self.duplicates.iter().any(|(d, _)| *d == k)
    }

    /// Hands every newly received command to its process's handler.
    fn read_edge_events(&mut self) {
        for (i, p) in self.pair.edges.iter().enumerate() {
            let from = self.cursor.get(&i).copied().unwrap_or(0);
            for e in p.events.iter().skip(from) {
                if let EdgeEvent::CommandReceived { command_id, .. } = e {
                    let outcome = match self.rng.range(0, 5) {
                        0 => None,
                        1 => Some(Outcome::Failed),
                        2 => Some(Outcome::Cancelled),
                        _ => Some(Outcome::Succeeded),
                    };
                    let plan = Plan {
                        next_at: self.pair.now + Duration::from_millis(self.rng.range(10, 4_000)),
                        running_reports: self.rng.range(0, 3) as u8,
                        outcome,
                    };
                    self.held
                        .entry(i)
                        .or_default()
                        .push((command_id.clone(), plan));
                }
            }
            self.cursor.insert(i, p.events.len());
        }
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
    }
}

//! What the load plane buys a request router: a deterministic simulation (no sockets,
//! simulated time) of a router sending requests at 80 % of a fleet's capacity, placing
//! each with `iop_fleet`'s placement on the Control Plane's view, fed
//! (a) by status pulled every 10 s, (b) by load updates pushed at most every 250 ms,
//! (c) by pushed updates with reserving placements; and (c) again with the Edges and
//! the router's requests spread over three (and eight) Control Plane replicas that
//! tell each other their load every 20 ms — with each replica's reservations told to
//! the others (every 5 ms), and without, and with reserving placements that draw their
//! pick by free slots (`Pick::Spread`) instead of taking the best. A request placed on
//! a provider that is full in truth waits in that provider's queue; one the view finds
//! no room for is refused.
//! Reported: the queueing delay (p50, p99) and the refusals.
//!
//! Run: `cargo bench -p iop-bench --bench routing [-- SVG_PATH]` (seconds; writes a
//! bar chart of the delays when given a path — an absolute one: benches run in their
//! package's directory).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use iop_bench::fleet::{Rng, snapshot};
use iop_bench::table::{Row, Table};
use iop_core::cp::load::{EdgeLoad, LoadChange};
use iop_core::cp::{ConnectionId, CpEvent};
use iop_core::proto::cluster::LoadBatch;
use iop_core::proto::{
    EdgeNodeSnapshot, EdgeStatusResponse, NodeState, ProviderHealth, ProviderLoad, ProviderStatus,
};
use iop_fleet::{Fleet, FleetConfig, Pick, PlacementQuery};

const EDGES: usize = 250;
const NODES: usize = 4;
const CAPACITY: u32 = 4;
/// Mean service time of a request.
const SERVICE_MS: f64 = 1_000.0;
/// Offered load: this share of the fleet's capacity.
const LOAD: f64 = 0.8;
const STEP_MS: u64 = 5;
const RUN_MS: u64 = 120_000;
const PULL_MS: u64 = 10_000;
const PUSH_MS: u64 = 250;
const HEARTBEAT_MS: u64 = 5_000;
/// How often each replica of the cluster modes tells the others its load
/// (`iop_cluster::load_bus::LINGER`), and the reservations placed on it
/// (`RESERVATION_LINGER`).
const LINGER_MS: u64 = 20;
const RESERVATION_LINGER_MS: u64 = 5;
const T0: u64 = 1_700_000_000_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pulled,
    /// Pulled, with reserving placements (not among the issue's three: it tells what
    /// the push adds once reservations are there).
    PulledReserved,
    Pushed,
    Reserved,
    /// As `Reserved`, on `replicas` replicas: each holds a share of the Edges and
    /// takes a share of the requests; `shared`: reservations are told to the others.
    Replicas {
        replicas: usize,
        shared: bool,
    },
}

impl Mode {
    fn pushes(self) -> bool {
        matches!(self, Mode::Pushed | Mode::Reserved | Mode::Replicas { .. })
    }

    fn reserves(self) -> bool {
        !matches!(self, Mode::Pulled | Mode::Pushed)
    }

    fn replicas(self) -> usize {
        match self {
            Mode::Replicas { replicas, .. } => replicas,
            _ => 1,
        }
    }
}

/// One provider in truth.
#[derive(Default)]
struct Provider {
    in_flight: u32,
    /// Enqueue times of the requests waiting.
    queue: VecDeque<u64>,
    /// End times of the requests running.
    running: Vec<u64>,
}

struct Sim {
    mode: Mode,
    rng: Rng,
    truth: Vec<Vec<Provider>>,
    views: Vec<Arc<EdgeLoad>>,
    dirty: Vec<Vec<bool>>,
    next_push: Vec<u64>,
    /// One fleet per replica; Edge `e` is held by replica `e % replicas`.
    fleets: Vec<Fleet>,
    /// The number of each replica's last batch.
    seqs: Vec<u64>,
    delays: Vec<f64>,
    refused: u64,
    placed: u64,
    /// Reserving placements draw their pick by free slots (`Pick::Spread`, among the
    /// best 1 000 candidates: every provider here) instead of taking the best.
    spread: bool,
}

fn edge_id(e: usize) -> String {
    format!("edge-{e:04}")
}

fn load(node: usize, p: &Provider) -> ProviderLoad {
    ProviderLoad {
        node_id: format!("gpu-{node}"),
        provider_id: "llama".into(),
        status: ProviderStatus::Available as i32,
        health: ProviderHealth::Healthy as i32,
        capacity: CAPACITY,
        in_flight: p.in_flight,
        queued: p.queue.len() as u32,
        admission_eligible: p.in_flight < CAPACITY,
        node_connected: true,
        ..Default::default()
    }
}

fn status(e: usize, truth: &[Provider]) -> EdgeStatusResponse {
    EdgeStatusResponse {
        edge_id: edge_id(e),
        nodes: truth
            .iter()
            .enumerate()
            .map(|(n, p)| {
                let l = load(n, p);
                EdgeNodeSnapshot {
                    node_id: l.node_id.clone(),
                    connected: true,
                    state: NodeState::Ready as i32,
                    provider_snapshots: vec![snapshot(l, "llama-3")],
                    ..Default::default()
                }
            })
            .collect(),
        registry_revision: 1,
        ..Default::default()
    }
}

impl Sim {
    fn new(mode: Mode) -> Self {
        let truth: Vec<Vec<Provider>> = (0..EDGES)
            .map(|_| (0..NODES).map(|_| Provider::default()).collect())
            .collect();
        let replicas = mode.replicas();
        let mut fleets: Vec<Fleet> = (0..replicas)
            .map(|_| {
                let mut fleet =
                    Fleet::new(FleetConfig::default()).unwrap_or_else(|_| unreachable!());
                fleet.publish_load(replicas > 1);
                fleet
            })
            .collect();
        let mut views = Vec::new();
        for (e, t) in truth.iter().enumerate() {
            let view = Arc::new(EdgeLoad::from_status(&status(e, t), 1));
            let fleet = &mut fleets[e % replicas];
            fleet.handle_event(&CpEvent::SessionAccepted {
                conn: ConnectionId(e as u64),
                edge_id: edge_id(e),
                session_id: 1,
                superseded_session_id: None,
                load_update_interval: mode.pushes().then_some(Duration::from_millis(PUSH_MS)),
            });
            fleet.handle_event(&view_event(e, T0, LoadChange::Replaced(view.clone())));
            views.push(view);
        }
        let mut sim = Self {
            mode,
            rng: Rng::new(42),
            dirty: vec![vec![false; NODES]; EDGES],
            next_push: vec![T0; EDGES],
            truth,
            views,
            fleets,
            seqs: vec![0; replicas],
            delays: Vec::new(),
            refused: 0,
            placed: 0,
            spread: false,
        };
        sim.tell(T0);
        sim
    }

    /// Each replica tells the others what changed of its Edges every 20 ms (and, when
    /// shared, the reservations placed on it every 5 ms); a replica first heard of
    /// sends its snapshot.
    fn tell(&mut self, now: u64) {
        let replicas = self.fleets.len();
        let changes_due = (now - T0).is_multiple_of(LINGER_MS);
        if replicas < 2 || !(changes_due || (now - T0).is_multiple_of(RESERVATION_LINGER_MS)) {
            return;
        }
        for from in 0..replicas {
            let reservations = self.fleets[from].take_load_reservations(usize::MAX);
            if !changes_due && reservations.is_empty() {
                continue;
            }
            self.seqs[from] += 1;
            let batch = LoadBatch {
                replica: format!("cp-{from}"),
                epoch: 1,
                seq: self.seqs[from],
                changes: if changes_due {
                    self.fleets[from].take_load_changes(usize::MAX)
                } else {
                    Vec::new()
                },
                reservations: if matches!(self.mode, Mode::Replicas { shared: true, .. }) {
                    reservations
                } else {
                    Vec::new()
                },
                ..Default::default()
            };
            for to in (0..replicas).filter(|&to| to != from) {
                if self.fleets[to].apply_remote(&batch).resync {
                    let (changes, _) = self.fleets[from].load_page("", EDGES);
                    let page = LoadBatch {
                        snapshot: true,
                        changes,
                        reservations: Vec::new(),
                        ..batch.clone()
                    };
                    self.fleets[to].apply_snapshot(&[page]);
                }
            }
        }
    }

    /// An exponential draw of mean `mean`.
    fn exp(&mut self, mean: f64) -> f64 {
        let u = (self.rng.below(1 << 30) as f64 + 0.5) / (1u64 << 30) as f64;
        -mean * u.ln()
    }

    fn start(&mut self, e: usize, n: usize, now: u64) {
        let end = now + self.exp(SERVICE_MS) as u64 + 1;
        let p = &mut self.truth[e][n];
        p.in_flight += 1;
        p.running.push(end);
        self.dirty[e][n] = true;
    }

    fn arrive(&mut self, now: u64) {
        let mut q = PlacementQuery::new("llama-3");
        if self.spread {
            q.pick = Pick::Spread {
                random: self.rng.next_u64(),
            };
        }
        // The router's requests go to the replicas in turn.
        let at = (self.placed + self.refused) as usize % self.fleets.len();
        let fleet = &mut self.fleets[at];
        let answer = if self.mode.reserves() {
            fleet.reserve(&q, now)
        } else {
            fleet.placement(&q, now)
        };
        let Some(pick) = answer.ok().and_then(|a| a.candidates.into_iter().next()) else {
            self.refused += 1;
            return;
        };
        self.placed += 1;
        let e: usize = pick.edge_id[5..].parse().unwrap_or(0);
        let n: usize = pick.node_id[4..].parse().unwrap_or(0);
        if self.truth[e][n].in_flight < CAPACITY {
            self.delays.push(0.0);
            self.start(e, n, now);
        } else {
            self.truth[e][n].queue.push_back(now);
            self.dirty[e][n] = true;
        }
    }

    fn complete(&mut self, now: u64) {
        for e in 0..EDGES {
            for n in 0..NODES {
                let p = &mut self.truth[e][n];
                let before = p.running.len();
                p.running.retain(|&end| end > now);
                let done = (before - p.running.len()) as u32;
                if done == 0 {
                    continue;
                }
                p.in_flight -= done;
                self.dirty[e][n] = true;
                for _ in 0..done {
                    let Some(since) = self.truth[e][n].queue.pop_front() else {
                        break;
                    };
                    self.delays.push((now - since) as f64);
                    self.start(e, n, now);
                }
            }
        }
    }

    fn report(&mut self, now: u64) {
        let replicas = self.fleets.len();
        for e in 0..EDGES {
            let fleet = &mut self.fleets[e % replicas];
            match self.mode {
                Mode::Pulled | Mode::PulledReserved => {
                    // Each Edge refreshed every 10 s, at a phase of its own.
                    let phase = (e as u64 * PULL_MS) / EDGES as u64;
                    if (now - T0 + PULL_MS - phase) % PULL_MS < STEP_MS {
                        let view = Arc::new(EdgeLoad::from_status(&status(e, &self.truth[e]), 1));
                        self.views[e] = view.clone();
                        fleet.handle_event(&view_event(e, now, LoadChange::Replaced(view)));
                    }
                }
                Mode::Pushed | Mode::Reserved | Mode::Replicas { .. } => {
                    let changed: Vec<ProviderLoad> = (0..NODES)
                        .filter(|&n| self.dirty[e][n])
                        .map(|n| load(n, &self.truth[e][n]))
                        .collect();
                    if !changed.is_empty() && now >= self.next_push[e] {
                        self.next_push[e] = now + PUSH_MS;
                        self.dirty[e].iter_mut().for_each(|d| *d = false);
                        let view = &mut self.views[e];
                        let applied = Arc::make_mut(view).apply(&changed);
                        if !applied.changed.is_empty() {
                            let change = LoadChange::Updated {
                                view: view.clone(),
                                changed: applied.changed,
                            };
                            fleet.handle_event(&view_event(e, now, change));
                        }
                    } else if (now - T0) % HEARTBEAT_MS < STEP_MS {
                        fleet.handle_event(&view_event(e, now, LoadChange::Confirmed));
                    }
                }
            }
        }
    }

    /// The same, with spread picks.
    fn spread(mut self) -> Self {
        self.spread = true;
        self
    }

    fn run(mut self) -> Outcome {
        let per_step =
            LOAD * (EDGES * NODES) as f64 * f64::from(CAPACITY) / SERVICE_MS * STEP_MS as f64;
        let mut now = T0;
        while now < T0 + RUN_MS {
            now += STEP_MS;
            self.complete(now);
            // Poisson arrivals within the step.
            let mut budget = self.exp(1.0);
            while budget < per_step {
                self.arrive(now);
                budget += self.exp(1.0);
            }
            self.report(now);
            self.tell(now);
        }
        self.delays.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((self.delays.len() - 1) as f64 * q).round() as usize;
            self.delays.get(i).copied().unwrap_or(f64::NAN)
        };
        let queued = self.delays.iter().filter(|&&d| d > 0.0).count();
        Outcome {
            p50: at(0.5),
            p99: at(0.99),
            queued: queued as f64 / self.delays.len().max(1) as f64,
            refused: self.refused as f64 / (self.refused + self.placed).max(1) as f64,
            requests: self.refused + self.placed,
        }
    }
}

fn view_event(e: usize, at: u64, change: LoadChange) -> CpEvent {
    CpEvent::LoadView {
        edge_id: edge_id(e),
        session_id: 1,
        at_unix_ms: at,
        change,
    }
}

struct Outcome {
    p50: f64,
    p99: f64,
    /// Share of the requests started that waited at all.
    queued: f64,
    refused: f64,
    requests: u64,
}

/// A bar chart of the p50 and p99 delays per mode.
fn svg(rows: &[(&str, &Outcome)]) -> String {
    let max = rows.iter().map(|(_, o)| o.p99).fold(1.0, f64::max);
    let (w, h, bar) = (640.0, 80.0 + 70.0 * rows.len() as f64, 22.0);
    let mut out = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="13">
<rect width="100%" height="100%" fill="#fff"/>
<text x="10" y="22" font-size="15">Queueing delay at 80 % load ({EDGES} Edges × {NODES} providers × {CAPACITY} slots), ms</text>
"##
    );
    for (i, (name, o)) in rows.iter().enumerate() {
        let y = 50.0 + 70.0 * i as f64;
        let len = |v: f64| (v / max * 260.0).max(1.0);
        out.push_str(&format!(
            r##"<text x="10" y="{}">{name}</text>
<rect x="220" y="{}" width="{:.1}" height="{bar}" fill="#8ab4f8"/><text x="{:.1}" y="{}">p50 {:.0}</text>
<rect x="220" y="{}" width="{:.1}" height="{bar}" fill="#1a73e8"/><text x="{:.1}" y="{}">p99 {:.0}; {:.1} % refused</text>
"##,
            y + 26.0,
            y,
            len(o.p50),
            226.0 + len(o.p50),
            y + 16.0,
            o.p50,
            y + bar + 2.0,
            len(o.p99),
            226.0 + len(o.p99),
            y + bar + 18.0,
            o.p99,
            o.refused * 100.0,
        ));
    }
    out.push_str("</svg>\n");
    out
}

fn main() {
    let pulled = Sim::new(Mode::Pulled).run();
    let pushed = Sim::new(Mode::Pushed).run();
    let reserved = Sim::new(Mode::Reserved).run();
    let pulled_reserved = Sim::new(Mode::PulledReserved).run();
    let cluster = |replicas, shared| Sim::new(Mode::Replicas { replicas, shared }).run();
    let (shared, unshared) = (cluster(3, true), cluster(3, false));
    let (shared8, unshared8) = (cluster(8, true), cluster(8, false));
    let spread = |replicas| {
        let mode = match replicas {
            1 => Mode::Reserved,
            replicas => Mode::Replicas {
                replicas,
                shared: true,
            },
        };
        Sim::new(mode).spread().run()
    };
    let (spread1, spread3, spread8) = (spread(1), spread(3), spread(8));
    let mut table = Table::new(
        format!(
            "Routing at {:.0} % load: {EDGES} Edges × {NODES} providers × {CAPACITY} slots, {} s simulated",
            LOAD * 100.0,
            RUN_MS / 1000
        ),
        "ours",
        "baseline (pulled every 10 s)",
    );
    for (what, o) in [
        ("pushed (250 ms)", &pushed),
        ("pushed + reservations", &reserved),
        ("pulled + reservations", &pulled_reserved),
        (
            "pushed + reservations, 3 replicas, told to each other",
            &shared,
        ),
        ("pushed + reservations, 3 replicas, not told", &unshared),
        (
            "pushed + reservations, 8 replicas, told to each other",
            &shared8,
        ),
        ("pushed + reservations, 8 replicas, not told", &unshared8),
        ("pushed + reservations, spread picks", &spread1),
        (
            "pushed + reservations, 3 replicas, told, spread picks",
            &spread3,
        ),
        (
            "pushed + reservations, 8 replicas, told, spread picks",
            &spread8,
        ),
    ] {
        table.push(Row::new(
            format!("queueing delay p50 / p99 (share that waited), {what}"),
            format!("{:.0} / {:.0} ms ({:.1} %)", o.p50, o.p99, o.queued * 100.0),
            format!(
                "{:.0} / {:.0} ms ({:.1} %)",
                pulled.p50,
                pulled.p99,
                pulled.queued * 100.0
            ),
            format!("— / {:.3}", o.p99 / pulled.p99.max(1.0)),
            "—",
            None,
        ));
        table.push(Row::new(
            format!("refused (no candidate in the view), {what}"),
            format!("{:.2} % of {}", o.refused * 100.0, o.requests),
            format!("{:.2} % of {}", pulled.refused * 100.0, pulled.requests),
            "—",
            "—",
            None,
        ));
    }
    println!("{table}");
    if let Some(path) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) {
        let rows = [
            ("(a) pulled every 10 s", &pulled),
            ("(b) pushed, 250 ms", &pushed),
            ("(c) pushed + reservations", &reserved),
            ("pulled + reservations", &pulled_reserved),
            ("(c) on 3 replicas, told", &shared),
            ("(c) on 3 replicas, not told", &unshared),
            ("(c) on 3 replicas, told, spread picks", &spread3),
        ];
        if let Err(e) = std::fs::write(&path, svg(&rows)) {
            eprintln!("{path}: {e}");
        }
    }
}

//! What the load plane buys a request router: a deterministic simulation (no sockets,
//! simulated time) of a router sending requests at 80 % of a fleet's capacity, placing
//! each with `iop_fleet`'s placement on the Control Plane's view, fed
//! (a) by status pulled every 10 s, (b) by load updates pushed at most every 250 ms,
//! (c) by pushed updates with reserving placements. A request placed on a provider
//! that is full in truth waits in that provider's queue; one the view finds no room
//! for is refused. Reported: the queueing delay (p50, p99) and the refusals.
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
use iop_core::proto::{
    EdgeNodeSnapshot, EdgeStatusResponse, NodeState, ProviderHealth, ProviderLoad, ProviderStatus,
};
use iop_fleet::{Fleet, FleetConfig, PlacementQuery};

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
const T0: u64 = 1_700_000_000_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pulled,
    /// Pulled, with reserving placements (not among the issue's three: it tells what
    /// the push adds once reservations are there).
    PulledReserved,
    Pushed,
    Reserved,
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
    fleet: Fleet,
    delays: Vec<f64>,
    refused: u64,
    placed: u64,
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
        let mut fleet = Fleet::new(FleetConfig::default()).unwrap_or_else(|_| unreachable!());
        let mut views = Vec::new();
        for (e, t) in truth.iter().enumerate() {
            let view = Arc::new(EdgeLoad::from_status(&status(e, t), 1));
            fleet.handle_event(&CpEvent::SessionAccepted {
                conn: ConnectionId(e as u64),
                edge_id: edge_id(e),
                session_id: 1,
                superseded_session_id: None,
                load_update_interval: matches!(mode, Mode::Pushed | Mode::Reserved)
                    .then_some(Duration::from_millis(PUSH_MS)),
            });
            fleet.handle_event(&view_event(e, T0, LoadChange::Replaced(view.clone())));
            views.push(view);
        }
        Self {
            mode,
            rng: Rng::new(42),
            dirty: vec![vec![false; NODES]; EDGES],
            next_push: vec![T0; EDGES],
            truth,
            views,
            fleet,
            delays: Vec::new(),
            refused: 0,
            placed: 0,
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
        let q = PlacementQuery::new("llama-3");
        let answer = if matches!(self.mode, Mode::Reserved | Mode::PulledReserved) {
            self.fleet.reserve(&q, now)
        } else {
            self.fleet.placement(&q, now)
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
        for e in 0..EDGES {
            match self.mode {
                Mode::Pulled | Mode::PulledReserved => {
                    // Each Edge refreshed every 10 s, at a phase of its own.
                    let phase = (e as u64 * PULL_MS) / EDGES as u64;
                    if (now - T0 + PULL_MS - phase) % PULL_MS < STEP_MS {
                        let view = Arc::new(EdgeLoad::from_status(&status(e, &self.truth[e]), 1));
                        self.views[e] = view.clone();
                        self.fleet
                            .handle_event(&view_event(e, now, LoadChange::Replaced(view)));
                    }
                }
                Mode::Pushed | Mode::Reserved => {
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
                            self.fleet.handle_event(&view_event(e, now, change));
                        }
                    } else if (now - T0) % HEARTBEAT_MS < STEP_MS {
                        self.fleet
                            .handle_event(&view_event(e, now, LoadChange::Confirmed));
                    }
                }
            }
        }
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
        }
        self.delays.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((self.delays.len() - 1) as f64 * q).round() as usize;
            self.delays.get(i).copied().unwrap_or(f64::NAN)
        };
        Outcome {
            p50: at(0.5),
            p99: at(0.99),
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
    ] {
        table.push(Row::new(
            format!("queueing delay p50 / p99, {what}"),
            format!("{:.0} / {:.0} ms", o.p50, o.p99),
            format!("{:.0} / {:.0} ms", pulled.p50, pulled.p99),
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
        ];
        if let Err(e) = std::fs::write(&path, svg(&rows)) {
            eprintln!("{path}: {e}");
        }
    }
}

//! Placement and the load-update apply path without sockets, at 10 000 and 100 000
//! Edges × 4 nodes × 2 providers, numbers changing at random: the cost of one update
//! (the view's numbers replaced as the Control Plane does, folded into the fleet and
//! its placement index) and the latency of one placement (the best 10 for a model),
//! against the baseline a router without an index would have — a scan of every view
//! for the same answer — measured in the same run; and a reserving placement with a
//! spread pick (drawn among the best 1 000) against one that takes the best.
//!
//! Run: `cargo bench -p iop-bench --bench placement` (about a minute). Times are
//! shown for scale; the figures are the ratios.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use iop_bench::fleet::{
    API_MODELS, HOT_MODEL, NODES, PROVIDERS, Rng, Synthetic, capacity_of, provider_load,
};
use iop_bench::table::{Row, Table, format_count, format_ns};
use iop_core::proto::ProviderLoad;
use iop_fleet::{Pick, PlacementQuery};

/// Updates measured per fleet size.
const UPDATES: usize = 200_000;
/// Placements measured per fleet size (index), and scans (baseline).
const PLACEMENTS: usize = 20_000;
const SCANS: usize = 200;
/// Updates between two placements, so that each reads a changed index.
const UPDATES_BETWEEN: usize = 4;
/// Goal: placement p99 at 10 000 Edges.
const P99_GOAL_NS: f64 = 1_000_000.0;

/// Random updates of one provider each: (Edge, its update).
fn updates(edges: usize, n: usize, rng: &mut Rng) -> Vec<(usize, [ProviderLoad; 1])> {
    (0..n)
        .map(|_| {
            let e = rng.below(edges as u64) as usize;
            let node = rng.below(NODES as u64) as usize;
            let p = rng.below(PROVIDERS as u64) as usize;
            (e, [provider_load(rng, node, p, capacity_of(p))])
        })
        .collect()
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default() as f64
}

/// What one fleet size measured, ns.
struct Sizes {
    edges: usize,
    update: f64,
    place: [f64; 2],
    cold: [f64; 2],
    scan: [f64; 2],
    /// Reserving placements: the best pick, a spread one.
    best: [f64; 2],
    spread: [f64; 2],
}

fn measure(edges: usize) -> Sizes {
    let mut rng = Rng::new(0x5eed ^ edges as u64);
    let mut fleet = Synthetic::new(edges, 1_700_000_000_000, &mut rng);

    let work = updates(edges, UPDATES, &mut rng);
    let start = Instant::now();
    for (i, (e, u)) in work.iter().enumerate() {
        if i % 64 == 0 {
            fleet.now_ms += 1;
        }
        fleet.update(*e, u);
    }
    let update = start.elapsed().as_nanos() as f64 / UPDATES as f64;

    let between = updates(edges, PLACEMENTS * UPDATES_BETWEEN, &mut rng);
    let timed = |q: &PlacementQuery, reserve: bool, fleet: &mut Synthetic, offset: usize| {
        let mut took = Vec::with_capacity(PLACEMENTS / 2);
        for k in 0..PLACEMENTS / 2 {
            for (e, u) in between
                .iter()
                .skip((offset + k) * UPDATES_BETWEEN)
                .take(UPDATES_BETWEEN)
            {
                fleet.update(*e, u);
            }
            let now = fleet.now_ms;
            let start = Instant::now();
            let answer = if reserve {
                fleet.fleet.reserve(q, now)
            } else {
                fleet.fleet.placement(q, now)
            };
            took.push(start.elapsed().as_nanos() as u64);
            black_box(answer.map(|a| a.candidates.len()).unwrap_or_default());
        }
        took.sort_unstable();
        [percentile(&took, 0.5), percentile(&took, 0.99)]
    };
    let place = timed(&PlacementQuery::new(HOT_MODEL), false, &mut fleet, 0);
    let cold = timed(
        &PlacementQuery::new(API_MODELS[1]),
        false,
        &mut fleet,
        PLACEMENTS / 2,
    );
    let best = timed(&PlacementQuery::new(HOT_MODEL), true, &mut fleet, 0);
    let mut q = PlacementQuery::new(HOT_MODEL);
    q.pick = Pick::Spread {
        random: rng.next_u64(),
    };
    let spread = timed(&q, true, &mut fleet, PLACEMENTS / 2);

    // The baseline answers the same query; check they agree on the free slots listed.
    let q = PlacementQuery::new(HOT_MODEL);
    let ours = fleet
        .fleet
        .placement(&q, fleet.now_ms)
        .unwrap_or_else(|e| panic!("{e}"));
    let scanned = fleet.scan(HOT_MODEL, q.limit);
    let free: Vec<u32> = ours.candidates.iter().map(|c| c.free).collect();
    let scan_free: Vec<u32> = scanned.iter().map(|s| s.0).collect();
    assert_eq!(free, scan_free, "the index and the scan disagree");
    let mut took = Vec::with_capacity(SCANS);
    for _ in 0..SCANS {
        let start = Instant::now();
        black_box(fleet.scan(HOT_MODEL, 10).len());
        took.push(start.elapsed().as_nanos() as u64);
    }
    took.sort_unstable();
    let scan = [percentile(&took, 0.5), percentile(&took, 0.99)];
    Sizes {
        edges,
        update,
        place,
        cold,
        scan,
        best,
        spread,
    }
}

fn main() -> ExitCode {
    let small = measure(10_000);
    let large = measure(100_000);
    let mut table = Table::new(
        "Placement and the apply path, no sockets (4 nodes × 2 providers per Edge)",
        "ours",
        "baseline",
    );
    for s in [&small, &large] {
        let n = format_count(s.edges as u64);
        table.push(Row::new(
            format!("placement p50, `{HOT_MODEL}` (4 providers per Edge), {n} Edges"),
            format_ns(s.place[0]),
            format!("{} (scan)", format_ns(s.scan[0])),
            format!("{:.6}", s.place[0] / s.scan[0]),
            "—",
            None,
        ));
        let goal = s.edges == 10_000;
        table.push(Row::new(
            format!("placement p99, `{HOT_MODEL}`, {n} Edges"),
            format_ns(s.place[1]),
            format!("{} (scan)", format_ns(s.scan[1])),
            format!("{:.6}", s.place[1] / s.scan[1]),
            if goal { "≤ 1 ms" } else { "—" },
            goal.then_some(s.place[1] <= P99_GOAL_NS),
        ));
        table.push(Row::new(
            format!(
                "placement p50 / p99, `{}` (1 provider per 4 Edges), {n} Edges",
                API_MODELS[1]
            ),
            format!("{} / {}", format_ns(s.cold[0]), format_ns(s.cold[1])),
            "—",
            "—",
            "—",
            None,
        ));
    }
    for s in [&small, &large] {
        table.push(Row::new(
            format!(
                "reserving placement p50 / p99, spread pick, {} Edges",
                format_count(s.edges as u64)
            ),
            format!("{} / {}", format_ns(s.spread[0]), format_ns(s.spread[1])),
            format!(
                "{} / {} (best pick)",
                format_ns(s.best[0]),
                format_ns(s.best[1])
            ),
            format!("{:.2}", s.spread[1] / s.best[1]),
            "—",
            None,
        ));
    }
    table.push(Row::new(
        "one load update applied (view + fleet + index), 100 000 against 10 000 Edges",
        format_ns(large.update),
        format_ns(small.update),
        format!("{:.2}", large.update / small.update),
        "flat",
        None,
    ));
    table.push(Row::new(
        "placement p99, 100 000 against 10 000 Edges",
        format_ns(large.place[1]),
        format_ns(small.place[1]),
        format!("{:.2}", large.place[1] / small.place[1]),
        "flat",
        None,
    ));
    println!("{table}");
    if table.all_met() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

//! The seeded simulation: random fault schedules on a CP and Edge processes in
//! memory, every PROTOCOL.md §4–§5 invariant checked throughout, each seed run twice with
//! identical hashes.
//!
//! * `cargo test -p iop-core --test sim` — 1 000 seeds (CI).
//! * `IOP_SIM_SEEDS=100000 cargo test -p iop-core --test sim` — more.
//! * `IOP_SIM_SEED=n cargo test -p iop-core --test sim` — one seed, to replay a failure.
//! * `IOP_SIM_STEPS=n` — steps per seed (default 150).

use iop_core::testing::{Sim, SimConfig};

/// Random steps per seed: 1 000 seeds, twice each, take about half a minute in the
/// debug build on two cores.
const STEPS: u64 = 150;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn random_fault_schedules_keep_every_invariant() {
    let steps = env_u64("IOP_SIM_STEPS").unwrap_or(STEPS) as usize;
    let seeds: Vec<u64> = match env_u64("IOP_SIM_SEED") {
        Some(seed) => vec![seed],
        None => (0..env_u64("IOP_SIM_SEEDS").unwrap_or(1_000)).collect(),
    };
    // Wall time, only to report how long the run took.
    #[allow(clippy::disallowed_methods)]
    let started = std::time::Instant::now();
    let (mut commands, mut sessions, mut sim_ms) = (0, 0, 0);
    for seed in seeds.iter().copied() {
        let replay =
            format!("IOP_SIM_SEED={seed} IOP_SIM_STEPS={steps} cargo test -p iop-core --test sim");
        let first = Sim::run(SimConfig::new(seed, steps));
        assert!(
            first.violations.is_empty(),
            "seed {seed} broke invariants; replay with `{replay}`:\n{:#?}",
            first.violations
        );
        let second = Sim::run(SimConfig::new(seed, steps));
        assert_eq!(
            first, second,
            "seed {seed} is not deterministic; replay with `{replay}`"
        );
        commands += first.commands;
        sessions += first.sessions;
        sim_ms += first.sim_ms;
    }
    eprintln!(
        "{} seeds × {steps} steps, twice each: {:?}; {commands} commands, {sessions} sessions, {} simulated hours",
        seeds.len(),
        started.elapsed(),
        sim_ms / 3_600_000
    );
}

/// Prints the whole event log of one seed (`IOP_SIM_SEED`, default 3), to study a
/// failure: `IOP_SIM_SEED=n cargo test -p iop-core --test sim event_log -- --ignored --nocapture`.
#[test]
#[ignore]
fn event_log() {
    let seed = env_u64("IOP_SIM_SEED").unwrap_or(3);
    let steps = env_u64("IOP_SIM_STEPS").unwrap_or(STEPS) as usize;
    let mut sim = Sim::new(SimConfig::new(seed, steps)).unwrap();
    let r = sim.execute();
    for e in &sim.pair().cp_events {
        eprintln!("CP {e:?}");
    }
    for (i, p) in sim.pair().edges.iter().enumerate() {
        for e in &p.events {
            eprintln!("E{i} {e:?}");
        }
    }
    eprintln!("{:#?}", r.violations);
}

/// The schedules exercise what they claim: across a few seeds every kind of fault
/// and every way a command can end actually happens.
#[test]
fn the_schedules_exercise_every_fault_and_ending() {
    let mut total = std::collections::BTreeMap::<String, u64>::new();
    for seed in 0..100 {
        let r = Sim::run(SimConfig::new(seed, STEPS as usize));
        assert!(r.violations.is_empty(), "seed {seed}: {:#?}", r.violations);
        for (k, n) in r.tally {
            *total.entry(k).or_default() += n;
        }
    }
    eprintln!("{total:#?}");
    for k in [
        "cp.SessionAccepted",
        "cp.EdgeSuperseded",
        "cp.EdgeUnreachable",
        "cp.EdgeDisconnected",
        "cp.StatusReceived",
        "cp.StatusTimedOut",
        "cp.StatusAbandoned",
        "cp.ResyncNeeded",
        "cp.NodeEvent",
        "end.COMMAND_PHASE_SUCCEEDED",
        "end.COMMAND_PHASE_FAILED",
        "end.COMMAND_PHASE_CANCELLED",
        "end.COMMAND_PHASE_TIMED_OUT",
        "end.Lost",
        "end.Rejected",
        "edge.close.PeerSilent",
        "edge.close.TransportClosed",
        "edge.close.GoAway",
        "reject.COMMAND_REJECT_REASON_DRAINING",
        "reject.COMMAND_REJECT_REASON_INVALID_SELECTOR",
        "reject.COMMAND_REJECT_REASON_NO_MATCHING_TARGET",
        // Load churn reaches the Control Plane pushed (PROTOCOL.md §4.8), with
        // structural changes as resyncs.
        "load.updates",
        "load.resyncs",
    ] {
        assert!(
            total.get(k).is_some_and(|n| *n > 0),
            "{k} never happened: {total:#?}"
        );
    }
}

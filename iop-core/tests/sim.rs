//! The seeded simulation: random fault schedules on a CP and Edge processes in
//! memory, every SPEC §4–§5 invariant checked throughout, each seed run twice with
//! identical hashes.
//!
//! * `cargo test -p iop-core --test sim` — 1 000 seeds (CI).
//! * `IOP_SIM_SEEDS=100000 cargo test -p iop-core --test sim` — more.
//! * `IOP_SIM_SEED=n cargo test -p iop-core --test sim` — one seed, to replay a failure.
//! * `IOP_SIM_STEPS=n` — steps per seed (default 60).

use iop_core::testing::{Sim, SimConfig};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn random_fault_schedules_keep_every_invariant() {
    let steps = env_u64("IOP_SIM_STEPS").unwrap_or(60) as usize;
    let seeds: Vec<u64> = match env_u64("IOP_SIM_SEED") {
        Some(seed) => vec![seed],
        None => (0..env_u64("IOP_SIM_SEEDS").unwrap_or(1_000)).collect(),
    };
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

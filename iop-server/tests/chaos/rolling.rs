//! A rolling restart of the replicas, as an operator's upgrade does it: on a
//! three-node engine (R3 buckets), with the workload's commands and status requests
//! flowing through random replicas, each replica in turn is stopped with SIGTERM (it
//! drains: its Edges are told to go elsewhere) and started again, and the next waits
//! until every replica agrees on one live session per Edge. Then the history is
//! checked as after any schedule: every command ends in exactly one terminal outcome
//! and none is lost, every Edge is enrolled again, no event is lost (a drained replica
//! flushes its outbox). A crowd of Edges ([`Crowd`]) moves with each drain, so the
//! replicas take its claims in groups (the group commit's batched path).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::crowd::{self, Crowd};
use super::faults::{Applied, Kind};
use super::fleet::Fleet;
use super::{EDGES, checker, owner_batches, workload};

/// Edges in the crowd (a third of them on each replica) unless `IOP_CHAOS_CROWD`
/// says (`scripts/rolling-restart.sh --crowd 9996`).
const CROWD: usize = 150;

/// One replica's restart, each time from its SIGTERM.
pub struct Step {
    pub id: String,
    /// It exited (drained: its Edges told to go elsewhere, its outbox flushed).
    pub exited: Duration,
    /// It listened again.
    pub listening: Duration,
    /// Every replica listed the whole crowd live.
    pub crowd_back: Duration,
    /// Every replica agreed on one live session per Edge again: the step's time.
    pub converged: Duration,
    /// It exited on its own (not killed 30 s after SIGTERM).
    pub clean: bool,
}

/// What a rolling restart came to.
pub struct Rolled {
    /// The crowd's size (the `iop-edge` processes' Edges come on top).
    pub crowd: usize,
    pub steps: Vec<Step>,
    pub answered: usize,
    pub outcomes: std::collections::BTreeMap<String, usize>,
    pub events: usize,
    /// Atomic batches of ownership writes, and the writes they carried, on the
    /// replicas' counters at the end (each counts since its own restart).
    pub batches: (u64, u64),
    pub violations: Vec<String>,
}

pub fn run() -> Rolled {
    let dir = std::env::temp_dir().join(format!("iop-rolling-{}", std::process::id()));
    let fleet = Arc::new(Fleet::start(3, &EDGES, &dir));
    let cps: Vec<(String, std::net::SocketAddr)> =
        fleet.cps.iter().map(|c| (c.id.clone(), c.admin)).collect();
    let admins: Vec<std::net::SocketAddr> = cps.iter().map(|(_, a)| *a).collect();
    let edge_ids: Vec<String> = (EDGES.iter().map(|e| e.to_string()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let logs: Vec<(String, std::path::PathBuf)> = (fleet.edges.iter())
        .map(|e| (e.edge_id.clone(), e.log.clone()))
        .collect();
    let mut violations = Vec::new();
    checker::converged(&cps, &edge_ids, &mut violations);
    if !violations.is_empty() {
        violations.insert(0, "before the restarts:".into());
    }
    let edge_addrs: Vec<std::net::SocketAddr> = fleet.cps.iter().map(|c| c.edges).collect();
    let crowd_size = match crowd::size_from_env() {
        0 => CROWD,
        n => n,
    };
    let crowd = Crowd::start(crowd_size, &edge_addrs);
    crowd::back(&cps, crowd_size, &mut violations);
    let sampler = checker::Sampler::start(cps.clone());
    let load = workload::Workload::start(7, admins.clone(), edge_ids.clone());
    std::thread::sleep(Duration::from_secs(3));
    let mut steps = Vec::new();
    let mut applied = Vec::new();
    for (r, cp) in fleet.cps.iter().enumerate() {
        let start = Instant::now();
        let (clean, exited, listening) = cp.restart_gracefully();
        let mut converged = Vec::new();
        crowd::back(&cps, crowd_size, &mut converged);
        let crowd_back = Instant::now();
        checker::converged(&cps, &edge_ids, &mut converged);
        let end = Instant::now();
        if !clean {
            violations.push(format!(
                "{} did not exit on its own within 30 s of SIGTERM",
                cp.id
            ));
        }
        violations.extend(
            converged
                .into_iter()
                .map(|v| format!("after {}'s restart: {v}", cp.id)),
        );
        steps.push(Step {
            id: cp.id.clone(),
            exited: exited - start,
            listening: listening - start,
            crowd_back: crowd_back - start,
            converged: end - start,
            clean,
        });
        applied.push(Applied {
            kind: Kind::RestartCp(r),
            start,
            end,
        });
    }
    std::thread::sleep(Duration::from_secs(5));
    let history = load.stop();
    checker::converged(&cps, &edge_ids, &mut violations);
    let samples = sampler.stop();
    checker::two_sessions(&samples, &applied, &mut violations);
    let log_refs: Vec<(String, &std::path::Path)> =
        logs.iter().map(|(e, p)| (e.clone(), p.as_path())).collect();
    let sessions = checker::edge_logs(&log_refs, &mut violations);
    let healed = applied
        .iter()
        .map(|f| f.end)
        .max()
        .unwrap_or_else(Instant::now);
    checker::commands(&history, &admins, healed, &mut violations);
    // A drained replica loses no event: none is excused.
    let events = checker::events(&cps, &sessions, &BTreeSet::new(), &mut violations);
    violations.extend(history.violations.iter().cloned());
    let batches = owner_batches(&admins);
    drop(crowd);
    let rolled = Rolled {
        crowd: crowd_size,
        batches,
        steps,
        answered: history.answered.len(),
        outcomes: history.outcomes.clone(),
        events,
        violations,
    };
    if rolled.violations.is_empty() && std::env::var_os("IOP_CHAOS_KEEP").is_none() {
        drop(fleet);
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("   logs kept in {}", dir.display());
    }
    rolled
}

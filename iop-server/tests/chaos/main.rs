//! A fault-injection harness for Control Plane replicas (PROTOCOL.md §8), in the
//! spirit of Jepsen: real nats-server (one, or a three-node cluster, with the example
//! configuration's `sync_interval: always`), three `iop-control-plane --cluster`
//! processes reaching it through TCP proxies of our own, `iop-edge --simulate`
//! processes (two sharing one Edge id), a workload of status requests and commands
//! under the workload's own command ids through random replicas, and a seeded schedule
//! of faults: replicas paused, killed and restarted, cut off from the engine; NATS
//! servers paused, one node of three killed. After the faults heal, the recorded
//! history is checked (see `checker`).
//!
//! `schedules` runs a few seeds (`.ci/run` does); `campaign` runs seeds until
//! `IOP_CHAOS_MINUTES` pass (`scripts/chaos.sh MINUTES`); `IOP_CHAOS_SEED=N` replays
//! one. Each run prints its schedule, what the workload did and every violation.
#![allow(clippy::print_stdout, reason = "the harness reports what it ran")]
#![allow(unreachable_pub)]

mod checker;
mod crowd;
mod faults;
mod figures;
mod fleet;
mod http;
mod proxy;
mod repro;
mod rolling;
mod workload;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use faults::{Kind, Rng};
use figures::{FaultFigures, Tally};
use fleet::Fleet;

/// How long faults are injected (each starts within it; one may end later).
const FAULTS: Duration = Duration::from_secs(40);
/// The Edges: `edge-0` runs as two processes.
const EDGES: [&str; 5] = ["edge-0", "edge-0", "edge-1", "edge-2", "edge-3"];

/// What one run found.
struct Report {
    seed: u64,
    servers: usize,
    faults: Vec<faults::Applied>,
    figures: Vec<FaultFigures>,
    outcomes: std::collections::BTreeMap<String, usize>,
    tried: usize,
    commands_settled: Duration,
    answered: usize,
    unanswered: usize,
    retries: usize,
    sessions: usize,
    events: usize,
    /// Atomic batches of claims and releases the replicas alive at the end wrote, and
    /// the writes they carried (a killed replica's counters went with it).
    batches: (u64, u64),
    violations: Vec<String>,
}

/// The figures of `reports` in one table.
fn tally(reports: &[Report]) -> Tally {
    let mut tally = Tally::default();
    for r in reports {
        tally.add(&r.figures);
        for (outcome, n) in &r.outcomes {
            *tally.outcomes.entry(outcome.clone()).or_default() += n;
        }
        tally.tried += r.tried;
        tally.answered += r.answered;
        tally.commands_settled = tally.commands_settled.max(r.commands_settled);
    }
    tally
}

impl Report {
    fn print(&self, origin: Instant) {
        println!(
            "== seed {} ({} NATS server{}): {} faults, {} commands answered ({} unanswered, {} retries), {} sessions, {} events, {} claim batches ({} writes), {} violations",
            self.seed,
            self.servers,
            if self.servers == 1 { "" } else { "s" },
            self.faults.len(),
            self.answered,
            self.unanswered,
            self.retries,
            self.sessions,
            self.events,
            self.batches.0,
            self.batches.1,
            self.violations.len()
        );
        let mut faults = self.faults.clone();
        faults.sort_by_key(|f| f.start);
        for f in &faults {
            println!(
                "   {:>6.1}s {:?} for {:.1}s",
                f.start.duration_since(origin).as_secs_f64(),
                f.kind,
                f.end.duration_since(f.start).as_secs_f64()
            );
        }
        for v in &self.violations {
            println!("   VIOLATION (IOP_CHAOS_SEED={}): {v}", self.seed);
        }
    }
}

/// The engine a run's schedule is played on: one NATS server, a three-node cluster,
/// or a three-node cluster with the engine's own faults first (`IOP_CHAOS_ENGINE=3`
/// makes every seed of a campaign so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    /// One NATS server for most seeds, three for every third.
    BySeed,
    /// Three nodes, an engine fault in every schedule.
    ThreeNodes,
}

impl Engine {
    fn from_env() -> Engine {
        match std::env::var("IOP_CHAOS_ENGINE").as_deref() {
            Ok("3") => Engine::ThreeNodes,
            _ => Engine::BySeed,
        }
    }
}

/// One run of `seed`: starts the fleet, lets it settle, injects the schedule under
/// the workload, heals, and checks.
fn run(seed: u64, engine: Engine) -> Report {
    let mut rng = Rng::new(seed);
    let three = engine == Engine::ThreeNodes || seed % 3 == 2;
    let servers = if three { 3 } else { 1 };
    let schedule = faults::schedule(&mut rng, servers, FAULTS, engine == Engine::ThreeNodes);
    println!("-- seed {seed}: {servers} NATS, schedule {schedule:?}");
    let dir = std::env::temp_dir().join(format!("iop-chaos-{}-{seed}", std::process::id()));
    let fleet = Fleet::start(servers, &EDGES, &dir);
    let origin = fleet.started;
    let cps: Vec<(String, std::net::SocketAddr)> =
        fleet.cps.iter().map(|c| (c.id.clone(), c.admin)).collect();
    let admins: Vec<std::net::SocketAddr> = cps.iter().map(|(_, a)| *a).collect();
    let edge_ids: Vec<String> = EDGES
        .iter()
        .map(|e| e.to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let logs: Vec<(String, std::path::PathBuf)> = fleet
        .edges
        .iter()
        .map(|e| (e.edge_id.clone(), e.log.clone()))
        .collect();
    let mut violations = Vec::new();
    checker::converged(&cps, &edge_ids, &mut violations);
    if !violations.is_empty() {
        violations.insert(0, "before any fault:".into());
    }

    // A crowd moving with each fault puts the replicas' claims on the batched path.
    let crowd_size = crowd::size_from_env();
    let crowd = (crowd_size > 0).then(|| {
        let edges: Vec<std::net::SocketAddr> = fleet.cps.iter().map(|c| c.edges).collect();
        let crowd = crowd::Crowd::start(crowd_size, &edges);
        crowd::back(&cps, crowd_size, &mut violations);
        crowd
    });
    let fleet = Arc::new(fleet);
    let sampler = checker::Sampler::start(cps.clone());
    let load = workload::Workload::start(seed, admins.clone(), edge_ids.clone());
    let applied = faults::inject(&fleet, &schedule);
    // Healed: every process runs, every link passes. The workload goes on a while.
    std::thread::sleep(Duration::from_secs(5));
    let history = load.stop();
    checker::converged(&cps, &edge_ids, &mut violations);
    if crowd.is_some() {
        crowd::back(&cps, crowd_size, &mut violations);
    }
    let samples = sampler.stop();

    checker::two_sessions(&samples, &applied, &mut violations);
    let log_refs: Vec<(String, &std::path::Path)> =
        logs.iter().map(|(e, p)| (e.clone(), p.as_path())).collect();
    let sessions = checker::edge_logs(&log_refs, &mut violations);
    let healed = applied.iter().map(|f| f.end).max().unwrap_or(origin);
    let commands_settled = checker::commands(&history, &admins, healed, &mut violations);
    let answer_times: Vec<Instant> = history.answered.iter().map(|a| a.at).collect();
    let figures = figures::per_fault(&samples, &applied, &answer_times, cps.len(), &edge_ids);
    // Sessions accepted by a replica that was killed may have lost their events
    // with its outbox.
    let excused: BTreeSet<String> = applied
        .iter()
        .filter_map(|f| match f.kind {
            Kind::KillCp(r) => Some(fleet.cps[r].edges.to_string()),
            _ => None,
        })
        .collect();
    let events = checker::events(&cps, &sessions, &excused, &mut violations);
    violations.extend(history.violations.iter().cloned());
    let report = Report {
        seed,
        servers,
        faults: applied,
        figures,
        outcomes: history.outcomes.clone(),
        tried: history.tried.len(),
        commands_settled,
        answered: history.answered.len(),
        unanswered: history.unanswered.len(),
        retries: history.retries,
        sessions: sessions.len(),
        events,
        batches: owner_batches(&admins),
        violations,
    };
    drop(crowd);
    report.print(origin);
    // IOP_CHAOS_KEEP=1 keeps the logs of a clean run too.
    if report.violations.is_empty() && std::env::var_os("IOP_CHAOS_KEEP").is_none() {
        drop(fleet);
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("   logs kept in {}", dir.display());
    }
    report
}

/// The atomic batches of ownership writes the replicas at `admins` count on `/metrics`,
/// and the writes they carried.
fn owner_batches(admins: &[std::net::SocketAddr]) -> (u64, u64) {
    let mut sum = (0, 0);
    for admin in admins {
        let Some((200, text)) =
            http::request(*admin, "GET", "/metrics", None, Duration::from_secs(2))
        else {
            continue;
        };
        for line in text.lines() {
            let value = |name: &str| {
                line.strip_prefix(name)
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            if let Some(v) = value("iop_cluster_owner_batches_total ") {
                sum.0 += v;
            }
            if let Some(v) = value("iop_cluster_owner_batched_writes_total ") {
                sum.1 += v;
            }
        }
    }
    sum
}

/// Fails, saying how to install it, without a nats-server.
fn require_nats() {
    if let Err(why) = iop_cluster::testing::find_nats_server() {
        panic!("{why}; scripts/test.sh installs it");
    }
}

fn seeds_from_env() -> Option<Vec<u64>> {
    let seed = std::env::var("IOP_CHAOS_SEED").ok()?.parse().ok()?;
    Some(vec![seed])
}

#[test]
#[ignore = "minutes of real processes under faults: .ci/run runs it (and scripts/chaos.sh the campaign)"]
fn schedules() {
    require_nats();
    // One schedule over one NATS server, one over a three-node cluster; a campaign's
    // seed replayed on the campaign's engine (`IOP_CHAOS_ENGINE`, as `--engine` sets).
    let seeds = seeds_from_env().unwrap_or(vec![1, 2]);
    let reports: Vec<Report> = seeds
        .into_iter()
        .map(|seed| run(seed, Engine::from_env()))
        .collect();
    tally(&reports).print();
    let bad: Vec<&Report> = reports
        .iter()
        .filter(|r| !r.violations.is_empty())
        .collect();
    assert!(
        bad.is_empty(),
        "violations in seeds {:?}",
        bad.iter().map(|r| r.seed).collect::<Vec<_>>()
    );
    // The runs did something to check.
    assert!(
        reports
            .iter()
            .all(|r| r.answered > 0 && !r.faults.is_empty())
    );
}

#[test]
#[ignore = "minutes of real processes under faults: .ci/run runs it (and scripts/chaos.sh the campaign)"]
fn rolling_restart() {
    require_nats();
    let rolled = rolling::run();
    println!(
        "== {} Edges ({} in the crowd), three replicas, three-node engine (R3)",
        rolled.crowd + EDGES.iter().collect::<BTreeSet<_>>().len(),
        rolled.crowd
    );
    for step in &rolled.steps {
        println!(
            "== {} SIGTERM: exited after {:.1} s, listening again {:.1} s, the crowd live on every replica {:.1} s, every Edge on one live session {:.1} s{}",
            step.id,
            step.exited.as_secs_f64(),
            step.listening.as_secs_f64(),
            step.crowd_back.as_secs_f64(),
            step.converged.as_secs_f64(),
            if step.clean {
                ""
            } else {
                " (killed: it did not exit)"
            }
        );
    }
    println!(
        "== {} commands answered ({:?}), {} events, {} claim batches ({} writes); {} violations",
        rolled.answered,
        rolled.outcomes,
        rolled.events,
        rolled.batches.0,
        rolled.batches.1,
        rolled.violations.len()
    );
    for v in &rolled.violations {
        println!("   VIOLATION: {v}");
    }
    assert!(rolled.violations.is_empty(), "{:?}", rolled.violations);
    assert!(rolled.answered > 0 && rolled.steps.len() == 3);
    // The crowd's moves went through the batched path.
    assert!(rolled.batches.0 > 0, "no claim batch: {:?}", rolled.batches);
}

#[test]
#[ignore = "minutes of real processes under faults: .ci/run runs it (and scripts/chaos.sh --engine 3 the campaign)"]
fn engine_schedules() {
    require_nats();
    // On a three-node engine (R3 buckets), each schedule opening with the engine's
    // own fault: a node killed, a leader paused, a rolling restart, a replica cut
    // from one node.
    let seeds = seeds_from_env().unwrap_or(vec![3, 4]);
    let reports: Vec<Report> = seeds
        .into_iter()
        .map(|seed| run(seed, Engine::ThreeNodes))
        .collect();
    tally(&reports).print();
    let bad: Vec<u64> = reports
        .iter()
        .filter(|r| !r.violations.is_empty())
        .map(|r| r.seed)
        .collect();
    assert!(bad.is_empty(), "violations in seeds {bad:?}");
    assert!(reports.iter().all(|r| r.servers == 3 && r.answered > 0));
}

#[test]
#[ignore = "a campaign of IOP_CHAOS_MINUTES: scripts/chaos.sh MINUTES"]
fn campaign() {
    require_nats();
    let minutes: u64 = std::env::var("IOP_CHAOS_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(30);
    let until = Instant::now() + Duration::from_secs(minutes * 60);
    let mut first: u64 = std::env::var("IOP_CHAOS_FIRST_SEED")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(100);
    let mut reports = Vec::new();
    let mut seed = first;
    let engine = Engine::from_env();
    if let Some(replay) = seeds_from_env() {
        // A violation's seed, replayed on the campaign's engine and crowd.
        first = replay[0];
        for s in replay {
            reports.push(run(s, engine));
            seed = s + 1;
        }
    } else {
        while Instant::now() < until {
            reports.push(run(seed, engine));
            seed += 1;
        }
    }
    let faults: usize = reports.iter().map(|r| r.faults.len()).sum();
    let bad: Vec<u64> = reports
        .iter()
        .filter(|r| !r.violations.is_empty())
        .map(|r| r.seed)
        .collect();
    println!(
        "== campaign: {} schedules (seeds {first}..{seed}), {faults} faults injected, {} violations in seeds {bad:?}",
        reports.len(),
        reports.iter().map(|r| r.violations.len()).sum::<usize>(),
    );
    tally(&reports).print();
    assert!(bad.is_empty(), "violations in seeds {bad:?}");
}

/// The checker itself, on made-up histories: two sessions that outlive the bound are
/// flagged, those within it (or while their replica was cut off) are not; a session
/// id that goes back and a command run twice are flagged.
#[test]
fn the_checker_flags_what_breaks_the_rules_and_nothing_else() {
    use checker::Sample;
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_millis(s * 500);
    let held = |cp: usize, session: u64| Sample {
        at: at(0),
        cp,
        live: [("edge-1".to_owned(), session)].into(),
    };
    // cp-0 keeps its session (id 1) next to cp-1's (id 2) for 40 s, reaching the engine.
    let mut samples = Vec::new();
    for i in 0..80 {
        for cp in 0..2 {
            let mut s = held(cp, (cp + 1) as u64);
            s.at = at(i);
            samples.push(s);
        }
    }
    let mut violations = Vec::new();
    checker::two_sessions(&samples, &[], &mut violations);
    assert_eq!(violations.len(), 1, "{violations:?}");
    // The same while cp-0 was cut off for all but its last 10 s: within the bound.
    let cut = faults::Applied {
        kind: Kind::CutOff(0),
        start: at(0),
        end: at(60),
    };
    let mut violations = Vec::new();
    checker::two_sessions(&samples, &[cut], &mut violations);
    assert!(violations.is_empty(), "{violations:?}");

    let log = std::env::temp_dir().join(format!("iop-chaos-checker-{}.log", std::process::id()));
    std::fs::write(
        &log,
        "INFO edge{edge_id=e cp=127.0.0.1:1}: connected to control plane session_id=5\n\
         INFO edge{edge_id=e cp=127.0.0.1:1}:command{command_id=c1}: running command\n\
         INFO edge{edge_id=e cp=127.0.0.1:2}: connected to control plane session_id=3\n\
         INFO edge{edge_id=e cp=127.0.0.1:2}:command{command_id=c1}: running command\n",
    )
    .unwrap();
    let mut violations = Vec::new();
    let sessions = checker::edge_logs(&[("e".into(), log.as_path())], &mut violations);
    let _ = std::fs::remove_file(&log);
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions[1], ("e".into(), 3, "127.0.0.1:2".into()));
    assert_eq!(violations.len(), 2, "{violations:?}");
}

/// The figures, on a made-up run: replica 0 killed at 1 s and back at 6 s, its Edge
/// live on replica 1 from 4 s.
#[test]
fn the_figures_measure_failover_settling_and_commands_back() {
    use checker::Sample;
    let t0 = Instant::now();
    let at = |half_seconds: u64| t0 + Duration::from_millis(half_seconds * 500);
    let mut samples = Vec::new();
    for i in 0..20 {
        let cp0 = (i <= 2 || i >= 12).then(|| if i <= 2 { vec![1] } else { vec![] });
        if let Some(held) = cp0 {
            let live = held.into_iter().map(|s| ("e".to_owned(), s)).collect();
            samples.push(Sample {
                at: at(i),
                cp: 0,
                live,
            });
        }
        let live = if i >= 8 {
            [("e".to_owned(), 2)].into()
        } else {
            Default::default()
        };
        samples.push(Sample {
            at: at(i),
            cp: 1,
            live,
        });
    }
    let kill = faults::Applied {
        kind: Kind::KillCp(0),
        start: at(2),
        end: at(10),
    };
    let figures = figures::per_fault(&samples, &[kill], &[at(5), at(11)], 2, &["e".to_owned()]);
    assert_eq!(figures.len(), 1);
    assert_eq!(figures[0].kind, "replica killed");
    assert_eq!(figures[0].failover, vec![Duration::from_secs(3)]);
    assert_eq!(figures[0].settled, Some(Duration::from_secs(1)));
    assert_eq!(figures[0].commands_back, Some(Duration::from_millis(500)));
    // Overlapped by another fault past its end: its settling is not taken.
    let pause = faults::Applied {
        kind: Kind::PauseCp(1),
        start: at(9),
        end: at(13),
    };
    let figures = figures::per_fault(&samples, &[kill, pause], &[at(11)], 2, &["e".to_owned()]);
    assert_eq!(figures[0].settled, None);
    assert_eq!(figures[0].commands_back, None);
}

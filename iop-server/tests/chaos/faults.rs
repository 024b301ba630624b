//! A seeded schedule of faults and the thread that injects them: replicas paused
//! (SIGSTOP/SIGCONT), killed and restarted (SIGKILL), cut off from the engine (their
//! proxies black-hole, then reset); NATS servers paused, and one node of three killed.
//! On a three-node engine, the engine's own faults too: JetStream's meta leader or a
//! bucket's stream leader paused, every node restarted in turn, a replica cut from one
//! node only (the other two still reachable).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::fleet::Fleet;

/// The simulation's randomness: splitmix64, the same seed the same schedule.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    PauseCp(usize),
    KillCp(usize),
    /// Its NATS traffic black-holed, then its connections reset.
    CutOff(usize),
    PauseNats(usize),
    KillNats(usize),
    /// The node leading JetStream's meta group, paused.
    PauseMetaLeader,
    /// The node leading the ownership bucket's stream, paused.
    PauseStreamLeader,
    /// Every node restarted in turn (SIGKILL, restart, the next once it is back).
    RollNats,
    /// Replica `.0`'s link to node `.1` black-holed, then reset: it reaches the
    /// engine through the other nodes.
    CutOffNode(usize, usize),
    /// Stopped with SIGTERM (it drains) and started again: a rolling upgrade's step.
    RestartCp(usize),
}

impl Kind {
    /// Its name without its target, as the campaign's figures group faults.
    pub fn label(&self) -> &'static str {
        match self {
            Kind::PauseCp(_) => "replica paused",
            Kind::KillCp(_) => "replica killed",
            Kind::CutOff(_) => "replica cut off",
            Kind::PauseNats(_) => "node paused",
            Kind::KillNats(_) => "node killed",
            Kind::PauseMetaLeader => "meta leader paused",
            Kind::PauseStreamLeader => "stream leader paused",
            Kind::RollNats => "rolling restart",
            Kind::CutOffNode(..) => "replica cut from a node",
            Kind::RestartCp(_) => "replica restarted",
        }
    }

    /// The replica it takes away from its Edges or the engine, if it is a replica's.
    pub fn replica(&self) -> Option<usize> {
        match *self {
            Kind::PauseCp(r) | Kind::KillCp(r) | Kind::CutOff(r) | Kind::RestartCp(r) => Some(r),
            _ => None,
        }
    }

    /// Whether it keeps replica `cp` from the engine (an engine fault keeps them all).
    pub fn affects(&self, cp: usize) -> bool {
        match *self {
            Kind::PauseCp(r)
            | Kind::KillCp(r)
            | Kind::CutOff(r)
            | Kind::CutOffNode(r, _)
            | Kind::RestartCp(r) => r == cp,
            _ => true,
        }
    }

    /// Whether it is a fault of the engine itself (one at a time: two nodes of three
    /// down stops JetStream, which is not a fault this schedule claims the cluster
    /// rides out).
    fn engine(&self) -> bool {
        matches!(
            self,
            Kind::PauseNats(_)
                | Kind::KillNats(_)
                | Kind::PauseMetaLeader
                | Kind::PauseStreamLeader
                | Kind::RollNats
        )
    }

    fn target(&self) -> (u8, usize) {
        match *self {
            Kind::PauseCp(r)
            | Kind::KillCp(r)
            | Kind::CutOff(r)
            | Kind::CutOffNode(r, _)
            | Kind::RestartCp(r) => (0, r),
            Kind::PauseNats(n) | Kind::KillNats(n) => (1, n),
            _ => (1, usize::MAX),
        }
    }
}

/// One fault of a schedule: when it starts after the faults begin, how long it lasts.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    pub kind: Kind,
    pub at: Duration,
    pub lasts: Duration,
}

/// A fault as it happened.
#[derive(Debug, Clone, Copy)]
pub struct Applied {
    pub kind: Kind,
    pub start: Instant,
    pub end: Instant,
}

/// 3 to 6 faults within `window`, none overlapping another on the same process, one
/// engine fault at a time; on a three-node engine (`servers` 3) at least one of them
/// the engine's own when `engine` (the 3-node schedules of `.ci/run`).
pub fn schedule(rng: &mut Rng, servers: usize, window: Duration, engine: bool) -> Vec<Fault> {
    let mut faults: Vec<Fault> = Vec::new();
    let count = 3 + rng.below(4);
    let mut tries = 0;
    while (faults.len() as u64) < count && tries < 100 {
        tries += 1;
        let r = rng.below(3) as usize;
        let n = rng.below(servers as u64) as usize;
        // The first fault of an engine schedule is the engine's.
        let pick = if engine && faults.is_empty() {
            4 + rng.below(5)
        } else {
            rng.below(if servers > 1 { 9 } else { 4 })
        };
        let (kind, lasts) = match pick {
            0 => (Kind::PauseCp(r), rng.millis(1_000, 20_000)),
            1 => (Kind::KillCp(r), rng.millis(500, 5_000)),
            2 => (Kind::CutOff(r), rng.millis(1_000, 30_000)),
            3 => (Kind::PauseNats(n), rng.millis(1_000, 20_000)),
            4 => (Kind::KillNats(n), rng.millis(1_000, 15_000)),
            5 => (Kind::PauseMetaLeader, rng.millis(5_000, 15_000)),
            6 => (Kind::PauseStreamLeader, rng.millis(5_000, 15_000)),
            // Its length is what three restarts take (each node back, then 5 s).
            7 => (Kind::RollNats, Duration::from_secs(20)),
            _ => (Kind::CutOffNode(r, n), rng.millis(5_000, 30_000)),
        };
        let at = rng.millis(0, window.as_millis() as u64);
        let overlaps = |f: &Fault| at < f.at + f.lasts && f.at < at + lasts;
        let clash = faults
            .iter()
            .any(|f| f.kind.target() == kind.target() && overlaps(f));
        let engine_clash = kind.engine() && faults.iter().any(|f| f.kind.engine() && overlaps(f));
        if !clash && !engine_clash {
            faults.push(Fault { kind, at, lasts });
        }
    }
    faults.sort_by_key(|f| f.at);
    faults
}

/// The node of `fleet` leading JetStream's meta group (`meta`) or the ownership
/// bucket's stream, by any node's `/jsz`; `None` when none answers or no leader is
/// elected.
fn leader(fleet: &Fleet, meta: bool) -> Option<usize> {
    let names: Vec<(Option<String>, Option<std::net::SocketAddr>)> = fleet
        .nats
        .iter()
        .map(|n| {
            let n = n.lock().unwrap();
            (n.server_name().map(str::to_owned), n.monitor())
        })
        .collect();
    for (_, monitor) in &names {
        let Some(monitor) = monitor else { continue };
        let path = "/jsz?accounts=true&streams=true";
        let Some(jsz) = super::http::get_json(*monitor, path, Duration::from_secs(1)) else {
            continue;
        };
        let name = if meta {
            jsz["meta_cluster"]["leader"].as_str().map(str::to_owned)
        } else {
            jsz["account_details"].as_array().and_then(|accounts| {
                accounts
                    .iter()
                    .flat_map(|a| a["stream_detail"].as_array().into_iter().flatten())
                    .find(|s| s["name"] == "KV_iop-owners")
                    .and_then(|s| s["cluster"]["leader"].as_str().map(str::to_owned))
            })
        };
        if let Some(name) = name {
            return names
                .iter()
                .position(|(n, _)| n.as_deref() == Some(name.as_str()));
        }
    }
    None
}

/// Restarts every node in turn: each killed, started again, and 5 s given to rejoin
/// before the next.
fn roll(fleet: &Fleet) {
    for node in &fleet.nats {
        node.lock().unwrap().restart();
        std::thread::sleep(Duration::from_secs(5));
    }
}

/// Injects `faults` into `fleet` from now on, each ended after its time, and returns
/// what happened once every fault ended. A restart runs on a thread of its own (a
/// replica does not start while the engine is out of reach, and the fault keeping it
/// out must still end meanwhile).
pub fn inject(fleet: &Arc<Fleet>, faults: &[Fault]) -> Vec<Applied> {
    let begin = Instant::now();
    // (when, fault index, start?) in time order.
    let mut steps: Vec<(Duration, usize, bool)> = faults
        .iter()
        .enumerate()
        .flat_map(|(i, f)| [(f.at, i, true), (f.at + f.lasts, i, false)])
        .collect();
    steps.sort_by_key(|(t, i, start)| (*t, !*start, *i));
    let mut started: Vec<Option<Instant>> = vec![None; faults.len()];
    // The node a leader fault paused, resumed at its end.
    let mut paused: Vec<Option<usize>> = vec![None; faults.len()];
    let applied = Arc::new(Mutex::new(Vec::new()));
    let mut restarts = Vec::new();
    for (when, i, start) in steps {
        if let Some(wait) = (begin + when).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let kind = faults[i].kind;
        if start {
            started[i] = Some(Instant::now());
            match kind {
                Kind::PauseCp(r) => fleet.cps[r].pause(),
                Kind::KillCp(r) => fleet.cps[r].kill(),
                Kind::CutOff(r) => fleet.links[r].iter().for_each(|p| p.blackhole()),
                Kind::PauseNats(n) => fleet.nats[n].lock().unwrap().pause(),
                Kind::KillNats(n) => fleet.nats[n].lock().unwrap().kill(),
                Kind::PauseMetaLeader | Kind::PauseStreamLeader => {
                    paused[i] = leader(fleet, kind == Kind::PauseMetaLeader);
                    if let Some(n) = paused[i] {
                        fleet.nats[n].lock().unwrap().pause();
                    }
                }
                Kind::RollNats => roll(fleet),
                Kind::CutOffNode(r, n) => fleet.links[r][n].blackhole(),
                Kind::RestartCp(r) => {
                    fleet.cps[r].restart_gracefully();
                }
            }
            continue;
        }
        let begun = started[i].unwrap_or_else(Instant::now);
        let done = {
            let applied = applied.clone();
            move || {
                let end = Instant::now();
                applied.lock().unwrap().push(Applied {
                    kind,
                    start: begun,
                    end,
                });
            }
        };
        match kind {
            Kind::PauseCp(r) => fleet.cps[r].resume(),
            Kind::CutOff(r) => fleet.links[r].iter().for_each(|p| p.reset()),
            Kind::PauseNats(n) => fleet.nats[n].lock().unwrap().resume(),
            Kind::KillNats(n) => fleet.nats[n].lock().unwrap().restart(),
            Kind::PauseMetaLeader | Kind::PauseStreamLeader => {
                if let Some(n) = paused[i] {
                    fleet.nats[n].lock().unwrap().resume();
                }
            }
            Kind::RollNats | Kind::RestartCp(_) => {}
            Kind::CutOffNode(r, n) => fleet.links[r][n].reset(),
            Kind::KillCp(r) => {
                let fleet = fleet.clone();
                restarts.push(std::thread::spawn(move || {
                    fleet.cps[r].restart();
                    done();
                }));
                continue;
            }
        }
        done();
    }
    for restart in restarts {
        let _ = restart.join();
    }
    std::mem::take(&mut *applied.lock().unwrap())
}

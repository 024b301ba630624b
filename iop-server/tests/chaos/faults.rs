//! A seeded schedule of faults and the thread that injects them: replicas paused
//! (SIGSTOP/SIGCONT), killed and restarted (SIGKILL), cut off from the engine (their
//! proxies black-hole, then reset); NATS servers paused, and one node of three killed.

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
}

impl Kind {
    /// Whether it keeps replica `cp` from the engine (an engine fault keeps them all).
    pub fn affects(&self, cp: usize) -> bool {
        match *self {
            Kind::PauseCp(r) | Kind::KillCp(r) | Kind::CutOff(r) => r == cp,
            Kind::PauseNats(_) | Kind::KillNats(_) => true,
        }
    }

    fn target(&self) -> (u8, usize) {
        match *self {
            Kind::PauseCp(r) | Kind::KillCp(r) | Kind::CutOff(r) => (0, r),
            Kind::PauseNats(n) | Kind::KillNats(n) => (1, n),
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

/// 3 to 6 faults within `window`, none overlapping another on the same process.
pub fn schedule(rng: &mut Rng, servers: usize, window: Duration) -> Vec<Fault> {
    let mut faults: Vec<Fault> = Vec::new();
    let count = 3 + rng.below(4);
    let mut tries = 0;
    while (faults.len() as u64) < count && tries < 100 {
        tries += 1;
        let r = rng.below(3) as usize;
        let n = rng.below(servers as u64) as usize;
        let (kind, lasts) = match rng.below(if servers > 1 { 5 } else { 4 }) {
            0 => (Kind::PauseCp(r), rng.millis(1_000, 20_000)),
            1 => (Kind::KillCp(r), rng.millis(500, 5_000)),
            2 => (Kind::CutOff(r), rng.millis(1_000, 30_000)),
            3 => (Kind::PauseNats(n), rng.millis(1_000, 20_000)),
            _ => (Kind::KillNats(n), rng.millis(1_000, 15_000)),
        };
        let at = rng.millis(0, window.as_millis() as u64);
        let clash = faults
            .iter()
            .any(|f| f.kind.target() == kind.target() && at < f.at + f.lasts && f.at < at + lasts);
        // One engine fault at a time: two NATS nodes of three down stops JetStream,
        // which is not a fault this schedule claims the cluster rides out.
        let engine_clash = matches!(kind, Kind::PauseNats(_) | Kind::KillNats(_))
            && faults.iter().any(|f| {
                matches!(f.kind, Kind::PauseNats(_) | Kind::KillNats(_))
                    && at < f.at + f.lasts
                    && f.at < at + lasts
            });
        if !clash && !engine_clash {
            faults.push(Fault { kind, at, lasts });
        }
    }
    faults.sort_by_key(|f| f.at);
    faults
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
    let applied = Arc::new(Mutex::new(Vec::new()));
    let mut restarts = Vec::new();
    for (when, i, start) in steps {
        if let Some(wait) = (begin + when).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let kind = faults[i].kind;
        if start {
            match kind {
                Kind::PauseCp(r) => fleet.cps[r].pause(),
                Kind::KillCp(r) => fleet.cps[r].kill(),
                Kind::CutOff(r) => fleet.links[r].iter().for_each(|p| p.blackhole()),
                Kind::PauseNats(n) => fleet.nats[n].lock().unwrap().pause(),
                Kind::KillNats(n) => fleet.nats[n].lock().unwrap().kill(),
            }
            started[i] = Some(Instant::now());
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

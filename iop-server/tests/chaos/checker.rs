//! What a run is checked against (PROTOCOL.md §8), over what was recorded: which
//! replica said it held which session when, the Edges' logs, the workload's answers,
//! the fleet's event stream, and every replica's fleet view once the faults healed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::faults::Applied;
use super::fleet::RECONCILE;
use super::http;
use super::workload::History;

/// Time, beyond the reconcile interval, for a replica that can reach the engine again
/// to notice it lost an Edge: its client's pings (3 × 2 s) and reconnect, the
/// sampling period.
const SLACK: Duration = Duration::from_secs(12);

/// One replica's own live sessions at one moment: Edge id → session id.
pub struct Sample {
    pub at: Instant,
    pub cp: usize,
    pub live: BTreeMap<String, u64>,
}

/// Asks every replica every half second which sessions it holds itself.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Sampler {
    pub fn start(cps: Vec<(String, SocketAddr)>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
        let threads = cps
            .into_iter()
            .enumerate()
            .map(|(cp, (id, admin))| {
                let (stop, samples) = (stop.clone(), samples.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(live) = own_sessions(&id, admin) {
                            let at = Instant::now();
                            samples.lock().unwrap().push(Sample { at, cp, live });
                        }
                        std::thread::sleep(Duration::from_millis(500));
                    }
                })
            })
            .collect();
        Sampler {
            stop,
            samples,
            threads,
        }
    }

    pub fn stop(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

/// The live sessions replica `id` says it holds itself.
pub fn own_sessions(id: &str, admin: SocketAddr) -> Option<BTreeMap<String, u64>> {
    let json = http::get_json(admin, "/v1/edges?scope=local", Duration::from_secs(1))?;
    Some(
        json["edges"]
            .as_array()?
            .iter()
            .filter(|v| v["replica"] == id && v["connected"] == true)
            .filter_map(|v| {
                let session = v["sessionId"].as_str()?.parse().ok()?;
                Some((v["edgeId"].as_str()?.to_owned(), session))
            })
            .collect(),
    )
}

/// Two replicas holding a live session of one Edge id: allowed only while the older
/// one's replica cannot reach the engine (a fault on it or on the engine), plus one
/// reconcile interval and [`SLACK`].
pub fn two_sessions(samples: &[Sample], faults: &[Applied], violations: &mut Vec<String>) {
    let mut order: Vec<&Sample> = samples.iter().collect();
    order.sort_by_key(|s| s.at);
    // The latest sample of each replica, at each sample time.
    let mut latest: BTreeMap<usize, &Sample> = BTreeMap::new();
    // (edge, older replica, its session) → since when seen alongside a newer one.
    let mut since: BTreeMap<(String, usize, u64), Instant> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    for sample in order {
        latest.insert(sample.cp, sample);
        let now = sample.at;
        let recent: Vec<&&Sample> = latest
            .values()
            .filter(|s| now.duration_since(s.at) < Duration::from_millis(1_500))
            .collect();
        let mut holders: BTreeMap<&str, Vec<(usize, u64)>> = BTreeMap::new();
        for s in &recent {
            for (edge, session) in &s.live {
                holders.entry(edge).or_default().push((s.cp, *session));
            }
        }
        let mut still = BTreeSet::new();
        for (edge, held) in holders {
            let Some(newest) = held.iter().map(|(_, s)| *s).max() else {
                continue;
            };
            for &(cp, session) in held.iter().filter(|(_, s)| *s < newest) {
                let key = (edge.to_owned(), cp, session);
                let first = *since.entry(key.clone()).or_insert(now);
                still.insert(key.clone());
                // The last time cp-{cp} could not reach the engine, before now.
                let cut_off_until = faults
                    .iter()
                    .filter(|f| f.kind.affects(cp) && f.start <= now)
                    .map(|f| f.end)
                    .max();
                if cut_off_until.is_some_and(|end| end >= now) {
                    continue;
                }
                let healthy = cut_off_until.map_or(first, |end| end.max(first));
                let lasted = now.duration_since(healthy);
                if lasted > RECONCILE + SLACK && reported.insert(key) {
                    violations.push(format!(
                        "{edge}: cp-{cp} held session {session} for {lasted:?} while another \
                         replica held session {newest}, reaching the engine all along"
                    ));
                }
            }
        }
        since.retain(|k, _| still.contains(k));
    }
}

/// The Edge logs: each process's session ids strictly increase, and it ran each
/// command id at most once. Returns every session (edge id, session id, replica
/// address) the Edges saw.
pub fn edge_logs(
    logs: &[(String, &Path)],
    violations: &mut Vec<String>,
) -> Vec<(String, u64, String)> {
    let mut sessions = Vec::new();
    for (edge_id, log) in logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let mut last = 0u64;
        let mut runs: BTreeMap<String, usize> = BTreeMap::new();
        for line in text.lines() {
            if line.contains("connected to control plane")
                && let Some(session) = field(line, "session_id=").and_then(|s| s.parse().ok())
            {
                if session <= last {
                    violations.push(format!(
                        "{edge_id} ({}): session {session} after session {last}",
                        log.display()
                    ));
                }
                last = last.max(session);
                let cp = field(line, "cp=").unwrap_or_default().to_owned();
                sessions.push((edge_id.clone(), session, cp));
            }
            if line.contains("running command")
                && let Some(id) = field(line, "command_id=")
            {
                *runs.entry(id.to_owned()).or_default() += 1;
            }
        }
        for (id, n) in runs.into_iter().filter(|(_, n)| *n > 1) {
            violations.push(format!(
                "{edge_id} ({}): command {id} ran {n} times",
                log.display()
            ));
        }
    }
    sessions
}

/// The value after `name` in a log line, up to the next space or the end of its span.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(name)? + name.len();
    let rest = &line[at..];
    let end = rest.find([' ', '}']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// How long after the faults healed every command the API answered about must read
/// the same through every replica, terminal: the refusing replica finishes a refused
/// command's record within a few engine operation timeouts (2 s) of the engine being
/// back, and an orphan is finished when it is read, 12 s after it was written.
pub const COMMANDS_SETTLE: Duration = Duration::from_secs(60);

/// Every command the workload sent — answered 200 or not — reads the same through
/// every replica within [`COMMANDS_SETTLE`]: unknown everywhere (never recorded), or
/// terminal with one ending everywhere, and for one answered 200, with the answer the
/// caller got. None stays running. Returns how long after `healed` the last of them
/// was seen so.
pub fn commands(
    history: &History,
    admins: &[SocketAddr],
    healed: Instant,
    violations: &mut Vec<String>,
) -> Duration {
    let deadline = Instant::now() + COMMANDS_SETTLE;
    let answers: BTreeMap<&str, &serde_json::Value> = history
        .answered
        .iter()
        .map(|a| (a.command_id.as_str(), &a.response["accepted"]))
        .collect();
    for (command_id, edge_id) in &history.tried {
        let path = format!("/v1/commands/{command_id}");
        let answered = answers.get(command_id.as_str());
        let mut last: Vec<Option<(u16, bool, serde_json::Value, serde_json::Value)>>;
        let agreed = loop {
            last = admins
                .iter()
                .map(|a| {
                    let (status, body) =
                        http::request(*a, "GET", &path, None, Duration::from_secs(3))?;
                    let r: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                    let accepted = r["response"]["accepted"].clone();
                    Some((
                        status,
                        r["terminal"] == true,
                        r["outcome"].clone(),
                        accepted,
                    ))
                })
                .collect();
            let first = last.first().cloned().flatten();
            let same = last.iter().all(|r| *r == first);
            let done = same
                && match (&first, answered) {
                    // Never recorded: unknown through every replica.
                    (Some((404, ..)), None) => true,
                    (Some((200, terminal, _, accepted)), Some(caller)) => {
                        *terminal && accepted == *caller
                    }
                    (Some((200, terminal, ..)), None) => *terminal,
                    _ => false,
                };
            if done || Instant::now() > deadline {
                break done;
            }
            std::thread::sleep(Duration::from_millis(250));
        };
        if !agreed {
            let how = if answered.is_some() {
                "answered 200"
            } else {
                "not answered"
            };
            violations.push(format!(
                "command {command_id} ({how}, on {edge_id}): replicas report {last:?} \
                 (status, terminal, outcome, accepted) {COMMANDS_SETTLE:?} after the faults healed"
            ));
        }
    }
    Instant::now().saturating_duration_since(healed)
}

/// Every replica reads every event once from the fleet's stream, and every session
/// an Edge saw has its `edge_connected` there — unless the replica that accepted it
/// was killed (its outbox died with it) or counts events as lost.
pub fn events(
    cps: &[(String, SocketAddr)],
    sessions: &[(String, u64, String)],
    excused: &BTreeSet<String>,
    violations: &mut Vec<String>,
) -> usize {
    let mut read = 0;
    for (id, admin) in cps {
        let Some(events) = http::all_events(*admin, Duration::from_secs(3)) else {
            violations.push(format!("{id}: /v1/events?since=0 did not answer"));
            continue;
        };
        read = read.max(events.len());
        let mut seen = BTreeSet::new();
        for (name, data) in &events {
            let once = matches!(
                name.as_str(),
                "edge_connected" | "edge_disconnected" | "node_event" | "command_event"
            );
            if once && !seen.insert((name.clone(), data.clone())) {
                violations.push(format!("{id}: event {name} {data} read twice"));
            }
        }
        for (edge, session, cp) in sessions {
            let needle = format!(r#""edgeId":"{edge}","sessionId":"{session}""#);
            let found = events
                .iter()
                .any(|(n, d)| n == "edge_connected" && d.contains(&needle));
            if !found && !excused.contains(cp) {
                violations.push(format!(
                    "{id}: no edge_connected for {edge} session {session} (accepted at {cp})"
                ));
            }
        }
    }
    read
}

/// Every replica's fleet view converges (within 40 s): each lists every Edge id as
/// held by the same replica under the same session id, and that replica holds it.
pub fn converged(cps: &[(String, SocketAddr)], edge_ids: &[String], violations: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut last = String::new();
    while Instant::now() < deadline {
        let views: Vec<Option<serde_json::Value>> = cps
            .iter()
            .map(|(_, a)| http::get_json(*a, "/v1/edges", Duration::from_secs(3)))
            .collect();
        let owned: Vec<Option<BTreeMap<String, u64>>> =
            cps.iter().map(|(id, a)| own_sessions(id, *a)).collect();
        let holder_of = |edge: &str| -> Vec<(String, u64)> {
            cps.iter()
                .zip(&owned)
                .filter_map(|((id, _), o)| o.as_ref()?.get(edge).map(|s| (id.clone(), *s)))
                .collect()
        };
        let agree = edge_ids.iter().all(|edge| {
            let holders = holder_of(edge);
            let [(holder, session)] = holders.as_slice() else {
                return false;
            };
            let session = session.to_string();
            views.iter().all(|v| {
                v.as_ref().is_some_and(|v| {
                    v["edges"].as_array().is_some_and(|list| {
                        list.iter().any(|e| {
                            e["edgeId"] == edge.as_str()
                                && e["replica"] == holder.as_str()
                                && e["sessionId"].as_str() == Some(session.as_str())
                        })
                    })
                })
            })
        });
        if agree {
            return;
        }
        last = format!("{owned:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    violations.push(format!(
        "the replicas' fleet views never converged on one live session per Edge: {last}"
    ));
}

//! The workload of a run: status requests and commands (`edge.ping`, each under a
//! command id of the workload's own) through random replicas; a command without an
//! answer is sent again under the same id through another replica, as a caller that
//! lost its answer would.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::faults::Rng;
use super::http;

/// A command answered 200.
#[derive(Debug, Clone)]
pub struct Answered {
    pub command_id: String,
    pub response: serde_json::Value,
    /// When the answer arrived.
    pub at: Instant,
}

/// What the workload did.
#[derive(Debug, Default)]
pub struct History {
    /// Every command sent (its id and Edge), answered or not.
    pub tried: Vec<(String, String)>,
    pub answered: Vec<Answered>,
    /// Commands tried that never got a 200 (refused, timed out, engine unavailable).
    pub unanswered: Vec<String>,
    pub retries: usize,
    /// Every command attempt's outcome: `200`, `409 not_connected`, `503 …`, or
    /// `no answer` (a paused or killed replica, a timeout) → how many.
    pub outcomes: BTreeMap<String, usize>,
    pub statuses_ok: usize,
    pub statuses_failed: usize,
    /// Answers that break the rules (a retry under its own key refused as a conflict).
    pub violations: Vec<String>,
}

pub struct Workload {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<History>,
}

impl Workload {
    pub fn start(seed: u64, admins: Vec<SocketAddr>, edge_ids: Vec<String>) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || run(seed, &admins, &edge_ids, &flag));
        Workload { stop, thread }
    }

    pub fn stop(self) -> History {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("workload thread")
    }
}

fn run(seed: u64, admins: &[SocketAddr], edge_ids: &[String], stop: &AtomicBool) -> History {
    let mut rng = Rng::new(seed ^ 0x5eed);
    let mut history = History::default();
    let timeout = Duration::from_secs(6);
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100 + rng.below(150)));
        let edge_id = &edge_ids[rng.below(edge_ids.len() as u64) as usize];
        let first = rng.below(admins.len() as u64) as usize;
        if rng.below(10) < 3 {
            let path = format!("/v1/edges/{edge_id}/status");
            match http::request(admins[first], "GET", &path, None, timeout) {
                Some((200, _)) => history.statuses_ok += 1,
                Some((404, text)) => unknown(&mut history, edge_id, &text),
                _ => history.statuses_failed += 1,
            }
            continue;
        }
        n += 1;
        let command_id = format!("w{seed}-{n}");
        let body = format!(r#"{{"operation":"edge.ping","commandId":"{command_id}"}}"#);
        let path = format!("/v1/edges/{edge_id}/commands");
        history.tried.push((command_id.clone(), edge_id.clone()));
        let mut answered = false;
        for attempt in 0..3 {
            if attempt > 0 {
                history.retries += 1;
                std::thread::sleep(Duration::from_millis(500));
            }
            let via = admins[(first + attempt) % admins.len()];
            let answer = http::request(via, "POST", &path, Some(&body), timeout);
            *history
                .outcomes
                .entry(outcome(answer.as_ref()))
                .or_default() += 1;
            match answer {
                Some((200, text)) => {
                    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                    history.answered.push(Answered {
                        command_id: command_id.clone(),
                        response: json["response"].clone(),
                        at: Instant::now(),
                    });
                    answered = true;
                    break;
                }
                Some((409, text)) if text.contains("\"conflict\"") => {
                    history.violations.push(format!(
                        "command {command_id}: sent again under its own id through {via}, refused as a conflict: {text}"
                    ));
                    break;
                }
                Some((404, text)) => unknown(&mut history, edge_id, &text),
                // Not connected anywhere yet, or a replica that cannot answer: retried.
                _ => {}
            }
        }
        if !answered {
            history.unanswered.push(command_id);
        }
    }
    history
}

/// An attempt's outcome as the figures count it: the status and the error's code.
fn outcome(answer: Option<&(u16, String)>) -> String {
    let Some((status, body)) = answer else {
        return "no answer".to_owned();
    };
    let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    match json["error"]["code"].as_str() {
        Some(code) => format!("{status} {code}"),
        None => status.to_string(),
    }
}

/// PROTOCOL.md §8: every Edge of the run enrolled before the faults, so no replica may
/// call it unknown (404), only not connected (409) while no replica holds it.
fn unknown(history: &mut History, edge_id: &str, text: &str) {
    history.statuses_failed += 1;
    history.violations.push(format!(
        "{edge_id}, an Edge the cluster knows, answered 404: {text}"
    ));
}

//! `/v1/jobs`: fleet-wide jobs through the admin API. A job runs on the replica that
//! accepted it; in a cluster it reaches the Edges other replicas hold through the
//! router, and every command it starts has its own record (`<jobId>-<n>`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::Event;
use futures_lite::StreamExt;
use iop_core::cp::{CommandOutcome, CommandSpec};
use iop_core::proto::CommandPhase;
use iop_tokio::fleet::{EdgeRun, EdgeSelector, JobProgress, JobSpec, JobStop, OfflinePolicy};
use iop_tokio::{JobLauncher, JobObserver, JobTracker, LaunchFuture, Tokio};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::send::{find_command, send_and_answer};
use crate::admin::AdminState;
use crate::admin::http::error::ApiError;
use crate::admin::views::listing as fleet;

/// Jobs the admin API remembers (the oldest finished one goes first).
const JOBS_KEPT: usize = 256;

/// The most per-Edge rows one `GET /v1/jobs/{id}` returns.
const MAX_PAGE: usize = 1_000;

/// How often a job's view of which Edges are live, here or on other replicas, is
/// refreshed while it runs; and how often a routed command's record is read.
const REFRESH: Duration = Duration::from_millis(500);

/// Progress events held for a slow event stream; past it the stream skips to the
/// newest (each event is a job's whole progress, so the next one supersedes).
const PROGRESS_BUFFERED: usize = 1_024;

/// The name of a job's progress event on `GET /v1/events`.
pub(in crate::admin) const JOB_PROGRESS: &str = "job_progress";

/// The jobs started through this API, by id, with what each was asked (a repeat with
/// the same id and content is that job again), and their progress as events.
pub struct JobBook {
    jobs: Mutex<VecDeque<(JobSpec, EdgeSelector, JobTracker)>>,
    progress: broadcast::Sender<Value>,
}

impl Default for JobBook {
    fn default() -> Self {
        Self {
            jobs: Mutex::default(),
            progress: broadcast::channel(PROGRESS_BUFFERED).0,
        }
    }
}

impl std::fmt::Debug for JobBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let jobs = self.jobs.lock().map(|j| j.len()).unwrap_or(0);
        f.debug_struct("JobBook").field("jobs", &jobs).finish()
    }
}

impl JobBook {
    fn find(&self, job_id: &str) -> Option<(JobSpec, EdgeSelector, JobTracker)> {
        let jobs = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        jobs.iter().find(|(s, _, _)| s.job_id == job_id).cloned()
    }

    /// Room for one more job: the oldest finished one is forgotten when the book is
    /// full; false when every kept job still runs.
    fn make_room(&self) -> bool {
        let mut jobs = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if jobs.len() < JOBS_KEPT {
            return true;
        }
        match jobs.iter().position(|(_, _, t)| t.is_done()) {
            Some(i) => {
                jobs.remove(i);
                true
            }
            None => false,
        }
    }

    /// Every job's progress from now on, one `job_progress` event per change.
    pub fn subscribe(&self) -> broadcast::Receiver<Value> {
        self.progress.subscribe()
    }

    /// What tells this book's subscribers a job's progress.
    fn observer(&self) -> JobObserver {
        let progress = self.progress.clone();
        Arc::new(move |job_id, p, stopped| {
            // No stream open is no one to tell.
            let _ = progress.send(json!({
                "jobId": job_id,
                "state": if p.is_done() { "done" } else { "running" },
                "stopped": stop_name(stopped),
                "progress": progress_json(&p),
            }));
        })
    }

    fn insert(&self, spec: JobSpec, selector: EdgeSelector, tracker: JobTracker) {
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push_back((spec, selector, tracker));
    }
}

/// Reaches each Edge from here or through the replica holding it.
struct AdminLauncher {
    state: AdminState,
    /// Edges with a live session on another replica, refreshed while the job runs.
    remote_live: Arc<Mutex<HashSet<String>>>,
}

impl JobLauncher for AdminLauncher {
    fn run(&self, edge_id: String, spec: CommandSpec) -> LaunchFuture<Result<String, String>> {
        let s = self.state.clone();
        Box::pin(async move {
            let command_id = spec.command_id.clone();
            let (_, response) = send_and_answer(&s, &edge_id, spec)
                .await
                .map_err(|e| format!("{}: {}", e.code, e.message))?;
            if response["accepted"] != true {
                return Err(format!(
                    "rejected {}",
                    response["rejectReason"].as_str().unwrap_or("")
                ));
            }
            // Its end, from the record (this replica's, or the cluster's).
            loop {
                if let Ok(Some(record)) = find_command(&s, &command_id).await
                    && let Some(outcome) = &record.outcome
                {
                    let message = record
                        .events()
                        .last()
                        .map(|e| e.message.clone())
                        .unwrap_or_default();
                    return match outcome {
                        CommandOutcome::Finished(CommandPhase::Succeeded) => Ok(message),
                        other => Err(format!("{other:?}: {message}")),
                    };
                }
                tokio::time::sleep(REFRESH).await;
            }
        })
    }

    fn cancel(&self, edge_id: String, command_id: String) -> LaunchFuture<()> {
        let s = self.state.clone();
        Box::pin(async move {
            let spec = CommandSpec::cancel(&command_id);
            if let Err(e) = send_and_answer(&s, &edge_id, spec).await {
                tracing::debug!(command_id, code = e.code, "job command not cancelled");
            }
        })
    }

    fn connected(&self, edge_id: &str) -> bool {
        fleet::held_here(&self.state, edge_id)
            || self
                .remote_live
                .lock()
                .is_ok_and(|live| live.contains(edge_id))
    }
}

/// The Edges a selector picks from the fleet (every replica's), and those live now.
async fn select(s: &AdminState, selector: &EdgeSelector) -> (Vec<String>, HashSet<String>) {
    let views = fleet::edges(s).await;
    let live: HashSet<String> = views
        .iter()
        .filter(|v| v.connected())
        .map(|v| v.edge_id().to_owned())
        .collect();
    let ids = match selector {
        EdgeSelector::Ids(ids) => ids.clone(),
        // In Edge id order, as `fleet::edges` lists them.
        selector => views
            .iter()
            .filter(|v| selector.matches(v.edge_id(), v.software_version(), |k| v.metadata(k)))
            .map(|v| v.edge_id().to_owned())
            .collect(),
    };
    (ids, live)
}

fn body_error(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(format!("invalid job body: {}", message.into()))
}

/// The job a body asks for.
fn parse(body: &Value) -> Result<(JobSpec, EdgeSelector), ApiError> {
    let operation = body["operation"]
        .as_str()
        .filter(|o| !o.is_empty())
        .ok_or_else(|| body_error("`operation` is required"))?;
    let mut command = CommandSpec::new(operation);
    if let Some(selector) = body["targetSelector"].as_str() {
        command = command.with_target(selector);
    }
    if let Some(meta) = body["metadata"].as_object() {
        for (k, v) in meta {
            let v = v
                .as_str()
                .ok_or_else(|| body_error("metadata values are strings"))?;
            command = command.with_metadata(k, v);
        }
    }
    if let Some(t) = body.get("timeoutMs").filter(|t| !t.is_null()) {
        let t = t
            .as_u64()
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| body_error("`timeoutMs` is a number of milliseconds"))?;
        command = command.with_timeout_ms(t);
    }
    let edges = match &body["edges"] {
        Value::String(s) => s.parse::<EdgeSelector>().map_err(body_error)?,
        Value::Array(ids) => {
            let ids: Option<Vec<&str>> = ids.iter().map(Value::as_str).collect();
            let ids = ids.ok_or_else(|| body_error("`edges` lists edge ids"))?;
            ids.join(",").parse::<EdgeSelector>().map_err(body_error)?
        }
        Value::Null => {
            return Err(body_error(
                "`edges` is required: *, ids, meta:K=V or version:V",
            ));
        }
        _ => return Err(body_error("`edges` is a selector string or a list of ids")),
    };
    let count = |key: &str, default: usize| -> Result<usize, ApiError> {
        match body.get(key).filter(|v| !v.is_null()) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| body_error(format!("`{key}` is a count"))),
        }
    };
    let max_concurrent = count("maxConcurrent", 10)?;
    let max_failures = count("maxFailures", 0)?;
    let offline = match body["offline"].as_str().unwrap_or("skip") {
        "skip" => OfflinePolicy::Skip,
        "wait" => OfflinePolicy::Wait(Duration::from_millis(
            count("offlineWaitMs", 600_000)? as u64
        )),
        other => {
            return Err(body_error(format!(
                "`offline` is skip or wait, not {other:?}"
            )));
        }
    };
    let job_id = match body["jobId"].as_str() {
        Some(id) => id.to_owned(),
        None => format!("job-{:x}", iop_tokio::process_seed()),
    };
    let spec = JobSpec::new(job_id, command)
        .with_max_concurrent(max_concurrent)
        .with_max_failures(max_failures)
        .with_offline(offline);
    Ok((spec, edges))
}

fn stop_name(stop: Option<JobStop>) -> Value {
    match stop {
        None => Value::Null,
        Some(JobStop::FailureBudget) => json!("failure_budget"),
        Some(JobStop::Cancelled) => json!("cancelled"),
    }
}

/// A job's summary: its id, command, limits, progress and state.
fn summary(spec: &JobSpec, tracker: &JobTracker) -> Value {
    json!({
        "jobId": spec.job_id,
        "operation": spec.command.operation,
        "targetSelector": spec.command.target_selector,
        "maxConcurrent": spec.max_concurrent,
        "maxFailures": spec.max_failures,
        "state": if tracker.is_done() { "done" } else { "running" },
        "stopped": stop_name(tracker.stopped()),
        "progress": progress_json(&tracker.progress()),
    })
}

fn progress_json(p: &JobProgress) -> Value {
    json!({
        "total": p.total, "pending": p.pending, "waiting": p.waiting, "running": p.running,
        "succeeded": p.succeeded, "failed": p.failed, "skipped": p.skipped,
    })
}

/// `events` (a `GET /v1/events` stream) with every job's progress woven in as
/// [`JOB_PROGRESS`] events; it ends when `events` ends.
pub(in crate::admin) fn with_progress<S>(
    events: S,
    progress: broadcast::Receiver<Value>,
) -> impl futures_lite::Stream<Item = Result<Event, Infallible>> + Send
where
    S: futures_lite::Stream<Item = Result<Event, Infallible>> + Send + Unpin,
{
    futures_lite::stream::unfold(
        (events, Some(progress)),
        |(mut events, mut progress)| async move {
            loop {
                let next_progress = async {
                    match &mut progress {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    item = events.next() => return item.map(|i| (i, (events, progress))),
                    got = next_progress => match got {
                        Ok(data) => {
                            let event = Event::default().event(JOB_PROGRESS).data(data.to_string());
                            return Some((Ok(event), (events, progress)));
                        }
                        // Missed ones are superseded by the next.
                        Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => progress = None,
                    },
                }
            }
        },
    )
}

fn unknown_job(job_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_job",
        format!("no job {job_id:?} is known to this control plane"),
    )
}

/// `POST /v1/jobs`: starts a job (or, under a known `jobId` with the same content,
/// answers that job again); 409 `conflict` for a known id with other content.
pub(in crate::admin) async fn post_job(
    State(s): State<AdminState>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: Value = serde_json::from_slice(&body).map_err(|e| body_error(e.to_string()))?;
    let (spec, selector) = parse(&body)?;
    if let Some((known, known_selector, tracker)) = s.jobs.find(&spec.job_id) {
        if known != spec || known_selector != selector {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("job id {:?} is already another job", spec.job_id),
            ));
        }
        return Ok(Json(summary(&known, &tracker)));
    }
    if !s.jobs.make_room() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!("{JOBS_KEPT} jobs run already"),
        ));
    }
    let (ids, live) = select(&s, &selector).await;
    let remote_live = Arc::new(Mutex::new(live));
    let launcher = Arc::new(AdminLauncher {
        state: s.clone(),
        remote_live: remote_live.clone(),
    });
    let tracker = JobTracker::start::<Tokio>(spec.clone(), ids, launcher, Some(s.jobs.observer()))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    // Which Edges are live anywhere, while it runs (other replicas' Edges come and go).
    let (refresh_state, refresh_selector, refreshing) =
        (s.clone(), selector.clone(), tracker.clone());
    tokio::spawn(async move {
        while !refreshing.is_done() {
            tokio::time::sleep(REFRESH).await;
            let (_, live) = select(&refresh_state, &refresh_selector).await;
            if let Ok(mut held) = remote_live.lock() {
                *held = live;
            }
        }
    });
    s.jobs.insert(spec.clone(), selector, tracker.clone());
    Ok(Json(summary(&spec, &tracker)))
}

/// `GET /v1/jobs/{id}?after=EDGE&limit=N`: the summary and a page of per-Edge runs.
pub(in crate::admin) async fn get_job(
    State(s): State<AdminState>,
    Path(job_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let (spec, _, tracker) = s.jobs.find(&job_id).ok_or_else(|| unknown_job(&job_id))?;
    let limit = match query.get("limit") {
        None => 100,
        Some(l) => l
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request("`limit` is a count"))?
            .clamp(1, MAX_PAGE),
    };
    let page = tracker.edges(query.get("after").map(String::as_str), limit);
    let rows: Vec<Value> = page
        .iter()
        .map(|e| {
            let message = match &e.run {
                EdgeRun::Succeeded(m) | EdgeRun::Failed(m) | EdgeRun::Skipped(m) => m.as_str(),
                _ => "",
            };
            json!({
                "edgeId": e.edge_id, "state": e.run.name(), "commandId": e.command_id,
                "message": message,
            })
        })
        .collect();
    let mut out = summary(&spec, &tracker);
    out["next"] = match page.last() {
        Some(last) if page.len() == limit => json!(last.edge_id),
        _ => Value::Null,
    };
    out["edges"] = Value::Array(rows);
    Ok(Json(out))
}

/// `POST /v1/jobs/{id}/cancel`: no more Edges start; the running commands are
/// cancelled (`command.cancel`).
pub(in crate::admin) async fn cancel_job(
    State(s): State<AdminState>,
    Path(job_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (spec, _, tracker) = s.jobs.find(&job_id).ok_or_else(|| unknown_job(&job_id))?;
    tracker.cancel();
    Ok(Json(summary(&spec, &tracker)))
}

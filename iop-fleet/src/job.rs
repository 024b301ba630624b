//! Fleet-wide jobs: one command run on many Edges, at most `max_concurrent` at once,
//! launching no more once `max_failures` Edges failed, skipping or waiting for Edges
//! that are offline. This is the plan only — which Edge to start next, what each
//! Edge's run came to — with time an argument; a driver sends the commands and tells
//! the plan how each ended.
//!
//! ```
//! use std::time::Duration;
//! use iop_core::Instant;
//! use iop_core::cp::CommandSpec;
//! use iop_fleet::{Job, JobSpec, OfflinePolicy};
//!
//! let spec = JobSpec::new("drain-gpus", CommandSpec::new("node.drain").with_target("label:tier=gpu"))
//!     .with_max_concurrent(2)
//!     .with_offline(OfflinePolicy::Skip);
//! let now = Instant::ZERO;
//! let mut job = Job::new(spec, ["e1", "e2", "e3"], now)?;
//! let online = |edge: &str| edge != "e3";
//! let first = job.next_launches(now, online);
//! assert_eq!(first.len(), 2); // at most 2 at once
//! job.finished(&first[0].0, true, "drained");
//! job.finished(&first[1].0, true, "drained");
//! assert!(job.next_launches(now, online).is_empty()); // e3 is offline: skipped
//! assert!(job.is_done());
//! assert_eq!(job.progress().succeeded, 2);
//! assert_eq!(job.progress().skipped, 1);
//! # Ok::<(), iop_fleet::JobError>(())
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use iop_core::Instant;
use iop_core::cp::CommandSpec;
use iop_core::ids::{IdError, MAX_ID_LEN, validate_id};

/// The most Edges one job runs on.
pub const MAX_JOB_EDGES: usize = 100_000;

/// Which Edges a job runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeSelector {
    /// Every Edge the Control Plane knows (`*`).
    All,
    /// These Edges (`a,b,c`), in this order.
    Ids(Vec<String>),
    /// Edges whose latest hello had metadata `key` = `value` (`meta:key=value`).
    Metadata {
        /// The metadata key.
        key: String,
        /// Its value.
        value: String,
    },
    /// Edges whose latest hello said this software version (`version:V`).
    Version(String),
}

impl std::str::FromStr for EdgeSelector {
    type Err = String;

    /// `*`, `meta:KEY=VALUE`, `version:V`, or a comma-separated list of Edge ids.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "*" {
            return Ok(Self::All);
        }
        if let Some(rest) = s.strip_prefix("meta:") {
            let (key, value) = rest
                .split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("{s:?}: expected meta:KEY=VALUE"))?;
            return Ok(Self::Metadata {
                key: key.to_owned(),
                value: value.to_owned(),
            });
        }
        if let Some(version) = s.strip_prefix("version:") {
            if version.is_empty() {
                return Err(format!("{s:?}: expected version:V"));
            }
            return Ok(Self::Version(version.to_owned()));
        }
        let ids: Vec<String> = s
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .collect();
        if ids.is_empty() {
            return Err("no edge: expected *, meta:KEY=VALUE, version:V or edge ids".into());
        }
        for id in &ids {
            validate_id("edge id", id).map_err(|e| e.to_string())?;
        }
        Ok(Self::Ids(ids))
    }
}

impl EdgeSelector {
    /// Whether the Edge `edge_id`, of software `version` and hello `metadata`, is
    /// selected.
    pub fn matches<'a>(
        &self,
        edge_id: &str,
        version: &str,
        metadata: impl Fn(&str) -> Option<&'a str>,
    ) -> bool {
        match self {
            Self::All => true,
            Self::Ids(ids) => ids.iter().any(|id| id == edge_id),
            Self::Metadata { key, value } => metadata(key) == Some(value.as_str()),
            Self::Version(v) => version == v,
        }
    }
}

/// What a job does to Edges that are offline when their turn comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfflinePolicy {
    /// Skip them (their run ends `Skipped`).
    Skip,
    /// Wait for them to connect, at most this long from the job's start; then skip.
    Wait(Duration),
}

/// A job: the command, how many Edges at once, the failure budget, the offline policy.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// The job's id, an idempotency key (PROTOCOL.md §4.4's grammar, at most 120
    /// bytes): each Edge's command is `<job_id>-<n>`, `n` its place in the job.
    pub job_id: String,
    /// The command each Edge runs (its `command_id` is the job's to choose).
    pub command: CommandSpec,
    /// Edges running the command at once (at least 1).
    pub max_concurrent: usize,
    /// Failed Edges tolerated: past this many, no more Edges are started.
    pub max_failures: usize,
    /// What to do with Edges that are offline.
    pub offline: OfflinePolicy,
}

impl JobSpec {
    /// A job `job_id` running `command`: 10 Edges at once, no failure tolerated,
    /// offline Edges skipped.
    pub fn new(job_id: impl Into<String>, command: CommandSpec) -> Self {
        Self {
            job_id: job_id.into(),
            command,
            max_concurrent: 10,
            max_failures: 0,
            offline: OfflinePolicy::Skip,
        }
    }

    /// Sets how many Edges run at once.
    pub fn with_max_concurrent(mut self, n: usize) -> Self {
        self.max_concurrent = n;
        self
    }

    /// Sets the failure budget.
    pub fn with_max_failures(mut self, n: usize) -> Self {
        self.max_failures = n;
        self
    }

    /// Sets the offline policy.
    pub fn with_offline(mut self, offline: OfflinePolicy) -> Self {
        self.offline = offline;
        self
    }

    /// The command id of the job's `n`th Edge.
    pub fn command_id(&self, n: usize) -> String {
        format!("{}-{n}", self.job_id)
    }
}

/// Why a job could not be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The job id is not an id, or leaves no room for the commands' suffix.
    #[error("job id: {0}")]
    JobId(#[from] IdError),
    /// The job id is over 120 bytes: its commands' ids would be over the id cap.
    #[error("job id is {0} bytes, over 120 (its commands' ids add `-<n>`)")]
    JobIdTooLong(usize),
    /// No Edge to run on.
    #[error("the job selects no edge")]
    NoEdges,
    /// Over [`MAX_JOB_EDGES`].
    #[error("the job selects {0} edges, over {MAX_JOB_EDGES}")]
    TooManyEdges(usize),
    /// `max_concurrent` is 0.
    #[error("max_concurrent must be at least 1")]
    NoConcurrency,
}

/// Where one Edge's run is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EdgeRun {
    /// Not started yet.
    Pending,
    /// Offline, waited for (until the deadline).
    Waiting,
    /// Its command was sent.
    Running,
    /// Its command SUCCEEDED.
    Succeeded(String),
    /// Its command did not succeed (or could not be sent), with why.
    Failed(String),
    /// Never started: offline, or the job stopped first, with why.
    Skipped(String),
}

impl EdgeRun {
    /// Whether the run is over.
    pub fn is_done(&self) -> bool {
        matches!(
            self,
            Self::Succeeded(_) | Self::Failed(_) | Self::Skipped(_)
        )
    }

    /// A short name: `pending`, `waiting`, `running`, `succeeded`, `failed`, `skipped`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Waiting => "waiting",
            Self::Running => "running",
            Self::Succeeded(_) => "succeeded",
            Self::Failed(_) => "failed",
            Self::Skipped(_) => "skipped",
        }
    }
}

/// How many Edges are where.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobProgress {
    /// Edges in the job.
    pub total: usize,
    /// Not started.
    pub pending: usize,
    /// Offline, waited for.
    pub waiting: usize,
    /// Running now.
    pub running: usize,
    /// Succeeded.
    pub succeeded: usize,
    /// Failed.
    pub failed: usize,
    /// Skipped.
    pub skipped: usize,
}

impl JobProgress {
    /// Whether every Edge's run is over (succeeded, failed or skipped).
    pub fn is_done(&self) -> bool {
        self.succeeded + self.failed + self.skipped == self.total
    }
}

/// Why a job stopped launching before the end, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStop {
    /// More Edges failed than `max_failures`.
    FailureBudget,
    /// The job was cancelled.
    Cancelled,
}

/// One Edge of a plan: its id and its run.
#[derive(Debug, Clone)]
struct Entry {
    edge_id: String,
    run: EdgeRun,
}

/// One job's plan: each Edge's run, in the order given.
#[derive(Debug, Clone)]
pub struct Job {
    spec: JobSpec,
    /// Edges in job order; `index` maps an id to its place.
    entries: Vec<Entry>,
    index: BTreeMap<String, usize>,
    progress: JobProgress,
    wait_until: Option<Instant>,
    stopped: Option<JobStop>,
}

/// Moves `entry` to `run`, keeping `progress`'s counts.
fn transition(progress: &mut JobProgress, entry: &mut Entry, run: EdgeRun) {
    *slot(progress, &entry.run) -= 1;
    *slot(progress, &run) += 1;
    entry.run = run;
}

fn slot<'a>(p: &'a mut JobProgress, r: &EdgeRun) -> &'a mut usize {
    match r {
        EdgeRun::Pending => &mut p.pending,
        EdgeRun::Waiting => &mut p.waiting,
        EdgeRun::Running => &mut p.running,
        EdgeRun::Succeeded(_) => &mut p.succeeded,
        EdgeRun::Failed(_) => &mut p.failed,
        EdgeRun::Skipped(_) => &mut p.skipped,
    }
}

impl Job {
    /// Plans `spec` over `edges` (in launch order; a repeated id counts once) at `now`.
    pub fn new<I, S>(spec: JobSpec, edges: I, now: Instant) -> Result<Self, JobError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        validate_id("job_id", &spec.job_id)?;
        if spec.job_id.len() > MAX_ID_LEN - 8 {
            return Err(JobError::JobIdTooLong(spec.job_id.len()));
        }
        if spec.max_concurrent == 0 {
            return Err(JobError::NoConcurrency);
        }
        let mut job = Self {
            wait_until: match spec.offline {
                OfflinePolicy::Skip => None,
                OfflinePolicy::Wait(d) => Some(now + d),
            },
            spec,
            entries: Vec::new(),
            index: BTreeMap::new(),
            progress: JobProgress::default(),
            stopped: None,
        };
        for edge_id in edges {
            let edge_id = edge_id.into();
            if job.index.contains_key(&edge_id) {
                continue;
            }
            if job.entries.len() == MAX_JOB_EDGES {
                return Err(JobError::TooManyEdges(MAX_JOB_EDGES + 1));
            }
            job.index.insert(edge_id.clone(), job.entries.len());
            job.entries.push(Entry {
                edge_id,
                run: EdgeRun::Pending,
            });
        }
        if job.entries.is_empty() {
            return Err(JobError::NoEdges);
        }
        job.progress.total = job.entries.len();
        job.progress.pending = job.entries.len();
        Ok(job)
    }

    /// The job's spec.
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    /// The Edges to start now, with their command ids: pending Edges in order while
    /// fewer than `max_concurrent` run, those `connected` says are offline set
    /// waiting (or skipped, under [`OfflinePolicy::Skip`] or past the wait). Each is
    /// `Running` from here; tell the plan how it ends with [`finished`](Self::finished).
    pub fn next_launches(
        &mut self,
        now: Instant,
        connected: impl Fn(&str) -> bool,
    ) -> Vec<(String, String)> {
        self.expire_waits(now);
        let mut out = Vec::new();
        if self.stopped.is_some() {
            return out;
        }
        let waiting = self.wait_until.is_some_and(|until| now < until);
        for (i, entry) in self.entries.iter_mut().enumerate() {
            if self.progress.running >= self.spec.max_concurrent {
                break;
            }
            if !matches!(entry.run, EdgeRun::Pending | EdgeRun::Waiting) {
                continue;
            }
            let run = if connected(&entry.edge_id) {
                out.push((entry.edge_id.clone(), self.spec.command_id(i)));
                EdgeRun::Running
            } else if waiting {
                EdgeRun::Waiting
            } else {
                EdgeRun::Skipped("offline".into())
            };
            transition(&mut self.progress, entry, run);
        }
        out
    }

    /// The Edge `edge_id`'s command ended: SUCCEEDED (`succeeded`) or not, saying
    /// `message`. Past the failure budget the job starts no more Edges.
    pub fn finished(&mut self, edge_id: &str, succeeded: bool, message: impl Into<String>) {
        let Some(entry) = self
            .index
            .get(edge_id)
            .and_then(|&i| self.entries.get_mut(i))
        else {
            return;
        };
        if entry.run != EdgeRun::Running {
            return;
        }
        let message = message.into();
        if succeeded {
            transition(&mut self.progress, entry, EdgeRun::Succeeded(message));
        } else {
            transition(&mut self.progress, entry, EdgeRun::Failed(message));
            if self.progress.failed > self.spec.max_failures && self.stopped.is_none() {
                self.stop(JobStop::FailureBudget);
            }
        }
    }

    /// Cancels the job: no more Edges start (those not started are skipped); the
    /// commands running now, by Edge and command id, are for the driver to cancel.
    pub fn cancel(&mut self) -> Vec<(String, String)> {
        if self.stopped.is_none() {
            self.stop(JobStop::Cancelled);
        }
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.run == EdgeRun::Running)
            .map(|(i, e)| (e.edge_id.clone(), self.spec.command_id(i)))
            .collect()
    }

    fn stop(&mut self, why: JobStop) {
        self.stopped = Some(why);
        let reason = match why {
            JobStop::FailureBudget => format!(
                "the job stopped: more than {} edge(s) failed",
                self.spec.max_failures
            ),
            JobStop::Cancelled => "the job was cancelled".to_owned(),
        };
        for entry in &mut self.entries {
            if matches!(entry.run, EdgeRun::Pending | EdgeRun::Waiting) {
                transition(&mut self.progress, entry, EdgeRun::Skipped(reason.clone()));
            }
        }
    }

    /// Waiting Edges past the wait are skipped.
    fn expire_waits(&mut self, now: Instant) {
        let over = self.wait_until.is_none_or(|until| now >= until);
        if !over || self.progress.waiting == 0 {
            return;
        }
        for entry in &mut self.entries {
            if entry.run == EdgeRun::Waiting {
                let skipped = EdgeRun::Skipped("offline until the wait ended".into());
                transition(&mut self.progress, entry, skipped);
            }
        }
    }

    /// How many Edges are where.
    pub fn progress(&self) -> JobProgress {
        self.progress
    }

    /// Why the job stopped launching early, if it did.
    pub fn stopped(&self) -> Option<JobStop> {
        self.stopped
    }

    /// Whether every Edge's run is over.
    pub fn is_done(&self) -> bool {
        self.progress.is_done()
    }

    /// When a waiting Edge is given up on (the driver looks again then, or sooner).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.wait_until.filter(|_| self.progress.waiting > 0)
    }

    /// Up to `limit` Edges after `after` (an Edge id; `None`: from the first), in job
    /// order, with their runs and command ids.
    pub fn page(&self, after: Option<&str>, limit: usize) -> Vec<(&str, &EdgeRun, String)> {
        let start = match after {
            Some(id) => self.index.get(id).map_or(self.entries.len(), |i| i + 1),
            None => 0,
        };
        self.entries
            .iter()
            .enumerate()
            .skip(start)
            .take(limit)
            .map(|(i, e)| (e.edge_id.as_str(), &e.run, self.spec.command_id(i)))
            .collect()
    }
}

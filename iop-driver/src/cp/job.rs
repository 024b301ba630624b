//! Running a fleet-wide job ([`iop_fleet::Job`]): the fleet's plan decides which
//! Edge starts next; this task sends each Edge's command through a [`JobLauncher`],
//! tells the plan how it ended, looks again for offline Edges, and cancels what runs
//! when the job is cancelled.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iop_core::cp::{CommandSpec, Reachability};
use iop_fleet::{EdgeRun, EdgeSelector, Job, JobError, JobProgress, JobSpec, JobStop};

use super::handle::ControlPlaneHandle;
use crate::Runtime;
use crate::clock::Clock;
use crate::signal::{Signal, lock};

/// How often a job with offline Edges to wait for looks again.
const OFFLINE_POLL: Duration = Duration::from_millis(250);

/// A boxed future of a launcher.
pub type LaunchFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// How a job reaches its Edges: [`ControlPlaneHandle`] for the Edges it holds; a
/// cluster's admin layer routes to the replica holding each.
pub trait JobLauncher: Send + Sync + 'static {
    /// Sends `spec` (its `command_id` set) to `edge_id` and resolves once the command
    /// ended: `Ok(message)` when it SUCCEEDED, `Err(why)` otherwise.
    fn run(&self, edge_id: String, spec: CommandSpec) -> LaunchFuture<Result<String, String>>;
    /// Asks `edge_id` to stop `command_id` (`command.cancel`); errors are the
    /// launcher's to log.
    fn cancel(&self, edge_id: String, command_id: String) -> LaunchFuture<()>;
    /// Whether `edge_id` has a live session now.
    fn connected(&self, edge_id: &str) -> bool;
}

impl<R: Runtime> JobLauncher for ControlPlaneHandle<R> {
    fn run(&self, edge_id: String, spec: CommandSpec) -> LaunchFuture<Result<String, String>> {
        let sent = self.send_command(&edge_id, spec);
        Box::pin(async move {
            match sent {
                Ok(tracker) => match tracker.outcome().await {
                    Ok(terminal) => Ok(terminal.message),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn cancel(&self, _edge_id: String, command_id: String) -> LaunchFuture<()> {
        if let Err(e) = ControlPlaneHandle::cancel(self, &command_id) {
            tracing::debug!(command_id, error = %e, "job command not cancelled");
        }
        Box::pin(async {})
    }

    fn connected(&self, edge_id: &str) -> bool {
        self.edge(edge_id)
            .is_some_and(|v| v.reachability != Reachability::Disconnected)
    }
}

impl<R: Runtime> ControlPlaneHandle<R> {
    /// Runs `spec` on the Edges `edges` selects among those this Control Plane knows
    /// (in id order; listed ids in their order, known or not: an unknown one is
    /// offline), sending each its command through this handle. The job's commands
    /// each have their own record (`<job_id>-<n>`); the tracker follows the job.
    pub fn run_job(&self, spec: JobSpec, edges: &EdgeSelector) -> Result<JobTracker, JobError> {
        let ids = match edges {
            EdgeSelector::Ids(ids) => ids.clone(),
            selector => {
                let mut ids: Vec<String> = self
                    .edges()
                    .into_iter()
                    .filter(|v| {
                        selector.matches(&v.edge_id, &v.software_version, |k| v.metadata(k))
                    })
                    .map(|v| v.edge_id)
                    .collect();
                ids.sort();
                ids
            }
        };
        JobTracker::start::<R>(spec, ids, Arc::new(self.clone()), None)
    }
}

/// One Edge of a job: its run and its command's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEdge {
    /// The Edge.
    pub edge_id: String,
    /// Where its run is.
    pub run: EdgeRun,
    /// Its command's id (`<job_id>-<n>`).
    pub command_id: String,
}

struct JobShared {
    job: Mutex<Job>,
    /// Told on every change (an Edge ended, the job was cancelled).
    wake: Signal,
    /// Callers of [`JobTracker::finish`] waiting for the end.
    done: Mutex<Vec<futures_channel::oneshot::Sender<()>>>,
    observer: Option<JobObserver>,
}

/// Called with the job's progress after every change (for an event stream).
pub type JobObserver = Arc<dyn Fn(&str, JobProgress, Option<JobStop>) + Send + Sync>;

/// A running job: its progress, each Edge's run, cancellation, its end.
#[derive(Clone)]
pub struct JobTracker {
    job_id: String,
    shared: Arc<JobShared>,
    launcher: Arc<dyn JobLauncher>,
    /// The runtime's spawn, for the cancellations.
    spawn: fn(LaunchFuture<()>),
}

impl std::fmt::Debug for JobTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobTracker")
            .field("job_id", &self.job_id)
            .field("progress", &self.progress())
            .finish()
    }
}

impl JobTracker {
    /// Plans `spec` over `edges` (in launch order) and starts it on the runtime `R`,
    /// reaching Edges through `launcher`; `observer` hears its progress after every
    /// change.
    pub fn start<R: Runtime>(
        spec: JobSpec,
        edges: Vec<String>,
        launcher: Arc<dyn JobLauncher>,
        observer: Option<JobObserver>,
    ) -> Result<Self, JobError> {
        let clock = Clock::new();
        let job = Job::new(spec, edges, clock.now())?;
        let tracker = Self {
            job_id: job.spec().job_id.clone(),
            shared: Arc::new(JobShared {
                job: Mutex::new(job),
                wake: Signal::new(),
                done: Mutex::new(Vec::new()),
                observer,
            }),
            launcher,
            spawn: |f| R::spawn(f),
        };
        R::spawn(run::<R>(tracker.clone(), clock));
        Ok(tracker)
    }

    /// The job's id.
    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    /// The job's spec.
    pub fn spec(&self) -> JobSpec {
        lock(&self.shared.job).spec().clone()
    }

    /// How many Edges are where.
    pub fn progress(&self) -> JobProgress {
        lock(&self.shared.job).progress()
    }

    /// Why it stopped launching early, if it did.
    pub fn stopped(&self) -> Option<JobStop> {
        lock(&self.shared.job).stopped()
    }

    /// Whether every Edge's run is over.
    pub fn is_done(&self) -> bool {
        lock(&self.shared.job).is_done()
    }

    /// Up to `limit` Edges after `after` (an Edge id), in job order.
    pub fn edges(&self, after: Option<&str>, limit: usize) -> Vec<JobEdge> {
        lock(&self.shared.job)
            .page(after, limit)
            .into_iter()
            .map(|(edge_id, run, command_id)| JobEdge {
                edge_id: edge_id.to_owned(),
                run: run.clone(),
                command_id,
            })
            .collect()
    }

    /// Cancels the job: no more Edges start, and the commands running are cancelled
    /// (`command.cancel`). Idempotent.
    pub fn cancel(&self) {
        let running = lock(&self.shared.job).cancel();
        for (edge_id, command_id) in running {
            (self.spawn)(self.launcher.cancel(edge_id, command_id));
        }
        self.changed();
    }

    /// Waits for every Edge's run to end; the final progress.
    pub async fn finish(&self) -> JobProgress {
        let rx = {
            let mut done = lock(&self.shared.done);
            if self.is_done() {
                return self.progress();
            }
            let (tx, rx) = futures_channel::oneshot::channel();
            done.push(tx);
            rx
        };
        let _ = rx.await;
        self.progress()
    }

    fn changed(&self) {
        if let Some(observer) = &self.shared.observer {
            let (progress, stopped) = {
                let job = lock(&self.shared.job);
                (job.progress(), job.stopped())
            };
            observer(&self.job_id, progress, stopped);
        }
        self.shared.wake.notify();
    }
}

/// The job's task: launch what the plan says, until every Edge's run is over.
async fn run<R: Runtime>(tracker: JobTracker, clock: Clock) {
    let shared = tracker.shared.clone();
    loop {
        let (launches, spec, waiting, done) = {
            let mut job = lock(&shared.job);
            let launcher = &tracker.launcher;
            let launches = job.next_launches(clock.now(), |e| launcher.connected(e));
            (
                launches,
                job.spec().command.clone(),
                job.progress().waiting > 0,
                job.is_done(),
            )
        };
        if !launches.is_empty() {
            tracker.changed();
        }
        for (edge_id, command_id) in launches {
            let mut spec = spec.clone();
            spec.command_id = command_id;
            let ran = tracker.launcher.run(edge_id.clone(), spec);
            let tracker = tracker.clone();
            R::spawn(async move {
                let (succeeded, message) = match ran.await {
                    Ok(message) => (true, message),
                    Err(why) => (false, why),
                };
                lock(&tracker.shared.job).finished(&edge_id, succeeded, message);
                tracker.changed();
            });
        }
        if done {
            break;
        }
        if waiting {
            // Offline Edges: look again soon (they may connect) or at the wait's end.
            let deadline = std::time::Instant::now() + OFFLINE_POLL;
            let _ = crate::runtime::before::<R, _>(deadline, shared.wake.wait()).await;
        } else {
            shared.wake.wait().await;
        }
    }
    tracker.changed();
    for tx in lock(&shared.done).drain(..) {
        let _ = tx.send(());
    }
}

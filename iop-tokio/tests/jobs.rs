//! Fleet-wide jobs over real sockets (`ControlPlaneHandle::run_job`): 200 Edges in this
//! process, each counting how many of its handlers run at once across the fleet. The
//! job's concurrency is never exceeded, its failure budget stops it, offline Edges are
//! skipped or waited for, and a cancellation stops launching and cancels what runs.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use iop_tokio::core::cp::{CommandSpec, Reachability};
use iop_tokio::core::edge::TargetLevel;
use iop_tokio::fleet::{EdgeRun, EdgeSelector, JobSpec, JobStop, OfflinePolicy};
use iop_tokio::{CommandResult, ControlPlaneHandle, ControlPlaneServer, EdgeClient, EdgeHandle};
use support::*;

/// The fleet's handlers running now, and the most ever at once.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
    runs: AtomicUsize,
}

impl Gauge {
    fn enter(&self) {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `work` takes 20 ms (or until cancelled) and fails on Edges whose index is in
/// `fails`.
fn edge(i: usize, gauge: Arc<Gauge>, fails: fn(usize) -> bool, hold: bool) -> EdgeClient {
    EdgeClient::new(fast_edge(&format!("edge-{i:03}"))).operation(
        "work",
        TargetLevel::Edge,
        move |ctx| {
            let gauge = gauge.clone();
            async move {
                gauge.enter();
                let work = if hold {
                    Duration::from_secs(30)
                } else {
                    Duration::from_millis(20)
                };
                let cancelled = futures_lite::future::or(
                    async {
                        tokio::time::sleep(work).await;
                        false
                    },
                    async {
                        ctx.cancelled().await;
                        true
                    },
                )
                .await;
                gauge.leave();
                if cancelled {
                    CommandResult::cancelled("stopped")
                } else if fails(i) {
                    CommandResult::failed("this edge fails")
                } else {
                    CommandResult::succeeded("worked")
                }
            }
        },
    )
}

async fn fleet(
    n: usize,
    fails: fn(usize) -> bool,
    hold: bool,
) -> (
    ControlPlaneServer,
    ControlPlaneHandle,
    Vec<EdgeHandle>,
    Arc<Gauge>,
) {
    let mut config = fast_server();
    // Every Edge dials from 127.0.0.1 at once: none is refused for its address, and
    // one refused over a loaded machine's hello burst is back within half a second
    // (not after the default's 10 s, longer than the test waits).
    config.max_pending_hellos_per_ip = n;
    config.cp.retry_after_overloaded = Duration::from_millis(500);
    let server = ControlPlaneServer::bind(localhost(), config).await.unwrap();
    let cp = server.handle();
    let gauge = Arc::new(Gauge::default());
    let edges: Vec<EdgeHandle> = (0..n)
        .map(|i| {
            edge(i, gauge.clone(), fails, hold)
                .connect(server.local_addr())
                .unwrap()
        })
        .collect();
    bounded("the fleet connected", async {
        while cp
            .edges()
            .iter()
            .filter(|v| v.reachability == Reachability::Connected)
            .count()
            < n
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    (server, cp, edges, gauge)
}

fn work(job_id: &str) -> JobSpec {
    JobSpec::new(job_id, CommandSpec::new("work"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_on_200_edges_never_more_than_20_at_once() {
    let (server, cp, edges, gauge) = fleet(200, |i| i % 50 == 7, false).await;
    let spec = work("job-all")
        .with_max_concurrent(20)
        .with_max_failures(10);
    let job = cp.run_job(spec, &EdgeSelector::All).unwrap();
    let done = bounded("the job", job.finish()).await;
    assert_eq!(done.total, 200);
    assert_eq!((done.succeeded, done.failed, done.skipped), (196, 4, 0));
    assert_eq!(gauge.runs.load(Ordering::SeqCst), 200, "each edge ran once");
    let max = gauge.max.load(Ordering::SeqCst);
    assert!(max <= 20, "{max} ran at once");
    assert!(max >= 10, "the job kept its concurrency busy: {max}");
    // Every Edge's command has its own record, named for the job.
    let page = job.edges(None, 3);
    assert_eq!(page[0].edge_id, "edge-000");
    assert_eq!(page[0].command_id, "job-all-0");
    assert!(cp.command("job-all-0").is_some_and(|r| r.outcome.is_some()));
    let next = job.edges(Some("edge-198"), 10);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].edge_id, "edge-199");
    let failed = job.edges(Some("edge-006"), 1);
    assert!(
        matches!(&failed[0].run, EdgeRun::Failed(why) if why.contains("this edge fails")),
        "{failed:?}"
    );
    for e in edges {
        e.shutdown().await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_failure_budget_a_job_starts_no_more_edges() {
    let (server, cp, edges, gauge) = fleet(40, |i| i < 10, false).await;
    let spec = work("job-budget")
        .with_max_concurrent(2)
        .with_max_failures(2);
    let job = cp.run_job(spec, &EdgeSelector::All).unwrap();
    let done = bounded("the job", job.finish()).await;
    assert_eq!(job.stopped(), Some(JobStop::FailureBudget));
    // Three failures stop it; what was running then still ends.
    assert!((3..=4).contains(&done.failed), "{done:?}");
    assert_eq!(done.succeeded, 0);
    assert_eq!(done.skipped, 40 - gauge.runs.load(Ordering::SeqCst));
    assert!(done.skipped >= 36, "{done:?}");
    for e in edges {
        e.shutdown().await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_edges_are_skipped_or_waited_for() {
    let (server, cp, mut edges, gauge) = fleet(6, |_| false, false).await;
    // Two Edges leave: the Control Plane knows them, disconnected.
    for e in edges.drain(4..) {
        e.shutdown().await;
    }
    bounded("two offline", async {
        while cp
            .edges()
            .iter()
            .filter(|v| v.reachability == Reachability::Disconnected)
            .count()
            < 2
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let skip = cp.run_job(work("job-skip"), &EdgeSelector::All).unwrap();
    let done = bounded("the skipping job", skip.finish()).await;
    assert_eq!((done.succeeded, done.skipped), (4, 2), "{done:?}");
    assert!(
        matches!(&skip.edges(Some("edge-003"), 1)[0].run, EdgeRun::Skipped(why) if why == "offline")
    );

    // Waited for: `edge-late` is not there yet when the job starts.
    let spec = work("job-wait").with_offline(OfflinePolicy::Wait(Duration::from_secs(5)));
    let ids = EdgeSelector::Ids(vec!["edge-000".into(), "edge-late".into()]);
    let wait = cp.run_job(spec, &ids).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(wait.progress().waiting, 1);
    let late = EdgeClient::new(fast_edge("edge-late"))
        .operation("work", TargetLevel::Edge, |_ctx| async {
            CommandResult::succeeded("late but here")
        })
        .connect(server.local_addr())
        .unwrap();
    let done = bounded("the waiting job", wait.finish()).await;
    assert_eq!((done.succeeded, done.skipped), (2, 0), "{done:?}");
    assert_eq!(gauge.runs.load(Ordering::SeqCst), 5);
    late.shutdown().await;
    for e in edges {
        e.shutdown().await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_starts_nothing_more_and_cancels_what_runs() {
    let (server, cp, edges, gauge) = fleet(20, |_| false, true).await;
    let job = cp
        .run_job(
            work("job-cancel").with_max_concurrent(5),
            &EdgeSelector::All,
        )
        .unwrap();
    bounded("five running", async {
        while gauge.now.load(Ordering::SeqCst) < 5 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    job.cancel();
    let done = bounded("the cancelled job", job.finish()).await;
    assert_eq!(job.stopped(), Some(JobStop::Cancelled));
    assert_eq!(
        (done.failed, done.skipped, done.succeeded),
        (5, 15, 0),
        "{done:?}"
    );
    assert_eq!(gauge.runs.load(Ordering::SeqCst), 5, "nothing more started");
    let first = &job.edges(None, 1)[0];
    assert!(
        matches!(&first.run, EdgeRun::Failed(why) if why.contains("CANCELLED") || why.contains("Cancelled")),
        "{first:?}"
    );
    for e in edges {
        e.shutdown().await;
    }
    server.shutdown().await;
}

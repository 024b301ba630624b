//! The job plan (`iop_fleet::Job`): concurrency never exceeded, each Edge run once,
//! the failure budget stops launching, offline Edges skipped or waited for, a
//! cancellation starts nothing more — under every order of outcomes proptest draws.

use std::collections::BTreeSet;
use std::time::Duration;

use iop_core::Instant;
use iop_core::cp::CommandSpec;
use iop_fleet::{EdgeRun, Job, JobError, JobSpec, JobStop, OfflinePolicy};
use proptest::prelude::*;

fn edges(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("edge-{i}")).collect()
}

fn spec(max_concurrent: usize, max_failures: usize) -> JobSpec {
    JobSpec::new(
        "job-1",
        CommandSpec::new("node.drain").with_target("label:tier=gpu"),
    )
    .with_max_concurrent(max_concurrent)
    .with_max_failures(max_failures)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_job_never_runs_more_than_its_concurrency_and_runs_each_edge_once(
        n in 1usize..60,
        max_concurrent in 1usize..12,
        max_failures in 0usize..8,
        offline in proptest::collection::btree_set(0usize..60, 0..10),
        fails in proptest::collection::btree_set(0usize..60, 0..20),
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 0..200),
    ) {
        let ids = edges(n);
        let now = Instant::ZERO;
        let mut job = Job::new(spec(max_concurrent, max_failures), ids.clone(), now).unwrap();
        let connected = |e: &str| !offline.iter().any(|i| ids.get(*i).map(String::as_str) == Some(e));
        let mut launched = BTreeSet::new();
        let mut running: Vec<String> = Vec::new();
        let mut picks = picks.into_iter();
        let mut stopped_at_failures = None;
        loop {
            for (edge, command_id) in job.next_launches(now, connected) {
                prop_assert!(stopped_at_failures.is_none(), "launched past the failure budget");
                prop_assert!(launched.insert(edge.clone()), "{edge} launched twice");
                prop_assert!(command_id.starts_with("job-1-"));
                running.push(edge);
            }
            prop_assert!(running.len() <= max_concurrent);
            prop_assert_eq!(job.progress().running, running.len());
            if running.is_empty() {
                break;
            }
            let i = picks.next().map_or(0, |p| p.index(running.len()));
            let edge = running.swap_remove(i);
            let index: usize = edge.trim_start_matches("edge-").parse().unwrap();
            job.finished(&edge, !fails.contains(&index), "done");
            if job.stopped() == Some(JobStop::FailureBudget) && stopped_at_failures.is_none() {
                prop_assert_eq!(job.progress().failed, max_failures + 1);
                stopped_at_failures = Some(job.progress().failed);
            }
        }
        prop_assert!(job.is_done());
        let p = job.progress();
        prop_assert_eq!(p.succeeded + p.failed + p.skipped, n);
        prop_assert_eq!(p.succeeded + p.failed, launched.len());
        // Offline Edges were never started (the policy skips them).
        for i in &offline {
            if let Some(id) = ids.get(*i) {
                prop_assert!(!launched.contains(id));
            }
        }
    }
}

#[test]
fn offline_edges_are_waited_for_until_the_deadline_then_skipped() {
    let wait = Duration::from_secs(30);
    let spec = spec(5, 0).with_offline(OfflinePolicy::Wait(wait));
    let t0 = Instant::ZERO;
    let mut job = Job::new(spec, ["on", "late", "never"], t0).unwrap();
    let online = |e: &str| e == "on";
    let first = job.next_launches(t0, online);
    assert_eq!(first, [("on".to_owned(), "job-1-0".to_owned())]);
    assert_eq!(job.progress().waiting, 2);
    assert_eq!(job.poll_timeout(), Some(t0 + wait));
    // `late` connects within the wait.
    let later = job.next_launches(t0 + Duration::from_secs(10), |e| e != "never");
    assert_eq!(later, [("late".to_owned(), "job-1-1".to_owned())]);
    job.finished("on", true, "ok");
    job.finished("late", true, "ok");
    assert!(!job.is_done(), "never is still waited for");
    assert!(job.next_launches(t0 + wait, online).is_empty());
    assert!(job.is_done());
    let page = job.page(Some("late"), 10);
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].0, "never");
    assert!(matches!(page[0].1, EdgeRun::Skipped(why) if why.contains("offline")));
}

#[test]
fn a_cancelled_job_starts_nothing_more_and_names_what_runs() {
    let t0 = Instant::ZERO;
    let mut job = Job::new(spec(2, 0), edges(5), t0).unwrap();
    let running = job.next_launches(t0, |_| true);
    assert_eq!(running.len(), 2);
    let to_cancel = job.cancel();
    assert_eq!(to_cancel, running);
    assert_eq!(job.stopped(), Some(JobStop::Cancelled));
    assert_eq!(job.progress().skipped, 3);
    job.finished("edge-0", false, "cancelled");
    job.finished("edge-1", false, "cancelled");
    assert!(job.next_launches(t0, |_| true).is_empty());
    assert!(job.is_done());
}

#[test]
fn a_job_that_cannot_be_planned_says_why() {
    let t0 = Instant::ZERO;
    assert_eq!(
        Job::new(spec(1, 0), Vec::<String>::new(), t0).unwrap_err(),
        JobError::NoEdges
    );
    assert_eq!(
        Job::new(spec(0, 0), edges(1), t0).unwrap_err(),
        JobError::NoConcurrency
    );
    let long = JobSpec::new("j".repeat(121), CommandSpec::new("x"));
    assert_eq!(
        Job::new(long, edges(1), t0).unwrap_err(),
        JobError::JobIdTooLong(121)
    );
    let bad = JobSpec::new("no spaces", CommandSpec::new("x"));
    assert!(matches!(
        Job::new(bad, edges(1), t0),
        Err(JobError::JobId(_))
    ));
    // A repeated Edge runs once.
    let job = Job::new(spec(1, 0), ["a", "a", "b"], t0).unwrap();
    assert_eq!(job.progress().total, 2);
}

#[test]
fn edge_selectors_parse_and_match_ids_metadata_and_versions() {
    use iop_fleet::EdgeSelector;
    let meta = |k: &str| (k == "zone").then_some("a");
    assert!("*".parse::<EdgeSelector>().unwrap().matches("x", "1", meta));
    let ids: EdgeSelector = "e1, e2".parse().unwrap();
    assert_eq!(ids, EdgeSelector::Ids(vec!["e1".into(), "e2".into()]));
    assert!(ids.matches("e2", "", meta) && !ids.matches("e3", "", meta));
    let zone: EdgeSelector = "meta:zone=a".parse().unwrap();
    assert!(zone.matches("x", "", meta));
    assert!(
        !"meta:zone=b"
            .parse::<EdgeSelector>()
            .unwrap()
            .matches("x", "", meta)
    );
    let version: EdgeSelector = "version:iop-edge 0.1.0".parse().unwrap();
    assert!(version.matches("x", "iop-edge 0.1.0", meta) && !version.matches("x", "0.2", meta));
    for bad in ["", "meta:", "meta:=v", "version:", "a b"] {
        assert!(bad.parse::<EdgeSelector>().is_err(), "{bad:?}");
    }
}

//! Callers of `request_status` that stop waiting: a caller that drops its future
//! leaves nothing behind (the Edge's late answer is dropped and the session goes
//! on), and a caller waiting at shutdown gets an error, not a hang.

mod hostile_support;
// The runtime tests' helpers, shared with iop-tokio's own tests.
#[path = "../../iop-tokio/tests/support/mod.rs"]
mod support;

use std::time::Duration;

use hostile_support::*;
use iop_tokio::core::proto::EdgeStatusResponse;
use iop_tokio::{ControlPlaneHandle, ControlPlaneServer, StatusRequestError};
use support::*;

/// An Edge speaking raw frames, its session accepted and the Control Plane's resync
/// request answered.
async fn enrolled(server: &ControlPlaneServer, edge_id: &str) -> Attacker {
    let mut edge = Attacker::connect(server.local_addr()).await;
    edge.hello(edge_id).await;
    let resync = edge.next_status_request().await;
    edge.write(&status_response(resync, edge_id)).await;
    edge
}

/// A task asking `edge_id` for its status through `cp`.
fn spawn_request(
    cp: &ControlPlaneHandle,
    edge_id: &'static str,
) -> tokio::task::JoinHandle<Result<EdgeStatusResponse, StatusRequestError>> {
    let cp = cp.clone();
    tokio::spawn(async move { cp.request_status(edge_id, vec![]).await })
}

/// Waits until `n` callers wait.
async fn callers_waiting(cp: &ControlPlaneHandle, n: usize) {
    bounded("the callers' count", async {
        while cp.status_callers_waiting() != n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_caller_that_gives_up_leaves_no_waiter_and_its_late_answer_is_dropped() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut edge = enrolled(&server, "edge-q").await;
    assert_eq!(cp.status_callers_waiting(), 0);

    let caller = spawn_request(&cp, "edge-q");
    let asked = edge.next_status_request().await;
    callers_waiting(&cp, 1).await;
    caller.abort();
    assert!(caller.await.unwrap_err().is_cancelled());
    assert_eq!(cp.status_callers_waiting(), 0, "the dropped caller's entry");

    // The answer to the abandoned request still comes; nobody takes it, and the
    // session carries on: the next caller gets its own answer.
    edge.write(&status_response(asked, "edge-q")).await;
    let next = spawn_request(&cp, "edge-q");
    let again = edge.next_status_request().await;
    assert!(again > asked);
    edge.write(&status_response(again, "edge-q")).await;
    let status = bounded("the second answer", next).await.unwrap().unwrap();
    assert_eq!(status.edge_id, "edge-q");
    assert_eq!(cp.status_callers_waiting(), 0);
    assert_eq!(cp.stats().late_status_responses, 0, "answered in time");
    server.shutdown().await;
}

#[tokio::test]
async fn callers_waiting_at_shutdown_get_an_error() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut edge = enrolled(&server, "edge-s").await;
    let callers: Vec<_> = (0..3).map(|_| spawn_request(&cp, "edge-s")).collect();
    for _ in 0..3 {
        edge.next_status_request().await;
    }
    callers_waiting(&cp, 3).await;
    // The Edge never answers; the Control Plane shuts down.
    bounded("shutdown", cp.shutdown()).await;
    for caller in callers {
        let outcome = bounded("a caller's outcome", caller).await.unwrap();
        assert!(
            matches!(
                outcome,
                Err(StatusRequestError::Abandoned | StatusRequestError::Stopped)
            ),
            "{outcome:?}"
        );
    }
    assert_eq!(cp.status_callers_waiting(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_some_giving_up_all_end_and_leave_nothing_behind() {
    const TASKS: usize = 8;
    const EACH: usize = 40;
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = iop_tokio::EdgeClient::new(fast_edge("edge-m"))
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, iop_tokio::core::cp::CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;
    drop(events);

    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let cp = cp.clone();
            tokio::spawn(async move {
                let (mut answered, mut gave_up) = (0, 0);
                for i in 0..EACH {
                    let request = cp.request_status("edge-m", vec![]);
                    match (t + i) % 3 {
                        // Sends the request, then gives up before any answer.
                        0 => {
                            let polled = futures_lite::future::poll_once(request).await;
                            assert!(polled.is_none(), "task {t} request {i}: {polled:?}");
                            gave_up += 1;
                        }
                        // Gives up after a few microseconds: before, during or after
                        // the answer, depending on the interleaving.
                        1 => {
                            let patience = Duration::from_micros(((t * 7 + i * 13) % 50) as u64);
                            match tokio::time::timeout(patience, request).await {
                                Ok(Ok(status)) => {
                                    assert_eq!(status.edge_id, "edge-m");
                                    answered += 1;
                                }
                                Ok(Err(e)) => panic!("task {t} request {i}: {e}"),
                                Err(_) => gave_up += 1,
                            }
                        }
                        _ => {
                            let status = request.await.expect("an answer");
                            assert_eq!(status.edge_id, "edge-m");
                            answered += 1;
                        }
                    }
                }
                (answered, gave_up)
            })
        })
        .collect();
    let (mut answered, mut gave_up) = (0, 0);
    for task in tasks {
        let (a, g) = bounded("a caller task", task).await.unwrap();
        answered += a;
        gave_up += g;
    }
    assert_eq!(answered + gave_up, TASKS * EACH);
    assert!(
        gave_up >= TASKS * EACH / 3,
        "the callers polled once gave up"
    );
    assert!(
        answered >= TASKS * EACH / 3,
        "every patient caller answered"
    );
    assert_eq!(cp.status_callers_waiting(), 0, "no entry left behind");
    // The session is intact: no request timed out, no protocol error.
    assert_eq!(cp.stats().status_timeouts, 0);
    assert_eq!(cp.stats().protocol_errors, 0);
    let status = bounded("a last request", cp.request_status("edge-m", vec![]))
        .await
        .unwrap();
    assert_eq!(status.edge_id, "edge-m");
    edge.shutdown().await;
    server.shutdown().await;
}

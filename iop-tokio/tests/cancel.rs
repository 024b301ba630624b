//! Cancellation over real sockets (PROTOCOL.md §4.4): `command.cancel` is built into
//! every Edge, a handler sees it through its context, one that does not stop is ended
//! CANCELLED by the Edge after its grace, and either way the target ends exactly once.

mod support;

use std::time::Duration;

use iop_tokio::core::cancel::CANCEL_OPERATION;
use iop_tokio::core::cp::{CommandOutcome, CommandSpec, CpEvent};
use iop_tokio::core::edge::TargetLevel;
use iop_tokio::core::proto::CommandPhase;
use iop_tokio::{
    CancelError, CommandRecord, CommandResult, CommandUpdate, ControlPlaneHandle,
    ControlPlaneServer, EdgeClient, EdgeHandle,
};
use support::*;

/// Terminal events a record holds, with their messages.
fn terminals(record: &CommandRecord) -> Vec<(CommandPhase, String)> {
    record
        .updates
        .iter()
        .filter_map(|u| match u {
            CommandUpdate::Event(e) if e.phase().is_terminal() => {
                Some((e.phase(), e.message.clone()))
            }
            _ => None,
        })
        .collect()
}

/// An Edge with `work.honour` (stops when cancelled, saying at which step) and
/// `work.ignore` (never looks; returns SUCCEEDED after 1.5 s), connected to a server.
async fn start(edge_id: &str) -> (ControlPlaneServer, ControlPlaneHandle, EdgeHandle) {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut events = cp.subscribe();
    let edge = EdgeClient::new(fast_edge(edge_id))
        .with_cancel_grace(Duration::from_millis(300))
        .operation("work.honour", TargetLevel::Edge, |ctx| async move {
            let mut step = 0;
            loop {
                let tick = async {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    false
                };
                let cancelled = async {
                    ctx.cancelled().await;
                    true
                };
                if futures_lite::future::or(tick, cancelled).await {
                    assert!(ctx.is_cancelled());
                    // Winding down takes a moment (well within the grace): a second
                    // cancellation asked at once lands while it still runs.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    return CommandResult::cancelled(format!("stopped at step {step}"))
                        .with_detail("steps", step.to_string());
                }
                step += 1;
            }
        })
        .operation("work.ignore", TargetLevel::Edge, |_ctx| async move {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            CommandResult::succeeded("finished regardless")
        })
        .connect(server.local_addr())
        .unwrap();
    next_cp(&mut events, "session", |e| {
        matches!(e, CpEvent::SessionAccepted { .. }).then_some(())
    })
    .await;
    (server, cp, edge)
}

/// Waits until `command_id` has an outcome in its record.
async fn finished(cp: &ControlPlaneHandle, command_id: &str) -> CommandRecord {
    bounded("outcome", async {
        loop {
            if let Some(record) = cp.command(command_id).filter(|r| r.outcome.is_some()) {
                return record;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// Waits until `command_id` was accepted and reported RUNNING or later.
async fn accepted(cp: &ControlPlaneHandle, command_id: &str) {
    bounded("accepted", async {
        while !cp.command(command_id).is_some_and(|r| {
            r.updates
                .iter()
                .any(|u| matches!(u, CommandUpdate::Event(_)))
        }) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_watches_its_context_stops_and_its_command_ends_cancelled_once() {
    let (server, cp, edge) = start("edge-honour").await;
    let view = cp.edge("edge-honour").unwrap();
    assert!(
        view.operations.iter().any(|o| o == CANCEL_OPERATION),
        "command.cancel is advertised: {:?}",
        view.operations
    );
    let target = cp
        .send_command("edge-honour", CommandSpec::new("work.honour"))
        .unwrap();
    let target_id = target.command_id().to_owned();
    accepted(&cp, &target_id).await;
    tokio::time::sleep(Duration::from_millis(60)).await;

    let cancel = cp.cancel(&target_id).unwrap();
    assert_eq!(cancel.command_id(), format!("{target_id}.cancel"));
    // Asking again while it runs is the same cancellation, not a second one.
    let again = cp.cancel(&target_id).unwrap();
    assert_eq!(again.command_id(), cancel.command_id());
    let cancel_record = bounded("cancel", cancel.finish()).await.unwrap();
    assert_eq!(
        cancel_record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded)),
        "{cancel_record:?}"
    );
    let said = terminals(&cancel_record);
    assert!(said[0].1.contains("cancelled"), "{said:?}");

    let record = finished(&cp, &target_id).await;
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Cancelled))
    );
    let ends = terminals(&record);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert!(ends[0].1.starts_with("stopped at step "), "{ends:?}");

    // Nothing is left to cancel: the handle says so without asking the Edge.
    let err = cp.cancel(&target_id).unwrap_err();
    assert!(
        matches!(
            err,
            CancelError::Finished {
                outcome: CommandOutcome::Finished(CommandPhase::Cancelled),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        cp.cancel("never-sent").unwrap_err(),
        CancelError::UnknownCommand(_)
    ));
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_does_not_stop_is_ended_cancelled_after_the_grace_and_its_late_result_ignored()
 {
    let (server, cp, edge) = start("edge-ignore").await;
    let target = cp
        .send_command("edge-ignore", CommandSpec::new("work.ignore"))
        .unwrap();
    let target_id = target.command_id().to_owned();
    accepted(&cp, &target_id).await;
    let cancel = cp.cancel(&target_id).unwrap();
    let cancel_record = bounded("cancel", cancel.finish()).await.unwrap();
    assert_eq!(
        cancel_record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Succeeded)),
        "{cancel_record:?}"
    );
    let record = finished(&cp, &target_id).await;
    let ends = terminals(&record);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0].0, CommandPhase::Cancelled);
    assert!(ends[0].1.contains("did not stop within 300 ms"), "{ends:?}");
    // The handler returns SUCCEEDED at 1.5 s: too late, the command stays CANCELLED
    // and the Control Plane sees no second terminal.
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let record = cp.command(&target_id).unwrap();
    assert_eq!(terminals(&record).len(), 1, "{record:?}");
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Cancelled))
    );
    edge.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_of_a_command_the_edge_does_not_run_fails_saying_so() {
    let (server, cp, edge) = start("edge-none").await;
    // Sent as the Control Plane would, for an id the Edge never saw.
    let tracker = cp
        .send_command("edge-none", CommandSpec::cancel("not-here"))
        .unwrap();
    let record = bounded("cancel", tracker.finish()).await.unwrap();
    assert_eq!(
        record.outcome,
        Some(CommandOutcome::Finished(CommandPhase::Failed))
    );
    let said = terminals(&record);
    assert!(said[0].1.contains("holds no running command"), "{said:?}");

    // A cancellation naming no command at all.
    let tracker = cp
        .send_command("edge-none", CommandSpec::new(CANCEL_OPERATION))
        .unwrap();
    let record = bounded("cancel", tracker.finish()).await.unwrap();
    let said = terminals(&record);
    assert_eq!(said[0].0, CommandPhase::Failed);
    assert!(said[0].1.contains("names no command"), "{said:?}");
    edge.shutdown().await;
    server.shutdown().await;
}

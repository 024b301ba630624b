//! A command's one record is the core's: trackers read it from their cursor, and end
//! as it ends — including when its Edge is forgotten and the record goes with it.

mod support;

use futures_lite::StreamExt;
use iop_tokio::core::cp::{CommandSpec, Ending};
use iop_tokio::core::proto::{Body, CommandPhase, EdgeCommandEvent, EdgeCommandResponse, Envelope};
use iop_tokio::{CommandFailure, CommandUpdate, ControlPlaneServer};
use support::*;

/// The id of the next command request `raw` receives.
async fn next_request(raw: &mut RawClient) -> String {
    bounded("the request", async {
        loop {
            match raw.next_body().await {
                Some(Body::CommandRequest(req)) => return req.command_id,
                Some(_) => {}
                None => panic!("closed"),
            }
        }
    })
    .await
}

#[tokio::test]
async fn two_trackers_of_one_command_read_the_one_record() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut raw = RawClient::connect(server.local_addr()).await;
    raw.send_hello_with("edge-r", &["edge.ping"]).await;
    assert!(matches!(raw.next_body().await, Some(Body::HelloResponse(r)) if r.accepted));
    let spec = || CommandSpec::new("edge.ping").with_id("ping-1");
    let mut first = cp.send_command("edge-r", spec()).unwrap();
    assert_eq!(next_request(&mut raw).await, "ping-1");
    // The same key again: the same command, followed by a second tracker.
    let second = cp.send_command("edge-r", spec()).unwrap();
    raw.send(Envelope::new(EdgeCommandResponse {
        command_id: "ping-1".into(),
        accepted: true,
        ..Default::default()
    }))
    .await;
    for (phase, sequence) in [(CommandPhase::Accepted, 1), (CommandPhase::Succeeded, 2)] {
        raw.send(Envelope::new(EdgeCommandEvent {
            command_id: "ping-1".into(),
            phase: phase as i32,
            sequence,
            ..Default::default()
        }))
        .await;
    }
    let mut seen = Vec::new();
    while let Some(update) = bounded("an update", first.next()).await {
        seen.push(update);
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    let record = bounded("the second", second.finish()).await.unwrap();
    assert_eq!(record.updates, seen);
    assert_eq!(cp.command("ping-1"), Some(record));
    server.shutdown().await;
}

#[tokio::test]
async fn a_tracker_whose_edge_is_forgotten_ends_forgotten() {
    let server = ControlPlaneServer::bind(localhost(), fast_server())
        .await
        .unwrap();
    let cp = server.handle();
    let mut raw = RawClient::connect(server.local_addr()).await;
    raw.send_hello_with("edge-f", &["edge.ping"]).await;
    assert!(matches!(raw.next_body().await, Some(Body::HelloResponse(r)) if r.accepted));
    let mut tracker = cp
        .send_command("edge-f", CommandSpec::new("edge.ping"))
        .unwrap();
    let watching = cp
        .send_command("edge-f", CommandSpec::new("edge.ping"))
        .unwrap();
    let command_id = next_request(&mut raw).await;
    assert_eq!(command_id, tracker.command_id());
    drop(raw);
    // Forgotten once disconnected (an operator's call), with its commands' records.
    bounded("disconnected and forgotten", async {
        while !cp.forget_edge("edge-f") {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(
        bounded("forgotten", tracker.next()).await,
        Some(CommandUpdate::Ended(Ending::Forgotten))
    );
    assert_eq!(bounded("end", tracker.next()).await, None);
    assert_eq!(
        cp.command(&command_id),
        None,
        "the record went with the Edge"
    );
    assert_eq!(
        bounded("outcome", watching.outcome()).await,
        Err(CommandFailure::Ended(Ending::Forgotten))
    );
    server.shutdown().await;
}

//! The fleet's events on the engine (PROTOCOL.md §8 "Events"): every replica
//! publishes the events of the Edges it holds on one JetStream stream, and any
//! replica's subscribers read the whole fleet's from it, each once.
//!
//! Each event is published with a message id made of what identifies it on the wire —
//! `(edge_id, command_id, sequence)` for a command event, `(edge_id, session_id,
//! sequence)` for a node event, `(edge_id, session_id)` and the kind for session
//! events — so the stream drops a copy published twice (a publish retried after a
//! lost acknowledgement) within its duplicate window.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use futures_lite::{Stream, StreamExt};
use iop_driver::iop_core::cp::{CpEvent, CpEventKind};
use iop_driver::{ControlPlaneHandle, Notice, Runtime, SubscribeOptions};

use crate::key::edge_key;
use crate::ownership::StoreError;

/// The stream's name.
pub const STREAM: &str = "IOP_EVENTS";
const NAME: &str = "Iop-Event";

/// Turns a Control Plane event into the stream's form: its name and JSON, or `None`
/// for an event the stream does not carry.
pub type EventEncoder =
    Arc<dyn Fn(&CpEvent) -> Option<(&'static str, serde_json::Value)> + Send + Sync>;

/// What identifies `event` across replicas and retries, when it is one the stream
/// carries.
pub fn message_id(event: &CpEvent) -> Option<String> {
    let id = match event {
        CpEvent::CommandEvent { edge_id, event, .. } => {
            format!("cmd.{edge_id}.{}.{}", event.command_id, event.sequence)
        }
        CpEvent::NodeEvent {
            edge_id,
            session_id,
            event,
        } => format!("node.{edge_id}.{session_id}.{}", event.sequence),
        CpEvent::SessionAccepted {
            edge_id,
            session_id,
            ..
        } => format!("up.{edge_id}.{session_id}"),
        CpEvent::EdgeDisconnected {
            edge_id,
            session_id,
            ..
        } => format!("down.{edge_id}.{session_id}"),
        CpEvent::EdgeSuperseded {
            edge_id,
            new_session_id,
            ..
        } => format!("superseded.{edge_id}.{new_session_id}"),
        CpEvent::CommandUndeliverable {
            edge_id,
            command_id,
            ..
        } => format!("undeliverable.{edge_id}.{command_id}"),
        // Repeatable in one session (silence, then heard again, then silence): no id
        // would tell two of them apart from one published twice.
        _ => return None,
    };
    Some(id)
}

pub(crate) async fn open_stream(
    js: &jetstream::Context,
    replicas: usize,
) -> Result<stream::Stream, StoreError> {
    js.get_or_create_stream(stream::Config {
        name: STREAM.into(),
        description: Some("IOP: every replica's Edge events".into()),
        subjects: vec!["iop.events.>".into()],
        max_age: Duration::from_secs(3600),
        duplicate_window: Duration::from_secs(120),
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| StoreError(e.to_string()))
}

/// Publishes `cp`'s events of `kinds` as `encode` writes them, until the Control
/// Plane stops.
pub(crate) async fn publish_loop<R: Runtime>(
    js: jetstream::Context,
    cp: ControlPlaneHandle<R>,
    me: String,
    kinds: Vec<CpEventKind>,
    encode: EventEncoder,
    stats: Arc<crate::ClusterStats>,
) {
    let mut events = cp.subscribe_with(SubscribeOptions::default().kinds(kinds));
    let token = edge_key(&me);
    let mut failures = 0u64;
    while let Some(notice) = events.next().await {
        let Notice::Event(event) = notice else {
            continue;
        };
        let Some((name, json)) = encode(&event) else {
            continue;
        };
        let mut message = jetstream::message::PublishMessage::build()
            .header(NAME, name)
            .payload(serde_json::to_vec(&json).unwrap_or_default().into());
        if let Some(id) = message_id(&event) {
            message = message.message_id(id);
        }
        let subject = format!("iop.events.{token}.{name}");
        let published = match js.send_publish(subject, message).await {
            Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        stats.published(published.is_ok());
        if let Err(e) = published {
            failures += 1;
            // The engine is down: this event is lost to other replicas (a status
            // round trip brings their views back); logged once per 100.
            if failures % 100 == 1 {
                tracing::warn!(error = %e, failures, "cannot publish an event to the cluster");
            }
        }
    }
}

/// The fleet's events from now on, as `(name, JSON)`, from an ordered consumer of its
/// own (the engine holds what a slow reader has not read yet).
pub async fn fleet_events(
    js: &jetstream::Context,
) -> Result<impl Stream<Item = (String, serde_json::Value)> + Send + use<>, StoreError> {
    let stream = js
        .get_stream(STREAM)
        .await
        .map_err(|e| StoreError(e.to_string()))?;
    let consumer = stream
        .create_consumer(consumer::pull::OrderedConfig {
            deliver_policy: consumer::DeliverPolicy::New,
            filter_subject: "iop.events.>".into(),
            ..Default::default()
        })
        .await
        .map_err(|e| StoreError(e.to_string()))?;
    let messages = consumer
        .messages()
        .await
        .map_err(|e| StoreError(e.to_string()))?;
    Ok(messages.filter_map(|m| {
        let m = m.ok()?;
        let name = m.headers.as_ref()?.get(NAME)?.as_str().to_owned();
        let json = serde_json::from_slice(&m.payload).ok()?;
        Some((name, json))
    }))
}

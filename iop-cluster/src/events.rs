//! The fleet's events on the engine (PROTOCOL.md §8 "Events"): every replica
//! publishes the events of the Edges it holds on one JetStream stream, and any
//! replica's subscribers read the whole fleet's from it, each once.
//!
//! * **At least once.** Events go through a bounded outbox ([`OUTBOX`] events, at
//!   most [`HORIZON`] old): published in order, retried with backoff until the
//!   engine acknowledges them. An event the outbox has to let go (it is full, or the
//!   event waited past the horizon) and events the replica's subscription to its
//!   Control Plane dropped (it fell behind) are counted as lost
//!   ([`ClusterSnapshot::events_lost`](crate::ClusterSnapshot::events_lost)), never
//!   silently.
//! * **Once on the stream.** Each event is published with a message id made of what
//!   identifies it on the wire — `(edge_id, command_id, sequence)` for a command event,
//!   `(edge_id, session_id, sequence)` for a node event, `(edge_id, session_id)` and
//!   the kind for session events — and the stream's duplicate window is the outbox's
//!   horizon: a publish retried after a lost acknowledgement is dropped as a copy.
//! * **Resumable.** Each event's stream sequence is its id; a subscriber resumes after
//!   the last one it saw ([`fleet_events`]`(…, Some(id))`), and is told how many it
//!   missed ([`FleetItem::Missed`]) when the stream no longer holds them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use futures_lite::{Stream, StreamExt};
use iop_driver::iop_core::cp::{CpEvent, CpEventKind};
use iop_driver::{ControlPlaneHandle, Notice, Runtime, SubscribeOptions, Subscription};

use crate::key::edge_key;
use crate::ownership::StoreError;
use crate::stats::ClusterStats;

/// Events the outbox holds at most; past it the oldest is let go (counted as lost).
pub const OUTBOX: usize = 65_536;
/// Bytes of events the replica's subscription to its Control Plane holds undelivered
/// at most. A reconnect storm brings a burst of several events per Edge (its session,
/// its nodes) faster than the publisher may be scheduled on a busy machine; the
/// subscription absorbs what the outbox would hold ([`OUTBOX`] events) instead of the
/// default subscriber's 1 024, which a storm of a few thousand Edges overflows.
const SUBSCRIPTION_BYTES: usize = 64 * 1024 * 1024;
/// How long an event may wait in the outbox for the engine, and the stream's
/// duplicate window (at least as long, so that a retry is always told a copy).
pub const HORIZON: Duration = Duration::from_secs(300);
/// Publishes sent before their acknowledgements are awaited.
const WINDOW: usize = 256;

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
        // An Edge sends a node event again in its next session when the last did not
        // carry it through (and that session may be another replica's): the id is the
        // event's own — node, sequence, generation, time — never the session's.
        CpEvent::NodeEvent { edge_id, event, .. } => format!(
            "node.{edge_id}.{}.{}.{}.{}",
            event.node_id, event.sequence, event.generation, event.occurred_at_unix_ms
        ),
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
        // A command ends once.
        CpEvent::CommandEnded {
            edge_id,
            command_id,
            ..
        } => format!("ended.{edge_id}.{command_id}"),
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
    let config = stream::Config {
        name: STREAM.into(),
        description: Some("IOP: every replica's Edge events".into()),
        subjects: vec!["iop.events.>".into()],
        max_age: Duration::from_secs(3600),
        duplicate_window: HORIZON,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    };
    let mut stream = js
        .get_or_create_stream(config.clone())
        .await
        .map_err(|e| StoreError(e.to_string()))?;
    // A stream made by an older replica with a shorter duplicate window gets this one.
    let window = stream
        .info()
        .await
        .map(|i| i.config.duplicate_window)
        .unwrap_or(HORIZON);
    if window < HORIZON {
        let mut updated = stream.cached_info().config.clone();
        updated.duplicate_window = HORIZON;
        js.update_stream(updated)
            .await
            .map_err(|e| StoreError(e.to_string()))?;
    }
    Ok(stream)
}

/// An event waiting in the outbox.
struct Outgoing {
    subject: String,
    name: &'static str,
    payload: bytes::Bytes,
    id: Option<String>,
    queued: Instant,
}

/// The outbox between a replica's Control Plane and the stream.
#[derive(Default)]
struct Outbox {
    events: Mutex<VecDeque<Outgoing>>,
    ready: tokio::sync::Notify,
}

/// The subscription a replica publishes from: `cp`'s events of `kinds`, sized for a
/// reconnect storm. Take it before the replica starts (right after the Control
/// Plane is bound): a session accepted before it is taken never reaches the stream,
/// and a replica starts granting claims, so accepting sessions, as it starts.
pub fn event_feed<R: Runtime>(
    cp: &ControlPlaneHandle<R>,
    kinds: impl IntoIterator<Item = CpEventKind>,
) -> EventFeed {
    EventFeed(
        cp.subscribe_with(
            SubscribeOptions::default()
                .kinds(kinds)
                .capacity(OUTBOX)
                .byte_budget(SUBSCRIPTION_BYTES),
        ),
    )
}

/// A Control Plane's events waiting to be published ([`event_feed`],
/// [`Replica::publish_feed`](crate::Replica::publish_feed)).
pub struct EventFeed(Subscription<CpEvent>);

impl std::fmt::Debug for EventFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFeed").finish_non_exhaustive()
    }
}

/// Publishes the events of `feed` as `encode` writes them, until the Control Plane
/// stops and the outbox is empty (or the engine is gone for a horizon).
pub(crate) async fn publish_loop(
    js: jetstream::Context,
    EventFeed(mut events): EventFeed,
    me: String,
    encode: EventEncoder,
    stats: Arc<ClusterStats>,
) {
    let outbox = Arc::new(Outbox::default());
    let publisher = tokio::spawn(publish_outbox(js, outbox.clone(), stats.clone()));
    let token = edge_key(&me);
    while let Some(notice) = events.next().await {
        let event = match notice {
            Notice::Event(event) => event,
            Notice::Lagged(n) => {
                stats.events_lost(n);
                tracing::warn!(
                    lost = n,
                    "events were lost before they reached the cluster's stream"
                );
                continue;
            }
            _ => continue,
        };
        let Some((name, json)) = encode(&event) else {
            continue;
        };
        let outgoing = Outgoing {
            subject: format!("iop.events.{token}.{name}"),
            name,
            payload: serde_json::to_vec(&json).unwrap_or_default().into(),
            id: message_id(&event),
            queued: Instant::now(),
        };
        let mut queue = outbox.events.lock().unwrap_or_else(|p| p.into_inner());
        if queue.len() >= OUTBOX {
            queue.pop_front();
            stats.events_lost(1);
        }
        queue.push_back(outgoing);
        stats.outbox(queue.len());
        drop(queue);
        outbox.ready.notify_one();
    }
    // The Control Plane stopped: what is queued still goes out, then the publisher
    // ends (it holds the last reference to the outbox).
    outbox.ready.notify_one();
    drop(outbox);
    let _ = publisher.await;
}

/// Publishes the outbox in order, a window at a time, retrying from the first event
/// the engine did not acknowledge.
async fn publish_outbox(js: jetstream::Context, outbox: Arc<Outbox>, stats: Arc<ClusterStats>) {
    let mut backoff = Duration::from_millis(100);
    let mut failures = 0u64;
    loop {
        let window: Vec<(String, &'static str, bytes::Bytes, Option<String>)> = {
            let mut queue = outbox.events.lock().unwrap_or_else(|p| p.into_inner());
            // Waited past the horizon: a retry could no longer be told a copy.
            while queue.front().is_some_and(|o| o.queued.elapsed() > HORIZON) {
                queue.pop_front();
                stats.events_lost(1);
            }
            stats.outbox(queue.len());
            queue
                .iter()
                .take(WINDOW)
                .map(|o| (o.subject.clone(), o.name, o.payload.clone(), o.id.clone()))
                .collect()
        };
        if window.is_empty() {
            if Arc::strong_count(&outbox) == 1 {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), outbox.ready.notified()).await;
            continue;
        }
        let mut acks = Vec::with_capacity(window.len());
        for (subject, name, payload, id) in window {
            let mut message = jetstream::message::PublishMessage::build()
                .header(NAME, name)
                .payload(payload);
            if let Some(id) = id {
                message = message.message_id(id);
            }
            match js.send_publish(subject, message).await {
                Ok(ack) => acks.push(ack),
                Err(_) => break,
            }
        }
        let mut done = 0;
        let mut failed = None;
        for ack in acks {
            match ack.await {
                Ok(_) => done += 1,
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            }
        }
        {
            let mut queue = outbox.events.lock().unwrap_or_else(|p| p.into_inner());
            let done = done.min(queue.len());
            queue.drain(..done);
            stats.outbox(queue.len());
        }
        for _ in 0..done {
            stats.published(true);
        }
        match failed {
            None if done > 0 => backoff = Duration::from_millis(100),
            _ => {
                failures += 1;
                stats.publish_retried();
                if failures % 100 == 1 {
                    let why = failed.unwrap_or_else(|| "not sent".into());
                    tracing::warn!(error = %why, failures, "cannot publish events to the cluster; retrying");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// One item of the fleet's event stream.
#[derive(Debug, Clone, PartialEq)]
pub enum FleetItem {
    /// An event: its stream sequence (its id for resuming), name and JSON.
    Event {
        /// The stream sequence.
        sequence: u64,
        /// The event's name.
        name: String,
        /// The event.
        data: serde_json::Value,
    },
    /// The stream no longer holds this many events after the one asked to resume
    /// after (they aged out): the first item of such a stream.
    Missed {
        /// Events missed.
        count: u64,
    },
}

/// The fleet's events after stream sequence `after` (`None`: from now on), from an
/// ordered consumer of its own (the engine holds what a slow reader has not read yet).
pub async fn fleet_events(
    js: &jetstream::Context,
    after: Option<u64>,
) -> Result<impl Stream<Item = FleetItem> + Send + use<>, StoreError> {
    let mut stream = js
        .get_stream(STREAM)
        .await
        .map_err(|e| StoreError(e.to_string()))?;
    let state = stream
        .info()
        .await
        .map_err(|e| StoreError(e.to_string()))?
        .state
        .clone();
    let (deliver_policy, missed) = match after {
        None => (consumer::DeliverPolicy::New, None),
        // Resuming at the stream's end still starts by sequence, never "new": an
        // event published between the info above and the consumer below is one the
        // subscriber has not seen (the engine starts a later sequence at the end).
        Some(seen) => {
            let start = (seen + 1).max(state.first_sequence);
            let missed = state.first_sequence.saturating_sub(seen + 1);
            (
                consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: start,
                },
                (missed > 0).then_some(FleetItem::Missed { count: missed }),
            )
        }
    };
    let consumer = stream
        .create_consumer(consumer::pull::OrderedConfig {
            deliver_policy,
            filter_subject: "iop.events.>".into(),
            ..Default::default()
        })
        .await
        .map_err(|e| StoreError(e.to_string()))?;
    let messages = consumer
        .messages()
        .await
        .map_err(|e| StoreError(e.to_string()))?;
    let events = messages.filter_map(|m| {
        let m = m.ok()?;
        let sequence = m.info().ok()?.stream_sequence;
        let name = m.headers.as_ref()?.get(NAME)?.as_str().to_owned();
        let data = serde_json::from_slice(&m.payload).ok()?;
        Some(FleetItem::Event {
            sequence,
            name,
            data,
        })
    });
    Ok(futures_lite::stream::iter(missed).chain(events))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iop_driver::iop_core::proto::EdgeNodeEvent;

    #[test]
    fn a_node_event_sent_again_in_another_session_keeps_its_id() {
        let event = EdgeNodeEvent {
            edge_id: "edge-0".into(),
            node_id: "cpu-1".into(),
            generation: 2,
            sequence: 7,
            occurred_at_unix_ms: 1_796_302_141_951,
            ..Default::default()
        };
        let on = |session_id, event: &EdgeNodeEvent| {
            message_id(&CpEvent::NodeEvent {
                edge_id: "edge-0".into(),
                session_id,
                event: event.clone(),
            })
        };
        assert_eq!(on(1, &event), on(2, &event));
        let next = EdgeNodeEvent {
            sequence: 8,
            ..event.clone()
        };
        assert_ne!(on(1, &event), on(1, &next));
        // A restarted Edge counting from the same sequence, later: another event.
        let later = EdgeNodeEvent {
            occurred_at_unix_ms: event.occurred_at_unix_ms + 1,
            ..event.clone()
        };
        assert_ne!(on(1, &event), on(3, &later));
    }
}

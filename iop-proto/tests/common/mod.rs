//! Shared proptest strategies: an arbitrary `Envelope` of every body kind.
//!
//! Values stay within the PROTOCOL.md §7 decode limits (short lists, short strings), so every
//! generated envelope must round-trip through the codec.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use iop_proto::*;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

/// An id-like string (possibly empty), within the 128-byte id cap.
pub fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9._-]{0,12}",
        1 => "[A-Za-z0-9._-]{128}",
    ]
}

/// Free text, any Unicode, within the 4 KiB text cap.
pub fn text() -> impl Strategy<Value = String> {
    ".{0,24}"
}

/// A small map.
pub fn map() -> impl Strategy<Value = BTreeMap<String, String>> {
    btree_map("[A-Za-z0-9._/-]{1,10}", text(), 0..4)
}

/// An enum value: usually a known one (`0..=max`), sometimes any `i32` (a newer peer).
pub fn enum_value(max: i32) -> impl Strategy<Value = i32> {
    prop_oneof![8 => 0..=max, 1 => any::<i32>()]
}

pub fn hello_request() -> impl Strategy<Value = EdgeHelloRequest> {
    (
        id(),
        any::<u32>(),
        text(),
        vec(id(), 0..4),
        map(),
        vec(any::<u8>(), 0..32),
        vec(id(), 0..4),
        any::<bool>(),
    )
        .prop_map(
            |(
                edge_id,
                protocol_version,
                software_version,
                operations,
                metadata,
                credential,
                inflight_command_ids,
                load_updates,
            )| EdgeHelloRequest {
                edge_id,
                protocol_version,
                software_version,
                operations,
                metadata,
                credential,
                inflight_command_ids,
                load_updates,
            },
        )
}

pub fn hello_response() -> impl Strategy<Value = EdgeHelloResponse> {
    (
        any::<bool>(),
        enum_value(7),
        text(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(a, r, m, pv, hb, sid, ra, mfl, minv, maxv, lui)| EdgeHelloResponse {
                accepted: a,
                reject_reason: r,
                message: m,
                protocol_version: pv,
                heartbeat_interval_ms: hb,
                session_id: sid,
                retry_after_ms: ra,
                max_frame_len: mfl,
                min_protocol_version: minv,
                max_protocol_version: maxv,
                load_update_interval_ms: lui,
            },
        )
}

pub fn provider() -> impl Strategy<Value = ProviderSnapshot> {
    (
        id(),
        enum_value(3),
        enum_value(3),
        enum_value(3),
        any::<[u32; 6]>(),
        vec(text(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(provider_id, category, status, health, n, models, elig)| {
            ProviderSnapshot {
                provider_id,
                category,
                status,
                health,
                capacity: n[0],
                in_flight: n[1],
                queued: n[2],
                long_context_capacity: n[3],
                long_context_in_flight: n[4],
                long_context_queued: n[5],
                models,
                admission_eligible: elig,
            }
        })
}

pub fn node() -> impl Strategy<Value = EdgeNodeSnapshot> {
    (
        id(),
        any::<bool>(),
        proptest::option::of((text(), vec(id(), 0..3), vec(text(), 0..3))),
        vec(provider(), 0..3),
        enum_value(4),
        any::<u64>(),
        any::<u64>(),
        map(),
    )
        .prop_map(
            |(node_id, connected, config, provider_snapshots, state, generation, at, labels)| {
                EdgeNodeSnapshot {
                    node_id,
                    connected,
                    config: config.map(|(revision, provider_ids, models)| NodeConfigSummary {
                        revision,
                        provider_ids,
                        models,
                    }),
                    provider_snapshots,
                    state,
                    generation,
                    last_transition_unix_ms: at,
                    labels,
                }
            },
        )
}

pub fn status_request() -> impl Strategy<Value = EdgeStatusRequest> {
    (vec(id(), 0..4), prop_oneof![Just(String::new()), id()]).prop_map(
        |(node_ids, start_after_node_id)| EdgeStatusRequest {
            node_ids,
            start_after_node_id,
        },
    )
}

pub fn status_response() -> impl Strategy<Value = EdgeStatusResponse> {
    (
        id(),
        vec(node(), 0..3),
        any::<u64>(),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(|(edge_id, nodes, at, rev, truncated)| EdgeStatusResponse {
            edge_id,
            nodes,
            observed_at_unix_ms: at,
            registry_revision: rev,
            truncated,
        })
}

pub fn command_request() -> impl Strategy<Value = EdgeCommandRequest> {
    (id(), id(), text(), map(), any::<u32>()).prop_map(
        |(command_id, operation, target_selector, metadata, timeout_ms)| EdgeCommandRequest {
            command_id,
            operation,
            target_selector,
            metadata,
            timeout_ms,
        },
    )
}

pub fn command_response() -> impl Strategy<Value = EdgeCommandResponse> {
    (id(), any::<bool>(), enum_value(6), text()).prop_map(
        |(command_id, accepted, reject_reason, message)| EdgeCommandResponse {
            command_id,
            accepted,
            reject_reason,
            message,
        },
    )
}

pub fn command_event() -> impl Strategy<Value = EdgeCommandEvent> {
    (
        id(),
        enum_value(6),
        any::<u32>(),
        text(),
        map(),
        any::<u64>(),
    )
        .prop_map(
            |(command_id, phase, sequence, message, detail, at)| EdgeCommandEvent {
                command_id,
                phase,
                sequence,
                message,
                detail,
                occurred_at_unix_ms: at,
            },
        )
}

pub fn node_event() -> impl Strategy<Value = EdgeNodeEvent> {
    (
        id(),
        id(),
        enum_value(6),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        text(),
    )
        .prop_map(
            |(edge_id, node_id, kind, generation, sequence, at, reason)| EdgeNodeEvent {
                edge_id,
                node_id,
                kind,
                generation,
                sequence,
                occurred_at_unix_ms: at,
                reason,
            },
        )
}

pub fn provider_load() -> impl Strategy<Value = ProviderLoad> {
    (
        id(),
        id(),
        enum_value(3),
        enum_value(3),
        any::<[u32; 6]>(),
        any::<[bool; 2]>(),
    )
        .prop_map(
            |(node_id, provider_id, status, health, n, [eligible, connected])| ProviderLoad {
                node_id,
                provider_id,
                status,
                health,
                capacity: n[0],
                in_flight: n[1],
                queued: n[2],
                long_context_capacity: n[3],
                long_context_in_flight: n[4],
                long_context_queued: n[5],
                admission_eligible: eligible,
                node_connected: connected,
            },
        )
}

pub fn load_update() -> impl Strategy<Value = EdgeLoadUpdate> {
    (
        any::<u64>(),
        any::<u64>(),
        vec(provider_load(), 0..4),
        any::<bool>(),
    )
        .prop_map(|(sequence, at, providers, resync)| EdgeLoadUpdate {
            sequence,
            observed_at_unix_ms: at,
            providers,
            resync,
        })
}

pub fn go_away() -> impl Strategy<Value = GoAway> {
    (enum_value(8), text(), any::<u32>()).prop_map(|(reason, message, retry_after_ms)| GoAway {
        reason,
        message,
        retry_after_ms,
    })
}

/// Any body kind.
pub fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        hello_request().prop_map(Body::from),
        hello_response().prop_map(Body::from),
        status_request().prop_map(Body::from),
        status_response().prop_map(Body::from),
        command_request().prop_map(Body::from),
        command_response().prop_map(Body::from),
        command_event().prop_map(Body::from),
        node_event().prop_map(Body::from),
        (any::<u64>(), any::<u64>()).prop_map(|(sequence, sent_at_unix_ms)| Body::from(
            Heartbeat {
                sequence,
                sent_at_unix_ms
            }
        )),
        any::<u64>().prop_map(|sequence| Body::from(HeartbeatAck { sequence })),
        go_away().prop_map(Body::from),
        load_update().prop_map(Body::from),
    ]
}

/// An envelope that can be framed: a body of any kind (rarely none, then with a
/// non-zero correlation id, since an empty envelope encodes to nothing).
pub fn envelope() -> impl Strategy<Value = Envelope> {
    prop_oneof![
        20 => (prop_oneof![Just(0u64), any::<u64>()], body())
            .prop_map(|(correlation_id, body)| Envelope::correlated(correlation_id, body)),
        1 => (1..=u64::MAX).prop_map(|correlation_id| Envelope { correlation_id, body: None }),
    ]
}

/// Encodes `envelopes` as one byte stream.
pub fn stream(envelopes: &[Envelope]) -> Vec<u8> {
    let mut wire = Vec::new();
    for envelope in envelopes {
        encode_frame(envelope, DEFAULT_MAX_FRAME_LEN, &mut wire).expect("encodable");
    }
    wire
}

/// Feeds `wire` to a fresh decoder in chunks of the given sizes (cycled; sizes of 0
/// are treated as 1) and returns every frame, checking the buffering bound as it goes.
pub fn decode_chunked(wire: &[u8], sizes: &[usize]) -> Result<Vec<Envelope>, FrameError> {
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    let bound = DEFAULT_MAX_FRAME_LEN as usize + LENGTH_PREFIX_LEN;
    let mut frames = Vec::new();
    let mut rest = wire;
    let mut i = 0;
    while !rest.is_empty() {
        let size = sizes
            .get(i % sizes.len().max(1))
            .copied()
            .unwrap_or(1)
            .max(1);
        i += 1;
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        let mut input = chunk;
        while let Some(envelope) = decoder.decode(&mut input)? {
            frames.push(envelope);
        }
        assert!(input.is_empty(), "decoder returned None with input left");
        assert!(decoder.buffered() <= bound && decoder.capacity() <= bound);
    }
    decoder.finish()?;
    Ok(frames)
}

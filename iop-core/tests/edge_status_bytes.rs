//! The Edge writes its status answer straight from the registry into the outbound
//! buffer (`EdgeRegistry::encode_snapshot`). These tests hold it to the bytes of the
//! path it replaced — `snapshot()`, the session's budget fix-up, then the envelope
//! encoded whole — for random registries, filters, frame limits and correlation ids,
//! through the seam alone and through an `Edge`'s actual transmit, and check that the
//! outbound cap (PROTOCOL.md §7) still ends a session whose CP does not read.

use std::collections::BTreeSet;

use iop_core::edge::{
    CloseReason, Edge, EdgeConfig, EdgeEvent, EdgeRegistry, LifecycleEvent, Selector, StatusScope,
    Target, Transmit,
};
use iop_core::proto::{
    self, Body, EdgeHelloResponse, EdgeStatusRequest, EdgeStatusResponse, Envelope, FrameDecoder,
    Message,
};
use iop_core::registry::{
    LeaseKind, NodeConfig, NodeEndpoint, NodeRegistry, ProviderCategory, ProviderConfig,
    ResolveError, STATUS_ENVELOPE_OVERHEAD,
};
use iop_core::{Instant, WallClock};
use proptest::prelude::*;

const ORIGIN_UNIX_MS: u64 = 1_800_000_000_000;

/// One node: (providers, models per provider, model name length, labels, state).
type NodeSpec = (usize, usize, usize, usize, u8);

fn arb_nodes(count: std::ops::Range<usize>) -> impl Strategy<Value = Vec<NodeSpec>> {
    proptest::collection::vec(
        (0usize..4, 0usize..60, 1usize..=128, 0usize..6, 0u8..4),
        count,
    )
}

/// A registry of the given nodes: 0 configured, 1 connected, 2 ready with leases,
/// 3 ready then closed. Model names make nodes large enough for the 64 KiB minimum
/// frame limit to cut a snapshot.
fn build(specs: &[NodeSpec]) -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    for (i, &(providers, models, model_len, labels, state)) in specs.iter().enumerate() {
        let id = format!("node-{i:03}");
        let now = 1_700_000_000_000 + i as u64;
        let mut c = NodeConfig::new(&id)
            .with_revision(if i % 2 == 0 { "" } else { "sha256:0123" })
            .with_endpoint(NodeEndpoint::new("10.1.1.1:1", "t"));
        for l in 0..labels {
            c = c.with_label(format!("k{l}"), format!("v{i}"));
        }
        for p in 0..providers {
            let category = [
                ProviderCategory::Cli,
                ProviderCategory::Api,
                ProviderCategory::LocalInference,
            ][p % 3];
            let mut pc = ProviderConfig::new(format!("p{p}"), category, 8, 2);
            for m in 0..models {
                pc = pc.with_model(format!("{m:0>model_len$}"));
            }
            c = c.with_provider(pc);
        }
        let _ = reg.configure(c, now).expect("valid config");
        if state >= 1 {
            let g = reg.connect(&id, now + 1).expect("connect");
            if state >= 2 {
                let _ = reg.mark_ready(&id, g, now + 2);
                if providers > 0 {
                    // Kept alive: their counts are what the snapshot reports.
                    std::mem::forget(reg.admit(&id, "p0", LeaseKind::Normal));
                }
            }
            if state == 3 {
                let _ = reg.close(&id, g, "gone", now + 3);
            }
        }
    }
    while reg.poll_event().is_some() {}
    reg
}

/// A registry that implements only `snapshot`, so the Edge takes the seam's default
/// `encode_snapshot` (build, then encode). With `overshoot`, it ignores the budget.
struct SnapshotOnly {
    inner: NodeRegistry,
    overshoot: bool,
}

impl EdgeRegistry for SnapshotOnly {
    fn snapshot(
        &self,
        edge_id: &str,
        scope: StatusScope<'_>,
        observed_at_unix_ms: u64,
        max_encoded_len: usize,
    ) -> EdgeStatusResponse {
        let budget = if self.overshoot {
            usize::MAX
        } else {
            max_encoded_len
        };
        EdgeRegistry::snapshot(&self.inner, edge_id, scope, observed_at_unix_ms, budget)
    }

    fn resolve(&self, selector: &Selector) -> Result<Target, ResolveError> {
        self.inner.resolve(selector)
    }

    fn poll_lifecycle_event(&mut self) -> Option<LifecycleEvent> {
        None
    }
}

/// The frame the Edge sent before it wrote status bytes in place: the registry's
/// snapshot, its edge id and time set by the session, no nodes (and `truncated`) when
/// over budget, then the whole envelope encoded. `None` when it was too large to send.
fn old_path_frame<R: EdgeRegistry>(
    reg: &R,
    edge_id: &str,
    node_ids: &[String],
    unix_ms: u64,
    max_frame_len: u32,
    correlation_id: u64,
) -> Option<Vec<u8>> {
    let budget = (max_frame_len as usize).saturating_sub(STATUS_ENVELOPE_OVERHEAD);
    let mut response = reg.snapshot(edge_id, scope(node_ids), unix_ms, budget);
    response.edge_id = edge_id.to_owned();
    response.observed_at_unix_ms = unix_ms;
    if response.encoded_len() > budget {
        response.nodes.clear();
        response.truncated = true;
    }
    let mut wire = Vec::new();
    proto::encode_frame(
        &Envelope::correlated(correlation_id, response),
        max_frame_len,
        &mut wire,
    )
    .ok()?;
    Some(wire)
}

/// The scope of a request for `ids` (every node when empty).
fn scope(ids: &[String]) -> StatusScope<'_> {
    if ids.is_empty() {
        StatusScope::All
    } else {
        StatusScope::Nodes(ids)
    }
}

fn node_ids_of(picks: &[usize]) -> Vec<String> {
    // Some ids name no node; repeats and disorder are allowed on the wire.
    picks.iter().map(|i| format!("node-{i:03}")).collect()
}

/// An Edge with an accepted session whose CP announced `max_frame_len`.
fn connected<R: EdgeRegistry>(
    registry: R,
    edge_id: &str,
    max_frame_len: u32,
    outbound_cap: usize,
) -> Edge<R> {
    let mut config = EdgeConfig::new(edge_id, 0);
    config.wall_clock = WallClock::new(ORIGIN_UNIX_MS);
    config.outbound_cap = outbound_cap;
    let mut edge = Edge::new(config, registry).expect("valid config");
    edge.handle_connected(Instant::ZERO).expect("dial");
    let mut sink = Vec::new();
    let _ = iop_core::drain_transmits(&mut sink, usize::MAX, |b| edge.poll_transmit(b));
    let accept = EdgeHelloResponse {
        accepted: true,
        protocol_version: 1,
        session_id: 1,
        max_frame_len,
        ..Default::default()
    };
    edge.handle_bytes(Instant::ZERO, &frame(&Envelope::new(accept)));
    assert!(edge.is_connected());
    sink.clear();
    let _ = iop_core::drain_transmits(&mut sink, usize::MAX, |b| edge.poll_transmit(b));
    while edge.poll_event().is_some() {}
    edge
}

fn frame(envelope: &Envelope) -> Vec<u8> {
    let mut wire = Vec::new();
    proto::encode_frame(envelope, u32::MAX, &mut wire).expect("not empty");
    wire
}

/// Delivers one status request at `ms` and returns everything the Edge transmits.
fn exchange<R: EdgeRegistry>(
    edge: &mut Edge<R>,
    ms: u64,
    correlation_id: u64,
    node_ids: &[String],
) -> Vec<u8> {
    let request = Envelope::correlated(
        correlation_id,
        EdgeStatusRequest {
            node_ids: node_ids.to_vec(),
            ..Default::default()
        },
    );
    edge.handle_bytes(Instant::from_millis(ms), &frame(&request));
    let mut wire = Vec::new();
    let _ = iop_core::drain_transmits(&mut wire, usize::MAX, |b| edge.poll_transmit(b));
    wire
}

fn arb_edge_id() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("e".to_owned()),
        Just("edge-1".to_owned()),
        "[a-z0-9._-]{1,128}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Through the seam, for any budget (well below the smallest frame limit too):
    /// the bytes `NodeRegistry` writes, and those of the default implementation, are
    /// the encoding of `snapshot()`.
    #[test]
    fn seam_writes_the_bytes_of_the_snapshot(
        specs in arb_nodes(0..12),
        picks in proptest::collection::vec(0usize..14, 0..6),
        budget in prop_oneof![0usize..64, 0usize..20_000, Just(usize::MAX)],
        edge_id in arb_edge_id(),
        unix_ms in prop_oneof![Just(0u64), any::<u64>()],
        prefix in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let reg = build(&specs);
        let ids = node_ids_of(&picks);
        // Every node, some nodes, or every node after one of them (a page).
        let cursor = ids.first().cloned().unwrap_or_default();
        let scopes = [scope(&ids), StatusScope::After(&cursor)];
        for scope in scopes {
            let expected =
                EdgeRegistry::snapshot(&reg, &edge_id, scope, unix_ms, budget).encode_to_vec();
            // The bytes are appended after what the buffer held.
            let mut direct = prefix.clone();
            EdgeRegistry::encode_snapshot(&reg, &edge_id, scope, unix_ms, budget, &mut direct);
            prop_assert_eq!(&direct[..prefix.len()], &prefix[..]);
            prop_assert_eq!(&direct[prefix.len()..], &expected[..]);
            let fallback = SnapshotOnly { inner: reg.clone(), overshoot: false };
            let mut built = prefix.clone();
            fallback.encode_snapshot(&edge_id, scope, unix_ms, budget, &mut built);
            prop_assert_eq!(built, direct);
            // A page holds only nodes after its cursor.
            let response = EdgeStatusResponse::decode(&expected[..]).unwrap();
            prop_assert!(response.nodes.iter().all(|n| scope.includes(&n.node_id)));
        }
    }

    /// Through an Edge: each transmitted frame is byte for byte the old path's frame,
    /// whether the registry writes bytes (`NodeRegistry`), only builds snapshots, or
    /// overshoots its budget; and it decodes to that snapshot.
    #[test]
    fn edge_transmits_the_old_paths_frame(
        specs in arb_nodes(0..60),
        requests in proptest::collection::vec(
            (
                prop_oneof![2 => Just(Vec::new()), 1 => proptest::collection::vec(0usize..64, 0..40)],
                prop_oneof![Just(0u64), 1u64..300, any::<u64>()],
            ),
            1..4,
        ),
        extra in prop_oneof![2 => Just(0u32), 2 => 0u32..100_000, 1 => Just(proto::DEFAULT_MAX_FRAME_LEN)],
        edge_id in arb_edge_id(),
        overshoot in any::<bool>(),
    ) {
        // The smallest limit a CP may announce is 64 KiB.
        let max_frame_len = proto::PRE_HELLO_MAX_FRAME_LEN + extra;
        let reference = build(&specs);
        let cap = iop_core::outbound::DEFAULT_OUTBOUND_CAP;
        let mut direct = connected(build(&specs), &edge_id, max_frame_len, cap);
        let mut built = connected(SnapshotOnly { inner: build(&specs), overshoot }, &edge_id, max_frame_len, cap);
        for (i, (picks, correlation_id)) in requests.iter().enumerate() {
            let ms = 10 + i as u64;
            let ids = node_ids_of(picks);
            let old = old_path_frame(&reference, &edge_id, &ids, ORIGIN_UNIX_MS + ms, max_frame_len, *correlation_id)
                .expect("a status within the budget always fits the frame");
            let sent = exchange(&mut direct, ms, *correlation_id, &ids);
            prop_assert_eq!(&sent, &old);
            let sent_built = exchange(&mut built, ms, *correlation_id, &ids);
            let old_built = old_path_frame(built.registry(), &edge_id, &ids, ORIGIN_UNIX_MS + ms, max_frame_len, *correlation_id)
                .expect("fits");
            prop_assert_eq!(&sent_built, &old_built);
            if !overshoot {
                prop_assert_eq!(&sent_built, &old);
            }

            let mut decoder = FrameDecoder::new(max_frame_len);
            let mut input = sent.as_slice();
            let envelope = decoder.decode(&mut input).expect("valid").expect("whole");
            prop_assert!(input.is_empty());
            prop_assert_eq!(envelope.correlation_id, *correlation_id);
            let Some(Body::StatusResponse(response)) = envelope.body else {
                panic!("not a status response: {envelope:?}");
            };
            let budget = max_frame_len as usize - STATUS_ENVELOPE_OVERHEAD;
            let expected = reference.snapshot(&edge_id, ORIGIN_UNIX_MS + ms, &ids, budget);
            prop_assert!(response.encoded_len() <= budget);
            let wanted: BTreeSet<&String> = ids.iter().collect();
            let present = if ids.is_empty() {
                specs.len()
            } else {
                wanted.iter().filter(|id| specs.len() > id[5..].parse::<usize>().unwrap()).count()
            };
            prop_assert_eq!(response.truncated, response.nodes.len() < present);
            prop_assert_eq!(response, expected);
        }
        // A registry over its budget is the one difference the Edge counts: a snapshot
        // it could not send as built (the answer then carries no nodes, `truncated`).
        let (direct, mut built) = (direct.stats(), built.stats());
        if overshoot {
            prop_assert!(built.unsendable_frames >= direct.unsendable_frames);
            built.unsendable_frames = direct.unsendable_frames;
        }
        prop_assert_eq!(direct, built);
    }
}

/// The registry of `()` writes the same bytes as the snapshot it builds.
#[test]
fn the_empty_registry_writes_its_snapshot() {
    for (edge_id, ms) in [("e", 0), ("edge-1", 1), ("edge-1", u64::MAX)] {
        let mut out = vec![7];
        ().encode_snapshot(edge_id, StatusScope::All, ms, 0, &mut out);
        let expected =
            EdgeRegistry::snapshot(&(), edge_id, StatusScope::All, ms, 0).encode_to_vec();
        assert_eq!(out[1..], expected[..]);
        let mut edge = connected((), edge_id, proto::DEFAULT_MAX_FRAME_LEN, 1 << 20);
        let sent = exchange(&mut edge, 5, 9, &[]);
        let old = old_path_frame(
            &(),
            edge_id,
            &[],
            ORIGIN_UNIX_MS + 5,
            proto::DEFAULT_MAX_FRAME_LEN,
            9,
        );
        assert_eq!(Some(sent), old);
    }
}

/// PROTOCOL.md §7: a CP that reads nothing is dropped once the Edge has 8 MiB (here, the
/// configured cap) queued for it, status answers included; the queue is released.
#[test]
fn status_answers_count_against_the_outbound_cap() {
    // About 70 KB per full status.
    let reg = build(&[(2, 30, 99, 2, 2); 11]);
    let one = frame(&Envelope::correlated(
        1,
        reg.snapshot("edge-1", ORIGIN_UNIX_MS, &[] as &[&str], usize::MAX),
    ))
    .len();
    assert!(one > 60_000, "{one}");
    let cap = 3 * one + one / 2;
    let mut edge = connected(reg, "edge-1", proto::DEFAULT_MAX_FRAME_LEN, cap);
    let request = |id| frame(&Envelope::correlated(id, EdgeStatusRequest::default()));
    // Three answers fit; nothing is pulled.
    for id in 1..=3 {
        edge.handle_bytes(Instant::from_millis(id), &request(id));
        assert!(edge.is_connected(), "answer {id} fits the cap");
    }
    // The fourth would pass the cap: the CP is too slow, the session ends.
    edge.handle_bytes(Instant::from_millis(4), &request(4));
    let events: Vec<EdgeEvent> = std::iter::from_fn(|| edge.poll_event()).collect();
    assert!(
        events.iter().any(|e| matches!(
            e,
            EdgeEvent::Closed {
                reason: CloseReason::SlowPeer,
                ..
            }
        )),
        "{events:?}"
    );
    assert!(!edge.is_connected());
    // Nothing queued is sent: the transport is to be closed at once.
    let mut wire = Vec::new();
    assert_eq!(edge.poll_transmit(&mut wire), Transmit::Close);
    assert!(wire.is_empty());
}

/// Answers written in place behind frames still queued (not pulled) leave those
/// intact and in order.
#[test]
fn status_answers_behind_queued_frames_are_framed_in_place() {
    let reg = build(&[(1, 3, 10, 1, 2); 3]);
    let reference = build(&[(1, 3, 10, 1, 2); 3]);
    let mut edge = connected(reg, "edge-1", proto::DEFAULT_MAX_FRAME_LEN, 1 << 20);
    let mut expected = Vec::new();
    for id in 1..=3u64 {
        edge.handle_bytes(
            Instant::from_millis(id),
            &frame(&Envelope::correlated(id, EdgeStatusRequest::default())),
        );
        expected.extend(
            old_path_frame(
                &reference,
                "edge-1",
                &[],
                ORIGIN_UNIX_MS + id,
                proto::DEFAULT_MAX_FRAME_LEN,
                id,
            )
            .expect("fits"),
        );
    }
    let mut wire = Vec::new();
    let _ = iop_core::drain_transmits(&mut wire, usize::MAX, |b| edge.poll_transmit(b));
    assert_eq!(wire, expected);
}

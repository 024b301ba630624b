//! Golden frame vectors: `proto/iop/golden.txt`, beside the schema, is the reference.
//!
//! Each vector is built here in Rust; the test asserts that decoding the file's frame
//! gives that message and that encoding the message gives the file's bytes. To
//! regenerate the file after an intended change, run
//! `IOP_BLESS=1 cargo test -p iop-proto --test golden` and review the diff.

use std::collections::BTreeSet;
use std::path::PathBuf;

use iop_proto::*;

/// One vector as built in Rust.
struct Vector {
    name: &'static str,
    description: &'static str,
    envelope: Envelope,
    /// Raw bytes appended to the encoded body on the wire (unknown fields). Such a
    /// frame re-encodes to its canonical form, without them.
    extra: &'static [u8],
}

fn v(name: &'static str, description: &'static str, envelope: Envelope) -> Vector {
    Vector {
        name,
        description,
        envelope,
        extra: &[],
    }
}

fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn id128(c: char) -> String {
    std::iter::repeat_n(c, 128).collect()
}

fn vectors() -> Vec<Vector> {
    let provider = ProviderSnapshot {
        provider_id: "gpu-0".into(),
        category: ProviderCategory::LocalInference as i32,
        status: ProviderStatus::Available as i32,
        health: ProviderHealth::Healthy as i32,
        capacity: 4,
        in_flight: 2,
        queued: 1,
        long_context_capacity: 1,
        long_context_in_flight: 1,
        long_context_queued: 0,
        models: vec!["llama-3.1-8b".into()],
        admission_eligible: true,
    };
    let offline = ProviderSnapshot {
        provider_id: "api-0".into(),
        category: ProviderCategory::Api as i32,
        status: ProviderStatus::Unavailable as i32,
        health: ProviderHealth::Offline as i32,
        models: vec!["gpt-x".into()],
        ..Default::default()
    };
    vec![
        v(
            "hello_request",
            "EdgeHelloRequest: edge_id edge-1, protocol_version 1, software_version 0.1.0, operations [edge.ping, node.drain], metadata {iop.instance_id: 7f3a}, credential 0x736563726574 (\"secret\"), inflight_command_ids [cmd-1]",
            Envelope::new(EdgeHelloRequest {
                edge_id: "edge-1".into(),
                protocol_version: 1,
                software_version: "0.1.0".into(),
                operations: vec!["edge.ping".into(), "node.drain".into()],
                metadata: map(&[("iop.instance_id", "7f3a")]),
                credential: b"secret".to_vec(),
                inflight_command_ids: vec!["cmd-1".into()],
                load_updates: false,
            }),
        ),
        v(
            "hello_request_load_updates",
            "EdgeHelloRequest: edge_id edge-1, protocol_version 1, load_updates true (the Edge can push load updates, section 4.8)",
            Envelope::new(EdgeHelloRequest {
                edge_id: "edge-1".into(),
                protocol_version: 1,
                load_updates: true,
                ..Default::default()
            }),
        ),
        v(
            "hello_request_max_id",
            "EdgeHelloRequest: edge_id of 128 'e' (the longest id), protocol_version 1, nothing else",
            Envelope::new(EdgeHelloRequest {
                edge_id: id128('e'),
                protocol_version: 1,
                ..Default::default()
            }),
        ),
        v(
            "hello_response_accepted",
            "EdgeHelloResponse: accepted, protocol_version 1, heartbeat_interval_ms 5000, session_id 42, max_frame_len 4194304, min/max_protocol_version 1/1",
            Envelope::new(EdgeHelloResponse {
                accepted: true,
                protocol_version: 1,
                heartbeat_interval_ms: 5000,
                session_id: 42,
                max_frame_len: DEFAULT_MAX_FRAME_LEN,
                min_protocol_version: 1,
                max_protocol_version: 1,
                ..Default::default()
            }),
        ),
        v(
            "hello_response_rejected_max_enum",
            "EdgeHelloResponse: rejected, reject_reason INVALID_HELLO (7, the highest value), message \"bad edge_id\", retry_after_ms 1000",
            Envelope::new(EdgeHelloResponse {
                accepted: false,
                reject_reason: HelloRejectReason::InvalidHello as i32,
                message: "bad edge_id".into(),
                retry_after_ms: 1000,
                ..Default::default()
            }),
        ),
        v(
            "status_request",
            "correlation_id 7; EdgeStatusRequest: node_ids [node-a, node-b]",
            Envelope::correlated(
                7,
                EdgeStatusRequest {
                    node_ids: vec!["node-a".into(), "node-b".into()],
                    ..Default::default()
                },
            ),
        ),
        v(
            "status_request_page",
            "correlation_id 8; EdgeStatusRequest: no node_ids, start_after_node_id node-b (the page after node-b of a truncated answer)",
            Envelope::correlated(
                8,
                EdgeStatusRequest {
                    start_after_node_id: "node-b".into(),
                    ..Default::default()
                },
            ),
        ),
        v(
            "status_request_all",
            "correlation_id 1; EdgeStatusRequest: no node_ids (all nodes); the body is an empty message",
            Envelope::correlated(1, EdgeStatusRequest::default()),
        ),
        v(
            "status_response",
            "correlation_id 7; EdgeStatusResponse: edge_id edge-1, observed_at_unix_ms 1700000000000, registry_revision 9; node node-a READY connected generation 3 with config {revision r1, provider_ids [gpu-0, api-0], models [llama-3.1-8b]}, labels {zone: eu-1}, providers gpu-0 (LOCAL_INFERENCE, AVAILABLE, HEALTHY, 4/2/1, long 1/1/0, eligible) and api-0 (API, UNAVAILABLE, OFFLINE, zeros); node node-b DISCONNECTED (4, the highest value)",
            Envelope::correlated(
                7,
                EdgeStatusResponse {
                    edge_id: "edge-1".into(),
                    nodes: vec![
                        EdgeNodeSnapshot {
                            node_id: "node-a".into(),
                            connected: true,
                            config: Some(NodeConfigSummary {
                                revision: "r1".into(),
                                provider_ids: vec!["gpu-0".into(), "api-0".into()],
                                models: vec!["llama-3.1-8b".into()],
                            }),
                            provider_snapshots: vec![provider, offline],
                            state: NodeState::Ready as i32,
                            generation: 3,
                            last_transition_unix_ms: 1_699_999_999_000,
                            labels: map(&[("zone", "eu-1")]),
                        },
                        EdgeNodeSnapshot {
                            node_id: "node-b".into(),
                            state: NodeState::Disconnected as i32,
                            generation: 1,
                            ..Default::default()
                        },
                    ],
                    observed_at_unix_ms: 1_700_000_000_000,
                    registry_revision: 9,
                    truncated: false,
                },
            ),
        ),
        v(
            "status_response_empty_truncated",
            "correlation_id 18446744073709551615 (u64::MAX); EdgeStatusResponse: edge_id edge-1, no nodes, truncated true",
            Envelope::correlated(
                u64::MAX,
                EdgeStatusResponse {
                    edge_id: "edge-1".into(),
                    truncated: true,
                    ..Default::default()
                },
            ),
        ),
        v(
            "command_request",
            "EdgeCommandRequest: command_id of 128 'c' (the longest id), operation node.drain, target_selector node:node-a, metadata {reason: maintenance, ticket: OPS-1}, timeout_ms 30000",
            Envelope::new(EdgeCommandRequest {
                command_id: id128('c'),
                operation: "node.drain".into(),
                target_selector: "node:node-a".into(),
                metadata: map(&[("reason", "maintenance"), ("ticket", "OPS-1")]),
                timeout_ms: 30_000,
            }),
        ),
        v(
            "command_request_empty_map",
            "EdgeCommandRequest: command_id cmd-2, operation edge.ping, empty target_selector (the Edge itself), empty metadata, timeout_ms 0 (Edge default)",
            Envelope::new(EdgeCommandRequest {
                command_id: "cmd-2".into(),
                operation: "edge.ping".into(),
                ..Default::default()
            }),
        ),
        v(
            "command_response_rejected_max_enum",
            "EdgeCommandResponse: command_id cmd-2, rejected, reject_reason INVALID_COMMAND (6, the highest value), message \"content differs\"",
            Envelope::new(EdgeCommandResponse {
                command_id: "cmd-2".into(),
                accepted: false,
                reject_reason: CommandRejectReason::InvalidCommand as i32,
                message: "content differs".into(),
            }),
        ),
        v(
            "command_event_max_enum",
            "EdgeCommandEvent: command_id cmd-1, phase TIMED_OUT (6, the highest value), sequence 3, message \"deadline\", detail {elapsed_ms: 60000}, occurred_at_unix_ms 1700000060000",
            Envelope::new(EdgeCommandEvent {
                command_id: "cmd-1".into(),
                phase: CommandPhase::TimedOut as i32,
                sequence: 3,
                message: "deadline".into(),
                detail: map(&[("elapsed_ms", "60000")]),
                occurred_at_unix_ms: 1_700_000_060_000,
            }),
        ),
        v(
            "node_event_max_enum",
            "EdgeNodeEvent: edge_id edge-1, no node_id (edge-level), kind EDGE_DRAINING (6, the highest value), generation 0, sequence 5, occurred_at_unix_ms 1700000000500, reason shutdown",
            Envelope::new(EdgeNodeEvent {
                edge_id: "edge-1".into(),
                node_id: String::new(),
                kind: NodeEventKind::EdgeDraining as i32,
                generation: 0,
                sequence: 5,
                occurred_at_unix_ms: 1_700_000_000_500,
                reason: "shutdown".into(),
            }),
        ),
        v(
            "heartbeat",
            "Heartbeat: sequence 1, sent_at_unix_ms 1700000000000",
            Envelope::new(Heartbeat {
                sequence: 1,
                sent_at_unix_ms: 1_700_000_000_000,
            }),
        ),
        v(
            "heartbeat_ack",
            "correlation_id 0 (unused, not encoded); HeartbeatAck: sequence 1",
            Envelope::new(HeartbeatAck { sequence: 1 }),
        ),
        v(
            "heartbeat_ack_correlated",
            "correlation_id 300 (a two-byte varint, encoded before the body); HeartbeatAck: sequence 1",
            Envelope::correlated(300, HeartbeatAck { sequence: 1 }),
        ),
        v(
            "go_away_max_enum",
            "GoAway: reason CREDENTIAL_REVOKED (8, the highest value), message revoked, retry_after_ms 0",
            Envelope::go_away(GoAwayReason::CredentialRevoked, "revoked", 0),
        ),
        v(
            "go_away_superseded",
            "GoAway: reason SUPERSEDED (3), no message, retry_after_ms 5000",
            Envelope::go_away(GoAwayReason::Superseded, "", 5000),
        ),
        v(
            "hello_response_load_updates",
            "EdgeHelloResponse: accepted, protocol_version 1, session_id 42, load_update_interval_ms 250 (the default the CP asks for)",
            Envelope::new(EdgeHelloResponse {
                accepted: true,
                protocol_version: 1,
                session_id: 42,
                load_update_interval_ms: 250,
                ..Default::default()
            }),
        ),
        v(
            "load_update",
            "EdgeLoadUpdate: sequence 3, observed_at_unix_ms 1700000000000, providers [node-a/gpu-0: AVAILABLE, HEALTHY, capacity 4, in_flight 3, queued 2, long_context_capacity 1, long_context_in_flight 1, long_context_queued 0, admission_eligible, node_connected; node-b/api-0: UNAVAILABLE, OFFLINE, all zero, not eligible, node not connected]",
            Envelope::new(EdgeLoadUpdate {
                sequence: 3,
                observed_at_unix_ms: 1_700_000_000_000,
                providers: vec![
                    ProviderLoad {
                        node_id: "node-a".into(),
                        provider_id: "gpu-0".into(),
                        status: ProviderStatus::Available as i32,
                        health: ProviderHealth::Healthy as i32,
                        capacity: 4,
                        in_flight: 3,
                        queued: 2,
                        long_context_capacity: 1,
                        long_context_in_flight: 1,
                        long_context_queued: 0,
                        admission_eligible: true,
                        node_connected: true,
                    },
                    ProviderLoad {
                        node_id: "node-b".into(),
                        provider_id: "api-0".into(),
                        status: ProviderStatus::Unavailable as i32,
                        health: ProviderHealth::Offline as i32,
                        ..Default::default()
                    },
                ],
                resync: false,
            }),
        ),
        v(
            "load_update_resync",
            "EdgeLoadUpdate: sequence 4, observed_at_unix_ms 1700000000250, no providers, resync (a structural change: the CP asks for status)",
            Envelope::new(EdgeLoadUpdate {
                sequence: 4,
                observed_at_unix_ms: 1_700_000_000_250,
                providers: Vec::new(),
                resync: true,
            }),
        ),
        v(
            "no_body",
            "correlation_id 5 and no body (what a newer peer's unknown body decodes to)",
            Envelope {
                correlation_id: 5,
                body: None,
            },
        ),
        Vector {
            name: "unknown_fields",
            description: "Heartbeat: sequence 2, sent_at_unix_ms 0, followed by unknown envelope fields 99 (varint 1) and 100 (bytes 0xdead): they are skipped when decoding and dropped when re-encoding (see canonical)",
            envelope: Envelope::new(Heartbeat {
                sequence: 2,
                sent_at_unix_ms: 0,
            }),
            extra: &[0x98, 0x06, 0x01, 0xa2, 0x06, 0x02, 0xde, 0xad],
        },
    ]
}

/// The frame of `vector`, as it appears on the wire.
fn wire(vector: &Vector) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut canonical = Vec::new();
    encode_frame(&vector.envelope, DEFAULT_MAX_FRAME_LEN, &mut canonical).unwrap();
    if vector.extra.is_empty() {
        return (canonical, None);
    }
    let mut body = vector.envelope.encode_to_vec();
    body.extend_from_slice(vector.extra);
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    (frame, Some(canonical))
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto/iop/golden.txt")
}

const HEADER: &str = "\
# IOP Control Plane <-> Edge golden frame vectors (protocol version 1).
#
# Each vector is a [name] line, a description of the message in words, and the hex of
# one whole frame: the 4-byte big-endian length prefix, then the protobuf-encoded
# iop.Envelope. An implementation is wire-compatible when it decodes every frame to
# the described message and encodes that message to exactly the same bytes (maps in
# key order, default values omitted). Where the frame holds unknown fields, encoding
# the decoded message gives `canonical` instead.
#
# Generated by iop-proto/tests/golden.rs (IOP_BLESS=1); this file is the reference.
";

fn render(vectors: &[Vector]) -> String {
    let mut out = String::from(HEADER);
    for vector in vectors {
        let (frame, canonical) = wire(vector);
        out.push_str(&format!(
            "\n[{}]\ndescription: {}\nframe: {}\n",
            vector.name,
            vector.description,
            hex::encode(frame)
        ));
        if let Some(canonical) = canonical {
            out.push_str(&format!("canonical: {}\n", hex::encode(canonical)));
        }
    }
    out
}

/// A vector as read from the file.
#[derive(Default)]
struct Parsed {
    name: String,
    description: String,
    frame: Vec<u8>,
    canonical: Option<Vec<u8>>,
}

fn parse(text: &str) -> Vec<Parsed> {
    let mut out: Vec<Parsed> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            out.push(Parsed {
                name: name.to_string(),
                ..Default::default()
            });
            continue;
        }
        let current = out
            .last_mut()
            .unwrap_or_else(|| panic!("line {}: outside a vector", number + 1));
        let (key, value) = line
            .split_once(": ")
            .unwrap_or_else(|| panic!("line {}: expected `key: value`", number + 1));
        match key {
            "description" => current.description = value.to_string(),
            "frame" => current.frame = hex::decode(value).unwrap(),
            "canonical" => current.canonical = Some(hex::decode(value).unwrap()),
            other => panic!("line {}: unknown key {other}", number + 1),
        }
    }
    out
}

fn decode_all(frame: &[u8]) -> Vec<Envelope> {
    // One byte at a time, to exercise the incremental path on every vector.
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    let mut frames = Vec::new();
    for byte in frame.chunks(1) {
        let mut input = byte;
        while let Some(envelope) = decoder.decode(&mut input).unwrap() {
            frames.push(envelope);
        }
    }
    decoder.finish().unwrap();
    frames
}

#[test]
fn golden_vectors_match_the_reference_file() {
    let vectors = vectors();
    if std::env::var_os("IOP_BLESS").is_some() {
        std::fs::create_dir_all(path().parent().unwrap()).unwrap();
        std::fs::write(path(), render(&vectors)).unwrap();
    }
    let text = std::fs::read_to_string(path()).expect("proto/iop/golden.txt exists");
    let parsed = parse(&text);

    let file_names: Vec<&str> = parsed.iter().map(|p| p.name.as_str()).collect();
    let code_names: Vec<&str> = vectors.iter().map(|v| v.name).collect();
    assert_eq!(
        file_names, code_names,
        "the file and the code list different vectors"
    );

    for (vector, parsed) in vectors.iter().zip(&parsed) {
        let name = vector.name;
        assert_eq!(
            parsed.description, vector.description,
            "{name}: description"
        );
        assert_eq!(
            decode_all(&parsed.frame),
            vec![vector.envelope.clone()],
            "{name}: decoding the file's frame"
        );
        let mut encoded = Vec::new();
        encode_frame(&vector.envelope, DEFAULT_MAX_FRAME_LEN, &mut encoded).unwrap();
        let expected = parsed.canonical.as_ref().unwrap_or(&parsed.frame);
        assert_eq!(
            hex::encode(&encoded),
            hex::encode(expected),
            "{name}: encoding the message"
        );
        assert_eq!(
            parsed.canonical.is_some(),
            !vector.extra.is_empty(),
            "{name}: canonical"
        );
    }
    // The whole file is exactly what the code renders (comments included).
    assert_eq!(text, render(&vectors), "run with IOP_BLESS=1 to regenerate");
}

#[test]
fn golden_vectors_cover_every_body_kind() {
    let kinds: BTreeSet<BodyKind> = vectors().iter().map(|v| v.envelope.kind()).collect();
    let all = [
        BodyKind::Empty,
        BodyKind::HelloRequest,
        BodyKind::HelloResponse,
        BodyKind::StatusRequest,
        BodyKind::StatusResponse,
        BodyKind::CommandRequest,
        BodyKind::CommandResponse,
        BodyKind::CommandEvent,
        BodyKind::NodeEvent,
        BodyKind::Heartbeat,
        BodyKind::HeartbeatAck,
        BodyKind::GoAway,
        BodyKind::LoadUpdate,
    ];
    assert_eq!(kinds, all.into_iter().collect());
}

//! Seed inputs for every target, built from the golden vectors (see
//! `examples/seed_corpus.rs`, which writes them to `fuzz/corpus/`).

/// One golden vector: its name and its whole frame (length prefix included).
#[derive(Debug, Clone)]
pub struct Vector {
    /// The `[name]` of the vector.
    pub name: String,
    /// The frame, length prefix included.
    pub frame: Vec<u8>,
}

impl Vector {
    /// The frame body (the protobuf `Envelope`), without the length prefix.
    pub fn body(&self) -> &[u8] {
        self.frame.get(4..).unwrap_or_default()
    }
}

/// One seed file.
#[derive(Debug, Clone)]
pub struct Seed {
    /// File name.
    pub name: String,
    /// File contents.
    pub data: Vec<u8>,
}

fn seed(name: impl Into<String>, parts: &[&[u8]]) -> Seed {
    Seed {
        name: name.into(),
        data: parts.concat(),
    }
}

/// Parses `golden.txt`: `[name]` lines each followed (after a description) by a
/// `frame: <hex>` line.
pub fn parse_golden(text: &str) -> Result<Vec<Vector>, String> {
    let mut vectors = Vec::new();
    let mut name = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            name = Some(n.to_owned());
        } else if let Some(hex) = line.strip_prefix("frame: ") {
            let name = name.take().ok_or("frame: line before any [name]")?;
            vectors.push(Vector {
                frame: decode_hex(hex.trim()).ok_or_else(|| format!("bad hex in {name}"))?,
                name,
            });
        }
    }
    if vectors.is_empty() {
        return Err("no vectors found".into());
    }
    Ok(vectors)
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The seeds of every target, by target name.
pub fn all(vectors: &[Vector]) -> Vec<(&'static str, Vec<Seed>)> {
    vec![
        ("frame_decode", frame_decode(vectors)),
        ("envelope_roundtrip", envelope_roundtrip(vectors)),
        ("fused_decode", fused_decode(vectors)),
        ("registry_ops", structured("registry_ops", 24)),
        ("cp_session_bytes", cp_session_bytes(vectors)),
        ("edge_session_bytes", edge_session_bytes(vectors)),
        ("pair_sequence", structured("pair_sequence", 16)),
        ("load_updates", structured("load_updates", 24)),
        ("sender_limits", structured("sender_limits", 24)),
    ]
}

/// Config byte, split header, stream (see `targets::frame_decode`).
fn frame_decode(vectors: &[Vector]) -> Vec<Seed> {
    let mut seeds: Vec<Seed> = vectors
        .iter()
        .map(|v| seed(&v.name, &[&[0, 0], &v.frame]))
        .collect();
    let all: Vec<u8> = vectors.iter().flat_map(|v| v.frame.clone()).collect();
    seeds.push(seed("all_one_read", &[&[0, 0], &all]));
    seeds.push(seed("all_bytewise", &[&[0, 1, 1], &all]));
    seeds.push(seed("all_split_0_3_255", &[&[0, 3, 0, 3, 255], &all]));
    seeds.push(seed("all_split_2_7", &[&[0, 2, 2, 7], &all]));
    seeds.push(seed("all_tight_limits", &[&[4, 2, 5, 1], &all]));
    seeds.push(seed("all_max_64", &[&[2, 1, 9], &all]));
    seeds.push(seed("all_pre_hello_then_raised", &[&[9, 1, 17], &all]));
    seeds.push(seed("zero_length", &[&[0, 0], &[0, 0, 0, 0]]));
    seeds.push(seed("too_large", &[&[1, 1, 2], &[0, 1, 0, 1, 0x12]]));
    seeds.push(seed("truncated", &[&[0, 0], &[0, 0, 0, 9, 0x62, 0x02]]));
    seeds
}

/// Config byte, body (see `targets::envelope_roundtrip`).
fn envelope_roundtrip(vectors: &[Vector]) -> Vec<Seed> {
    let mut seeds = Vec::new();
    for v in vectors {
        seeds.push(seed(&v.name, &[&[0], v.body()]));
        seeds.push(seed(format!("{}_tight", v.name), &[&[1], v.body()]));
    }
    seeds
}

/// Config byte, body (see `targets::fused_decode`): each vector under each limits.
fn fused_decode(vectors: &[Vector]) -> Vec<Seed> {
    let mut seeds = Vec::new();
    for v in vectors {
        for (config, suffix) in [(0, ""), (1, "_tight"), (2, "_deep"), (3, "_no_budget")] {
            seeds.push(seed(format!("{}{suffix}", v.name), &[&[config], v.body()]));
        }
    }
    seeds
}

/// Seeds for a target whose input is `arbitrary`-derived: deterministic pseudo-random
/// bytes of growing lengths, which `arbitrary` turns into op sequences of growing
/// lengths (libFuzzer then mutates them into the interesting ones).
fn structured(name: &str, count: usize) -> Vec<Seed> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15 ^ name.len() as u64;
    (0..count)
        .map(|i| {
            let len = 32 << (i % 6);
            let data = (0..len).map(|_| splitmix64(&mut state) as u8).collect();
            Seed {
                name: format!("random_{i:02}_{len}"),
                data,
            }
        })
        .collect()
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn frame(envelope: &iop_proto::Envelope) -> Vec<u8> {
    let mut wire = Vec::new();
    if let Err(err) = iop_proto::encode_frame(envelope, iop_proto::DEFAULT_MAX_FRAME_LEN, &mut wire)
    {
        panic!("seed frame does not encode: {err}");
    }
    wire
}

/// What a well-behaved Edge sends after its hello was accepted: the answer to the
/// CP's first status request (correlation id 1), EDGE_READY, a heartbeat, and an
/// answer plus events for a command the CP does not know.
pub fn edge_session_frames(edge_id: &str) -> Vec<u8> {
    use iop_proto::*;
    let envelopes = [
        Envelope::correlated(
            1,
            EdgeStatusResponse {
                edge_id: edge_id.into(),
                observed_at_unix_ms: 1,
                registry_revision: 1,
                ..Default::default()
            },
        ),
        Envelope::new(EdgeNodeEvent {
            edge_id: edge_id.into(),
            kind: NodeEventKind::EdgeReady as i32,
            sequence: 1,
            ..Default::default()
        }),
        Envelope::new(Heartbeat {
            sequence: 1,
            sent_at_unix_ms: 5,
        }),
        Envelope::new(EdgeCommandResponse {
            command_id: "cmd-4".into(),
            accepted: true,
            ..Default::default()
        }),
        Envelope::new(EdgeCommandEvent {
            command_id: "cmd-4".into(),
            phase: CommandPhase::Accepted as i32,
            sequence: 1,
            ..Default::default()
        }),
    ];
    envelopes.iter().flat_map(frame).collect()
}

/// Mode byte, split header, the Edge's stream (see `targets::cp_session_bytes`).
fn cp_session_bytes(vectors: &[Vector]) -> Vec<Seed> {
    use crate::targets::cp_session_bytes::{EDGE_ID, hello_of, valid_hello};
    let session = edge_session_frames(EDGE_ID);
    let mut seeds = vec![
        seed("hello_then_session", &[&[0, 0], &valid_hello(), &session]),
        seed(
            "hello_then_session_bytewise",
            &[&[0, 1, 1], &valid_hello(), &session],
        ),
        seed("after_hello_session", &[&[1, 0], &session]),
        seed("after_hello_session_time", &[&[3, 1, 9], &session]),
        seed("after_hello_session_app", &[&[5, 2, 17, 30], &session]),
        seed("after_hello_all_modes", &[&[15, 1, 40], &session]),
        seed("silence_until_timeouts", &[&[3, 1, 255], &[0; 200]]),
        seed("hello_twice", &[&[0, 0], &valid_hello(), &valid_hello()]),
        seed("transport_closes", &[&[9, 0], &session]),
        seed("rival_supersedes", &[&[17, 1, 40], &session]),
        seed("rival_supersedes_time_close", &[&[27, 1, 60], &session]),
        seed(
            "rival_of_another_edge",
            &[
                &[16, 0],
                &hello_of("edge-2"),
                &edge_session_frames("edge-2"),
            ],
        ),
    ];
    for v in vectors {
        seeds.push(seed(
            format!("after_hello_{}", v.name),
            &[&[1, 0], &v.frame],
        ));
    }
    seeds.push(seed(
        "first_frame_golden_hello",
        &[&[0, 0], vectors.first().map_or(&[][..], |v| &v.frame)],
    ));
    seeds
}

/// What a CP sends once the hello is accepted: a status request, commands (edge-level,
/// node-level, unknown operation, a repeat), a heartbeat ack and a GoAway.
pub fn cp_session_frames() -> Vec<u8> {
    use iop_proto::*;
    let command = |id: &str, operation: &str, selector: &str| {
        Envelope::new(EdgeCommandRequest {
            command_id: id.into(),
            operation: operation.into(),
            target_selector: selector.into(),
            ..Default::default()
        })
    };
    let envelopes = [
        Envelope::correlated(1, EdgeStatusRequest::default()),
        command("cmd-1", "edge.ping", ""),
        command("cmd-2", "node.drain", "label:zone=a"),
        command("cmd-3", "no.such.op", "*"),
        command("cmd-1", "edge.ping", ""),
        Envelope::correlated(
            2,
            EdgeStatusRequest {
                node_ids: vec!["node-b".into()],
                ..Default::default()
            },
        ),
        Envelope::new(HeartbeatAck { sequence: 1 }),
        Envelope::go_away(GoAwayReason::Draining, "bye", 10_000),
    ];
    envelopes.iter().flat_map(frame).collect()
}

/// Mode byte, split header, the CP's stream (see `targets::edge_session_bytes`).
fn edge_session_bytes(vectors: &[Vector]) -> Vec<Seed> {
    use crate::targets::edge_session_bytes::accepted_hello_response;
    let session = cp_session_frames();
    let mut seeds = vec![
        seed(
            "response_then_session",
            &[&[0, 0], &accepted_hello_response(), &session],
        ),
        seed(
            "response_then_session_bytewise",
            &[&[0, 1, 1], &accepted_hello_response(), &session],
        ),
        seed("after_hello_session", &[&[1, 0], &session]),
        seed("after_hello_session_time", &[&[3, 1, 9], &session]),
        seed("after_hello_session_app", &[&[5, 2, 17, 30], &session]),
        seed("after_hello_all_modes", &[&[15, 1, 40], &session]),
        seed("silence_until_timeouts", &[&[3, 1, 255], &[0; 200]]),
        seed("transport_closes", &[&[9, 0], &session]),
    ];
    for v in vectors {
        seeds.push(seed(
            format!("after_hello_{}", v.name),
            &[&[1, 0], &v.frame],
        ));
        seeds.push(seed(format!("first_{}", v.name), &[&[0, 0], &v.frame]));
    }
    seeds
}

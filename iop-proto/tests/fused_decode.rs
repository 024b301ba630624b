//! The single-pass decoder ([`decode_envelope`], behind `FrameDecoder`) against its
//! reference: the pre-scan [`check_envelope`] followed by prost's `Envelope::decode`.
//!
//! The property is one equality of results, errors included: where the reference
//! accepts, the same envelope; where the pre-scan rejects, the same `LimitError`;
//! where prost rejects, the same `DecodeError` (its message and field path). So the
//! fused decoder never accepts what the reference rejects and never rejects what it
//! accepts. Inputs: well-formed envelopes, the same bytes mutated or truncated, random
//! bytes, and hostile shapes built from a small wire grammar (many empty
//! sub-messages, strings around the caps, singular sub-messages and oneof variants
//! repeated or switched, map entries with odd fields, unknown fields and groups,
//! wrong wire types, lengths that run past their parent), under the protocol's limits and
//! under tiny ones so that every cap is hit.

mod common;

use iop_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn reference(body: &[u8], limits: &DecodeLimits) -> Result<Envelope, FrameError> {
    check_envelope(body, limits).map_err(FrameError::LimitExceeded)?;
    Envelope::decode(body).map_err(FrameError::Undecodable)
}

/// The fused decoder agrees with the reference, called directly and through a
/// `FrameDecoder` (one read).
fn agree(body: &[u8], limits: &DecodeLimits) -> Result<(), TestCaseError> {
    let expected = reference(body, limits);
    let fused = decode_envelope(body, limits);
    prop_assert_eq!(&fused, &expected, "body {}", hex::encode(body));
    if !body.is_empty() && body.len() <= DEFAULT_MAX_FRAME_LEN as usize {
        let mut wire = (body.len() as u32).to_be_bytes().to_vec();
        wire.extend_from_slice(body);
        let mut decoder = FrameDecoder::with_limits(DEFAULT_MAX_FRAME_LEN, *limits);
        let framed = decoder
            .decode(&mut wire.as_slice())
            .map(|e| e.expect("whole frame"));
        prop_assert_eq!(framed, expected);
    }
    Ok(())
}

/// The protocol's limits, or tiny ones (every cap within reach of a small input).
fn limits() -> impl Strategy<Value = DecodeLimits> {
    let tiny = (
        (0..4u32, 0..4u32, 0..4u32, 0..4u32, 0..4u32),
        (0..4u32, 0..4u32, 0..4u32),
        (0..12u32, 0..40u32, 0..4u32, 0..3u32, 0..3000u32),
    )
        .prop_map(
            |(
                (nodes, providers, entries, operations, inflight),
                (node_ids, provider_ids, models),
                (id, text, depth, amplification, floor),
            )| {
                let mut l = DecodeLimits::default();
                l.max_nodes = nodes;
                l.max_providers_per_node = providers;
                l.max_map_entries = entries;
                l.max_operations = operations;
                l.max_inflight_command_ids = inflight;
                l.max_node_ids = node_ids;
                l.max_provider_ids = provider_ids;
                l.max_models = models;
                l.max_id_len = id;
                l.max_text_len = text;
                l.max_unknown_depth = depth;
                l.max_amplification = amplification;
                l.amplification_floor = floor;
                l
            },
        );
    let lifted = Just({
        let mut l = DecodeLimits::default();
        l.max_unknown_depth = u32::MAX;
        l
    });
    prop_oneof![3 => Just(DecodeLimits::default()), 4 => tiny, 1 => lifted]
}

/// A piece of protobuf wire format, valid or not.
#[derive(Debug, Clone)]
enum Wire {
    Varint(u32, u64),
    Fixed32(u32),
    Fixed64(u32),
    /// A length-delimited field with these raw bytes.
    Bytes(u32, Vec<u8>),
    /// A length-delimited field holding these fields.
    Message(u32, Vec<Wire>),
    /// A group (start key, fields, end key of `end`: the same field unless broken).
    Group(u32, Vec<Wire>, u32),
    /// A length-delimited field whose length claims `extra` more bytes than follow
    /// inside it (so it runs on into what comes after its parent).
    Overlong(u32, Vec<Wire>, u8),
    /// A raw key with any wire type (6 and 7 are invalid), no value.
    Key(u32, u8),
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

fn encode(pieces: &[Wire], out: &mut Vec<u8>) {
    for piece in pieces {
        match piece {
            Wire::Varint(f, v) => {
                key(out, *f, 0);
                put_varint(out, *v);
            }
            Wire::Fixed32(f) => {
                key(out, *f, 5);
                out.extend([1, 2, 3, 4]);
            }
            Wire::Fixed64(f) => {
                key(out, *f, 1);
                out.extend([1, 2, 3, 4, 5, 6, 7, 8]);
            }
            Wire::Bytes(f, bytes) => {
                key(out, *f, 2);
                put_varint(out, bytes.len() as u64);
                out.extend_from_slice(bytes);
            }
            Wire::Message(f, inner) => {
                let mut bytes = Vec::new();
                encode(inner, &mut bytes);
                key(out, *f, 2);
                put_varint(out, bytes.len() as u64);
                out.extend_from_slice(&bytes);
            }
            Wire::Group(f, inner, end) => {
                key(out, *f, 3);
                encode(inner, out);
                key(out, *end, 4);
            }
            Wire::Overlong(f, inner, extra) => {
                let mut bytes = Vec::new();
                encode(inner, &mut bytes);
                key(out, *f, 2);
                put_varint(out, bytes.len() as u64 + u64::from(*extra));
                out.extend_from_slice(&bytes);
            }
            Wire::Key(f, wire_type) => key(out, *f, *wire_type),
        }
    }
}

/// Field numbers: mostly the schema's (1..=14), sometimes unknown ones.
fn field() -> impl Strategy<Value = u32> {
    prop_oneof![12 => 1..=14u32, 1 => 15..=20u32, 1 => Just(0u32), 1 => 1..=(1u32 << 29) - 1]
}

/// String contents: short or around the caps, UTF-8 or not.
fn contents() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => vec(b'a'..=b'z', 0..12),
        2 => (0..300usize).prop_map(|n| vec![b'x'; n]),
        1 => vec(any::<u8>(), 0..8),
        1 => Just(vec![0xc3, 0x28]), // invalid UTF-8
    ]
}

fn wire() -> impl Strategy<Value = Vec<Wire>> {
    let leaf = prop_oneof![
        4 => (field(), any::<u64>()).prop_map(|(f, v)| Wire::Varint(f, v % 1000)),
        1 => (field(), any::<u64>()).prop_map(|(f, v)| Wire::Varint(f, v)),
        1 => field().prop_map(Wire::Fixed32),
        1 => field().prop_map(Wire::Fixed64),
        6 => (field(), contents()).prop_map(|(f, b)| Wire::Bytes(f, b)),
        2 => field().prop_map(|f| Wire::Message(f, Vec::new())),
        1 => (field(), 0..8u8).prop_map(|(f, t)| Wire::Key(f, t)),
    ];
    let piece = leaf.prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            8 => (field(), vec(inner.clone(), 0..8)).prop_map(|(f, w)| Wire::Message(f, w)),
            // The same sub-message many times (empty nodes, providers, entries).
            2 => (field(), 1..40usize, vec(inner.clone(), 0..3))
                .prop_map(|(f, n, w)| Wire::Message(f, vec![Wire::Message(2, w); n])),
            2 => (16..=40u32, vec(inner.clone(), 0..4), any::<bool>())
                .prop_map(|(f, w, broken)| Wire::Group(f, w, if broken { f + 1 } else { f })),
            1 => (field(), vec(inner, 0..4), 1..4u8).prop_map(|(f, w, e)| Wire::Overlong(f, w, e)),
        ]
    });
    vec(piece, 0..6)
}

/// Wraps `fields` into an envelope body of every kind, so that the grammar reaches
/// each message's fields.
fn in_body() -> impl Strategy<Value = Vec<u8>> {
    (
        vec((prop_oneof![2..=9u32, 12..=14u32], wire()), 1..4),
        any::<bool>(),
    )
        .prop_map(|(bodies, status_nodes)| {
            let mut out = Vec::new();
            for (field, inner) in bodies {
                let inner = if status_nodes && field == 5 {
                    // Inside nodes (and their providers / config).
                    vec![
                        Wire::Message(2, inner.clone()),
                        Wire::Message(
                            2,
                            vec![Wire::Message(4, inner.clone()), Wire::Message(3, inner)],
                        ),
                    ]
                } else {
                    inner
                };
                encode(&[Wire::Message(field, inner)], &mut out);
            }
            out
        })
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn well_formed_envelopes(envelope in common::envelope(), limits in limits()) {
        let body = envelope.encode_to_vec();
        if limits == DecodeLimits::default() {
            prop_assert_eq!(decode_envelope(&body, &limits), Ok(envelope));
        }
        agree(&body, &limits)?;
    }

    #[test]
    fn mutated_envelopes(
        envelope in common::envelope(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..5),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        limits in limits(),
    ) {
        let mut body = envelope.encode_to_vec();
        for (at, byte, how) in edits {
            let at = at.index(body.len() + 1);
            match how {
                0 if at < body.len() => body[at] = byte,
                1 => body.insert(at, byte),
                _ if at < body.len() => { body.remove(at); }
                _ => body.push(byte),
            }
        }
        if truncate && !body.is_empty() {
            body.truncate(cut.index(body.len()));
        }
        agree(&body, &limits)?;
    }

    #[test]
    fn random_bytes(body in vec(any::<u8>(), 0..64), limits in limits()) {
        agree(&body, &limits)?;
    }

}

/// The verdict of the reference, by kind.
fn verdict(bytes: &[u8], limits: &DecodeLimits) -> &'static str {
    match reference(bytes, limits) {
        Ok(_) => "accepted",
        Err(FrameError::Undecodable(_)) => "malformed",
        Err(FrameError::LimitExceeded(LimitError::TooManyElements { .. })) => "too many",
        Err(FrameError::LimitExceeded(LimitError::StringTooLong { .. })) => "too long",
        Err(FrameError::LimitExceeded(LimitError::TooDeep { .. })) => "too deep",
        Err(FrameError::LimitExceeded(LimitError::DecodedTooLarge { .. })) => "too large",
        Err(_) => "other",
    }
}

/// Well-formed but hostile: several envelopes concatenated (protobuf merges them:
/// oneof variants switch or merge, singular sub-messages and maps add up), with
/// unknown fields and groups between them and runs of empty nodes.
fn merged() -> impl Strategy<Value = Vec<u8>> {
    let unknown = prop_oneof![
        (16..=40u32, any::<u64>()).prop_map(|(f, v)| Wire::Varint(f, v)),
        (16..=40u32, contents()).prop_map(|(f, b)| Wire::Bytes(f, b)),
        (16..=40u32, 0..5usize).prop_map(|(f, depth)| {
            let mut group = Wire::Group(f, Vec::new(), f);
            for _ in 0..depth {
                group = Wire::Group(f, vec![Wire::Varint(1, 1), group], f);
            }
            group
        }),
    ];
    let part = prop_oneof![
        4 => common::envelope().prop_map(|e| e.encode_to_vec()),
        1 => vec(unknown, 1..3).prop_map(|w| {
            let mut out = Vec::new();
            encode(&w, &mut out);
            out
        }),
        1 => (0..400usize).prop_map(|n| {
            let mut out = Vec::new();
            encode(&[Wire::Message(5, vec![Wire::Message(2, Vec::new()); n])], &mut out);
            out
        }),
    ];
    vec(part, 1..5).prop_map(|parts| parts.concat())
}

/// Hostile shapes, from the wire grammar (mostly malformed) and from merged
/// envelopes (mostly well-formed); also checks that the inputs reach every verdict
/// (acceptance, each kind of limit error, malformed), so that the equality is not
/// only ever tested on one of them.
#[test]
fn hostile_shapes() {
    use proptest::test_runner::TestRunner;
    use std::cell::RefCell;
    let seen = RefCell::new(std::collections::BTreeMap::<&str, usize>::new());
    let tally = |bytes: &[u8], limits: &DecodeLimits| -> Result<(), TestCaseError> {
        agree(bytes, limits)?;
        *seen.borrow_mut().entry(verdict(bytes, limits)).or_default() += 1;
        Ok(())
    };
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 3072,
        ..config()
    });
    runner
        .run(
            &(wire(), in_body(), wire(), limits()),
            |(top, body, tail, limits)| {
                let mut bytes = Vec::new();
                encode(&top, &mut bytes);
                bytes.extend_from_slice(&body);
                encode(&tail, &mut bytes);
                tally(&bytes, &limits)
            },
        )
        .unwrap();
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 2048,
        ..config()
    });
    runner
        .run(&(merged(), limits()), |(bytes, limits)| {
            tally(&bytes, &limits)
        })
        .unwrap();
    let seen = seen.into_inner();
    eprintln!("verdicts: {seen:?}");
    for verdict in [
        "accepted",
        "malformed",
        "too many",
        "too long",
        "too deep",
        "too large",
    ] {
        assert!(
            seen.get(verdict).copied().unwrap_or(0) >= 20,
            "{verdict} reached too rarely: {seen:?}"
        );
    }
}

/// Unknown groups nested around prost's recursion limit (100 levels, less the
/// message's own depth), at every message level, with the depth cap lifted, at
/// it, and at the protocol's 16.
#[test]
fn deep_groups_at_every_level() {
    let nest = |depth: usize, end: bool| {
        let mut inner = Vec::new();
        // Field 16 group starts (a two-byte key: 1..=15 are all known somewhere).
        inner.extend([0x83_u8, 0x01].repeat(depth));
        if end {
            inner.extend([0x84_u8, 0x01].repeat(depth)); // and their ends
        }
        inner
    };
    let wrap = |field: u8, inner: &[u8]| {
        let mut out = vec![field];
        put_varint(&mut out, inner.len() as u64);
        out.extend_from_slice(inner);
        out
    };
    for depth in [1, 15, 16, 17, 94, 95, 96, 97, 98, 99, 100, 101, 120] {
        for end in [true, false] {
            let groups = nest(depth, end);
            let levels = [
                groups.clone(),
                wrap(0x62, &groups),                           // heartbeat
                wrap(0x2a, &wrap(0x12, &groups)),              // node
                wrap(0x2a, &wrap(0x12, &wrap(0x22, &groups))), // provider
                wrap(0x2a, &wrap(0x12, &wrap(0x42, &groups))), // label entry
                wrap(0x12, &wrap(0x2a, &groups)),              // metadata entry
            ];
            for body in levels {
                for max in [16, depth as u32, depth as u32 - 1, u32::MAX] {
                    let mut limits = DecodeLimits::default();
                    limits.max_unknown_depth = max;
                    agree(&body, &limits).unwrap();
                }
            }
        }
    }
}

/// A singular sub-message, map and oneof variant sent again add up; another variant
/// starts afresh; a duplicate map key keeps the last value and still counts.
#[test]
fn merges_add_up_across_occurrences() {
    let entry = |k: &[u8], v: &[u8]| {
        let mut e = Vec::new();
        encode(
            &[Wire::Bytes(1, k.to_vec()), Wire::Bytes(2, v.to_vec())],
            &mut e,
        );
        e
    };
    let hello = |keys: &[&[u8]]| {
        keys.iter()
            .map(|k| Wire::Bytes(5, entry(k, b"v")))
            .chain([Wire::Bytes(4, b"op".to_vec())])
            .collect::<Vec<_>>()
    };
    for (name, pieces) in [
        (
            "hello twice",
            vec![
                Wire::Message(2, hello(&[b"a", b"b"])),
                Wire::Message(2, hello(&[b"a", b"c"])),
            ],
        ),
        (
            "hello, go away, hello",
            vec![
                Wire::Message(2, hello(&[b"a", b"b"])),
                Wire::Message(14, vec![Wire::Bytes(2, b"bye".to_vec())]),
                Wire::Message(2, hello(&[b"c"])),
            ],
        ),
        (
            "config twice in a node",
            vec![Wire::Message(
                5,
                vec![Wire::Message(
                    2,
                    vec![
                        Wire::Message(
                            3,
                            vec![
                                Wire::Bytes(3, b"m1".to_vec()),
                                Wire::Bytes(2, b"p".to_vec()),
                            ],
                        ),
                        Wire::Varint(2, 1),
                        Wire::Message(
                            3,
                            vec![
                                Wire::Bytes(3, b"m2".to_vec()),
                                Wire::Bytes(1, b"rev".to_vec()),
                            ],
                        ),
                    ],
                )],
            )],
        ),
    ] {
        let mut body = Vec::new();
        encode(&pieces, &mut body);
        for entries in 0..5 {
            for models in 0..3 {
                let mut limits = DecodeLimits::default();
                limits.max_map_entries = entries;
                limits.max_operations = entries;
                limits.max_models = models;
                agree(&body, &limits).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
}

/// Multi-byte varints in every scalar kind the schema has (`uint64`, `uint32`, an
/// enum's `int32`, `bool`) read and convert as prost's merges do: truncated to 32
/// bits, negative through ten bytes, any non-zero value true; non-canonical
/// (zero-padded) varints read as their value, and an eleven-byte varint is prost's
/// error.
#[test]
fn multi_byte_varints_convert_as_prost() {
    let values = [
        0x7f,
        0x80,
        300,
        (1 << 31) + 7,
        (1 << 32) + 5,
        1 << 40,
        (-1i64) as u64,
        (-2i64) as u64,
        u64::MAX - 1,
    ];
    for value in values {
        let bodies = [
            // Envelope.correlation_id (uint64) on a heartbeat ack.
            vec![Wire::Varint(1, value), Wire::Message(13, Vec::new())],
            // EdgeHelloRequest.protocol_version (uint32).
            vec![Wire::Message(2, vec![Wire::Varint(2, value)])],
            // EdgeStatusResponse: observed_at (uint64), truncated (bool); a node's
            // connected (bool), state (enum) and generation (uint64).
            vec![Wire::Message(
                5,
                vec![
                    Wire::Varint(3, value),
                    Wire::Varint(5, value),
                    Wire::Message(
                        2,
                        vec![
                            Wire::Bytes(1, b"n1".to_vec()),
                            Wire::Varint(2, value),
                            Wire::Varint(5, value),
                            Wire::Varint(6, value),
                        ],
                    ),
                ],
            )],
        ];
        for pieces in bodies {
            let mut body = Vec::new();
            encode(&pieces, &mut body);
            assert!(
                reference(&body, &DecodeLimits::default()).is_ok(),
                "the reference accepts {value:#x}: {}",
                hex::encode(&body)
            );
            agree(&body, &DecodeLimits::default()).expect("same envelope as prost");
        }
    }
    // Zero-padded varints (one to ten bytes for the value 5) and an eleven-byte one.
    for len in 1..=11 {
        let varint = if len == 1 {
            vec![0x05]
        } else {
            let mut padded = vec![0x85];
            padded.resize(len - 1, 0x80);
            padded.push(0x00);
            padded
        };
        let hello = [&[0x10][..], &varint].concat();
        // correlation_id (then an empty heartbeat ack), and the hello's protocol_version.
        for body in [
            [&[0x08][..], &varint, &[0x6a, 0x00]].concat(),
            [&[0x12, hello.len() as u8][..], &hello].concat(),
        ] {
            let reference = reference(&body, &DecodeLimits::default());
            assert_eq!(reference.is_ok(), len <= 10, "{len} bytes: {reference:?}");
            agree(&body, &DecodeLimits::default()).expect("same result as prost");
        }
    }
}

//! Measures what decoding allocates (PROTOCOL.md §7: decoded size ≤ 8 × wire size), with a
//! counting global allocator.
//!
//! The counter is process-wide, so this file holds a single test that runs every case
//! in turn: no other test thread allocates while it measures.

mod common;
mod counting;

use counting::allocated;
use iop_proto::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// An unknown length-delimited field's key (field 16, two bytes), used as padding.
const PAD_KEY: [u8; 2] = [0x82, 0x01];

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_len(out: &mut Vec<u8>, key: u8, bytes: &[u8]) {
    out.push(key);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A status response body of `nodes` copies of `node` (raw node bytes), padded with an
/// unknown field so that the frame body is exactly `DEFAULT_MAX_FRAME_LEN` bytes.
fn max_size_status(node: &[u8], nodes: usize) -> Vec<u8> {
    let fit = (DEFAULT_MAX_FRAME_LEN as usize - 64) / (node.len() + 4);
    let mut status = Vec::new();
    for _ in 0..nodes.min(fit) {
        put_len(&mut status, 0x12, node);
    }
    let mut body = Vec::new();
    put_len(&mut body, 0x2a, &status);
    pad_to_max(body)
}

fn pad_to_max(mut body: Vec<u8>) -> Vec<u8> {
    let max = DEFAULT_MAX_FRAME_LEN as usize;
    // The pad's key (2 bytes) and length prefix (`k` bytes) count too.
    for k in 1..=4 {
        let Some(pad) = max.checked_sub(body.len() + PAD_KEY.len() + k) else {
            break;
        };
        let mut prefix = Vec::new();
        put_varint(&mut prefix, pad as u64);
        if prefix.len() == k {
            body.extend_from_slice(&PAD_KEY);
            body.extend_from_slice(&prefix);
            body.resize(max, 0);
            return body;
        }
    }
    assert_eq!(body.len(), max, "cannot pad to the max frame size");
    body
}

fn decode_frame(
    body: &[u8],
    limits: DecodeLimits,
) -> (Result<Option<Envelope>, FrameError>, usize) {
    let mut wire = (body.len() as u32).to_be_bytes().to_vec();
    wire.extend_from_slice(body);
    // A fresh decoder each run: its errors are sticky.
    allocated(|| {
        FrameDecoder::with_limits(DEFAULT_MAX_FRAME_LEN, limits).decode(&mut wire.as_slice())
    })
}

fn hostile_frames() -> Vec<(&'static str, Vec<u8>)> {
    let empty_provider = [0x22, 0x00];
    let node_with = |providers: usize| empty_provider.repeat(providers);
    let mut model_provider = Vec::new();
    for _ in 0..256 {
        put_len(&mut model_provider, 0x5a, b""); // 256 empty models
    }
    let mut node_of_model_providers = Vec::new();
    for _ in 0..256 {
        put_len(&mut node_of_model_providers, 0x22, &model_provider);
    }
    let mut node_of_labels = Vec::new();
    for i in 0..64u8 {
        put_len(&mut node_of_labels, 0x42, &[0x0a, 0x01, i]); // 64 one-byte keys
    }
    let mut hello = Vec::new();
    for _ in 0..256 {
        put_len(&mut hello, 0x22, b"");
    }
    for _ in 0..4352 {
        put_len(&mut hello, 0x3a, b"x");
    }
    for i in 0..64u8 {
        put_len(&mut hello, 0x2a, &[0x0a, 0x01, i, 0x12, 0x00]);
    }
    let mut hello_body = Vec::new();
    put_len(&mut hello_body, 0x12, &hello);
    vec![
        ("empty nodes", {
            let mut b = vec![0x2a, 0xf8, 0xff, 0xff, 0x01];
            b.extend([0x12, 0x00].repeat((DEFAULT_MAX_FRAME_LEN as usize - 5) / 2));
            b
        }),
        ("10 000 empty nodes", max_size_status(b"", 10_000)),
        (
            "nodes of 1 empty provider",
            max_size_status(&node_with(1), 10_000),
        ),
        (
            "nodes of 5 empty providers",
            max_size_status(&node_with(5), 10_000),
        ),
        (
            "nodes of 33 empty providers",
            max_size_status(&node_with(33), 10_000),
        ),
        (
            "nodes of 256 empty providers",
            max_size_status(&node_with(256), 10_000),
        ),
        (
            "providers of 256 empty models",
            max_size_status(&node_of_model_providers, 10_000),
        ),
        (
            "nodes of 64 labels",
            max_size_status(&node_of_labels, 10_000),
        ),
        ("hello at every cap", pad_to_max(hello_body)),
        // A body that fills the budget and only then turns out malformed (a
        // truncated field at the very end): decoded once, not once more to find
        // the error.
        ("malformed after nodes of 33 empty providers", {
            let mut body = max_size_status(&node_with(33), 10_000);
            let last = body.len() - 1;
            body.truncate(last);
            body
        }),
        (
            "unknown groups past the depth cap after 10 000 empty nodes",
            {
                let mut status = [0x12, 0x00].repeat(10_000);
                status.extend([0x7b; 20]); // field 15 group starts, 20 deep, never closed
                let mut body = Vec::new();
                put_len(&mut body, 0x2a, &status);
                pad_to_max(body)
            },
        ),
    ]
}

#[test]
fn decoding_allocates_within_budget() {
    // 1. Max-size hostile frames, within the caps or not: accepted within 8 × wire
    //    size, or rejected. The decoder checks each cap as it decodes, before the
    //    allocation the cap guards, so a rejected frame also stays within the budget
    //    (what it built is dropped), and a malformed one is not decoded twice.
    for (name, body) in hostile_frames() {
        let wire_len = body.len();
        let budget = 8 * wire_len;
        for limits in [DecodeLimits::default(), {
            let mut lifted = DecodeLimits::default();
            lifted.max_nodes = u32::MAX;
            lifted.max_providers_per_node = u32::MAX;
            lifted.max_models = u32::MAX;
            lifted
        }] {
            let (result, bytes) = decode_frame(&body, limits);
            match &result {
                Ok(Some(_)) | Err(FrameError::LimitExceeded(_)) => {}
                Err(FrameError::Undecodable(_)) if name.starts_with("malformed") => {}
                other => panic!("{name}: unexpected {other:?}"),
            }
            // The constant: the `DecodeError` of a malformed frame (its box and the
            // path of names), which the budget does not count.
            assert!(
                bytes <= budget + 512,
                "{name}: {bytes} bytes allocated for {wire_len} wire bytes"
            );
            drop(result);
        }
    }

    // 2. The pre-scan's estimate bounds what prost really allocates, for any
    //    envelope (this is what makes the budget hold).
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&common::envelope(), |envelope| {
            let body = envelope.encode_to_vec();
            let estimate = check_envelope(&body, &DecodeLimits::default()).unwrap();
            let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
            assert_eq!(decoded.unwrap(), envelope);
            assert!(
                bytes <= estimate,
                "allocated {bytes} > estimate {estimate} for {envelope:?}"
            );
            Ok(())
        })
        .unwrap();

    // 2a. The same for corrupted envelopes, whether prost then accepts them or not:
    //     where the pre-scan gives up on malformed bytes, prost fails no later.
    let corrupted = (
        common::envelope(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    );
    runner
        .run(&corrupted, |(envelope, flips)| {
            let mut body = envelope.encode_to_vec();
            if body.is_empty() {
                return Ok(());
            }
            for (at, byte) in flips {
                let at = at.index(body.len());
                body[at] = byte;
            }
            if let Ok(estimate) = check_envelope(&body, &DecodeLimits::default()) {
                let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
                drop(decoded);
                assert!(bytes <= estimate, "allocated {bytes} > estimate {estimate}");
            }
            Ok(())
        })
        .unwrap();

    // 2b. Non-canonical encodings prost accepts: repeated singular strings that grow
    //     (reallocation), duplicate map keys, a body sent twice (merged) or replaced.
    let mut growing = Vec::new();
    for len in [1usize, 9, 17, 40, 100, 1000, 4096] {
        put_len(&mut growing, 0x1a, &vec![b'a'; len]); // software_version again
        put_len(&mut growing, 0x32, &vec![1; len]); // credential again and again
        put_len(&mut growing, 0x2a, &[0x0a, 0x01, b'k', 0x12, 0x01, b'v']); // same key
    }
    let mut twice = Vec::new();
    put_len(&mut twice, 0x12, &growing);
    put_len(&mut twice, 0x12, &growing);
    let mut replaced = twice.clone();
    put_len(&mut replaced, 0x72, &[0x12, 0x03, b'b', b'y', b'e']); // go_away
    put_len(&mut replaced, 0x12, &growing);
    for body in [twice, replaced] {
        let estimate = check_envelope(&body, &DecodeLimits::default()).unwrap();
        let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
        assert!(decoded.is_ok());
        assert!(bytes <= estimate, "allocated {bytes} > estimate {estimate}");
    }

    // 2c. Maps of every size up to the cap (BTreeMap nodes split as they fill).
    for entries in 1..=64usize {
        let request = Envelope::new(EdgeCommandRequest {
            command_id: "c".into(),
            metadata: (0..entries)
                .map(|i| (format!("key-{i:03}"), "v".repeat(i)))
                .collect(),
            ..Default::default()
        });
        let body = request.encode_to_vec();
        let estimate = check_envelope(&body, &DecodeLimits::default()).unwrap();
        let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
        assert_eq!(decoded.unwrap(), request);
        assert!(bytes <= estimate, "{entries} entries: {bytes} > {estimate}");

        // The same entries in descending key order (a peer need not sort them).
        let mut inner = Vec::new();
        for i in (0..entries).rev() {
            let mut entry = Vec::new();
            put_len(&mut entry, 0x0a, format!("key-{i:03}").as_bytes());
            put_len(&mut entry, 0x12, "v".repeat(i).as_bytes());
            put_len(&mut inner, 0x22, &entry);
        }
        let mut body = Vec::new();
        put_len(&mut body, 0x32, &inner);
        let estimate = check_envelope(&body, &DecodeLimits::default()).unwrap();
        let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
        assert_eq!(decoded.unwrap().kind(), BodyKind::CommandRequest);
        assert!(
            bytes <= estimate,
            "{entries} entries, descending: {bytes} > {estimate}"
        );
    }

    // 3. The estimate is not wildly loose either: a realistic status response.
    let node = |i: usize| EdgeNodeSnapshot {
        node_id: format!("node-{i}"),
        state: NodeState::Ready as i32,
        connected: true,
        generation: 3,
        provider_snapshots: vec![ProviderSnapshot {
            provider_id: "gpu0".into(),
            models: vec!["llama-3.1-8b".into()],
            capacity: 4,
            ..Default::default()
        }],
        labels: [("zone".to_string(), "a".to_string())].into(),
        ..Default::default()
    };
    let status = Envelope::new(EdgeStatusResponse {
        edge_id: "edge-1".into(),
        nodes: (0..1000).map(node).collect(),
        ..Default::default()
    });
    let body = status.encode_to_vec();
    let estimate = check_envelope(&body, &DecodeLimits::default()).unwrap();
    let (decoded, bytes) = allocated(|| Envelope::decode(body.as_slice()));
    assert_eq!(decoded.unwrap(), status);
    assert!(
        bytes <= estimate && estimate <= 2 * bytes,
        "{bytes} vs {estimate}"
    );
}

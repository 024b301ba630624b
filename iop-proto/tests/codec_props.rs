//! Property tests of the frame codec (PROTOCOL.md §2): round trips, any split of a stream,
//! arbitrary bytes, and the specific error of each kind of bad input.

mod common;

use common::{decode_chunked, envelope, stream};
use iop_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;

/// Frames `body` (raw bytes) with its length prefix.
fn raw_frame(body: &[u8]) -> Vec<u8> {
    let mut wire = (body.len() as u32).to_be_bytes().to_vec();
    wire.extend_from_slice(body);
    wire
}

/// A status response body carrying `n` empty nodes.
fn empty_nodes(n: usize) -> Vec<u8> {
    let nodes: Vec<u8> = [0x12, 0x00].repeat(n);
    let mut body = vec![0x2a];
    let mut len = nodes.len() as u64;
    while len >= 0x80 {
        body.push((len as u8) | 0x80);
        len >>= 7;
    }
    body.push(len as u8);
    body.extend_from_slice(&nodes);
    body
}

/// Feeds all of `wire` to `decoder`, collecting frames until the first error.
fn feed(decoder: &mut FrameDecoder, wire: &[u8]) -> Result<Vec<Envelope>, FrameError> {
    let mut input = wire;
    let mut frames = Vec::new();
    while let Some(envelope) = decoder.decode(&mut input)? {
        frames.push(envelope);
    }
    Ok(frames)
}

proptest! {
    #[test]
    fn every_envelope_round_trips(envelope in envelope()) {
        let wire = stream(std::slice::from_ref(&envelope));
        prop_assert_eq!(wire.len(), LENGTH_PREFIX_LEN + envelope.encoded_len());
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        let frames = feed(&mut decoder, &wire).unwrap();
        prop_assert_eq!(frames, vec![envelope]);
        prop_assert!(decoder.is_at_boundary());
        decoder.finish().unwrap();
    }

    #[test]
    fn any_split_yields_the_same_frames(
        envelopes in vec(envelope(), 1..6),
        sizes in vec(1usize..64, 1..16),
    ) {
        let wire = stream(&envelopes);
        prop_assert_eq!(decode_chunked(&wire, &sizes).unwrap(), envelopes.clone());
        prop_assert_eq!(decode_chunked(&wire, &[1]).unwrap(), envelopes.clone());
        prop_assert_eq!(decode_chunked(&wire, &[wire.len()]).unwrap(), envelopes);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_stay_bounded(
        bytes in vec(any::<u8>(), 0..512),
        max in prop_oneof![Just(DEFAULT_MAX_FRAME_LEN), 1u32..300],
        sizes in vec(1usize..40, 1..8),
    ) {
        let mut decoder = FrameDecoder::new(max);
        let bound = max as usize + LENGTH_PREFIX_LEN;
        let mut rest = bytes.as_slice();
        let mut i = 0;
        let mut failed = None;
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(sizes[i % sizes.len()].min(rest.len()));
            i += 1;
            rest = tail;
            if let Err(err) = feed(&mut decoder, chunk) {
                failed = Some(err);
                break;
            }
            prop_assert!(decoder.buffered() <= bound);
            prop_assert!(decoder.capacity() <= bound);
        }
        if let Some(err) = failed {
            // Sticky: the same error again, with no new work.
            prop_assert_eq!(decoder.decode(&mut &b"\0\0\0\x01\x08"[..]), Err(err.clone()));
            prop_assert_eq!(decoder.finish(), Err(err));
            prop_assert_eq!(decoder.capacity(), 0);
        }
    }

    #[test]
    fn corrupted_frames_never_panic(
        envelope in envelope(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut body = envelope.encode_to_vec();
        prop_assume!(!body.is_empty());
        for (at, byte) in flips {
            let at = at.index(body.len());
            body[at] = byte;
        }
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        match feed(&mut decoder, &raw_frame(&body)) {
            Ok(frames) => prop_assert_eq!(frames.len(), 1),
            Err(FrameError::Undecodable(_) | FrameError::LimitExceeded(_)) => {}
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }

    #[test]
    fn zero_length_is_rejected(tail in vec(any::<u8>(), 0..16)) {
        let mut wire = vec![0, 0, 0, 0];
        wire.extend_from_slice(&tail);
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        prop_assert_eq!(feed(&mut decoder, &wire), Err(FrameError::ZeroLength));
    }

    #[test]
    fn too_large_is_rejected_from_the_prefix_alone(
        max in 1u32..=DEFAULT_MAX_FRAME_LEN,
        excess in 1u32..1000,
    ) {
        let len = max.saturating_add(excess);
        let mut decoder = FrameDecoder::new(max);
        let mut input = &len.to_be_bytes()[..];
        prop_assert_eq!(decoder.decode(&mut input), Err(FrameError::TooLarge { len, max }));
        prop_assert!(input.is_empty());
        prop_assert_eq!(decoder.capacity(), 0);
    }

    #[test]
    fn undecodable_body_is_rejected(tail in vec(any::<u8>(), 0..16)) {
        // Field 1 with wire type 7, which does not exist.
        let mut body = vec![0x0f];
        body.extend_from_slice(&tail);
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        let result = feed(&mut decoder, &raw_frame(&body));
        prop_assert!(matches!(result, Err(FrameError::Undecodable(_))), "{:?}", result);
    }

    #[test]
    fn truncated_stream_is_reported_at_finish(
        envelopes in vec(envelope(), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let wire = stream(&envelopes);
        let cut = cut.index(wire.len());
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        let frames = feed(&mut decoder, &wire[..cut]).unwrap();
        // Where the cut falls: after `frames.len()` whole frames, `partial` bytes in.
        let whole: usize = envelopes[..frames.len()]
            .iter()
            .map(|e| LENGTH_PREFIX_LEN + e.encoded_len())
            .sum();
        let partial = cut - whole;
        if partial == 0 {
            prop_assert_eq!(decoder.finish(), Ok(()));
        } else {
            let frame_len = LENGTH_PREFIX_LEN + envelopes[frames.len()].encoded_len();
            let expected = if partial < LENGTH_PREFIX_LEN { LENGTH_PREFIX_LEN } else { frame_len };
            prop_assert_eq!(
                decoder.finish(),
                Err(FrameError::Truncated { buffered: partial, expected })
            );
        }
    }

    #[test]
    fn node_cap_is_exact(cap in 0u32..64) {
        let mut limits = DecodeLimits::default();
        limits.max_nodes = cap;
        let at_cap = raw_frame(&empty_nodes(cap as usize));
        let mut decoder = FrameDecoder::with_limits(DEFAULT_MAX_FRAME_LEN, limits);
        let frames = feed(&mut decoder, &at_cap).unwrap();
        prop_assert_eq!(frames.len(), 1);
        let over = raw_frame(&empty_nodes(cap as usize + 1));
        prop_assert_eq!(
            feed(&mut decoder, &over),
            Err(FrameError::LimitExceeded(LimitError::TooManyElements {
                field: "iop.EdgeStatusResponse.nodes",
                limit: cap,
            }))
        );
    }
}

#[test]
fn id_length_cap_is_128_bytes() {
    let hello = |len: usize| {
        Envelope::new(EdgeHelloRequest {
            edge_id: "e".repeat(len),
            protocol_version: 1,
            ..Default::default()
        })
    };
    let mut decoder = FrameDecoder::new(PRE_HELLO_MAX_FRAME_LEN);
    assert_eq!(
        feed(&mut decoder, &stream(&[hello(128)])).unwrap(),
        vec![hello(128)]
    );
    assert_eq!(
        feed(&mut decoder, &stream(&[hello(129)])),
        Err(FrameError::LimitExceeded(LimitError::StringTooLong {
            field: "iop.EdgeHelloRequest.edge_id",
            len: 129,
            limit: 128,
        }))
    );
}

#[test]
fn map_and_text_caps_apply() {
    let event = |entries: usize, value_len: usize| {
        Envelope::new(EdgeCommandEvent {
            command_id: "c".into(),
            detail: (0..entries)
                .map(|i| (format!("k{i}"), "v".repeat(value_len)))
                .collect(),
            ..Default::default()
        })
    };
    let decode = |e: &Envelope| {
        feed(
            &mut FrameDecoder::new(DEFAULT_MAX_FRAME_LEN),
            &stream(std::slice::from_ref(e)),
        )
    };
    assert_eq!(decode(&event(64, 4096)).unwrap(), vec![event(64, 4096)]);
    assert_eq!(
        decode(&event(65, 1)),
        Err(FrameError::LimitExceeded(LimitError::TooManyElements {
            field: "iop.EdgeCommandEvent.detail",
            limit: 64,
        }))
    );
    assert_eq!(
        decode(&event(1, 4097)),
        Err(FrameError::LimitExceeded(LimitError::StringTooLong {
            field: "iop.EdgeCommandEvent.detail.value",
            len: 4097,
            limit: 4096,
        }))
    );
}

#[test]
fn merged_sub_messages_share_their_caps() {
    // Two `hello_request` bodies in one envelope are merged by prost, so their
    // operations add up: 2 × 200 > 256.
    let half = EdgeHelloRequest {
        operations: vec!["op".into(); 200],
        ..Default::default()
    };
    let mut body = Vec::new();
    Envelope::new(half.clone()).encode(&mut body).unwrap();
    Envelope::new(half).encode(&mut body).unwrap();
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    assert_eq!(
        feed(&mut decoder, &raw_frame(&body)),
        Err(FrameError::LimitExceeded(LimitError::TooManyElements {
            field: "iop.EdgeHelloRequest.operations",
            limit: 256,
        }))
    );
}

/// `depth` nested unknown groups (field 16) inside an envelope.
fn nested_groups(depth: usize) -> Vec<u8> {
    let mut body = [0x83, 0x01].repeat(depth); // field 16, start group
    body.extend([0x84, 0x01].repeat(depth)); // field 16, end group
    body.extend_from_slice(&[0x62, 0x00]); // an empty heartbeat
    body
}

#[test]
fn unknown_group_depth_is_capped() {
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    let frames = feed(&mut decoder, &raw_frame(&nested_groups(16))).unwrap();
    assert_eq!(frames[0].kind(), BodyKind::Heartbeat);
    for depth in [17, 1000, 100_000] {
        let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
        assert_eq!(
            feed(&mut decoder, &raw_frame(&nested_groups(depth))),
            Err(FrameError::LimitExceeded(LimitError::TooDeep { limit: 16 }))
        );
    }
}

#[test]
fn unknown_fields_are_skipped() {
    let mut body = vec![0xf8, 0x07, 0x01]; // field 127, varint 1
    body.extend_from_slice(&[0x82, 0x01, 0x03, 1, 2, 3]); // field 16, 3 bytes
    body.extend_from_slice(&[0x6a, 0x02, 0x08, 0x07]); // heartbeat_ack { sequence: 7 }
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    assert_eq!(
        feed(&mut decoder, &raw_frame(&body)).unwrap(),
        vec![Envelope::new(HeartbeatAck { sequence: 7 })]
    );
}

#[test]
fn hostile_max_size_frame_of_empty_nodes_is_rejected() {
    // 4 MiB of empty nodes: ~2 million of them, far over the cap.
    let body = empty_nodes((DEFAULT_MAX_FRAME_LEN as usize - 8) / 2);
    assert!(body.len() <= DEFAULT_MAX_FRAME_LEN as usize);
    let mut decoder = FrameDecoder::new(DEFAULT_MAX_FRAME_LEN);
    assert_eq!(
        feed(&mut decoder, &raw_frame(&body)),
        Err(FrameError::LimitExceeded(LimitError::TooManyElements {
            field: "iop.EdgeStatusResponse.nodes",
            limit: 10_000,
        }))
    );
    // Caps lifted: the decoded-size budget still refuses it.
    let mut limits = DecodeLimits::default();
    limits.max_nodes = u32::MAX;
    let mut decoder = FrameDecoder::with_limits(DEFAULT_MAX_FRAME_LEN, limits);
    let result = feed(&mut decoder, &raw_frame(&body));
    assert!(
        matches!(
            result,
            Err(FrameError::LimitExceeded(LimitError::DecodedTooLarge { budget, .. }))
                if budget == 8 * body.len()
        ),
        "{result:?}"
    );
}

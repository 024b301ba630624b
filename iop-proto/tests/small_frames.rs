//! `encode_frame` writes heartbeats, heartbeat acks and status requests with its own
//! small encoder: the bytes, the errors and what is left in a bounded buffer must be
//! exactly those of the general path (4-byte prefix + prost).

use iop_proto::{
    EdgeStatusRequest, EncodeError, Envelope, Heartbeat, HeartbeatAck, LENGTH_PREFIX_LEN, Message,
    encode_frame, encode_status_request_frame,
};
use proptest::prelude::*;

/// The general path: prost's encoding behind the length prefix, with
/// `encode_frame`'s checks.
fn reference(envelope: &Envelope, max: u32, room: usize) -> Result<Vec<u8>, EncodeError> {
    let body = envelope.encode_to_vec();
    let len = body.len();
    if u32::try_from(len).map_or(true, |l| l > max) {
        return Err(EncodeError::TooLarge { len, max });
    }
    let needed = LENGTH_PREFIX_LEN + len;
    if room < needed {
        return Err(EncodeError::BufferFull {
            needed,
            remaining: room,
        });
    }
    let mut out = (len as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

fn uint() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        0u64..300,
        any::<u64>(),
        (0u32..64).prop_map(|s| 1u64 << s)
    ]
}

fn small_envelope() -> impl Strategy<Value = Envelope> {
    let body = prop_oneof![
        uint().prop_map(|sequence| Envelope::new(HeartbeatAck { sequence })),
        (uint(), uint()).prop_map(|(sequence, sent_at_unix_ms)| Envelope::new(Heartbeat {
            sequence,
            sent_at_unix_ms
        })),
        (
            prop::collection::vec("[a-z0-9.-]{0,200}", 0..12),
            "[a-z0-9.-]{0,200}"
        )
            .prop_map(
                |(node_ids, start_after_node_id)| Envelope::new(EdgeStatusRequest {
                    node_ids,
                    start_after_node_id
                })
            ),
    ];
    (body, uint()).prop_map(|(mut envelope, correlation_id)| {
        envelope.correlation_id = correlation_id;
        envelope
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn same_bytes_as_prost_in_a_vec(envelope in small_envelope()) {
        let mut out = vec![0xAB];
        let n = encode_frame(&envelope, u32::MAX, &mut out).unwrap();
        let want = reference(&envelope, u32::MAX, usize::MAX).unwrap();
        prop_assert_eq!(n, want.len());
        prop_assert_eq!(&out[1..], &want[..]);
    }

    #[test]
    fn same_errors_and_bytes_under_limits(
        envelope in small_envelope(),
        max_cut in 0usize..8,
        room_cut in 0usize..8,
    ) {
        let body_len = envelope.encoded_len();
        let max = body_len.saturating_sub(max_cut) as u32;
        let room = (LENGTH_PREFIX_LEN + body_len).saturating_sub(room_cut);
        let mut buf = vec![0u8; room];
        let mut dst = buf.as_mut_slice();
        let got = encode_frame(&envelope, max, &mut dst);
        let left = dst.len();
        match reference(&envelope, max, room) {
            Ok(want) => {
                prop_assert_eq!(got, Ok(want.len()));
                prop_assert_eq!(&buf[..want.len()], &want[..]);
            }
            Err(e) => {
                prop_assert_eq!(got, Err(e));
                // Nothing written on a refusal.
                prop_assert_eq!(left, room);
            }
        }
    }

    #[test]
    fn a_status_request_without_an_envelope_is_the_same_frame(
        node_ids in prop::collection::vec("[a-z0-9.-]{0,200}", 0..12),
        start_after in "[a-z0-9.-]{0,200}",
        correlation_id in uint(),
        max_cut in 0usize..8,
    ) {
        let envelope = Envelope::correlated(correlation_id, EdgeStatusRequest {
            node_ids: node_ids.clone(),
            start_after_node_id: start_after.clone(),
        });
        let max = envelope.encoded_len().saturating_sub(max_cut) as u32;
        let mut direct = vec![0xAB];
        let got =
            encode_status_request_frame(correlation_id, &node_ids, &start_after, max, &mut direct);
        let mut via_envelope = vec![0xAB];
        let want = encode_frame(&envelope, max, &mut via_envelope);
        prop_assert_eq!(got, want);
        prop_assert_eq!(direct, via_envelope);
    }
}

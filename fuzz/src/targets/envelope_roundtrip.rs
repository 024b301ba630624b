//! `envelope_roundtrip`: bytes as one frame body, through the decode-limit pre-scan
//! ([`check_envelope`]) and prost, then encoded and decoded again.
//!
//! Input: one config byte (bit 0: [`tight_limits`] instead of the protocol's), then the
//! body.
//!
//! Checked: no panic; the pre-scan's estimate stays within the frame's budget and
//! bounds what prost really allocates (that is what makes PROTOCOL.md §7's amplification cap
//! hold); a [`FrameDecoder`] reaches the same verdict; whatever decodes re-encodes to
//! bytes that decode to the same message, are canonical (encode again to themselves),
//! pass the protocol's limits and survive the frame codec.

use iop_proto::{
    DEFAULT_MAX_FRAME_LEN, DecodeLimits, Envelope, FrameDecoder, FrameError, Message,
    check_envelope, encode_frame,
};

use super::tight_limits;
use crate::alloc::allocated;

/// What `check_envelope` adds to every estimate for a `DecodeError` (its docs).
const DECODE_ERROR_BYTES: usize = 512;

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some((&config, body)) = data.split_first() else {
        return;
    };
    let limits = if config & 1 == 0 {
        DecodeLimits::default()
    } else {
        tight_limits()
    };

    let scanned = check_envelope(body, &limits);
    let frame_verdict = decode_as_frame(body, limits);
    let estimate = match scanned {
        Ok(estimate) => estimate,
        Err(err) => {
            if !body.is_empty() {
                assert_eq!(frame_verdict, Err(FrameError::LimitExceeded(err)));
            }
            return;
        }
    };
    // The estimate includes up to `DECODE_ERROR_BYTES` for prost's `DecodeError`,
    // which the budget does not count (see `check_envelope`).
    let budget = limits.decoded_budget(body.len()) + DECODE_ERROR_BYTES;
    assert!(estimate <= budget, "estimate {estimate} > budget {budget}");

    let (decoded, bytes) = allocated(|| Envelope::decode(body));
    assert!(
        bytes <= estimate,
        "prost allocated {bytes} bytes, the pre-scan estimated {estimate}"
    );
    let envelope = match decoded {
        Ok(envelope) => envelope,
        Err(err) => {
            if !body.is_empty() {
                assert_eq!(frame_verdict, Err(FrameError::Undecodable(err)));
            }
            return;
        }
    };
    if !body.is_empty() {
        assert_eq!(frame_verdict.as_ref(), Ok(&envelope));
    }

    let canonical = envelope.encode_to_vec();
    assert_eq!(canonical.len(), envelope.encoded_len());
    let again = match Envelope::decode(canonical.as_slice()) {
        Ok(again) => again,
        Err(err) => panic!("re-encoded envelope does not decode: {err}"),
    };
    assert_eq!(again, envelope);
    assert_eq!(
        again.encode_to_vec(),
        canonical,
        "encoding is not canonical"
    );
    if let Err(err) = check_envelope(&canonical, &DecodeLimits::default()) {
        // What fits the protocol's limits as received must still fit once re-encoded:
        // counts and lengths can only shrink (merges add up as prost does).
        // Small frames only: the 8 MiB floor, not 8 × size, is then the budget.
        if check_envelope(body, &DecodeLimits::default()).is_ok() && body.len() < 1 << 20 {
            panic!("re-encoded envelope breaks the protocol's limits: {err}");
        }
    }

    if !canonical.is_empty() && canonical.len() <= DEFAULT_MAX_FRAME_LEN as usize {
        let mut wire = Vec::new();
        if let Err(err) = encode_frame(&envelope, DEFAULT_MAX_FRAME_LEN, &mut wire) {
            panic!("encode_frame refused an envelope within the limit: {err}");
        }
        assert_eq!(wire.get(4..), Some(canonical.as_slice()));
        assert_eq!(
            decode_as_frame(&canonical, DecodeLimits::default()),
            Ok(envelope)
        );
    }
}

/// What a [`FrameDecoder`] makes of `body` sent as one frame.
fn decode_as_frame(body: &[u8], limits: DecodeLimits) -> Result<Envelope, FrameError> {
    let mut wire = u32::try_from(body.len())
        .unwrap_or(u32::MAX)
        .to_be_bytes()
        .to_vec();
    wire.extend_from_slice(body);
    let mut decoder = FrameDecoder::with_limits(u32::MAX, limits);
    let mut input = wire.as_slice();
    let result = decoder.decode(&mut input);
    match result {
        Ok(Some(envelope)) => Ok(envelope),
        Ok(None) => panic!("a whole frame did not decode"),
        Err(err) => Err(err),
    }
}

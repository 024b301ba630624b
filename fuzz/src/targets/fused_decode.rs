//! `fused_decode`: bytes as one frame body, through the single-pass limit-checking
//! decoder ([`decode_envelope`], what `FrameDecoder` runs) and through its reference,
//! the pre-scan [`check_envelope`] followed by prost.
//!
//! Input: one config byte (bits 0–1: the protocol's limits, [`tight_limits`], the protocol's
//! limits with the unknown-group depth cap lifted so that prost's own recursion limit
//! is reached, or tight limits with a budget of 0 bytes), then the body.
//!
//! Checked: no panic; the two verdicts are equal, errors included (the same envelope,
//! the same `LimitError`, the same prost `DecodeError` with its field path); and the
//! fused decode never allocates more than the frame's budget plus what a
//! `DecodeError` costs, whether it accepts the body or not.

use iop_proto::{DecodeLimits, Envelope, FrameError, Message, check_envelope, decode_envelope};

use super::tight_limits;
use crate::alloc::allocated;

/// What a `DecodeError` may cost beyond the budget (see `check_envelope`).
const DECODE_ERROR_BYTES: usize = 512;

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some((&config, body)) = data.split_first() else {
        return;
    };
    let limits = match config & 3 {
        0 => DecodeLimits::default(),
        1 => tight_limits(),
        2 => {
            let mut limits = DecodeLimits::default();
            limits.max_unknown_depth = u32::MAX;
            limits
        }
        _ => {
            let mut limits = tight_limits();
            limits.max_amplification = 0;
            limits.amplification_floor = 0;
            limits
        }
    };

    let (fused, bytes) = allocated(|| decode_envelope(body, &limits));
    let budget = limits.decoded_budget(body.len()) + DECODE_ERROR_BYTES;
    assert!(
        bytes <= budget,
        "the fused decode allocated {bytes} bytes, budget {budget}: {fused:?}"
    );

    let reference = check_envelope(body, &limits)
        .map_err(FrameError::LimitExceeded)
        .and_then(|_| Envelope::decode(body).map_err(FrameError::Undecodable));
    assert_eq!(fused, reference);
}

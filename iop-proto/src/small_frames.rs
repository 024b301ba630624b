//! Hand-written encoders for the small frames sent most often: heartbeats, heartbeat
//! acks (one per Edge per interval) and status requests. They write the same bytes as
//! prost (fields in number order, zero scalars omitted; `tests/small_frames.rs` checks
//! it over arbitrary values) without prost's generic walk, which costs more than the
//! frame's four-byte prefix saves. Every other body goes through prost.

use bytes::BufMut;

use crate::encoding::{delimited_len, put_varint_buf as put_varint, uint_len};
use crate::frame::EncodeError;
use crate::wire::envelope::Body;
use crate::{Envelope, LENGTH_PREFIX_LEN};

/// Key of a length-delimited `Envelope.body` field `n` (all of them are below 16).
const fn body_key(field: u8) -> u8 {
    (field << 3) | 2
}
/// Appends field `field` (1 or 2) as a varint, omitted when 0 (proto3).
fn put_uint64_field(dst: &mut impl BufMut, field: u8, v: u64) {
    if v != 0 {
        dst.put_u8(field << 3);
        put_varint(dst, v);
    }
}

/// Encodes `envelope` as [`encode_frame`](crate::encode_frame) would, if its body is
/// one of the small frames handled here; `None` for every other envelope.
pub(crate) fn encode(
    envelope: &Envelope,
    max_frame_len: u32,
    dst: &mut impl BufMut,
) -> Option<Result<usize, EncodeError>> {
    let correlation = envelope.correlation_id;
    let correlation_len = uint_len(correlation);
    match envelope.body.as_ref()? {
        Body::HeartbeatAck(ack) => {
            let inner = uint_len(ack.sequence);
            Some(write_scalars(
                dst,
                max_frame_len,
                correlation,
                correlation_len,
                body_key(13),
                inner,
                |d| put_uint64_field(d, 1, ack.sequence),
            ))
        }
        Body::Heartbeat(hb) => {
            let inner = uint_len(hb.sequence) + uint_len(hb.sent_at_unix_ms);
            Some(write_scalars(
                dst,
                max_frame_len,
                correlation,
                correlation_len,
                body_key(12),
                inner,
                |d| {
                    put_uint64_field(d, 1, hb.sequence);
                    put_uint64_field(d, 2, hb.sent_at_unix_ms);
                },
            ))
        }
        Body::StatusRequest(req) => Some(status_request(
            correlation,
            &req.node_ids,
            &req.start_after_node_id,
            max_frame_len,
            dst,
        )),
        _ => None,
    }
}

/// The frame of an envelope with `correlation_id` and an `EdgeStatusRequest` for
/// `node_ids` after `start_after` (empty: from the first):
/// [`encode_frame`](crate::encode_frame)'s bytes, without an envelope.
#[inline(always)]
pub(crate) fn status_request<S: AsRef<str>>(
    correlation_id: u64,
    node_ids: &[S],
    start_after: &str,
    max_frame_len: u32,
    dst: &mut impl BufMut,
) -> Result<usize, EncodeError> {
    let ids: usize = node_ids
        .iter()
        .map(|id| delimited_len(id.as_ref().len()))
        .sum();
    let cursor = if start_after.is_empty() {
        0
    } else {
        delimited_len(start_after.len())
    };
    let inner = ids + cursor;
    let len = uint_len(correlation_id) + delimited_len(inner);
    check(len, max_frame_len, dst).inspect(|_| {
        dst.put_u32(len as u32);
        put_uint64_field(dst, 1, correlation_id);
        dst.put_u8(body_key(4));
        put_varint(dst, inner as u64);
        for id in node_ids {
            put_string_field(dst, 1, id.as_ref());
        }
        if !start_after.is_empty() {
            put_string_field(dst, 2, start_after);
        }
    })
}

/// Appends length-delimited field `field` (below 16) holding `s`.
fn put_string_field(dst: &mut impl BufMut, field: u8, s: &str) {
    dst.put_u8((field << 3) | 2);
    put_varint(dst, s.len() as u64);
    dst.put_slice(s.as_bytes());
}

/// Checks the body length `len` against the limit and the room in `dst`; the frame's
/// whole length when it fits.
fn check(len: usize, max_frame_len: u32, dst: &impl BufMut) -> Result<usize, EncodeError> {
    if u32::try_from(len).map_or(true, |l| l > max_frame_len) {
        return Err(EncodeError::TooLarge {
            len,
            max: max_frame_len,
        });
    }
    let needed = LENGTH_PREFIX_LEN + len;
    if dst.remaining_mut() < needed {
        return Err(EncodeError::BufferFull {
            needed,
            remaining: dst.remaining_mut(),
        });
    }
    Ok(needed)
}

/// A frame whose body holds scalar fields only (`inner` bytes, written by `fields`),
/// written straight into `dst` byte by byte: assembled on the stack and copied out,
/// the copy would wait on the bytes just stored (BENCHMARKS.md §10).
fn write_scalars<B: BufMut>(
    dst: &mut B,
    max_frame_len: u32,
    correlation: u64,
    correlation_len: usize,
    key: u8,
    inner: usize,
    fields: impl FnOnce(&mut B),
) -> Result<usize, EncodeError> {
    let len = correlation_len + 2 + inner;
    let needed = check(len, max_frame_len, dst)?;
    dst.put_u32(len as u32);
    put_uint64_field(dst, 1, correlation);
    dst.put_u8(key);
    // `inner` is at most 22 bytes: a one-byte length.
    dst.put_u8(inner as u8);
    fields(dst);
    Ok(needed)
}

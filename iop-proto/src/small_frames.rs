//! Hand-written encoders for the small frames sent most often: heartbeats, heartbeat
//! acks (one per Edge per interval) and status requests. They write the same bytes as
//! prost (fields in number order, zero scalars omitted; `tests/small_frames.rs` checks
//! it over arbitrary values) without prost's generic walk, which costs more than the
//! frame's four-byte prefix saves. Every other body goes through prost.

use bytes::BufMut;

use crate::frame::EncodeError;
use crate::wire::envelope::Body;
use crate::{Envelope, LENGTH_PREFIX_LEN};

/// Key of `Envelope.correlation_id` (field 1, varint).
const CORRELATION_KEY: u8 = 1 << 3;
/// Key of a length-delimited `Envelope.body` field `n` (all of them are below 16).
const fn body_key(field: u8) -> u8 {
    (field << 3) | 2
}
/// Longest frame the stack path writes: prefix, correlation id, body key and length,
/// two varint fields.
const STACK_FRAME: usize = LENGTH_PREFIX_LEN + 11 + 2 + 11 + 11;

/// Bytes of `v` as a varint.
fn varint_len(v: u64) -> usize {
    // 1 byte per started group of 7 bits (0 takes one byte).
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// A small stack buffer that frames are assembled in.
struct Stack {
    buf: [u8; STACK_FRAME],
    len: usize,
}

impl Stack {
    fn new() -> Self {
        Self {
            buf: [0; STACK_FRAME],
            len: 0,
        }
    }

    fn byte(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    /// Field `field` (1 or 2) as a varint, omitted when 0 (proto3).
    fn uint64_field(&mut self, field: u8, v: u64) {
        if v != 0 {
            self.byte(field << 3);
            self.varint(v);
        }
    }

    fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

/// Bytes of a proto3 `uint64` field (1-byte key) holding `v`.
fn uint64_field_len(v: u64) -> usize {
    if v == 0 { 0 } else { 1 + varint_len(v) }
}

/// Encodes `envelope` as [`encode_frame`](crate::encode_frame) would, if its body is
/// one of the small frames handled here; `None` for every other envelope.
pub(crate) fn encode(
    envelope: &Envelope,
    max_frame_len: u32,
    dst: &mut impl BufMut,
) -> Option<Result<usize, EncodeError>> {
    let correlation = envelope.correlation_id;
    let correlation_len = uint64_field_len(correlation);
    match envelope.body.as_ref()? {
        Body::HeartbeatAck(ack) => {
            let inner = uint64_field_len(ack.sequence);
            Some(write_scalars(
                dst,
                max_frame_len,
                correlation,
                correlation_len,
                body_key(13),
                inner,
                |s| s.uint64_field(1, ack.sequence),
            ))
        }
        Body::Heartbeat(hb) => {
            let inner = uint64_field_len(hb.sequence) + uint64_field_len(hb.sent_at_unix_ms);
            Some(write_scalars(
                dst,
                max_frame_len,
                correlation,
                correlation_len,
                body_key(12),
                inner,
                |s| {
                    s.uint64_field(1, hb.sequence);
                    s.uint64_field(2, hb.sent_at_unix_ms);
                },
            ))
        }
        Body::StatusRequest(req) => {
            let inner: usize = req
                .node_ids
                .iter()
                .map(|id| 1 + varint_len(id.len() as u64) + id.len())
                .sum();
            let len = correlation_len + 1 + varint_len(inner as u64) + inner;
            Some(check(len, max_frame_len, dst).inspect(|_| {
                let mut head = Stack::new();
                for b in (len as u32).to_be_bytes() {
                    head.byte(b);
                }
                if correlation != 0 {
                    head.byte(CORRELATION_KEY);
                    head.varint(correlation);
                }
                head.byte(body_key(4));
                head.varint(inner as u64);
                dst.put_slice(head.bytes());
                for id in &req.node_ids {
                    let mut key = Stack::new();
                    key.byte((1 << 3) | 2);
                    key.varint(id.len() as u64);
                    dst.put_slice(key.bytes());
                    dst.put_slice(id.as_bytes());
                }
            }))
        }
        _ => None,
    }
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
/// assembled on the stack and copied out at once.
fn write_scalars(
    dst: &mut impl BufMut,
    max_frame_len: u32,
    correlation: u64,
    correlation_len: usize,
    key: u8,
    inner: usize,
    fields: impl FnOnce(&mut Stack),
) -> Result<usize, EncodeError> {
    let len = correlation_len + 2 + inner;
    let needed = check(len, max_frame_len, dst)?;
    let mut s = Stack::new();
    for b in (len as u32).to_be_bytes() {
        s.byte(b);
    }
    s.uint64_field(1, correlation);
    s.byte(key);
    // `inner` is at most 22 bytes: a one-byte length.
    s.byte(inner as u8);
    fields(&mut s);
    dst.put_slice(s.bytes());
    Ok(needed)
}

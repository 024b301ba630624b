//! The protobuf wire format as this crate's hand-written encoders write it: varints,
//! field keys, proto3 scalar and string fields, and the field numbers of the messages
//! written in place (a status answer straight from a node registry, a frame whose body
//! is filled in afterwards). They write what prost writes for the same message (fields
//! in number order, proto3 defaults skipped); `iop-core`'s property tests compare the
//! two byte for byte.
//!
//! Hand-written rather than prost's `encode_varint`, which checks the buffer's
//! capacity per byte (BENCHMARKS.md §10).
//!
//! ```
//! use iop_proto::encoding::{self, fields};
//! use iop_proto::{EdgeStatusResponse, Message};
//!
//! let mut out = Vec::new();
//! encoding::put_str(&mut out, fields::status_response::EDGE_ID, "edge-1");
//! encoding::put_uint(&mut out, fields::status_response::OBSERVED_AT_UNIX_MS, 1_700_000_000_000);
//! let prost = EdgeStatusResponse {
//!     edge_id: "edge-1".into(),
//!     observed_at_unix_ms: 1_700_000_000_000,
//!     ..Default::default()
//! };
//! assert_eq!(out, prost.encode_to_vec());
//! assert_eq!(out.len(), encoding::str_len("edge-1") + encoding::uint_len(1_700_000_000_000));
//! ```

use bytes::BufMut;

/// Bytes of the longest varint (a `u64`).
pub const MAX_VARINT_LEN: usize = 10;

/// Wire type of varint fields.
pub const VARINT: u8 = 0;
/// Wire type of length-delimited fields (strings, bytes, messages, map entries).
pub const LEN: u8 = 2;

/// Bytes of `v` as a varint.
#[inline]
pub const fn varint_len(v: u64) -> usize {
    // 1 byte per started group of 7 bits (0 takes one byte).
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends `v` as a varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` as a varint to any [`BufMut`].
#[inline]
pub fn put_varint_buf(out: &mut impl BufMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Writes `v` as a varint into `buf`; returns the bytes written (a prefix of `buf`).
pub fn encode_varint(mut v: u64, buf: &mut [u8; MAX_VARINT_LEN]) -> &[u8] {
    let mut n = 0;
    for slot in buf.iter_mut() {
        n += 1;
        if v < 0x80 {
            *slot = v as u8;
            break;
        }
        *slot = (v as u8 & 0x7f) | 0x80;
        v >>= 7;
    }
    buf.get(..n).unwrap_or_default()
}

/// Appends the key of field `field` (below 16: one byte) with `wire_type`.
// A few instructions, called per field of every node of a status: kept inline.
#[inline(always)]
pub fn put_key(out: &mut Vec<u8>, field: u8, wire_type: u8) {
    debug_assert!(field < 16, "one-byte keys only");
    out.push((field << 3) | wire_type);
}

/// Appends the key and length of a length-delimited field `field` holding `len` bytes;
/// its bytes follow.
#[inline(always)]
pub fn put_delimited_head(out: &mut Vec<u8>, field: u8, len: usize) {
    put_key(out, field, LEN);
    put_varint(out, len as u64);
}

/// Bytes of a length-delimited field (one-byte key) holding `len` bytes.
#[inline]
pub const fn delimited_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// Bytes of a proto3 string field holding `s` (nothing when empty).
#[inline]
pub fn str_len(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        delimited_len(s.len())
    }
}

/// Bytes of a proto3 varint field holding `v` (nothing when zero).
#[inline]
pub const fn uint_len(v: u64) -> usize {
    if v == 0 { 0 } else { 1 + varint_len(v) }
}

/// Bytes of the elements of a repeated string field (each written, empty ones too).
pub fn repeated_str_len(items: &[String]) -> usize {
    items.iter().map(|s| delimited_len(s.len())).sum()
}

/// Appends a proto3 string field (skipped when empty).
#[inline(always)]
pub fn put_str(out: &mut Vec<u8>, field: u8, s: &str) {
    if !s.is_empty() {
        put_repeated_str(out, field, s);
    }
}

/// Appends one element of a repeated string field (written even when empty).
#[inline(always)]
pub fn put_repeated_str(out: &mut Vec<u8>, field: u8, s: &str) {
    put_delimited_head(out, field, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// Appends a proto3 varint field (skipped when zero): integers, bools, enums.
#[inline(always)]
pub fn put_uint(out: &mut Vec<u8>, field: u8, v: u64) {
    if v != 0 {
        put_key(out, field, VARINT);
        put_varint(out, v);
    }
}

/// The value of a wire enum as a varint field carries it (the enums here are
/// non-negative; a negative one, which no generated type holds, counts as 0).
#[inline]
pub fn enum_value(v: i32) -> u64 {
    u64::try_from(v).unwrap_or_default()
}

/// Writes into `buf` the bytes prost puts before the body of
/// `Envelope::correlated(correlation_id, status_response)`: the `correlation_id` field
/// (none when 0), then the `status_response` key; returns them. Its length and the body
/// follow.
pub fn status_response_head(correlation_id: u64, buf: &mut [u8; 12]) -> &[u8] {
    let mut varint = [0u8; MAX_VARINT_LEN];
    let id: &[u8] = if correlation_id == 0 {
        &[]
    } else {
        encode_varint(correlation_id, &mut varint)
    };
    let key = [fields::envelope::CORRELATION_ID << 3 | VARINT];
    let parts: [&[u8]; 3] = [
        if id.is_empty() { &[] } else { &key },
        id,
        &[fields::envelope::STATUS_RESPONSE << 3 | LEN],
    ];
    let mut n = 0;
    for part in parts {
        if let Some(dst) = buf.get_mut(n..n + part.len()) {
            dst.copy_from_slice(part);
        }
        n += part.len();
    }
    buf.get(..n).unwrap_or_default()
}

/// Field numbers of the messages the encoders write in place, as `control.proto`
/// numbers them.
pub mod fields {
    /// `Envelope`.
    pub mod envelope {
        /// `correlation_id`
        pub const CORRELATION_ID: u8 = 1;
        /// `status_response` (a `body` variant)
        pub const STATUS_RESPONSE: u8 = 5;
    }

    /// `EdgeStatusResponse`.
    pub mod status_response {
        /// `edge_id`
        pub const EDGE_ID: u8 = 1;
        /// `nodes` (repeated `EdgeNodeSnapshot`)
        pub const NODES: u8 = 2;
        /// `observed_at_unix_ms`
        pub const OBSERVED_AT_UNIX_MS: u8 = 3;
        /// `registry_revision`
        pub const REGISTRY_REVISION: u8 = 4;
        /// `truncated`
        pub const TRUNCATED: u8 = 5;
    }

    /// `EdgeNodeSnapshot`.
    pub mod node_snapshot {
        /// `node_id`
        pub const NODE_ID: u8 = 1;
        /// `connected`
        pub const CONNECTED: u8 = 2;
        /// `config` (`NodeConfigSummary`)
        pub const CONFIG: u8 = 3;
        /// `provider_snapshots` (repeated `ProviderSnapshot`)
        pub const PROVIDER_SNAPSHOTS: u8 = 4;
        /// `state`
        pub const STATE: u8 = 5;
        /// `generation`
        pub const GENERATION: u8 = 6;
        /// `last_transition_unix_ms`
        pub const LAST_TRANSITION_UNIX_MS: u8 = 7;
        /// `labels` (map entries)
        pub const LABELS: u8 = 8;
        /// A map entry's key.
        pub const LABEL_KEY: u8 = 1;
        /// A map entry's value.
        pub const LABEL_VALUE: u8 = 2;
    }

    /// `NodeConfigSummary`.
    pub mod config_summary {
        /// `revision`
        pub const REVISION: u8 = 1;
        /// `provider_ids`
        pub const PROVIDER_IDS: u8 = 2;
        /// `models`
        pub const MODELS: u8 = 3;
    }

    /// `ProviderSnapshot`.
    pub mod provider_snapshot {
        /// `provider_id`
        pub const PROVIDER_ID: u8 = 1;
        /// `category`
        pub const CATEGORY: u8 = 2;
        /// `status`
        pub const STATUS: u8 = 3;
        /// `health`
        pub const HEALTH: u8 = 4;
        /// `capacity`
        pub const CAPACITY: u8 = 5;
        /// `in_flight`
        pub const IN_FLIGHT: u8 = 6;
        /// `queued`
        pub const QUEUED: u8 = 7;
        /// `long_context_capacity`
        pub const LONG_CONTEXT_CAPACITY: u8 = 8;
        /// `long_context_in_flight`
        pub const LONG_CONTEXT_IN_FLIGHT: u8 = 9;
        /// `long_context_queued`
        pub const LONG_CONTEXT_QUEUED: u8 = 10;
        /// `models`
        pub const MODELS: u8 = 11;
        /// `admission_eligible`
        pub const ADMISSION_ELIGIBLE: u8 = 12;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EdgeStatusResponse, Envelope, HeartbeatAck, Message};

    #[test]
    fn the_status_head_is_prosts() {
        let body = EdgeStatusResponse {
            edge_id: "e".into(),
            ..Default::default()
        };
        for id in [0, 1, 127, 128, u64::MAX] {
            let whole = Envelope::correlated(id, body.clone()).encode_to_vec();
            let mut buf = [0; 12];
            let head = status_response_head(id, &mut buf);
            // Then the body's length (one byte here) and the body.
            assert_eq!(&whole[..head.len()], head, "{id}");
            assert_eq!(whole.len(), head.len() + 1 + body.encoded_len(), "{id}");
        }
    }

    #[test]
    fn varints_agree_with_prost() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut want = Vec::new();
            HeartbeatAck { sequence: v }.encode(&mut want).unwrap();
            // The ack is key 0x08 then the varint (nothing at all for 0).
            let want = if v == 0 { vec![0] } else { want[1..].to_vec() };
            let (mut put, mut buf_put) = (Vec::new(), bytes::BytesMut::new());
            put_varint(&mut put, v);
            put_varint_buf(&mut buf_put, v);
            let mut buf = [0; MAX_VARINT_LEN];
            assert_eq!(put, want, "{v}");
            assert_eq!(&buf_put[..], &want[..], "{v}");
            assert_eq!(encode_varint(v, &mut buf), &want[..], "{v}");
            assert_eq!(varint_len(v), want.len(), "{v}");
        }
    }
}

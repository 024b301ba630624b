//! The heap a decoder allocates for a message, as the decode limits count it (PROTOCOL.md
//! §7): the cost model of [`check_envelope`](super::check_envelope), exact for prost's
//! decoders (`Vec` doubling from 4 slots, strings of at least 8 bytes, `BTreeMap`
//! nodes). A sender that writes a message's bytes itself uses it to stay within the
//! receiver's decoded-size budget without walking the bytes again (the Edge's node
//! registry does, for status answers).

use std::mem::size_of;

use crate::{EdgeNodeSnapshot, ProviderSnapshot};

/// Heap bytes of one `BTreeMap<String, String>` node (an internal node, the larger).
const MAP_NODE_BYTES: usize = 640;
/// Every `BTreeMap` node but the root holds at least this many entries.
const MAP_MIN_NODE_ENTRIES: usize = 5;

/// Bytes of one element of `EdgeStatusResponse.nodes`.
pub const NODE_SNAPSHOT: usize = size_of::<EdgeNodeSnapshot>();
/// Bytes of one element of `EdgeNodeSnapshot.provider_snapshots`.
pub const PROVIDER_SNAPSHOT: usize = size_of::<ProviderSnapshot>();
/// Bytes of one element of a repeated string field.
pub const STRING: usize = size_of::<String>();

/// Heap bytes of a `Vec` after `n` single pushes: capacity doubles from 4.
pub fn vec_bytes(n: usize, elem: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.next_power_of_two().max(4).saturating_mul(elem)
    }
}

/// Heap bytes of a `BTreeMap<String, String>` node set holding `n` entries (at most).
pub fn map_bytes(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (1 + n / MAP_MIN_NODE_ENTRIES).saturating_mul(MAP_NODE_BYTES)
    }
}

/// What pushing one more element onto a `Vec` holding `len` adds to
/// [`vec_bytes`]: nonzero only when the push reallocates.
#[inline(always)]
pub fn vec_growth(len: usize, elem: usize) -> usize {
    if len == 0 {
        vec_bytes(1, elem)
    } else if len >= 4 && len.is_power_of_two() {
        len.saturating_mul(elem)
    } else {
        0
    }
}

/// What inserting one more entry into a map that has read `before` adds to
/// [`map_bytes`].
#[inline]
pub fn map_growth(before: usize) -> usize {
    map_bytes(before + 1).saturating_sub(map_bytes(before))
}

/// Heap bytes of a string or bytes field of `len` bytes: `Vec::reserve` rounds
/// small allocations up to 8 bytes.
#[inline(always)]
pub fn string_bytes(len: usize) -> usize {
    if len == 0 { 0 } else { len.max(8) }
}

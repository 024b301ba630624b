//! Decode limits (SPEC §7): caps checked on the bytes of a frame before each allocation
//! decoding it would make, so that no frame can make the receiver allocate much more
//! than it sent.
//!
//! # What is capped
//!
//! Protobuf is compact where Rust structs are not: an empty `EdgeNodeSnapshot` costs
//! 2 bytes on the wire and 168 bytes in a `Vec` (twice that while the `Vec` grows). A
//! hostile 4 MiB frame of empty sub-messages would make prost allocate hundreds of
//! MB. [`check_envelope`] walks the protobuf wire format of an `iop.Envelope` once,
//! schema-aware and without allocating, and refuses a frame that breaks a cap. It is
//! the reference: [`FrameDecoder`](crate::FrameDecoder) and
//! [`decode_envelope`](crate::decode_envelope) do not run it on every frame but decode
//! in a single pass that makes the same checks, in the same order, each before the
//! allocation it guards, and so reach the same verdict (a differential test and a fuzz
//! target hold them equal). The caps:
//!
//! - element counts per repeated field and entries per map, per message (a singular
//!   sub-message that occurs several times is merged by prost, so its counts add up);
//! - the length of every string and bytes field, by class: *ids* (`edge_id`,
//!   `node_id`, `provider_id`, `command_id`, operation names, the elements of
//!   `node_ids`, `provider_ids`, `inflight_command_ids`, and map keys) are capped at
//!   [`DecodeLimits::max_id_len`]; every other text (messages, reasons, selectors,
//!   versions, model names, map values) at [`DecodeLimits::max_text_len`];
//! - nesting depth of unknown groups (unknown length-delimited fields are skipped
//!   whole and never parsed);
//! - the estimated heap size of the decoded message, computed from the exact
//!   allocation pattern of prost's decoders (`Vec` doubling from 4, strings of at
//!   least 8 bytes, `BTreeMap` nodes), which may not exceed
//!   `max_amplification × wire size`, or [`DecodeLimits::amplification_floor`] for
//!   small frames.
//!
//! Scalars and unknown fields cost nothing to decode and are only skipped.
//!
//! # An over-long id is a frame error
//!
//! A string longer than its class cap makes the whole frame a
//! [`FrameError::LimitExceeded`](crate::FrameError::LimitExceeded), that is a protocol
//! error (the receiver answers `GoAway{PROTOCOL_ERROR}` and closes). In particular a
//! hello whose `edge_id` is longer than 128 bytes is not answered with
//! `INVALID_HELLO`: the limit is enforced where it is cheap, before any allocation,
//! and a peer that sends such an id is broken or hostile. Ids of at most 128 bytes
//! that break the id grammar (§3) decode fine and are the state machines' business.
//!
//! # The amplification floor
//!
//! The SPEC asks for decoded size ≤ 8 × wire size. For small frames that cannot hold
//! with prost's types (one 1-byte string in a repeated field already costs a
//! 96-byte `Vec` of 4 slots), and a legitimate status response of 10 000 configured,
//! never-connected nodes (an id and a state each: 160 KB on the wire) decodes to
//! about 2.9 MB, 18× its wire size. So the budget of a frame is
//! `max(max_amplification × wire_len, amplification_floor)`: default 8 × wire size,
//! but at least 8 MiB. For a frame of 1 MiB or more the SPEC's 8× holds exactly.
//!
//! Malformed input is not judged by the pre-scan: it stops where the bytes stop making
//! sense and lets prost's decoder report the error, which it does at the same point,
//! having done no more than the work checked so far. The single-pass decoder reports
//! prost's own error there, unless the pre-scan, which reads on past some faults prost
//! stops at, finds a broken cap further on: then, as with the pre-scan run first, the
//! frame is refused with that [`LimitError`].
//!
//! A rejected frame may have allocated up to its budget before the cap that stopped
//! it (what was built is dropped at once); the pre-scan rejected it before any
//! allocation. The bound on a frame's heap is the same either way.

/// Caps a decoder enforces on every frame as it decodes it (SPEC §7).
///
/// `Default` gives the SPEC values. Fields are public so a caller can adjust one:
///
/// ```
/// let mut limits = iop_proto::DecodeLimits::default();
/// limits.max_nodes = 1_000;
/// let decoder = iop_proto::FrameDecoder::with_limits(iop_proto::DEFAULT_MAX_FRAME_LEN, limits);
/// # let _ = decoder;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeLimits {
    /// Nodes per status response (`EdgeStatusResponse.nodes`). Default 10 000.
    pub max_nodes: u32,
    /// Providers per node (`EdgeNodeSnapshot.provider_snapshots`). Default 256.
    pub max_providers_per_node: u32,
    /// Entries per map (`metadata`, `labels`, `detail`). Default 64.
    pub max_map_entries: u32,
    /// Operation names per hello (`EdgeHelloRequest.operations`). Default 256.
    pub max_operations: u32,
    /// Command ids per hello (`EdgeHelloRequest.inflight_command_ids`): the in-flight
    /// limit plus the finished-id retention, 256 + 4 096 = 4 352 by default.
    pub max_inflight_command_ids: u32,
    /// Node ids per status request (`EdgeStatusRequest.node_ids`). Default 10 000,
    /// as many as a status response may carry.
    pub max_node_ids: u32,
    /// Provider ids per node config summary (`NodeConfigSummary.provider_ids`).
    /// Default 256, as many as a node may have providers.
    pub max_provider_ids: u32,
    /// Model names per config summary or provider (`models`). Default 256.
    pub max_models: u32,
    /// Bytes per id string and map key. Default 128.
    pub max_id_len: u32,
    /// Bytes per other string (messages, reasons, selectors, versions, model names,
    /// map values) and per credential. Default 4 096.
    pub max_text_len: u32,
    /// Nesting depth of unknown groups. Default 16.
    pub max_unknown_depth: u32,
    /// Estimated decoded heap bytes per wire byte. Default 8.
    pub max_amplification: u32,
    /// Decoded heap bytes any frame may use, whatever its size. Default 8 MiB.
    pub amplification_floor: u32,
}

impl DecodeLimits {
    /// The SPEC §7 values.
    pub const SPEC: DecodeLimits = DecodeLimits {
        max_nodes: 10_000,
        max_providers_per_node: 256,
        max_map_entries: 64,
        max_operations: 256,
        max_inflight_command_ids: 256 + 4_096,
        max_node_ids: 10_000,
        max_provider_ids: 256,
        max_models: 256,
        max_id_len: 128,
        max_text_len: 4 * 1024,
        max_unknown_depth: 16,
        max_amplification: 8,
        amplification_floor: 8 * 1024 * 1024,
    };

    /// The decoded-size budget of a frame body of `wire_len` bytes.
    pub fn decoded_budget(&self, wire_len: usize) -> usize {
        (self.max_amplification as usize)
            .saturating_mul(wire_len)
            .max(self.amplification_floor as usize)
    }
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self::SPEC
    }
}

/// Which cap a frame broke, and where.
///
/// Field names are fully qualified protobuf names, e.g. `iop.EdgeStatusResponse.nodes`;
/// map keys and values are named `<map field>.key` / `<map field>.value`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// A repeated field or map has more elements than allowed.
    #[error("{field} has more than {limit} elements")]
    TooManyElements {
        /// The repeated or map field.
        field: &'static str,
        /// The cap it exceeded.
        limit: u32,
    },
    /// A string or bytes field is longer than allowed.
    #[error("{field} is {len} bytes long, more than the limit of {limit}")]
    StringTooLong {
        /// The string or bytes field.
        field: &'static str,
        /// Its length on the wire.
        len: usize,
        /// The cap it exceeded.
        limit: u32,
    },
    /// Unknown groups are nested deeper than allowed.
    #[error("unknown groups nested deeper than {limit}")]
    TooDeep {
        /// The cap it exceeded.
        limit: u32,
    },
    /// Decoding would allocate more than the frame's budget.
    #[error("decoding would allocate at least {estimated} bytes, more than the budget of {budget}")]
    DecodedTooLarge {
        /// Estimated heap bytes when the budget was exceeded.
        estimated: usize,
        /// The frame's budget ([`DecodeLimits::decoded_budget`]).
        budget: usize,
    },
}

/// Checks the raw protobuf bytes of one `iop.Envelope` against `limits`, without
/// allocating; see the [module docs](self).
///
/// `Ok` carries an upper bound of the heap bytes prost allocates to decode `body`
/// (or to reject it, when it is malformed). The decoded message's share of it is
/// within [`DecodeLimits::decoded_budget`]; the rest, at most 512 bytes, is what
/// prost's `DecodeError` would cost, which the budget does not count.
pub fn check_envelope(body: &[u8], limits: &DecodeLimits) -> Result<usize, LimitError> {
    let mut scan = crate::scan::Scan::new(limits, limits.decoded_budget(body.len()));
    scan.envelope(body)
}

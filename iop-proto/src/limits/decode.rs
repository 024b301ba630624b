//! [`DecodeLimits`] and the pre-scan [`check_envelope`]; see the [module docs](super).

/// Caps a decoder enforces on every frame as it decodes it (PROTOCOL.md §7).
///
/// `Default` gives the protocol's values (PROTOCOL.md §7). Fields are public so a caller can adjust one:
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
    /// limit plus the finished-id retention, 256 + 1 024 = 1 280 by default.
    pub max_inflight_command_ids: u32,
    /// Node ids per status request (`EdgeStatusRequest.node_ids`). Default 10 000,
    /// as many as a status response may carry.
    pub max_node_ids: u32,
    /// Provider ids per node config summary (`NodeConfigSummary.provider_ids`).
    /// Default 256, as many as a node may have providers.
    pub max_provider_ids: u32,
    /// Model names per config summary or provider (`models`). Default 256.
    pub max_models: u32,
    /// Providers per load update (`EdgeLoadUpdate.providers`). Default 1 024.
    pub max_load_providers: u32,
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
    /// The PROTOCOL.md §7 values.
    pub const SPEC: DecodeLimits = DecodeLimits {
        max_nodes: super::MAX_NODES as u32,
        max_providers_per_node: super::MAX_PROVIDERS_PER_NODE as u32,
        max_map_entries: super::MAX_MAP_ENTRIES as u32,
        max_operations: super::MAX_HELLO_OPERATIONS as u32,
        max_inflight_command_ids: super::MAX_HELLO_INFLIGHT_IDS as u32,
        max_node_ids: super::MAX_NODES as u32,
        max_provider_ids: super::MAX_PROVIDERS_PER_NODE as u32,
        max_models: super::MAX_MODELS as u32,
        max_load_providers: super::MAX_LOAD_UPDATE_PROVIDERS as u32,
        max_id_len: super::MAX_ID_LEN as u32,
        max_text_len: super::MAX_TEXT_LEN as u32,
        max_unknown_depth: super::MAX_UNKNOWN_DEPTH,
        max_amplification: super::MAX_AMPLIFICATION,
        amplification_floor: super::AMPLIFICATION_FLOOR,
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
/// allocating; see the [module docs](super).
///
/// `Ok` carries an upper bound of the heap bytes prost allocates to decode `body`
/// (or to reject it, when it is malformed). The decoded message's share of it is
/// within [`DecodeLimits::decoded_budget`]; the rest, at most 512 bytes, is what
/// prost's `DecodeError` would cost, which the budget does not count.
pub fn check_envelope(body: &[u8], limits: &DecodeLimits) -> Result<usize, LimitError> {
    let mut scan = crate::scan::Scan::new(limits, limits.decoded_budget(body.len()));
    scan.envelope(body)
}

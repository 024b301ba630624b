//! The logic of each fuzz target, one module per target, each with a `run(data)`.

pub mod cp_session_bytes;
pub mod edge_session_bytes;
pub mod envelope_roundtrip;
pub mod frame_decode;
pub mod fused_decode;
pub mod load_updates;
pub mod pair_sequence;
pub mod registry_ops;
pub mod sender_limits;

use iop_proto::DecodeLimits;

/// Decode limits small enough that short fuzz inputs can reach every cap.
pub fn tight_limits() -> DecodeLimits {
    let mut limits = DecodeLimits::default();
    limits.max_nodes = 3;
    limits.max_providers_per_node = 2;
    limits.max_map_entries = 2;
    limits.max_operations = 2;
    limits.max_inflight_command_ids = 2;
    limits.max_node_ids = 2;
    limits.max_provider_ids = 2;
    limits.max_models = 2;
    limits.max_id_len = 8;
    limits.max_text_len = 16;
    limits.max_unknown_depth = 2;
    limits.max_amplification = 8;
    limits.amplification_floor = 512;
    limits
}

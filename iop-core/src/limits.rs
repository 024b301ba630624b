//! Protocol limits and defaults of PROTOCOL.md §7, shared by both ends: the one table of
//! [`iop_proto::limits`], re-exported, and where each row is configured.
//!
//! Both cores check what they are about to send against these limits before they
//! queue it (PROTOCOL.md §4.6): an application call that would send what the peer must
//! refuse gets a typed error naming the field ([`ExceedsLimit`]), and nothing goes on
//! the wire.
//!
//! # Where each PROTOCOL.md §7 row is configured
//!
//! [`CpConfig`](crate::cp::CpConfig) (the Control Plane; a runtime's `ServerConfig`
//! holds one as `cp`), [`EdgeConfig`](crate::edge::EdgeConfig) (an Edge) and
//! [`DecodeLimits`] (the decoder's caps, held by both as
//! `decode_limits`). `CpConfig` is `Default` with the protocol's values, `EdgeConfig::new`
//! likewise; both are `#[non_exhaustive]`: start from them and assign fields.
//!
//! | PROTOCOL.md §7 row | default | Control Plane | Edge |
//! |---|---|---|---|
//! | max frame length after / before the hello | 4 MiB / 256 KiB | `CpConfig::max_frame_len` (announced, never below 256 KiB) / `pre_hello_max_frame_len` (not below 256 KiB) | `EdgeConfig::max_frame_len` (at least [`MAX_CONTROL_PLANE_FRAME_LEN`]); what it sends is held to the CP's announced limit (at least 64 KiB) |
//! | connections not yet accepted (awaiting their hello; not those waiting on a claim) | 1 024 | `CpConfig::max_pending_hellos` | — |
//! | decoded size of one frame | ≤ 8 × wire size, floor 8 MiB | `decode_limits.max_amplification` / `amplification_floor` | same fields; a status answer is cut to what the CP decodes within them |
//! | nodes per status response / providers per node / entries per map / operations per hello | 10 000 / 256 / 64 / 256 | `decode_limits.max_nodes` / `max_providers_per_node` / `max_map_entries` / `max_operations` | same fields; status answers stop at 10 000 nodes |
//! | string lengths: ids and map keys / messages, selectors, map values | 128 B / 4 KiB | `decode_limits.max_id_len` / `max_text_len` | same fields |
//! | hello: operations / metadata entries / metadata value / software_version / inflight ids | 256 / 16 / 256 B / 128 B / 256 + 1 024 | checked in every hello (`INVALID_HELLO`) | checked when the `Edge` is built ([`ConfigError`](crate::edge::ConfigError)) |
//! | hello timeout | 10 s | `CpConfig::hello_timeout` | `EdgeConfig::hello_timeout` |
//! | heartbeat interval / liveness window | 5 s (1–60 s) / 3 intervals | `CpConfig::heartbeat_interval` (offered in the hello response) / `liveness_intervals` (and `unreachable_intervals`, 2) | the interval the CP offers / [`LIVENESS_INTERVALS`] (fixed) |
//! | status request timeout | 10 s | `CpConfig::status_timeout` | — |
//! | in-flight status requests per session | 64 | `CpConfig::max_inflight_status` | — |
//! | in-flight commands per Edge | 256 | `CpConfig::max_inflight_commands` | `EdgeConfig::max_inflight_commands` (at most 256) |
//! | command timeout default / finished-id retention | 60 s / 10 min, 1 024 ids | — (`CommandSpec::timeout_ms`, 0 = the Edge's default); finished commands remembered: `CpConfig::finished_command_retention` (256) | `EdgeConfig::default_command_timeout` / `command_retention`, `max_retained_commands` (at most 1 024) |
//! | sessions a request may end unanswered | 3 | `CpConfig::undeliverable_after_sessions` | — |
//! | outbound buffer per connection | 8 MiB | `CpConfig::outbound_cap` | `EdgeConfig::outbound_cap` |
//! | connections per CP | 20 000 | `CpConfig::max_connections` | — |
//! | reconnect backoff | 250 ms × 2ⁿ up to 30 s, full jitter | — | `EdgeConfig::backoff_base` / `backoff_max` (jitter seeded by `seed`) |
//! | retry_after on SUPERSEDED / DRAINING / OVERLOADED | 5 s / 10 s / 10 s | `CpConfig::retry_after_superseded` / `retry_after_draining` / `retry_after_overloaded` (and `retry_after_duplicate`) | honoured as received |
//! | disconnected Edge views kept | 100 000, 24 h | `CpConfig::max_disconnected_views` / `disconnected_view_ttl` | — |
//! | command records: histories kept | 4 096 records, 64 MiB; each the response, first event, latest 16 RUNNING (64 KiB), terminal | `CpConfig::command_records` ([`RecordLimits`](crate::cp::RecordLimits)) | — |
//!
//! The runtime drivers add their own knobs in `ServerConfig` (`shutdown_grace`,
//! `subscriber_capacity`) and on `EdgeClient`
//! (`with_event_capacity`, `with_shutdown_grace`).

use std::time::Duration;

pub use iop_proto::PROTOCOL_VERSION;
pub use iop_proto::limits::*;

/// Longest `command_id`, in bytes (an id: [`MAX_ID_LEN`]).
pub const MAX_COMMAND_ID_LEN: usize = MAX_ID_LEN;

/// Clamps a heartbeat interval from a hello response: 0 means the default, anything
/// else is clamped to 1–60 s (PROTOCOL.md §4.2).
pub fn negotiated_heartbeat_interval(heartbeat_interval_ms: u32) -> Duration {
    if heartbeat_interval_ms == 0 {
        return DEFAULT_HEARTBEAT_INTERVAL;
    }
    Duration::from_millis(u64::from(heartbeat_interval_ms))
        .clamp(MIN_HEARTBEAT_INTERVAL, MAX_HEARTBEAT_INTERVAL)
}

/// The smallest `max_frame_len` an Edge accepts in a hello response (PROTOCOL.md §7): far
/// below it not even a command answer fits and the session would be mute, so the Edge
/// treats a lower one as a protocol error.
pub const MIN_PEER_MAX_FRAME_LEN: u32 = MIN_MAX_FRAME_LEN;

/// Hello metadata key of the random per-process instance id that tells two Edge
/// processes with one `edge_id` apart (PROTOCOL.md §4.1.2). The Edge sets it; the CP reads it.
pub const INSTANCE_ID_KEY: &str = "iop.instance_id";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_interval_zero_means_default_and_is_clamped() {
        assert_eq!(negotiated_heartbeat_interval(0), DEFAULT_HEARTBEAT_INTERVAL);
        assert_eq!(negotiated_heartbeat_interval(10), MIN_HEARTBEAT_INTERVAL);
        assert_eq!(
            negotiated_heartbeat_interval(u32::MAX),
            MAX_HEARTBEAT_INTERVAL
        );
        assert_eq!(
            negotiated_heartbeat_interval(2_500),
            Duration::from_millis(2_500)
        );
    }
}

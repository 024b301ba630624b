//! Protocol limits and defaults of SPEC §7, shared by both ends.
//!
//! Every one of these is a default: each side's config struct lets the user change it.

use std::time::Duration;

pub use crate::outbound::DEFAULT_OUTBOUND_CAP;
pub use iop_proto::{DEFAULT_MAX_FRAME_LEN, PRE_HELLO_MAX_FRAME_LEN, PROTOCOL_VERSION};

/// Default heartbeat interval chosen by the Control Plane.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(5_000);
/// Shortest heartbeat interval a Control Plane may choose.
pub const MIN_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(1_000);
/// Longest heartbeat interval a Control Plane may choose.
pub const MAX_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(60_000);
/// Silent heartbeat intervals after which a side declares its peer dead.
pub const LIVENESS_INTERVALS: u32 = 3;
/// How long the Control Plane waits for a hello, and the Edge for its answer.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the Control Plane waits for a status response.
pub const DEFAULT_STATUS_TIMEOUT: Duration = Duration::from_secs(10);
/// In-flight status requests per Edge session.
pub const DEFAULT_MAX_INFLIGHT_STATUS: usize = 64;
/// In-flight commands per Edge, carried-over commands included.
pub const DEFAULT_MAX_INFLIGHT_COMMANDS: usize = 256;
/// Command timeout when a request says 0.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an Edge remembers a finished command id.
pub const DEFAULT_COMMAND_RETENTION: Duration = Duration::from_secs(600);
/// How many finished command ids an Edge remembers at most.
pub const DEFAULT_MAX_RETAINED_COMMANDS: usize = 4_096;
/// Connections one Control Plane accepts at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 20_000;
/// First reconnect backoff step.
pub const DEFAULT_BACKOFF_BASE: Duration = Duration::from_millis(250);
/// Longest reconnect backoff.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// `retry_after_ms` sent with `GoAway{SUPERSEDED}`.
pub const DEFAULT_RETRY_AFTER_SUPERSEDED: Duration = Duration::from_secs(5);
/// `retry_after_ms` sent with `DRAINING` (hello rejection or `GoAway`).
pub const DEFAULT_RETRY_AFTER_DRAINING: Duration = Duration::from_secs(10);
/// `retry_after_ms` sent with `GoAway{OVERLOADED}`.
pub const DEFAULT_RETRY_AFTER_OVERLOADED: Duration = Duration::from_secs(10);
/// Longest `command_id`, in bytes.
pub const MAX_COMMAND_ID_LEN: usize = 128;

/// Clamps a heartbeat interval from a hello response: 0 means the default, anything
/// else is clamped to 1–60 s (SPEC §4.2).
pub fn negotiated_heartbeat_interval(heartbeat_interval_ms: u32) -> Duration {
    if heartbeat_interval_ms == 0 {
        return DEFAULT_HEARTBEAT_INTERVAL;
    }
    Duration::from_millis(u64::from(heartbeat_interval_ms))
        .clamp(MIN_HEARTBEAT_INTERVAL, MAX_HEARTBEAT_INTERVAL)
}

/// The smallest `max_frame_len` an Edge accepts in a hello response: the 64 KiB
/// pre-hello limit. A CP that took the hello under that cap cannot accept less after
/// it (SPEC §4.1); far below it not even a heartbeat or a command answer fits and the
/// session would be mute, so the Edge treats it as a protocol error.
pub const MIN_PEER_MAX_FRAME_LEN: u32 = PRE_HELLO_MAX_FRAME_LEN;

/// Hello metadata key of the random per-process instance id that tells two Edge
/// processes with one `edge_id` apart (SPEC §4.1.2). The Edge sets it; the CP reads it.
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

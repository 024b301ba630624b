//! Every limit, timeout and policy knob of the Control Plane endpoint.

use std::time::Duration;

use super::record::RecordLimits;
use crate::limits;
use crate::time::WallClock;

/// What the Control Plane does when a hello arrives for an `edge_id` that already has a
/// live session (PROTOCOL.md §4.1.2 step 6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DuplicatePolicy {
    /// Accept the new session; the old one gets `GoAway{SUPERSEDED, retry_after_ms}` and
    /// is closed. The default: a reconnecting Edge whose old connection is half-open is
    /// never locked out.
    #[default]
    Replace,
    /// Refuse the new hello with `DUPLICATE_EDGE` and `retry_after_ms`.
    Reject,
}

/// Configuration of a [`ControlPlane`](super::ControlPlane).
///
/// `Default` gives the PROTOCOL.md §7 defaults. The enrolment policy is not here: it is
/// passed to [`ControlPlane::new`](super::ControlPlane::new) and can be replaced at
/// run time.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CpConfig {
    /// Largest frame body accepted once the hello is accepted, sent to the Edge as
    /// `max_frame_len` in the hello response. Also the largest frame sent.
    pub max_frame_len: u32,
    /// Largest frame body accepted before the hello is accepted (256 KiB, a protocol
    /// constant: not lower, or the largest legal hello would be refused).
    pub pre_hello_max_frame_len: u32,
    /// Caps checked on every frame before it is decoded (PROTOCOL.md §7 amplification caps).
    pub decode_limits: iop_proto::DecodeLimits,
    /// How long a new connection may take to send its hello.
    pub hello_timeout: Duration,
    /// Heartbeat interval offered to Edges (clamped to 1–60 s).
    pub heartbeat_interval: Duration,
    /// Silent intervals after which the CP shows an Edge as
    /// [`Reachability::Unreachable`](super::Reachability::Unreachable). Must be below
    /// `liveness_intervals` to have any effect.
    pub unreachable_intervals: u32,
    /// Silent intervals after which the session ends with `GoAway{HEARTBEAT_TIMEOUT}`.
    pub liveness_intervals: u32,
    /// How long a status request may stay unanswered.
    pub status_timeout: Duration,
    /// Status requests in flight per session.
    pub max_inflight_status: usize,
    /// Unfinished commands per Edge (carried-over ones included).
    pub max_inflight_commands: usize,
    /// Finished commands remembered per Edge (to de-duplicate replayed events and to
    /// answer [`ControlPlane::command`](super::ControlPlane::command)); the oldest is
    /// forgotten first.
    pub finished_command_retention: usize,
    /// How much of each command's history its record keeps, and how many records
    /// (the latest) keep theirs ([`ControlPlane::command_record`](super::ControlPlane::command_record)).
    pub command_records: RecordLimits,
    /// Encoded bytes queued for one connection before its peer is dropped as too slow.
    pub outbound_cap: usize,
    /// Soft limit of bytes appended by one `poll_transmit` call.
    pub transmit_chunk: usize,
    /// Connections held at once; past it a new connection gets `GoAway{OVERLOADED}`.
    pub max_connections: usize,
    /// Connections held awaiting their hello (1 024); past it a new connection gets
    /// `GoAway{OVERLOADED}`, so unauthenticated peers pin at most this many
    /// pre-hello frame buffers. A hello that passed its checks and waits on its
    /// ownership claim no longer counts: its peer is authenticated, and it is
    /// bounded by `max_connections` and the hello timeout.
    pub max_pending_hellos: usize,
    /// Sessions a command's request may be sent on and end without its response
    /// before the command is FAILED "undeliverable" and never re-sent (3).
    pub undeliverable_after_sessions: u32,
    /// Views of disconnected Edges kept (100 000); past it the one disconnected
    /// longest is forgotten, with its commands ([`CpEvent::EdgeForgotten`](super::CpEvent::EdgeForgotten)).
    pub max_disconnected_views: usize,
    /// How long the view of an Edge is kept after its last session ended (24 h).
    pub disconnected_view_ttl: Duration,
    /// How long an Edge remembers a finished command (its finished-id retention,
    /// PROTOCOL.md §4.4: 10 min). An Edge disconnected for longer than a command's
    /// timeout plus this can no longer tell that command's outcome: the command is
    /// FAILED, abandoned ([`Ending::Abandoned`](super::Ending::Abandoned)).
    /// `None` never abandons one (a cluster's replica, whose Edges may live on
    /// elsewhere).
    pub edge_command_retention: Option<Duration>,
    /// What to do with a second live session for one `edge_id`.
    pub duplicate_policy: DuplicatePolicy,
    /// `retry_after_ms` sent with `GoAway{SUPERSEDED}`.
    pub retry_after_superseded: Duration,
    /// `retry_after_ms` sent with a `DUPLICATE_EDGE` rejection.
    pub retry_after_duplicate: Duration,
    /// `retry_after_ms` sent with a `DRAINING` rejection.
    pub retry_after_draining: Duration,
    /// `retry_after_ms` sent with `GoAway{OVERLOADED}` (10 s). A connection refused
    /// for the hellos pending in a burst is told its turn instead: after those pending
    /// and those refused before it, at the recent acceptance rate; at least 200 ms and
    /// at most this.
    pub retry_after_overloaded: Duration,
    /// Lowest protocol version accepted.
    pub min_protocol_version: u32,
    /// Highest protocol version spoken.
    pub max_protocol_version: u32,
    /// Ask for a full status at once when a session is accepted and when an event gap
    /// is seen (PROTOCOL.md §4.1.6, §4.5). On by default.
    pub auto_status_on_resync: bool,
    /// Refuse a hello `BAD_CREDENTIAL` unless its connection carries a
    /// [`PeerIdentity`](super::PeerIdentity) (e.g. a verified client certificate) that
    /// names the hello's `edge_id`. Off by default.
    pub require_peer_identity: bool,
    /// Window in which supersessions of one `edge_id` are counted for flapping.
    pub flap_window: Duration,
    /// Supersessions within `flap_window` that make an `edge_id` flapping.
    pub flap_threshold: u32,
    /// Session ids start just above this. A runtime that restarts should pass something
    /// that grows across restarts (e.g. Unix ms at start × 1000) so that `session_id`
    /// stays a fencing epoch across CP restarts too.
    pub session_id_floor: u64,
    /// Epoch that makes generated command ids unique across CP restarts: generated ids
    /// read `cmd-<epoch hex>-<n>`, `n` counting from 1 per CP.
    pub command_id_epoch: u64,
    /// Maps `now` to Unix milliseconds for the view's timestamps.
    pub wall_clock: WallClock,
    /// How often the Control Plane asks each connected Edge for its full status on its
    /// own, to keep its view of the fleet's load fresh (PROTOCOL.md §4.3), each Edge at
    /// a phase of its own within the period. `None`: never (the views then change only
    /// with full statuses the application asks for). Default 10 s.
    pub status_refresh: Option<Duration>,
    /// The most of the Control Plane's own status requests (refreshes, and pages of a
    /// truncated answer) in flight at once over all Edges; a refresh due past it waits
    /// a sixteenth of the period. Default 256.
    pub max_refreshes_in_flight: usize,
    /// The most status answers (of up to 10 000 nodes each) one Edge's view is paged
    /// together from; past it the view stays partial. Default 10.
    pub max_status_pages: u32,
    /// The least time between two load updates an Edge that offers them may push
    /// (PROTOCOL.md §4.8), answered in the hello as `load_update_interval_ms`; 50 ms to
    /// 60 s. `None`: none asked for, every Edge is pulled only. Default 250 ms.
    pub load_update_interval: Option<Duration>,
}

impl Default for CpConfig {
    fn default() -> Self {
        Self {
            max_frame_len: limits::DEFAULT_MAX_FRAME_LEN,
            pre_hello_max_frame_len: limits::PRE_HELLO_MAX_FRAME_LEN,
            decode_limits: iop_proto::DecodeLimits::default(),
            hello_timeout: limits::DEFAULT_HELLO_TIMEOUT,
            heartbeat_interval: limits::DEFAULT_HEARTBEAT_INTERVAL,
            unreachable_intervals: 2,
            liveness_intervals: limits::LIVENESS_INTERVALS,
            status_timeout: limits::DEFAULT_STATUS_TIMEOUT,
            max_inflight_status: limits::MAX_INFLIGHT_STATUS,
            max_inflight_commands: limits::MAX_INFLIGHT_COMMANDS,
            finished_command_retention: 256,
            command_records: RecordLimits::default(),
            outbound_cap: limits::DEFAULT_OUTBOUND_CAP,
            transmit_chunk: 64 * 1024,
            max_connections: limits::DEFAULT_MAX_CONNECTIONS,
            max_pending_hellos: limits::MAX_PENDING_HELLOS,
            undeliverable_after_sessions: limits::MAX_UNDELIVERED_SESSIONS,
            max_disconnected_views: limits::MAX_DISCONNECTED_VIEWS,
            disconnected_view_ttl: limits::DEFAULT_DISCONNECTED_VIEW_TTL,
            edge_command_retention: Some(limits::DEFAULT_COMMAND_RETENTION),
            duplicate_policy: DuplicatePolicy::Replace,
            retry_after_superseded: limits::DEFAULT_RETRY_AFTER_SUPERSEDED,
            retry_after_duplicate: limits::DEFAULT_RETRY_AFTER_SUPERSEDED,
            retry_after_draining: limits::DEFAULT_RETRY_AFTER_DRAINING,
            retry_after_overloaded: limits::DEFAULT_RETRY_AFTER_OVERLOADED,
            min_protocol_version: limits::PROTOCOL_VERSION,
            max_protocol_version: limits::PROTOCOL_VERSION,
            auto_status_on_resync: true,
            require_peer_identity: false,
            flap_window: Duration::from_secs(60),
            flap_threshold: 3,
            session_id_floor: 0,
            command_id_epoch: 0,
            wall_clock: WallClock::default(),
            status_refresh: Some(Duration::from_secs(10)),
            max_refreshes_in_flight: 256,
            max_status_pages: 10,
            load_update_interval: Some(limits::DEFAULT_LOAD_UPDATE_INTERVAL),
        }
    }
}

/// Why a [`CpConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A frame limit is 0.
    #[error("frame limits must be above 0")]
    ZeroFrameLimit,
    /// `pre_hello_max_frame_len` is below the protocol's 256 KiB: the largest legal
    /// hello would be refused.
    #[error("pre_hello_max_frame_len {0} is below the protocol's {min}", min = limits::PRE_HELLO_MAX_FRAME_LEN)]
    PreHelloLimitTooSmall(u32),
    /// `max_frame_len` is below `pre_hello_max_frame_len`.
    #[error("max_frame_len {max} is below the pre-hello limit {pre_hello}")]
    FrameLimitBelowPreHello {
        /// `max_frame_len`.
        max: u32,
        /// `pre_hello_max_frame_len`.
        pre_hello: u32,
    },
    /// `liveness_intervals` or `unreachable_intervals` is 0: every session would end
    /// (or be unreachable) at once.
    #[error("liveness and unreachable intervals must be above 0")]
    ZeroIntervals,
    /// The protocol version range is empty or starts at 0.
    #[error("protocol versions {min}..={max} are not a range of versions above 0")]
    ProtocolRange {
        /// `min_protocol_version`.
        min: u32,
        /// `max_protocol_version`.
        max: u32,
    },
    /// `max_connections` or `max_pending_hellos` is 0: every connection would be
    /// refused.
    #[error("max_connections and max_pending_hellos must be above 0")]
    ZeroConnections,
    /// `status_refresh` is under a second.
    #[error("status_refresh must be 1 s or more")]
    StatusRefresh,
    /// `load_update_interval` is outside 50 ms..=60 s.
    #[error("load_update_interval must be within 50 ms..=60 s, or none")]
    LoadUpdateInterval,
}

impl CpConfig {
    /// Checks the values that would make the endpoint useless.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_frame_len == 0 || self.pre_hello_max_frame_len == 0 {
            return Err(ConfigError::ZeroFrameLimit);
        }
        if self.pre_hello_max_frame_len < limits::PRE_HELLO_MAX_FRAME_LEN {
            return Err(ConfigError::PreHelloLimitTooSmall(
                self.pre_hello_max_frame_len,
            ));
        }
        if self.max_frame_len < self.pre_hello_max_frame_len {
            return Err(ConfigError::FrameLimitBelowPreHello {
                max: self.max_frame_len,
                pre_hello: self.pre_hello_max_frame_len,
            });
        }
        if self.liveness_intervals == 0 || self.unreachable_intervals == 0 {
            return Err(ConfigError::ZeroIntervals);
        }
        if self.min_protocol_version == 0 || self.min_protocol_version > self.max_protocol_version {
            return Err(ConfigError::ProtocolRange {
                min: self.min_protocol_version,
                max: self.max_protocol_version,
            });
        }
        if self.max_connections == 0 || self.max_pending_hellos == 0 {
            return Err(ConfigError::ZeroConnections);
        }
        if self
            .status_refresh
            .is_some_and(|p| p < Duration::from_secs(1))
        {
            return Err(ConfigError::StatusRefresh);
        }
        if self.load_update_interval.is_some_and(|i| {
            !(limits::MIN_LOAD_UPDATE_INTERVAL..=limits::MAX_LOAD_UPDATE_INTERVAL).contains(&i)
        }) {
            return Err(ConfigError::LoadUpdateInterval);
        }
        Ok(())
    }

    /// The heartbeat interval actually offered: clamped to 1–60 s.
    pub fn negotiated_heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval.clamp(
            limits::MIN_HEARTBEAT_INTERVAL,
            limits::MAX_HEARTBEAT_INTERVAL,
        )
    }
}

/// A duration as wire milliseconds, saturating at `u32::MAX`.
pub(crate) fn ms_u32(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_nonsense_is_refused() {
        let d = CpConfig::default;
        assert_eq!(d().validate(), Ok(()));
        let c = CpConfig {
            max_frame_len: 1024,
            ..d()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::FrameLimitBelowPreHello { .. })
        ));
        let c = CpConfig {
            liveness_intervals: 0,
            ..d()
        };
        assert_eq!(c.validate(), Err(ConfigError::ZeroIntervals));
        let c = CpConfig {
            min_protocol_version: 2,
            ..d()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::ProtocolRange { min: 2, max: 1 })
        ));
        let c = CpConfig {
            max_connections: 0,
            ..d()
        };
        assert_eq!(c.validate(), Err(ConfigError::ZeroConnections));
        let c = CpConfig {
            pre_hello_max_frame_len: 0,
            ..d()
        };
        assert_eq!(c.validate(), Err(ConfigError::ZeroFrameLimit));
        let c = CpConfig {
            pre_hello_max_frame_len: 64 * 1024,
            ..d()
        };
        assert_eq!(
            c.validate(),
            Err(ConfigError::PreHelloLimitTooSmall(64 * 1024))
        );
        let c = CpConfig {
            status_refresh: Some(Duration::ZERO),
            ..d()
        };
        assert_eq!(c.validate(), Err(ConfigError::StatusRefresh));
        let off = CpConfig {
            status_refresh: None,
            ..d()
        };
        assert_eq!(off.validate(), Ok(()));
    }
}

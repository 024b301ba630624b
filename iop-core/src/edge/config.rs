//! Configuration of an [`Edge`](super::Edge): identity, operations, limits, timeouts.

use std::collections::BTreeMap;
use std::time::Duration;

use iop_proto::DecodeLimits;

use super::secret::Secret;
use crate::WallClock;
use crate::limits;
use crate::registry::TargetLevel;

/// Everything an Edge needs to know before it dials. Every limit has a SPEC §7 default.
///
/// Built with [`EdgeConfig::new`] (or `Default`), then [`with_operation`](Self::with_operation)
/// and plain field assignments; `#[non_exhaustive]`, so a later field is not a
/// breaking change.
///
/// ```
/// use std::time::Duration;
/// use iop_core::edge::{EdgeConfig, TargetLevel};
///
/// let mut config = EdgeConfig::new("edge-1").with_operation("edge.ping", TargetLevel::Edge);
/// config.credential = "enrolment secret".into();
/// config.backoff_max = Duration::from_secs(5);
/// assert_eq!(config.max_inflight_commands, 256); // SPEC §7 default
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EdgeConfig {
    /// This Edge's id (`[A-Za-z0-9._-]{1,128}`).
    pub edge_id: String,
    /// The enrollment credential sent in the hello.
    pub credential: Secret,
    /// Free-form software version sent in the hello.
    pub software_version: String,
    /// Extra hello metadata (identity / operational hints only, never secrets). The
    /// Edge adds `iop.instance_id` itself.
    pub metadata: BTreeMap<String, String>,
    /// The operations this Edge accepts, advertised in the hello, and their target level.
    pub operations: BTreeMap<String, TargetLevel>,
    /// Seed of every random choice (backoff jitter, instance id).
    pub seed: u64,
    /// Maps the driver's monotonic time to wall-clock ms for wire fields.
    pub wall_clock: WallClock,
    /// Largest frame body this Edge accepts from the CP.
    pub max_frame_len: u32,
    /// Caps checked on every received frame before it is decoded (SPEC §7). A frame
    /// that breaks one — for example a `command_id` over 128 bytes — is a protocol
    /// error, not a command rejection.
    pub decode_limits: DecodeLimits,
    /// Bytes queued for the CP before it is considered too slow.
    pub outbound_cap: usize,
    /// How long the CP has to answer the hello.
    pub hello_timeout: Duration,
    /// First reconnect backoff step.
    pub backoff_base: Duration,
    /// Longest reconnect backoff.
    pub backoff_max: Duration,
    /// In-flight commands (carried-over included) before new ones are rejected BUSY.
    pub max_inflight_commands: usize,
    /// Command timeout when a request says 0.
    pub default_command_timeout: Duration,
    /// How long a finished command id is remembered.
    pub command_retention: Duration,
    /// How many finished command ids are remembered at most.
    pub max_retained_commands: usize,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        Self {
            edge_id: String::new(),
            credential: Secret::default(),
            software_version: String::new(),
            metadata: BTreeMap::new(),
            operations: BTreeMap::new(),
            seed: 0,
            wall_clock: WallClock::default(),
            max_frame_len: limits::DEFAULT_MAX_FRAME_LEN,
            decode_limits: DecodeLimits::default(),
            outbound_cap: limits::DEFAULT_OUTBOUND_CAP,
            hello_timeout: limits::DEFAULT_HELLO_TIMEOUT,
            backoff_base: limits::DEFAULT_BACKOFF_BASE,
            backoff_max: limits::DEFAULT_BACKOFF_MAX,
            max_inflight_commands: limits::DEFAULT_MAX_INFLIGHT_COMMANDS,
            default_command_timeout: limits::DEFAULT_COMMAND_TIMEOUT,
            command_retention: limits::DEFAULT_COMMAND_RETENTION,
            max_retained_commands: limits::DEFAULT_MAX_RETAINED_COMMANDS,
        }
    }
}

impl EdgeConfig {
    /// A default config for `edge_id`.
    pub fn new(edge_id: impl Into<String>) -> Self {
        Self {
            edge_id: edge_id.into(),
            ..Self::default()
        }
    }

    /// Adds an operation the Edge accepts.
    pub fn with_operation(mut self, name: impl Into<String>, level: TargetLevel) -> Self {
        self.operations.insert(name.into(), level);
        self
    }
}

/// Why an [`EdgeConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `edge_id` breaks the id grammar.
    #[error("invalid edge_id: {0}")]
    EdgeId(#[source] crate::ids::IdError),
    /// An operation name is empty or longer than 128 bytes.
    #[error("invalid operation name {0:?}: must be 1-128 bytes")]
    OperationName(String),
    /// More operations than a hello may carry (256).
    #[error("{0} operations configured, a hello carries at most 256")]
    TooManyOperations(usize),
    /// A metadata key the Edge sets itself was given.
    #[error("metadata key {0:?} is reserved for the Edge")]
    ReservedMetadata(String),
}

pub use crate::limits::INSTANCE_ID_KEY;

/// Most operations a hello carries (SPEC §7).
pub(crate) const MAX_OPERATIONS: usize = 256;

impl EdgeConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        crate::ids::validate_id("edge_id", &self.edge_id).map_err(ConfigError::EdgeId)?;
        if self.operations.len() > MAX_OPERATIONS {
            return Err(ConfigError::TooManyOperations(self.operations.len()));
        }
        if let Some(name) = self
            .operations
            .keys()
            .find(|n| n.is_empty() || n.len() > 128)
        {
            return Err(ConfigError::OperationName(name.clone()));
        }
        if self.metadata.contains_key(INSTANCE_ID_KEY) {
            return Err(ConfigError::ReservedMetadata(INSTANCE_ID_KEY.to_owned()));
        }
        Ok(())
    }
}

//! Configuration of an [`Edge`](super::Edge): identity, operations, limits, timeouts.

use std::collections::BTreeMap;
use std::time::Duration;

use iop_proto::{DecodeLimits, ExceedsLimit, Message};

use super::secret::Secret;
use crate::WallClock;
use crate::limits;
use crate::registry::TargetLevel;

/// Everything an Edge needs to know before it dials. Every limit has a PROTOCOL.md §7 default.
///
/// Built with [`EdgeConfig::new`] (which takes the seed: there is no default one),
/// then [`with_operation`](Self::with_operation) and plain field assignments;
/// `#[non_exhaustive]`, so a later field is not a breaking change. What a hello
/// carries is checked against PROTOCOL.md §7 when the [`Edge`](super::Edge) is built.
///
/// ```
/// use std::time::Duration;
/// use iop_core::edge::{EdgeConfig, TargetLevel};
///
/// let mut config = EdgeConfig::new("edge-1", 7).with_operation("edge.ping", TargetLevel::Edge);
/// config.credential = "enrolment secret".into();
/// config.backoff_max = Duration::from_secs(5);
/// assert_eq!(config.max_inflight_commands, 256); // PROTOCOL.md §7 default
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
    /// Seed of every random choice (backoff jitter, instance id); see [`EdgeConfig::new`].
    pub seed: u64,
    /// Maps the driver's monotonic time to wall-clock ms for wire fields.
    pub wall_clock: WallClock,
    /// Largest frame body this Edge accepts from the CP.
    pub max_frame_len: u32,
    /// Caps checked on every received frame before it is decoded (PROTOCOL.md §7). A frame
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
    /// Offer load updates in the hello (PROTOCOL.md §4.8) when the registry tells its
    /// load ([`EdgeRegistry::reports_load`](super::EdgeRegistry::reports_load)); the
    /// Control Plane chooses the interval. Default `true`.
    pub load_updates: bool,
}

impl EdgeConfig {
    /// A config for `edge_id` with the PROTOCOL.md §7 defaults and `seed` for every random
    /// choice: the backoff jitter and the `iop.instance_id` that tells two processes
    /// with one edge id apart. There is no default seed: two Edges given the same one
    /// share an instance id and back off in step, so give each process its own (the
    /// runtime crates offer `process_seed()`: the start time and the process id).
    pub fn new(edge_id: impl Into<String>, seed: u64) -> Self {
        Self {
            edge_id: edge_id.into(),
            credential: Secret::default(),
            software_version: String::new(),
            metadata: BTreeMap::new(),
            operations: BTreeMap::new(),
            seed,
            wall_clock: WallClock::default(),
            max_frame_len: limits::DEFAULT_MAX_FRAME_LEN,
            decode_limits: DecodeLimits::default(),
            outbound_cap: limits::DEFAULT_OUTBOUND_CAP,
            hello_timeout: limits::DEFAULT_HELLO_TIMEOUT,
            backoff_base: limits::DEFAULT_BACKOFF_BASE,
            backoff_max: limits::DEFAULT_BACKOFF_MAX,
            max_inflight_commands: limits::MAX_INFLIGHT_COMMANDS,
            default_command_timeout: limits::DEFAULT_COMMAND_TIMEOUT,
            command_retention: limits::DEFAULT_COMMAND_RETENTION,
            max_retained_commands: limits::MAX_RETAINED_COMMANDS,
            load_updates: true,
        }
    }

    /// Adds an operation the Edge accepts.
    pub fn with_operation(mut self, name: impl Into<String>, level: TargetLevel) -> Self {
        self.operations.insert(name.into(), level);
        self
    }
}

/// Why an [`EdgeConfig`] cannot be used. Everything a hello carries is checked when
/// the Edge is built, so a hello the Control Plane would refuse is never sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `edge_id` breaks the id grammar.
    #[error("invalid edge_id: {0}")]
    EdgeId(#[source] crate::ids::IdError),
    /// An operation name is empty or longer than 128 bytes.
    #[error("invalid operation name {0:?}: must be 1-128 bytes")]
    OperationName(String),
    /// A metadata key is empty.
    #[error("a metadata key is empty")]
    EmptyMetadataKey,
    /// A metadata key the Edge sets itself was given.
    #[error("metadata key {0:?} is reserved for the Edge")]
    ReservedMetadata(String),
    /// A field is over what a hello may carry (PROTOCOL.md §7); `field` names the config
    /// field (`EdgeConfig::metadata.value`, `EdgeConfig::max_retained_commands`, ...).
    #[error(transparent)]
    ExceedsLimit(#[from] ExceedsLimit),
    /// `max_frame_len` is below the largest frame a Control Plane may send within the
    /// PROTOCOL.md §7 caps (a status request for 10 000 ids): such frames would be refused.
    #[error("max_frame_len {value} is below {min}, the largest frame a control plane may send")]
    MaxFrameLenTooSmall {
        /// The configured limit.
        value: u32,
        /// The least it may be.
        min: usize,
    },
}

pub use crate::limits::INSTANCE_ID_KEY;

/// Bytes the hello gives the Edge's own `iop.instance_id` entry (16 hex digits).
pub(crate) const INSTANCE_ID_LEN: usize = 16;

impl EdgeConfig {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        crate::ids::validate_id("edge_id", &self.edge_id).map_err(ConfigError::EdgeId)?;
        let over = |field, size, limit| Err(ExceedsLimit::entries(field, size, limit).into());
        let long = |field, size, limit| Err(ExceedsLimit::bytes(field, size, limit).into());
        if self.operations.len() > limits::MAX_HELLO_OPERATIONS {
            return over(
                "EdgeConfig::operations",
                self.operations.len(),
                limits::MAX_HELLO_OPERATIONS,
            );
        }
        if let Some(name) = self
            .operations
            .keys()
            .find(|n| n.is_empty() || n.len() > limits::MAX_ID_LEN)
        {
            return Err(ConfigError::OperationName(name.clone()));
        }
        if self.metadata.contains_key(INSTANCE_ID_KEY) {
            return Err(ConfigError::ReservedMetadata(INSTANCE_ID_KEY.to_owned()));
        }
        // One entry is the Edge's own instance id.
        let entries = self.metadata.len() + 1;
        if entries > limits::MAX_HELLO_METADATA_ENTRIES {
            return over(
                "EdgeConfig::metadata (with iop.instance_id)",
                entries,
                limits::MAX_HELLO_METADATA_ENTRIES,
            );
        }
        for (key, value) in &self.metadata {
            if key.is_empty() {
                return Err(ConfigError::EmptyMetadataKey);
            }
            if key.len() > limits::MAX_ID_LEN {
                return long("EdgeConfig::metadata.key", key.len(), limits::MAX_ID_LEN);
            }
            if value.len() > limits::MAX_HELLO_METADATA_VALUE_LEN {
                return long(
                    "EdgeConfig::metadata.value",
                    value.len(),
                    limits::MAX_HELLO_METADATA_VALUE_LEN,
                );
            }
        }
        if self.software_version.len() > limits::MAX_SOFTWARE_VERSION_LEN {
            return long(
                "EdgeConfig::software_version",
                self.software_version.len(),
                limits::MAX_SOFTWARE_VERSION_LEN,
            );
        }
        if self.credential.expose().len() > limits::MAX_TEXT_LEN {
            return long(
                "EdgeConfig::credential",
                self.credential.expose().len(),
                limits::MAX_TEXT_LEN,
            );
        }
        // Every held command is listed in the hello: as many as may run, and as many
        // finished ones as are remembered.
        if self.max_inflight_commands > limits::MAX_INFLIGHT_COMMANDS {
            return over(
                "EdgeConfig::max_inflight_commands",
                self.max_inflight_commands,
                limits::MAX_INFLIGHT_COMMANDS,
            );
        }
        if self.max_retained_commands > limits::MAX_RETAINED_COMMANDS {
            return over(
                "EdgeConfig::max_retained_commands",
                self.max_retained_commands,
                limits::MAX_RETAINED_COMMANDS,
            );
        }
        if (self.max_frame_len as usize) < limits::MAX_CONTROL_PLANE_FRAME_LEN {
            return Err(ConfigError::MaxFrameLenTooSmall {
                value: self.max_frame_len,
                min: limits::MAX_CONTROL_PLANE_FRAME_LEN,
            });
        }
        let worst = self.worst_case_hello_len();
        if worst > limits::PRE_HELLO_MAX_FRAME_LEN as usize {
            return long(
                "hello (worst case)",
                worst,
                limits::PRE_HELLO_MAX_FRAME_LEN as usize,
            );
        }
        Ok(())
    }

    /// Body bytes of the largest hello this config makes: every command it may hold
    /// listed with a 128-byte id.
    pub(crate) fn worst_case_hello_len(&self) -> usize {
        let mut hello = iop_proto::EdgeHelloRequest {
            edge_id: self.edge_id.clone(),
            protocol_version: u32::MAX,
            software_version: self.software_version.clone(),
            operations: self.operations.keys().cloned().collect(),
            metadata: self.metadata.clone(),
            credential: self.credential.expose().to_vec(),
            inflight_command_ids: Vec::new(),
            load_updates: true,
        };
        hello
            .metadata
            .insert(INSTANCE_ID_KEY.to_owned(), "0".repeat(INSTANCE_ID_LEN));
        let ids = self.max_inflight_commands + self.max_retained_commands;
        let id_field = 1 + 2 + limits::MAX_ID_LEN;
        let body = hello.encoded_len() + ids * id_field;
        // The envelope's `hello_request` key and length.
        iop_proto::encoding::delimited_len(body)
    }
}

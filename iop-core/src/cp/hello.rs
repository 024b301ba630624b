//! The hello checks of SPEC §4.1.2 that depend only on the hello itself (steps 1–3).

use std::time::Duration;

use iop_proto::{EdgeHelloRequest, HelloRejectReason};

use crate::ids::{MAX_ID_LEN, validate_id};

use super::config::CpConfig;

/// Operations one hello may advertise (SPEC §7).
pub const MAX_HELLO_OPERATIONS: usize = 256;
/// Entries of one map (SPEC §7).
pub const MAX_MAP_ENTRIES: usize = 64;
/// Length of a message or metadata value (SPEC §7).
pub const MAX_TEXT_LEN: usize = 4 * 1024;
/// Ids one hello may list in `inflight_command_ids`: the in-flight limit plus the
/// finished-id retention (SPEC §7).
pub const MAX_HELLO_INFLIGHT_IDS: usize =
    crate::limits::DEFAULT_MAX_INFLIGHT_COMMANDS + crate::limits::DEFAULT_MAX_RETAINED_COMMANDS;

/// A refused hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub(crate) reason: HelloRejectReason,
    pub(crate) message: String,
    pub(crate) retry_after: Duration,
}

impl Rejection {
    pub(crate) fn new(reason: HelloRejectReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            retry_after: Duration::ZERO,
        }
    }
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::new(HelloRejectReason::InvalidHello, message)
}

/// Steps 1–3: empty id, then grammar and limits, then the version range. Returns the
/// negotiated protocol version.
pub(crate) fn check_hello(config: &CpConfig, hello: &EdgeHelloRequest) -> Result<u32, Rejection> {
    if hello.edge_id.trim().is_empty() {
        return Err(Rejection::new(
            HelloRejectReason::EmptyEdgeId,
            "edge_id is empty",
        ));
    }
    validate_id("edge_id", &hello.edge_id).map_err(|e| invalid(e.to_string()))?;
    if hello.protocol_version == 0 {
        return Err(invalid("protocol_version is 0"));
    }
    if hello.operations.len() > MAX_HELLO_OPERATIONS {
        return Err(invalid(format!(
            "more than {MAX_HELLO_OPERATIONS} operations"
        )));
    }
    if hello
        .operations
        .iter()
        .any(|op| op.is_empty() || op.len() > MAX_ID_LEN)
    {
        return Err(invalid(format!(
            "operation names must be 1 to {MAX_ID_LEN} bytes"
        )));
    }
    if hello.metadata.len() > MAX_MAP_ENTRIES {
        return Err(invalid(format!(
            "more than {MAX_MAP_ENTRIES} metadata entries"
        )));
    }
    if hello
        .metadata
        .iter()
        .any(|(k, v)| k.is_empty() || k.len() > MAX_ID_LEN || v.len() > MAX_TEXT_LEN)
    {
        return Err(invalid("metadata key or value too long"));
    }
    if hello.software_version.len() > MAX_TEXT_LEN {
        return Err(invalid("software_version too long"));
    }
    if hello.inflight_command_ids.len() > MAX_HELLO_INFLIGHT_IDS
        || hello
            .inflight_command_ids
            .iter()
            .any(|id| id.is_empty() || id.len() > MAX_ID_LEN)
    {
        return Err(invalid("bad inflight_command_ids"));
    }
    let negotiated = hello.protocol_version.min(config.max_protocol_version);
    if negotiated < config.min_protocol_version {
        return Err(Rejection::new(
            HelloRejectReason::UnsupportedProtocolVersion,
            format!(
                "protocol version {} is not in {}..={}",
                hello.protocol_version, config.min_protocol_version, config.max_protocol_version
            ),
        ));
    }
    Ok(negotiated)
}

//! The hello checks of PROTOCOL.md §4.1.2 that depend only on the hello itself (steps 1–3).

use std::time::Duration;

use iop_proto::limits::send;
use iop_proto::{EdgeHelloRequest, HelloRejectReason};

use crate::ids::validate_id;

use super::config::CpConfig;

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
    // The hello's own caps (PROTOCOL.md §7), the same check the Edge makes before sending.
    send::hello_request(hello).map_err(|e| invalid(e.to_string()))?;
    if hello.operations.iter().any(String::is_empty) {
        return Err(invalid("an operation name is empty"));
    }
    if hello.metadata.keys().any(String::is_empty) {
        return Err(invalid("a metadata key is empty"));
    }
    if hello.inflight_command_ids.iter().any(String::is_empty) {
        return Err(invalid("an inflight command id is empty"));
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

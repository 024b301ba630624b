//! `Debug` for messages that carry secrets: the secret is never printed.

use crate::EdgeHelloRequest;

impl std::fmt::Debug for EdgeHelloRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeHelloRequest")
            .field("edge_id", &self.edge_id)
            .field("protocol_version", &self.protocol_version)
            .field("software_version", &self.software_version)
            .field("operations", &self.operations)
            .field("metadata", &self.metadata)
            .field("credential", &"<redacted>")
            .field("inflight_command_ids", &self.inflight_command_ids)
            .finish()
    }
}

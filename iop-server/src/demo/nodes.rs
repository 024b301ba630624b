//! The demo's Edges and their nodes.

use iop_core::registry::{NodeConfig, NodeEndpoint, ProviderCategory, ProviderConfig};

/// One demo Edge: id, credential, nodes.
pub(super) struct DemoEdge {
    /// Its id.
    pub(super) edge_id: &'static str,
    /// Its enrolment credential.
    pub(super) credential: &'static str,
    /// Short prefix of its node ids.
    pub(super) prefix: &'static str,
}

/// The three Edges of the demo.
pub(super) const EDGES: [DemoEdge; 3] = [
    DemoEdge {
        edge_id: "edge-a",
        credential: "demo-credential-a",
        prefix: "a",
    },
    DemoEdge {
        edge_id: "edge-b",
        credential: "demo-credential-b",
        prefix: "b",
    },
    DemoEdge {
        edge_id: "edge-c",
        credential: "demo-credential-c",
        prefix: "c",
    },
];

/// The private address every demo node is given (must never be seen outside).
pub(super) fn private_address(node_id: &str) -> String {
    format!("10.77.0.1:7000/{node_id}")
}

/// The private token every demo node is given (must never be seen outside).
pub(super) fn private_token(node_id: &str) -> String {
    format!("tok-SECRET-{node_id}")
}

/// A GPU node and a CPU node for an Edge.
pub(super) fn nodes(prefix: &str) -> Vec<NodeConfig> {
    let gpu = format!("{prefix}-gpu-1");
    let cpu = format!("{prefix}-cpu-1");
    vec![
        NodeConfig::new(gpu.clone())
            .with_label("zone", "a")
            .with_revision("r1")
            .with_model("llama-3-8b")
            .with_endpoint(NodeEndpoint::new(
                private_address(&gpu),
                private_token(&gpu),
            ))
            .with_provider(
                ProviderConfig::new("llama", ProviderCategory::LocalInference, 4, 1)
                    .with_model("llama-3-8b"),
            ),
        NodeConfig::new(cpu.clone())
            .with_label("zone", "b")
            .with_revision("r1")
            .with_model("claude-sonnet")
            .with_endpoint(NodeEndpoint::new(
                private_address(&cpu),
                private_token(&cpu),
            ))
            .with_provider(
                ProviderConfig::new("claude", ProviderCategory::Api, 8, 2)
                    .with_model("claude-sonnet"),
            )
            .with_provider(ProviderConfig::new("aider", ProviderCategory::Cli, 1, 0)),
    ]
}

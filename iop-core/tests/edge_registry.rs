//! The Edge with the real `NodeRegistry`: snapshots, relayed transitions, selectors.

use iop_core::NodeRegistry;
use iop_core::edge::{EdgeEvent, Target};
use iop_core::proto::{
    Body, CommandRejectReason, EdgeStatusRequest, Envelope, NodeEventKind, NodeState,
};
use iop_core::registry::{
    NodeConfig, NodeEndpoint, ProviderCategory, ProviderConfig, ReadyOutcome,
};
use iop_core::testing::scripted::control_plane::*;

fn registry() -> NodeRegistry {
    let mut reg = NodeRegistry::new();
    for (id, zone) in [("gpu-1", "a"), ("gpu-2", "b")] {
        let node = NodeConfig::new(id)
            .with_label("zone", zone)
            .with_endpoint(NodeEndpoint::new("10.9.8.7:7000", "node-token-SECRET"))
            .with_provider(ProviderConfig::new(
                "llama",
                ProviderCategory::LocalInference,
                2,
                1,
            ));
        let _ = reg.configure(node, ORIGIN_UNIX_MS).unwrap();
    }
    reg
}

#[test]
fn transitions_are_relayed_and_status_comes_from_the_registry() {
    let mut h = Harness::new(config(), registry());
    // NODE_CONFIGURED of the setup happened while disconnected: not replayed.
    let frames = h.connect_and_accept(1);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        as_node_event(&frames[0]).kind,
        NodeEventKind::EdgeReady as i32
    );

    let generation = h
        .edge
        .registry_mut()
        .connect("gpu-1", ORIGIN_UNIX_MS + 5)
        .unwrap();
    assert_eq!(
        h.edge
            .registry_mut()
            .mark_ready("gpu-1", generation, ORIGIN_UNIX_MS + 6),
        ReadyOutcome::Ready
    );
    h.deliver(Envelope::correlated(3, EdgeStatusRequest::default()));
    let frames = h.flush();
    assert_eq!(frames.len(), 2, "{frames:?}");
    let ready = as_node_event(&frames[0]);
    assert_eq!(
        (
            ready.node_id.as_str(),
            ready.kind,
            ready.generation,
            ready.sequence
        ),
        (
            "gpu-1",
            NodeEventKind::NodeReady as i32,
            generation.get(),
            2
        )
    );
    let Some(Body::StatusResponse(status)) = &frames[1].body else {
        panic!("{frames:?}")
    };
    assert_eq!(frames[1].correlation_id, 3);
    assert_eq!(status.registry_revision, h.edge.registry().revision());
    let states: Vec<_> = status
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.connected, n.state))
        .collect();
    assert_eq!(
        states,
        [
            ("gpu-1", true, NodeState::Ready as i32),
            ("gpu-2", false, NodeState::Configured as i32)
        ]
    );
    // No node address or token ever leaves the Edge.
    let mut wire = Vec::new();
    for f in &frames {
        iop_core::proto::encode_frame(f, u32::MAX, &mut wire).unwrap();
    }
    for secret in [&b"10.9.8.7"[..], b"node-token-SECRET"] {
        assert!(!wire.windows(secret.len()).any(|w| w == secret));
    }
}

#[test]
fn selectors_resolve_against_the_registry() {
    let mut h = Harness::new(config(), registry());
    h.connect_and_accept(1);
    h.events();
    let cases = [
        ("a", "label:zone=b", Target::Nodes(vec!["gpu-2".into()])),
        (
            "b",
            "*",
            Target::Nodes(vec!["gpu-1".into(), "gpu-2".into()]),
        ),
        (
            "c",
            "provider:gpu-1/llama",
            Target::Provider {
                node_id: "gpu-1".into(),
                provider_id: "llama".into(),
            },
        ),
    ];
    for (id, selector, expected) in cases {
        let frames = h.command(cmd(id, "node.restart", selector));
        assert!(as_command_response(&frames[0]).accepted, "{selector}");
        match &h.events()[..] {
            [EdgeEvent::CommandReceived { target, .. }] => assert_eq!(*target, expected),
            other => panic!("{other:?}"),
        }
    }
    for selector in ["provider:gpu-1/nope", "node:gpu-9", "label:zone=c"] {
        let frames = h.command(cmd("d", "node.restart", selector));
        let r = as_command_response(&frames[0]);
        assert_eq!(
            r.reject_reason,
            CommandRejectReason::NoMatchingTarget as i32,
            "{selector}"
        );
    }
}

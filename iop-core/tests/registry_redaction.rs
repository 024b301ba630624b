//! PROTOCOL.md §5.4: random secrets placed in a node's private endpoint never appear in the
//! encoded bytes of any snapshot or event, nor in any `Debug` output.

use iop_core::proto::Message;
use iop_core::registry::{
    Candidate, EdgeEventKind, EventSequencer, LeaseKind, NodeConfig, NodeEndpoint, NodeRegistry,
    ProviderCategory, ProviderConfig,
};
use proptest::prelude::*;

/// Secrets long and random enough that a chance match in public output is impossible.
fn secret() -> impl Strategy<Value = String> {
    "[A-Za-z0-9+/=:._-]{16,40}".prop_map(|s| format!("S3CR3T{s}"))
}

fn assert_absent(haystack: &[u8], secrets: &[String], what: &str) {
    for s in secrets {
        let needle = s.as_bytes();
        assert!(
            !haystack.windows(needle.len()).any(|w| w == needle),
            "{what} contains a secret"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(
                "proptest-regressions/registry_redaction.txt",
            ),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn endpoint_secrets_never_leave_the_registry(
        address in secret(),
        token in secret(),
        transport_value in secret(),
        nodes in 1usize..4,
        connect in proptest::collection::vec(any::<bool>(), 4),
    ) {
        let secrets = vec![address.clone(), token.clone(), transport_value.clone()];
        let endpoint = NodeEndpoint::new(address.clone(), token.clone())
            .with_transport("proxy", transport_value.clone());
        let mut reg = NodeRegistry::new();
        let mut wire = Vec::new();
        let mut seq = EventSequencer::new();
        wire.extend(seq.edge_event("edge", EdgeEventKind::Ready, 1, "up").encode_to_vec());
        for (i, connect_it) in connect.iter().enumerate().take(nodes) {
            let id = format!("n{i}");
            let config = NodeConfig::new(&id)
                .with_label("zone", "a")
                .with_revision("r1")
                .with_endpoint(endpoint.clone())
                .with_provider(ProviderConfig::new("p", ProviderCategory::Api, 2, 1));
            assert_absent(format!("{config:?}").as_bytes(), &secrets, "NodeConfig Debug");
            let _ = reg.configure(config, 2).expect("configure");
            if *connect_it {
                let g = reg.connect(&id, 3).expect("connect");
                let _ = reg.mark_ready(&id, g, 4);
                let _lease = reg.admit(&id, "p", LeaseKind::LongContext);
                let _ = reg.enqueue(LeaseKind::Normal, vec![Candidate::new(&id, "p")]);
            }
        }
        let _ = reg.remove("n0", 5);
        while let Some(event) = reg.poll_event() {
            assert_absent(format!("{event:?}").as_bytes(), &secrets, "RegistryEvent Debug");
            let stamped = seq.next("edge", &event);
            wire.extend(stamped.encode_to_vec());
            assert_absent(format!("{stamped:?}").as_bytes(), &secrets, "EdgeNodeEvent Debug");
        }
        let status = reg.snapshot("edge", 6, &[] as &[&str], usize::MAX);
        wire.extend(status.encode_to_vec());
        assert_absent(&wire, &secrets, "encoded snapshots and events");
        assert_absent(format!("{status:?}").as_bytes(), &secrets, "snapshot Debug");
        assert_absent(format!("{reg:?}").as_bytes(), &secrets, "NodeRegistry Debug");
        assert_absent(format!("{reg:#?}").as_bytes(), &secrets, "NodeRegistry pretty Debug");
        assert_absent(format!("{endpoint:?}").as_bytes(), &secrets, "NodeEndpoint Debug");
        // The Edge itself can still read them back.
        if let Some(config) = reg.node_config("n1") {
            prop_assert_eq!(config.endpoint.token(), token.as_str());
            prop_assert_eq!(config.endpoint.address(), address.as_str());
        }
    }
}

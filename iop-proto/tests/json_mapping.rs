//! The `serde` feature follows the protobuf JSON mapping (what other implementations
//! and the admin API's clients expect).
#![cfg(feature = "serde")]

use iop_proto::{
    CommandPhase, EdgeCommandEvent, EdgeNodeSnapshot, EdgeStatusResponse, NodeState,
    ProviderCategory, ProviderSnapshot,
};

#[test]
fn status_response_uses_camel_case_enum_names_and_string_u64() {
    let status = EdgeStatusResponse {
        edge_id: "edge-1".into(),
        observed_at_unix_ms: 1_700_000_000_123,
        registry_revision: 7,
        truncated: false,
        nodes: vec![EdgeNodeSnapshot {
            node_id: "gpu-1".into(),
            connected: true,
            state: NodeState::Ready as i32,
            labels: [("zone".to_owned(), "a".to_owned())].into(),
            provider_snapshots: vec![ProviderSnapshot {
                provider_id: "llama".into(),
                category: ProviderCategory::LocalInference as i32,
                capacity: 2,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["edgeId"], "edge-1");
    assert_eq!(json["observedAtUnixMs"], "1700000000123");
    assert_eq!(json["registryRevision"], "7");
    let node = &json["nodes"][0];
    assert_eq!(node["nodeId"], "gpu-1");
    assert_eq!(node["state"], "NODE_STATE_READY");
    assert_eq!(node["labels"]["zone"], "a");
    let provider = &node["providerSnapshots"][0];
    assert_eq!(provider["category"], "PROVIDER_CATEGORY_LOCAL_INFERENCE");
    assert_eq!(provider["capacity"], 2);
    // Proto3 JSON omits default values.
    assert!(json.get("truncated").is_none());

    let back: EdgeStatusResponse = serde_json::from_value(json).unwrap();
    assert_eq!(back, status);
}

#[test]
fn command_event_round_trips_and_accepts_enum_numbers() {
    let event = EdgeCommandEvent {
        command_id: "cmd-1".into(),
        phase: CommandPhase::Running as i32,
        sequence: 2,
        message: "half way".into(),
        detail: [("done".to_owned(), "1".to_owned())].into(),
        occurred_at_unix_ms: 5,
    };
    let text = serde_json::to_string(&event).unwrap();
    assert!(
        text.contains(r#""phase":"COMMAND_PHASE_RUNNING""#),
        "{text}"
    );
    let back: EdgeCommandEvent = serde_json::from_str(&text).unwrap();
    assert_eq!(back, event);
    // The mapping also accepts an enum as its number.
    let by_number: EdgeCommandEvent =
        serde_json::from_str(r#"{"commandId":"cmd-1","phase":2,"sequence":2}"#).unwrap();
    assert_eq!(by_number.phase, CommandPhase::Running as i32);
}

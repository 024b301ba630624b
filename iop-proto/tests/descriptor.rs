//! The compiled schema against the PROTOCOL.md §3 contract: names, numbers, types,
//! tombstones and enum prefixes. A renumbering or a revived tombstone fails here.

use iop_proto::FILE_DESCRIPTOR_SET;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};

/// PROTOCOL.md §3, message by message: (number, name, type). `map` is `map<string,string>`;
/// message types are fully qualified.
type Fields = &'static [(i32, &'static str, &'static str)];

const MESSAGES: &[(&str, Fields)] = &[
    (
        "Envelope",
        &[
            (1, "correlation_id", "uint64"),
            (2, "hello_request", ".iop.EdgeHelloRequest"),
            (3, "hello_response", ".iop.EdgeHelloResponse"),
            (4, "status_request", ".iop.EdgeStatusRequest"),
            (5, "status_response", ".iop.EdgeStatusResponse"),
            (6, "command_request", ".iop.EdgeCommandRequest"),
            (7, "command_response", ".iop.EdgeCommandResponse"),
            (8, "command_event", ".iop.EdgeCommandEvent"),
            (9, "node_event", ".iop.EdgeNodeEvent"),
            (12, "heartbeat", ".iop.Heartbeat"),
            (13, "heartbeat_ack", ".iop.HeartbeatAck"),
            (14, "go_away", ".iop.GoAway"),
            (15, "load_update", ".iop.EdgeLoadUpdate"),
        ],
    ),
    (
        "EdgeHelloRequest",
        &[
            (1, "edge_id", "string"),
            (2, "protocol_version", "uint32"),
            (3, "software_version", "string"),
            (4, "operations", "repeated string"),
            (5, "metadata", "map"),
            (6, "credential", "bytes"),
            (7, "inflight_command_ids", "repeated string"),
            (8, "load_updates", "bool"),
        ],
    ),
    (
        "EdgeHelloResponse",
        &[
            (1, "accepted", "bool"),
            (2, "reject_reason", ".iop.HelloRejectReason"),
            (3, "message", "string"),
            (4, "protocol_version", "uint32"),
            (5, "heartbeat_interval_ms", "uint32"),
            (6, "session_id", "uint64"),
            (7, "retry_after_ms", "uint32"),
            (8, "max_frame_len", "uint32"),
            (9, "min_protocol_version", "uint32"),
            (10, "max_protocol_version", "uint32"),
            (11, "load_update_interval_ms", "uint32"),
        ],
    ),
    (
        "EdgeStatusRequest",
        &[
            (1, "node_ids", "repeated string"),
            (2, "start_after_node_id", "string"),
        ],
    ),
    (
        "EdgeStatusResponse",
        &[
            (1, "edge_id", "string"),
            (2, "nodes", "repeated .iop.EdgeNodeSnapshot"),
            (3, "observed_at_unix_ms", "uint64"),
            (4, "registry_revision", "uint64"),
            (5, "truncated", "bool"),
        ],
    ),
    (
        "EdgeNodeSnapshot",
        &[
            (1, "node_id", "string"),
            (2, "connected", "bool"),
            (3, "config", ".iop.NodeConfigSummary"),
            (4, "provider_snapshots", "repeated .iop.ProviderSnapshot"),
            (5, "state", ".iop.NodeState"),
            (6, "generation", "uint64"),
            (7, "last_transition_unix_ms", "uint64"),
            (8, "labels", "map"),
        ],
    ),
    (
        "NodeConfigSummary",
        &[
            (1, "revision", "string"),
            (2, "provider_ids", "repeated string"),
            (3, "models", "repeated string"),
        ],
    ),
    (
        "ProviderSnapshot",
        &[
            (1, "provider_id", "string"),
            (2, "category", ".iop.ProviderCategory"),
            (3, "status", ".iop.ProviderStatus"),
            (4, "health", ".iop.ProviderHealth"),
            (5, "capacity", "uint32"),
            (6, "in_flight", "uint32"),
            (7, "queued", "uint32"),
            (8, "long_context_capacity", "uint32"),
            (9, "long_context_in_flight", "uint32"),
            (10, "long_context_queued", "uint32"),
            (11, "models", "repeated string"),
            (12, "admission_eligible", "bool"),
        ],
    ),
    (
        "EdgeCommandRequest",
        &[
            (1, "command_id", "string"),
            (2, "operation", "string"),
            (3, "target_selector", "string"),
            (4, "metadata", "map"),
            (5, "timeout_ms", "uint32"),
        ],
    ),
    (
        "EdgeCommandResponse",
        &[
            (1, "command_id", "string"),
            (2, "accepted", "bool"),
            (3, "reject_reason", ".iop.CommandRejectReason"),
            (4, "message", "string"),
        ],
    ),
    (
        "EdgeCommandEvent",
        &[
            (1, "command_id", "string"),
            (2, "phase", ".iop.CommandPhase"),
            (3, "sequence", "uint32"),
            (4, "message", "string"),
            (5, "detail", "map"),
            (6, "occurred_at_unix_ms", "uint64"),
        ],
    ),
    (
        "EdgeNodeEvent",
        &[
            (1, "edge_id", "string"),
            (2, "node_id", "string"),
            (3, "kind", ".iop.NodeEventKind"),
            (4, "generation", "uint64"),
            (5, "sequence", "uint64"),
            (6, "occurred_at_unix_ms", "uint64"),
            (7, "reason", "string"),
        ],
    ),
    (
        "EdgeLoadUpdate",
        &[
            (1, "sequence", "uint64"),
            (2, "observed_at_unix_ms", "uint64"),
            (3, "providers", "repeated .iop.ProviderLoad"),
            (4, "resync", "bool"),
        ],
    ),
    (
        "ProviderLoad",
        &[
            (1, "node_id", "string"),
            (2, "provider_id", "string"),
            (3, "status", ".iop.ProviderStatus"),
            (4, "health", ".iop.ProviderHealth"),
            (5, "capacity", "uint32"),
            (6, "in_flight", "uint32"),
            (7, "queued", "uint32"),
            (8, "long_context_capacity", "uint32"),
            (9, "long_context_in_flight", "uint32"),
            (10, "long_context_queued", "uint32"),
            (11, "admission_eligible", "bool"),
            (12, "node_connected", "bool"),
        ],
    ),
    (
        "Heartbeat",
        &[(1, "sequence", "uint64"), (2, "sent_at_unix_ms", "uint64")],
    ),
    ("HeartbeatAck", &[(1, "sequence", "uint64")]),
    (
        "GoAway",
        &[
            (1, "reason", ".iop.GoAwayReason"),
            (2, "message", "string"),
            (3, "retry_after_ms", "uint32"),
        ],
    ),
];

/// PROTOCOL.md §3 enums: values in order from 0, without their prefix.
const ENUMS: &[(&str, &str, &[&str])] = &[
    (
        "HelloRejectReason",
        "HELLO_REJECT_REASON_",
        &[
            "UNSPECIFIED",
            "EMPTY_EDGE_ID",
            "UNKNOWN_EDGE",
            "BAD_CREDENTIAL",
            "UNSUPPORTED_PROTOCOL_VERSION",
            "DUPLICATE_EDGE",
            "DRAINING",
            "INVALID_HELLO",
        ],
    ),
    (
        "NodeState",
        "NODE_STATE_",
        &[
            "UNSPECIFIED",
            "CONFIGURED",
            "PENDING",
            "READY",
            "DISCONNECTED",
        ],
    ),
    (
        "ProviderCategory",
        "PROVIDER_CATEGORY_",
        &["UNSPECIFIED", "CLI", "API", "LOCAL_INFERENCE"],
    ),
    (
        "ProviderStatus",
        "PROVIDER_STATUS_",
        &["UNSPECIFIED", "AVAILABLE", "DEGRADED", "UNAVAILABLE"],
    ),
    (
        "ProviderHealth",
        "PROVIDER_HEALTH_",
        &["UNSPECIFIED", "HEALTHY", "UNHEALTHY", "OFFLINE"],
    ),
    (
        "CommandRejectReason",
        "COMMAND_REJECT_REASON_",
        &[
            "UNSPECIFIED",
            "UNKNOWN_OPERATION",
            "INVALID_SELECTOR",
            "NO_MATCHING_TARGET",
            "BUSY",
            "DRAINING",
            "INVALID_COMMAND",
        ],
    ),
    (
        "CommandPhase",
        "COMMAND_PHASE_",
        &[
            "UNSPECIFIED",
            "ACCEPTED",
            "RUNNING",
            "SUCCEEDED",
            "FAILED",
            "CANCELLED",
            "TIMED_OUT",
        ],
    ),
    (
        "NodeEventKind",
        "NODE_EVENT_KIND_",
        &[
            "UNSPECIFIED",
            "NODE_READY",
            "NODE_DISCONNECTED",
            "NODE_CONFIGURED",
            "NODE_REMOVED",
            "EDGE_READY",
            "EDGE_DRAINING",
        ],
    ),
    (
        "GoAwayReason",
        "GO_AWAY_REASON_",
        &[
            "UNSPECIFIED",
            "SHUTDOWN",
            "DRAINING",
            "SUPERSEDED",
            "PROTOCOL_ERROR",
            "HEARTBEAT_TIMEOUT",
            "HELLO_TIMEOUT",
            "OVERLOADED",
            "CREDENTIAL_REVOKED",
        ],
    ),
];

fn file() -> FileDescriptorProto {
    let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
    let mut files: Vec<_> = set
        .file
        .into_iter()
        .filter(|f| f.package() == "iop")
        .collect();
    assert_eq!(files.len(), 1, "exactly one file in package iop");
    files.remove(0)
}

fn message<'a>(file: &'a FileDescriptorProto, name: &str) -> &'a DescriptorProto {
    file.message_type
        .iter()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("message {name} is missing"))
}

/// `repeated string`, `.iop.GoAway`, `map`, …
fn type_of(message: &DescriptorProto, field: &FieldDescriptorProto) -> String {
    let base = match field.r#type() {
        Type::Message | Type::Enum => field.type_name().to_string(),
        Type::String => "string".into(),
        Type::Bytes => "bytes".into(),
        Type::Bool => "bool".into(),
        Type::Uint32 => "uint32".into(),
        Type::Uint64 => "uint64".into(),
        other => format!("{other:?}"),
    };
    let is_map = message.nested_type.iter().any(|nested| {
        nested.options.as_ref().is_some_and(|o| o.map_entry())
            && base.ends_with(&format!(".{}", nested.name()))
    });
    if is_map {
        let entry = message
            .nested_type
            .iter()
            .find(|n| base.ends_with(&format!(".{}", n.name())))
            .unwrap();
        let kv: Vec<String> = entry
            .field
            .iter()
            .map(|f| format!("{}:{:?}", f.name(), f.r#type()))
            .collect();
        assert_eq!(
            kv,
            ["key:String", "value:String"],
            "maps are map<string,string>"
        );
        return "map".into();
    }
    if field.label() == Label::Repeated {
        format!("repeated {base}")
    } else {
        base
    }
}

#[test]
fn schema_matches_spec_section_3() {
    let file = file();
    assert_eq!(file.syntax(), "proto3");
    let names: Vec<&str> = file.message_type.iter().map(|m| m.name()).collect();
    let spec_names: Vec<&str> = MESSAGES.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, spec_names, "messages and their order");

    for (name, spec_fields) in MESSAGES {
        let msg = message(&file, name);
        let fields: Vec<(i32, String, String)> = msg
            .field
            .iter()
            .map(|f| (f.number(), f.name().to_string(), type_of(msg, f)))
            .collect();
        let expected: Vec<(i32, String, String)> = spec_fields
            .iter()
            .map(|(n, f, t)| (*n, f.to_string(), t.to_string()))
            .collect();
        assert_eq!(fields, expected, "fields of {name}");
    }

    // Every Envelope field but correlation_id is in the `body` oneof.
    let envelope = message(&file, "Envelope");
    assert_eq!(envelope.oneof_decl.len(), 1);
    assert_eq!(envelope.oneof_decl[0].name(), "body");
    for field in &envelope.field {
        assert_eq!(
            field.oneof_index.is_some(),
            field.number() != 1,
            "{}",
            field.name()
        );
    }
}

#[test]
fn schedule_tombstones_stay_dead() {
    let file = file();
    for dead in ["ScheduleRequest", "ScheduleResponse"] {
        assert!(
            file.message_type
                .iter()
                .all(|m| m.name() != dead && m.nested_type.iter().all(|n| n.name() != dead)),
            "{dead} must never exist again"
        );
        assert!(file.enum_type.iter().all(|e| e.name() != dead));
    }
    let envelope = message(&file, "Envelope");
    for field in &envelope.field {
        assert!(
            field.number() != 10 && field.number() != 11,
            "field {} revives a tombstoned number",
            field.name()
        );
        assert!(
            field.name() != "schedule_request" && field.name() != "schedule_response",
            "field {} revives a tombstoned name",
            field.name()
        );
    }
    // Descriptor reserved ranges are [start, end).
    let reserved = |n: i32| {
        envelope
            .reserved_range
            .iter()
            .any(|r| r.start() <= n && n < r.end())
    };
    assert!(reserved(10) && reserved(11), "10 and 11 stay reserved");
    for name in ["schedule_request", "schedule_response"] {
        assert!(
            envelope.reserved_name.iter().any(|r| r == name),
            "{name} stays reserved"
        );
    }
}

#[test]
fn enums_match_spec_and_are_prefixed() {
    let file = file();
    let names: Vec<&str> = file.enum_type.iter().map(|e| e.name()).collect();
    let spec_names: Vec<&str> = ENUMS.iter().map(|(name, _, _)| *name).collect();
    let (mut sorted, mut spec_sorted) = (names.clone(), spec_names.clone());
    sorted.sort_unstable();
    spec_sorted.sort_unstable();
    assert_eq!(sorted, spec_sorted, "top-level enums");
    for message in &file.message_type {
        assert!(message.enum_type.is_empty(), "enums are top-level");
    }

    for (name, prefix, values) in ENUMS {
        // The prefix is the UPPER_SNAKE_CASE of the enum's name.
        let mut upper = String::new();
        for (i, c) in name.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                upper.push('_');
            }
            upper.push(c.to_ascii_uppercase());
        }
        assert_eq!(format!("{upper}_"), *prefix, "prefix of {name}");

        let descriptor = file.enum_type.iter().find(|e| e.name() == *name).unwrap();
        let got: Vec<(String, i32)> = descriptor
            .value
            .iter()
            .map(|v| (v.name().to_string(), v.number()))
            .collect();
        let expected: Vec<(String, i32)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{prefix}{v}"), i as i32))
            .collect();
        assert_eq!(got, expected, "values of {name}");
        assert_eq!(got[0].0, format!("{prefix}UNSPECIFIED"));
    }
}

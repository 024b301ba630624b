//! `iopctl`'s human output: the admin API's JSON as tables and lines. Values come from
//! the Control Plane, which redacts secrets (PROTOCOL.md §5.4); enum names lose their
//! prefixes (`COMMAND_PHASE_RUNNING` prints `RUNNING`).

use serde_json::Value;

use crate::table::Table;

/// A JSON value as a cell: strings bare, absent values as `-`.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) if s.is_empty() => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An enum name without its type's prefix.
pub(super) fn short(v: &Value, prefix: &str) -> String {
    let s = cell(v);
    s.strip_prefix(prefix).map(str::to_owned).unwrap_or(s)
}

/// `GET /v1/edges` as a table, one row per Edge.
pub(super) fn edges(list: &Value) -> String {
    let views = list["edges"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let replicas = views.iter().any(|v| v["replica"].is_string());
    let mut header = vec!["EDGE", "STATE", "SESSION", "NODES", "VERSION"];
    if replicas {
        header.push("REPLICA");
    }
    let mut table = Table::new(header);
    for v in views {
        let s = &v["lastStatus"];
        let nodes = if s.is_object() {
            format!(
                "{}/{}{}",
                s["connectedNodes"].as_u64().unwrap_or(0),
                s["nodeCount"].as_u64().unwrap_or(0),
                if s["truncated"] == true { "+" } else { "" }
            )
        } else {
            "-".into()
        };
        let session = if v["connected"] == true {
            cell(&v["sessionId"])
        } else {
            "-".into()
        };
        let mut row = vec![
            cell(&v["edgeId"]),
            cell(&v["reachability"]),
            session,
            nodes,
            cell(&v["softwareVersion"]),
        ];
        if replicas {
            row.push(cell(&v["replica"]));
        }
        table.row(row);
    }
    format!("{table}{} edge(s)\n", views.len())
}

/// `GET /v1/edges/{id}` as `key: value` lines.
pub(super) fn edge(v: &Value) -> String {
    let ops: Vec<String> = v["operations"]
        .as_array()
        .map(|a| a.iter().map(cell).collect())
        .unwrap_or_default();
    let mut out = String::new();
    for (key, value) in [
        ("edge", cell(&v["edgeId"])),
        ("state", cell(&v["reachability"])),
        ("session", cell(&v["sessionId"])),
        ("version", cell(&v["softwareVersion"])),
        ("fresh", cell(&v["fresh"])),
        ("supersessions", cell(&v["supersessions"])),
        ("replica", cell(&v["replica"])),
        ("operations", ops.join(", ")),
    ] {
        out.push_str(&format!("{key:<14}{value}\n"));
    }
    if let Some(meta) = v["metadata"].as_object() {
        for (k, val) in meta {
            out.push_str(&format!("{:<14}{k}={}\n", "metadata", cell(val)));
        }
    }
    out
}

/// `GET /v1/edges/{id}/status` as a table, one row per provider (a node without
/// providers has a row of its own).
pub(super) fn status(s: &Value) -> String {
    let mut table = Table::new([
        "NODE",
        "STATE",
        "PROVIDER",
        "CATEGORY",
        "STATUS",
        "CAPACITY",
        "IN-FLIGHT",
        "QUEUED",
        "ELIGIBLE",
    ]);
    let nodes = s["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    for n in nodes {
        let node = cell(&n["nodeId"]);
        let state = short(&n["state"], "NODE_STATE_");
        let providers = n["providerSnapshots"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if providers.is_empty() {
            table.row([node.clone(), state.clone()]);
        }
        for p in providers {
            table.row([
                node.clone(),
                state.clone(),
                cell(&p["providerId"]),
                short(&p["category"], "PROVIDER_CATEGORY_"),
                short(&p["status"], "PROVIDER_STATUS_"),
                p["capacity"].as_u64().unwrap_or(0).to_string(),
                p["inFlight"].as_u64().unwrap_or(0).to_string(),
                p["queued"].as_u64().unwrap_or(0).to_string(),
                (p["admissionEligible"] == true).to_string(),
            ]);
        }
    }
    let truncated = if s["truncated"] == true {
        " (truncated)"
    } else {
        ""
    };
    format!("{table}{} node(s){truncated}\n", nodes.len())
}

/// One event of a command: `  PHASE  message  k=v ...`.
pub(super) fn command_event(e: &Value) -> String {
    let detail: Vec<String> = e["detail"]
        .as_object()
        .map(|d| d.iter().map(|(k, v)| format!("{k}={}", cell(v))).collect())
        .unwrap_or_default();
    let mut line = format!("  {:<10}", short(&e["phase"], "COMMAND_PHASE_"));
    if let Some(m) = e["message"].as_str().filter(|m| !m.is_empty()) {
        line.push_str(&format!("  {m}"));
    }
    if !detail.is_empty() {
        line.push_str(&format!("  ({})", detail.join(" ")));
    }
    let mut line = line.trim_end().to_owned();
    line.push('\n');
    line
}

/// The Edge's answer to a command: `accepted`, or `rejected REASON: message`.
pub(super) fn answer(response: &Value) -> String {
    if response["accepted"] == true {
        "accepted".into()
    } else {
        let reason = short(&response["rejectReason"], "COMMAND_REJECT_REASON_");
        match response["message"].as_str().filter(|m| !m.is_empty()) {
            Some(m) => format!("rejected {reason}: {m}"),
            None => format!("rejected {reason}"),
        }
    }
}

/// `GET /v1/commands/{id}`: a header line, then every event kept.
pub(super) fn command(r: &Value) -> String {
    let mut out = format!(
        "{} {} on {}: {}\n",
        cell(&r["commandId"]),
        cell(&r["operation"]),
        cell(&r["edgeId"]),
        short(&r["phase"], "COMMAND_PHASE_"),
    );
    if r["response"].is_object() {
        out.push_str(&format!("  {}\n", answer(&r["response"])));
    }
    for e in r["events"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        out.push_str(&command_event(e));
    }
    if let Some(m) = r["outcomeMessage"].as_str().filter(|m| !m.is_empty()) {
        out.push_str(&format!("  {m}\n"));
    }
    out
}

/// One event of the stream: `[id] name data`.
pub(super) fn stream_event(id: &str, name: &str, data: &str) -> String {
    if id.is_empty() {
        format!("{name} {data}\n")
    } else {
        format!("[{id}] {name} {data}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_edge_list_prints_one_row_per_edge_with_its_node_counts() {
        let list = json!({"edges": [
            {"edgeId": "e1", "reachability": "CONNECTED", "connected": true, "sessionId": "3",
             "softwareVersion": "1.0", "lastStatus": {"connectedNodes": 1, "nodeCount": 2}},
            {"edgeId": "e2", "reachability": "DISCONNECTED", "connected": false, "sessionId": "1"},
        ]});
        let text = edges(&list);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("EDGE") && !lines[0].contains("REPLICA"),
            "{text}"
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["e1", "CONNECTED", "3", "1/2", "1.0"]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["e2", "DISCONNECTED", "-", "-", "-"]
        );
        assert_eq!(lines[4], "2 edge(s)");
    }

    #[test]
    fn a_command_record_prints_its_answer_and_phases() {
        let record = json!({"commandId": "c1", "operation": "node.drain", "edgeId": "e1",
            "phase": "COMMAND_PHASE_CANCELLED", "response": {"accepted": true},
            "events": [{"phase": "COMMAND_PHASE_ACCEPTED", "sequence": 1},
                       {"phase": "COMMAND_PHASE_CANCELLED", "sequence": 2, "message": "stopped",
                        "detail": {"in_flight": "1"}}]});
        assert_eq!(
            command(&record),
            "c1 node.drain on e1: CANCELLED\n  accepted\n  ACCEPTED\n  CANCELLED   stopped  (in_flight=1)\n"
        );
        let rejected = json!({"accepted": false, "rejectReason": "COMMAND_REJECT_REASON_BUSY"});
        assert_eq!(answer(&rejected), "rejected BUSY");
    }
}

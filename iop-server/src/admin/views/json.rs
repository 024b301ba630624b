//! JSON of the Edges and the fleet's load, written in this one place from their typed
//! forms (this replica's own, or what another replica told in `iop_proto::cluster`'s
//! messages). Wire messages (status responses, node events) are written with their
//! protobuf JSON mapping (pbjson); the control plane's own records use the same
//! conventions: lowerCamelCase names, enums by name, 64-bit integers as strings. A
//! replica's share of the fleet and the whole have one shape.

use iop_core::cp::load::NodeStates;
use iop_core::cp::{EdgeView, Reachability};
use iop_core::proto::{ProviderCategory, cluster};
use iop_tokio::fleet::load::provider_use;
use iop_tokio::fleet::{FleetLoad, FleetSample, ListedEdge, LoadSummary, LoadTotals, LoadView};
use serde_json::{Map, Value, json};

fn reachability(r: Reachability) -> &'static str {
    match r {
        Reachability::Connected => "CONNECTED",
        Reachability::Unreachable => "UNREACHABLE",
        Reachability::Disconnected => "DISCONNECTED",
        _ => "UNKNOWN",
    }
}

pub(in crate::admin) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// One Edge's view.
pub fn edge_view(v: &EdgeView) -> Value {
    let metadata: serde_json::Map<String, Value> = v
        .metadata
        .iter()
        .map(|(k, val)| (k.clone(), Value::String(val.clone())))
        .collect();
    let last_status = v.last_status.as_ref().map(|s| {
        json!({
            "sessionId": s.session_id.to_string(),
            "registryRevision": s.registry_revision.to_string(),
            "observedAtUnixMs": s.observed_at_unix_ms.to_string(),
            "receivedAtUnixMs": s.received_at_unix_ms.to_string(),
            "nodeCount": s.node_count,
            "connectedNodes": s.connected_nodes,
            "truncated": s.truncated,
        })
    });
    json!({
        "edgeId": v.edge_id,
        "reachability": reachability(v.reachability),
        "connected": v.reachability != Reachability::Disconnected,
        "sessionId": v.session_id.to_string(),
        "softwareVersion": v.software_version,
        "operations": v.operations,
        "metadata": metadata,
        "connectedSinceUnixMs": v.connected_since_unix_ms.to_string(),
        "fresh": v.fresh,
        "supersessions": v.supersessions.to_string(),
        "lastStatus": last_status,
    })
}

/// One Edge as the list shows it: its view, the replica holding its live session
/// (`replica`), and its load's summary (`load`).
pub(in crate::admin) fn listed_edge(l: &ListedEdge) -> Value {
    let mut out = edge_view(&l.view);
    if let Some(obj) = out.as_object_mut() {
        if let Some(replica) = &l.replica {
            obj.insert("replica".into(), Value::String(replica.clone()));
        }
        if let Some(load) = &l.load {
            obj.insert("load".into(), load_summary(load));
        }
    }
    out
}

/// Totals as JSON.
pub(in crate::admin) fn totals(t: &LoadTotals) -> Value {
    json!({
        "providers": t.providers,
        "providersOffline": t.providers_offline,
        "providersEligible": t.providers_eligible,
        "capacity": t.capacity,
        "inFlight": t.in_flight,
        "queued": t.queued,
        "longContextCapacity": t.long_context_capacity,
        "longContextInFlight": t.long_context_in_flight,
        "longContextQueued": t.long_context_queued,
        "available": t.available,
        "offlineCapacity": t.offline_capacity,
        "offlineLongContextCapacity": t.offline_long_context_capacity,
    })
}

fn node_states(n: &NodeStates) -> Value {
    json!({
        "configured": n.configured,
        "pending": n.pending,
        "ready": n.ready,
        "disconnected": n.disconnected,
        "other": n.other,
    })
}

/// A category's name as the dashboard and metrics show it.
pub(in crate::admin) fn category_name(c: ProviderCategory) -> &'static str {
    match c {
        ProviderCategory::Cli => "cli",
        ProviderCategory::Api => "api",
        ProviderCategory::LocalInference => "local_inference",
        _ => "unspecified",
    }
}

/// This Control Plane's share of the fleet's load (the whole, without a cluster).
pub(in crate::admin) fn fleet(f: &FleetLoad) -> Value {
    let mut by_category = Map::new();
    for (c, t) in f.by_category() {
        by_category.insert(category_name(c).into(), totals(t));
    }
    let mut by_model = Map::new();
    for (m, t) in f.by_model() {
        by_model.insert(m.into(), totals(t));
    }
    let mut by_label: Map<String, Value> = Map::new();
    for (k, v, t) in f.by_label() {
        if let Value::Object(values) = by_label.entry(k).or_insert_with(|| json!({})) {
            values.insert(v.into(), totals(t));
        }
    }
    json!({
        "edges": {"live": f.edges_live(), "offline": f.edges_offline()},
        "nodes": node_states(f.nodes()),
        "nodesOffline": f.nodes_offline(),
        "total": totals(f.total()),
        "byCategory": by_category,
        "byModel": by_model,
        "byLabel": by_label,
    })
}

/// One sample of the fleet.
fn fleet_sample(s: &FleetSample) -> Value {
    let mut v = totals(&s.totals);
    if let Value::Object(o) = &mut v {
        o.insert("atUnixMs".into(), s.at_unix_ms.into());
        o.insert("edgesLive".into(), s.edges_live.into());
        o.insert("edgesOffline".into(), s.edges_offline.into());
    }
    v
}

/// This Control Plane's share of the fleet's history.
pub(in crate::admin) fn fleet_history(samples: &[FleetSample], interval_ms: u64) -> Value {
    json!({
        "intervalMs": interval_ms,
        "samples": samples.iter().map(fleet_sample).collect::<Vec<_>>(),
    })
}

/// An Edge's view of its load: nodes, providers, what the offline ones last had.
pub(in crate::admin) fn edge_load(view: &LoadView) -> Value {
    let l = view.load();
    let nodes: Vec<Value> = l
        .nodes()
        .map(|n| {
            let labels: Map<String, Value> = n
                .labels()
                .map(|(k, v)| (k.to_owned(), Value::from(v)))
                .collect();
            let providers: Vec<Value> = n
                .provider_indexes()
                .zip(n.providers())
                .map(|(i, p)| {
                    let mut v = json!({
                        "providerId": p.provider_id(),
                        "category": category_name(p.category()),
                        "status": p.status().as_str_name(),
                        "health": p.health().as_str_name(),
                        "offline": p.is_offline(),
                        "admissionEligible": p.admission_eligible(),
                        "capacity": p.capacity(),
                        "inFlight": p.in_flight(),
                        "queued": p.queued(),
                        "longContextCapacity": p.long_context_capacity(),
                        "longContextInFlight": p.long_context_in_flight(),
                        "longContextQueued": p.long_context_queued(),
                        "models": p.models().collect::<Vec<_>>(),
                    });
                    if let (Some(last), Value::Object(o)) = (view.last_online(i), &mut v) {
                        o.insert(
                            "lastOnline".into(),
                            json!({
                                "capacity": last.capacity,
                                "longContextCapacity": last.long_context_capacity,
                                "atUnixMs": last.at_unix_ms,
                            }),
                        );
                    }
                    v
                })
                .collect();
            json!({
                "nodeId": n.node_id(),
                "state": n.state().as_str_name(),
                "labels": labels,
                "providers": providers,
            })
        })
        .collect();
    json!({
        "edgeId": l.edge_id(),
        "revision": l.revision().to_string(),
        "observedAtUnixMs": l.observed_at_unix_ms(),
        "receivedAtUnixMs": view.received_at_unix_ms(),
        "pages": l.pages(),
        "partial": view.partial(),
        "totals": totals(&view.totals()),
        "nodes": nodes,
    })
}

/// A short summary of an Edge's load, for the list of Edges.
fn load_summary(s: &LoadSummary) -> Value {
    let mut v = totals(&s.totals);
    if let Value::Object(o) = &mut v {
        o.insert("receivedAtUnixMs".into(), s.received_at_unix_ms.into());
        o.insert("partial".into(), s.partial.into());
        o.insert("nodesReady".into(), s.nodes_ready.into());
    }
    v
}

/// An Edge's history, from its typed form (this replica's own, or the holding
/// replica's): its totals and each provider's use.
pub(in crate::admin) fn edge_history(h: &cluster::EdgeHistory) -> Value {
    let samples: Vec<Value> = h
        .samples
        .iter()
        .map(|s| {
            json!({
                "atUnixMs": s.at_unix_ms,
                "capacity": s.capacity,
                "inFlight": s.in_flight,
                "queued": s.queued,
            })
        })
        .collect();
    let providers: Vec<Value> = h
        .providers
        .iter()
        .map(|p| {
            let uses: Vec<Option<f32>> = p.uses.iter().map(|u| provider_use(*u)).collect();
            json!({
                "nodeId": p.node_id,
                "providerId": p.provider_id,
                "uses": uses,
            })
        })
        .collect();
    json!({
        "edgeId": h.edge_id,
        "intervalMs": h.interval_ms,
        "samples": samples,
        "providers": providers,
    })
}

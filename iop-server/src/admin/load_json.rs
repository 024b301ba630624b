//! The JSON of the fleet's load: totals, by category, model and label; an Edge's
//! nodes and providers; the histories. A replica's share of the fleet and the whole
//! have one shape, so that the whole is the sum of the shares, number by number
//! ([`add_shares`]).

use iop_core::cp::load::{EdgeLoad, NodeStates};
use iop_core::proto::ProviderCategory;
use iop_tokio::fleet::{EdgeHistory, FleetLoad, FleetSample, LoadTotals, LoadView};
use serde_json::{Map, Value, json};

/// Keys an object another replica sends may have at each level, and how deep it may
/// go: what a share brings is bounded whatever the replica sends.
const MAX_KEYS: usize = 10_000;
const MAX_DEPTH: usize = 4;

/// Totals as JSON.
pub(super) fn totals(t: &LoadTotals) -> Value {
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
pub(super) fn category_name(c: ProviderCategory) -> &'static str {
    match c {
        ProviderCategory::Cli => "cli",
        ProviderCategory::Api => "api",
        ProviderCategory::LocalInference => "local_inference",
        _ => "unspecified",
    }
}

/// This Control Plane's share of the fleet's load (the whole, without a cluster).
pub(super) fn fleet(f: &FleetLoad) -> Value {
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
pub(super) fn fleet_history(samples: &[FleetSample], interval_ms: u64) -> Value {
    json!({
        "intervalMs": interval_ms,
        "samples": samples.iter().map(fleet_sample).collect::<Vec<_>>(),
    })
}

/// An Edge's view of its load: nodes, providers, what the offline ones last had.
pub(super) fn edge_load(view: &LoadView) -> Value {
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
pub(super) fn edge_load_summary(view: &LoadView) -> Value {
    let mut v = totals(&view.totals());
    if let Value::Object(o) = &mut v {
        o.insert("receivedAtUnixMs".into(), view.received_at_unix_ms().into());
        o.insert("partial".into(), view.partial().into());
        o.insert("nodesReady".into(), view.load().node_states().ready.into());
    }
    v
}

/// An Edge's history, its providers' uses named by the view's providers.
pub(super) fn edge_history(
    edge_id: &str,
    h: &EdgeHistory,
    view: Option<&EdgeLoad>,
    interval_ms: u64,
) -> Value {
    let samples: Vec<Value> = h
        .samples()
        .map(|s| {
            json!({
                "atUnixMs": s.at_unix_ms,
                "capacity": s.capacity,
                "inFlight": s.in_flight,
                "queued": s.queued,
            })
        })
        .collect();
    let mut names: Vec<(String, String)> = Vec::new();
    for n in view.iter().flat_map(|l| l.nodes()) {
        for p in n.providers() {
            names.push((n.node_id().to_owned(), p.provider_id().to_owned()));
        }
    }
    let providers: Vec<Value> = (0..h.providers())
        .map(|i| {
            let (node, provider) = names.get(i).cloned().unwrap_or_default();
            json!({
                "nodeId": node,
                "providerId": provider,
                "uses": h.uses(i).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "edgeId": edge_id,
        "intervalMs": interval_ms,
        "samples": samples,
        "providers": providers,
    })
}

/// Adds `share` into `whole`, number by number: objects key by key, numbers summed,
/// anything else kept as `whole` has it. A share deeper than 4 levels, or with more
/// than 10 000 keys at a level, adds nothing past that.
pub(super) fn add_shares(whole: &mut Value, share: &Value) {
    add(whole, share, 0);
}

fn add(whole: &mut Value, share: &Value, depth: usize) {
    match (whole, share) {
        (Value::Object(w), Value::Object(s)) if depth < MAX_DEPTH => {
            for (k, v) in s.iter().take(MAX_KEYS) {
                if let Some(mine) = w.get_mut(k) {
                    add(mine, v, depth + 1);
                } else if w.len() < MAX_KEYS {
                    w.insert(k.clone(), bounded(v, depth + 1));
                }
            }
        }
        (Value::Number(w), Value::Number(s)) => {
            if let (Some(a), Some(b)) = (w.as_u64(), s.as_u64()) {
                *w = a.saturating_add(b).into();
            }
        }
        _ => {}
    }
}

/// `v` cut to what a share may bring.
fn bounded(v: &Value, depth: usize) -> Value {
    match v {
        Value::Object(o) if depth < MAX_DEPTH => Value::Object(
            o.iter()
                .take(MAX_KEYS)
                .map(|(k, v)| (k.clone(), bounded(v, depth + 1)))
                .collect(),
        ),
        Value::Object(_) | Value::Array(_) => Value::Null,
        other => other.clone(),
    }
}

/// Sums histories sample by sample: shares sampled at the same wall-clock multiples
/// add up; a sample only one share has is kept as it is.
pub(super) fn add_histories(whole: &mut Value, share: &Value) {
    let Some(theirs) = share["samples"].as_array() else {
        return;
    };
    let Some(mine) = whole["samples"].as_array_mut() else {
        return;
    };
    for s in theirs.iter().take(super::load::MAX_SAMPLES) {
        let at = &s["atUnixMs"];
        if let Some(m) = mine.iter_mut().find(|m| &m["atUnixMs"] == at) {
            // The instant is the same: only the numbers add.
            let when = m["atUnixMs"].clone();
            add(m, s, 1);
            m["atUnixMs"] = when;
        } else if mine.len() < super::load::MAX_SAMPLES && at.is_u64() {
            mine.push(bounded(s, 1));
        }
    }
    mine.sort_by_key(|m| m["atUnixMs"].as_u64().unwrap_or(0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_number_by_number_and_a_hostile_share_is_bounded() {
        let mut whole =
            json!({"total": {"capacity": 4, "inFlight": 1}, "byModel": {"a": {"capacity": 4}}});
        let share = json!({"total": {"capacity": 6, "inFlight": 2}, "byModel": {"b": {"capacity": 6}}, "x": "text"});
        add_shares(&mut whole, &share);
        assert_eq!(whole["total"], json!({"capacity": 10, "inFlight": 3}));
        assert_eq!(whole["byModel"]["b"]["capacity"], 6);
        assert_eq!(whole["x"], "text");
        let deep = json!({"a": {"b": {"c": {"d": {"e": 1}}}}});
        let mut w = json!({});
        add_shares(&mut w, &deep);
        assert_eq!(w["a"]["b"]["c"]["d"], Value::Null, "cut at the depth bound");
        let wide: Map<String, Value> = (0..20_000).map(|i| (format!("k{i}"), json!(1))).collect();
        let mut w = json!({});
        add_shares(&mut w, &Value::Object(wide));
        assert_eq!(w.as_object().map(Map::len), Some(MAX_KEYS));
    }

    #[test]
    fn histories_add_at_the_same_instant() {
        let mut whole =
            json!({"samples": [{"atUnixMs": 10, "capacity": 1}, {"atUnixMs": 20, "capacity": 1}]});
        let share =
            json!({"samples": [{"atUnixMs": 20, "capacity": 2}, {"atUnixMs": 30, "capacity": 5}]});
        add_histories(&mut whole, &share);
        let got: Vec<(u64, u64)> = whole["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["atUnixMs"].as_u64().unwrap(),
                    s["capacity"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, [(10, 1), (20, 3), (30, 5)]);
    }
}

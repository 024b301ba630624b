//! The router's API: `GET /v1/placement` — the providers that can take one more request
//! of a model now, best first, and why the others cannot — and `POST /v1/placement`,
//! the same placement that also counts its pick as one more request in flight until
//! the provider's next report (so that routers asking at once spread). Both read the
//! fleet's per-model index ([`iop_tokio::fleet::placement`]), read scope.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use iop_tokio::fleet::{Pick, PlacementAnswer, PlacementError, PlacementQuery};
use serde_json::{Value, json};

use super::load::unix_ms;
use crate::admin::AdminState;
use crate::admin::http::error::ApiError;

/// The query parameters a placement takes.
const PARAMETERS: [&str; 6] = [
    "model",
    "long_context",
    "limit",
    "labels",
    "include_stale",
    "pick",
];

/// `GET /v1/placement`.
pub(in crate::admin) async fn get_placement(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let q = parse(&query, false)?;
    let answer = s.cp.placement(&q).map_err(refused)?;
    Ok(Json(render(&q, &answer, &s)))
}

/// `POST /v1/placement`: the same parameters, in the query; reserves the first
/// candidate (with `pick=spread`, one drawn by free slots, listed first). With no
/// `pick`, a cluster's replica spreads: routers reach it alongside the others.
pub(in crate::admin) async fn post_placement(
    State(s): State<AdminState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let q = parse(&query, s.router.is_some())?;
    let answer = s.cp.reserve_placement(&q).map_err(refused)?;
    let mut v = render(&q, &answer, &s);
    if let Some(o) = v.as_object_mut() {
        let pick = match q.pick {
            Pick::Spread { .. } => "spread",
            _ => "best",
        };
        o.insert("pick".into(), pick.into());
    }
    Ok(Json(v))
}

/// The query of `params`, or a 400 naming what is wrong; with no `pick`, a spread
/// one when `spreads` (a cluster's replica), the best otherwise.
pub(in crate::admin) fn parse(
    params: &HashMap<String, String>,
    spreads: bool,
) -> Result<PlacementQuery, ApiError> {
    if let Some(unknown) = params.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "unknown parameter {unknown:?}: a placement takes {}",
            PARAMETERS.join(", ")
        )));
    }
    let model = params
        .get("model")
        .ok_or_else(|| refused(PlacementError::Model))?;
    let mut q = PlacementQuery::new(model.as_str());
    let flag = |name: &str| match params.get(name).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "{name} {other:?}: true or false"
        ))),
    };
    q.long_context = flag("long_context")?;
    q.include_stale = flag("include_stale")?;
    if let Some(limit) = params.get("limit") {
        q.limit = limit.parse().map_err(|_| refused(PlacementError::Limit))?;
    }
    if let Some(labels) = params.get("labels").filter(|l| !l.is_empty()) {
        q.labels = labels
            .split(',')
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) => Ok((k.to_owned(), v.to_owned())),
                None => Err(refused(PlacementError::Labels)),
            })
            .collect::<Result<_, _>>()?;
    }
    q.pick = match params.get("pick").map(String::as_str) {
        None if spreads => spread(),
        None | Some("best") => Pick::Best,
        Some("spread") => spread(),
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_pick",
                format!("pick {other:?}: best or spread"),
            ));
        }
    };
    q.validate().map_err(refused)?;
    Ok(q)
}

/// A spread pick with a draw of its own.
fn spread() -> Pick {
    Pick::Spread {
        random: random_u64(),
    }
}

/// A number drawn uniformly for a spread pick: std's per-process random hash keys over
/// a counter (no cryptographic strength is needed, only routers' draws that differ).
fn random_u64() -> u64 {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    static KEYS: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEYS.get_or_init(Default::default)
        .hash_one(DRAWS.fetch_add(1, Ordering::Relaxed))
}

/// 400 with the query error's own code.
fn refused(e: PlacementError) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, e.code(), e.to_string())
}

/// The answer's JSON.
fn render(q: &PlacementQuery, a: &PlacementAnswer, s: &AdminState) -> Value {
    let staleness = s.cp.staleness();
    let e = &a.excluded;
    let candidates: Vec<Value> = a
        .candidates
        .iter()
        .map(|c| {
            json!({
                "edgeId": &*c.edge_id,
                "nodeId": c.node_id,
                "providerId": c.provider_id,
                "capacity": c.capacity,
                "inFlight": c.in_flight,
                "queued": c.queued,
                "longContextCapacity": c.long_context_capacity,
                "longContextInFlight": c.long_context_in_flight,
                "longContextQueued": c.long_context_queued,
                "admissionEligible": c.admission_eligible,
                "reserved": c.reserved,
                "free": c.free,
                "ageMs": c.age_ms,
                "stale": c.stale,
            })
        })
        .collect();
    json!({
        "model": q.model,
        "longContext": q.long_context,
        "asOfUnixMs": unix_ms(),
        "candidates": candidates,
        "serving": a.serving,
        "excluded": {
            "notServing": e.not_serving,
            "offline": e.offline,
            "full": e.full,
            "notEligible": e.not_eligible,
            "stale": e.stale,
            "labels": e.labels,
        },
        "reserved": a.reserved,
        "staleAfterMs": {
            "pushed": staleness.pushed.as_millis() as u64,
            "pulled": staleness.pulled.as_millis() as u64,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parameters_parse_and_bad_ones_are_refused_with_their_code() {
        let q = parse(
            &params(&[
                ("model", "llama-3"),
                ("long_context", "true"),
                ("limit", "3"),
                ("labels", "zone=eu,gpu=a100"),
            ]),
            false,
        )
        .unwrap();
        assert_eq!(
            (q.model.as_str(), q.long_context, q.limit),
            ("llama-3", true, 3)
        );
        assert_eq!(q.labels.len(), 2);
        assert!(!q.include_stale);
        assert_eq!(q.pick, Pick::Best);
        // A replica spreads unless told the best.
        let on_replica = |pairs: &[(&str, &str)]| parse(&params(pairs), true).unwrap().pick;
        assert!(matches!(on_replica(&[("model", "m")]), Pick::Spread { .. }));
        assert_eq!(on_replica(&[("model", "m"), ("pick", "best")]), Pick::Best);
        let spread = |n| match parse(&params(&[("model", "m"), ("pick", "spread")]), false) {
            Ok(PlacementQuery {
                pick: Pick::Spread { random },
                ..
            }) => random,
            other => panic!("draw {n}: {other:?}"),
        };
        // Each placement draws anew.
        let draws: std::collections::HashSet<u64> = (0..64).map(spread).collect();
        assert_eq!(draws.len(), 64);
        for (bad, code) in [
            (vec![], "bad_model"),
            (vec![("model", "")], "bad_model"),
            (vec![("model", "m"), ("limit", "0")], "bad_limit"),
            (vec![("model", "m"), ("limit", "x")], "bad_limit"),
            (vec![("model", "m"), ("limit", "1001")], "bad_limit"),
            (vec![("model", "m"), ("labels", "zone")], "bad_labels"),
            (vec![("model", "m"), ("long_context", "yes")], "bad_request"),
            (vec![("model", "m"), ("modle", "m")], "bad_request"),
            (vec![("model", "m"), ("pick", "random")], "bad_pick"),
        ] {
            let e = parse(&params(&bad), false).unwrap_err();
            assert_eq!(
                (e.status, e.code),
                (StatusCode::BAD_REQUEST, code),
                "{bad:?}"
            );
        }
    }
}

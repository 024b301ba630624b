//! One Edge as the placement files it, and what a placement reads of it: a
//! candidate's numbers and node, its node's labels.

use std::sync::Arc;

use iop_core::cp::load::EdgeLoad;

use super::book::{Class, Rank, Reserved};
use super::query::Candidate;

/// One Edge as the placement files it.
#[derive(Debug)]
pub(super) struct EdgeSlot {
    pub(super) edge_id: Arc<str>,
    pub(super) view: Arc<EdgeLoad>,
    /// Provider index → the index of its node.
    pub(super) node_of: Box<[u32]>,
    /// Provider index → the numbers of the models it lists (see `Books`).
    pub(super) model_ids: Box<[Box<[u32]>]>,
    /// Provider index → where it is filed.
    pub(super) filed: Vec<Class>,
    /// Provider index → when its numbers were last reported (Unix ms).
    pub(super) reported_ms: Vec<u64>,
    pub(super) reserved: Vec<Reserved>,
    pub(super) pushes: bool,
    /// Its numbers count (its session is live here).
    pub(super) live: bool,
    /// When its Edge last proved its numbers current (Unix ms).
    pub(super) proved_ms: u64,
}

/// Provider index → node index, for `load`.
pub(super) fn nodes_of(load: &EdgeLoad) -> Box<[u32]> {
    let mut of = vec![0; load.providers().len()];
    for (n, node) in load.nodes().enumerate() {
        for i in node.provider_indexes() {
            if let Some(slot) = of.get_mut(i) {
                *slot = n as u32;
            }
        }
    }
    of.into()
}

/// Whether provider `index`'s node carries every label of `labels`.
pub(super) fn labelled(e: &EdgeSlot, index: u32, labels: &[(String, String)]) -> bool {
    let Some(node) = e
        .node_of
        .get(index as usize)
        .and_then(|&n| e.view.node_at(n as usize))
    else {
        return false;
    };
    labels
        .iter()
        .all(|(k, v)| node.labels().any(|(nk, nv)| nk == k && nv == v))
}

pub(super) fn candidate(e: &EdgeSlot, rank: &Rank, now_ms: u64, stale: bool) -> Candidate {
    let index = rank.index as usize;
    let p = e.view.provider(index);
    let node_id = e
        .node_of
        .get(index)
        .and_then(|&n| e.view.node_at(n as usize))
        .map(|n| n.node_id().to_owned())
        .unwrap_or_default();
    let reserved = e.reserved.get(index).copied().unwrap_or_default();
    let reported = e.reported_ms.get(index).copied().unwrap_or_default();
    let [
        capacity,
        in_flight,
        queued,
        long_capacity,
        long_in_flight,
        long_queued,
    ] = p.map(|p| p.numbers()).unwrap_or_default();
    Candidate {
        edge_id: e.edge_id.clone(),
        node_id,
        provider_id: p.map(|p| p.provider_id().to_owned()).unwrap_or_default(),
        capacity,
        in_flight,
        queued,
        long_context_capacity: long_capacity,
        long_context_in_flight: long_in_flight,
        long_context_queued: long_queued,
        admission_eligible: true,
        reserved: reserved.any,
        free: rank.free.0,
        age_ms: now_ms.saturating_sub(e.proved_ms.max(reported)),
        stale,
    }
}

//! Building `EdgeStatusResponse`s from the registry (PROTOCOL.md §5), within a size budget.
//!
//! One pass over the requested nodes in id order; each node's message is built once with
//! pre-sized vectors, measured, and kept only if it fits. No maps or hashing per
//! provider.

use crate::limits::MAX_NODES;
use crate::proto::{EdgeNodeSnapshot, EdgeStatusResponse, Message, NodeConfigSummary};

use super::NodeRegistry;
use iop_proto::limits::heap::{self, string_bytes, vec_growth};

use super::encode::within_heap_budget;
use super::node::NodeEntry;
use iop_proto::encoding::delimited_len;

impl NodeEntry {
    pub(crate) fn snapshot(&self) -> EdgeNodeSnapshot {
        let view = self.view();
        let mut providers = Vec::with_capacity(self.providers.len());
        let mut provider_ids = Vec::with_capacity(self.providers.len());
        for p in &self.providers {
            providers.push(p.snapshot(view));
            provider_ids.push(p.config.provider_id.clone());
        }
        EdgeNodeSnapshot {
            node_id: self.config.node_id.clone(),
            connected: view.ready,
            config: Some(NodeConfigSummary {
                revision: self.config.revision.clone(),
                provider_ids,
                models: self.config.models.clone(),
            }),
            provider_snapshots: providers,
            state: self.ownership.state as i32,
            generation: self.ownership.generation.get(),
            last_transition_unix_ms: self.ownership.last_transition_unix_ms,
            labels: self.config.labels.clone(),
        }
    }
}

impl NodeRegistry {
    /// The status of the nodes named in `node_ids` (all nodes when empty; unknown ids are
    /// simply absent; repeats count once), sorted by node id.
    ///
    /// The response's encoded length stays within `max_encoded_len`, and it holds at
    /// most [`MAX_NODES`] (10 000) nodes: nodes are added in id order while the next
    /// one fits; when one is left out, `truncated` is set and the nodes present are
    /// complete (a Control Plane asks for the rest with `start_after_node_id`, answered
    /// by [`snapshot_after`](Self::snapshot_after)). (If not even an empty response fits,
    /// the response has no nodes.) Pass `usize::MAX` for no budget.
    pub fn snapshot<S: AsRef<str>>(
        &self,
        edge_id: &str,
        observed_at_unix_ms: u64,
        node_ids: &[S],
        max_encoded_len: usize,
    ) -> EdgeStatusResponse {
        let mut response = self.empty_response(edge_id, observed_at_unix_ms);
        if node_ids.is_empty() {
            response.nodes.reserve_exact(self.nodes.len());
            fill(&mut response, self.nodes.values(), max_encoded_len);
        } else {
            let mut wanted: Vec<&str> = node_ids.iter().map(AsRef::as_ref).collect();
            wanted.sort_unstable();
            wanted.dedup();
            let entries = wanted.into_iter().filter_map(|id| self.nodes.get(id));
            fill(&mut response, entries, max_encoded_len);
        }
        response
    }

    /// A response of no node yet, at this registry's revision.
    fn empty_response(&self, edge_id: &str, observed_at_unix_ms: u64) -> EdgeStatusResponse {
        EdgeStatusResponse {
            edge_id: edge_id.to_owned(),
            nodes: Vec::new(),
            observed_at_unix_ms,
            registry_revision: self.revision,
            truncated: false,
        }
    }

    /// [`snapshot`](Self::snapshot) of every node whose id sorts after `start_after`
    /// (byte order): the next page of a truncated answer (PROTOCOL.md §4.3).
    pub fn snapshot_after(
        &self,
        edge_id: &str,
        observed_at_unix_ms: u64,
        start_after: &str,
        max_encoded_len: usize,
    ) -> EdgeStatusResponse {
        let mut response = self.empty_response(edge_id, observed_at_unix_ms);
        fill(
            &mut response,
            self.nodes_after(start_after),
            max_encoded_len,
        );
        response
    }

    /// The nodes whose id sorts after `start_after`, in id order.
    pub(crate) fn nodes_after<'a>(
        &'a self,
        start_after: &'a str,
    ) -> impl Iterator<Item = &'a NodeEntry> + 'a {
        use std::ops::Bound::{Excluded, Unbounded};
        self.nodes
            .range::<str, _>((Excluded(start_after), Unbounded))
            .map(|(_, e)| e)
    }
}

/// Appends node snapshots while they fit; sets `truncated` when one does not.
fn fill<'a>(
    response: &mut EdgeStatusResponse,
    entries: impl Iterator<Item = &'a NodeEntry>,
    budget: usize,
) {
    // `truncated = true` costs two bytes; reserve them only when needed.
    let mut used = response.encoded_len();
    let mut decoded = string_bytes(response.edge_id.len());
    for entry in entries {
        // No status carries more nodes than the receiver decodes (PROTOCOL.md §4.3), nor
        // more than its decoded-size budget (PROTOCOL.md §7): as `encode_snapshot` does.
        if response.nodes.len() == MAX_NODES {
            response.truncated = true;
            break;
        }
        let node = entry.snapshot();
        let len = delimited_len(node.encoded_len());
        let share = vec_growth(response.nodes.len(), heap::NODE_SNAPSHOT) + entry.heap;
        if used.saturating_add(len) > budget || !within_heap_budget(decoded + share, used + len) {
            response.truncated = true;
            break;
        }
        used += len;
        decoded += share;
        response.nodes.push(node);
    }
    if response.truncated {
        used += 2;
        while used > budget {
            let Some(last) = response.nodes.pop() else {
                break;
            };
            used = used.saturating_sub(delimited_len(last.encoded_len()));
        }
    }
}

//! Encoding a status snapshot straight from the registry into a caller's buffer.
//!
//! Produces exactly the bytes `snapshot(..).encode_to_vec()` would (same fields, same
//! order, proto3 defaults skipped), without building the message: no per-node or
//! per-provider allocation, only the output buffer grows. Lengths are computed before
//! writing, so a node either goes in whole or not at all; so is the heap a receiver
//! decodes them into (`iop_proto::limits::heap`), so that an answer stays within the
//! receiver's decoded-size budget without a second pass over its bytes.

use iop_proto::DecodeLimits;
use iop_proto::limits::heap::{self, map_growth, string_bytes, vec_growth};

use super::NodeRegistry;
use super::node::NodeEntry;
use super::provider::ProviderEntry;
use crate::limits::MAX_NODES;

/// Most bytes an `Envelope` adds around an encoded `EdgeStatusResponse`: the
/// `correlation_id` field (1 + 10) and the `status_response` tag and length (1 + 5).
/// Budget a status response with `max_frame_len - STATUS_ENVELOPE_OVERHEAD`.
pub const STATUS_ENVELOPE_OVERHEAD: usize = 17;

/// What [`NodeRegistry::encode_snapshot`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EncodedSnapshot {
    /// Nodes written.
    pub nodes: usize,
    /// Whether a requested node was left out for lack of budget.
    pub truncated: bool,
    /// Bytes appended to the buffer.
    pub len: usize,
    /// Heap a receiver's decoder allocates for these bytes, as the PROTOCOL.md §7 decode
    /// limits count it (`iop_proto::limits::heap`): within the decoded-size budget of
    /// a frame of `len` bytes.
    pub heap: usize,
}

use iop_proto::encoding::fields::{
    config_summary, node_snapshot, provider_snapshot, status_response,
};
use iop_proto::encoding::{
    delimited_len, enum_value, put_delimited_head, put_repeated_str, put_str, put_uint,
    repeated_str_len, str_len, uint_len,
};

fn provider_len(p: &ProviderEntry, view: super::provider::NodeView) -> usize {
    let n = p.numbers(view);
    str_len(&p.config.provider_id)
        + uint_len(enum_value(p.config.category.to_wire() as i32))
        + uint_len(enum_value(n.status as i32))
        + uint_len(enum_value(n.health as i32))
        + uint_len(u64::from(n.capacity))
        + uint_len(u64::from(n.in_flight))
        + uint_len(u64::from(n.queued))
        + uint_len(u64::from(n.long_context_capacity))
        + uint_len(u64::from(n.long_context_in_flight))
        + uint_len(u64::from(n.long_context_queued))
        + repeated_str_len(&p.config.models)
        + if n.admission_eligible { 2 } else { 0 }
}

fn put_provider(out: &mut Vec<u8>, p: &ProviderEntry, view: super::provider::NodeView) {
    let n = p.numbers(view);
    put_str(out, provider_snapshot::PROVIDER_ID, &p.config.provider_id);
    put_uint(
        out,
        provider_snapshot::CATEGORY,
        enum_value(p.config.category.to_wire() as i32),
    );
    put_uint(out, provider_snapshot::STATUS, enum_value(n.status as i32));
    put_uint(out, provider_snapshot::HEALTH, enum_value(n.health as i32));
    put_uint(out, provider_snapshot::CAPACITY, u64::from(n.capacity));
    put_uint(out, provider_snapshot::IN_FLIGHT, u64::from(n.in_flight));
    put_uint(out, provider_snapshot::QUEUED, u64::from(n.queued));
    put_uint(
        out,
        provider_snapshot::LONG_CONTEXT_CAPACITY,
        u64::from(n.long_context_capacity),
    );
    put_uint(
        out,
        provider_snapshot::LONG_CONTEXT_IN_FLIGHT,
        u64::from(n.long_context_in_flight),
    );
    put_uint(
        out,
        provider_snapshot::LONG_CONTEXT_QUEUED,
        u64::from(n.long_context_queued),
    );
    for m in &p.config.models {
        put_repeated_str(out, provider_snapshot::MODELS, m);
    }
    put_uint(
        out,
        provider_snapshot::ADMISSION_ELIGIBLE,
        u64::from(n.admission_eligible),
    );
}

fn summary_len(e: &NodeEntry) -> usize {
    str_len(&e.config.revision)
        + e.providers
            .iter()
            .map(|p| delimited_len(p.config.provider_id.len()))
            .sum::<usize>()
        + repeated_str_len(&e.config.models)
}

fn label_len(key: &str, value: &str) -> usize {
    str_len(key) + str_len(value)
}

/// Heap a decoder allocates for one `EdgeNodeSnapshot` of `e`, its slot in the
/// response's `nodes` aside: the node id, the config summary's revision, provider ids
/// and models, each provider's id and models, and the labels.
pub(crate) fn node_heap(e: &NodeEntry) -> usize {
    let mut h = string_bytes(e.config.node_id.len()) + string_bytes(e.config.revision.len());
    for (i, p) in e.providers.iter().enumerate() {
        let id = string_bytes(p.config.provider_id.len());
        // Once in the summary's `provider_ids`, once in the provider's snapshot.
        h += vec_growth(i, heap::STRING) + id + vec_growth(i, heap::PROVIDER_SNAPSHOT) + id;
        h += strings_heap(&p.config.models);
    }
    h += strings_heap(&e.config.models);
    for (i, (k, v)) in e.config.labels.iter().enumerate() {
        h += map_growth(i) + string_bytes(k.len()) + string_bytes(v.len());
    }
    h
}

fn strings_heap(items: &[String]) -> usize {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| vec_growth(i, heap::STRING) + string_bytes(s.len()))
        .sum()
}

/// Whether a response of `len` bytes decoding to `heap` bytes is within the receiver's
/// decoded-size budget (the frame around it is longer, and so has a larger budget).
pub(crate) fn within_heap_budget(heap: usize, len: usize) -> bool {
    heap <= DecodeLimits::SPEC.decoded_budget(len)
}

/// Encoded length of one `EdgeNodeSnapshot` (without its field key and length).
fn node_len(e: &NodeEntry) -> usize {
    let view = e.view();
    str_len(&e.config.node_id)
        + if view.ready { 2 } else { 0 }
        + delimited_len(summary_len(e))
        + e.providers
            .iter()
            .map(|p| delimited_len(provider_len(p, view)))
            .sum::<usize>()
        + uint_len(enum_value(e.ownership.state as i32))
        + uint_len(e.ownership.generation.get())
        + uint_len(e.ownership.last_transition_unix_ms)
        + e.config
            .labels
            .iter()
            .map(|(k, v)| delimited_len(label_len(k, v)))
            .sum::<usize>()
}

fn put_node(out: &mut Vec<u8>, e: &NodeEntry, len: usize) {
    let view = e.view();
    put_delimited_head(out, status_response::NODES, len);
    put_str(out, node_snapshot::NODE_ID, &e.config.node_id);
    put_uint(out, node_snapshot::CONNECTED, u64::from(view.ready));
    put_delimited_head(out, node_snapshot::CONFIG, summary_len(e));
    put_str(out, config_summary::REVISION, &e.config.revision);
    for p in &e.providers {
        put_repeated_str(out, config_summary::PROVIDER_IDS, &p.config.provider_id);
    }
    for m in &e.config.models {
        put_repeated_str(out, config_summary::MODELS, m);
    }
    for p in &e.providers {
        put_delimited_head(
            out,
            node_snapshot::PROVIDER_SNAPSHOTS,
            provider_len(p, view),
        );
        put_provider(out, p, view);
    }
    put_uint(
        out,
        node_snapshot::STATE,
        enum_value(e.ownership.state as i32),
    );
    put_uint(out, node_snapshot::GENERATION, e.ownership.generation.get());
    put_uint(
        out,
        node_snapshot::LAST_TRANSITION_UNIX_MS,
        e.ownership.last_transition_unix_ms,
    );
    for (k, v) in &e.config.labels {
        put_delimited_head(out, node_snapshot::LABELS, label_len(k, v));
        put_str(out, node_snapshot::LABEL_KEY, k);
        put_str(out, node_snapshot::LABEL_VALUE, v);
    }
}

/// Appends the encoded `EdgeStatusResponse` of an Edge with no nodes and registry
/// revision 0 (the `()` registry's snapshot).
pub(crate) fn encode_empty_snapshot(edge_id: &str, observed_at_unix_ms: u64, out: &mut Vec<u8>) {
    put_str(out, status_response::EDGE_ID, edge_id);
    put_uint(
        out,
        status_response::OBSERVED_AT_UNIX_MS,
        observed_at_unix_ms,
    );
}

impl NodeRegistry {
    /// Appends the encoded `EdgeStatusResponse` that
    /// [`snapshot`](Self::snapshot) would return for the same arguments to `out`,
    /// byte for byte, without building the message.
    pub fn encode_snapshot<S: AsRef<str>>(
        &self,
        edge_id: &str,
        observed_at_unix_ms: u64,
        node_ids: &[S],
        max_encoded_len: usize,
        out: &mut Vec<u8>,
    ) -> EncodedSnapshot {
        let start = out.len();
        if node_ids.is_empty() {
            self.encode_nodes(
                edge_id,
                observed_at_unix_ms,
                self.nodes.values(),
                max_encoded_len,
                out,
            )
        } else {
            let mut wanted: Vec<&str> = node_ids.iter().map(AsRef::as_ref).collect();
            wanted.sort_unstable();
            wanted.dedup();
            let entries = wanted.into_iter().filter_map(|id| self.nodes.get(id));
            self.encode_nodes(edge_id, observed_at_unix_ms, entries, max_encoded_len, out)
        }
        .with_len(out.len().saturating_sub(start))
    }

    /// [`encode_snapshot`](Self::encode_snapshot) of every node whose id sorts after
    /// `start_after` (byte order): the bytes of
    /// [`snapshot_after`](Self::snapshot_after).
    pub fn encode_snapshot_after(
        &self,
        edge_id: &str,
        observed_at_unix_ms: u64,
        start_after: &str,
        max_encoded_len: usize,
        out: &mut Vec<u8>,
    ) -> EncodedSnapshot {
        let start = out.len();
        let entries = self.nodes_after(start_after);
        self.encode_nodes(edge_id, observed_at_unix_ms, entries, max_encoded_len, out)
            .with_len(out.len().saturating_sub(start))
    }

    fn encode_nodes<'a>(
        &self,
        edge_id: &str,
        observed_at_unix_ms: u64,
        entries: impl Iterator<Item = &'a NodeEntry>,
        budget: usize,
        out: &mut Vec<u8>,
    ) -> EncodedSnapshot {
        let mut used = str_len(edge_id) + uint_len(observed_at_unix_ms) + uint_len(self.revision);
        let mut decoded = string_bytes(edge_id.len());
        put_str(out, status_response::EDGE_ID, edge_id);
        let mut nodes = 0;
        let mut truncated = false;
        // Where the last node written starts, and its share of `decoded`, to take it
        // back if the `truncated` flag does not fit after it.
        let mut last: Option<(usize, usize)> = None;
        for e in entries {
            // No status carries more nodes than the receiver decodes (PROTOCOL.md §4.3), nor
            // more than its decoded-size budget (PROTOCOL.md §7).
            if nodes == MAX_NODES {
                truncated = true;
                break;
            }
            let len = node_len(e);
            let field = delimited_len(len);
            let node = vec_growth(nodes, heap::NODE_SNAPSHOT) + e.heap;
            let after = used.saturating_add(field);
            if after > budget || !within_heap_budget(decoded + node, after) {
                truncated = true;
                break;
            }
            last = Some((out.len(), node));
            put_node(out, e, len);
            used = after;
            decoded += node;
            nodes += 1;
        }
        if truncated && used + 2 > budget {
            // One node is at least two bytes: taking back the last one is enough.
            if let Some((at, node)) = last {
                out.truncate(at);
                decoded -= node;
                nodes -= 1;
            }
        }
        put_uint(
            out,
            status_response::OBSERVED_AT_UNIX_MS,
            observed_at_unix_ms,
        );
        put_uint(out, status_response::REGISTRY_REVISION, self.revision);
        put_uint(out, status_response::TRUNCATED, u64::from(truncated));
        EncodedSnapshot {
            nodes,
            truncated,
            len: 0,
            heap: decoded,
        }
    }
}

impl EncodedSnapshot {
    fn with_len(mut self, len: usize) -> Self {
        self.len = len;
        self
    }
}

//! The status request and response: the frames that may carry thousands of nodes.

use std::mem::size_of;

use prost::encoding::WireType;

use super::envelope::{BODY_FIELDS, MapNames};
use super::wire::Class;
use super::{Decoder, Step};
use crate::{
    EdgeNodeSnapshot, EdgeStatusRequest, EdgeStatusResponse, NodeConfigSummary, ProviderSnapshot,
};

/// prost's recursion budget left for the fields of a node.
const NODE_FIELDS: u32 = BODY_FIELDS - 1;
/// prost's recursion budget left for the fields of a provider or config summary.
const LEAF_FIELDS: u32 = NODE_FIELDS - 1;

impl Decoder<'_> {
    pub(super) fn status_request(
        &mut self,
        wt: WireType,
        m: &mut EdgeStatusRequest,
        buf: &mut &[u8],
    ) -> Step {
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => repeated_string_field!(
                d,
                wt,
                buf,
                "EdgeStatusRequest",
                m.node_ids,
                Id,
                max_node_ids
            ),
            2 => string_field!(d, wt, buf, "EdgeStatusRequest", m.start_after_node_id, Id),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    pub(super) fn status_response(
        &mut self,
        wt: WireType,
        m: &mut EdgeStatusResponse,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "EdgeStatusResponse";
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "EdgeStatusResponse", m.edge_id, Id),
            2 => {
                let s = d.node(wt, &mut m.nodes, buf);
                d.at(s, M, "nodes")
            }
            3 => d.uint64(
                wt,
                &mut m.observed_at_unix_ms,
                buf,
                M,
                "observed_at_unix_ms",
            ),
            4 => d.uint64(wt, &mut m.registry_revision, buf, M, "registry_revision"),
            5 => d.boolean(wt, &mut m.truncated, buf, M, "truncated"),
            _ => d.skip(wt, tag, buf, BODY_FIELDS),
        })
    }

    /// One more node. It is pushed first and decoded in place (prost decodes it aside
    /// and then moves it in: the same allocations, one copy fewer).
    fn node(&mut self, wt: WireType, nodes: &mut Vec<EdgeNodeSnapshot>, buf: &mut &[u8]) -> Step {
        const M: &str = "EdgeNodeSnapshot";
        const LABELS: MapNames = map_names!("EdgeNodeSnapshot", "labels");
        if wt != WireType::LengthDelimited {
            return Err(self.wire_type_error(wt));
        }
        let limit = self.limits.max_nodes;
        self.admit(
            nodes.len(),
            limit,
            "iop.EdgeStatusResponse.nodes",
            size_of::<EdgeNodeSnapshot>(),
        )?;
        nodes.push(EdgeNodeSnapshot::default());
        let Some(m) = nodes.last_mut() else {
            return Ok(());
        };
        let mut labels = 0;
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "EdgeNodeSnapshot", m.node_id, Id),
            2 => d.boolean(wt, &mut m.connected, buf, M, "connected"),
            3 => {
                let config = m.config.get_or_insert_with(NodeConfigSummary::default);
                let s = d.config(wt, config, buf);
                d.at(s, M, "config")
            }
            4 => {
                let s = d.provider(wt, &mut m.provider_snapshots, buf);
                d.at(s, M, "provider_snapshots")
            }
            5 => d.int32(wt, &mut m.state, buf, M, "state"),
            6 => d.uint64(wt, &mut m.generation, buf, M, "generation"),
            7 => d.uint64(
                wt,
                &mut m.last_transition_unix_ms,
                buf,
                M,
                "last_transition_unix_ms",
            ),
            8 => {
                let s = d.map_entry(
                    wt,
                    &mut m.labels,
                    buf,
                    &mut labels,
                    &LABELS,
                    NODE_FIELDS - 1,
                );
                d.at(s, M, "labels")
            }
            _ => d.skip(wt, tag, buf, NODE_FIELDS),
        })
    }

    fn config(&mut self, wt: WireType, m: &mut NodeConfigSummary, buf: &mut &[u8]) -> Step {
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "NodeConfigSummary", m.revision, Text),
            2 => repeated_string_field!(
                d,
                wt,
                buf,
                "NodeConfigSummary",
                m.provider_ids,
                Id,
                max_provider_ids
            ),
            3 => {
                repeated_string_field!(d, wt, buf, "NodeConfigSummary", m.models, Text, max_models)
            }
            _ => d.skip(wt, tag, buf, LEAF_FIELDS),
        })
    }

    /// One more provider of a node, pushed first and decoded in place.
    fn provider(
        &mut self,
        wt: WireType,
        providers: &mut Vec<ProviderSnapshot>,
        buf: &mut &[u8],
    ) -> Step {
        const M: &str = "ProviderSnapshot";
        if wt != WireType::LengthDelimited {
            return Err(self.wire_type_error(wt));
        }
        let limit = self.limits.max_providers_per_node;
        self.admit(
            providers.len(),
            limit,
            "iop.EdgeNodeSnapshot.provider_snapshots",
            size_of::<ProviderSnapshot>(),
        )?;
        providers.push(ProviderSnapshot::default());
        let Some(m) = providers.last_mut() else {
            return Ok(());
        };
        self.message(wt, buf, |d, tag, wt, buf| match tag {
            1 => string_field!(d, wt, buf, "ProviderSnapshot", m.provider_id, Id),
            2 => d.int32(wt, &mut m.category, buf, M, "category"),
            3 => d.int32(wt, &mut m.status, buf, M, "status"),
            4 => d.int32(wt, &mut m.health, buf, M, "health"),
            5 => d.uint32(wt, &mut m.capacity, buf, M, "capacity"),
            6 => d.uint32(wt, &mut m.in_flight, buf, M, "in_flight"),
            7 => d.uint32(wt, &mut m.queued, buf, M, "queued"),
            8 => d.uint32(
                wt,
                &mut m.long_context_capacity,
                buf,
                M,
                "long_context_capacity",
            ),
            9 => d.uint32(
                wt,
                &mut m.long_context_in_flight,
                buf,
                M,
                "long_context_in_flight",
            ),
            10 => d.uint32(
                wt,
                &mut m.long_context_queued,
                buf,
                M,
                "long_context_queued",
            ),
            11 => {
                repeated_string_field!(d, wt, buf, "ProviderSnapshot", m.models, Text, max_models)
            }
            12 => d.boolean(wt, &mut m.admission_eligible, buf, M, "admission_eligible"),
            _ => d.skip(wt, tag, buf, LEAF_FIELDS),
        })
    }
}

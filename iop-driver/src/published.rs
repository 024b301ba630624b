//! The two event types the drivers publish, as a [`Publisher`](crate::notice) filters
//! and accounts for them.

use std::mem::size_of;

use iop_core::cp::CpEvent;
use iop_core::edge::EdgeEvent;
use iop_core::proto::{EdgeNodeSnapshot, EdgeStatusResponse, Message, ProviderSnapshot};

use crate::notice::Published;

/// The heap of a decoded status response, roughly: its nodes and providers inline,
/// and every string (about its encoded length).
fn status_cost(response: &EdgeStatusResponse) -> usize {
    let providers: usize = response
        .nodes
        .iter()
        .map(|n| n.provider_snapshots.len())
        .sum();
    response.nodes.len() * size_of::<EdgeNodeSnapshot>()
        + providers * size_of::<ProviderSnapshot>()
        + response.encoded_len()
}

fn map_cost(map: &std::collections::BTreeMap<String, String>) -> usize {
    map.iter().map(|(k, v)| 48 + k.len() + v.len()).sum()
}

impl Published for CpEvent {
    fn kind_bit(&self) -> u64 {
        1 << (self.kind() as u32)
    }

    fn cost(&self) -> usize {
        let heap = match self {
            CpEvent::StatusReceived { response, .. } => status_cost(response),
            CpEvent::CommandEvent { event, .. } => {
                event.command_id.len() + event.message.len() + map_cost(&event.detail)
            }
            CpEvent::NodeEvent { event, .. } => {
                event.edge_id.len() + event.node_id.len() + event.reason.len()
            }
            CpEvent::CommandResponded { response, .. } => {
                response.command_id.len() + response.message.len()
            }
            CpEvent::EdgeForgotten {
                unfinished_commands,
                ..
            } => unfinished_commands.iter().map(|c| 24 + c.len()).sum(),
            _ => 0,
        };
        size_of::<CpEvent>() + self.edge_id().map_or(0, str::len) + heap
    }
}

impl Published for EdgeEvent {
    fn kind_bit(&self) -> u64 {
        1
    }

    fn cost(&self) -> usize {
        let heap = match self {
            EdgeEvent::CommandReceived {
                command_id,
                operation,
                metadata,
                ..
            } => command_id.len() + operation.len() + map_cost(metadata),
            EdgeEvent::HelloRejected { message, .. } | EdgeEvent::Superseded { message, .. } => {
                message.len()
            }
            _ => 0,
        };
        size_of::<EdgeEvent>() + heap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iop_core::cp::{CpEventKind, RequestId};

    #[test]
    fn every_kind_has_its_own_bit_and_a_status_costs_its_size() {
        let bits: std::collections::BTreeSet<u32> =
            CpEventKind::ALL.iter().map(|k| *k as u32).collect();
        assert_eq!(bits.len(), CpEventKind::ALL.len());
        assert!(CpEventKind::ALL.iter().all(|k| (*k as u32) < 64));
        let big = EdgeStatusResponse {
            edge_id: "e".into(),
            nodes: vec![EdgeNodeSnapshot::default(); 1_000],
            ..Default::default()
        };
        let event = CpEvent::StatusReceived {
            request: RequestId {
                session_id: 1,
                correlation_id: 1,
            },
            response: big,
        };
        assert!(event.cost() > 1_000 * size_of::<EdgeNodeSnapshot>());
        assert_eq!(event.kind_bit(), 1 << (CpEventKind::StatusReceived as u32));
    }
}

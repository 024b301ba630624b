//! What the fleet crate's tests share: providers and views built from a full status,
//! and the events a Control Plane emits for them.
#![allow(dead_code)]

mod publisher;

#[allow(unused_imports)]
pub(crate) use publisher::{Publisher, deliver};

use std::sync::Arc;
use std::time::Duration;

use iop_core::cp::load::{EdgeLoad, LoadChange};
use iop_core::cp::{ConnectionId, CpEvent};
use iop_core::proto::{
    EdgeNodeSnapshot, EdgeStatusResponse, NodeState, ProviderHealth, ProviderSnapshot,
    ProviderStatus,
};

/// One provider: id, models, (capacity, in_flight, queued), long-context (capacity,
/// in_flight, queued), online, eligible.
#[derive(Debug, Clone)]
pub(crate) struct P {
    pub(crate) id: String,
    pub(crate) models: Vec<String>,
    pub(crate) numbers: [u32; 6],
    pub(crate) online: bool,
    pub(crate) eligible: bool,
}

pub(crate) fn p(id: &str, model: &str, capacity: u32, in_flight: u32, queued: u32) -> P {
    P {
        id: id.into(),
        models: vec![model.into()],
        numbers: [capacity, in_flight, queued, 0, 0, 0],
        online: true,
        eligible: in_flight < capacity,
    }
}

pub(crate) fn snapshot(x: &P) -> ProviderSnapshot {
    let n = if x.online { x.numbers } else { [0; 6] };
    ProviderSnapshot {
        provider_id: x.id.clone(),
        status: if x.online {
            ProviderStatus::Available
        } else {
            ProviderStatus::Unavailable
        } as i32,
        health: if x.online {
            ProviderHealth::Healthy
        } else {
            ProviderHealth::Offline
        } as i32,
        capacity: n[0],
        in_flight: n[1],
        queued: n[2],
        long_context_capacity: n[3],
        long_context_in_flight: n[4],
        long_context_queued: n[5],
        models: x.models.clone(),
        admission_eligible: x.online && x.eligible,
        ..Default::default()
    }
}

/// A view of `edge`: nodes `n0`, `n1`… each with its label `zone` and providers.
pub(crate) fn view(edge: &str, nodes: &[(&str, Vec<P>)]) -> Arc<EdgeLoad> {
    let status = EdgeStatusResponse {
        edge_id: edge.into(),
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, (zone, providers))| EdgeNodeSnapshot {
                node_id: format!("n{i}"),
                connected: true,
                state: NodeState::Ready as i32,
                labels: [("zone".to_owned(), (*zone).to_owned())].into(),
                provider_snapshots: providers.iter().map(snapshot).collect(),
                ..Default::default()
            })
            .collect(),
        registry_revision: 1,
        ..Default::default()
    };
    Arc::new(EdgeLoad::from_status(&status, 1))
}

pub(crate) fn accepted(edge: &str, pushes: bool) -> CpEvent {
    CpEvent::SessionAccepted {
        conn: ConnectionId(1),
        edge_id: edge.into(),
        session_id: 1,
        superseded_session_id: None,
        load_update_interval: pushes.then_some(Duration::from_millis(250)),
    }
}

pub(crate) fn load_view(edge: &str, at: u64, change: LoadChange) -> CpEvent {
    CpEvent::LoadView {
        edge_id: edge.into(),
        session_id: 1,
        at_unix_ms: at,
        change,
    }
}

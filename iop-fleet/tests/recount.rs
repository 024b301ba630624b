//! A load update recounts only the providers it changed: the fleet's totals after any
//! sequence of updates are those of counting every new view whole.

mod common;

use std::sync::Arc;

use common::{accepted, load_view, p};
use iop_core::cp::load::{EdgeLoad, LoadChange};
use iop_core::proto::{ProviderHealth, ProviderLoad, ProviderStatus};
use iop_fleet::{Fleet, FleetConfig};
use proptest::prelude::*;

/// An update of provider `provider` of node `node`: `in_flight`, online or not, its
/// node connected or not.
#[derive(Debug, Clone)]
struct Update {
    edge: usize,
    node: usize,
    provider: usize,
    in_flight: u32,
    online: bool,
    connected: bool,
}

fn update() -> impl Strategy<Value = Update> {
    (
        0..2usize,
        0..2usize,
        0..2usize,
        0..6u32,
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.9),
    )
        .prop_map(
            |(edge, node, provider, in_flight, online, connected)| Update {
                edge,
                node,
                provider,
                in_flight,
                online,
                connected,
            },
        )
}

fn edge(id: &str) -> Arc<EdgeLoad> {
    common::view(
        id,
        &[
            ("eu", vec![p("a", "m1", 4, 0, 0), p("b", "m2", 8, 1, 0)]),
            ("us", vec![p("a", "m1", 4, 2, 1), p("b", "m1", 2, 0, 0)]),
        ],
    )
}

proptest! {
    #[test]
    fn updates_recount_as_whole_views_would(updates in prop::collection::vec(update(), 1..60)) {
        let mut by_update = Fleet::new(FleetConfig::default()).unwrap();
        let mut whole = Fleet::new(FleetConfig::default()).unwrap();
        let mut views = [edge("e0"), edge("e1")];
        for (i, view) in views.iter().enumerate() {
            for fleet in [&mut by_update, &mut whole] {
                fleet.handle_event(&accepted(&format!("e{i}"), true));
                fleet.handle_event(&load_view(&format!("e{i}"), 1, LoadChange::Replaced(view.clone())));
            }
        }
        for (t, u) in updates.iter().enumerate() {
            let mut next = (*views[u.edge]).clone();
            let load = ProviderLoad {
                node_id: format!("n{}", u.node),
                provider_id: ["a", "b"][u.provider].into(),
                status: if u.online { ProviderStatus::Available } else { ProviderStatus::Unavailable } as i32,
                health: if u.online { ProviderHealth::Healthy } else { ProviderHealth::Offline } as i32,
                capacity: if u.online { 4 } else { 0 },
                in_flight: if u.online { u.in_flight.min(4) } else { 0 },
                admission_eligible: u.online,
                node_connected: u.connected,
                ..Default::default()
            };
            let changed = next.apply(&[load]).changed;
            let next = Arc::new(next);
            views[u.edge] = next.clone();
            let id = format!("e{}", u.edge);
            let at = 10 + t as u64;
            by_update.handle_event(&load_view(&id, at, LoadChange::Updated { view: next.clone(), changed }));
            whole.handle_event(&load_view(&id, at, LoadChange::Replaced(next)));
            prop_assert_eq!(by_update.load(), whole.load());
        }
    }
}

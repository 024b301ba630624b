//! A load update applied to an Edge's view (PROTOCOL.md §4.8): the numbers of the
//! providers it names replace theirs, in place; the view's structure (nodes,
//! providers, models, labels) is the latest full status's.

use iop_proto::{NodeState, ProviderHealth, ProviderLoad as WireLoad, ProviderStatus};

use super::edge::EdgeLoad;

/// What applying an update to a view came to ([`EdgeLoad::apply`]).
#[derive(Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// Indexes (into [`EdgeLoad::providers`]) whose numbers changed.
    pub changed: Vec<u32>,
    /// Providers the view does not hold.
    pub unknown: usize,
}

impl EdgeLoad {
    /// Where provider `provider_id` of node `node_id` stands among
    /// [`providers`](Self::providers).
    pub fn provider_index(&self, node_id: &str, provider_id: &str) -> Option<usize> {
        let node = self.node(node_id)?;
        let range = node.provider_indexes();
        let at = node
            .providers()
            .position(|p| p.provider_id() == provider_id)?;
        Some(range.start + at)
    }

    /// Replaces the numbers of each provider `loads` names that this view holds; a
    /// node reported not connected is DISCONNECTED here (unless it was never READY),
    /// one reported connected READY. What the Control Plane does with a load update
    /// (PROTOCOL.md §4.8); public for a copy of the view kept elsewhere (another
    /// replica's, a benchmark's).
    pub fn apply(&mut self, loads: &[WireLoad]) -> Applied {
        let mut applied = Applied::default();
        for load in loads {
            let Some(index) = self.provider_index(&load.node_id, &load.provider_id) else {
                applied.unknown += 1;
                continue;
            };
            let changed = self.set_numbers(index, load) | self.set_node(&load.node_id, load);
            if changed {
                applied
                    .changed
                    .push(u32::try_from(index).unwrap_or(u32::MAX));
            }
        }
        applied
    }

    fn set_numbers(&mut self, index: usize, load: &WireLoad) -> bool {
        let Some(rec) = self.providers.get_mut(index) else {
            return false;
        };
        let offline = load.health == ProviderHealth::Offline as i32
            || load.status == ProviderStatus::Unavailable as i32;
        let before = *rec;
        rec.numbers = [
            load.capacity,
            load.in_flight,
            load.queued,
            load.long_context_capacity,
            load.long_context_in_flight,
            load.long_context_queued,
        ];
        rec.offline = offline;
        rec.eligible = load.admission_eligible && !offline;
        rec.status = small(load.status);
        rec.health = small(load.health);
        *rec != before
    }

    fn set_node(&mut self, node_id: &str, load: &WireLoad) -> bool {
        let Ok(at) = self
            .nodes
            .binary_search_by(|n| self.name(n.id).cmp(node_id))
        else {
            return false;
        };
        let Some(node) = self.nodes.get_mut(at) else {
            return false;
        };
        let ready = NodeState::Ready as i32;
        let state = match (load.node_connected, node.state) {
            (true, s) if s != ready => ready,
            (false, s) if s == ready => NodeState::Disconnected as i32,
            (_, s) => s,
        };
        let changed = state != node.state;
        node.state = state;
        changed
    }
}

/// An enum's wire value in a byte, as the view keeps it.
fn small(v: i32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iop_proto::{EdgeNodeSnapshot, EdgeStatusResponse, ProviderSnapshot};

    fn view() -> EdgeLoad {
        let provider = |id: &str, capacity| ProviderSnapshot {
            provider_id: id.into(),
            status: ProviderStatus::Available as i32,
            health: ProviderHealth::Healthy as i32,
            capacity,
            models: vec!["m".into()],
            admission_eligible: true,
            ..Default::default()
        };
        let node = |id: &str, providers| EdgeNodeSnapshot {
            node_id: id.into(),
            connected: true,
            state: NodeState::Ready as i32,
            provider_snapshots: providers,
            ..Default::default()
        };
        EdgeLoad::from_status(
            &EdgeStatusResponse {
                edge_id: "e".into(),
                nodes: vec![
                    node("a", vec![provider("p", 4), provider("q", 2)]),
                    node("b", vec![provider("p", 8)]),
                ],
                ..Default::default()
            },
            1,
        )
    }

    #[test]
    fn an_update_replaces_the_numbers_of_the_providers_it_names() {
        let mut v = view();
        let busy = WireLoad {
            node_id: "a".into(),
            provider_id: "q".into(),
            status: ProviderStatus::Available as i32,
            health: ProviderHealth::Healthy as i32,
            capacity: 2,
            in_flight: 2,
            queued: 3,
            admission_eligible: false,
            node_connected: true,
            ..Default::default()
        };
        let gone = WireLoad {
            node_id: "b".into(),
            provider_id: "p".into(),
            status: ProviderStatus::Unavailable as i32,
            health: ProviderHealth::Offline as i32,
            ..Default::default()
        };
        let stranger = WireLoad {
            node_id: "c".into(),
            provider_id: "p".into(),
            ..Default::default()
        };
        let applied = v.apply(&[busy.clone(), gone, stranger]);
        assert_eq!(applied.changed, vec![1, 2]);
        assert_eq!(applied.unknown, 1);
        let q = v.providers().nth(1).unwrap();
        assert_eq!(
            (q.in_flight(), q.queued(), q.admission_eligible()),
            (2, 3, false)
        );
        let b = v.node("b").unwrap();
        assert_eq!(b.state(), NodeState::Disconnected);
        assert!(b.providers().next().unwrap().is_offline());
        // The same numbers again change nothing.
        assert_eq!(v.apply(&[busy]).changed, Vec::<u32>::new());
        assert_eq!(v.provider_index("a", "q"), Some(1));
        assert_eq!(v.provider_index("a", "z"), None);
    }

    #[test]
    fn an_update_keeps_the_structure_unless_a_node_changes_state() {
        let before = view();
        let mut after = before.clone();
        let busy = WireLoad {
            node_id: "a".into(),
            provider_id: "p".into(),
            status: ProviderStatus::Available as i32,
            health: ProviderHealth::Healthy as i32,
            capacity: 4,
            in_flight: 3,
            admission_eligible: true,
            node_connected: true,
            ..Default::default()
        };
        assert_eq!(after.apply(std::slice::from_ref(&busy)).changed, vec![0]);
        assert!(before.same_structure(&after));
        // The same content built anew shares nothing: told apart.
        assert!(!view().same_structure(&before));
        let gone = WireLoad {
            node_connected: false,
            ..busy
        };
        after.apply(&[gone]);
        assert!(!before.same_structure(&after));
    }
}

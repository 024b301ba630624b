//! What a load update says of one provider (PROTOCOL.md §4.8): the numbers of §5.2 and
//! whether its node is connected, read from the registry by the same rules as a
//! snapshot (an offline provider reports zeros and is not eligible; a node that is not
//! READY reports `node_connected = false` and zeros).

use iop_proto::{ProviderHealth, ProviderLoad, ProviderStatus};

use super::NodeRegistry;

/// The numbers of one provider as a load update carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadNumbers {
    /// Availability.
    pub status: ProviderStatus,
    /// Health.
    pub health: ProviderHealth,
    /// `capacity, in_flight, queued, long_context_capacity, long_context_in_flight,
    /// long_context_queued`.
    pub numbers: [u32; 6],
    /// Admission-eligible (§5.2).
    pub admission_eligible: bool,
    /// Its node's `connected` (§5.1).
    pub node_connected: bool,
}

impl LoadNumbers {
    /// Numbers of a provider: `status`, `health`, the six numbers, eligibility and its
    /// node's `connected`.
    pub fn new(
        status: ProviderStatus,
        health: ProviderHealth,
        numbers: [u32; 6],
        admission_eligible: bool,
        node_connected: bool,
    ) -> Self {
        Self {
            status,
            health,
            numbers,
            admission_eligible,
            node_connected,
        }
    }

    /// The wire message for provider `provider_id` of node `node_id`.
    pub fn to_wire(self, node_id: &str, provider_id: &str) -> ProviderLoad {
        let [capacity, in_flight, queued, lc, lf, lq] = self.numbers;
        ProviderLoad {
            node_id: node_id.to_owned(),
            provider_id: provider_id.to_owned(),
            status: self.status as i32,
            health: self.health as i32,
            capacity,
            in_flight,
            queued,
            long_context_capacity: lc,
            long_context_in_flight: lf,
            long_context_queued: lq,
            admission_eligible: self.admission_eligible,
            node_connected: self.node_connected,
        }
    }
}

impl NodeRegistry {
    /// Calls `visit` with every provider's numbers, node by node in id order, as a
    /// snapshot would report them.
    pub fn visit_loads(&self, visit: &mut dyn FnMut(&str, &str, LoadNumbers)) {
        for (node_id, entry) in &self.nodes {
            let view = entry.view();
            for p in &entry.providers {
                let n = p.numbers(view);
                let numbers = LoadNumbers {
                    status: n.status,
                    health: n.health,
                    numbers: [
                        n.capacity,
                        n.in_flight,
                        n.queued,
                        n.long_context_capacity,
                        n.long_context_in_flight,
                        n.long_context_queued,
                    ],
                    admission_eligible: n.admission_eligible,
                    node_connected: view.ready,
                };
                visit(node_id, &p.config.provider_id, numbers);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{NodeConfig, ProviderCategory, ProviderConfig};

    #[test]
    fn loads_follow_the_snapshot_rules() {
        let mut reg = NodeRegistry::new();
        let node = NodeConfig::new("n").with_provider(ProviderConfig::new(
            "p",
            ProviderCategory::LocalInference,
            2,
            1,
        ));
        reg.configure(node, 1).unwrap();
        let mut seen = Vec::new();
        reg.visit_loads(&mut |n, p, l| seen.push((n.to_owned(), p.to_owned(), l)));
        // Configured, never connected: zeros, offline, not connected.
        assert_eq!(seen.len(), 1);
        let l = seen[0].2;
        assert_eq!(l.numbers, [0; 6]);
        assert!(!l.node_connected && !l.admission_eligible);
        assert_eq!(l.health, ProviderHealth::Offline);
        let g = reg.connect("n", 2).unwrap();
        assert_eq!(
            reg.mark_ready("n", g, 3),
            crate::registry::ReadyOutcome::Ready
        );
        seen.clear();
        reg.visit_loads(&mut |n, p, l| seen.push((n.to_owned(), p.to_owned(), l)));
        let l = seen[0].2;
        assert_eq!(l.numbers, [2, 0, 0, 1, 0, 0]);
        assert!(l.node_connected && l.admission_eligible);
        let wire = l.to_wire("n", "p");
        assert_eq!((wire.capacity, wire.long_context_capacity), (2, 1));
        assert!(wire.node_connected);
    }
}
